/* SPDX-License-Identifier: Apache-2.0 */
/* Destination naming: which server a connect() goes to.
 *
 * NEMOLENS_DESTINATIONS is a comma-separated list of name=target rules; the
 * first rule that matches names the destination, and anything unmatched is
 * "external", as in NeMo Gym. Targets:
 *
 *   host:port     a hostname; matches the addresses the program itself
 *                 resolved for it (getaddrinfo is observed; the shim never
 *                 does DNS of its own)
 *   ip:port       an IPv4 address, or [v6]:port for IPv6
 *   ip/prefix     an IPv4 or IPv6 network, any port
 *   *:port        any address on that port
 *   unix:/path    a Unix stream socket path
 *
 * A port may be "*" (any). IPv4-mapped IPv6 addresses match IPv4 rules.
 * Matching is lock-free and allocation-free, so hooks call it directly.
 */
#ifndef NL_DEST_H
#define NL_DEST_H

#include <stddef.h>
#include <sys/socket.h>
#include <netdb.h>

#define NL_MAX_RULES 1024
#define NL_MAX_DEST_NAMES 256

/* Destination indices: 0 is "external", 1..n named destinations, and
 * NL_DEST_OVERFLOW stands for names beyond NL_MAX_DEST_NAMES. */
#define NL_DEST_EXTERNAL 0
#define NL_DEST_OVERFLOW (NL_MAX_DEST_NAMES + 1)
#define NL_DEST_SLOTS (NL_MAX_DEST_NAMES + 2)
#define NL_DEST_NONE (-1)   /* not a destination the shim counts */

/* Parses the rules (NULL or "" means none). Invalid rules are skipped with one
 * warning each; the valid ones still apply. Not thread-safe: call before hooks
 * can match (from the constructor). Returns the number of rules kept. */
int nl_dest_configure(const char *rules);
void nl_dest_reset(void);

/* The destination index for a connect() to addr, or NL_DEST_NONE when the
 * address is not one the shim counts (AF_UNSPEC, a Unix path no rule names). */
int nl_dest_match(const struct sockaddr *addr, socklen_t len);

/* The destination index for a connection known only by a host name (TLS
 * whose SSL object has no socket: the SNI name, or a request's Host): the
 * first host:port rule naming that host (case-insensitive, a trailing dot
 * ignored) whose port matches; port -1 (unknown) matches any. An address
 * literal ("10.0.0.5", "[fd00::1]") with a known port is matched as
 * nl_dest_match would match that address. NL_DEST_EXTERNAL when nothing
 * matches. Lock-free, no allocation. */
int nl_dest_match_name(const char *name, size_t len, int port);

/* The attribute value for a destination index. */
const char *nl_dest_name(int index);
/* The number of named destinations (indices 1..n). */
int nl_dest_count(void);

/* Called by the getaddrinfo hook with what the program resolved. */
void nl_dest_note_resolved(const char *node, const struct addrinfo *res);

#endif
