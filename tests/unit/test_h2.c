/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP/2 follower (preload/http/h2.c) and its HPACK decoder
 * (preload/http/hpack.c): every example of RFC 7541 Appendix C, whole,
 * split in two at every offset and one byte per call; connections recorded
 * between real peers (fixtures/h2: grpcio client and server, h2load and
 * nghttpd, httpx and hypercorn; each direction as it went on the wire) fed
 * whole and split everywhere; and frames built here for what those lack:
 * padding, CONTINUATION, trailers-only responses, resets, GOAWAY, table
 * size updates mid-connection, the table cap and the stream table's bound,
 * and malformed input. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h2.h"
#include "helpers.h"
#include "hpack.h"

/* ---- text ------------------------------------------------------------------- */

struct rec {
	char text[16384];
	size_t len;
};

static size_t unhex(const char *hex, uint8_t *out)
{
	size_t n = 0;
	for (const char *p = hex; *p;) {
		if (*p == ' ') {
			p++;
			continue;
		}
		unsigned v;
		cr_assert(sscanf(p, "%2x", &v) == 1);
		out[n++] = (uint8_t)v;
		p += 2;
	}
	return n;
}

/* ---- HPACK: RFC 7541 Appendix C ---------------------------------------------- */

/* Fields as "name: value" lines; a field whose name the decoder does not
 * know (one of the table's, not kept) as "?: ?", its lengths after. */
static void on_field(void *ctx, const struct nl_hpack_out *o)
{
	struct rec *r = ctx;
	if (o->name)
		put(r, "%.*s: %.*s%s\n", (int)(o->name_len < 16 ? o->name_len : 16), o->name, (int)o->len, o->value,
		    o->truncated ? "..." : "");
	else
		put(r, "#%u: %.*s%s\n", o->field, (int)o->len, o->value, o->truncated ? "..." : "");
}

/* Decodes block hex into t (whole, or split at split: 0 none, SIZE_MAX one
 * byte per call) and returns the fields' text. */
static void decode(struct nl_hpack_table *t, const char *hex, size_t split, struct rec *r)
{
	uint8_t b[512];
	size_t n = unhex(hex, b);
	struct nl_hpack_dec d = { .all = true };
	nl_hpack_begin(&d);
	memset(r, 0, sizeof *r);
	enum nl_hpack_result res = NL_HPACK_OK;
	if (split == SIZE_MAX) {
		for (size_t i = 0; i < n && res == NL_HPACK_OK; i++)
			res = nl_hpack_feed(&d, t, b + i, 1, on_field, r);
	} else {
		size_t k = split < n ? split : n;
		res = nl_hpack_feed(&d, t, b, k, on_field, r);
		if (res == NL_HPACK_OK)
			res = nl_hpack_feed(&d, t, b + k, n - k, on_field, r);
	}
	cr_assert_eq(res, NL_HPACK_OK, "block %s", hex);
	cr_assert(nl_hpack_end(&d));
}

struct cblock {
	const char *hex;
	const char *fields;
	uint32_t size;          /* the table's size after it */
	unsigned n;             /* entries after it */
};

/* A sequence of blocks on one table, each decoded whole, at every split
 * and byte by byte (from a copy of the table as it was before it). */
static void run_blocks(const struct cblock *c, size_t nc, uint32_t max)
{
	static struct nl_hpack_table t, copy;
	static struct rec r;
	/* Zeroed memory is a new table (of cap NL_HPACK_CAP): every other run
	 * starts from one, as a connection on a fresh pool state does. */
	static unsigned runs;
	if (runs++ % 2)
		nl_hpack_table_init(&t, NL_HPACK_CAP);
	else
		memset(&t, 0, sizeof t);
	t.max_d = max - NL_HPACK_DEFAULT_SIZE;   /* as if the settings said so (RFC 7541 C.5, C.6) */
	for (size_t i = 0; i < nc; i++) {
		size_t len = strlen(c[i].hex);
		for (size_t split = 1; split <= len / 2 + 1; split++) {
			copy = t;
			decode(&copy, c[i].hex, split, &r);
			cr_assert_str_eq(r.text, c[i].fields, "block %zu split at %zu: got [%s]", i, split, r.text);
			cr_assert_eq(copy.size, c[i].size);
		}
		copy = t;
		decode(&copy, c[i].hex, SIZE_MAX, &r);
		cr_assert_str_eq(r.text, c[i].fields, "block %zu byte by byte", i);
		decode(&t, c[i].hex, 0, &r);
		cr_assert_str_eq(r.text, c[i].fields, "block %zu", i);
		cr_assert_eq(t.size, c[i].size, "block %zu: table size %u", i, t.size);
		cr_assert_eq(t.n, c[i].n, "block %zu: %u entries", i, t.n);
	}
}

