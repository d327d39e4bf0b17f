/* SPDX-License-Identifier: Apache-2.0 */
#include "follow.h"
#include "httpconn.h"

#include <stdatomic.h>
#include <string.h>

#include "bytekey.h"
#include "check.h"
#include "chunk.h"
#include "clock.h"
#include "dest.h"
#include "genaiconn.h"
#include "genaimetrics.h"
#include "h1.h"
#include "follow_h2.h"
#include "httpmetrics.h"
#include "route.h"

_Atomic(void *) nl_httpconn_chunks[NL_FD_CHUNKS];

static struct nl_httpconn *conn_get(int fd)
{
	struct nl_httpconn *c = nl_httpconn_lookup(fd);
	if (c || (unsigned)fd >= NL_FD_LIMIT)
		return c;
	struct nl_httpconn *chunk = nl_chunk_fill(&nl_httpconn_chunks[(unsigned)fd >> NL_FD_CHUNK_BITS],
						   NL_FD_CHUNK * sizeof(struct nl_httpconn));
	return chunk ? &chunk[(unsigned)fd & (NL_FD_CHUNK - 1)] : NULL;
}

/* The parser of a new connection: a server's tells when a request asks
 * for the same as the one before (request_line). */
static void h1_init(struct nl_httpconn *c)
{
	nl_h1_init(&c->h1);
	if (c->side == NL_HTTP_SERVER)
		nl_h1_compare_lines(&c->h1);
}

/* The fd's first bytes since it was watched: its conn is set up, by one
 * thread (NL_WATCH_INIT claims it; the other direction's first feeder waits
 * the few stores it takes). NULL when the fd stopped being followed, or its
 * conn cannot be had (no memory): it is no longer followed then. */
static __attribute__((noinline)) struct nl_httpconn *first_feed(struct nl_fd *e, int fd)
{
	uint8_t w = atomic_load_explicit(&e->watch, memory_order_acquire);
	for (;;) {
		if (!(w & NL_WATCH_HTTP))
			return NULL;
		if (w & NL_WATCH_FED)
			return nl_httpconn_lookup(fd);
		if (w & NL_WATCH_INIT) {
			w = atomic_load_explicit(&e->watch, memory_order_acquire);
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&e->watch, &w, (uint8_t)(w | NL_WATCH_INIT), memory_order_acquire,
							  memory_order_acquire))
			break;
	}
	struct nl_httpconn *c = conn_get(fd);
	if (!c) {
		nl_fd_http_stop(e);
		return NULL;
	}
	nl_httpconn_init(c, (enum nl_fd_http)(w & NL_WATCH_HTTP), e->dest, 0);
	h1_init(c);
	atomic_store_explicit(&c->fed, 2, memory_order_relaxed);
	/* FED on, INIT off, in one step; release: the conn's setup happens
	 * before any other thread's use of it. A stop meanwhile cleared both. */
	uint8_t cur = atomic_load_explicit(&e->watch, memory_order_relaxed);
	while ((cur & NL_WATCH_INIT) &&
	       !atomic_compare_exchange_weak_explicit(&e->watch, &cur, (uint8_t)((cur & ~NL_WATCH_INIT) | NL_WATCH_FED),
						      memory_order_release, memory_order_relaxed))
		;
	return cur & NL_WATCH_INIT ? c : NULL;
}

/* ---- events ------------------------------------------------------------------ */


static __attribute__((noinline)) uint64_t read_clock(struct nl_follow_feed *f) { return f->now_ns = nl_monotonic_ns(); }

static inline uint32_t now_us(struct nl_follow_feed *f)
{
	uint64_t ns = f->now_ns ? f->now_ns : read_clock(f);
	return (uint32_t)(ns / 1000);
}

/* The same in the handlers that have a frame anyway: the clock read inline. */
static inline __attribute__((always_inline)) uint32_t now_us_inline(struct nl_follow_feed *f)
{
	uint64_t ns = f->now_ns ? f->now_ns : (f->now_ns = nl_monotonic_ns());
	return (uint32_t)(ns / 1000);
}

