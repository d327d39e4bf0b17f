/* SPDX-License-Identifier: Apache-2.0 */
#include "acquire.h"

#include <errno.h>

#include "check.h"
#include "clock.h"
#include "connmetrics.h"
#include "dest.h"
#include "follow.h"
#include "real.h"
#include "state.h"

/* Ends the pending acquisition of e, once. */
static void settle_entry(struct nl_fd *e, enum nl_queue_outcome outcome)
{
	if (nl_fd_end_connecting(e))
		nl_conn_wait(e->dest, outcome, nl_monotonic_ns() - e->start_ns);
}

/* The same for fd's entry. */
static void settle(int fd, enum nl_queue_outcome outcome)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (e)
		settle_entry(e, outcome);
}

static int is_stream_socket(int fd)
{
	int type = 0;
	socklen_t len = sizeof type;
	return NL_REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

/* A pending fd whose number no longer names a socket was closed behind libc's
 * back and reused (by open, pipe, ...): its acquisition is dropped, not
 * recorded. (Every way libc creates a socket resets the number's state.) */
static int still_a_socket(int fd)
{
	if (is_stream_socket(fd))
		return 1;
	nl_fd_forget(fd);
	return 0;
}

/* Whether a socket whose connect is pending has connected by now: it has a
 * peer. Failed or still connecting are both abandoned, so the socket's
 * SO_ERROR is not read: reading it clears it, and a duplicate of the fd the
 * program keeps would then find 0 where the kernel had its failure. */
static enum nl_queue_outcome probe(int fd)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	return getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 ? NL_QUEUE_OK : NL_QUEUE_ABANDONED;
}

/* A socket created before the shim saw it (inherited across exec, or from
 * socketpair), connecting to a counted destination: the kernel is asked
 * once what it is. */
static __attribute__((noinline)) int classify_unknown(int fd, const struct sockaddr *addr, socklen_t len,
						      struct nl_fd **entry)
{
	int dest = nl_dest_match(addr, len);
	if (dest == NL_DEST_NONE)
		return NL_DEST_NONE;
	if (!is_stream_socket(fd)) {
		nl_fd_ignore(fd);
		return NL_DEST_NONE;
	}
	nl_fd_track(fd);
	*entry = nl_fd_lookup(fd);
	return dest;
}

/* Every connect() of the program asks: the usual case (a socket the shim
 * tracks, connecting once) needs no stack frame. The address is checked by
 * nl_dest_match alone (none, too short, AF_UNSPEC: NL_DEST_NONE). */
static inline int classify(int fd, const struct sockaddr *addr, socklen_t len, struct nl_fd **entry)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	uint32_t state = e ? atomic_load_explicit(&e->state, memory_order_relaxed) : NL_FD_UNTRACKED;
	*entry = e;
	if (state == NL_FD_CONNECTING)
		return NL_ACQ_RECHECK;
	if (state == NL_FD_IGNORED)
		return NL_DEST_NONE;
	if (state == NL_FD_UNTRACKED)
		return classify_unknown(fd, addr, len, entry);
	return nl_dest_match(addr, len);
}

int nl_acq_classify(int fd, const struct sockaddr *addr, socklen_t len, struct nl_fd **entry)
{
	return classify(fd, addr, len, entry);
}

/* A connect() again on a pending fd: it may tell how the first one ended.
 * One to AF_UNSPEC dissolves the attempt: the program gave up on it. */
static __attribute__((noinline)) void recheck(int fd, const struct sockaddr *addr, socklen_t len, int result,
					      int err)
{
	if (addr && len >= sizeof addr->sa_family && addr->sa_family == AF_UNSPEC) {
		if (result == 0)
			settle(fd, NL_QUEUE_ABANDONED);
		return;
	}
	if (result == 0 || err == EISCONN)
		settle(fd, NL_QUEUE_OK);
	else if (err != EALREADY && err != EINPROGRESS && err != EINTR)
		settle(fd, NL_QUEUE_ABANDONED);
}

/* A counted connect() that is still in progress: the wait starts, and
 * the socket becomes an HTTP candidate in the same step. */
