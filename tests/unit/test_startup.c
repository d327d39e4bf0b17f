/* SPDX-License-Identifier: Apache-2.0 */
/* NeMo Gym's launch stamps and the stages made of them (startup.h), with the
 * expectations written from Gym's rules: a stamp is an integer of wall-clock
 * nanoseconds, ignored when missing, not a number or not above 0; with
 * spawn <= setup_done <= entered both stages, with spawn alone (<= entered)
 * interpreter_start, otherwise neither. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "startup.h"

struct stamp_case {
	const char *text;
	int64_t want;
};

Test(startup, stamps)
{
	static const struct stamp_case cases[] = {
		{ NULL, 0 },                             /* missing */
		{ "", 0 },
		{ "   ", 0 },
		{ "abc", 0 },                            /* not a number */
		{ "12x", 0 },
		{ "1.5", 0 },
		{ "1e9", 0 },
		{ "0x10", 0 },
		{ "0", 0 },                              /* not above 0 */
		{ "-5", 0 },
		{ "-0", 0 },
		{ "1", 1 },
		{ "1765140000000000000", 1765140000000000000 },
		{ " 42\n", 42 },                         /* int() strips blanks */
		{ "+42", 42 },
		{ "1_000", 1000 },                       /* and allows single underscores between digits */
		{ "1__000", 0 },
		{ "_1", 0 },
		{ "1_", 0 },
		{ "9223372036854775807", INT64_MAX },
		{ "9223372036854775808", 0 },            /* past int64: not a stamp */
		{ "99999999999999999999999", 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		cr_expect_eq(nl_startup_stamp(cases[i].text), cases[i].want, "stamp \"%s\"",
			     cases[i].text ? cases[i].text : "(missing)");
}

struct stage_case {
	int64_t spawn, setup_done, entered;
	int64_t venv, interpreter;                       /* -1: no sample */
};

Test(startup, stages)
{
	static const struct stage_case cases[] = {
		{ 100, 300, 1000, 200, 700 },            /* spawn <= setup_done <= entered */
		{ 100, 100, 100, 0, 0 },                 /* equal stamps count */
		{ 100, 0, 1000, -1, 900 },               /* spawn alone */
		{ 1000, 0, 1000, -1, 0 },
		{ 1001, 0, 1000, -1, -1 },               /* spawn after entered */
		{ 0, 300, 1000, -1, -1 },                /* setup_done alone */
		{ 0, 0, 1000, -1, -1 },                  /* no stamps */
		{ 300, 100, 1000, -1, -1 },              /* setup_done before spawn */
		{ 100, 1001, 1000, -1, -1 },             /* setup_done after entered */
		{ 2000, 3000, 1000, -1, -1 },            /* both after entered */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct stage_case *c = &cases[i];
		struct nl_startup_stages s = nl_startup_stages_of(c->spawn, c->setup_done, c->entered);
		cr_expect_eq(s.venv_setup_ns, c->venv, "case %zu: venv_setup", i);
		cr_expect_eq(s.interpreter_start_ns, c->interpreter, "case %zu: interpreter_start", i);
	}
}
