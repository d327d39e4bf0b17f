/* SPDX-License-Identifier: Apache-2.0 */
/* One protocol for every part of the shim that keeps state across fork().
 *
 * A part registers its handlers once, when it first has state a fork must
 * take care of, with nl_fork_register(). Whatever the order in which parts
 * are first used, their handlers run in the order of enum nl_fork_part:
 * prepare handlers from the first part to the last, parent and child
 * handlers from the last to the first. That order is the shim's lock order:
 * code that holds the lock of one part may take the lock of a part listed
 * after it, never of one listed before it. A prepare handler that takes its
 * part's lock therefore never waits for a thread that waits for a lock taken
 * by an earlier prepare handler.
 *
 * The library registers with libc once, at the first nl_fork_register() of
 * the process image (a fork child keeps its parent's registration), not at
 * load: a process that never has such state does not touch libc's list of
 * fork handlers, nor the pages of code behind it.
 *
 * A part registered while another thread forks can have its parent or
 * child handler run without its prepare handler: each part keeps its own
 * note of what its prepare handler took. Its state cannot change under that
 * fork, though: a registration that the fork's prepare handlers missed
 * returns only once the child is made, so a thread starts to change a
 * part's state either before a fork's prepare handler for it runs, or after
 * that fork's child exists.
 */
#ifndef NL_FORK_H
#define NL_FORK_H

#include <stdbool.h>

enum nl_fork_part {
	NL_FORK_LENS,      /* the NeMo Lens C API's meters (lens.c): makes series under its lock */
	NL_FORK_RUNTIME,   /* the lifecycle's lock, then the export transport's libraries */
	NL_FORK_REGISTRY,  /* the registry's create_lock, innermost of all */
	NL_FORK_ROUTES,    /* the HTTP route tables (child only: made again if half made) */
	NL_FORK_FDS,       /* per-fd state (child only: the parent's) */
	NL_FORK_TLS,       /* per-TLS-connection state (child only: the parent's) */
	NL_FORK_CALLSITES, /* call sites (child only: a new pid, sites or series half made) */
	NL_FORK_PARTS
};

struct nl_fork_handlers {
	void (*prepare)(void);   /* each may be NULL */
	void (*parent)(void);
	void (*child)(void);
};

/* Registers `h` (static storage) for `part`. Only the first call per part
 * and process image does anything; later ones are two atomic loads. Safe to
 * call from any thread, with signals blocked or not; not async-signal-safe
 * the first time (libc's registration). */
void nl_fork_register(enum nl_fork_part part, const struct nl_fork_handlers *h);

/* clone() without CLONE_VM, which makes a process as fork() does but runs
 * no fork handlers of libc's: the shim's run around it as around a fork.
 * `real` is libc's clone; the rest are clone()'s arguments. */
/* True in a child that nl_fork_clone made (and its descendants until one
 * is forked by fork()): libc did not make it safe to allocate or to start
 * threads, since its own fork handlers did not run (malloc's locks may be
 * held by threads it does not have). */
bool nl_fork_in_clone_child(void);

int nl_fork_clone(int (*real)(int (*)(void *), void *, int, void *, void *, void *, void *),
		  int (*fn)(void *), void *stack, int flags, void *arg, void *ptid, void *tls, void *ctid);

#endif
