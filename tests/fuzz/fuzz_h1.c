/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the HTTP/1.x parser (preload/http/h1.c) and checks what its events
 * promise, not only that it does not crash.
 *
 * Input: one byte seeding the split pattern, then the request stream, then
 * SEP and the response stream (no SEP: all request). The connection is run
 * three times: each direction whole; each in pieces the seed chooses (the
 * events must be the same as whole); the two directions interleaved piece by
 * piece, some pieces fed as unseen (nl_h1_feed_opaque): events may differ,
 * the invariants must hold. Where the CPU has AVX2, the whole run is made
 * once more without it: the same events. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* memmem */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h1.h"

#define SEP "\n~~~\n"

struct check {
	uint64_t hash;
	unsigned events;
	uint64_t fed[2];        /* bytes fed so far per direction, the current call included */
	uint8_t order[NL_H1_PIPELINE];   /* open slots, oldest first */
	unsigned open;
	int req_slot;           /* slot of the request being read, -1: none */
	char line[NL_H1_METHOD_MAX + 1 + NL_H1_TARGET_MAX];   /* the last REQ_LINE's method, SP, target */
	size_t line_len;
	char host[NL_H1_HOST_MAX];      /* the last REQ_HEAD's Host value */
	size_t host_len;
	bool has_host;
	bool ended;             /* NOT_HTTP, ERROR or upgraded: nothing may follow */
};

static void hash(struct check *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		c->hash = (c->hash ^ b[i]) * 0x100000001b3ull;
}

static void hash_u64(struct check *c, uint64_t v)
{
	hash(c, &v, sizeof v);
}

#define need(cond) \
	do { \
		if (!(cond)) \
			__builtin_trap(); \
	} while (0)

/* Closes the oldest open slot, which must be this one. */
static void close_slot(struct check *c, unsigned slot)
{
	need(c->open > 0 && c->order[0] == slot);
	memmove(c->order, c->order + 1, --c->open);
}

static void one_event(struct check *c, const struct nl_h1_event *ev)
{
	need(!c->ended);
	need(ev->slot < NL_H1_PIPELINE);
	c->events++;
	hash_u64(c, ev->type);
	hash_u64(c, ev->slot);
	switch (ev->type) {
	case NL_H1_REQ_BEGIN:
		need(c->req_slot < 0);
		c->req_slot = (int)ev->slot;
		break;
	case NL_H1_REQ_LINE:
		need(c->req_slot == (int)ev->slot);
		need(ev->method && ev->method_len >= 1 && ev->method_len <= NL_H1_METHOD_MAX);
		need(ev->target && ev->target_len >= 1 && ev->target_len <= NL_H1_TARGET_MAX);
		need(!ev->target_truncated || ev->target_len == NL_H1_TARGET_MAX);
		need(ev->version_minor <= 1);
		for (unsigned i = 0; i < c->open; i++)
			need(c->order[i] != ev->slot);
		need(c->open < NL_H1_PIPELINE);
		c->order[c->open++] = (uint8_t)ev->slot;
		/* same_line is a hint, never a lie: the previous line's bytes.
		 * Not hashed: a split may leave it false where whole it is true. */
		if (ev->same_line)
			need(c->line_len == ev->method_len + 1 + ev->target_len &&
			     !memcmp(c->line, ev->method, ev->method_len) &&
			     !memcmp(c->line + ev->method_len + 1, ev->target, ev->target_len));
		memcpy(c->line, ev->method, ev->method_len);
		c->line[ev->method_len] = ' ';
		memcpy(c->line + ev->method_len + 1, ev->target, ev->target_len);
		c->line_len = ev->method_len + 1 + ev->target_len;
		hash(c, ev->method, ev->method_len);
		hash(c, ev->target, ev->target_len);
		hash_u64(c, ev->target_truncated);
		hash_u64(c, ev->version_minor);
		break;
	case NL_H1_REQ_HEAD:
		need(c->req_slot == (int)ev->slot);
		need(ev->host_len <= NL_H1_HOST_MAX && (ev->host || !ev->host_len));
		/* same_host is a hint, never a lie: the last Host value's bytes.
		 * Not hashed, as same_line. */
		if (ev->same_host)
			need(ev->host && c->has_host && c->host_len == ev->host_len &&
			     !memcmp(c->host, ev->host, ev->host_len));
		if (ev->host) {
			memcpy(c->host, ev->host, ev->host_len);
			c->host_len = ev->host_len;
			c->has_host = true;
		}
		hash_u64(c, !!ev->host);
		if (ev->host)
			hash(c, ev->host, ev->host_len);
		break;
	case NL_H1_REQ_END:
		need(c->req_slot == (int)ev->slot);
		need(ev->body_size <= c->fed[NL_H1_REQUEST]);
		c->req_slot = -1;
		hash_u64(c, ev->body_size);
		break;
	case NL_H1_RESP_HEAD:
		need(c->open > 0 && c->order[0] == ev->slot);
		need(ev->status >= 100 && ev->status <= 999 && ev->version_minor <= 1);
		hash_u64(c, ev->status);
		hash_u64(c, ev->version_minor);
		break;
	case NL_H1_RESP_END:
	case NL_H1_RESP_UPGRADED:
		close_slot(c, ev->slot);
		need(ev->status >= 200 || ev->status == 101);
		need(ev->body_size <= c->fed[NL_H1_RESPONSE]);
		need(ev->type == NL_H1_RESP_END || ev->body_size == 0);
		c->ended = ev->type == NL_H1_RESP_UPGRADED;
		hash_u64(c, ev->status);
		hash_u64(c, ev->body_size);
		hash_u64(c, ev->type);
		break;
	case NL_H1_ABORTED:
		close_slot(c, ev->slot);
		break;
	case NL_H1_NOT_HTTP:
	case NL_H1_ERROR:
		c->ended = true;
		break;
	default:
		__builtin_trap();
	}
}

