/* SPDX-License-Identifier: Apache-2.0 */
/* A shared library opened when it is first needed, and a few of its
 * functions resolved, once per process image.
 *
 * The shim itself needs only libc. What it uses of another library
 * (libunwind for call sites and crash reports, zlib for compressed model
 * calls) most processes never need, so it is not linked: the first caller
 * that needs it opens it with dlopen, RTLD_LOCAL, so that none of its
 * symbols joins the global scope, where they could shadow the program's
 * own (libunwind's `backtrace` would shadow glibc's).
 *
 * The state goes from untried to loading (one thread, the first to ask) to
 * ready or failed, and never back: a library that is missing, or lacks one
 * of the functions asked for, is not tried again. A thread that finds
 * another thread loading is not made to wait unless it asks to, and then a
 * bounded time: the loading thread may be one that this thread's signal
 * handler interrupted, or one that no longer exists in a fork child (a
 * child forked while a thread of its parent was loading finds the library
 * being loaded for good, and goes on without it).
 *
 * dlopen takes the dynamic linker's lock and allocates: never load where
 * that could deadlock (a signal handler that may have interrupted the
 * linker or malloc, a vfork child, which shares its parent's memory).
 * nl_lazylib_ready and nl_lazylib_failed load nothing and are
 * async-signal-safe. Loading leaves the hooks as they are: the linker's
 * reads of the library's files pass through them as the caller's own
 * calls would.
 */
#ifndef NL_LAZYLIB_H
#define NL_LAZYLIB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

enum { NL_LAZYLIB_UNTRIED, NL_LAZYLIB_LOADING, NL_LAZYLIB_READY, NL_LAZYLIB_FAILED };

/* One library's state: zero (a static's) is untried. */
struct nl_lazylib {
	_Atomic int state;
};

/* Opens path (dlopen's name of it, "libz.so.1") and resolves the n
 * functions named in names, each name ended by a '\0' and the next one
 * right after it, into fns, unless that was done already. fns is a struct
 * of n pointers to functions and nothing else, in the order of the names:
 * POSIX makes dlsym's void pointer a function's address, and a pointer to
 * a function the size of a void pointer. True when the library is ready:
 * fns is set, for this thread and every thread that sees
 * nl_lazylib_ready() after it.
 *
 * False when it is missing or failed to load, now or before; and when
 * another thread is loading it and is not done within wait_ms milliseconds
 * (0: not waited for at all; the wait is in steps of 100 us).
 *
 * The names come as one string, and the functions as one struct, rather
 * than as arrays of pointers: an array of addresses known at build time
 * (even one on the stack, which compilers build by copying a static one)
 * would cost the dynamic linker a relocation per entry at every start of
 * every program. */
bool nl_lazylib_open(struct nl_lazylib *l, const char *path, const char *names, void *fns, size_t n,
		     unsigned wait_ms);

/* True when the library was loaded already: one load, no loading step. */
static inline bool nl_lazylib_ready(struct nl_lazylib *l)
{
	return atomic_load_explicit(&l->state, memory_order_acquire) == NL_LAZYLIB_READY;
}

/* True when loading it was tried and failed: it will not be tried again. */
static inline bool nl_lazylib_failed(struct nl_lazylib *l)
{
	return atomic_load_explicit(&l->state, memory_order_acquire) == NL_LAZYLIB_FAILED;
}

#endif
