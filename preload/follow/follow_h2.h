/* SPDX-License-Identifier: Apache-2.0 */
/* Following HTTP/2 connections: the glue between the HTTP/1.x glue
 * (follow.c, which hands a connection over when its first bytes are HTTP/2's),
 * the HTTP/2 parser (h2.h) and the HTTP and RPC metrics.
 *
 * A connection is HTTP/2 from the moment a direction's first bytes are the
 * client's connection preface or the server's SETTINGS: prior knowledge
 * (h2c, gRPC's insecure channels), the bytes after a 101 to "Upgrade: h2c",
 * and the plaintext of TLS connections that agreed on "h2" (ALPN) through
 * the OpenSSL hooks, on either side. Its state (struct nl_h2conn, the two
 * HPACK tables and the streams) comes from a pool mapped a chunk at a time;
 * the conn keeps a pointer to it where the HTTP/1.x parser was.
 *
 * Private to the follow layer.
 */
#ifndef NL_FOLLOW_H2_H
#define NL_FOLLOW_H2_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "httpconn.h"

#define NL_H2_CONNS 1024        /* HTTP/2 connections followed at once; more are given up */

/* Whether c is followed as HTTP/2. */
static inline bool nl_follow_h2_followed(struct nl_httpconn *c)
{
	return atomic_load_explicit(&c->fed, memory_order_acquire) == NL_FED_H2;
}

/* n bytes of direction dir of an HTTP/2 conn (claimed by the caller). False
 * once it is no longer followed. */
bool nl_follow_h2_feed(struct nl_httpconn *c, enum nl_h1_dir dir, const void *buf, size_t n, uint64_t t0_ns);
/* The connection ended, both directions claimed by the caller: its streams
 * in flight are reported as cut short, its state goes back to the pool. */
void nl_follow_h2_close(struct nl_httpconn *c);
/* The same, claiming the directions itself (the fd is being closed). */
void nl_follow_h2_end(struct nl_httpconn *c);

/* Bytes of HTTP/2 state per followed connection. */
extern const size_t nl_follow_h2_conn_size;

#endif