static __attribute__((noinline)) void finish(struct nl_follow_feed *f, unsigned slot, unsigned status, uint64_t response_body)
{
	struct nl_httpconn *c = f->c;
	uint8_t open = atomic_exchange_explicit(&c->open[slot], 0, memory_order_acquire);
	if (!(open & NL_SLOT_OPEN))
		return;
	struct pending *p = &c->slots[slot];
	uint64_t duration_ns = (uint64_t)(uint32_t)(now_us_inline(f) - p->start_us) * 1000;
	/* (a model call's end first: nothing need live across the metrics' call) */
	if (p->kind & NL_PENDING_GENAI)
		nl_genai_conn_finish(f, slot, status, p->start_us, duration_ns);
	if (c->side == NL_HTTP_SERVER) {
		/* One call: the exchange, and its request's end as an active one. */
		struct nl_http_exchange x = {
			.method = p->kind & NL_PENDING_METHOD,
			.route = p->route,
			.status = status,
			.version_minor = !!(p->kind & NL_PENDING_MINOR),
			.tls = c->flags & NL_HTTPCONN_TLS,
			.counted = open & NL_SLOT_COUNTED,
			.name = (int)p->name - 2,
			.duration_ns = duration_ns,
			.request_body = atomic_load_explicit(&p->request_body, memory_order_relaxed),
			.response_body = response_body,
		};
		nl_http_server_done(&x);
	} else {
		struct nl_http_exchange x = {
			.method = p->kind & NL_PENDING_METHOD,
			.host = atomic_load_explicit(&c->host, memory_order_relaxed),
			.port = atomic_load_explicit(&c->port, memory_order_relaxed),
			.dest = atomic_load_explicit(&c->dest, memory_order_relaxed),
			.status = status,
			.version_minor = !!(p->kind & NL_PENDING_MINOR),
			.duration_ns = duration_ns,
		};
		nl_http_client_done(&x);
	}
}

/* Malformed or contended: requests counted as active stop counting, and
 * nothing else is reported for them. */
static __attribute__((noinline)) void drop_open(struct nl_httpconn *c)
{
	/* Looked at first: at a connection's end its slots are mostly closed,
	 * and a load is no locked instruction. */
	for (unsigned s = 0; s < NL_H1_PIPELINE; s++) {
		if (!atomic_load_explicit(&c->open[s], memory_order_relaxed))
			continue;
		uint8_t open = atomic_exchange(&c->open[s], 0);
		if ((open & NL_SLOT_COUNTED) && c->side == NL_HTTP_SERVER)
			nl_http_server_ended(c->slots[s].kind & NL_PENDING_METHOD, c->flags & NL_HTTPCONN_TLS, (int)c->slots[s].name - 2);
		if (open && (c->slots[s].kind & NL_PENDING_GENAI))
			nl_genai_conn_drop(c, s);
	}
}

/* A client request's Host header: server.address and server.port; over TLS
 * without a known peer, also the destination (the rules' host names, with
 * the port, which SNI alone lacks). */
/* Host values are known again by their key (bytekey.h): a keep-alive
 * connection sends the same Host with every request, and finding its id
 * again (the name lowercased, a hash, a compare, the destination rules by name)
 * costs several times the key. */
__attribute__((noinline)) void nl_follow_request_host(struct nl_httpconn *c, const char *host, size_t n)
{
	uint32_t key = nl_bytes_key(host, n);
	if (key == c->host_key)
		return;         /* the same Host as the last request: same host, port and destination */
	c->host_key = key;
	unsigned port;
	int id = nl_http_host(host, n, &port);
	if (!port)
		port = c->flags & NL_HTTPCONN_TLS ? 443 : 80;
	atomic_store_explicit(&c->host, (int16_t)id, memory_order_relaxed);
	atomic_store_explicit(&c->port, (uint16_t)port, memory_order_relaxed);
	if (c->flags & NL_HTTPCONN_DEST_BY_NAME) {
		/* the name without its port: "name:port", "[v6]:port" */
		const char *end = n && host[0] == '[' ? memchr(host, ']', n) : NULL;
		end = end ? end + 1 : memchr(host, ':', n);
		int d = nl_dest_match_name(host, end ? (size_t)(end - host) : n, (int)port);
		if (d != NL_DEST_EXTERNAL)
			atomic_store_explicit(&c->dest, (int16_t)d, memory_order_relaxed);
	}
}

/* A model call's request line: its exchange, when the pool has room, and
 * its bodies tapped. */
