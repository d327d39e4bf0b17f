/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the HTTP/2 follower (preload/http/h2.c, hpack.c) and checks what
 * its events promise, not only that it does not crash.
 *
 * Input: one byte seeding the split pattern, then the request stream, then
 * SEP and the response stream (no SEP: all request). The connection is run
 * twice, each direction fed whole before the response one, then closed:
 * once in one call per direction, once in pieces the seed chooses; the
 * events must be the same. Invariants: a stream's events come in order
 * (its head first, one end), request streams are new, odd and rising,
 * records are in range, and nothing follows ERROR or GIVEN_UP. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE     /* memmem */
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h2.h"

#define SEP "\n~~~\n"

#define need(cond) \
	do { \
		if (!(cond)) \
			__builtin_trap(); \
	} while (0)

struct check {
	uint64_t hash;
	unsigned events;
	uint32_t last_id;
	uint32_t open[NL_H2_STREAMS];   /* by record: its stream id, 0 none */
	uint8_t resp_head[NL_H2_STREAMS];
	bool ended;
};

static void hash(struct check *c, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		c->hash = (c->hash ^ b[i]) * 0x100000001b3ull;
}

static void on_event(void *ctx, const struct nl_h2_event *ev)
{
	struct check *c = ctx;
	need(!c->ended);
	c->events++;
	uint32_t v[4] = { ev->type, ev->stream, ev->status, (uint32_t)ev->grpc_status };
	hash(c, v, sizeof v);
	hash(c, &ev->body_size, sizeof ev->body_size);
	if (ev->type == NL_H2_ERROR || ev->type == NL_H2_GIVEN_UP) {
		c->ended = true;
		return;
	}
	need(ev->slot < NL_H2_STREAMS);
	switch (ev->type) {
	case NL_H2_REQ_HEAD: {
		const struct nl_h2_fields *f = ev->fields;
		need(ev->stream & 1 && ev->stream > c->last_id);
		need(f->method_len > 0 && f->method_len <= NL_H2_METHOD_MAX && f->path_len <= NL_H2_PATH_MAX &&
		     f->authority_len <= NL_H2_AUTHORITY_MAX);
		need(c->open[ev->slot] == 0);
		hash(c, f->method, f->method_len);
		hash(c, f->path, f->path_len);
		hash(c, f->authority, f->authority_len);
		c->last_id = ev->stream;
		c->open[ev->slot] = ev->stream;
		c->resp_head[ev->slot] = 0;
		break;
	}
	case NL_H2_REQ_END:
		need(c->open[ev->slot] == ev->stream);
		break;
	case NL_H2_RESP_HEAD:
		need(c->open[ev->slot] == ev->stream && !c->resp_head[ev->slot]);
		need(ev->status >= 200 && ev->status <= 999);
		c->resp_head[ev->slot] = 1;
		break;
	case NL_H2_RESP_END:
		need(c->open[ev->slot] == ev->stream && c->resp_head[ev->slot]);
		c->open[ev->slot] = 0;
		break;
	case NL_H2_ABORTED:
		need(c->open[ev->slot] == ev->stream);
		c->open[ev->slot] = 0;
		break;
	default:
		need(0);
	}
}

static struct nl_h2 conn;

static void run(const uint8_t *d[2], const size_t n[2], uint8_t seed, bool split, struct check *c)
{
	memset(c, 0, sizeof *c);
	c->hash = 0xcbf29ce484222325ull;
	nl_h2_init(&conn, NL_HPACK_CAP / (seed & 0x80 ? 16 : 1));
	uint32_t x = seed | 1u;
	for (int dir = 0; dir < 2; dir++) {
		size_t i = 0;
		while (i < n[dir]) {
			size_t k = n[dir] - i;
			if (split) {
				x = x * 1103515245u + 12345u;
				k = 1 + (x >> 16) % 17;
				if (k > n[dir] - i)
					k = n[dir] - i;
			}
			nl_h2_feed(&conn, (enum nl_h2_dir)dir, d[dir] + i, k, on_event, c);
			i += k;
		}
	}
	nl_h2_close(&conn, on_event, c);
	if (!c->ended)
		for (unsigned s = 0; s < NL_H2_STREAMS; s++)
			need(c->open[s] == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t seed = data[0];
	data++;
	size--;
	const uint8_t *sep = memmem(data, size, SEP, sizeof SEP - 1);
	const uint8_t *d[2] = { data, sep ? sep + sizeof SEP - 1 : data + size };
	size_t n[2] = { sep ? (size_t)(sep - data) : size, sep ? size - (size_t)(d[1] - data) : 0 };
	static struct check whole, pieces;
	run(d, n, seed, false, &whole);
	run(d, n, seed, true, &pieces);
	need(whole.hash == pieces.hash && whole.events == pieces.events);
	return 0;
}
