/* SPDX-License-Identifier: Apache-2.0 */
/* The constructor and destructor: the only code that runs because a library
 * was loaded. Linked into the two shared libraries, never into unit tests,
 * which link the runtime without starting it.
 *
 * Built twice: with NL_WITH_HOOKS for libnemolens_preload.so, which also
 * hands Python its adapter, and without it for libnemolens.so, which
 * interposes nothing.
 */
#include <pthread.h>
#include <stdbool.h>
#include <sys/auxv.h>

#include "check.h"
#include "forkpath.h"
#include "loadpath.h"
#include "nemolens.h"
#include "runtime.h"
#ifdef NL_WITH_HOOKS
#include "crash.h"
#include "python.h"

/* The shim links without the compiler's start files (CMakeLists.txt). This
 * is the one thing of theirs that libc's atexit and fork-handler
 * registrations need: the handle that tells this object's handlers from
 * those of other objects. */
__attribute__((visibility("hidden"))) void *__dso_handle = &__dso_handle;
#endif

/* True when another copy of the runtime comes first in symbol lookup: a
 * program that links libnemolens.so and also runs under the preloaded shim.
 * Its API calls reach the preloaded copy, which then does all the work.
 * This object's own reference to an exported function goes through its GOT,
 * which holds the first definition in lookup order; the hidden alias is its
 * own definition (lens.c). */
extern __typeof__(nemolens_meter_get) nl_lens_meter_get_here;

NL_LOAD_PATH static bool another_copy_first(void)
{
	/* Two declarations of different names are different functions to
	 * clang's optimizer, which would fold the comparison to true: the
	 * empty asm hides where the second address comes from. */
	void *mine = (void *)nl_lens_meter_get_here;
	__asm__("" : "+r"(mine));
	return (void *)nemolens_meter_get != mine;
}

__attribute__((constructor)) static void nl_load(void)
{
	NL_KEEP_ERRNO;
	/* A privileged program (setuid, setgid, file capabilities): its
	 * environment belongs to a less privileged user, so none of it is read,
	 * and nothing is recorded, opened, sent or written. The hooks pass every
	 * call through, as when the shim is disabled (nl_recording stays false). */
	if (getauxval(AT_SECURE) != 0)
		return;
	if (another_copy_first())
		return;
	if (!nl_runtime_load())
		return;
#ifdef NL_WITH_HOOKS
	/* Only in the preloaded shim, whose hooks show the program SIG_DFL in
	 * place of the handler (hooks/signal.c); libnemolens.so interposes
	 * nothing and leaves the program's signals alone. */
	if (nl_runtime_crash_report())
		nl_crash_install();
#ifdef NL_CRASH_TEST
	nl_crash_test_fault();
#endif
	nl_python_setup();
#endif
	nl_runtime_start();
}

/* Runs in every process, a fork child that recorded nothing too. */
__attribute__((destructor)) NL_FORK_PATH static void nl_unload(void) { nl_runtime_unload(); }
