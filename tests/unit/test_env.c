/* SPDX-License-Identifier: Apache-2.0 */
/* nl_env_get: what getenv would answer, while the window is open and after
 * it closes. The environment is set with setenv, and getenv is the truth. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

extern char **environ;

static struct nl_env_window w;

static void teardown(void) { nl_env_close(); }

TestSuite(env, .fini = teardown);

Test(env, answers_as_getenv_for_kept_and_other_names)
{
	setenv("NEMOLENS_TEST_A", "one", 1);
	setenv("OTEL_TEST_B", "", 1);
	setenv("XDG_TEST_C", "three=3", 1);
	setenv("UNRELATED_TEST_D", "four", 1);
	unsetenv("NEMOLENS_TEST_UNSET");
	nl_env_open(&w);
	static const char *const names[] = { "NEMOLENS_TEST_A", "OTEL_TEST_B", "XDG_TEST_C", "UNRELATED_TEST_D",
					     "NEMOLENS_TEST_UNSET", "NEMOLENS_TEST", "NEMOLENS_TEST_AB", "N", "" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		const char *want = getenv(names[i]), *got = nl_env_get(names[i]);
		cr_expect((want == NULL) == (got == NULL), "%s: getenv %s, nl_env_get %s", names[i],
			  want ? want : "unset", got ? got : "unset");
		if (want && got)
			cr_expect_str_eq(got, want, "%s", names[i]);
	}
}

Test(env, first_of_duplicates_wins)
{
	static char a[] = "NEMOLENS_TEST_DUP=first", b[] = "NEMOLENS_TEST_DUP=second";
	char *fake[] = { a, b, NULL };
	char **saved = environ;
	environ = fake;
	nl_env_open(&w);
	const char *v = nl_env_get("NEMOLENS_TEST_DUP");
	nl_env_close();
	environ = saved;
	cr_assert(v);
	cr_expect_str_eq(v, "first");
}

Test(env, closed_window_sees_later_changes)
{
	unsetenv("NEMOLENS_TEST_LATER");
	nl_env_open(&w);
	cr_expect_null(nl_env_get("NEMOLENS_TEST_LATER"));
	nl_env_close();
	setenv("NEMOLENS_TEST_LATER", "now", 1);
	const char *v = nl_env_get("NEMOLENS_TEST_LATER");
	cr_assert(v);
	cr_expect_str_eq(v, "now");
}

/* More candidates than the table holds: every one is still found. */
Test(env, many_candidates)
{
	char name[64];
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof name, "OTEL_TEST_MANY_%d", i);
		setenv(name, name + 5, 1);
	}
	nl_env_open(&w);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof name, "OTEL_TEST_MANY_%d", i);
		const char *v = nl_env_get(name);
		cr_assert(v, "%s", name);
		cr_expect_str_eq(v, name + 5);
	}
}

/* After the window closes every name is looked up by a walk of the
 * environment as getenv's: the same answers, odd entries included. */
Test(env, closed_window_answers_as_getenv)
{
	static char a[] = "NEMOLENS_TEST_W=first", b[] = "NEMOLENS_TEST_W=second", c[] = "=empty-name",
		    d[] = "NO_EQUALS_SIGN", e[] = "UNRELATED_TEST_W=", f[] = "NEMOLENS_TEST_WX=x";
	char *fake[] = { a, b, c, d, e, f, NULL };
	char **saved = environ;
	environ = fake;
	static const char *const names[] = { "NEMOLENS_TEST_W", "UNRELATED_TEST_W", "NO_EQUALS_SIGN", "NO_EQUALS",
					     "NEMOLENS_TEST_WX", "NEMOLENS_TEST", "", "N" };
	const char *want[sizeof names / sizeof *names], *got[sizeof names / sizeof *names];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		want[i] = getenv(names[i]);
		got[i] = nl_env_get(names[i]);
	}
	environ = saved;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		cr_expect(want[i] == got[i], "%s: getenv %s, nl_env_get %s", names[i], want[i] ? want[i] : "unset",
			  got[i] ? got[i] : "unset");
}

/* Kept names that differ only in their last byte, and names of 300 bytes:
 * each found as getenv finds it. */
Test(env, same_lengths_and_long_names)
{
	char long_a[300], long_b[300];
	memset(long_a, 'A', sizeof long_a - 1);
	long_a[sizeof long_a - 1] = 0;
	memcpy(long_a, "NEMOLENS_", 9);
	memcpy(long_b, long_a, sizeof long_b);
	long_b[298] = 'B';
	setenv(long_a, "long a", 1);
	setenv(long_b, "long b", 1);
	setenv("OTEL_TEST_LEN_XA", "xa", 1);
	setenv("OTEL_TEST_LEN_XB", "xb", 1);
	nl_env_open(&w);
	const char *names[] = { long_a, long_b, "OTEL_TEST_LEN_XA", "OTEL_TEST_LEN_XB", "OTEL_TEST_LEN_XC",
				"OTEL_TEST_LEN_X" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		const char *want = getenv(names[i]), *got = nl_env_get(names[i]);
		cr_expect((want == NULL) == (got == NULL), "name %zu: getenv %s, nl_env_get %s", i,
			  want ? want : "unset", got ? got : "unset");
		if (want && got)
			cr_expect_str_eq(got, want, "name %zu", i);
	}
	nl_env_close();
	unsetenv(long_a);
	unsetenv(long_b);
}
