/* SPDX-License-Identifier: Apache-2.0 */
/* Callgrind driver for the HTTP/1.x parser (preload/http/h1.c): N keep-alive
 * exchanges on one connection, each direction fed in one call.
 *
 *   cc -O2 -gdwarf-4 -Ipreload/http scripts/bench.d/h1_bench.c preload/http/h1.c -o h1_bench
 *   valgrind --tool=callgrind --toggle-collect=feed_req --toggle-collect=feed_resp ./h1_bench 1000
 *
 * (-gdwarf-4: valgrind 3.19 cannot read clang 14's default DWARF 5.)
 *
 * Only what runs inside feed_req and feed_resp (the parser and the sink) is
 * counted; divide by N for the cost of one request and one response. Then
 * N calls of 1 KiB inside a long response body: --toggle-collect=feed_body.
 * Without valgrind it prints the events seen, as a check, and ns per
 * exchange (the exchanges only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h1.h"

#if defined(__GNUC__) && !defined(__clang__)
#define OP __attribute__((noinline, noclone, used))
#else
#define OP __attribute__((noinline, used))
#endif

static const char req[] =
	"GET /v1/items HTTP/1.1\r\n"
	"Host: api.example.com\r\n"
	"User-Agent: python-httpx/0.27.0\r\n"
	"Accept: */*\r\n"
	"Accept-Encoding: gzip, deflate\r\n"
	"Connection: keep-alive\r\n"
	"Cookie: session=4f2a9c1e7b3d; theme=dark\r\n"
	"\r\n";

static const char resp_head[] =
	"HTTP/1.1 200 OK\r\n"
	"Date: Mon, 01 Jan 2024 00:00:00 GMT\r\n"
	"Server: nginx\r\n"
	"Content-Type: application/json\r\n"
	"Content-Length: 1024\r\n"
	"Connection: keep-alive\r\n"
	"\r\n";

static char resp[sizeof resp_head - 1 + 1024];

static unsigned long events[NL_H1_ERROR + 1];

static void sink(void *ctx, const struct nl_h1_event *ev)
{
	(void)ctx;
	events[ev->type]++;
	/* Folded events count as the ones they stand for. */
	if (ev->folded & NL_H1_FOLD_BEGIN)
		events[NL_H1_REQ_BEGIN]++;
	if (ev->folded & NL_H1_FOLD_END)
		events[NL_H1_REQ_END]++;
	if (ev->folded & NL_H1_FOLD_HEAD)
		events[NL_H1_RESP_HEAD]++;
}

OP bool feed_req(struct nl_h1 *h)
{
	return nl_h1_feed(h, NL_H1_REQUEST, req, sizeof req - 1, sink, NULL);
}

OP bool feed_resp(struct nl_h1 *h)
{
	return nl_h1_feed(h, NL_H1_RESPONSE, resp, sizeof resp, sink, NULL);
}

/* A read inside a long body: what every further call of a download costs. */
OP bool feed_body(struct nl_h1 *h)
{
	return nl_h1_feed(h, NL_H1_RESPONSE, resp + sizeof resp - 1024, 1024, sink, NULL);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	memcpy(resp, resp_head, sizeof resp_head - 1);
	memset(resp + sizeof resp_head - 1, 'x', 1024);
	static struct nl_h1 h;
	nl_h1_init(&h);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++) {
		if (!feed_req(&h) || !feed_resp(&h)) {
			fprintf(stderr, "h1_bench: the parser stopped at exchange %ld\n", i);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	bool ok = events[NL_H1_REQ_END] == (unsigned long)n && events[NL_H1_RESP_END] == (unsigned long)n;
	double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n;
	printf("%ld exchanges: %lu BEGIN %lu LINE %lu HEAD %lu REQEND %lu RESP %lu RESPEND; %.1f ns each\n", n,
	       events[NL_H1_REQ_BEGIN], events[NL_H1_REQ_LINE], events[NL_H1_REQ_HEAD], events[NL_H1_REQ_END],
	       events[NL_H1_RESP_HEAD], events[NL_H1_RESP_END], ns);
	/* Then one response of a body without end, read 1 KiB at a time. */
	static const char big[] = "GET /big HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char big_head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n";
	if (!nl_h1_feed(&h, NL_H1_REQUEST, big, sizeof big - 1, sink, NULL) ||
	    !nl_h1_feed(&h, NL_H1_RESPONSE, big_head, sizeof big_head - 1, sink, NULL))
		return 1;
	for (long i = 0; i < n; i++)
		if (!feed_body(&h))
			return 1;
	return ok ? 0 : 1;
}
