/* SPDX-License-Identifier: Apache-2.0 */
/* Following the HTTP bytes of a socket: the glue between the I/O hooks, the
 * parsers (h1.h; HTTP/2 in follow_h2.h) and the HTTP metrics
 * (httpmetrics.h).
 *
 * A socket becomes a candidate when it is accepted (server side) or
 * connected (client side); its first bytes in each direction then decide,
 * and a socket found not to carry HTTP costs nothing more. The parser
 * state of a followed socket (struct nl_httpconn, at most 256 bytes) lives
 * in a table indexed by fd, mapped a chunk at a time on first use: no
 * allocation in any hook.
 *
 * Server side, bytes read are the request stream and bytes written the
 * response stream; client side, the other way round. Durations run from the
 * call that carried a request's first byte to the one that carried its
 * response's last (server: read to write; client: write to read).
 */
#ifndef NL_FOLLOW_H
#define NL_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "clock.h"
#include "conn.h"
#include "fdtable.h"

/* Starts following the socket of entry e (just connected: a socket just
 * accepted is followed by nl_fd_track_followed); dest is the destination
 * index of a client socket. Only the fd's entry: the connection's state is
 * set up with its first bytes (first_feed in follow.c), since most
 * candidates (any connected socket, any accepted one) never carry HTTP, or
 * none before they close. */
static inline void nl_follow_watch(struct nl_fd *e, enum nl_fd_http side, int dest)
{
	__atomic_store_n(&e->dest, (int16_t)dest, __ATOMIC_RELAXED);   /* see nl_fd_track_followed */
	nl_fd_http_start(e, side);
}

/* After an I/O call on a followed fd moved n > 0 bytes; out: written. t0_ns
 * is the time before a write (a client's request starts when its first
 * byte is handed over, not when the call returns), 0 for reads. Not cold:
 * on a followed fd every call comes here, and the unfollowed paths never
 * reach the calls. One buffer's bytes go through nl_follow_feed_bytes
 * (httpconn.h), inline in the hooks; a vector's through this. */
void nl_follow_iov(struct nl_fd *e, int fd, int out, const struct iovec *iov, size_t iovcnt, size_t n,
		 uint64_t t0_ns);
/* The time before a write on e, when it can start a client's request.
 * Inline: every write on a followed socket asks. */
static inline uint64_t nl_follow_write_start(struct nl_fd *e)
{
	return nl_fd_http_side(e) == NL_HTTP_CLIENT ? nl_monotonic_ns() : 0;
}
/* A read returned 0: the peer ended its stream, which ends the exchanges. */
void nl_follow_eof(struct nl_fd *e, int fd) __attribute__((cold));
/* The fd is going away: settle its exchanges, stop following it. */
void nl_follow_release(int fd) __attribute__((cold));

/* TLS took over socket fd: the fd path stops following it. Returns the
 * destination the connect hook recorded while it still followed it as a
 * client, else -1. */
int nl_follow_fd_handoff(int fd);

#endif
