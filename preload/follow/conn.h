/* SPDX-License-Identifier: Apache-2.0 */
/* A connection's HTTP bytes followed whatever carries them: the same parsing
 * and metrics as a followed socket's (follow.h), on a conn the caller keeps
 * (NL_HTTPCONN_SIZE bytes, suitably aligned, in memory it never frees while
 * in use). The OpenSSL hooks find theirs by SSL object (hooks/ssl.c).
 */
#ifndef NL_CONN_H
#define NL_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fdtable.h"

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

#endif
