/* SPDX-License-Identifier: Apache-2.0 */
/* Following the HTTP/1.x bytes of a socket: the glue between the I/O hooks,
 * the parser (h1.h) and the HTTP metrics (httpmetrics.h).
 *
 * A socket becomes a candidate when it is accepted (server side) or
 * connected (client side); its first bytes in each direction then decide,
 * and a socket found not to carry HTTP/1.x costs nothing more. The parser
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
/* Bytes the program moved without the shim seeing them (sendfile, splice):
 * they can only be a body. */
void nl_follow_opaque(struct nl_fd *e, int fd, int out, size_t n) __attribute__((cold));
/* A read returned 0: the peer ended its stream, which ends the exchanges. */
void nl_follow_eof(struct nl_fd *e, int fd) __attribute__((cold));
/* The fd is going away: settle its exchanges, stop following it. */
void nl_follow_release(int fd) __attribute__((cold));

/* ---- connections found by something else than their fd (TLS: ssl.h) ----------
 * The same parsing and metrics on a conn the caller keeps (NL_HTTPCONN_SIZE
 * bytes, suitably aligned, in memory it never frees while in use). */
struct nl_httpconn;
#define NL_HTTPCONN_SIZE 256
enum {
	NL_HTTPCONN_TLS = 1,            /* url.scheme "https"; Host without a port means 443 */
	NL_HTTPCONN_DEST_BY_NAME = 2,   /* client: no peer known, the destination was named by a host
					 * name; each request's Host header (name and port) may refine it */
};
/* Sets c up for a new connection (side NL_HTTP_SERVER or _CLIENT). */
void nl_httpconn_init(struct nl_httpconn *c, enum nl_fd_http side, int dest, unsigned flags);
/* n > 0 bytes moved (out: written); t0_ns as for nl_follow_iov. False once
 * c is no longer parsed: the caller may stop feeding it. */
bool nl_httpconn_bytes(struct nl_httpconn *c, int out, const void *buf, size_t n, uint64_t t0_ns);
bool nl_httpconn_opaque(struct nl_httpconn *c, int out, size_t n);
uint64_t nl_httpconn_write_start(const struct nl_httpconn *c);
/* The connection ended: settles its exchanges. False (nothing done) while
 * another thread is feeding it: the caller ends it later. */
bool nl_httpconn_end(struct nl_httpconn *c);

/* TLS took over socket fd: the fd path stops following it. Returns the
 * destination the connect hook recorded while it still followed it as a
 * client, else -1. */
int nl_follow_fd_handoff(int fd);

#endif
