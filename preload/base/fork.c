/* SPDX-License-Identifier: Apache-2.0 */
#include "fork.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "forkpath.h"

/* pthread_atfork() as libc_nonshared.a's wrapper of that name makes it: the
 * registration libc exports (LSB's __register_atfork), for this object. The
 * wrapper would be linked at the very end of the shim's text, on a page that
 * nothing but this call touches. */
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso);
extern void *__dso_handle __attribute__((visibility("hidden")));

static _Atomic(const struct nl_fork_handlers *) parts[NL_FORK_PARTS];
/* 0: not yet; INSTALLED; else the pid of the process a thread of which is
 * installing them. A fork in the middle of that leaves the child with its
 * parent's pid here and no handlers: the child, seeing a pid not its own,
 * installs them itself. */
#define INSTALLED (-1L)
static _Atomic long installed;

static void run_prepare(void)
{
	for (int i = 0; i < NL_FORK_PARTS; i++) {
		const struct nl_fork_handlers *h = atomic_load_explicit(&parts[i], memory_order_acquire);
		if (h && h->prepare)
			h->prepare();
	}
}

static void run_parent(void)
{
	for (int i = NL_FORK_PARTS - 1; i >= 0; i--) {
		const struct nl_fork_handlers *h = atomic_load_explicit(&parts[i], memory_order_acquire);
		if (h && h->parent)
			h->parent();
	}
}

NL_FORK_PATH static void run_child(void)
{
	for (int i = NL_FORK_PARTS - 1; i >= 0; i--) {
		const struct nl_fork_handlers *h = atomic_load_explicit(&parts[i], memory_order_acquire);
		if (h && h->child)
			h->child();
	}
}

void nl_fork_register(enum nl_fork_part part, const struct nl_fork_handlers *h)
{
	if (atomic_load_explicit(&parts[part], memory_order_acquire) &&
	    atomic_load_explicit(&installed, memory_order_relaxed) == INSTALLED)
		return;
	/* Signals held: a handler of this thread that registered too would
	 * otherwise wait below for the registration it interrupted. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	long self = getpid();
	for (;;) {
		long v = 0;
		if (atomic_compare_exchange_strong(&installed, &v, self)) {
			__register_atfork(run_prepare, run_parent, run_child, __dso_handle);
			atomic_store(&installed, INSTALLED);
			break;
		}
		if (v == INSTALLED)
			break;
		if (v != self)
			atomic_compare_exchange_strong(&installed, &v, 0);   /* the parent's, half made */
		else
			sched_yield();   /* another thread of this process installs them */
	}
	atomic_store_explicit(&parts[part], h, memory_order_release);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
