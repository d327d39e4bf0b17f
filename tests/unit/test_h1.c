/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/1.x push parser (preload/http/h1.c): message exchanges whose
 * events were written by hand from RFC 9112, each fed whole, split in two at
 * every offset and one byte per call; several messages per call; both
 * directions fed from two threads. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h1.h"
#include "helpers.h"

/* ---- recording events as text ------------------------------------------------ */

/* Events rendered one after the other, "; " between them. */
struct rec {
	char text[16384];
	size_t len;
	unsigned n;
};

/* Fields an event of this type does not carry must be empty: rendered as
 * " !extra" so that any stray value shows up in a comparison. */
static bool extra(const struct nl_h1_event *ev)
{
	bool line = ev->type == NL_H1_REQ_LINE, head = ev->type == NL_H1_REQ_HEAD;
	bool end = ev->type == NL_H1_RESP_END || ev->type == NL_H1_RESP_UPGRADED;
	bool status = ev->type == NL_H1_RESP_HEAD || end;
	bool body = ev->type == NL_H1_REQ_END || end;
	return (!line && (ev->method || ev->method_len || ev->target || ev->target_len || ev->target_truncated ||
			  ev->same_line)) ||
	       (!head && (ev->host || ev->host_len)) || (ev->same_host && !ev->host) ||
	       (!line && ev->type != NL_H1_RESP_HEAD && ev->version_minor) || (!status && ev->status) ||
	       (!body && ev->body_size) || (ev->type == NL_H1_RESP_UPGRADED && ev->body_size) ||
	       ((ev->type == NL_H1_NOT_HTTP || ev->type == NL_H1_ERROR) && ev->slot);
}

/* Calls one(ctx, e) for each event ev stands for, the folded ones unfolded,
 * in their order. */
static void unfold(void *ctx, const struct nl_h1_event *ev, nl_h1_sink one)
{
	struct nl_h1_event e = *ev;
	e.folded = 0;
	if (ev->folded & NL_H1_FOLD_BEGIN) {
		struct nl_h1_event b = { .type = NL_H1_REQ_BEGIN, .slot = ev->slot };
		one(ctx, &b);
	}
	if (ev->folded & NL_H1_FOLD_HEAD) {
		struct nl_h1_event h = {
			.type = NL_H1_RESP_HEAD, .slot = ev->slot, .status = ev->status, .version_minor = ev->version_minor,
		};
		one(ctx, &h);
		e.version_minor = 0;
	}
	one(ctx, &e);
	if (ev->folded & NL_H1_FOLD_END) {
		struct nl_h1_event end = { .type = NL_H1_REQ_END, .slot = ev->slot };
		one(ctx, &end);
	}
}

static void record_one(void *ctx, const struct nl_h1_event *ev)
{
	struct rec *r = ctx;
	if (r->n++)
		put(r, "; ");
	switch (ev->type) {
	case NL_H1_REQ_BEGIN:
		put(r, "BEGIN %u", ev->slot);
		break;
	case NL_H1_REQ_LINE:
		put(r, "LINE %u %.*s %.*s %u%s", ev->slot, (int)ev->method_len, ev->method, (int)ev->target_len,
		    ev->target, ev->version_minor, ev->target_truncated ? " trunc" : "");
		break;
	case NL_H1_REQ_HEAD:
		if (ev->host)
			put(r, "HEAD %u host=%.*s", ev->slot, (int)ev->host_len, ev->host);
		else
			put(r, "HEAD %u -", ev->slot);
		break;
	case NL_H1_REQ_END:
		put(r, "REQEND %u %llu", ev->slot, (unsigned long long)ev->body_size);
		break;
	case NL_H1_RESP_HEAD:
		put(r, "RESP %u %u %u", ev->slot, ev->status, ev->version_minor);
		break;
	case NL_H1_RESP_END:
	case NL_H1_RESP_UPGRADED:
		put(r, "RESPEND %u %u %llu%s", ev->slot, ev->status, (unsigned long long)ev->body_size,
		    ev->type == NL_H1_RESP_UPGRADED ? " upgraded" : "");
		break;
	case NL_H1_ABORTED:
		put(r, "ABORTED %u", ev->slot);
		break;
	case NL_H1_NOT_HTTP:
		put(r, "NOT_HTTP");
		break;
	case NL_H1_ERROR:
		put(r, "ERROR");
		break;
	default:
		put(r, "?%d", (int)ev->type);
	}
	if (extra(ev))
		put(r, " !extra");
}

/* Folded events are rendered unfolded: the text is the same for any split. */
static void record(void *ctx, const struct nl_h1_event *ev)
{
	unsigned may = ev->type == NL_H1_REQ_LINE ? NL_H1_FOLD_BEGIN
		       : ev->type == NL_H1_REQ_HEAD ? NL_H1_FOLD_END
		       : ev->type == NL_H1_RESP_END || ev->type == NL_H1_RESP_UPGRADED ? NL_H1_FOLD_HEAD
											      : 0;
	if (ev->folded & ~may) {
		struct rec *r = ctx;
		put(r, "%s!folded %u", r->n++ ? "; " : "", ev->folded);
	}
	unfold(ctx, ev, record_one);
}

/* ---- feeding ------------------------------------------------------------------ */

struct conn {
	struct nl_h1 h;
	struct rec rec;
};

static void feed(struct conn *c, enum nl_h1_dir dir, const char *p, size_t n)
{
	bool more = nl_h1_feed(&c->h, dir, p, n, record, &c->rec);
	cr_assert_eq(more, nl_h1_active(&c->h), "feed's result must say whether the connection is still parsed");
}

/* Feeds p[0..n) in pieces: cuts[] are the offsets where a new call starts. */
static void feed_cut(struct conn *c, enum nl_h1_dir dir, const char *p, size_t n, const size_t *cuts, size_t ncuts)
{
	size_t at = 0;
	for (size_t i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : n;
		feed(c, dir, p + at, to - at);
		at = to;
	}
}

static void feed_bytes(struct conn *c, enum nl_h1_dir dir, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		feed(c, dir, p + i, 1);
}

/* The request bytes, then the response bytes, then the close: all at once,
 * split at req_cut / resp_cut (0: not split), or one byte per call. */
enum mode { WHOLE, SPLIT, BYTES };

static void run(struct conn *c, const char *req, size_t req_len, const char *resp, size_t resp_len, enum mode mode,
		size_t req_cut, size_t resp_cut)
{
	nl_h1_init(&c->h);
	memset(&c->rec, 0, sizeof c->rec);
	if (mode == BYTES) {
		feed_bytes(c, NL_H1_REQUEST, req, req_len);
		feed_bytes(c, NL_H1_RESPONSE, resp, resp_len);
	} else {
		feed_cut(c, NL_H1_REQUEST, req, req_len, &req_cut, mode == SPLIT && req_cut);
		feed_cut(c, NL_H1_RESPONSE, resp, resp_len, &resp_cut, mode == SPLIT && resp_cut);
	}
	nl_h1_close(&c->h, record, &c->rec);
	/* Nothing more after the close. */
	size_t len = c->rec.len;
	cr_assert_not(nl_h1_feed(&c->h, NL_H1_REQUEST, "GET / HTTP/1.1\r\n\r\n", 18, record, &c->rec));
	nl_h1_close(&c->h, record, &c->rec);
	cr_assert_eq(c->rec.len, len);
}

static struct conn conn;   /* large: not on the stack */

/* The events recorded in conn must be want; what is wrong, said by fmt. */
__attribute__((format(printf, 2, 3))) static void expect(const char *want, const char *fmt, ...)
{
	if (!strcmp(conn.rec.text, want))
		return;
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	cr_assert_fail("%s\n got: %s\nwant: %s", what, conn.rec.text, want);
}

/* Checks one exchange fed whole (with and without AVX2), split in two at
 * every offset of either direction, and one byte per call. */
static void check(const char *name, const char *req, size_t req_len, const char *resp, size_t resp_len,
		  const char *want)
{
	run(&conn, req, req_len, resp, resp_len, WHOLE, 0, 0);
	expect(want, "%s, fed whole", name);
	if (nl_h1_avx2) {
		/* The quick path's SSE2 copy too, where the CPU has AVX2. */
		nl_h1_avx2 = false;
		run(&conn, req, req_len, resp, resp_len, WHOLE, 0, 0);
		nl_h1_avx2 = true;
		expect(want, "%s, fed whole without AVX2", name);
	}
	for (size_t k = 1; k < req_len; k++) {
		run(&conn, req, req_len, resp, resp_len, SPLIT, k, 0);
		expect(want, "%s, request split at %zu", name, k);
	}
	for (size_t k = 1; k < resp_len; k++) {
		run(&conn, req, req_len, resp, resp_len, SPLIT, 0, k);
		expect(want, "%s, response split at %zu", name, k);
	}
	run(&conn, req, req_len, resp, resp_len, BYTES, 0, 0);
	expect(want, "%s, one byte per call", name);
}

/* String literals that may hold NUL bytes: pointer and length. */
#define B(s) s, sizeof(s) - 1

#define CHECK(name, req, resp, want) check(name, B(req), B(resp), want)

/* ---- framing ------------------------------------------------------------------ */

