/* SPDX-License-Identifier: Apache-2.0 */
/* Per-fd socket state, kept in a table indexed by fd.
 *
 * The table has two levels: a fixed array of chunk pointers and chunks of
 * NL_FD_CHUNK entries, mapped the first time a socket with an fd in their
 * range is tracked. Looking up an fd the shim does not track costs a bounds
 * check and one or two loads; there is no hashing, no lock and no allocation
 * on any I/O path. Fds at or beyond NL_FD_LIMIT are simply not tracked.
 *
 * Each entry is small and can grow to carry a protocol parser's state
 * without changing how it is found.
 */
#ifndef NL_FDTABLE_H
#define NL_FDTABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum nl_fd_state {
	NL_FD_UNTRACKED = 0,
	NL_FD_SOCKET,           /* a stream socket of the target's: idle, connected, or listening */
	NL_FD_CONNECTING,       /* a connect() that did not complete inside the call */
	NL_FD_IGNORED,          /* a socket the shim saw and does not count (datagram, the shim's own) */
};

/* What the HTTP layer does with a socket's bytes (follow.h). */
enum nl_fd_http { NL_HTTP_NONE = 0, NL_HTTP_SERVER = 2, NL_HTTP_CLIENT = 4 };
/* Why an I/O call on the fd is of interest: one byte, so that a hook asks
 * with one load. */
enum {
	NL_WATCH_CONNECTING = 1,
	NL_WATCH_HTTP = NL_HTTP_SERVER | NL_HTTP_CLIENT,
	NL_WATCH_FED = 8,       /* followed, and bytes were fed: the conn is set up, there may be exchanges to settle */
	NL_WATCH_INIT = 16,     /* followed, and a thread is setting the conn up for the first bytes */
};

struct nl_fd {
	_Atomic uint32_t state;
	int16_t dest;           /* destination index while connecting */
	_Atomic uint8_t watch;  /* NL_WATCH_CONNECTING, or the HTTP side followed */
	uint8_t unused;
	uint64_t start_ns;      /* CLOCK_MONOTONIC at entry to connect() */
};

/* Two entries per cache line: the table's size and every lookup depend on it. */
_Static_assert(sizeof(struct nl_fd) == 16, "struct nl_fd must stay 16 bytes");

#define NL_FD_CHUNK_BITS 12
#define NL_FD_CHUNK (1u << NL_FD_CHUNK_BITS)
#define NL_FD_CHUNKS 256
#define NL_FD_LIMIT (NL_FD_CHUNK * NL_FD_CHUNKS)   /* 1,048,576 */
/* The chunk array has a slot for every int, so a lookup needs no bounds
 * check; the slots past NL_FD_CHUNKS stay NULL (8 MiB of zero pages that
 * are never touched: no memory). */
#define NL_FD_CHUNK_SLOTS (1u << (32 - NL_FD_CHUNK_BITS))

/* Each slot holds a struct nl_fd[NL_FD_CHUNK] once mapped (chunk.h). */
extern _Atomic(void *) nl_fd_chunks[NL_FD_CHUNK_SLOTS];

/* How many fds are NL_FD_CONNECTING or have their bytes followed by the HTTP
 * layer right now. While it is 0, an I/O hook needs no table lookup at all.
 * Every change goes through the functions below (and follow.c), which keep it
 * exact. */
extern _Atomic unsigned nl_fd_watching;

/* The entry of fd if its chunk exists, else NULL. */
static inline struct nl_fd *nl_fd_lookup(int fd)
{
	struct nl_fd *chunk = atomic_load_explicit(&nl_fd_chunks[(unsigned)fd >> NL_FD_CHUNK_BITS],
						   memory_order_acquire);
	return chunk ? &chunk[(unsigned)fd & (NL_FD_CHUNK - 1)] : 0;
}

static inline uint32_t nl_fd_state(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	return e ? atomic_load_explicit(&e->state, memory_order_relaxed) : NL_FD_UNTRACKED;
}

/* True when some fd is watched: an I/O call may settle a pending acquisition
 * or carry HTTP bytes. While false (nearly always, in a program that is not
 * an HTTP server or client), an I/O hook is one load and a tail call. */
/* The HTTP side followed on e (enum nl_fd_http). */
static inline unsigned nl_fd_http_side(struct nl_fd *e)
{
	return atomic_load_explicit(&e->watch, memory_order_relaxed) & NL_WATCH_HTTP;
}

