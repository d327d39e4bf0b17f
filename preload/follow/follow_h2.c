/* SPDX-License-Identifier: Apache-2.0 */
#include "follow_h2.h"

#include <stdatomic.h>
#include <string.h>

#include "chunk.h"
#include "clock.h"
#include "h2.h"
#include "httpmetrics.h"
#include "route.h"
#include "rpcmetrics.h"

/* What the glue keeps per stream, by the parser's stream record. */
struct h2slot {
	uint32_t start_us;              /* CLOCK_MONOTONIC microseconds modulo 2^32 */
	_Atomic uint32_t request_body;  /* capped at 4 GiB */
	int16_t route;                  /* server: route id */
	int16_t rpc;                    /* gRPC: method id (rpcmetrics.h); NOT_RPC else */
	uint8_t method;
	uint8_t name;                   /* server: its server name id + 2 */
	_Atomic uint8_t open;           /* NL_SLOT_OPEN, NL_SLOT_COUNTED (httpconn.h) */
};
#define NOT_RPC (-2)

struct nl_h2conn {
	struct h2slot slots[NL_H2_STREAMS];
	struct nl_h2 h2;                /* last: its tables' rings are touched only as they fill */
};

const size_t nl_follow_h2_conn_size = sizeof(struct nl_h2conn);

/* ---- the pool -------------------------------------------------------------- */

#define CHUNK 16
static _Atomic(void *) chunks[NL_H2_CONNS / CHUNK];   /* each a struct nl_h2conn[CHUNK] once mapped */
static _Atomic uint64_t used[NL_H2_CONNS / 64];
/* States taken before: no longer the zeros they were mapped with. An idle
 * connection on a fresh one touches only its first page or two. */
static _Atomic uint64_t ever[NL_H2_CONNS / 64];

static struct nl_h2conn *chunk_get(unsigned k)
{
	struct nl_h2conn *c = atomic_load_explicit(&chunks[k], memory_order_acquire);
	return c ? c : nl_chunk_fill(&chunks[k], CHUNK * sizeof(struct nl_h2conn));
}

/* A state, and whether it is fresh (zeroed) memory. */
static struct nl_h2conn *pool_take(bool *fresh)
{
	for (unsigned w = 0; w < NL_H2_CONNS / 64; w++) {
		uint64_t v = atomic_load_explicit(&used[w], memory_order_relaxed);
		while (~v) {
			unsigned b = (unsigned)__builtin_ctzll(~v);
			if (atomic_compare_exchange_weak(&used[w], &v, v | (uint64_t)1 << b)) {
				unsigned i = w * 64 + b;
				struct nl_h2conn *c = chunk_get(i / CHUNK);
				if (!c) {
					atomic_fetch_and(&used[w], ~((uint64_t)1 << b));
					return NULL;
				}
				*fresh = !(atomic_fetch_or(&ever[w], (uint64_t)1 << b) & (uint64_t)1 << b);
				return &c[i % CHUNK];
			}
		}
	}
	return NULL;
}

static void pool_put(struct nl_h2conn *p)
{
	for (unsigned k = 0; k < NL_H2_CONNS / CHUNK; k++) {
		struct nl_h2conn *c = atomic_load_explicit(&chunks[k], memory_order_acquire);
		if (c && p >= c && p < c + CHUNK) {
			unsigned i = k * CHUNK + (unsigned)(p - c);
			atomic_fetch_and(&used[i / 64], ~((uint64_t)1 << (i % 64)));
			return;
		}
	}
}

/* ---- events ------------------------------------------------------------------ */

struct feed {
	struct nl_httpconn *c;
	struct nl_h2conn *p;
	uint64_t now_ns;
};

static inline uint32_t now_us(struct feed *f)
{
	if (!f->now_ns)
		f->now_ns = nl_monotonic_ns();
	return (uint32_t)(f->now_ns / 1000);
}

