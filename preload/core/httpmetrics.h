/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP metrics (http.server.*, http.client.*, and NeMo Gym's endpoint
 * metrics gym.rollout.* and gym.verify.* derived from the routes), recorded
 * by the HTTP glue (preload/follow/) as the parser reports requests and responses.
 *
 * Every function here is lock-free, allocation-free and async-signal-safe:
 * the instruments are made ahead of time, by nl_httpmetrics_register at the
 * process's first record (the route table by its first request); series for
 * new (route, method, status, ...) combinations come from the registry's
 * reserved room, found again through the insert-only table (table.h) keyed
 * by the combination.
 */
#ifndef NL_HTTPMETRICS_H
#define NL_HTTPMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define NL_HTTP_METHODS_MAX 15          /* known methods; index NL_HTTP_METHODS_MAX is _OTHER */

/* Which sides are parsed (false until init, and when NEMOLENS_HTTP says so). */
extern bool nl_http_server_on, nl_http_client_on;

/* From the constructor: the configuration, and which sides are parsed. */
void nl_httpmetrics_init(const struct nl_config *cfg);
/* From the first record, before anything is written (state.h): the
 * instruments, with room for the series the hooks create. */
void nl_httpmetrics_register(void);

/* The method index of a request's method: a known method, else _OTHER. */
unsigned nl_http_method(const char *m, size_t n);
/* The index of GET and of POST (_OTHER's when not known): nl_http_method_of
 * tells them without a call, and most requests are one or the other. */
extern unsigned char nl_http_method_get, nl_http_method_post;
static inline unsigned nl_http_method_of(const char *m, size_t n)
{
	if (n == 3 && m[0] == 'G' && m[1] == 'E' && m[2] == 'T')
		return nl_http_method_get;
	if (n == 4 && m[0] == 'P' && m[1] == 'O' && m[2] == 'S' && m[3] == 'T')
		return nl_http_method_post;
	return nl_http_method(m, n);
}
/* The route id of a request target (route.h: an id, NL_ROUTE_NONE or _OVERFLOW). */
int nl_http_route(const char *target, size_t n, bool truncated);
/* The id of a Host header's host part (port in *port, 0 when absent), or -1
 * when the table of hosts is full. */
int nl_http_host(const char *host, size_t n, unsigned *port);
/* The host name of an id nl_http_host gave (server.address). */
const char *nl_http_host_name(int id);

#define NL_HTTP_SERVER_NAMES_MAX 250     /* NEMOLENS_HTTP_SERVER_NAME_LIMIT at most */
#define NL_HTTP_NAME_NONE (-1)          /* no Host: no http.server_name */
#define NL_HTTP_NAME_OVERFLOW (-2)      /* past the limit: the overflow series */

/* The id of a request's Host value as the server received it (n bytes,
 * host and port as sent; a name of its own per spelling), interned up to
 * NEMOLENS_HTTP_SERVER_NAME_LIMIT values; NL_HTTP_NAME_OVERFLOW past them,
 * NL_HTTP_NAME_NONE for no Host (NULL), an empty one, one with a byte
 * outside '!'..'~', and for any under OTEL_SEMCONV_STABILITY_OPT_IN=http. */
int nl_http_server_name(const char *host, size_t n);

/* A request's head was read (server) and it is now in flight / was answered
 * or dropped; tls: it came over TLS (url.scheme "https"); name: its server
 * name id. started returns whether the request was counted (a series another
 * thread is still making: not counted); only a counted request is ended,
 * with the same arguments. */
bool nl_http_server_started(unsigned method, bool tls, int name);
void nl_http_server_ended(unsigned method, bool tls, int name);

/* One finished exchange. status 0 means the connection ended before a
 * complete response (error.type connection_closed). A server's exchange
 * whose request was counted by nl_http_server_started (counted) also ends
 * it there: one call per exchange. */
struct nl_http_exchange {
	uint64_t duration_ns;
	uint64_t response_body;         /* server */
	uint32_t request_body;          /* server: capped at 4 GiB */
	uint16_t status;
	int16_t route;                  /* server: route id */
	int16_t host;                   /* client: host id, -1 unknown */
	uint16_t port;                  /* client: server.port */
	int16_t dest;                   /* client: destination index (dest.h) */
	int16_t name;                   /* server: the server name id it was counted under */
	uint8_t method;
	uint8_t version_minor;          /* 0, 1: HTTP/1.x; 2: HTTP/2 */
	bool tls;                       /* server: url.scheme "https" (client: no url.scheme attribute) */
	bool counted;                   /* server: counted in active requests */
};
void nl_http_server_done(const struct nl_http_exchange *x);
void nl_http_client_done(const struct nl_http_exchange *x);

#endif