Test(hpack, c2_literals_and_indexed)
{
	static const struct cblock c21[] = {
		{ "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", "custom-key: custom-header\n", 55, 1 },
	};
	run_blocks(c21, 1, 4096);
	static const struct cblock c22[] = {
		{ "040c 2f73 616d 706c 652f 7061 7468", ":path: /sample/path\n", 0, 0 },
	};
	run_blocks(c22, 1, 4096);
	static const struct cblock c23[] = {
		{ "1008 7061 7373 776f 7264 0673 6563 7265 74", "password: secret\n", 0, 0 },
	};
	run_blocks(c23, 1, 4096);
	static const struct cblock c24[] = { { "82", ":method: GET\n", 0, 0 } };
	run_blocks(c24, 1, 4096);
}

#define C3_1 ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n"
#define C3_2 C3_1 "cache-control: no-cache\n"
#define C3_3 ":method: GET\n:scheme: https\n:path: /index.html\n#3: www.example.com\ncustom-key: custom-value\n"

Test(hpack, c3_requests_without_huffman)
{
	static const struct cblock c[] = {
		{ "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", C3_1, 57, 1 },
		{ "8286 84be 5808 6e6f 2d63 6163 6865", ":method: GET\n:scheme: http\n:path: /\n#3: www.example.com\n"
							   "cache-control: no-cache\n", 110, 2 },
		{ "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65", C3_3, 164, 3 },
	};
	run_blocks(c, 3, 4096);
}

Test(hpack, c4_requests_with_huffman)
{
	static const struct cblock c[] = {
		{ "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", C3_1, 57, 1 },
		{ "8286 84be 5886 a8eb 1064 9cbf", ":method: GET\n:scheme: http\n:path: /\n#3: www.example.com\n"
						   "cache-control: no-cache\n", 110, 2 },
		{ "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", C3_3, 164, 3 },
	};
	run_blocks(c, 3, 4096);
}

#define C5_1 ":status: 302\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n" \
	     "location: https://www.example.com\n"
/* C.5.2, C.6.2: all but :status from the table, whose names are not kept
 * (its values are, in this mode, that reports every field) */
#define C5_2 ":status: 307\n#0: private\n#0: Mon, 21 Oct 2013 20:13:21 GMT\n#0: https://www.example.com\n"
#define C5_3 ":status: 200\n#0: private\ndate: Mon, 21 Oct 2013 20:13:22 GMT\n#0: https://www.example.com\n" \
	     "content-encoding: gzip\n" \
	     "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1\n"

Test(hpack, c5_responses_without_huffman)
{
	static const struct cblock c[] = {
		{ "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 "
		  "3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
		  C5_1, 222, 4 },
		{ "4803 3330 37c1 c0bf", C5_2, 222, 4 },
		{ "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 "
		  "7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 "
		  "6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
		  C5_3, 215, 3 },
	};
	run_blocks(c, 3, 256);
}

Test(hpack, c6_responses_with_huffman)
{
	static const struct cblock c[] = {
		{ "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad "
		  "1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
		  C5_1, 222, 4 },
		{ "4883 640e ffc1 c0bf", C5_2, 222, 4 },
		{ "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 "
		  "e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
		  C5_3, 215, 3 },
	};
	run_blocks(c, 3, 256);
}

static enum nl_hpack_result feed_hex(struct nl_hpack_table *t, const char *hex)
{
	uint8_t b[512];
	size_t n = unhex(hex, b);
	struct nl_hpack_dec d = { 0 };
	struct rec r = { 0 };
	nl_hpack_begin(&d);
	enum nl_hpack_result res = nl_hpack_feed(&d, t, b, n, on_field, &r);
	if (res == NL_HPACK_OK && !nl_hpack_end(&d))
		return NL_HPACK_BAD;
	return res;
}

Test(hpack, size_updates)
{
	static struct nl_hpack_table t;
	nl_hpack_table_init(&t, NL_HPACK_CAP);
	cr_assert_eq(feed_hex(&t, "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"), NL_HPACK_OK);
	cr_assert_eq(t.n, 1);
	/* to 0 and back: the entry is gone, and referring to it is an error */
	cr_assert_eq(feed_hex(&t, "20 3fe1 1f 82"), NL_HPACK_OK);
	cr_assert_eq(t.n, 0);
	cr_assert_eq(t.size, 0);
	cr_assert_eq(nl_hpack_table_max(&t), 4096);
	cr_assert_eq(feed_hex(&t, "be"), NL_HPACK_BAD);
	/* an update past the decoder's limit is an error; once announced, not */
	cr_assert_eq(feed_hex(&t, "3fe1 3f"), NL_HPACK_BAD);    /* 8192 */
	nl_hpack_table_limit(&t, 8192);
	cr_assert_eq(feed_hex(&t, "3fe1 3f"), NL_HPACK_OK);
	cr_assert_eq(nl_hpack_table_max(&t), 8192);
	/* an update after a field, or three in a row, is an error */
	cr_assert_eq(feed_hex(&t, "82 20"), NL_HPACK_BAD);
	cr_assert_eq(feed_hex(&t, "20 20 20"), NL_HPACK_BAD);
}