static void request_head(struct feed *f, const struct nl_h2_event *ev)
{
	struct nl_httpconn *c = f->c;
	const struct nl_h2_fields *h = ev->fields;
	struct h2slot *s = &f->p->slots[ev->slot];
	s->start_us = now_us(f);
	atomic_store_explicit(&s->request_body, 0, memory_order_relaxed);
	s->method = (uint8_t)nl_http_method_of(h->method, h->method_len);
	s->route = NL_ROUTE_NONE;
	s->rpc = h->grpc ? (int16_t)nl_rpc_method(h->path, h->path_len, h->path_truncated) : NOT_RPC;
	uint8_t open = NL_SLOT_OPEN;
	if (c->side == NL_HTTP_SERVER) {
		if (h->path_len)
			s->route = (int16_t)nl_http_route(h->path, h->path_len, h->path_truncated);
		int name = nl_follow_conn_name(c, h->authority_len ? h->authority : NULL, h->authority_len);
		s->name = (uint8_t)(name + 2);
		if (nl_http_server_started(s->method, c->flags & NL_HTTPCONN_TLS, name))
			open |= NL_SLOT_COUNTED;
	} else if (h->authority_len) {
		nl_follow_request_host(c, h->authority, h->authority_len);
	}
	atomic_store_explicit(&s->open, open, memory_order_release);
}

static void finish(struct feed *f, const struct nl_h2_event *ev, bool aborted)
{
	struct nl_httpconn *c = f->c;
	struct h2slot *s = &f->p->slots[ev->slot];
	uint8_t open = atomic_exchange_explicit(&s->open, 0, memory_order_acquire);
	if (!(open & NL_SLOT_OPEN))
		return;
	uint64_t duration_ns = (uint64_t)(uint32_t)(now_us(f) - s->start_us) * 1000;
	unsigned status = aborted ? 0 : ev->status;
	bool client = c->side != NL_HTTP_SERVER;
	struct nl_http_exchange x = {
		.method = s->method,
		.status = (uint16_t)status,
		.version_minor = 2,
		.duration_ns = duration_ns,
	};
	if (!client) {
		x.route = s->route;
		x.tls = c->flags & NL_HTTPCONN_TLS;
		x.counted = open & NL_SLOT_COUNTED;
		x.name = (int16_t)((int)s->name - 2);
		x.request_body = atomic_load_explicit(&s->request_body, memory_order_relaxed);
		x.response_body = ev->body_size;
		nl_http_server_done(&x);
	} else {
		x.host = atomic_load_explicit(&c->host, memory_order_relaxed);
		x.port = atomic_load_explicit(&c->port, memory_order_relaxed);
		x.dest = atomic_load_explicit(&c->dest, memory_order_relaxed);
		nl_http_client_done(&x);
	}
	if (s->rpc == NOT_RPC)
		return;
	/* The call's status: its grpc-status, else one from the HTTP status;
	 * a call cut short (reset, GOAWAY, close) was cancelled. */
	unsigned code = aborted			      ? NL_GRPC_CANCELLED
			: ev->grpc_status >= NL_GRPC_CODES ? 2 /* UNKNOWN */
			: ev->grpc_status >= 0		      ? (unsigned)ev->grpc_status
							      : nl_grpc_status_of_http(status);
	struct nl_rpc_call call = {
		.duration_ns = duration_ns,
		.method = s->rpc,
		.status = (uint8_t)code,
		.client = client,
		.host = client ? x.host : -1,
		.port = client ? x.port : 0,
	};
	nl_rpc_done(&call);
}

/* Stopped (malformed, past a bound): requests counted as active stop
 * counting, nothing else is reported for them. */
static void drop_open(struct nl_httpconn *c, struct nl_h2conn *p)
{
	for (unsigned i = 0; i < NL_H2_STREAMS; i++) {
		struct h2slot *s = &p->slots[i];
		if (atomic_load_explicit(&s->open, memory_order_relaxed) &&
		    (atomic_exchange(&s->open, 0) & NL_SLOT_COUNTED) && c->side == NL_HTTP_SERVER)
			nl_http_server_ended(s->method, c->flags & NL_HTTPCONN_TLS, (int)s->name - 2);
	}
}

static void on_event(void *ctx, const struct nl_h2_event *ev)
{
	struct feed *f = ctx;
	switch (ev->type) {
	case NL_H2_REQ_HEAD:
		request_head(f, ev);
		break;
	case NL_H2_REQ_END:
		atomic_store_explicit(&f->p->slots[ev->slot].request_body,
				      ev->body_size > UINT32_MAX ? UINT32_MAX : (uint32_t)ev->body_size, memory_order_relaxed);
		break;
	case NL_H2_RESP_HEAD:
		break;
	case NL_H2_RESP_END:
		finish(f, ev, false);
		break;
	case NL_H2_ABORTED:
		finish(f, ev, true);
		break;
	case NL_H2_DATA:
		/* A stream's body bytes: where a body scanner reads them (the
		 * parser reports them only with want_data set). */
		break;
	case NL_H2_GIVEN_UP:
		nl_http2_given_up(f->p->h2.half[0].block || f->p->h2.half[1].block ? NL_H2_GIVEN_UP_TABLE
										 : NL_H2_GIVEN_UP_STREAMS);
		drop_open(f->c, f->p);
		break;
	case NL_H2_ERROR:
		drop_open(f->c, f->p);
		break;
	}
}