/* Starts following e's bytes as side; false if they were already followed. */
int nl_fd_http_start(struct nl_fd *e, enum nl_fd_http side);
/* Marks a followed fd whose parser has seen bytes. */
static inline void nl_fd_http_fed(struct nl_fd *e) { atomic_fetch_or(&e->watch, NL_WATCH_FED); }
static inline int nl_fd_http_was_fed(struct nl_fd *e)
{
	return atomic_load_explicit(&e->watch, memory_order_relaxed) & NL_WATCH_FED;
}
/* Stops following e's bytes; false if they were not followed. Inline:
 * every close of a followed socket comes here. */
static inline int nl_fd_http_stop(struct nl_fd *e)
{
	if (!(atomic_load_explicit(&e->watch, memory_order_relaxed) & NL_WATCH_HTTP))
		return 0;
	if (!(atomic_fetch_and(&e->watch, (uint8_t)~(NL_WATCH_HTTP | NL_WATCH_FED | NL_WATCH_INIT)) & NL_WATCH_HTTP))
		return 0;
	atomic_fetch_sub(&nl_fd_watching, 1);
	return 1;
}

static inline int nl_fd_any_watched(void)
{
	return __builtin_expect(atomic_load_explicit(&nl_fd_watching, memory_order_relaxed) != 0, 0);
}

/* The entry of fd when an I/O call on it may settle a pending acquisition or
 * carries HTTP bytes: the only cases in which an I/O hook does anything
 * besides calling libc. NULL otherwise. */
static inline struct nl_fd *nl_fd_watched(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	return e && atomic_load_explicit(&e->watch, memory_order_relaxed) ? e : 0;
}

/* The entry of fd, mapping its chunk when needed; NULL when fd is out of range
 * or memory is short (the fd then goes untracked). */
struct nl_fd *nl_fd_get(int fd);

/* Starts tracking fd as a fresh socket, forgetting whatever state the number had. */
void nl_fd_track(int fd);
/* The same for the entry of a socket just accepted, and its bytes followed
 * by the HTTP layer as side (dest: the destination index of a client
 * socket): nl_fd_track, then nl_follow_watch, in one step. */
void nl_fd_track_followed(struct nl_fd *e, enum nl_fd_http side, int dest);
/* Marks fd as a socket the shim knows and does not count. */
void nl_fd_ignore(int fd);
/* Stops tracking fd; returns the state it had. */
uint32_t nl_fd_forget(int fd);

/* A state overwritten was NL_FD_CONNECTING: the watch bit and count follow. */
void nl_fd_connecting_cleared(struct nl_fd *e);

/* nl_fd_track for an entry already looked up (or got). Inline: every new
 * socket comes here. */
static inline void nl_fd_track_entry(struct nl_fd *e)
{
	nl_fd_http_stop(e);
	if (atomic_exchange(&e->state, NL_FD_SOCKET) == NL_FD_CONNECTING)
		nl_fd_connecting_cleared(e);
}

/* Stops tracking an entry already looked up; returns the state it had.
 * Inline: every close of a tracked socket comes here. */
static inline uint32_t nl_fd_clear(struct nl_fd *e)
{
	if (atomic_load_explicit(&e->watch, memory_order_relaxed) & NL_WATCH_HTTP)
		nl_fd_http_stop(e);
	if (atomic_load_explicit(&e->state, memory_order_relaxed) == NL_FD_UNTRACKED)
		return NL_FD_UNTRACKED;
	uint32_t old = atomic_exchange(&e->state, NL_FD_UNTRACKED);
	if (old == NL_FD_CONNECTING)
		nl_fd_connecting_cleared(e);
	return old;
}
/* Marks e as connecting (its dest and start set first) and, when side is
 * not NL_HTTP_NONE, follows its bytes as side (nl_fd_http_start) in the
 * same step. */
void nl_fd_start_connecting(struct nl_fd *e, enum nl_fd_http side);
/* Connecting -> socket, once: true for the caller that made the change.
 * Inline: every settled acquisition comes here. */
static inline int nl_fd_end_connecting(struct nl_fd *e)
{
	uint32_t expected = NL_FD_CONNECTING;
	if (!atomic_compare_exchange_strong(&e->state, &expected, NL_FD_SOCKET))
		return 0;
	atomic_fetch_and(&e->watch, (uint8_t)~NL_WATCH_CONNECTING);
	atomic_fetch_sub(&nl_fd_watching, 1);
	return 1;
}
/* Copies tracking from oldfd to newfd (dup and friends). */
void nl_fd_copy(int oldfd, int newfd);

#endif
