/* SPDX-License-Identifier: Apache-2.0 */
#include "fork.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "forkpath.h"

/* pthread_atfork() as libc_nonshared.a's wrapper of that name makes it: the
 * registration libc exports (LSB's __register_atfork), for this object. The
 * wrapper would be linked at the very end of the shim's text, on a page that
 * nothing but this call touches. */
int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void), void *dso);
extern void *__dso_handle __attribute__((visibility("hidden")));

/* What the fork handlers run (announced), and what a part's later calls may
 * take as done (ready). The two differ while a registration waits for a fork
 * under way (nl_fork_register). */
static _Atomic(const struct nl_fork_handlers *) parts[NL_FORK_PARTS];
static _Atomic(const struct nl_fork_handlers *) ready[NL_FORK_PARTS];
/* 0: not yet; INSTALLED; else the pid of the process a thread of which is
 * installing them. A fork in the middle of that leaves the child with its
 * parent's pid here and no handlers: the child, seeing a pid not its own,
 * installs them itself. */
#define INSTALLED (-1L)
static _Atomic long installed;

/* How far the prepare handlers of the fork under way have come: the part
 * they look at next (NL_FORK_PARTS once all ran, until the fork is over), or
 * NONE. libc runs the handlers of one fork at a time (its own lock is held
 * from the first prepare handler to the last parent or child handler), so
 * one variable says it for the process. in_fork marks the forking thread,
 * which a signal handler of its own may interrupt mid-fork. */
#define NONE (-1)
static _Atomic int fork_at = NONE;
static __thread bool in_fork __attribute__((tls_model("initial-exec")));

static void run_prepare(void)
{
	in_fork = true;
	for (int i = 0; i < NL_FORK_PARTS; i++) {
		/* Both sequentially consistent: see nl_fork_register. */
		atomic_store(&fork_at, i);
		const struct nl_fork_handlers *h = atomic_load(&parts[i]);
		if (h && h->prepare)
			h->prepare();
	}
	atomic_store(&fork_at, NL_FORK_PARTS);
}

static void run_parent(void)
{
	for (int i = NL_FORK_PARTS - 1; i >= 0; i--) {
		const struct nl_fork_handlers *h = atomic_load_explicit(&parts[i], memory_order_acquire);
		if (h && h->parent)
			h->parent();
	}
	atomic_store(&fork_at, NONE);
	in_fork = false;
}

/* Set in a child of nl_fork_clone, cleared in any fork child. */
static bool in_clone_child;

bool nl_fork_in_clone_child(void) { return in_clone_child; }

NL_FORK_PATH static void run_child(void)
{
	in_clone_child = false;
	/* The child's only thread: no fork of its own is under way. */
	atomic_store_explicit(&fork_at, NONE, memory_order_relaxed);
	in_fork = false;
	for (int i = NL_FORK_PARTS - 1; i >= 0; i--) {
		const struct nl_fork_handlers *h = atomic_load_explicit(&parts[i], memory_order_acquire);
		if (h && h->child)
			h->child();
	}
}

/* A fork whose prepare handlers looked at `part` before it was announced
 * makes its child while this thread goes on: the part's state must not
 * change until that child is made. Waits until the fork is over; bounded
 * (a second), for a registration made while this thread holds a lock that
 * fork() itself takes, which no caller of the shim's does. */
static void wait_for_forks_past(enum nl_fork_part part)
{
	if (in_fork)
		return;   /* this thread's own fork, interrupted: it waits for us */
	struct timespec start, now;
	bool timed = false;
	for (unsigned n = 0; atomic_load(&fork_at) >= (int)part; n++) {
		sched_yield();
		if (n % 64)
			continue;
		clock_gettime(CLOCK_MONOTONIC, timed ? &now : &start);
		if (timed && (now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) > 1000000000L)
			return;
		timed = true;
	}
}

void nl_fork_register(enum nl_fork_part part, const struct nl_fork_handlers *h)
{
	if (atomic_load_explicit(&ready[part], memory_order_acquire) &&
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
	/* Announced, then fork_at read, both sequentially consistent, while a
	 * forking thread stores fork_at, then reads the part: either its prepare
	 * handler runs for the part, or this thread sees that fork past it (or
	 * at it) and waits until its child is made. Only then may the caller,
	 * or any thread that finds the part ready, change the part's state. */
	atomic_store(&parts[part], h);
	wait_for_forks_past(part);
	atomic_store_explicit(&ready[part], h, memory_order_release);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- clone() ------------------------------------------------------------- */

/* What the child runs first: its handlers, then the program's function.
 * The call lies on the parent's stack, which the child has a copy of. */
struct clone_call {
	int (*fn)(void *);
	void *arg;
};

static int clone_child(void *p)
{
	struct clone_call c = *(const struct clone_call *)p;
	run_child();
	in_clone_child = true;
	return c.fn(c.arg);
}

int nl_fork_clone(int (*real)(int (*)(void *), void *, int, void *, void *, void *, void *),
		  int (*fn)(void *), void *stack, int flags, void *arg, void *ptid, void *tls, void *ctid)
{
	/* Nothing to run the child's handlers on: libc's error. The handlers
	 * run even when no part is registered yet: a thread may register one
	 * at any moment, and libc's lock, which orders that with a fork, is
	 * not taken here (fork_at does it, as for a fork). */
	if (!fn)
		return real(fn, stack, flags, arg, ptid, tls, ctid);
	/* One clone at a time: fork_at is one variable, which libc's lock keeps
	 * to one fork() at a time. A fork() in another thread may still run its
	 * handlers at the same moment as these: fork_at then tells of one of
	 * the two, and a part first registered just then may not wait for the
	 * other (the parts' own locks still keep their prepare handlers apart).
	 * Signals held: a handler of this thread that forked or cloned here
	 * would wait for the locks this thread's prepare handlers took. */
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_mutex_lock(&one);
	run_prepare();
	struct clone_call c = { fn, arg };
	int r = real(clone_child, stack, flags, &c, ptid, tls, ctid);
	int saved = errno;
	run_parent();
	pthread_mutex_unlock(&one);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return r;
}