static __attribute__((noinline)) void start_call(struct nl_httpconn *c, unsigned slot, const struct nl_h1_event *ev)
{
	if (nl_genai_conn_begin(c, slot, nl_genai_target_op(ev->target, ev->target_len),
				nl_genai_gym_path(ev->target, ev->target_len))) {
		c->slots[slot].kind |= NL_PENDING_GENAI;
		nl_h1_tap(&c->h1);
	}
}

/* The request line: its method, its route (server), the request counted as
 * active; its start is the call of its first byte (this call, when the
 * parser folded REQ_BEGIN in). Out of line, so that nl_follow_on_event's cheap cases
 * need no frame. */
static __attribute__((noinline)) void request_line(struct nl_follow_feed *f, const struct nl_h1_event *ev)
{
	struct nl_httpconn *c = f->c;
	unsigned slot = ev->slot % NL_H1_PIPELINE;
	struct pending *p = &c->slots[slot];
	p->start_us = ev->folded & NL_H1_FOLD_BEGIN ? now_us_inline(f) : c->begin_us;
	atomic_store_explicit(&p->request_body, 0, memory_order_relaxed);
	unsigned kind = ev->version_minor ? NL_PENDING_MINOR : 0;
	if (ev->same_line) {
		/* A keep-alive connection asking for the same again: its method,
		 * route and whether it is a model call are the previous
		 * request's, in the slot before. */
		const struct pending *prev = &c->slots[(slot + NL_H1_PIPELINE - 1) % NL_H1_PIPELINE];
		kind |= prev->kind & (NL_PENDING_METHOD | NL_PENDING_CALL);
		p->route = prev->route;
	} else {
		kind |= nl_http_method_of(ev->method, ev->method_len);
		p->route = NL_ROUTE_NONE;
		if (c->side == NL_HTTP_SERVER)
			p->route = (int16_t)nl_http_route(ev->target, ev->target_len, ev->target_truncated);
		/* The target's length first: it rules out most requests. */
		if (nl_genai_target_op(ev->target, ev->target_len) != NL_GENAI_OP_NONE && !ev->target_truncated)
			kind |= NL_PENDING_CALL;
	}
	p->kind = (uint8_t)kind;
	if (__builtin_expect(kind & NL_PENDING_CALL, 0))
		start_call(c, slot, ev);
	/* release: the fields above before a response's finish reads them */
	atomic_store_explicit(&c->open[slot], NL_SLOT_OPEN, memory_order_release);
}

/* The last Host value a connection's first request interned, by its key
 * and its name id + 2, in one word: a server with a connection
 * per request finds the name of the Host its clients send again without
 * interning it anew. */
static _Atomic uint64_t last_name;

static int server_name(const char *host, size_t n, uint32_t key)
{
	uint64_t last = atomic_load_explicit(&last_name, memory_order_relaxed);
	if ((uint32_t)(last >> 32) == key)
		return (int)(uint32_t)last - 2;
	int name = nl_http_server_name(host, n);
	atomic_store_explicit(&last_name, (uint64_t)key << 32 | (uint32_t)(name + 2), memory_order_relaxed);
	return name;
}

/* A server request's head: it counts as active from here, in the series of
 * its method and its Host (http.server_name), found again from the
 * connection's last Host value when the same. The response may already have
 * ended it (a server answering before the head is read): then it is not
 * counted after all. */
static inline __attribute__((always_inline)) int conn_name(struct nl_httpconn *c, const char *host, size_t n,
							  bool same)
{
	int name = NL_HTTP_NAME_NONE;
	if (same) {
		name = atomic_load_explicit(&c->host, memory_order_relaxed);
	} else if (host) {
		uint32_t key = nl_bytes_key(host, n);
		if (key == c->host_key) {
			name = atomic_load_explicit(&c->host, memory_order_relaxed);
		} else {
			name = server_name(host, n, key);
			c->host_key = key;
			atomic_store_explicit(&c->host, (int16_t)name, memory_order_relaxed);
		}
	}
	return name;
}

int nl_follow_conn_name(struct nl_httpconn *c, const char *host, size_t n)
{
	return conn_name(c, host, n, false);
}

static __attribute__((noinline)) void server_head(struct nl_httpconn *c, unsigned slot, const char *host, size_t n,
						  bool same)
{
	int name = conn_name(c, host, n, same);
	struct pending *p = &c->slots[slot];
	bool tls = c->flags & NL_HTTPCONN_TLS;
	p->name = (uint8_t)(name + 2);
	unsigned method = p->kind & NL_PENDING_METHOD;
	if (!nl_http_server_started(method, tls, name))
		return;
	uint8_t open = NL_SLOT_OPEN;
	if (!atomic_compare_exchange_strong(&c->open[slot], &open, NL_SLOT_OPEN | NL_SLOT_COUNTED))
		nl_http_server_ended(method, tls, name);
}

