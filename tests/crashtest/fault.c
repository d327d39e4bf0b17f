/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled only into the shim's test build (libnemolens_preload_crashtest.so,
 * CMakeLists.txt), never into the product: a fault inside the shim on
 * demand, for the tests of the crash report (crash.h). The test build's
 * constructor calls nl_crash_test_fault once the handler is installed.
 *
 * NEMOLENS_TEST_FAULT=segv, fpe or ill: a read of an unmapped address, an
 * integer division by zero, an undefined instruction; unset or anything
 * else: nothing. */
#include <stdlib.h>
#include <string.h>

#include "crash.h"

/* Read through volatile pointers: the compiler can neither see the values
 * nor drop the faulting instruction. */
static volatile int zero, hundred = 100;
static int *volatile unmapped = (int *)16;

/* An undefined instruction, in line: __builtin_trap would be moved to the
 * function's cold part (and is a breakpoint, SIGTRAP, on aarch64). */
static inline void undefined_instruction(void)
{
#if defined(__x86_64__)
	__asm__ volatile("ud2");
#elif defined(__aarch64__)
	__asm__ volatile("udf #0");
#endif
}

__attribute__((noinline, visibility("hidden"))) int nl_crash_test_fault_now(const char *how)
{
	if (strcmp(how, "segv") == 0)
		return *unmapped;
	if (strcmp(how, "fpe") == 0)
		return hundred / zero;
	if (strcmp(how, "ill") == 0)
		undefined_instruction();
	return 0;
}

void nl_crash_test_fault(void)
{
	const char *how = getenv("NEMOLENS_TEST_FAULT");
	if (how)
		zero = nl_crash_test_fault_now(how);
}
