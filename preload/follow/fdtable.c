/* SPDX-License-Identifier: Apache-2.0 */
#include "fdtable.h"

#include <errno.h>
#include <stddef.h>

#include "check.h"
#include "chunk.h"
#include "fork.h"
#include "forkpath.h"
#include "loadpath.h"

_Atomic(void *) nl_fd_chunks[NL_FD_CHUNK_SLOTS];
/* Read by every hook, recording or not: with the load path's state, on a
 * page the dynamic linker has written already (loadpath.h). */
NL_LOAD_STATE _Atomic unsigned nl_fd_watching;
/* One past the highest chunk ever mapped: a fork child resets those only,
 * without reading (and faulting in) the rest of the chunk table. */
NL_LOAD_STATE static _Atomic unsigned chunks_top;

static void settle_forks(void);

/* The first fd of a chunk's range: the chunk is mapped (out of line, so
 * that nl_fd_get's usual case needs no stack frame). */
static __attribute__((noinline)) struct nl_fd *map_chunk(int fd)
{
	NL_KEEP_ERRNO;
	settle_forks();
	size_t size = NL_FD_CHUNK * sizeof(struct nl_fd);
	struct nl_fd *chunk = nl_chunk_map(size);
	if (!chunk)
		return 0;
	/* Raised before the chunk is installed: a fork child always sees it. */
	unsigned top = atomic_load(&chunks_top), want = ((unsigned)fd >> NL_FD_CHUNK_BITS) + 1;
	while (top < want && !atomic_compare_exchange_weak(&chunks_top, &top, want))
		;
	chunk = nl_chunk_install(&nl_fd_chunks[(unsigned)fd >> NL_FD_CHUNK_BITS], chunk, size);
	return &chunk[(unsigned)fd & (NL_FD_CHUNK - 1)];
}

struct nl_fd *nl_fd_get(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (e || (unsigned)fd >= NL_FD_LIMIT)
		return e;
	return map_chunk(fd);
}

/* Every overwrite of a state (set_state, and the inline nl_fd_track_entry
 * and nl_fd_clear) that replaced NL_FD_CONNECTING comes here: that keeps
 * nl_fd_watching exact. */
void nl_fd_connecting_cleared(struct nl_fd *e)
{
	atomic_fetch_and(&e->watch, (uint8_t)~NL_WATCH_CONNECTING);
	atomic_fetch_sub(&nl_fd_watching, 1);
}

static uint32_t set_state(struct nl_fd *e, uint32_t state)
{
	uint32_t old = atomic_exchange(&e->state, state);
	if (old == NL_FD_CONNECTING)
		nl_fd_connecting_cleared(e);
	return old;
}

int nl_fd_http_start(struct nl_fd *e, enum nl_fd_http side)
{
	uint8_t old = atomic_load(&e->watch), want;
	do
		want = (uint8_t)((old & ~(NL_WATCH_HTTP | NL_WATCH_FED | NL_WATCH_INIT)) | side);
	while (!atomic_compare_exchange_weak(&e->watch, &old, want));
	if (old & NL_WATCH_HTTP)
		return 0;
	atomic_fetch_add(&nl_fd_watching, 1);
	return 1;
}

/* The HTTP layer stops following the number's bytes (its exchanges were
 * settled by follow.c first where there was a close to see). */
static void drop_http(struct nl_fd *e) { nl_fd_http_stop(e); }

void nl_fd_track(int fd)
{
	struct nl_fd *e = nl_fd_get(fd);
	if (e)
		nl_fd_track_entry(e);
}