void nl_follow_on_event(void *ctx, const struct nl_h1_event *ev)
{
	struct nl_follow_feed *f = ctx;
	struct nl_httpconn *c = f->c;
	switch (ev->type) {
	case NL_H1_REQ_BEGIN:
		c->begin_us = now_us(f);
		break;
	case NL_H1_REQ_LINE:
		request_line(f, ev);
		break;
	case NL_H1_REQ_HEAD:
		/* (a Host the same as the last: what was made of it holds) */
		if (c->side == NL_HTTP_SERVER)
			server_head(c, ev->slot % NL_H1_PIPELINE, ev->host, ev->host_len, ev->same_host);
		else if (ev->host && !ev->same_host)
			nl_follow_request_host(c, ev->host, ev->host_len);
		break;
	case NL_H1_REQ_END:     /* a request without body folds it into REQ_HEAD: its 0 is set */
		atomic_store_explicit(&c->slots[ev->slot % NL_H1_PIPELINE].request_body,
				      ev->body_size > UINT32_MAX ? UINT32_MAX : (uint32_t)ev->body_size,
				      memory_order_relaxed);
		if (c->slots[ev->slot % NL_H1_PIPELINE].kind & NL_PENDING_GENAI)
			nl_genai_conn_request_end(c, ev->slot % NL_H1_PIPELINE);
		break;
	case NL_H1_BODY:        /* only a model call's (nl_h1_tap) */
		nl_genai_conn_body(f, ev);
		break;
	case NL_H1_RESP_HEAD:
		break;
	case NL_H1_RESP_UPGRADED:       /* marked, then ended as any other */
		atomic_store_explicit(&c->upgrade, NL_UPGRADE_101, memory_order_relaxed);
		finish(f, ev->slot % NL_H1_PIPELINE, ev->status, ev->body_size);
		break;
	case NL_H1_RESP_END:    /* RESP_HEAD folded in or not, the same */
		finish(f, ev->slot % NL_H1_PIPELINE, ev->status, ev->body_size);
		break;
	case NL_H1_ABORTED:
		finish(f, ev->slot % NL_H1_PIPELINE, 0, 0);
		break;
	case NL_H1_NOT_HTTP:
		break;
	case NL_H1_ERROR:
		drop_open(c);
		break;
	}
}

/* ---- feeding ---------------------------------------------------------------- */

/* Feeding makes no system call (the clock is read through the vDSO, the
 * parser and the metrics touch memory only), so errno needs no saving here:
 * the program's own call set it, and nothing after it can. The one
 * exception, mapping a chunk of conns at a connection's first bytes, keeps
 * errno itself (chunk.h). */

static void stop_following(struct nl_fd *e) { nl_fd_http_stop(e); }

/* Claims direction dir of c for one call's bytes: 0 when another thread is
 * feeding it (parsing stops), else 1, or 2 when this call set the parser up. */
/* The first feeder of either direction sets the parser up; the other
 * direction's first feeder waits for that (it is a few stores away). Out of
 * line: once per connection. */
static __attribute__((noinline)) int set_up(struct nl_httpconn *c)
{
	uint8_t expected = 0;
	if (atomic_compare_exchange_strong(&c->fed, &expected, 1)) {
		h1_init(c);
		atomic_store_explicit(&c->fed, 2, memory_order_release);
		return 2;
	}
	while (atomic_load_explicit(&c->fed, memory_order_acquire) < 2)
		;
	return 1;
}

static inline int claim_conn(struct nl_httpconn *c, enum nl_h1_dir dir)
{
	if (atomic_exchange_explicit(&c->busy[dir], 1, memory_order_acquire)) {
		atomic_store(&c->h1.stopped, 1);
		drop_open(c);
		return 0;
	}
	if (atomic_load_explicit(&c->fed, memory_order_acquire) < 2)
		return set_up(c);
	return 1;
}

/* The conn and the direction of an I/O call, the direction claimed; NULL when
 * the fd is not followed or another thread is feeding the same direction
 * (which makes the bytes' order unknowable: parsing stops). */
