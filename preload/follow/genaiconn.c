/* SPDX-License-Identifier: Apache-2.0 */
#include "genaiconn.h"

#include <stdatomic.h>
#include <string.h>

#include "clock.h"
#include "genaimetrics.h"
#include "genaiz.h"
#include "httpconn.h"

/* The exchanges in flight, found by (conn, slot) with a few probes from a
 * hash of them: a server streaming to hundreds of clients at once has as
 * many. Its pages are touched only by the calls that use them. */
#define POOL 512
#define PROBES 32

struct exchange {
	_Atomic uintptr_t owner;        /* the conn's address + slot; 0: free */
	uint8_t op;
	bool gym;                       /* a path NeMo Gym's model server captures */
	bool body_seen;                 /* the response's first body bytes came */
	bool chunk_seen;                /* ... and its first that is not a keep-alive comment */
	bool content_seen;
	uint32_t first_chunk_us, first_content_us;
	struct nl_genaiz req, resp;     /* each holds an inflater of genaiz.c's pool while it inflates */
};

static struct exchange pool[POOL];

static inline uintptr_t owner_of(const struct nl_httpconn *c, unsigned slot)
{
	return (uintptr_t)c | slot;     /* conns are 8-byte aligned; slot < 4 */
}

static inline unsigned home(uintptr_t key)
{
	return (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 54) % POOL;
}

static struct exchange *find(uintptr_t key)
{
	unsigned h = home(key);
	for (unsigned i = 0; i < PROBES; i++) {
		struct exchange *x = &pool[(h + i) % POOL];
		if (atomic_load_explicit(&x->owner, memory_order_acquire) == key)
			return x;
	}
	return NULL;
}

bool nl_genai_conn_begin(struct nl_httpconn *c, unsigned slot, enum nl_genai_op op, bool gym)
{
	uintptr_t key = owner_of(c, slot);
	/* One left over from the slot's last call (its end never came): reused. */
	struct exchange *x = find(key);
	if (!x) {
		unsigned h = home(key);
		for (unsigned i = 0; i < PROBES && !x; i++) {
			struct exchange *e = &pool[(h + i) % POOL];
			uintptr_t free = 0;
			if (atomic_compare_exchange_strong_explicit(&e->owner, &free, key, memory_order_acquire,
								    memory_order_relaxed))
				x = e;
		}
		if (!x)
			return false;
	}
	x->op = (uint8_t)op;
	x->gym = gym;
	x->body_seen = x->chunk_seen = x->content_seen = false;
	/* A fresh exchange holds no inflater: its bytes were zero, or its
	 * last owner released them. */
	nl_genaiz_init(&x->req);
	nl_genaiz_init(&x->resp);
	return true;
}

void nl_genai_conn_body(struct nl_follow_feed *f, const struct nl_h1_event *ev)
{
	struct exchange *x = find(owner_of(f->c, ev->slot % NL_H1_PIPELINE));
	if (!x)
		return;
	if (ev->dir == NL_H1_REQUEST) {
		if (ev->body)
			nl_genaiz_feed(&x->req, ev->body, (size_t)ev->body_size);
		else
			nl_genaiz_gap(&x->req);
		return;
	}
	x->body_seen = true;
	/* The first chunk, as NeMo Gym times it: the first body bytes that
	 * are not a server's keep-alive comment alone. */
	static const char keep_alive[] = ": keep-alive\n\n";
	if (!x->chunk_seen && !(ev->body && ev->body_size == sizeof keep_alive - 1 &&
				memcmp(ev->body, keep_alive, sizeof keep_alive - 1) == 0)) {
		x->chunk_seen = true;
		x->first_chunk_us = nl_follow_feed_now_us(f);
	}
	if (!ev->body) {
		nl_genaiz_gap(&x->resp);
		return;
	}
	if ((nl_genaiz_feed(&x->resp, ev->body, (size_t)ev->body_size) & NL_GENAI_FIRST_CONTENT) && !x->content_seen) {
		x->content_seen = true;
		x->first_content_us = nl_follow_feed_now_us(f);
	}
}

void nl_genai_conn_request_end(struct nl_httpconn *c, unsigned slot)
{
	struct exchange *x = find(owner_of(c, slot));
	if (x)
		nl_genaiz_end(&x->req);
}

void nl_genai_conn_finish(struct nl_follow_feed *f, unsigned slot, unsigned status, uint32_t start_us,
			  uint64_t duration_ns)
{
	struct nl_httpconn *c = f->c;
	struct exchange *x = find(owner_of(c, slot));
	if (!x)
		return;
	/* A connection that ended in the middle of the response: that
	 * response's head came, and its status is the one being read. */
	bool aborted = !status;
	if (aborted)
		nl_genaiz_cut(&x->resp);
	else
		nl_genaiz_end(&x->resp);
	if (aborted && x->body_seen)
		status = c->h1.resp.status;
	struct nl_genai_call call = {
		.req = &x->req.s.r,
		.resp = &x->resp.s.r,
		.duration_ns = duration_ns,
		.first_content_ns = x->content_seen ? (int64_t)(uint32_t)(x->first_content_us - start_us) * 1000 : -1,
		.first_chunk_ns = x->chunk_seen ? (int64_t)(uint32_t)(x->first_chunk_us - start_us) * 1000 : -1,
		.status = (uint16_t)status,
		.aborted = aborted,
		.gym = x->gym,
		.op = x->op,
		.client = c->side == NL_HTTP_CLIENT,
		.host = atomic_load_explicit(&c->host, memory_order_relaxed),
		.port = atomic_load_explicit(&c->port, memory_order_relaxed),
		.dest = atomic_load_explicit(&c->dest, memory_order_relaxed),
	};
	nl_genai_record(&call);
	nl_genaiz_release(&x->req);
	atomic_store_explicit(&x->owner, 0, memory_order_release);
}

void nl_genai_conn_drop(struct nl_httpconn *c, unsigned slot)
{
	struct exchange *x = find(owner_of(c, slot));
	if (x) {
		nl_genaiz_release(&x->req);
		nl_genaiz_release(&x->resp);
		atomic_store_explicit(&x->owner, 0, memory_order_release);
	}
}
