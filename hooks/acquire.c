#include "acquire.h"

#include <errno.h>

#include "check.h"
#include "clock.h"
#include "connmetrics.h"
#include "dest.h"
#include "real.h"
#include "state.h"

/* Ends the pending acquisition of fd, once. */
static void settle(int fd, enum nl_queue_outcome outcome)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (e && nl_fd_end_connecting(e))
		nl_conn_wait(e->dest, outcome, nl_monotonic_ns() - e->start_ns);
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

/* Whether a socket whose connect is pending has connected by now. */
static enum nl_queue_outcome probe(int fd)
{
	int so_error = 0;
	socklen_t len = sizeof so_error;
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	if (NL_REAL(getsockopt)(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0 && so_error == 0 &&
	    getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
		return NL_QUEUE_OK;
	return NL_QUEUE_ABANDONED;
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
 * tracks, connecting once) needs no stack frame. */
int nl_acq_classify(int fd, const struct sockaddr *addr, socklen_t len, struct nl_fd **entry)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	uint32_t state = e ? atomic_load_explicit(&e->state, memory_order_relaxed) : NL_FD_UNTRACKED;
	*entry = e;
	if (state == NL_FD_CONNECTING)
		return NL_ACQ_RECHECK;
	if (state == NL_FD_IGNORED || !addr || len < (socklen_t)sizeof(sa_family_t) || addr->sa_family == AF_UNSPEC)
		return NL_DEST_NONE;
	if (state == NL_FD_UNTRACKED)
		return classify_unknown(fd, addr, len, entry);
	return nl_dest_match(addr, len);
}

/* A connect() again on a pending fd: it may tell how the first one ended. */
static __attribute__((noinline)) void recheck(int fd, int result, int err)
{
	if (result == 0 || err == EISCONN)
		settle(fd, NL_QUEUE_OK);
	else if (err != EALREADY && err != EINPROGRESS && err != EINTR)
		settle(fd, NL_QUEUE_ABANDONED);
}

/* A counted connect() that is still in progress: the wait starts. */
static __attribute__((noinline)) void start_pending(struct nl_fd *e, int what, unsigned long long t0_ns)
{
	nl_conn_attempt(what);
	e->dest = (int16_t)what;
	e->start_ns = t0_ns;
	nl_fd_start_connecting(e);
}

static inline void count(struct nl_fd *e, int what, unsigned long long t0_ns, int result, int err)
{
	if (result == 0 || (err != EINPROGRESS && err != EINTR) || !e)
		nl_conn_attempt(what);   /* finished inside the call, either way: no wait to record */
	else
		start_pending(e, what, t0_ns);
}

static __attribute__((noinline)) void kick_then_count(struct nl_fd *e, int what, unsigned long long t0_ns, int result,
						      int err)
{
	nl_runtime_kick();
	count(e, what, t0_ns, result, err);
}

void nl_acq_connected(int fd, struct nl_fd *e, int what, unsigned long long t0_ns, int result, int err)
{
	NL_HOOK_SCOPE;
	if (what == NL_DEST_NONE)
		return;
	if (what == NL_ACQ_RECHECK) {
		recheck(fd, result, err);
		return;
	}
	/* Kicked before anything is written: the first record makes the segment
	 * (state.h). The first time out of line, so that the usual case needs
	 * no stack frame. */
	if (!atomic_load_explicit(&nl_runtime_kicked, memory_order_acquire)) {
		kick_then_count(e, what, t0_ns, result, err);
		return;
	}
	count(e, what, t0_ns, result, err);
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

void nl_acq_so_error(int fd, int so_error)
{
	NL_HOOK_SCOPE;
	if (so_error != 0) {
		settle(fd, NL_QUEUE_ABANDONED);
		return;
	}
	struct sockaddr_storage peer;
	socklen_t plen = sizeof peer;
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
		settle(fd, NL_QUEUE_OK);
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