/* ---- feeding ------------------------------------------------------------------- */

bool nl_follow_h2_feed(struct nl_httpconn *c, enum nl_h1_dir dir, const void *buf, size_t n, uint64_t t0_ns)
{
	struct feed f = { .c = c, .p = c->h2, .now_ns = t0_ns };
	return nl_h2_feed(&f.p->h2, (enum nl_h2_dir)dir, buf, n, on_event, &f);
}

/* The HTTP/1.x parser stops on a 101, in the call that carries it: the
 * connection stays followed past that call, since the next bytes of each
 * direction may be HTTP/2's ("Upgrade: h2c"); the call after, whichever
 * direction, switches or ends the following (a WebSocket, a tunnel). */
static bool upgrade_call(struct nl_httpconn *c)
{
	return atomic_exchange_explicit(&c->upgrade, NL_UPGRADE_OVER, memory_order_relaxed) == NL_UPGRADE_101;
}

bool nl_follow_h2_switch(struct nl_httpconn *c, enum nl_h1_dir dir, const void *buf, size_t n, uint64_t t0_ns)
{
	/* The preface or a SETTINGS head whole in this call's first bytes:
	 * the direction's first bytes (or the first after a 101). */
	if (n < (dir == NL_H1_REQUEST ? 16u : 9u) || !nl_h2_starts((enum nl_h2_dir)dir, buf, n) ||
	    atomic_load_explicit(&c->fed, memory_order_acquire) != 2)
		return upgrade_call(c);
	/* Both directions claimed: nothing else may touch the HTTP/1.x
	 * parser's place while it becomes the HTTP/2 state's. */
	enum nl_h1_dir other = dir == NL_H1_REQUEST ? NL_H1_RESPONSE : NL_H1_REQUEST;
	if (atomic_exchange_explicit(&c->busy[other], 1, memory_order_acquire))
		return false;
	bool fresh;
	struct nl_h2conn *p = pool_take(&fresh);
	if (!p) {
		atomic_store_explicit(&c->busy[other], 0, memory_order_release);
		nl_http2_given_up(NL_H2_GIVEN_UP_POOL);
		return false;
	}
	if (fresh) {
		nl_h2_start(&p->h2);
	} else {
		for (unsigned i = 0; i < NL_H2_STREAMS; i++)
			atomic_store_explicit(&p->slots[i].open, 0, memory_order_relaxed);
		nl_h2_init(&p->h2, NL_HPACK_CAP);
	}
	c->h2 = p;
	atomic_store_explicit(&c->fed, NL_FED_H2, memory_order_release);
	atomic_store_explicit(&c->busy[other], 0, memory_order_release);
	return nl_follow_h2_feed(c, dir, buf, n, t0_ns);
}

void nl_follow_feed_stopped(const struct nl_follow_feed *f, const void *buf, size_t n)
{
	struct nl_httpconn *c = f->c;
	enum nl_h1_dir dir = f->busy == &c->busy[NL_H1_RESPONSE] ? NL_H1_RESPONSE : NL_H1_REQUEST;
	nl_follow_unclaim_quick(f, nl_follow_h2_switch(c, dir, buf, n, f->now_ns));
}

void nl_follow_h2_close(struct nl_httpconn *c)
{
	struct feed f = { .c = c, .p = c->h2 };
	nl_h2_close(&f.p->h2, on_event, &f);
	drop_open(c, f.p);
	atomic_store_explicit(&c->fed, 0, memory_order_release);
	pool_put(f.p);
}

void nl_follow_h2_end(struct nl_httpconn *c)
{
	if (atomic_exchange_explicit(&c->busy[0], 1, memory_order_acquire))
		goto busy;
	if (atomic_exchange_explicit(&c->busy[1], 1, memory_order_acquire)) {
		atomic_store_explicit(&c->busy[0], 0, memory_order_release);
		goto busy;
	}
	nl_follow_h2_close(c);
	atomic_store_explicit(&c->busy[1], 0, memory_order_release);
	atomic_store_explicit(&c->busy[0], 0, memory_order_release);
	return;
busy:
	/* Another thread is feeding it: its state stays out of the pool (it
	 * may still read it), the conn no longer follows it. */
	atomic_store_explicit(&c->fed, 0, memory_order_release);
}
