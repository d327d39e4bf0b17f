/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run's Prometheus endpoint (scrape.h), on libmicrohttpd.
 *
 * libmicrohttpd is opened when the endpoint starts, not linked: linked, it
 * and the TLS library it brings (gnutls and some ten more) would be mapped
 * at every start of nemolens-run, about 2 ms, scraped or not. */
#include "scrape.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "exposition.h"
#include "lazylib.h"
#include "log.h"
#include "treestore.h"

#define MHD_LIBRARY "libmicrohttpd.so.12"

/* The functions used, in the order of their names below. */
static struct {
	__typeof__(MHD_start_daemon) *start_daemon;
	__typeof__(MHD_stop_daemon) *stop_daemon;
	__typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
	__typeof__(MHD_add_response_header) *add_response_header;
	__typeof__(MHD_queue_response) *queue_response;
	__typeof__(MHD_destroy_response) *destroy_response;
	__typeof__(MHD_lookup_connection_value) *lookup_connection_value;
	__typeof__(MHD_get_connection_info) *get_connection_info;
} mhd;
static const char mhd_names[] = "MHD_start_daemon\0MHD_stop_daemon\0MHD_create_response_from_buffer\0"
				"MHD_add_response_header\0MHD_queue_response\0MHD_destroy_response\0"
				"MHD_lookup_connection_value\0MHD_get_connection_info";
static struct nl_lazylib mhd_lib;

/* Bounds on what a client may cost: connections at once, seconds of
 * silence before one is closed, bytes of request head (beyond it
 * libmicrohttpd answers 414 or 431). */
#define MAX_CONNECTIONS 32
#define IDLE_SECONDS 10
#define CONNECTION_MEMORY (16 * 1024)

static struct {
	struct MHD_Daemon *daemon;
	bool loopback_only;             /* bound to a loopback address */
} server;

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *text, const char *allow)
{
	struct MHD_Response *r =
		mhd.create_response_from_buffer(strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (allow)
		mhd.add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result ret = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return ret;
}

/* OpenMetrics when the client names it among what it accepts (Prometheus
 * names it first, with the text format as its fallback). */
static bool wants_openmetrics(struct MHD_Connection *c)
{
	const char *accept = mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	return accept && strstr(accept, "application/openmetrics-text") != NULL;
}

static bool announces_body(struct MHD_Connection *c)
{
	const char *len = mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	return mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
	       (len && strspn(len, "0") != strlen(len));
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **req)
{
	(void)cls, (void)version, (void)upload, (void)upload_size, (void)req;
	const union MHD_ConnectionInfo *ci = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (server.loopback_only && (!ci || !ci->client_addr || !is_loopback(ci->client_addr)))
		return reply(c, MHD_HTTP_FORBIDDEN, "only loopback clients may scrape this endpoint\n", NULL);
	bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
	if (!head && strcmp(method, MHD_HTTP_METHOD_GET) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "GET, HEAD");
	if (strcmp(url, "/metrics") != 0)
		return reply(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n", NULL);
	/* Answered at its head: a body is never read. */
	if (announces_body(c))
		return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "a scrape has no body\n", NULL);
	bool om = wants_openmetrics(c);
	struct nl_promtext t = { 0 };
	if (treestore_render(&t, om) != 0) {
		nl_promtext_free(&t);
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
	}
	if (!t.p)   /* nothing recorded yet */
		nl_promtext_put(&t, "", 0);
	if (!t.p)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
	struct MHD_Response *r = mhd.create_response_from_buffer(t.len, t.p, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		nl_promtext_free(&t);
		return MHD_NO;
	}
	mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, om ? NL_EXPOSITION_OPENMETRICS : NL_EXPOSITION_TEXT);
	enum MHD_Result ret = mhd.queue_response(c, MHD_HTTP_OK, r);
	mhd.destroy_response(r);
	return ret;
}

/* The addresses of host, IPv4 ones first: localhost is 127.0.0.1, which
 * every client reaches, before ::1. */
static struct addrinfo *resolve(const char *host, char *why, unsigned long why_size)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *list = NULL;
	int e = getaddrinfo(host, NULL, &hints, &list);
	if (e != 0) {
		snprintf(why, why_size, "%s: %s", host, gai_strerror(e));
		return NULL;
	}
	struct addrinfo *v4 = NULL, **tail4 = &v4, *v6 = NULL, **tail6 = &v6;
	for (struct addrinfo *a = list, *next; a; a = next) {
		next = a->ai_next;
		a->ai_next = NULL;
		if (a->ai_family == AF_INET) {
			*tail4 = a;
			tail4 = &a->ai_next;
		} else {
			*tail6 = a;
			tail6 = &a->ai_next;
		}
	}
	*tail4 = v6;
	return v4;
}

int scrape_start(const char *host, long port, char *why, unsigned long why_size)
{
	if (!nl_lazylib_open(&mhd_lib, MHD_LIBRARY, mhd_names, &mhd, sizeof mhd / sizeof(void *), 0)) {
		snprintf(why, why_size, "cannot load " MHD_LIBRARY " (Debian's libmicrohttpd12)");
		return -1;
	}
	snprintf(why, why_size, "%s: no address", host);
	struct addrinfo *list = resolve(host, why, why_size);
	for (struct addrinfo *a = list; a && !server.daemon; a = a->ai_next) {
		if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
			continue;
		struct sockaddr_storage addr;
		memcpy(&addr, a->ai_addr, a->ai_addrlen);
		if (a->ai_family == AF_INET)
			((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)port);
		else
			((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)port);
		unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | (a->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
		/* Before the daemon starts: its thread reads it from its first
		 * request on, and the thread's creation orders this write first. */
		server.loopback_only = is_loopback((struct sockaddr *)&addr);
		server.daemon = mhd.start_daemon(flags, (uint16_t)port, NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR,
						 (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
						 (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
						 (unsigned)IDLE_SECONDS, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
						 (size_t)CONNECTION_MEMORY, MHD_OPTION_END);
		if (!server.daemon) {
			char text[INET6_ADDRSTRLEN] = "?";
			const void *in = a->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)&addr)->sin_addr
								 : (const void *)&((struct sockaddr_in6 *)&addr)->sin6_addr;
			inet_ntop(a->ai_family, in, text, sizeof text);
			snprintf(why, why_size, "cannot listen on %s port %ld (in use, or not an address of this host)",
				 text, port);
		}
	}
	if (list)
		freeaddrinfo(list);
	return server.daemon ? 0 : -1;
}

void scrape_stop(void)
{
	if (server.daemon)
		mhd.stop_daemon(server.daemon);
	server.daemon = NULL;
}