static inline __attribute__((always_inline)) struct nl_httpconn *claim(struct nl_fd *e, int fd, int out, enum nl_h1_dir *dir)
{
	uint8_t w = atomic_load_explicit(&e->watch, memory_order_acquire);
	unsigned side = w & NL_WATCH_HTTP;
	if (!side)
		return NULL;
	struct nl_httpconn *c = w & NL_WATCH_FED ? nl_httpconn_lookup(fd) : first_feed(e, fd);
	if (!c)
		return NULL;
	*dir = (side == NL_HTTP_SERVER) == (out != 0) ? NL_H1_RESPONSE : NL_H1_REQUEST;
	if (!claim_conn(c, *dir)) {
		stop_following(e);
		return NULL;
	}
	return c;
}

static void unclaim(struct nl_fd *e, struct nl_httpconn *c, enum nl_h1_dir dir, bool active)
{
	atomic_store_explicit(&c->busy[dir], 0, memory_order_release);
	if (!active)
		stop_following(e);
}

/* A claimed direction's bytes: to the HTTP/2 state once the connection is
 * HTTP/2, else to the HTTP/1.x parser, which hands over to HTTP/2 when it
 * stops on HTTP/2's first bytes. Whether the connection is still followed. */
static bool feed(struct nl_httpconn *c, enum nl_h1_dir dir, const void *buf, size_t n, uint64_t t0_ns)
{
	if (nl_follow_h2_followed(c))
		return nl_follow_h2_feed(c, dir, buf, n, t0_ns);
	struct nl_follow_feed f = { .c = c, .now_ns = t0_ns };
	return nl_h1_feed(&c->h1, dir, buf, n, nl_follow_on_event, &f) || nl_follow_h2_switch(c, dir, buf, n, t0_ns);
}

/* nl_follow_feed_bytes past its usual case: a connection's first bytes, another
 * thread feeding the same direction. */
void nl_follow_bytes_slow(struct nl_fd *e, int fd, int out, const void *buf, size_t n, uint64_t t0_ns)
{
	enum nl_h1_dir dir;
	struct nl_httpconn *c = claim(e, fd, out, &dir);
	if (!c)
		return;
	bool active = feed(c, dir, buf, n, t0_ns);
	unclaim(e, c, dir, active);
}

void nl_follow_iov(struct nl_fd *e, int fd, int out, const struct iovec *iov, size_t iovcnt, size_t n,
		 uint64_t t0_ns)
{
	NL_HOOK_SCOPE;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = claim(e, fd, out, &dir);
	if (!c)
		return;
	struct nl_follow_feed f = { .c = c, .now_ns = t0_ns };
	bool active = true, h2 = nl_follow_h2_followed(c);
	for (size_t i = 0; i < iovcnt && n > 0 && active; i++) {
		size_t k = iov[i].iov_len < n ? iov[i].iov_len : n;
		if (k && h2) {
			active = nl_follow_h2_feed(c, dir, iov[i].iov_base, k, t0_ns);
		} else if (k) {
			active = nl_h1_feed(&c->h1, dir, iov[i].iov_base, k, nl_follow_on_event, &f);
			if (!active) {
				active = nl_follow_h2_switch(c, dir, iov[i].iov_base, k, t0_ns);
				h2 = nl_follow_h2_followed(c);      /* not past a 101 alone */
			}
		}
		n -= k;
	}
	unclaim(e, c, dir, active);
}

void nl_follow_opaque(struct nl_fd *e, int fd, int out, size_t n)
{
	NL_HOOK_SCOPE;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = claim(e, fd, out, &dir);
	if (!c)
		return;
	struct nl_follow_feed f = { .c = c };
	bool active = !nl_follow_h2_followed(c) && nl_h1_feed_opaque(&c->h1, dir, n, nl_follow_on_event, &f);
	unclaim(e, c, dir, active);
}

void nl_follow_eof(struct nl_fd *e, int fd)
{
	/* The peer ended its stream: a close-delimited response ends (client),
	 * and requests still unanswered are abandoned (server: servers such as
	 * uvicorn drop a request whose client went away, and some close the
	 * socket with a raw system call the shim never sees). */
	(void)e;
	nl_follow_release(fd);
}