void nl_fd_track_followed(struct nl_fd *e, enum nl_fd_http side, int dest)
{
	/* nl_fd_track's stop and nl_fd_http_start's start in one exchange of
	 * the watch byte: following before and after, the count stays. */
	/* Atomic: the entry of a reused fd number was another thread's a
	 * moment ago, with no lock between the two. */
	__atomic_store_n(&e->dest, (int16_t)dest, __ATOMIC_RELAXED);
	uint8_t old = atomic_load_explicit(&e->watch, memory_order_relaxed), want;
	do
		want = (uint8_t)((old & ~(NL_WATCH_HTTP | NL_WATCH_FED | NL_WATCH_INIT)) | side);
	while (!atomic_compare_exchange_weak(&e->watch, &old, want));
	if (!(old & NL_WATCH_HTTP))
		atomic_fetch_add(&nl_fd_watching, 1);
	set_state(e, NL_FD_SOCKET);
}

void nl_fd_ignore(int fd)
{
	struct nl_fd *e = nl_fd_get(fd);
	if (e) {
		drop_http(e);
		set_state(e, NL_FD_IGNORED);
	}
}

uint32_t nl_fd_forget(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	return e ? nl_fd_clear(e) : NL_FD_UNTRACKED;
}

void nl_fd_start_connecting(struct nl_fd *e, enum nl_fd_http side)
{
	if (atomic_exchange(&e->state, NL_FD_CONNECTING) == NL_FD_CONNECTING) {
		if (side)
			nl_fd_http_start(e, side);
		return;
	}
	/* The connecting bit and the HTTP side in one exchange of the watch
	 * byte, and one change of the count for both. */
	uint8_t old = atomic_load_explicit(&e->watch, memory_order_relaxed), want;
	do
		want = side ? (uint8_t)((old & ~(NL_WATCH_HTTP | NL_WATCH_FED | NL_WATCH_INIT)) | side | NL_WATCH_CONNECTING)
			    : (uint8_t)(old | NL_WATCH_CONNECTING);
	while (!atomic_compare_exchange_weak(&e->watch, &old, want));
	atomic_fetch_add(&nl_fd_watching, side && !(old & NL_WATCH_HTTP) ? 2 : 1);
}

NL_ENTRY_PATH void nl_fd_copy(int oldfd, int newfd)
{
	/* Nothing tracked yet, nothing to copy or forget: a shell's dup2 does not
	 * touch the chunk table. */
	if (!atomic_load_explicit(&chunks_top, memory_order_relaxed))
		return;
	/* A duplicate shares the socket but not a pending acquisition, which stays
	 * with the fd that started it. */
	uint32_t state = nl_fd_state(oldfd);
	if (state == NL_FD_UNTRACKED)
		nl_fd_forget(newfd);
	else if (state == NL_FD_IGNORED)
		nl_fd_ignore(newfd);
	else
		nl_fd_track(newfd);
}

NL_FORK_PATH static void atfork_child(void)
{
	/* The parent's acquisitions and HTTP exchanges are the parent's. */
	/* Each store only when it changes something: a page written in the
	 * child is a copy and a fault, in the child and then in the parent. */
	if (atomic_load(&nl_fd_watching))
		atomic_store(&nl_fd_watching, 0);
	unsigned top = atomic_load(&chunks_top);
	for (unsigned c = 0; c < top && c < NL_FD_CHUNKS; c++) {
		struct nl_fd *chunk = atomic_load(&nl_fd_chunks[c]);
		if (!chunk)
			continue;
		for (unsigned i = 0; i < NL_FD_CHUNK; i++) {
			if (atomic_load(&chunk[i].state) == NL_FD_CONNECTING)
				atomic_store(&chunk[i].state, NL_FD_SOCKET);
			if (atomic_load(&chunk[i].watch))
				atomic_store(&chunk[i].watch, 0);
		}
	}
}

static const struct nl_fork_handlers fork_handlers = { .child = atfork_child };

/* Registered with the first state, not at load: most programs under the
 * shim never open a socket (fork.h). Like a hook's first call, which finds
 * libc's function through the dynamic linker, this first one is not
 * async-signal-safe. */
static void settle_forks(void) { nl_fork_register(NL_FORK_FDS, &fork_handlers); }
