/* SPDX-License-Identifier: Apache-2.0 */
/* sigaction() and signal(): a program that asks what handles SIGSEGV,
 * SIGBUS, SIGILL or SIGFPE is told SIG_DFL where the shim's crash handler
 * is installed (crash.h), as it would be without the shim.
 *
 * Programs act on what they find there. A JVM, Go's runtime under cgo or
 * a program's own handler that finds a handler chains to it for faults it
 * does not claim, and would then skip its own fatal-error report; one that
 * finds SIG_DFL writes that report and dies its own way. Python's
 * faulthandler saves what it finds and puts it back before raising the
 * signal again: SIG_DFL then, which is what it would have found. A handler
 * installed over the shim's replaces it in any case, as any handler
 * replaces the one before it.
 *
 * Nothing else changes: the call itself, its result and errno are libc's.
 */
#include <signal.h>
#include <string.h>

#include "crash.h"
#include "export_sym.h"
#include "real.h"

NL_EXPORT_COLD int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int r = NL_REAL(sigaction)(sig, act, old);
	if (r == 0 && old && nl_crash_is_ours((const void *)old->sa_sigaction)) {
		memset(old, 0, sizeof *old);
		old->sa_handler = SIG_DFL;
	}
	return r;
}

NL_EXPORT_COLD sighandler_t signal(int sig, sighandler_t handler)
{
	sighandler_t r = NL_REAL(signal)(sig, handler);
	return nl_crash_is_ours((const void *)r) ? SIG_DFL : r;
}