/* An encoder using more table than the cap: followed up to the cap, then
 * given up, never misread. */
Test(hpack, cap)
{
	static struct nl_hpack_table t;
	nl_hpack_table_init(&t, 256);
	nl_hpack_table_limit(&t, 65536);
	cr_assert_eq(feed_hex(&t, "3fe1 ff03"), NL_HPACK_OK);   /* max 65536 */
	/* custom-key: custom-header, 55 bytes each: four fit in 256 */
	for (int i = 0; i < 4; i++)
		cr_assert_eq(feed_hex(&t, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"), NL_HPACK_OK);
	cr_assert_eq(t.size, 220);
	cr_assert_eq(feed_hex(&t, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
		     NL_HPACK_OVER_CAP);
	/* within the default size, the cap is never reached */
	nl_hpack_table_init(&t, NL_HPACK_CAP);
	for (int i = 0; i < 200; i++)
		cr_assert_eq(feed_hex(&t, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"), NL_HPACK_OK);
	cr_assert_eq(t.size, 55 * (4096 / 55));
}

Test(hpack, bad_huffman)
{
	static struct nl_hpack_table t;
	nl_hpack_table_init(&t, NL_HPACK_CAP);
	/* padding of 8 bits (a whole byte of ones) */
	cr_assert_eq(feed_hex(&t, "0081 ff00"), NL_HPACK_BAD);
	/* padding not all ones: '0' is 00000, then 000 */
	cr_assert_eq(feed_hex(&t, "4082 0000 00"), NL_HPACK_BAD);
	/* EOS inside: 30 ones */
	cr_assert_eq(feed_hex(&t, "0084 ffff ffff 00"), NL_HPACK_BAD);
	/* index 0, an index past the table */
	cr_assert_eq(feed_hex(&t, "80"), NL_HPACK_BAD);
	cr_assert_eq(feed_hex(&t, "c0"), NL_HPACK_BAD);
	/* a block ending inside a representation */
	cr_assert_eq(feed_hex(&t, "400a 6375"), NL_HPACK_BAD);
	cr_assert_eq(t.n, 0);
}

/* ---- HTTP/2: events as text -------------------------------------------------- */

static void on_event(void *ctx, const struct nl_h2_event *ev)
{
	struct rec *r = ctx;
	const struct nl_h2_fields *f = ev->fields;
	switch (ev->type) {
	case NL_H2_REQ_HEAD:
		put(r, "REQ_HEAD %u %.*s %.*s%s %.*s%s%s; ", ev->stream, f->method_len, f->method, f->path_len, f->path,
		    f->path_truncated ? "..." : "", f->authority_len, f->authority, f->grpc ? " grpc" : "",
		    ev->end_stream ? " end" : "");
		break;
	case NL_H2_REQ_END:
		put(r, "REQ_END %u %llu; ", ev->stream, (unsigned long long)ev->body_size);
		break;
	case NL_H2_RESP_HEAD:
		put(r, "RESP_HEAD %u %u; ", ev->stream, ev->status);
		break;
	case NL_H2_RESP_END:
		put(r, "RESP_END %u %u g%d %llu; ", ev->stream, ev->status, ev->grpc_status,
		    (unsigned long long)ev->body_size);
		break;
	case NL_H2_ABORTED:
		put(r, "ABORTED %u; ", ev->stream);
		break;
	case NL_H2_DATA:
		put(r, "DATA %u %s %zu; ", ev->stream, ev->dir == NL_H2_REQUEST ? "req" : "resp", ev->len);
		break;
	case NL_H2_ERROR:
		put(r, "ERROR; ");
		break;
	case NL_H2_GIVEN_UP:
		put(r, "GIVEN_UP; ");
		break;
	}
}

static struct nl_h2 conn;

struct bytes {
	uint8_t *p;
	size_t n;
};

static struct bytes fixture(const char *name)
{
	char path[1024];
	fixture_path(path, sizeof path, "h2", name);
	FILE *f = fopen(path, "rb");
	cr_assert(f, "fixture %s", path);
	struct bytes b = { malloc(1 << 16), 0 };
	b.n = fread(b.p, 1, 1 << 16, f);
	fclose(f);
	return b;
}

/* The request direction fed with the given split (0: whole; SIZE_MAX: byte
 * by byte), then the response direction, then the close. */
static void run_conn(struct bytes req, size_t rsplit, struct bytes resp, size_t ssplit, struct rec *r)
{
	memset(r, 0, sizeof *r);
	/* After a run, a state used before: reset in full. */
	nl_h2_init(&conn, NL_HPACK_CAP);
	const struct bytes *b[2] = { &req, &resp };
	size_t split[2] = { rsplit, ssplit };
	for (int d = 0; d < 2; d++) {
		if (split[d] == SIZE_MAX) {
			for (size_t i = 0; i < b[d]->n; i++)
				nl_h2_feed(&conn, (enum nl_h2_dir)d, b[d]->p + i, 1, on_event, r);
		} else {
			size_t k = split[d] && split[d] < b[d]->n ? split[d] : b[d]->n;
			nl_h2_feed(&conn, (enum nl_h2_dir)d, b[d]->p, k, on_event, r);
			nl_h2_feed(&conn, (enum nl_h2_dir)d, b[d]->p + k, b[d]->n - k, on_event, r);
		}
	}
	nl_h2_close(&conn, on_event, r);
}

static void check_recorded(const char *name, const char *expect)
{
	char a[64], b[64];
	snprintf(a, sizeof a, "%s.req", name);
	snprintf(b, sizeof b, "%s.resp", name);
	struct bytes req = fixture(a), resp = fixture(b);
	static struct rec r;
	/* A state in fresh, zeroed memory needs only nl_h2_start: the
	 * recording reads the same as on one reset by nl_h2_init, whatever the
	 * state held before. */
	memset(&r, 0, sizeof r);
	memset(&conn, 0, sizeof conn);
	nl_h2_start(&conn);
	nl_h2_feed(&conn, NL_H2_REQUEST, req.p, req.n, on_event, &r);
	nl_h2_feed(&conn, NL_H2_RESPONSE, resp.p, resp.n, on_event, &r);
	nl_h2_close(&conn, on_event, &r);
	cr_assert_str_eq(r.text, expect, "%s on a fresh state: got [%s]", name, r.text);
	run_conn(req, 0, resp, 0, &r);
	cr_assert_str_eq(r.text, expect, "%s whole: got [%s]", name, r.text);
	for (size_t k = 1; k < req.n; k++) {
		run_conn(req, k, resp, 0, &r);
		cr_assert_str_eq(r.text, expect, "%s: request split at %zu", name, k);
	}
	for (size_t k = 1; k < resp.n; k++) {
		run_conn(req, 0, resp, k, &r);
		cr_assert_str_eq(r.text, expect, "%s: response split at %zu", name, k);
	}
	run_conn(req, SIZE_MAX, resp, SIZE_MAX, &r);
	cr_assert_str_eq(r.text, expect, "%s: byte by byte", name);
	free(req.p);
	free(resp.p);
}

/* grpcio 1.51: two unary calls, one that fails (NOT_FOUND, a trailers-only
 * response), a server-streaming call of three messages (5-byte frame
 * prefix each). */
Test(h2, recorded_grpc)
{
	check_recorded("grpc",
		       "REQ_HEAD 1 POST /demo.Echo/Unary 127.0.0.1:50952 grpc; REQ_END 1 9; "
		       "REQ_HEAD 3 POST /demo.Echo/Unary 127.0.0.1:50952 grpc; REQ_END 3 10; "
		       "REQ_HEAD 5 POST /demo.Echo/Unary 127.0.0.1:50952 grpc; REQ_END 5 9; "
		       "REQ_HEAD 7 POST /demo.Echo/Stream 127.0.0.1:50952 grpc; REQ_END 7 6; "
		       "RESP_HEAD 1 200; RESP_END 1 200 g0 14; RESP_HEAD 3 200; RESP_END 3 200 g0 15; "
		       "RESP_HEAD 5 200; RESP_END 5 200 g5 0; RESP_HEAD 7 200; RESP_END 7 200 g0 30; ");
}

/* h2load: five GETs, two at a time, three of a file and two not found;
 * Huffman-coded, the dynamic table in use, HEADERS with priority. */
Test(h2, recorded_h2load)
{
	check_recorded("h2load",
		       "REQ_HEAD 1 GET /index.html 127.0.0.1:50962 end; REQ_HEAD 3 GET /missing 127.0.0.1:50962 end; "
		       "REQ_HEAD 5 GET /index.html 127.0.0.1:50962 end; REQ_HEAD 7 GET /missing 127.0.0.1:50962 end; "
		       "REQ_HEAD 9 GET /index.html 127.0.0.1:50962 end; "
		       "RESP_HEAD 1 200; RESP_HEAD 3 404; RESP_END 1 200 g-1 6; RESP_END 3 404 g-1 148; "
		       "RESP_HEAD 5 200; RESP_HEAD 7 404; RESP_END 5 200 g-1 6; RESP_END 7 404 g-1 148; "
		       "RESP_HEAD 9 200; RESP_END 9 200 g-1 6; ");
}

/* httpx with http2=True against hypercorn: three GETs and a POST. */
Test(h2, recorded_httpx)
{
	check_recorded("httpx",
		       "REQ_HEAD 1 GET /a/1 127.0.0.1:50972 end; REQ_HEAD 3 GET /a/2 127.0.0.1:50972 end; "
		       "REQ_HEAD 5 GET /missing 127.0.0.1:50972 end; REQ_HEAD 7 POST /post 127.0.0.1:50972; "
		       "REQ_END 7 100; RESP_HEAD 1 200; RESP_END 1 200 g-1 3; RESP_HEAD 3 200; RESP_END 3 200 g-1 3; "
		       "RESP_HEAD 5 404; RESP_END 5 404 g-1 3; RESP_HEAD 7 200; RESP_END 7 200 g-1 103; ");
}

/* ---- HTTP/2: frames built here ---------------------------------------------- */

struct wire {
	uint8_t b[1 << 16];
	size_t n;
};

static void frame(struct wire *w, unsigned type, unsigned flags, uint32_t stream, const void *payload, size_t len)
{
	uint8_t h[9] = { (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, (uint8_t)type, (uint8_t)flags,
			 (uint8_t)(stream >> 24), (uint8_t)(stream >> 16), (uint8_t)(stream >> 8), (uint8_t)stream };
	memcpy(w->b + w->n, h, 9);
	memcpy(w->b + w->n + 9, payload, len);
	w->n += 9 + len;
}

/* A header block of literal fields without indexing, "name", "value", ... */
static size_t block(uint8_t *out, ...)
{
	va_list ap;
	va_start(ap, out);
	size_t n = 0;
	const char *name;
	while ((name = va_arg(ap, const char *))) {
		const char *value = va_arg(ap, const char *);
		out[n++] = 0;
		out[n++] = (uint8_t)strlen(name);
		memcpy(out + n, name, strlen(name));
		n += strlen(name);
		out[n++] = (uint8_t)strlen(value);
		memcpy(out + n, value, strlen(value));
		n += strlen(value);
	}
	va_end(ap);
	return n;
}

enum { DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINDOW, CONT };

static void preface(struct wire *req, struct wire *resp)
{
	memcpy(req->b, NL_H2_PREFACE, NL_H2_PREFACE_LEN);
	req->n = NL_H2_PREFACE_LEN;
	frame(req, SETTINGS, 0, 0, "", 0);
	resp->n = 0;
	frame(resp, SETTINGS, 0, 0, "\0\3\0\0\0\x64", 6);
	frame(resp, SETTINGS, 1, 0, "", 0);
}

/* Both directions whole, at every split, byte by byte: the same text. */
static void check_built(struct wire *req, struct wire *resp, const char *expect)
{
	static struct rec r;
	struct bytes a = { req->b, req->n }, b = { resp->b, resp->n };
	run_conn(a, 0, b, 0, &r);
	cr_assert_str_eq(r.text, expect, "whole: got [%s]", r.text);
	for (size_t k = 1; k < a.n; k++) {
		run_conn(a, k, b, 0, &r);
		cr_assert_str_eq(r.text, expect, "request split at %zu: got [%s]", k, r.text);
	}
	for (size_t k = 1; k < b.n; k++) {
		run_conn(a, 0, b, k, &r);
		cr_assert_str_eq(r.text, expect, "response split at %zu: got [%s]", k, r.text);
	}
	run_conn(a, SIZE_MAX, b, SIZE_MAX, &r);
	cr_assert_str_eq(r.text, expect, "byte by byte: got [%s]", r.text);
}

/* HEADERS padded and with priority, its block continued twice; DATA padded;
 * gRPC trailers; a trailers-only response; a 1xx before a final head; a
 * PUSH_PROMISE and PING, WINDOW_UPDATE, PRIORITY and an unknown type in
 * between. */
Test(h2, padding_continuation_trailers)
{
	static struct wire req, resp;
	preface(&req, &resp);
	uint8_t hb[512], p[600];
	size_t n = block(hb, ":method", "POST", ":scheme", "http", ":path", "/pkg.Svc/Call", ":authority", "example:80",
			 "content-type", "application/grpc+proto", (char *)NULL);
	/* HEADERS: pad length 3, priority 5, the first 10 bytes of the block */
	p[0] = 3;
	memcpy(p + 1, "\x80\0\0\0\x10", 5);
	memcpy(p + 6, hb, 10);
	memset(p + 16, 0, 3);
	frame(&req, PING, 0, 0, "12345678", 8);
	frame(&req, HEADERS, 0x8 | 0x20, 1, p, 19);
	frame(&req, CONT, 0, 1, hb + 10, 20);
	frame(&req, CONT, 0x4, 1, hb + 30, n - 30);
	p[0] = 2;
	memcpy(p + 1, "\0\0\0\0\x03" "abc\0\0", 10);
	frame(&req, DATA, 0x8 | 0x1, 1, p, 11);
	frame(&req, WINDOW, 0, 0, "\0\0\x10\0", 4);
	frame(&req, 0xfa, 0, 0, "whatever", 8);
	n = block(hb, ":method", "GET", ":scheme", "http", ":path", "/x?y=1", ":authority", "example", (char *)NULL);
	frame(&req, HEADERS, 0x4 | 0x1, 3, hb, n);
	frame(&req, PRIORITY, 0, 3, "\0\0\0\x01\x10", 5);
	n = block(hb, ":method", "POST", ":path", "/pkg.Svc/Fail", "content-type", "application/grpc", (char *)NULL);
	frame(&req, HEADERS, 0x4, 5, hb, n);
	frame(&req, DATA, 0x1, 5, "\0\0\0\0\0", 5);

	n = block(hb, ":status", "100", (char *)NULL);
	frame(&resp, HEADERS, 0x4, 3, hb, n);
	n = block(hb, ":method", "GET", ":path", "/pushed", (char *)NULL);
	memcpy(p, "\0\0\0\x02", 4);
	memcpy(p + 4, hb, n);
	frame(&resp, PUSH, 0x4, 3, p, 4 + n);
	n = block(hb, ":status", "200", "content-type", "application/grpc", (char *)NULL);
	frame(&resp, HEADERS, 0x4, 1, hb, n);
	frame(&resp, DATA, 0, 1, "\0\0\0\0\x02ok", 7);
	n = block(hb, "grpc-status", "0", "grpc-message", "", (char *)NULL);
	frame(&resp, HEADERS, 0x4 | 0x1, 1, hb, n);
	n = block(hb, ":status", "404", "content-length", "0", (char *)NULL);
	frame(&resp, HEADERS, 0x4 | 0x1, 3, hb, n);
	n = block(hb, ":status", "200", "content-type", "application/grpc", "grpc-status", "12", (char *)NULL);
	frame(&resp, HEADERS, 0x4 | 0x1, 5, hb, n);
	check_built(&req, &resp,
		    "REQ_HEAD 1 POST /pkg.Svc/Call example:80 grpc; REQ_END 1 8; "
		    "REQ_HEAD 3 GET /x?y=1 example end; "
		    "REQ_HEAD 5 POST /pkg.Svc/Fail  grpc; REQ_END 5 5; "
		    "RESP_HEAD 1 200; RESP_END 1 200 g0 7; RESP_HEAD 3 404; RESP_END 3 404 g-1 0; "
		    "RESP_HEAD 5 200; RESP_END 5 200 g12 0; ");
}

/* Resets from either side, the server's GOAWAY, and the close. */
Test(h2, resets_goaway_close)
{
	static struct wire req, resp;
	preface(&req, &resp);
	uint8_t hb[256];
	size_t n = block(hb, ":method", "GET", ":path", "/a", (char *)NULL);
	for (uint32_t s = 1; s <= 11; s += 2)
		frame(&req, HEADERS, 0x5, s, hb, n);
	frame(&req, RST, 0, 3, "\0\0\0\x08", 4);        /* the client cancels 3 */
	frame(&resp, RST, 0, 5, "\0\0\0\x07", 4);       /* the server refuses 5 */
	frame(&resp, GOAWAY, 0, 0, "\0\0\0\x07\0\0\0\0", 8);   /* nothing past 7 */
	n = block(hb, ":status", "204", (char *)NULL);
	frame(&resp, HEADERS, 0x4, 1, hb, n);           /* 1 and 7 left open: the close */
	check_built(&req, &resp,
		    "REQ_HEAD 1 GET /a  end; REQ_HEAD 3 GET /a  end; REQ_HEAD 5 GET /a  end; REQ_HEAD 7 GET /a  end; "
		    "REQ_HEAD 9 GET /a  end; REQ_HEAD 11 GET /a  end; ABORTED 3; ABORTED 5; ABORTED 9; ABORTED 11; "
		    "RESP_HEAD 1 204; ABORTED 1; ABORTED 7; ");
}

/* SETTINGS_HEADER_TABLE_SIZE each way: the server's encoder may grow its
 * table to what the client announced; past the cap the connection is given
 * up; a size update beyond what was announced is malformed. */
Test(h2, table_size_mid_connection)
{
	static struct wire req, resp, req2;
	static struct rec r;
	static uint8_t v[3000];
	memset(v, 'v', sizeof v);
	preface(&req, &resp);
	static const uint8_t client_8192[6] = { 0, 1, 0, 0, 0x20, 0 };
	frame(&req, SETTINGS, 0, 0, client_8192, 6);
	uint8_t hb[256];
	size_t n = block(hb, ":method", "GET", ":path", "/", (char *)NULL);
	frame(&req, HEADERS, 0x5, 1, hb, n);
	frame(&req, HEADERS, 0x5, 3, hb, n);
	/* stream 1: a size update to 8192 (31 + 8161), :status 200, and an
	 * entry "abc" of a 3000-byte value (127 + 2873): 3035 bytes */
	static const uint8_t head1[] = { 0x3f, 0xe1, 0x3f, 0x88, 0x40, 3, 'a', 'b', 'c', 0x7f, 0xb9, 0x16 };
	frame(&resp, HEADERS, 0, 1, head1, sizeof head1);
	frame(&resp, CONT, 0x4, 1, v, sizeof v);
	size_t at = resp.n;
	struct bytes a = { req.b, req.n }, b = { resp.b, resp.n };
	run_conn(a, 0, b, 0, &r);
	cr_assert_str_eq(r.text,
			 "REQ_HEAD 1 GET /  end; REQ_HEAD 3 GET /  end; RESP_HEAD 1 200; ABORTED 1; ABORTED 3; ",
			 "got [%s]", r.text);
	/* the same entry again: 6070 bytes, within 8192 but past the cap */
	frame(&resp, HEADERS, 0, 3, head1 + 3, sizeof head1 - 3);
	frame(&resp, CONT, 0x4, 3, v, sizeof v);
	b.n = resp.n;
	run_conn(a, 0, b, 0, &r);
	cr_assert_str_eq(r.text, "REQ_HEAD 1 GET /  end; REQ_HEAD 3 GET /  end; RESP_HEAD 1 200; GIVEN_UP; ",
			 "got [%s]", r.text);
	/* without the client's announcement, the update itself is malformed */
	memcpy(req2.b, req.b, NL_H2_PREFACE_LEN + 9);
	req2.n = NL_H2_PREFACE_LEN + 9;
	frame(&req2, HEADERS, 0x5, 1, hb, n);
	frame(&req2, HEADERS, 0x5, 3, hb, n);
	struct bytes a2 = { req2.b, req2.n };
	b.n = at;
	run_conn(a2, 0, b, 0, &r);
	cr_assert_str_eq(r.text, "REQ_HEAD 1 GET /  end; REQ_HEAD 3 GET /  end; ERROR; ", "got [%s]", r.text);
}

/* More streams in flight than the table holds: given up; then nothing. */
Test(h2, streams_bound)
{
	static struct wire req, resp;
	static struct rec r;
	preface(&req, &resp);
	uint8_t hb[64];
	size_t n = block(hb, ":method", "GET", ":path", "/", (char *)NULL);
	for (uint32_t s = 1; s <= 2 * NL_H2_STREAMS + 1; s += 2)
		frame(&req, HEADERS, 0x5, s, hb, n);
	struct bytes a = { req.b, req.n }, b = { resp.b, resp.n };
	run_conn(a, 0, b, 0, &r);
	cr_assert(strstr(r.text, "REQ_HEAD 255 GET /  end; GIVEN_UP; ") != NULL, "got [%s]", r.text);
	cr_assert(strstr(r.text, "ABORTED") == NULL);
	cr_assert(!nl_h2_active(&conn));
}

/* Streams far apart in id share the table through probing. */
Test(h2, streams_probe)
{
	static struct wire req, resp;
	preface(&req, &resp);
	uint8_t hb[64];
	size_t n = block(hb, ":method", "GET", ":path", "/", (char *)NULL);
	frame(&req, HEADERS, 0x5, 1, hb, n);
	frame(&req, HEADERS, 0x5, 1 + 2 * NL_H2_STREAMS, hb, n);       /* the same home */
	frame(&req, HEADERS, 0x5, 3 + 2 * NL_H2_STREAMS, hb, n);
	n = block(hb, ":status", "200", (char *)NULL);
	frame(&resp, HEADERS, 0x5, 3 + 2 * NL_H2_STREAMS, hb, n);
	frame(&resp, HEADERS, 0x5, 1 + 2 * NL_H2_STREAMS, hb, n);
	frame(&resp, HEADERS, 0x5, 1, hb, n);
	check_built(&req, &resp,
		    "REQ_HEAD 1 GET /  end; REQ_HEAD 257 GET /  end; REQ_HEAD 259 GET /  end; "
		    "RESP_HEAD 259 200; RESP_END 259 200 g-1 0; RESP_HEAD 257 200; RESP_END 257 200 g-1 0; "
		    "RESP_HEAD 1 200; RESP_END 1 200 g-1 0; ");
}

/* Malformed: reported once as ERROR, nothing in flight reported after. */
static void check_bad(void (*build)(struct wire *req, struct wire *resp), const char *expect)
{
	static struct wire req, resp;
	static struct rec r;
	preface(&req, &resp);
	build(&req, &resp);
	struct bytes a = { req.b, req.n }, b = { resp.b, resp.n };
	run_conn(a, 0, b, 0, &r);
	cr_assert_str_eq(r.text, expect, "got [%s]", r.text);
}

static size_t get_block(uint8_t *hb) { return block(hb, ":method", "GET", ":path", "/", (char *)NULL); }

static void bad_cont_stream(struct wire *req, struct wire *resp)
{
	(void)resp;
	uint8_t hb[64];
	size_t n = get_block(hb);
	frame(req, HEADERS, 0x1, 1, hb, 4);
	frame(req, CONT, 0x4, 3, hb + 4, n - 4);
}
static void bad_interleaved(struct wire *req, struct wire *resp)
{
	(void)resp;
	uint8_t hb[64];
	size_t n = get_block(hb);
	frame(req, HEADERS, 0x1, 1, hb, 4);
	frame(req, DATA, 0x1, 1, "", 0);
	frame(req, CONT, 0x4, 1, hb + 4, n - 4);
}
static void bad_even_stream(struct wire *req, struct wire *resp)
{
	(void)resp;
	uint8_t hb[64];
	frame(req, HEADERS, 0x5, 2, hb, get_block(hb));
}
static void bad_stream0(struct wire *req, struct wire *resp)
{
	(void)resp;
	uint8_t hb[64];
	frame(req, HEADERS, 0x5, 0, hb, get_block(hb));
}
static void bad_padding(struct wire *req, struct wire *resp)
{
	(void)resp;
	uint8_t hb[64];
	frame(req, HEADERS, 0x5, 1, hb, get_block(hb));
	frame(req, DATA, 0x8, 1, "\x09zz", 3);
}
static void bad_no_status(struct wire *req, struct wire *resp)
{
	uint8_t hb[64];
	frame(req, HEADERS, 0x5, 1, hb, get_block(hb));
	frame(resp, HEADERS, 0x5, 1, hb, block(hb, "server", "x", (char *)NULL));
}
static void bad_settings(struct wire *req, struct wire *resp)
{
	(void)resp;
	frame(req, SETTINGS, 0, 0, "\0\1\0\0", 4);
}
static void bad_first_frame(struct wire *req, struct wire *resp)
{
	(void)req;
	resp->n = 0;
	frame(resp, PING, 0, 0, "12345678", 8);
}

Test(h2, malformed)
{
	check_bad(bad_cont_stream, "ERROR; ");
	check_bad(bad_interleaved, "ERROR; ");
	check_bad(bad_even_stream, "ERROR; ");
	check_bad(bad_stream0, "ERROR; ");
	check_bad(bad_padding, "REQ_HEAD 1 GET /  end; ERROR; ");
	check_bad(bad_no_status, "REQ_HEAD 1 GET /  end; ERROR; ");
	check_bad(bad_settings, "ERROR; ");
	check_bad(bad_first_frame, "ERROR; ");
	/* not the preface */
	static struct rec r;
	nl_h2_init(&conn, NL_HPACK_CAP);
	memset(&r, 0, sizeof r);
	cr_assert(!nl_h2_feed(&conn, NL_H2_REQUEST, "GET / HTTP/1.1\r\n", 16, on_event, &r));
	cr_assert_str_eq(r.text, "ERROR; ");
}

/* DATA payloads for a body scanner, in pieces as they come, without padding. */
Test(h2, data_hook)
{
	static struct wire req, resp;
	static struct rec r;
	preface(&req, &resp);
	uint8_t hb[64];
	size_t n = block(hb, ":method", "POST", ":path", "/v1/chat/completions", (char *)NULL);
	frame(&req, HEADERS, 0x4, 1, hb, n);
	frame(&req, DATA, 0x8 | 0x1, 1, "\x02{}\0\0", 5);
	n = block(hb, ":status", "200", (char *)NULL);
	frame(&resp, HEADERS, 0x4, 1, hb, n);
	frame(&resp, DATA, 0x1, 1, "data: x\n\n", 9);
	nl_h2_init(&conn, NL_HPACK_CAP);
	conn.want_data = true;
	memset(&r, 0, sizeof r);
	nl_h2_feed(&conn, NL_H2_REQUEST, req.b, req.n - 3, on_event, &r);
	nl_h2_feed(&conn, NL_H2_REQUEST, req.b + req.n - 3, 3, on_event, &r);
	nl_h2_feed(&conn, NL_H2_RESPONSE, resp.b, resp.n, on_event, &r);
	cr_assert_str_eq(r.text,
			 "REQ_HEAD 1 POST /v1/chat/completions ; DATA 1 req 1; DATA 1 req 1; REQ_END 1 2; "
			 "RESP_HEAD 1 200; DATA 1 resp 9; RESP_END 1 200 g-1 9; ",
			 "got [%s]", r.text);
}

Test(h2, starts)
{
	cr_assert(nl_h2_starts(NL_H2_REQUEST, "PRI * HTTP/2.0\r\n", 16));
	cr_assert(!nl_h2_starts(NL_H2_REQUEST, "PRI * HTTP/1.1\r\n", 16));
	cr_assert(nl_h2_starts(NL_H2_RESPONSE, "\0\0\x12\x04\0\0\0\0\0", 9));
	cr_assert(!nl_h2_starts(NL_H2_RESPONSE, "\0\0\x12\x04\x01\0\0\0\0", 9));
	cr_assert(!nl_h2_starts(NL_H2_RESPONSE, "\0\0\x13\x04\0\0\0\0\0", 9));
	cr_assert(!nl_h2_starts(NL_H2_RESPONSE, "HTTP/1.1 200", 12));
}
