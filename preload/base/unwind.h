/* SPDX-License-Identifier: Apache-2.0 */
/* Stack unwinding, through libunwind loaded when it is first needed.
 *
 * Most processes never unwind, so libunwind is not linked: the first call
 * that needs it opens libunwind.so.8 with dlopen (lazylib.h; RTLD_LOCAL, so
 * a program's own copy, or its use of the `backtrace` symbol libunwind also
 * defines, resolves as it would without the shim). Loading happens once per
 * process image; a thread that finds another thread loading it does not
 * wait, it is told "not ready" and goes on without a stack, unless it asks
 * to wait a bounded time (nl_unwind_load_wait).
 *
 * Every function here may be called from any thread. None allocates with
 * malloc once libunwind is loaded (libunwind's own caches use mmap), so the
 * ones that take no loading step are usable in a signal handler.
 */
#ifndef NL_UNWIND_H
#define NL_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Loads libunwind if it is not yet loaded. True when it is ready; false when
 * it is missing, failed to load, or is being loaded by another thread right
 * now. dlopen takes the loader's lock and allocates: never call this where
 * that could deadlock (a signal handler, a vfork child). */
bool nl_unwind_load(void);
/* The same, but a thread that finds another thread loading libunwind waits
 * for it, at most ms milliseconds; false if it is still loading then. */
bool nl_unwind_load_wait(unsigned ms);

/* True when libunwind was loaded already: one load, no loading step. */
bool nl_unwind_loaded(void);

/* The return addresses of the caller's stack, innermost first: ips[0] is in
 * the function that called nl_unwind_backtrace. At most max; 0 when
 * libunwind is not loaded. libunwind's fast path (unw_backtrace). */
int nl_unwind_backtrace(void **ips, int max);

/* The same from a signal's context (the third argument of an SA_SIGINFO
 * handler): ips[0] is the interrupted instruction. */
int nl_unwind_backtrace_signal(void *ucontext, void **ips, int max);

/* The name of the function holding the code address ip (a return address
 * or an instruction), from the object's symbol tables (.symtab as well as
 * .dynsym, so static functions are named when the object is not stripped),
 * and ip's offset into it. False when no symbol covers ip. */
bool nl_unwind_symbol(const void *ip, char *name, size_t len, uintptr_t *offset);

#endif