void nl_follow_release(int fd)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	struct nl_fd *e = nl_fd_lookup(fd);
	struct nl_httpconn *c = e && nl_fd_http_side(e) ? nl_httpconn_lookup(fd) : NULL;
	if (!c)
		return;
	/* A candidate that never carried a byte has nothing to settle (and its
	 * conn may still hold the fd's previous connection). */
	if (atomic_load_explicit(&e->watch, memory_order_acquire) & NL_WATCH_FED) {
		struct nl_follow_feed f = { .c = c };
		if (nl_follow_h2_followed(c))
			nl_follow_h2_end(c);
		else if (nl_h1_active(&c->h1))
			nl_h1_close(&c->h1, nl_follow_on_event, &f);
		drop_open(c);
	}
	stop_following(e);
}

/* ---- connections found by their SSL object (ssl.c) ------------------------------ */

void nl_httpconn_init(struct nl_httpconn *c, enum nl_fd_http side, int dest, unsigned flags)
{
	atomic_store_explicit(&c->fed, 0, memory_order_relaxed);
	atomic_store_explicit(&c->busy[0], 0, memory_order_relaxed);
	atomic_store_explicit(&c->busy[1], 0, memory_order_relaxed);
	atomic_store_explicit(&c->upgrade, 0, memory_order_relaxed);
	for (unsigned s = 0; s < NL_H1_PIPELINE; s++)
		atomic_store_explicit(&c->open[s], 0, memory_order_relaxed);
	c->side = (uint8_t)side;
	c->flags = (uint8_t)flags;
	atomic_store_explicit(&c->dest, (int16_t)dest, memory_order_relaxed);
	atomic_store_explicit(&c->host, -1, memory_order_relaxed);
	c->host_key = 0;
}

uint64_t nl_httpconn_write_start(const struct nl_httpconn *c)
{
	return c->side == NL_HTTP_CLIENT ? nl_monotonic_ns() : 0;
}

static inline enum nl_h1_dir conn_dir(const struct nl_httpconn *c, int out)
{
	return (c->side == NL_HTTP_SERVER) == (out != 0) ? NL_H1_RESPONSE : NL_H1_REQUEST;
}

bool nl_httpconn_bytes(struct nl_httpconn *c, int out, const void *buf, size_t n, uint64_t t0_ns)
{
	enum nl_h1_dir dir = conn_dir(c, out);
	if (!claim_conn(c, dir))
		return false;
	bool active = feed(c, dir, buf, n, t0_ns);
	atomic_store_explicit(&c->busy[dir], 0, memory_order_release);
	return active;
}

bool nl_httpconn_opaque(struct nl_httpconn *c, int out, size_t n)
{
	enum nl_h1_dir dir = conn_dir(c, out);
	if (!claim_conn(c, dir))
		return false;
	struct nl_follow_feed f = { .c = c };
	bool active = !nl_follow_h2_followed(c) && nl_h1_feed_opaque(&c->h1, dir, n, nl_follow_on_event, &f);
	atomic_store_explicit(&c->busy[dir], 0, memory_order_release);
	return active;
}

bool nl_httpconn_end(struct nl_httpconn *c)
{
	/* Both directions are claimed: the end may come from one thread's read
	 * while another writes. */
	bool done = false;
	if (atomic_exchange_explicit(&c->busy[0], 1, memory_order_acquire))
		return false;
	if (!atomic_exchange_explicit(&c->busy[1], 1, memory_order_acquire)) {
		if (nl_follow_h2_followed(c)) {
			nl_follow_h2_close(c);
		} else if (atomic_load_explicit(&c->fed, memory_order_acquire) == 2) {
			struct nl_follow_feed f = { .c = c };
			if (nl_h1_active(&c->h1))
				nl_h1_close(&c->h1, nl_follow_on_event, &f);
			drop_open(c);
		}
		done = true;
		atomic_store_explicit(&c->busy[1], 0, memory_order_release);
	}
	atomic_store_explicit(&c->busy[0], 0, memory_order_release);
	return done;
}

int nl_follow_fd_handoff(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (!e || !nl_fd_http_side(e))
		return -1;
	struct nl_httpconn *c = nl_fd_http_was_fed(e) ? nl_httpconn_lookup(fd) : NULL;
	int dest = nl_fd_http_side(e) != NL_HTTP_CLIENT ? -1
		   : c				 ? atomic_load_explicit(&c->dest, memory_order_relaxed)
						 : e->dest;
	nl_follow_release(fd);
	return dest;
}