Test(h1, content_length)
{
	CHECK("content-length",
	      "POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello",
	      "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
	      "BEGIN 0; LINE 0 POST /upload 1; HEAD 0 host=example.com; REQEND 0 5; "
	      "RESP 0 201 1; RESPEND 0 201 2");
	CHECK("typical get",
	      "GET /v1/items HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n"
	      "Accept-Encoding: gzip, br\r\nConnection: keep-alive\r\nAuthorization: Bearer abc.def\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n"
	      "Date: Mon, 01 Jan 2024 00:00:00 GMT\r\nServer: nginx\r\nConnection: keep-alive\r\n\r\n"
	      "{\"items\":[1,2]}\n",
	      "BEGIN 0; LINE 0 GET /v1/items 1; HEAD 0 host=api.example.com; REQEND 0 0; "
	      "RESP 0 200 1; RESPEND 0 200 16");
	CHECK("zero, and names in any case",
	      "PUT /z HTTP/1.1\r\ncontent-LENGTH: 0\r\nHOST: H\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nCONTENT-length:0\r\n\r\n",
	      "BEGIN 0; LINE 0 PUT /z 1; HEAD 0 host=H; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 0");
	CHECK("repeated equal values, as lines and as a list",
	      "POST /r HTTP/1.1\r\nContent-Length: 3\r\nContent-Length:  3 \r\n\r\nabc",
	      "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nxy",
	      "BEGIN 0; LINE 0 POST /r 1; HEAD 0 -; REQEND 0 3; RESP 0 200 1; RESPEND 0 200 2");
	CHECK("names that only look like the ones that matter",
	      "GET /n HTTP/1.1\r\nContent-Lengths: 9\r\nContent: 9\r\nHostname: no\r\nHost-Alias: no\r\nHos: no\r\n"
	      "Transfer-Encodings: chunked\r\nTE: trailers\r\nX-Host: no\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Lengthy: 1\r\nContent-Length: 1\r\nTransfer: chunked\r\n\r\n!",
	      "BEGIN 0; LINE 0 GET /n 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 1");
	CHECK("a status line without a reason",
	      "GET / HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 404\r\nContent-Length: 1\r\n\r\nx",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; RESP 0 404 1; RESPEND 0 404 1");
}

Test(h1, chunked)
{
	CHECK("extensions and trailers",
	      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	      "5;name=val\r\nhello\r\n6 ; a=b;c=\"d\"\r\n world\r\n0\r\nX-Checksum: 1\r\nContent-Length: 99\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
	      "A\r\n0123456789\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0;x=y\r\n\r\n",
	      "BEGIN 0; LINE 0 POST /c 1; HEAD 0 host=h; REQEND 0 11; RESP 0 200 1; RESPEND 0 200 36");
	CHECK("chunked wins over content-length",
	      "POST / HTTP/1.1\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\nContent-Length: 1\r\n\r\n"
	      "0000000000000000000002\r\nab\r\n0\r\n\r\n",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; REQEND 0 3; RESP 0 200 1; RESPEND 0 200 2");
	CHECK("codings over several lines, parameters, empty elements",
	      "POST / HTTP/1.1\r\nTransfer-Encoding: gzip;q=1\r\nTransfer-Encoding: , chunked ,\r\n\r\n0\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\nuntil close",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 11");
	CHECK("a last coding that is not chunked ends a response with the connection",
	      "GET / HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 13");
	CHECK("bare LF in chunk framing",
	      "POST / HTTP/1.1\nTransfer-Encoding: chunked\n\n2\nab\n0\n\n",
	      "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n1\nx\n0\nT: 1\n\n",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; REQEND 0 2; RESP 0 200 1; RESPEND 0 200 1");
}

Test(h1, close_delimited)
{
	CHECK("HTTP/1.0 response without Content-Length",
	      "GET /old HTTP/1.0\r\nUser-Agent: x\r\n\r\n",
	      "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody until close",
	      "BEGIN 0; LINE 0 GET /old 0; HEAD 0 -; REQEND 0 0; RESP 0 200 0; RESPEND 0 200 16");
	CHECK("HTTP/1.1 response without framing, empty body",
	      "POST /p HTTP/1.1\r\nContent-Length: 1\r\n\r\nx",
	      "HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n",
	      "BEGIN 0; LINE 0 POST /p 1; HEAD 0 -; REQEND 0 1; RESP 0 500 1; RESPEND 0 500 0");
}

Test(h1, no_body)
{
	CHECK("HEAD",
	      "HEAD /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nTransfer-Encoding: chunked\r\n\r\n"
	      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz",
	      "BEGIN 0; LINE 0 HEAD /x 1; HEAD 0 host=a; REQEND 0 0; BEGIN 1; LINE 1 GET /y 1; HEAD 1 host=a; "
	      "REQEND 1 0; RESP 0 200 1; RESPEND 0 200 0; RESP 1 200 1; RESPEND 1 200 1");
	CHECK("204 and 304",
	      "DELETE /d HTTP/1.1\r\n\r\nGET /e HTTP/1.1\r\nIf-None-Match: \"x\"\r\n\r\n",
	      "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n"
	      "HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\nETag: \"x\"\r\n\r\n",
	      "BEGIN 0; LINE 0 DELETE /d 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET /e 1; HEAD 1 -; REQEND 1 0; "
	      "RESP 0 204 1; RESPEND 0 204 0; RESP 1 304 1; RESPEND 1 304 0");
}

Test(h1, interim)
{
	CHECK("100-continue then 200",
	      "PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\ndata",
	      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	      "BEGIN 0; LINE 0 PUT /f 1; HEAD 0 host=h; REQEND 0 4; RESP 0 200 1; RESPEND 0 200 0");
	CHECK("several interim responses, with fields and a Content-Length that means nothing",
	      "GET /i HTTP/1.1\r\n\r\nGET /j HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\nContent-Length: 5\r\n\r\n"
	      "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 100 Continue\r\n\r\n",
	      "BEGIN 0; LINE 0 GET /i 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET /j 1; HEAD 1 -; REQEND 1 0; "
	      "RESP 0 200 1; RESPEND 0 200 2; ABORTED 1");
}

Test(h1, upgrade)
{
	CHECK("101 Switching Protocols",
	      "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
	      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello",
	      "BEGIN 0; LINE 0 GET /ws 1; HEAD 0 host=h; REQEND 0 0; RESP 0 101 1; RESPEND 0 101 0 upgraded");
	CHECK("2xx to CONNECT",
	      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
	      "HTTP/1.1 200 Connection Established\r\n\r\n\x16\x03\x01\x00\x05hello",
	      "BEGIN 0; LINE 0 CONNECT example.com:443 1; HEAD 0 host=example.com:443; REQEND 0 0; "
	      "RESP 0 200 1; RESPEND 0 200 0 upgraded");
	CHECK("CONNECT refused: the connection stays HTTP",
	      "CONNECT example.com:443 HTTP/1.1\r\n\r\nCONNECT example.com:443 HTTP/1.1\r\nProxy-Authorization: x\r\n\r\n",
	      "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 3\r\n\r\nno!"
	      "HTTP/1.1 204 OK\r\n\r\n",
	      "BEGIN 0; LINE 0 CONNECT example.com:443 1; HEAD 0 -; REQEND 0 0; "
	      "BEGIN 1; LINE 1 CONNECT example.com:443 1; HEAD 1 -; REQEND 1 0; "
	      "RESP 0 407 1; RESPEND 0 407 3; RESP 1 204 1; RESPEND 1 204 0 upgraded");
	CHECK("2xx to a method that is not quite CONNECT",
	      "CONNECTX h:1 HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	      "BEGIN 0; LINE 0 CONNECTX h:1 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 0");
}

Test(h1, pipelining)
{
	CHECK("3 requests with mixed framing",
	      "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
	      "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
	      "PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\naa"
	      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n"
	      "HTTP/1.1 200 OK\r\n\r\nclose-body",
	      "BEGIN 0; LINE 0 GET /a 1; HEAD 0 host=h; REQEND 0 0; "
	      "BEGIN 1; LINE 1 POST /b 1; HEAD 1 host=h; REQEND 1 3; "
	      "BEGIN 2; LINE 2 PUT /c 1; HEAD 2 host=h; REQEND 2 2; "
	      "RESP 0 200 1; RESPEND 0 200 2; RESP 1 200 1; RESPEND 1 200 1; RESP 2 200 1; RESPEND 2 200 10");
	CHECK("4 pending is the most",
	      "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\nGET /4 HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2",
	      "BEGIN 0; LINE 0 GET /1 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET /2 1; HEAD 1 -; REQEND 1 0; "
	      "BEGIN 2; LINE 2 GET /3 1; HEAD 2 -; REQEND 2 0; BEGIN 3; LINE 3 GET /4 1; HEAD 3 -; REQEND 3 0; "
	      "RESP 0 200 1; RESPEND 0 200 1; RESP 1 200 1; RESPEND 1 200 1; ABORTED 2; ABORTED 3");
	CHECK("a fifth pending request is an error",
	      "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\nGET /4 HTTP/1.1\r\n\r\n"
	      "GET /5 HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	      "BEGIN 0; LINE 0 GET /1 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET /2 1; HEAD 1 -; REQEND 1 0; "
	      "BEGIN 2; LINE 2 GET /3 1; HEAD 2 -; REQEND 2 0; BEGIN 3; LINE 3 GET /4 1; HEAD 3 -; REQEND 3 0; "
	      "ERROR");
}

/* Requests and responses in turn: slots go round the ring. */
Test(h1, slots_wrap)
{
	nl_h1_init(&conn.h);
	memset(&conn.rec, 0, sizeof conn.rec);
	static struct rec want;
	for (unsigned i = 0; i < 130; i++) {
		char req[64];
		int n = snprintf(req, sizeof req, "GET /%u HTTP/1.1\r\n\r\n", i);
		feed(&conn, NL_H1_REQUEST, req, (size_t)n);
		feed(&conn, NL_H1_RESPONSE, B("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc"));
		unsigned s = i % NL_H1_PIPELINE;
		put(&want, "%sBEGIN %u; LINE %u GET /%u 1; HEAD %u -; REQEND %u 0; RESP %u 200 1; RESPEND %u 200 3",
		    i ? "; " : "", s, s, i, s, s, s, s);
	}
	nl_h1_close(&conn.h, record, &conn.rec);
	expect(want.text, "slots");
}

/* ---- request line and fields ---------------------------------------------------- */

#define A10 "aaaaaaaaaa"
#define A50 A10 A10 A10 A10 A10

Test(h1, request_line)
{
	CHECK("HTTP/1.0",
	      "GET /old HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
	      "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
	      "BEGIN 0; LINE 0 GET /old 0; HEAD 0 -; REQEND 0 0; RESP 0 200 0; RESPEND 0 200 0");
	CHECK("bare LF line ends",
	      "GET /lf HTTP/1.1\nHost: h\nContent-Length: 2\n\nok",
	      "HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
	      "BEGIN 0; LINE 0 GET /lf 1; HEAD 0 host=h; REQEND 0 2; RESP 0 200 1; RESPEND 0 200 1");
	CHECK("empty lines before request lines",
	      "\r\n\nGET / HTTP/1.1\r\n\r\n\r\n\r\nGET /2 HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 204 OK\r\n\r\n\r\nHTTP/1.1 204 OK\r\n\r\n",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET /2 1; HEAD 1 -; REQEND 1 0; "
	      "RESP 0 204 1; RESPEND 0 204 0; RESP 1 204 1; RESPEND 1 204 0");
	CHECK("other targets and methods",
	      "OPTIONS * HTTP/1.1\r\n\r\nGET http://h/p?q=1#x HTTP/1.1\r\n\r\nM-SEARCH /\xc3\xa9 HTTP/1.1\r\n\r\n"
	      "ABCDEFGHIJKLMNOP / HTTP/1.1\r\n\r\n",
	      "",
	      "BEGIN 0; LINE 0 OPTIONS * 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET http://h/p?q=1#x 1; HEAD 1 -; "
	      "REQEND 1 0; BEGIN 2; LINE 2 M-SEARCH /\xc3\xa9 1; HEAD 2 -; REQEND 2 0; "
	      "BEGIN 3; LINE 3 ABCDEFGHIJKLMNOP / 1; HEAD 3 -; REQEND 3 0; "
	      "ABORTED 0; ABORTED 1; ABORTED 2; ABORTED 3");
	/* 96 bytes are kept: "/" and 95 a. */
	CHECK("a long target, truncated",
	      "GET /" A50 A50 A50 "?x=1 HTTP/1.1\r\nHost: h\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	      "BEGIN 0; LINE 0 GET /" A50 A10 A10 A10 A10 "aaaaa 1 trunc; HEAD 0 host=h; REQEND 0 0; "
	      "RESP 0 200 1; RESPEND 0 200 0");
	CHECK("a target of exactly 96 bytes",
	      "GET /" A50 A10 A10 A10 A10 "aaaaa HTTP/1.1\r\n\r\n",
	      "",
	      "BEGIN 0; LINE 0 GET /" A50 A10 A10 A10 A10 "aaaaa 1; HEAD 0 -; REQEND 0 0; ABORTED 0");
	CHECK("a target of 97 bytes",
	      "GET /" A50 A10 A10 A10 A10 "aaaaab HTTP/1.1\r\n\r\n",
	      "",
	      "BEGIN 0; LINE 0 GET /" A50 A10 A10 A10 A10 "aaaaa 1 trunc; HEAD 0 -; REQEND 0 0; ABORTED 0");
}

Test(h1, host)
{
	CHECK("whitespace around it",
	      "GET / HTTP/1.1\r\nHost:   example.com:8080 \t\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 host=example.com:8080; REQEND 0 0; ABORTED 0");
	/* 48 bytes are kept. */
	CHECK("truncated",
	      "GET / HTTP/1.1\r\nHost: " A50 "bbbbbbbbbb.example\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 host=" A10 A10 A10 A10 "aaaaaaaa; REQEND 0 0; ABORTED 0");
	CHECK("empty",
	      "GET / HTTP/1.1\r\nHost:\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 host=; REQEND 0 0; ABORTED 0");
	CHECK("after a long target, in the same buffer",
	      "GET /" A50 A50 " HTTP/1.1\r\nAccept: */*\r\nhOsT: [::1]:80\r\n\r\n"
	      "GET /2 HTTP/1.1\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET /" A50 A10 A10 A10 A10 "aaaaa 1 trunc; HEAD 0 host=[::1]:80; REQEND 0 0; "
	      "BEGIN 1; LINE 1 GET /2 1; HEAD 1 -; REQEND 1 0; ABORTED 0; ABORTED 1");
}

/* ---- not HTTP --------------------------------------------------------------------- */

Test(h1, not_http)
{
	CHECK("TLS ClientHello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "", "NOT_HTTP");
	CHECK("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", "BEGIN 0; NOT_HTTP");
	CHECK("HTTP/2 version", "GET / HTTP/2.0\r\n\r\n", "", "BEGIN 0; NOT_HTTP");
	CHECK("Redis", "*1\r\n$4\r\nPING\r\n", "+PONG\r\n", "NOT_HTTP");
	CHECK("PostgreSQL SSLRequest", "\x00\x00\x00\x08\x04\xd2\x16\x2f", "", "NOT_HTTP");
	CHECK("PostgreSQL startup", "\x00\x00\x00\x21\x00\x03\x00\x00user\x00postgres\x00database\x00x\x00\x00",
	      "", "NOT_HTTP");
	CHECK("SSH client", "SSH-2.0-OpenSSH_9.2p1\r\n", "SSH-2.0-OpenSSH_9.2p1\r\n", "BEGIN 0; NOT_HTTP");
	CHECK("SMTP banner", "", "220 mail.example.com ESMTP\r\n", "NOT_HTTP");
	CHECK("binary", "\x00\x01\x02\x03", "\x00", "NOT_HTTP");
	CHECK("lowercase method", "get / HTTP/1.1\r\n\r\n", "", "NOT_HTTP");
	CHECK("HTTP/0.9", "GET /\r\n", "", "BEGIN 0; NOT_HTTP");
	CHECK("method too long", "ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\n\r\n", "", "BEGIN 0; NOT_HTTP");
	CHECK("control byte in the first request line", "GET /a\x01 HTTP/1.1\r\n\r\n", "", "BEGIN 0; NOT_HTTP");
	CHECK("HTTP request, other protocol answers", "GET / HTTP/1.1\r\n\r\n", "HTTP/2.0 200\r\n\r\n",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; NOT_HTTP");
	CHECK("HTTP request, bad first status", "GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n",
	      "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; NOT_HTTP");
}

/* Once NOT_HTTP, nothing: neither the other direction nor the close report. */
Test(h1, not_http_stops_everything)
{
	nl_h1_init(&conn.h);
	memset(&conn.rec, 0, sizeof conn.rec);
	cr_assert_not(nl_h1_feed(&conn.h, NL_H1_REQUEST, "\x16\x03", 2, record, &conn.rec));
	cr_assert_not(nl_h1_active(&conn.h));
	cr_assert_not(nl_h1_feed(&conn.h, NL_H1_REQUEST, "GET / HTTP/1.1\r\n\r\n", 18, record, &conn.rec));
	cr_assert_not(nl_h1_feed(&conn.h, NL_H1_RESPONSE, "HTTP/1.1 200 OK\r\n\r\n", 19, record, &conn.rec));
	nl_h1_close(&conn.h, record, &conn.rec);
	expect("NOT_HTTP", "not http");
}

/* ---- malformed ---------------------------------------------------------------------- */

#define GET0 "GET / HTTP/1.1\r\n\r\n"
#define GET0_EVENTS "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; "

Test(h1, malformed_request)
{
	CHECK("bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; ERROR");
	CHECK("empty chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; ERROR");
	CHECK("chunk size overflow", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1fffffffffffffffff\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; ERROR");
	CHECK("chunk size with junk", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5 5\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; ERROR");
	CHECK("chunk data longer than its size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n",
	      "", "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; ERROR");
	CHECK("non-digit Content-Length", "POST / HTTP/1.1\r\nContent-Length: 12a\r\n\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("negative Content-Length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("empty Content-Length", "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("Content-Length with a space inside", "POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("Content-Length overflow", "POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("conflicting Content-Length lines",
	      "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("conflicting Content-Length list", "POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\nhello!", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("Content-Length list ending in a comma", "POST / HTTP/1.1\r\nContent-Length: 5,\r\n\r\nhello", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("request Transfer-Encoding not ending in chunked",
	      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "", "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("request Transfer-Encoding with a bad byte", "POST / HTTP/1.1\r\nTransfer-Encoding: chun\"ked\r\n\r\n",
	      "", "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("field line without ':'", "GET / HTTP/1.1\r\nHost example.com\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("empty field name", "GET / HTTP/1.1\r\n: x\r\n\r\n", "", "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("whitespace before ':' of Host", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", "", "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("whitespace before ':' of Content-Length", "POST / HTTP/1.1\r\nContent-Length\t: 5\r\n\r\nhello", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("obs-fold", "GET / HTTP/1.1\r\nX-A: 1\r\n  continued\r\n\r\n", "", "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("whitespace before the first field", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("CR not followed by LF in a value", "POST / HTTP/1.1\r\nContent-Length: 5\rX\n\r\nhello", "",
	      "BEGIN 0; LINE 0 POST / 1; ERROR");
	CHECK("CR not followed by LF ending the fields", "GET / HTTP/1.1\r\n\r\r\n", "",
	      "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "", "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("space inside Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "", "BEGIN 0; LINE 0 GET / 1; ERROR");
	CHECK("control byte in a later request line", GET0 "GET /a\x01 HTTP/1.1\r\n\r\n", "",
	      GET0_EVENTS "BEGIN 1; ERROR");
	CHECK("bad version in a later request line", GET0 "GET / HTTP/1.2\r\n\r\n", "", GET0_EVENTS "BEGIN 1; ERROR");
	CHECK("empty target in a later request line", GET0 "GET  HTTP/1.1\r\n\r\n", "", GET0_EVENTS "BEGIN 1; ERROR");
	CHECK("garbage after a request", GET0 "\x16\x03\x01", "", GET0_EVENTS "ERROR");
	CHECK("CR not followed by LF between requests", GET0 "\rGET / HTTP/1.1\r\n\r\n", "", GET0_EVENTS "ERROR");
}

Test(h1, malformed_response)
{
	CHECK("a response to nothing", "", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "ERROR");
	CHECK("an interim response to nothing", "", "HTTP/1.1 100 Continue\r\n\r\n", "ERROR");
	CHECK("more responses than requests", GET0,
	      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	      GET0_EVENTS "RESP 0 200 1; RESPEND 0 200 0; ERROR");
	CHECK("bad later status", GET0 GET0,
	      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 2000 OK\r\n\r\n",
	      GET0_EVENTS "BEGIN 1; LINE 1 GET / 1; HEAD 1 -; REQEND 1 0; RESP 0 200 1; RESPEND 0 200 0; ERROR");
	CHECK("status 099", GET0, "HTTP/1.1 099 OK\r\n\r\n", GET0_EVENTS "NOT_HTTP");
	CHECK("bad Content-Length", GET0, "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
	      GET0_EVENTS "ERROR");
	CHECK("bad chunk end", GET0, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
	      GET0_EVENTS "RESP 0 200 1; ERROR");
	CHECK("field line without ':'", GET0, "HTTP/1.1 200 OK\r\nContent-Length\r\n\r\n", GET0_EVENTS "ERROR");
	CHECK("whitespace before ':' of Transfer-Encoding", GET0,
	      "HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", GET0_EVENTS "ERROR");
	CHECK("CR CR", GET0, "HTTP/1.1 200 OK\r\nServer: x\r\n\r\r\n", GET0_EVENTS "ERROR");
}

/* Caps on sizes: built at run time, checked in the three ways too. */
static char big_req[40000];

static size_t build(const char *head, char fill, size_t fill_len, const char *tail)
{
	size_t n = strlen(head), m = strlen(tail);
	cr_assert_lt(n + fill_len + m, sizeof big_req);
	memcpy(big_req, head, n);
	memset(big_req + n, fill, fill_len);
	memcpy(big_req + n + fill_len, tail, m);
	return n + fill_len + m;
}

/* The three ways, for a request only; one split offset in 97 is enough here. */
static void check_big(const char *name, size_t len, const char *want)
{
	run(&conn, big_req, len, "", 0, WHOLE, 0, 0);
	expect(want, "%s, fed whole", name);
	for (size_t k = 1; k < len; k += 97) {
		run(&conn, big_req, len, "", 0, SPLIT, k, 0);
		expect(want, "%s, split at %zu", name, k);
	}
	run(&conn, big_req, len, "", 0, BYTES, 0, 0);
	expect(want, "%s, one byte per call", name);
}

Test(h1, caps)
{
	/* A field line of 8192 bytes (CRLF included) is the longest. */
	size_t n = build("GET / HTTP/1.1\r\nX-Big: ", 'v', 8192 - 9, "\r\n\r\n");
	check_big("longest field line", n, "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; ABORTED 0");
	n = build("GET / HTTP/1.1\r\nX-Big: ", 'v', 8192 - 8, "\r\n\r\n");
	check_big("field line too long", n, "BEGIN 0; LINE 0 GET / 1; ERROR");
	n = build("GET / HTTP/1.1\r\nHost: ", 'h', 8192 - 7, "\r\n\r\n");
	check_big("Host line too long", n, "BEGIN 0; LINE 0 GET / 1; ERROR");
	n = build("GET / HTTP/1.1\r\nX-", 'n', 9000, ": v\r\n\r\n");
	check_big("field name too long", n, "BEGIN 0; LINE 0 GET / 1; ERROR");
	/* Method, SP, target, SP: at most 16384 bytes. */
	n = build(GET0 "GET /", 'p', 16384 - 6, " HTTP/1.1\r\n\r\n");
	char want[512], p95[96];
	memset(p95, 'p', 95);
	p95[95] = 0;
	snprintf(want, sizeof want, GET0_EVENTS "BEGIN 1; LINE 1 GET /%s 1 trunc; HEAD 1 -; REQEND 1 0; ABORTED 0; ABORTED 1",
		 p95);
	check_big("longest request line", n, want);
	n = build(GET0 "GET /", 'p', 16384 - 5, " HTTP/1.1\r\n\r\n");
	check_big("request line too long", n, GET0_EVENTS "BEGIN 1; ERROR");
	n = build("GET /", 'p', 16384 - 5, " HTTP/1.1\r\n\r\n");
	check_big("first request line too long", n, "BEGIN 0; NOT_HTTP");
	n = build("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;", 'e', 9000, "\r\nx\r\n0\r\n\r\n");
	check_big("chunk extension too long", n, "BEGIN 0; LINE 0 POST / 1; HEAD 0 -; ERROR");
}

Test(h1, too_many_fields)
{
	static const char line[] = "X-Field: value\r\n";
	size_t n = 0;
	const char *start = "GET / HTTP/1.1\r\n";
	memcpy(big_req, start, strlen(start));
	n = strlen(start);
	for (int i = 0; i < 256; i++) {
		memcpy(big_req + n, line, sizeof line - 1);
		n += sizeof line - 1;
	}
	memcpy(big_req + n, "\r\n", 2);
	check_big("256 fields", n + 2, "BEGIN 0; LINE 0 GET / 1; HEAD 0 -; REQEND 0 0; ABORTED 0");
	memcpy(big_req + n, line, sizeof line - 1);
	n += sizeof line - 1;
	memcpy(big_req + n, "\r\n", 2);
	check_big("257 fields", n + 2, "BEGIN 0; LINE 0 GET / 1; ERROR");
}

/* ---- the close ------------------------------------------------------------------------ */

Test(h1, close)
{
	CHECK("response head seen, body unfinished", "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
	      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
	      "BEGIN 0; LINE 0 GET /a 1; HEAD 0 -; REQEND 0 0; BEGIN 1; LINE 1 GET /b 1; HEAD 1 -; REQEND 1 0; "
	      "RESP 0 200 1; RESPEND 0 200 1; RESP 1 200 1; ABORTED 1");
	CHECK("close-delimited response, then unanswered requests", GET0 GET0 GET0,
	      "HTTP/1.1 200 OK\r\n\r\nbody",
	      GET0_EVENTS "BEGIN 1; LINE 1 GET / 1; HEAD 1 -; REQEND 1 0; BEGIN 2; LINE 2 GET / 1; HEAD 2 -; "
			  "REQEND 2 0; RESP 0 200 1; RESPEND 0 200 4; ABORTED 1; ABORTED 2");
	CHECK("request head unfinished: pending once its line is complete", "GET /a HTTP/1.1\r\nHost: x", "",
	      "BEGIN 0; LINE 0 GET /a 1; ABORTED 0");
	CHECK("request body unfinished", "POST /a HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", "",
	      "BEGIN 0; LINE 0 POST /a 1; HEAD 0 -; ABORTED 0");
	CHECK("request line unfinished: not pending", "GET /a HTT", "", "BEGIN 0");
	CHECK("response status line unfinished", GET0, "HTTP/1.1 20", GET0_EVENTS "ABORTED 0");
	CHECK("after an error, nothing", "GET /a HTTP/1.1\r\nContent-Length: x\r\n\r\n", "",
	      "BEGIN 0; LINE 0 GET /a 1; ERROR");
	CHECK("nothing at all", "", "", "");
}

/* ---- bytes the caller moved without seeing them (sendfile, splice) ------------------ */

static void feed_opaque(size_t n)
{
	bool more = nl_h1_feed_opaque(&conn.h, NL_H1_RESPONSE, n, record, &conn.rec);
	cr_assert_eq(more, nl_h1_active(&conn.h));
}

static void start(const char *req)
{
	nl_h1_init(&conn.h);
	memset(&conn.rec, 0, sizeof conn.rec);
	feed(&conn, NL_H1_REQUEST, req, strlen(req));
}

Test(h1, opaque)
{
	start("GET /f HTTP/1.1\r\n\r\n");
	feed(&conn, NL_H1_RESPONSE, B("HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n"));
	feed_opaque(0);
	feed_opaque(1000);
	feed_opaque(24);
	nl_h1_close(&conn.h, record, &conn.rec);
	expect("BEGIN 0; LINE 0 GET /f 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 1024", "content-length");

	start("GET /f HTTP/1.1\r\n\r\n");
	feed(&conn, NL_H1_RESPONSE, B("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n"));
	feed_opaque(1024);
	feed(&conn, NL_H1_RESPONSE, B("\r\n0\r\n\r\n"));
	nl_h1_close(&conn.h, record, &conn.rec);
	expect("BEGIN 0; LINE 0 GET /f 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 1024", "chunk data");

	start("GET /f HTTP/1.0\r\n\r\n");
	feed(&conn, NL_H1_RESPONSE, B("HTTP/1.0 200 OK\r\n\r\nab"));
	feed_opaque(5000);
	nl_h1_close(&conn.h, record, &conn.rec);
	expect("BEGIN 0; LINE 0 GET /f 0; HEAD 0 -; REQEND 0 0; RESP 0 200 0; RESPEND 0 200 5002", "close-delimited");

	/* A client's upload. */
	start("PUT /u HTTP/1.1\r\nContent-Length: 10\r\n\r\n");
	cr_assert(nl_h1_feed_opaque(&conn.h, NL_H1_REQUEST, 10, record, &conn.rec));
	expect("BEGIN 0; LINE 0 PUT /u 1; HEAD 0 -; REQEND 0 10", "request body");
}

Test(h1, opaque_outside_a_body)
{
	start("GET /f HTTP/1.1\r\n\r\n");
	feed(&conn, NL_H1_RESPONSE, B("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"));
	feed_opaque(11);
	nl_h1_close(&conn.h, record, &conn.rec);
	expect("BEGIN 0; LINE 0 GET /f 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; ERROR", "past the body");

	start("GET /f HTTP/1.1\r\n\r\n");
	feed(&conn, NL_H1_RESPONSE, B("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n"));
	feed_opaque(5);
	expect("BEGIN 0; LINE 0 GET /f 1; HEAD 0 -; REQEND 0 0; RESP 0 200 1; ERROR", "past the chunk");

	start("GET /f HTTP/1.1\r\n\r\n");
	feed(&conn, NL_H1_RESPONSE, B("HTTP/1.1 200 OK\r\n"));
	feed_opaque(20);
	expect("BEGIN 0; LINE 0 GET /f 1; HEAD 0 -; REQEND 0 0; ERROR", "in the head");

	start("GET /f HTTP/1.1\r\n\r\n");
	feed_opaque(20);
	expect("BEGIN 0; LINE 0 GET /f 1; HEAD 0 -; REQEND 0 0; ERROR", "before the response");
}

/* ---- several messages per call ---------------------------------------------------------- */

/* Four requests and four responses of each framing in one call per direction. */
Test(h1, many_in_one_call)
{
	static char req[4096], resp[8192];
	size_t rn = 0, sn = 0;
	char want[2048];
	size_t wn = 0;
	for (unsigned i = 0; i < 4; i++) {
		rn += (size_t)snprintf(req + rn, sizeof req - rn,
				       "POST /m%u HTTP/1.1\r\nHost: h%u\r\nContent-Length: %u\r\n\r\n%.*s", i, i, i,
				       (int)i, "xyz");
		wn += (size_t)snprintf(want + wn, sizeof want - wn, "BEGIN %u; LINE %u POST /m%u 1; HEAD %u host=h%u; REQEND %u %u; ",
				       i, i, i, i, i, i, i);
	}
	for (unsigned i = 0; i < 4; i++) {
		unsigned body = i * 100;
		if (i % 2)
			sn += (size_t)snprintf(resp + sn, sizeof resp - sn,
					       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", body);
		else
			sn += (size_t)snprintf(resp + sn, sizeof resp - sn, "HTTP/1.1 200 OK\r\nContent-Length: %u\r\n\r\n",
					       body);
		memset(resp + sn, 'b', body);
		sn += body;
		if (i % 2)
			sn += (size_t)snprintf(resp + sn, sizeof resp - sn, "\r\n0\r\n\r\n");
		wn += (size_t)snprintf(want + wn, sizeof want - wn, "%sRESP %u 200 1; RESPEND %u 200 %u", i ? "; " : "", i,
				       i, body);
	}
	check("four of each", req, rn, resp, sn, want);
}

/* ---- the quick path: lengths around its loads ------------------------------------------- */

/* A whole message head in one call of 32 bytes or more goes the quick way
 * (h1.c): two 16-byte loads from each field line's start (the last 32 bytes
 * of the call near its end), word compares, Content-Length and Host at once.
 * These exchanges, built at run time, put lines, names, values, methods and
 * targets at every length around those sizes, and the end of the call right
 * after them, in the three ways of check(). */
static char qreq[4096], qresp[4096], qwant[1024], qname[256];

__attribute__((format(printf, 3, 4))) static size_t format(char *to, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(to, cap, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0 && (size_t)n < cap, "exchange too long");
	return (size_t)n;
}

/* n bytes of a pattern that shows any offset error, as a string. */
static const char *pattern(char *to, size_t n)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	for (size_t i = 0; i < n; i++)
		to[i] = abc[i % (sizeof abc - 1)];
	to[n] = 0;
	return to;
}

Test(h1, quick_line_lengths)
{
	char pad[128];
	for (size_t len = 0; len <= 80; len++) {
		pattern(pad, len);
		format(qname, sizeof qname, "a field line of %zu bytes", len + 9);
		size_t rn = format(qreq, sizeof qreq, "GET /q HTTP/1.1\r\nX-Pad: %s\r\nHost: h\r\n\r\n", pad);
		size_t sn = format(qresp, sizeof qresp, "HTTP/1.1 200 OK\r\nX-Pad: %s\r\nContent-Length: 3\r\n\r\nabc", pad);
		check(qname, qreq, rn, qresp, sn,
		      "BEGIN 0; LINE 0 GET /q 1; HEAD 0 host=h; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 3");
		/* The last field line, bare LF: the end of the head is the end of the call. */
		format(qname, sizeof qname, "the last field line of %zu bytes", len + 8);
		rn = format(qreq, sizeof qreq, "GET /q HTTP/1.1\nHost: h\nX-Pad: %s\n\n", pad);
		sn = format(qresp, sizeof qresp, "HTTP/1.1 200 OK\nContent-Length: 0\nX-Pad: %s\n\n", pad);
		check(qname, qreq, rn, qresp, sn,
		      "BEGIN 0; LINE 0 GET /q 1; HEAD 0 host=h; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 0");
	}
}

/* Names of no interest that start like one, or are as long as one. */
Test(h1, quick_name_lengths)
{
	static const char first[] = "XcChHtT";
	char name[64];
	for (size_t len = 1; len <= 40; len++) {
		for (const char *f = first; *f; f++) {
			memset(name, 'x', len);
			name[0] = *f;
			name[len] = 0;
			format(qname, sizeof qname, "a name of %zu bytes from '%c'", len, *f);
			size_t rn = format(qreq, sizeof qreq,
					   "GET /n HTTP/1.1\r\n%s: v\r\nUser-Agent: quick\r\n%s:v\r\nHost: h\r\n\r\n", name,
					   name);
			size_t sn = format(qresp, sizeof qresp,
					   "HTTP/1.1 200 OK\r\n%s: v\r\nContent-Length: 1\r\n%s:\r\n\r\n!", name, name);
			check(qname, qreq, rn, qresp, sn,
			      "BEGIN 0; LINE 0 GET /n 1; HEAD 0 host=h; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 1");
		}
	}
}

/* Content-Length values: len >= 0, the body size (and a body of that many
 * bytes when short), -1 malformed. */
static const struct {
	const char *value;
	long long len;
} cl_values[] = {
	{ "0", 0 }, { "1", 1 }, { "7", 7 }, { "12", 12 }, { "007", 7 }, { " 5", 5 }, { "5 ", 5 }, { "\t5\t", 5 },
	{ "5,5", 5 }, { "5, 5", 5 }, { "05 ,5", 5 }, { "00000000000000000000000000000001", 1 }, { "99", 99 },
	{ "1234567", 1234567 }, { "12345678", 12345678 }, { "123456789", 123456789 },
	{ "1234567890123456789", 1234567890123456789ll }, { "", -1 }, { "+5", -1 }, { "-1", -1 }, { "5x", -1 },
	{ "x5", -1 }, { "0x5", -1 }, { "1 2", -1 }, { "5,", -1 }, { ",5", -1 }, { "5,6", -1 }, { "5;", -1 },
	{ "18446744073709551616", -1 }, { "99999999999999999999", -1 }, { "1234567\x01", -1 },
};

Test(h1, quick_content_length)
{
	static char body[128];
	memset(body, 'b', sizeof body - 1);
	for (size_t i = 0; i < sizeof cl_values / sizeof cl_values[0]; i++) {
		const char *v = cl_values[i].value;
		long long len = cl_values[i].len;
		int shown = len >= 0 && len < (long long)sizeof body ? (int)len : 0;
		for (int lf = 0; lf < 2; lf++) {
			const char *eol = lf ? "\n" : "\r\n";
			format(qname, sizeof qname, "Content-Length '%s'%s", v, lf ? ", bare LF" : "");
			/* Request: the value is the last thing of the head (no body: the end of the call). */
			size_t rn = format(qreq, sizeof qreq, "POST /c HTTP/1.1%sHost: h%sContent-Length:%s%s%s%.*s", eol,
					   eol, v, eol, eol, shown, body);
			if (len < 0)
				format(qwant, sizeof qwant, "BEGIN 0; LINE 0 POST /c 1; ERROR");
			else if (len == shown)
				format(qwant, sizeof qwant,
				       "BEGIN 0; LINE 0 POST /c 1; HEAD 0 host=h; REQEND 0 %lld; RESP 0 204 1; RESPEND 0 204 0",
				       len);
			else    /* answered before its body */
				format(qwant, sizeof qwant,
				       "BEGIN 0; LINE 0 POST /c 1; HEAD 0 host=h; RESP 0 204 1; RESPEND 0 204 0");
			check(qname, qreq, rn, B("HTTP/1.1 204 No Content\r\n\r\n"), qwant);
			/* Response. */
			size_t sn = format(qresp, sizeof qresp, "HTTP/1.1 200 OK%sServer: s%sContent-Length: %s%s%s%.*s",
					   eol, eol, v, eol, eol, shown, body);
			if (len < 0)
				format(qwant, sizeof qwant, GET0_EVENTS "ERROR");
			else if (len == shown)
				format(qwant, sizeof qwant, GET0_EVENTS "RESP 0 200 1; RESPEND 0 200 %lld", len);
			else
				format(qwant, sizeof qwant, GET0_EVENTS "RESP 0 200 1; ABORTED 0");
			check(qname, B("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), qresp, sn, qwant);
		}
	}
}

Test(h1, quick_host)
{
	char host[128];
	for (size_t len = 0; len <= 64; len++) {
		pattern(host, len);
		int kept = len < NL_H1_HOST_MAX ? (int)len : NL_H1_HOST_MAX;
		format(qwant, sizeof qwant,
		       "BEGIN 0; LINE 0 GET /h 1; HEAD 0 host=%.*s; REQEND 0 0; RESP 0 200 1; RESPEND 0 200 0", kept,
		       host);
		static const char *const forms[] = {
			"GET /h HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\nUser-Agent: quick/1.0\r\n\r\n",
			"GET /h HTTP/1.1\r\nAccept: */*\r\nHost: %s\r\n\r\n",
			"GET /h HTTP/1.1\r\nAccept: */*\r\nHOST:%s\r\n\r\n",
			"GET /h HTTP/1.1\nhost:  \t%s \t\nAccept: */*\n\n",
		};
		for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
			format(qname, sizeof qname, "a Host of %zu bytes, form %zu", len, f);
			size_t rn = format(qreq, sizeof qreq, forms[f], host);
			check(qname, qreq, rn, B("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), qwant);
		}
		if (len < 2)
			continue;
		/* A control byte, or a space inside it; Host first, and last (near
		 * the end of the call). */
		static const char *const bad_forms[] = {
			"GET /h HTTP/1.1\r\nHost: %s\r\nAccept: */*\r\n\r\n",
			"GET /h HTTP/1.1\r\nAccept: */*\r\nHost: %s\r\n\r\n",
		};
		for (size_t at = 1; at < len; at += 7) {
			char bad = at % 2 && at + 1 < len ? ' ' : '\x01';
			host[at] = bad;
			for (size_t f = 0; f < sizeof bad_forms / sizeof bad_forms[0]; f++) {
				format(qname, sizeof qname, "a Host of %zu bytes, 0x%02x at %zu, form %zu", len, bad, at, f);
				size_t rn = format(qreq, sizeof qreq, bad_forms[f], host);
				check(qname, qreq, rn, "", 0, "BEGIN 0; LINE 0 GET /h 1; ERROR");
			}
			pattern(host, len);
		}
	}
}

Test(h1, quick_start_lines)
{
	static const char *const methods[] = {
		"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "CONNECT", "GETS", "POSTS", "POS", "GE",
		"G", "M-SEARCH", "GeT", "ABCDEFGHIJKLMNOP",
	};
	char target[64];
	for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
		const char *method = methods[m];
		bool head = !strcmp(method, "HEAD"), connect = !strcmp(method, "CONNECT");
		for (size_t len = 1; len <= 40; len++) {
			pattern(target, len);
			target[0] = '/';
			for (int v = 0; v < 3; v++) {
				/* HTTP/1.1 CRLF, HTTP/1.0 CRLF, HTTP/1.1 LF */
				format(qname, sizeof qname, "%s, a target of %zu bytes, version %d", method, len, v);
				size_t rn = format(qreq, sizeof qreq, "%s %s HTTP/1.%d%s\r\n", method, target, v != 1,
						   v == 2 ? "\n" : "\r\n");
				const char *resp = connect ? "HTTP/1.1 200 Connection established\r\n\r\n"
						   : head  ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
							   : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
				format(qwant, sizeof qwant, "BEGIN 0; LINE 0 %s %s %d; HEAD 0 -; REQEND 0 0; RESP 0 200 1; %s",
				       method, target, v != 1,
				       connect ? "RESPEND 0 200 0 upgraded" : head ? "RESPEND 0 200 0" : "RESPEND 0 200 2");
				check(qname, qreq, rn, resp, strlen(resp), qwant);
			}
		}
	}
}

Test(h1, quick_status_lines)
{
	static const struct {
		const char *line;
		unsigned status, minor;
	} lines[] = {
		{ "HTTP/1.1 200 OK\r\n", 200, 1 },
		{ "HTTP/1.1 200\r\n", 200, 1 },
		{ "HTTP/1.1 200\n", 200, 1 },
		{ "HTTP/1.1 200 \r\n", 200, 1 },
		{ "HTTP/1.0 201 Created\r\n", 201, 0 },
		{ "HTTP/1.1 299 A reason phrase of more than sixteen bytes\r\n", 299, 1 },
		{ "HTTP/1.1 404 Not Found\n", 404, 1 },
		{ "HTTP/1.1 999 \x01\x7f\xff\r\n", 999, 1 },
	};
	char pad[64];
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
		for (size_t len = 0; len <= 40; len += 5) {
			pattern(pad, len);
			format(qname, sizeof qname, "status line %zu, padding %zu", i, len);
			size_t sn = format(qresp, sizeof qresp, "%sX-Pad: %s\r\nContent-Length: 2\r\n\r\nok", lines[i].line,
					   pad);
			format(qwant, sizeof qwant, GET0_EVENTS "RESP 0 %u %u; RESPEND 0 %u 2", lines[i].status,
			       lines[i].minor, lines[i].status);
			check(qname, B("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), qresp, sn, qwant);
		}
	}
}

/* Malformed field lines where the quick path takes them: lines whose first
 * letter is that of a field the parser keeps (Content-Length,
 * Transfer-Encoding, Host), which get RFC 9112's checks; obs-fold and empty
 * names. */
Test(h1, quick_malformed)
{
	static const char *const bad[] = {
		": x", " Host: h", "\tX-Any: y", "Host: a b", "Host: a\x01z", "Host: h\r\nHost: h", "Host example.com",
		"Content-Length: 5, 6", "Content-Length: x", "Content-Length: 5\r\nContent-Length: 6",
		"Transfer-Encoding: chunked, gzip", "Content-Length : 5", "content-length\t: 5", "CONTENT-LENGTH",
		"Transfer-Encoding\x01: chunked", "Cache-Control : 5", "Content-Type\t: 5", "ConnectionWithNoColon",
		"Content-Lengths : v", "CNoColonOnALineLongerThanThirtyTwoBytes", "C\r\r", "Content-",
		"Trailer-Of-Thirty-Two-Bytes-Long\x01: v",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		for (int where = 0; where < 2; where++) {
			format(qname, sizeof qname, "malformed line %zu, %s", i, where ? "last" : "first");
			size_t rn = where ? format(qreq, sizeof qreq,
						   "POST /m HTTP/1.1\r\nX-Pad: padpadpadpadpadpadpadpadpad\r\n%s\r\n\r\n",
						   bad[i])
					  : format(qreq, sizeof qreq,
						   "POST /m HTTP/1.1\r\n%s\r\nX-Pad: padpadpadpadpadpadpadpadpad\r\n\r\n",
						   bad[i]);
			check(qname, qreq, rn, "", 0, "BEGIN 0; LINE 0 POST /m 1; ERROR");
			if (!strncmp(bad[i], "Host", 4) || !strncmp(bad[i], "Transfer", 8))
				continue;       /* the response side does not look into those */
			size_t sn = where ? format(qresp, sizeof qresp,
						   "HTTP/1.1 200 OK\r\nX-Pad: padpadpadpadpadpadpadpadpad\r\n%s\r\n\r\n",
						   bad[i])
					  : format(qresp, sizeof qresp,
						   "HTTP/1.1 200 OK\r\n%s\r\nX-Pad: padpadpadpadpadpadpadpadpad\r\n\r\n",
						   bad[i]);
			check(qname, B("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), qresp, sn, GET0_EVENTS "ERROR");
		}
	}
}

/* A field line whose first letter is none of those of the names the parser
 * keeps is only delimited: whatever it holds up to its '\n', the message
 * around it is framed as before (the Content-Length after it counts), in
 * both paths. So are lines of other names that only start like a kept one. */
Test(h1, lines_of_no_interest)
{
	static const char *const odd[] = {
		"X-Any : 5", "X-Any\t: 5", "NoColonHere", "A-Name-Of-Twenty-Bytes : v", "A-Name-Of-Thirty-Two-Bytes-Long\x01: v",
		"NoColonOnALineLongerThanThirtyTwoBytes", "X\r\r", "X-Bare: a\rb", "\x01X: y", "Server",
		"A-Line-Of-Many-Bytes-With-No-Colon-At-All-And-Still-No-Colon-Past-Sixty-Four-Bytes", "Content-Lengt: 7",
		"Transfer-Encodings: gzip", "Hosts: h", "Transfer-Encoding-Of-The-Day: chunked", "Accept-Charset : x",
	};
	for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
		for (int where = 0; where < 2; where++) {
			format(qname, sizeof qname, "line of no interest %zu, %s", i, where ? "last" : "first");
			size_t rn = where ? format(qreq, sizeof qreq,
						   "POST /m HTTP/1.1\r\nContent-Length: 2\r\n%s\r\n\r\nokGET /n HTTP/1.1\r\n\r\n",
						   odd[i])
					  : format(qreq, sizeof qreq,
						   "POST /m HTTP/1.1\r\n%s\r\nContent-Length: 2\r\n\r\nokGET /n HTTP/1.1\r\n\r\n",
						   odd[i]);
			size_t sn = where ? format(qresp, sizeof qresp,
						   "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n%s\r\n\r\n!", odd[i])
					  : format(qresp, sizeof qresp,
						   "HTTP/1.1 200 OK\r\n%s\r\nContent-Length: 1\r\n\r\n!", odd[i]);
			check(qname, qreq, rn, qresp, sn,
			      "BEGIN 0; LINE 0 POST /m 1; HEAD 0 -; REQEND 0 2; BEGIN 1; LINE 1 GET /n 1; HEAD 1 -; "
			      "REQEND 1 0; RESP 0 200 1; RESPEND 0 200 1; ABORTED 1");
		}
	}
}

/* Faults at the start of a message the quick path takes. */
Test(h1, quick_start_faults)
{
#define PADDED "X-Pad: padpadpadpadpadpadpad\r\n"
#define GETP "GET /p HTTP/1.1\r\n" PADDED "\r\n"
#define GETP_EVENTS(i) "BEGIN " #i "; LINE " #i " GET /p 1; HEAD " #i " -; REQEND " #i " 0; "
	CHECK("a fifth pending request", GETP GETP GETP GETP GETP, "",
	      GETP_EVENTS(0) GETP_EVENTS(1) GETP_EVENTS(2) GETP_EVENTS(3) "ERROR");
	CHECK("a bad version", "GET /p HTTP/1.2\r\n" PADDED "\r\n", "", "BEGIN 0; NOT_HTTP");
	CHECK("a bad version, later", GETP "GET /p HTTP/1.1\r\r\n" PADDED "\r\n", "", GETP_EVENTS(0) "BEGIN 1; ERROR");
	CHECK("a lowercase method", "get /p HTTP/1.1\r\n" PADDED "\r\n", "", "NOT_HTTP");
	CHECK("no response", GETP, "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", GETP_EVENTS(0) "NOT_HTTP");
	CHECK("a bad status", GETP, "HTTP/1.1 2000 OK\r\n" PADDED "\r\n", GETP_EVENTS(0) "NOT_HTTP");
	CHECK("a bad status, later", GETP GETP, "HTTP/1.1 200 OK\r\n" PADDED "Content-Length: 0\r\n\r\n"
	      "HTTP/1.1 200 OK\r\n" PADDED "Content-Length: 0\r\n\r\nHTTP/1.1 20 OK\r\n" PADDED "\r\n",
	      GETP_EVENTS(0) GETP_EVENTS(1) "RESP 0 200 1; RESPEND 0 200 0; RESP 1 200 1; RESPEND 1 200 0; ERROR");
	CHECK("HTTP/2", GETP, "HTTP/2.0 200 OK\r\n" PADDED "\r\n", GETP_EVENTS(0) "NOT_HTTP");
	CHECK("an empty line first", "\r\n" GETP, "\r\nHTTP/1.1 200 OK\r\n" PADDED "Content-Length: 0\r\n\r\n",
	      GETP_EVENTS(0) "RESP 0 200 1; RESPEND 0 200 0");
#undef GETP_EVENTS
#undef GETP
#undef PADDED
	/* 256 field lines in a response are the most. */
	static char resp[8192];
	for (int extra = 0; extra < 2; extra++) {
		size_t n = (size_t)snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\n");
		for (int i = 0; i < 255 + extra; i++)
			n += (size_t)snprintf(resp + n, sizeof resp - n, "X-Field-%d: value\r\n", i);
		n += (size_t)snprintf(resp + n, sizeof resp - n, "Content-Length: 1\r\n\r\n!");
		run(&conn, B(GET0), resp, n, WHOLE, 0, 0);
		expect(extra ? GET0_EVENTS "ERROR" : GET0_EVENTS "RESP 0 200 1; RESPEND 0 200 1", "%d response fields",
		       256 + extra);
	}
}

/* ---- two threads ----------------------------------------------------------------------- */

/* One thread feeds requests, another the responses, pipelined up to three
 * ahead, in pieces of random size. The threads wait for each other only
 * through relaxed counters (no happens-before of their own), so the one
 * hand-over of data between them is the parser's ring: start[] is written by
 * the request thread at REQ_LINE and read by the response thread at
 * RESP_HEAD and RESP_END without any other synchronization, which is the
 * ordering h1.c promises (and what TSan checks). */
#define THREAD_REQUESTS 3000

struct duo {
	struct nl_h1 h;
	_Atomic int heads;      /* REQ_HEAD events: request i was pushed */
	_Atomic int answered;   /* RESP_END events */
	int start[NL_H1_PIPELINE];
	int req_events, resp_events;
	char req_fault[128], resp_fault[128];
};

static struct duo duo;

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static size_t request_bytes(int i, char *out, size_t cap)
{
	switch (i % 3) {
	case 0:
		return (size_t)snprintf(out, cap, "GET /t/%d HTTP/1.1\r\nHost: h\r\nAccept: */*\r\n\r\n", i);
	case 1:
		return (size_t)snprintf(out, cap, "POST /t/%d HTTP/1.1\r\nContent-Length: %d\r\n\r\n%0*d", i, 1 + i % 50,
					1 + i % 50, 0);
	default:
		return (size_t)snprintf(out, cap, "PUT /t/%d HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n%x\r\n%0*d\r\n0\r\n\r\n",
					i, 1 + i % 20, 1 + i % 20, 0);
	}
}

static size_t response_bytes(int i, char *out, size_t cap)
{
	int body = i % 100;
	if (i % 2)
		return (size_t)snprintf(out, cap, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%0*d", body, body, 0) -
		       (body == 0);   /* "%0*d" of width 0 still writes "0" */
	return (size_t)snprintf(out, cap, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%0*d\r\n0\r\n\r\n",
				body + 1, body + 1, 0);
}

static void fault(char *where, const char *what, int i)
{
	if (!where[0])
		snprintf(where, 128, "%s at %d", what, i);
}

static void req_one(void *ctx, const struct nl_h1_event *ev)
{
	(void)ctx;
	int i = duo.req_events / 4;   /* four events per request */
	if ((int)ev->slot != i % NL_H1_PIPELINE)
		fault(duo.req_fault, "request slot", i);
	switch (duo.req_events++ % 4) {
	case 0:
		if (ev->type != NL_H1_REQ_BEGIN)
			fault(duo.req_fault, "REQ_BEGIN", i);
		break;
	case 1:
		if (ev->type != NL_H1_REQ_LINE)
			fault(duo.req_fault, "REQ_LINE", i);
		duo.start[ev->slot] = i;
		break;
	case 2:
		if (ev->type != NL_H1_REQ_HEAD)
			fault(duo.req_fault, "REQ_HEAD", i);
		atomic_store_explicit(&duo.heads, i + 1, memory_order_relaxed);
		break;
	case 3: {
		uint64_t body = i % 3 == 0 ? 0 : i % 3 == 1 ? 1 + i % 50 : 3 + 1 + i % 20;
		if (ev->type != NL_H1_REQ_END || ev->body_size != body)
			fault(duo.req_fault, "REQ_END", i);
		break;
	}
	}
}

static void req_sink(void *ctx, const struct nl_h1_event *ev)
{
	unfold(ctx, ev, req_one);
}

static void resp_one(void *ctx, const struct nl_h1_event *ev)
{
	(void)ctx;
	int i = duo.resp_events / 2;
	if ((int)ev->slot != i % NL_H1_PIPELINE || duo.start[ev->slot] != i)
		fault(duo.resp_fault, "response slot", i);
	if (duo.resp_events++ % 2 == 0) {
		if (ev->type != NL_H1_RESP_HEAD || ev->status != 200)
			fault(duo.resp_fault, "RESP_HEAD", i);
		return;
	}
	uint64_t body = i % 2 ? (uint64_t)(i % 100) : (uint64_t)(i % 100 + 1);
	if (ev->type != NL_H1_RESP_END || ev->body_size != body)
		fault(duo.resp_fault, "RESP_END", i);
	atomic_store_explicit(&duo.answered, i + 1, memory_order_relaxed);
}

/* Feeds one message in pieces of 1..64 bytes. */
static void resp_sink(void *ctx, const struct nl_h1_event *ev)
{
	unfold(ctx, ev, resp_one);
}

static bool feed_pieces(enum nl_h1_dir dir, const char *p, size_t n, uint32_t *seed, nl_h1_sink sink)
{
	while (n) {
		size_t k = 1 + rnd(seed) % 64;
		if (k > n)
			k = n;
		if (!nl_h1_feed(&duo.h, dir, p, k, sink, NULL))
			return false;
		p += k;
		n -= k;
	}
	return true;
}

static void *request_thread(void *arg)
{
	(void)arg;
	uint32_t seed = 12345;
	char buf[512];
	for (int i = 0; i < THREAD_REQUESTS; i++) {
		/* At most three unanswered: the last RESP_END counted may not be popped yet. */
		while (atomic_load_explicit(&duo.answered, memory_order_relaxed) < i - 2)
			sched_yield();
		if (!feed_pieces(NL_H1_REQUEST, buf, request_bytes(i, buf, sizeof buf), &seed, req_sink)) {
			fault(duo.req_fault, "stopped", i);
			break;
		}
	}
	return NULL;
}

static void *response_thread(void *arg)
{
	(void)arg;
	uint32_t seed = 67890;
	char buf[512];
	for (int i = 0; i < THREAD_REQUESTS; i++) {
		while (atomic_load_explicit(&duo.heads, memory_order_relaxed) <= i)
			sched_yield();
		if (!feed_pieces(NL_H1_RESPONSE, buf, response_bytes(i, buf, sizeof buf), &seed, resp_sink)) {
			fault(duo.resp_fault, "stopped", i);
			break;
		}
	}
	return NULL;
}

Test(h1, two_threads)
{
	nl_h1_init(&duo.h);
	pthread_t a, b;
	cr_assert_eq(pthread_create(&a, NULL, request_thread, NULL), 0);
	cr_assert_eq(pthread_create(&b, NULL, response_thread, NULL), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	cr_assert_str_empty(duo.req_fault, "request thread: %s", duo.req_fault);
	cr_assert_str_empty(duo.resp_fault, "response thread: %s", duo.resp_fault);
	cr_assert_eq(duo.req_events, 4 * THREAD_REQUESTS);
	cr_assert_eq(duo.resp_events, 2 * THREAD_REQUESTS);
	cr_assert(nl_h1_active(&duo.h));
}

/* ---- folded events ------------------------------------------------------------ */

struct raw {
	unsigned n;
	enum nl_h1_event_type type[8];
	uint8_t folded[8];
};

static void raw_sink(void *ctx, const struct nl_h1_event *ev)
{
	struct raw *r = ctx;
	if (r->n < 8) {
		r->type[r->n] = ev->type;
		r->folded[r->n] = ev->folded;
	}
	r->n++;
}

/* A keep-alive exchange each direction in one call: the request is two
 * reports (REQ_BEGIN folded into REQ_LINE, REQ_END into REQ_HEAD), the
 * response one (RESP_HEAD folded into RESP_END); split, REQ_BEGIN and
 * RESP_HEAD come on their own, a bodiless REQ_END never does. */
Test(h1, folded)
{
	static const char req[] = "GET /a HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
	struct nl_h1 h;
	struct raw r = { 0 };
	nl_h1_init(&h);
	cr_assert(nl_h1_feed(&h, NL_H1_REQUEST, req, sizeof req - 1, raw_sink, &r));
#if defined(__SSE2__) && !defined(NL_H1_NO_SIMD)   /* as h1.c chooses */
	/* The quick path (SSE2) folds; the byte-wise one folds REQ_END only. */
	cr_assert_eq(r.n, 2);
	cr_assert(r.type[0] == NL_H1_REQ_LINE && r.folded[0] == NL_H1_FOLD_BEGIN);
	cr_assert(r.type[1] == NL_H1_REQ_HEAD && r.folded[1] == NL_H1_FOLD_END);
	cr_assert(nl_h1_feed(&h, NL_H1_RESPONSE, resp, sizeof resp - 1, raw_sink, &r));
	cr_assert_eq(r.n, 3);
	cr_assert(r.type[2] == NL_H1_RESP_END && r.folded[2] == NL_H1_FOLD_HEAD);
#endif

	memset(&r, 0, sizeof r);
	nl_h1_init(&h);
	cr_assert(nl_h1_feed(&h, NL_H1_REQUEST, req, 3, raw_sink, &r));
	cr_assert(nl_h1_feed(&h, NL_H1_REQUEST, req + 3, sizeof req - 4, raw_sink, &r));
	cr_assert_eq(r.n, 3);
	cr_assert(r.type[0] == NL_H1_REQ_BEGIN && r.type[1] == NL_H1_REQ_LINE && !r.folded[1]);
	cr_assert(r.type[2] == NL_H1_REQ_HEAD && r.folded[2] == NL_H1_FOLD_END);
	cr_assert(nl_h1_feed(&h, NL_H1_RESPONSE, resp, sizeof resp - 3, raw_sink, &r));
	cr_assert(nl_h1_feed(&h, NL_H1_RESPONSE, resp + sizeof resp - 3, 2, raw_sink, &r));
	cr_assert_eq(r.n, 5);
	cr_assert(r.type[3] == NL_H1_RESP_HEAD && r.type[4] == NL_H1_RESP_END && !r.folded[4]);
}

/* ---- same_line --------------------------------------------------------------- */

/* The parser's two hints, per event that carries one: same_line on
 * REQ_LINE, same_host on REQ_HEAD (the last one in bit 0). */
static int lines_seen, lines_same, heads_seen, heads_same;

static void hint_sink(void *ctx, const struct nl_h1_event *ev)
{
	(void)ctx;
	if (ev->type == NL_H1_REQ_LINE) {
		lines_seen++;
		lines_same = lines_same << 1 | ev->same_line;
	} else if (ev->type == NL_H1_REQ_HEAD) {
		heads_seen++;
		heads_same = heads_same << 1 | ev->same_host;
	}
}

/* One exchange on h: the request in one call (pieces of 7 bytes when split),
 * then its response; returns whether its REQ_LINE said same_line. */
static bool exchange(struct nl_h1 *h, const char *target, bool split)
{
	char req[256];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\n\r\n", target);
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	int seen = lines_seen;
	for (int at = 0; at < n; at += split ? 7 : n)
		nl_h1_feed(h, NL_H1_REQUEST, req + at, (size_t)(n - at < 7 || !split ? n - at : 7), hint_sink, NULL);
	nl_h1_feed(h, NL_H1_RESPONSE, resp, sizeof resp - 1, hint_sink, NULL);
	cr_assert_eq(lines_seen, seen + 1, "one request line for %s", target);
	return lines_same & 1;
}

Test(h1, same_line)
{
	static struct nl_h1 h;
	nl_h1_init(&h);
	cr_assert_not(exchange(&h, "/a", false), "not asked for");
	cr_assert_not(exchange(&h, "/a", false), "not asked for");
	nl_h1_compare_lines(&h);
	cr_assert_not(exchange(&h, "/a", false), "the first line it keeps");
	cr_assert(exchange(&h, "/a", false));
	cr_assert(exchange(&h, "/a", false));
	cr_assert_not(exchange(&h, "/b", false));
	cr_assert_not(exchange(&h, "/a", false));
	cr_assert_not(exchange(&h, "/a?x", false), "a query makes another line");
	cr_assert(exchange(&h, "/a?x", false));
	/* Up to 32 bytes of method, SP and target are kept: "GET " and 28. */
	char t28[29], t29[30], u28[29];
	memset(t28, 'x', 28), memset(t29, 'x', 29), memset(u28, 'x', 28);
	t28[0] = t29[0] = u28[0] = '/';
	t28[28] = t29[29] = u28[28] = 0;
	u28[27] = 'y';
	cr_assert_not(exchange(&h, t28, false));
	cr_assert(exchange(&h, t28, false), "a line of 32 bytes is kept");
	cr_assert_not(exchange(&h, u28, false), "the same length, the last byte differs");
	cr_assert_not(exchange(&h, t29, false));
	cr_assert_not(exchange(&h, t29, false), "a line of 33 bytes is not kept");
	cr_assert_not(exchange(&h, t28, false));
	cr_assert(exchange(&h, t28, false));
	/* A line read byte-wise is not kept, and the next is not the same. */
	cr_assert_not(exchange(&h, t28, true));
	cr_assert_not(exchange(&h, t28, false));
	cr_assert(exchange(&h, t28, false));
}

/* ---- same_host --------------------------------------------------------------- */

/* One exchange on h: the request (Host host, then the field line after, or
 * none) in one call, or in pieces of 7 bytes, then its response; returns
 * whether its REQ_HEAD said same_host. */
static bool host_exchange(struct nl_h1 *h, const char *host, const char *after, bool split)
{
	char req[256];
	int n = host ? snprintf(req, sizeof req, "GET /a HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, after)
		     : snprintf(req, sizeof req, "GET /a HTTP/1.1\r\n%s\r\n", after);
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	int seen = heads_seen;
	for (int at = 0; at < n; at += split ? 7 : n)
		nl_h1_feed(h, NL_H1_REQUEST, req + at, (size_t)(n - at < 7 || !split ? n - at : 7), hint_sink, NULL);
	nl_h1_feed(h, NL_H1_RESPONSE, resp, sizeof resp - 1, hint_sink, NULL);
	cr_assert_eq(heads_seen, seen + 1, "one request head for %s", host ? host : "(none)");
	return heads_same & 1;
}

Test(h1, same_host)
{
	static struct nl_h1 h;
	nl_h1_init(&h);
	const char *ua = "User-Agent: same-host-test/1.0\r\nAccept: */*\r\n";
	cr_assert_not(host_exchange(&h, "a.test:8080", ua, false), "nothing kept yet");
	cr_assert(host_exchange(&h, "a.test:8080", ua, false));
	cr_assert(host_exchange(&h, "a.test:8080", ua, false));
	cr_assert_not(host_exchange(&h, "b.test:8080", ua, false), "another value");
	cr_assert_not(host_exchange(&h, "a.test:808", ua, false), "a prefix of the last");
	cr_assert_not(host_exchange(&h, "a.test:8080", ua, false), "longer than the last");
	cr_assert(host_exchange(&h, "a.test:8080", ua, false));
	/* A request without Host leaves the last value kept. */
	cr_assert_not(host_exchange(&h, NULL, ua, false));
	cr_assert(host_exchange(&h, "a.test:8080", ua, false));
	/* A hint: another field line after the value loses it, never lies. */
	cr_assert_not(host_exchange(&h, "a.test:8080", "Accept: */*\r\nUser-Agent: x\r\n", false));
	cr_assert(host_exchange(&h, "a.test:8080", "Accept: */*\r\nUser-Agent: x\r\n", false));
	/* A request read byte-wise may cover the kept bytes: the next is not
	 * the same, the one after is. */
	cr_assert_not(host_exchange(&h, "a.test:8080", ua, true));
	cr_assert_not(host_exchange(&h, "a.test:8080", ua, false));
	cr_assert(host_exchange(&h, "a.test:8080", ua, false));
	/* A Host at the call's end (fewer than 32 bytes after it) is not kept. */
	cr_assert_not(host_exchange(&h, "a.test:8080", "", false));
	cr_assert_not(host_exchange(&h, "a.test:8080", ua, false));
	cr_assert(host_exchange(&h, "a.test:8080", ua, false));
	/* A new connection keeps nothing. */
	nl_h1_init(&h);
	cr_assert_not(host_exchange(&h, "a.test:8080", ua, false));
}


/* ---- tapped bodies (nl_h1_tap) ---------------------------------------------------- */

/* The sink taps requests to /tap and keeps the body bytes it is handed, per
 * direction, with a '|' at each message's end; any other request's body
 * must never show. */
struct tap {
	struct nl_h1 *h;
	char body[2][512];
	size_t len[2];
	bool gap;
};

static void tap_add(struct tap *t, int dir, const char *p, size_t n)
{
	cr_assert(t->len[dir] + n < sizeof t->body[dir]);
	memcpy(t->body[dir] + t->len[dir], p, n);
	t->len[dir] += n;
}

static void tap_sink(void *ctx, const struct nl_h1_event *ev)
{
	struct tap *t = ctx;
	switch (ev->type) {
	case NL_H1_REQ_LINE:
		if (ev->target_len == 4 && memcmp(ev->target, "/tap", 4) == 0)
			nl_h1_tap(t->h);
		break;
	case NL_H1_BODY:
		if (!ev->body)
			t->gap = true;
		else
			tap_add(t, ev->dir, ev->body, (size_t)ev->body_size);
		break;
	case NL_H1_REQ_END:
		tap_add(t, 0, "|", 1);
		break;
	case NL_H1_REQ_HEAD:
		if (ev->folded & NL_H1_FOLD_END)
			tap_add(t, 0, "|", 1);
		break;
	case NL_H1_RESP_END:
		tap_add(t, 1, "|", 1);
		break;
	default:
		break;
	}
}

Test(h1, tapped_bodies_any_split)
{
	static const char req[] = "POST /tap HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
				  "5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n"
				  "POST /other HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nsecret"
				  "POST /tap HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n{\"a\"";
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{\"model\":1}\n"
				   "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhidden"
				   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nda:\r\n2\r\n x\r\n0\r\n\r\n";
	const char *want_req = "hello world||{\"a\"|", *want_resp = "{\"model\":1}\n||da: x|";
	size_t nq = sizeof req - 1, np = sizeof resp - 1;
	for (size_t cut = 0; cut < (nq > np ? nq : np); cut++) {
		struct nl_h1 h;
		nl_h1_init(&h);
		struct tap t = { .h = &h };
		size_t cq = cut < nq ? cut : nq, cp = cut < np ? cut : np;
		cr_assert(nl_h1_feed(&h, NL_H1_REQUEST, req, cq, tap_sink, &t));
		cr_assert(nl_h1_feed(&h, NL_H1_REQUEST, req + cq, nq - cq, tap_sink, &t));
		cr_assert(nl_h1_feed(&h, NL_H1_RESPONSE, resp, cp, tap_sink, &t));
		cr_assert(nl_h1_feed(&h, NL_H1_RESPONSE, resp + cp, np - cp, tap_sink, &t));
		t.body[0][t.len[0]] = t.body[1][t.len[1]] = 0;
		cr_assert_str_eq(t.body[0], want_req, "cut %zu", cut);
		cr_assert_str_eq(t.body[1], want_resp, "cut %zu", cut);
		cr_assert_not(t.gap);
	}
}
