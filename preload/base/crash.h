/* SPDX-License-Identifier: Apache-2.0 */
/* Crash reports: a fault whose instruction is in the shim leaves one report
 * in the shim's log (log.h), then the process dies of it as it would have.
 *
 * The shim's handler is installed at load for SIGSEGV, SIGBUS, SIGILL and
 * SIGFPE, each only where the disposition is still SIG_DFL: a handler that
 * was there first (a sanitizer's runtime, a program's own from an earlier
 * constructor) is left alone, and one installed later replaces the shim's.
 * For every fault that is not the shim's own, the handler puts SIG_DFL back
 * and lets the fault happen again, so the process dies of the same signal,
 * with the same core dump, as without the shim. A program that looks at
 * the disposition sees SIG_DFL (hooks/signal.c).
 */
#ifndef NL_CRASH_H
#define NL_CRASH_H

#include <stdbool.h>

/* From the constructor, before any thread of the shim runs. Four
 * sigaction calls, no allocation, no page of the shim's own touched. */
void nl_crash_install(void);

/* True when the handler (sa_handler or sa_sigaction, as a plain pointer) is
 * the shim's crash handler: what a program asking for the disposition must
 * see as SIG_DFL. */
bool nl_crash_is_ours(const void *handler);

#ifdef NL_CRASH_TEST
/* The shim's test build only (tests/crashtest/fault.c): faults as
 * NEMOLENS_TEST_FAULT says, from the constructor. */
void nl_crash_test_fault(void);
#endif

#endif