/* An event with another folded in counts as the two, in their order: the
 * hash is the same for any split. */
static void sink(void *ctx, const struct nl_h1_event *ev)
{
	struct check *c = ctx;
	unsigned may = ev->type == NL_H1_REQ_LINE ? NL_H1_FOLD_BEGIN
		       : ev->type == NL_H1_REQ_HEAD ? NL_H1_FOLD_END
		       : ev->type == NL_H1_RESP_END || ev->type == NL_H1_RESP_UPGRADED ? NL_H1_FOLD_HEAD
											      : 0;
	need(!(ev->folded & ~may));
	struct nl_h1_event one = *ev;
	one.folded = 0;
	if (ev->folded & NL_H1_FOLD_BEGIN) {
		struct nl_h1_event b = { .type = NL_H1_REQ_BEGIN, .slot = ev->slot };
		one_event(c, &b);
	}
	if (ev->folded & NL_H1_FOLD_HEAD) {
		struct nl_h1_event h = {
			.type = NL_H1_RESP_HEAD, .slot = ev->slot, .status = ev->status, .version_minor = ev->version_minor,
		};
		one_event(c, &h);
	}
	one_event(c, &one);
	if (ev->folded & NL_H1_FOLD_END) {
		struct nl_h1_event end = { .type = NL_H1_REQ_END, .slot = ev->slot };
		one_event(c, &end);
	}
}

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Piece sizes: mostly small, sometimes large, sometimes empty. */
static size_t piece(uint32_t *s, size_t left)
{
	uint32_t r = rnd(s);
	size_t n = r & 0x100 ? r % 7 : r % 400;
	return n < left ? n : left;
}

static void feed(struct nl_h1 *h, struct check *c, enum nl_h1_dir dir, const uint8_t *p, size_t n)
{
	c->fed[dir] += n;
	bool more = nl_h1_feed(h, dir, p, n, sink, c);
	need(more == nl_h1_active(h));
}

static void finish(struct nl_h1 *h, struct check *c)
{
	nl_h1_close(h, sink, c);
	need(c->ended || c->open == 0);
	need(!nl_h1_active(h));
}

/* Bytes fed as moved unseen (sendfile): what they count as must stay within
 * what was fed too. */
static void feed_opaque(struct nl_h1 *h, struct check *c, enum nl_h1_dir dir, size_t n)
{
	c->fed[dir] += n;
	bool more = nl_h1_feed_opaque(h, dir, n, sink, c);
	need(more == nl_h1_active(h));
}

/* whole: each direction in one call; else pieces, interleaved (and now and
 * then unseen) or not. */
static void run(struct check *c, const uint8_t *req, size_t rn, const uint8_t *resp, size_t sn, uint8_t seed,
		int how)
{
	static struct nl_h1 h;
	nl_h1_init(&h);
	if (seed & 0x80)
		nl_h1_compare_lines(&h);
	memset(c, 0, sizeof *c);
	c->hash = 0xcbf29ce484222325ull;
	c->req_slot = -1;
	uint32_t s = 0x9e3779b9u ^ seed;
	if (how == 0) {
		feed(&h, c, NL_H1_REQUEST, req, rn);
		feed(&h, c, NL_H1_RESPONSE, resp, sn);
	} else if (how == 1) {
		for (size_t at = 0, k; at < rn; at += k)
			feed(&h, c, NL_H1_REQUEST, req + at, k = piece(&s, rn - at));
		for (size_t at = 0, k; at < sn; at += k)
			feed(&h, c, NL_H1_RESPONSE, resp + at, k = piece(&s, sn - at));
	} else {
		size_t ra = 0, sa = 0;
		while (ra < rn || sa < sn) {
			size_t k;
			bool unseen = (rnd(&s) & 15) == 0;
			if (sa == sn || (ra < rn && rnd(&s) & 1)) {
				k = piece(&s, rn - ra);
				if (unseen)
					feed_opaque(&h, c, NL_H1_REQUEST, k);
				else
					feed(&h, c, NL_H1_REQUEST, req + ra, k);
				ra += k;
			} else {
				k = piece(&s, sn - sa);
				if (unseen)
					feed_opaque(&h, c, NL_H1_RESPONSE, k);
				else
					feed(&h, c, NL_H1_RESPONSE, resp + sa, k);
				sa += k;
			}
		}
	}
	finish(&h, c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t seed = data[0];
	const uint8_t *req = data + 1, *resp = NULL;
	size_t rn = size - 1, sn = 0;
	const uint8_t *sep = memmem(req, rn, SEP, sizeof SEP - 1);
	if (sep) {
		resp = sep + sizeof SEP - 1;
		sn = (size_t)(req + rn - resp);
		rn = (size_t)(sep - req);
	}
	struct check whole, pieces, mixed;
	run(&whole, req, rn, resp, sn, seed, 0);
	run(&pieces, req, rn, resp, sn, seed, 1);
	need(whole.events == pieces.events && whole.hash == pieces.hash);
	if (nl_h1_avx2) {
		/* The quick path's SSE2 copy: the same events. */
		struct check narrow;
		nl_h1_avx2 = false;
		run(&narrow, req, rn, resp, sn, seed, 0);
		nl_h1_avx2 = true;
		need(whole.events == narrow.events && whole.hash == narrow.hash);
	}
	run(&mixed, req, rn, resp, sn, seed, 2);
	return 0;
}
