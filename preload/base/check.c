/* SPDX-License-Identifier: Apache-2.0 */
#include "check.h"

#ifndef NDEBUG
#include <stdio.h>
#include <stdlib.h>

#include "real.h"

__thread int nl_hook_depth;

void nl_assert_fail(const char *expr, const char *file, int line)
{
	char msg[256];
	int n = snprintf(msg, sizeof msg, "nemolens: assertion failed: %s (%s:%d)\n", expr, file, line);
	if (n > 0)
		nl_real_write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
	abort();
}
#else
/* Keeps the translation unit non-empty in release builds (ISO C). */
typedef int nl_check_release_build;
#endif
