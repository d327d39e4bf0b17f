/* SPDX-License-Identifier: Apache-2.0 */
/* Which CPython command lines ignore PYTHONPATH or site (python.h): those
 * get no adapter, since its start-up hook would never run to put the
 * program's PYTHONPATH back. */
#include <criterion/criterion.h>
#include <string.h>

#include "python.h"

/* A command line as /proc/self/cmdline has it: arguments separated by NUL. */
static bool isolated(const char *spaced)
{
	char buf[256];
	size_t n = strlen(spaced);
	cr_assert(n < sizeof buf);
	memcpy(buf, spaced, n + 1);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == ' ')
			buf[i] = '\0';
	return nl_python_argv_isolated(buf, n + 1);
}

Test(python, options_that_skip_the_adapter)
{
	cr_assert(isolated("python3 -I script.py"));
	cr_assert(isolated("python3 -E -c pass"));
	cr_assert(isolated("python3 -S"));
	cr_assert(isolated("python3 -sEb x.py"));
	cr_assert(isolated("python3 -X dev -I x.py"));
	cr_assert(isolated("python3 -W ignore -S x.py"));
	cr_assert(isolated("python3 -Wignore -bI x.py"));
	cr_assert(isolated("python3 --check-hash-based-pycs always -E x.py"));
	cr_assert(isolated("/usr/bin/python3 -u -I -m http.server"));
}

Test(python, options_that_keep_it)
{
	cr_assert_not(isolated("python3"));
	cr_assert_not(isolated("python3 script.py -I"));
	cr_assert_not(isolated("python3 -c import sys -E"));
	cr_assert_not(isolated("python3 -cpass -I"));
	cr_assert_not(isolated("python3 -m mod -S"));
	cr_assert_not(isolated("python3 -mE"));
	cr_assert_not(isolated("python3 -X I x.py"));       /* -X's argument, not an option */
	cr_assert_not(isolated("python3 -W E x.py"));
	cr_assert_not(isolated("python3 -XI x.py"));
	cr_assert_not(isolated("python3 -- -I"));
	cr_assert_not(isolated("python3 - -I"));
	cr_assert_not(isolated("python3 --version -x"));
	cr_assert_not(isolated("python3 -u -B -O x.py"));
	cr_assert_not(isolated("/usr/local/bin/uvicorn app:app --port 8000"));
}

Test(python, truncated_or_empty_command_lines)
{
	cr_assert_not(nl_python_argv_isolated("", 0));
	cr_assert_not(nl_python_argv_isolated("python3", 7));   /* no NUL at all */
	const char cut[] = { 'p', 'y', '\0', '-', 'X' };       /* cut inside an option */
	cr_assert_not(nl_python_argv_isolated(cut, sizeof cut));
	const char cut2[] = { 'p', 'y', '\0', '-', 'W', '\0' };
	cr_assert_not(nl_python_argv_isolated(cut2, sizeof cut2));
}