static __attribute__((noinline)) void start_pending(struct nl_fd *e, int what, unsigned long long t0_ns,
						    enum nl_fd_http follow, const void *caller)
{
	__atomic_store_n(&e->dest, (int16_t)what, __ATOMIC_RELAXED);   /* the fd may be another thread's a moment ago */
	e->start_ns = t0_ns;
	nl_fd_start_connecting(e, follow);
	nl_conn_attempt(what, caller);
}

int nl_acq_connect(int fd, const struct sockaddr *addr, socklen_t len, enum nl_fd_http follow,
		   const void *caller)
{
	NL_HOOK_SCOPE;
	/* classify can only change errno when fd is not a socket, and then the
	 * real connect() fails with that same errno. */
	struct nl_fd *e;
	int what = classify(fd, addr, len, &e);
	if (what == NL_DEST_NONE)
		return NL_REAL(connect)(fd, addr, len);
	/* The wait starts at entry: only a counted attempt can start one. */
	uint64_t t0 = what >= 0 ? nl_monotonic_ns() : 0;
	int r = NL_REAL(connect)(fd, addr, len);
	NL_KEEP_ERRNO;
	int err = errno;
	if (what == NL_ACQ_RECHECK) {
		recheck(fd, addr, len, r, err);
		return r;
	}
	/* Kicked before anything is written: the first record makes the segment
	 * (state.h). */
	nl_runtime_kick();
	if (r == 0) {
		nl_conn_attempt(what, caller);   /* finished inside the call: no wait to record */
		if (follow && e)
			nl_follow_watch(e, follow, what);
	} else if ((err == EINPROGRESS || err == EINTR) && e) {
		start_pending(e, what, t0, follow, caller);
	} else if (err != EISCONN && err != EALREADY) {
		/* Failed inside the call: counted, no wait to record. Asked again
		 * once settled (or of a socket a blocking call connected), the
		 * answer is about the attempt already counted. */
		nl_conn_attempt(what, caller);
	}
	return r;
}

void nl_acq_after_io(int fd, int ok)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	int err = errno;
	if (ok && still_a_socket(fd))
		settle(fd, NL_QUEUE_OK);
	else if (!ok && err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != EALREADY &&
		 err != EINPROGRESS && still_a_socket(fd))
		settle(fd, NL_QUEUE_ABANDONED);
}

/* getsockopt(SO_ERROR) gave so_error for fd, whose entry e is connecting. */
static inline __attribute__((always_inline)) void so_error_seen(struct nl_fd *e, int fd, int so_error)
{
	if (so_error != 0) {
		settle_entry(e, NL_QUEUE_ABANDONED);
		return;
	}
	/* 0: connected, or still connecting (then getpeername() fails with
	 * ENOTCONN, the only errno this can set). */
	int *errp = &errno, saved = *errp;
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
		settle_entry(e, NL_QUEUE_OK);
	else
		*errp = saved;
}

void nl_acq_so_error(struct nl_fd *e, int fd, int so_error)
{
	NL_HOOK_SCOPE;
	so_error_seen(e, fd, so_error);
}

int nl_acq_getsockopt_so_error(int fd, void *val, socklen_t *len)
{
	NL_HOOK_SCOPE;
	int r = NL_REAL(getsockopt)(fd, SOL_SOCKET, SO_ERROR, val, len);
	if (r != 0 || !val || !len || *len < (socklen_t)sizeof(int))
		return r;
	struct nl_fd *e = nl_fd_lookup(fd);
	if (e && atomic_load_explicit(&e->state, memory_order_relaxed) == NL_FD_CONNECTING)
		so_error_seen(e, fd, *(int *)val);
	return r;
}

void nl_acq_release(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (!e)
		return;
	if (atomic_load_explicit(&e->state, memory_order_relaxed) == NL_FD_CONNECTING) {
		NL_KEEP_ERRNO;
		if (still_a_socket(fd))
			settle(fd, probe(fd));
	}
	nl_fd_clear(e);
}
