#include "http.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "clock.h"
#include "h1.h"
#include "httpmetrics.h"
#include "route.h"

/* What the glue keeps per request in flight, by the parser's ring slot.
 * Times are CLOCK_MONOTONIC microseconds modulo 2^32: their differences are
 * exact for exchanges shorter than 71 minutes, at a third of the space. */
struct pending {
	uint32_t start_us;
	uint32_t request_body;  /* capped at 4 GiB */
	int16_t route;          /* server: route id */
	uint8_t method;
	uint8_t minor;          /* the request's HTTP/1.x version */
};

struct nl_httpconn {
	struct nl_h1 h1;
	_Atomic uint8_t busy[2];        /* a direction being fed; a second feeder stops parsing */
	_Atomic uint8_t open;           /* ring slots whose request counts as active */
	uint8_t side;                   /* enum nl_fd_http */
	int16_t dest;                   /* client: destination index */
	int16_t host;                   /* client: host id of the Host header, -1 unknown */
	uint16_t port;
	uint32_t begin_us;              /* request stream: first byte of the request being read */
	struct pending slots[NL_H1_PIPELINE];
};

_Static_assert(sizeof(struct nl_httpconn) <= 256, "an HTTP connection's state must stay within 256 bytes");

static _Atomic(struct nl_httpconn *) chunks[NL_FD_CHUNKS];

static struct nl_httpconn *conn_lookup(int fd)
{
	if ((unsigned)fd >= NL_FD_LIMIT)
		return NULL;
	struct nl_httpconn *c = atomic_load_explicit(&chunks[(unsigned)fd >> NL_FD_CHUNK_BITS], memory_order_acquire);
	return c ? &c[(unsigned)fd & (NL_FD_CHUNK - 1)] : NULL;
}

static struct nl_httpconn *conn_get(int fd)
{
	struct nl_httpconn *c = conn_lookup(fd);
	if (c || (unsigned)fd >= NL_FD_LIMIT)
		return c;
	/* mmap rather than malloc: async-signal-safe, and untouched pages cost no RSS. */
	NL_KEEP_ERRNO;
	size_t size = NL_FD_CHUNK * sizeof(struct nl_httpconn);
	struct nl_httpconn *chunk = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (chunk == MAP_FAILED)
		return NULL;
	struct nl_httpconn *expected = NULL;
	_Atomic(struct nl_httpconn *) *slot = &chunks[(unsigned)fd >> NL_FD_CHUNK_BITS];
	if (!atomic_compare_exchange_strong(slot, &expected, chunk)) {
		munmap(chunk, size);
		chunk = expected;
	}
	return &chunk[(unsigned)fd & (NL_FD_CHUNK - 1)];
}

void nl_http_watch(int fd, enum nl_fd_http side, int dest)
{
	NL_HOOK_SCOPE;
	struct nl_fd *e = nl_fd_lookup(fd);
	struct nl_httpconn *c = e ? conn_get(fd) : NULL;
	if (!c)
		return;
	memset(c, 0, sizeof *c);
	nl_h1_init(&c->h1);
	c->side = (uint8_t)side;
	c->dest = (int16_t)dest;
	c->host = -1;
	if (atomic_exchange(&e->http, (uint8_t)side) == NL_HTTP_NONE)
		atomic_fetch_add(&nl_fd_watching, 1);
}

/* ---- events ------------------------------------------------------------------ */

struct feed {
	struct nl_httpconn *c;
	uint64_t now_ns;        /* read once per call, when an event needs it */
};

static uint32_t now_us(struct feed *f)
{
	if (!f->now_ns)
		f->now_ns = nl_monotonic_ns();
	return (uint32_t)(f->now_ns / 1000);
}

static void finish(struct feed *f, unsigned slot, unsigned status, uint64_t response_body)
{
	struct nl_httpconn *c = f->c;
	if (!(atomic_fetch_and(&c->open, (uint8_t)~(1u << slot)) & (1u << slot)))
		return;
	struct pending *p = &c->slots[slot];
	struct nl_http_exchange x = {
		.method = p->method,
		.route = p->route,
		.host = c->host,
		.port = c->port,
		.dest = c->dest,
		.status = status,
		.version_minor = p->minor,
		.duration_ns = (uint64_t)(uint32_t)(now_us(f) - p->start_us) * 1000,
		.request_body = p->request_body,
		.response_body = response_body,
	};
	if (c->side == NL_HTTP_SERVER) {
		nl_http_server_done(&x);
		nl_http_server_ended(p->method);
	} else {
		nl_http_client_done(&x);
	}
}

/* Malformed or contended: requests counted as active stop counting, and
 * nothing else is reported for them. */
static void drop_open(struct nl_httpconn *c)
{
	uint8_t open = atomic_exchange(&c->open, 0);
	for (unsigned s = 0; s < NL_H1_PIPELINE; s++)
		if ((open & (1u << s)) && c->side == NL_HTTP_SERVER)
			nl_http_server_ended(c->slots[s].method);
}

static void on_event(void *ctx, const struct nl_h1_event *ev)
{
	struct feed *f = ctx;
	struct nl_httpconn *c = f->c;
	struct pending *p = &c->slots[ev->slot % NL_H1_PIPELINE];
	switch (ev->type) {
	case NL_H1_REQ_BEGIN:
		c->begin_us = now_us(f);
		break;
	case NL_H1_REQ_LINE:
		p->start_us = c->begin_us;
		p->method = (uint8_t)nl_http_method(ev->method, ev->method_len);
		p->request_body = 0;
		p->minor = (uint8_t)ev->version_minor;
		p->route = NL_ROUTE_NONE;
		if (c->side == NL_HTTP_SERVER) {
			p->route = (int16_t)nl_http_route(ev->target, ev->target_len, ev->target_truncated);
			nl_http_server_started(p->method);
		}
		atomic_fetch_or(&c->open, (uint8_t)(1u << (ev->slot % NL_H1_PIPELINE)));
		break;
	case NL_H1_REQ_HEAD:
		if (c->side == NL_HTTP_CLIENT && ev->host) {
			unsigned port;
			c->host = (int16_t)nl_http_host(ev->host, ev->host_len, &port);
			c->port = (uint16_t)(port ? port : 80);
		}
		break;
	case NL_H1_REQ_END:
		p->request_body = ev->body_size > UINT32_MAX ? UINT32_MAX : (uint32_t)ev->body_size;
		break;
	case NL_H1_RESP_HEAD:
		break;
	case NL_H1_RESP_END:
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

static void stop_following(struct nl_fd *e)
{
	if (atomic_exchange(&e->http, NL_HTTP_NONE))
		atomic_fetch_sub(&nl_fd_watching, 1);
}

/* The conn and the direction of an I/O call, the direction claimed; NULL when
 * the fd is not followed or another thread is feeding the same direction
 * (which makes the bytes' order unknowable: parsing stops). */
static struct nl_httpconn *claim(struct nl_fd *e, int fd, int out, enum nl_h1_dir *dir)
{
	uint8_t side = atomic_load_explicit(&e->http, memory_order_relaxed);
	struct nl_httpconn *c = side ? conn_lookup(fd) : NULL;
	if (!c)
		return NULL;
	*dir = (side == NL_HTTP_SERVER) == (out != 0) ? NL_H1_RESPONSE : NL_H1_REQUEST;
	if (atomic_exchange_explicit(&c->busy[*dir], 1, memory_order_acquire)) {
		atomic_store(&c->h1.stopped, 1);
		drop_open(c);
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

uint64_t nl_http_write_start(struct nl_fd *e)
{
	return atomic_load_explicit(&e->http, memory_order_relaxed) == NL_HTTP_CLIENT ? nl_monotonic_ns() : 0;
}

void nl_http_bytes(struct nl_fd *e, int fd, int out, const void *buf, size_t n, uint64_t t0_ns)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = claim(e, fd, out, &dir);
	if (!c)
		return;
	struct feed f = { c, t0_ns };
	bool active = nl_h1_feed(&c->h1, dir, buf, n, on_event, &f);
	unclaim(e, c, dir, active);
}

void nl_http_iov(struct nl_fd *e, int fd, int out, const struct iovec *iov, size_t iovcnt, size_t n,
		 uint64_t t0_ns)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = claim(e, fd, out, &dir);
	if (!c)
		return;
	struct feed f = { c, t0_ns };
	bool active = true;
	for (size_t i = 0; i < iovcnt && n > 0 && active; i++) {
		size_t k = iov[i].iov_len < n ? iov[i].iov_len : n;
		if (k)
			active = nl_h1_feed(&c->h1, dir, iov[i].iov_base, k, on_event, &f);
		n -= k;
	}
	unclaim(e, c, dir, active);
}

void nl_http_opaque(struct nl_fd *e, int fd, int out, size_t n)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = claim(e, fd, out, &dir);
	if (!c)
		return;
	struct feed f = { c, 0 };
	bool active = nl_h1_feed_opaque(&c->h1, dir, n, on_event, &f);
	unclaim(e, c, dir, active);
}

void nl_http_eof(struct nl_fd *e, int fd)
{
	/* The peer ended its stream: a close-delimited response ends (client),
	 * and requests still unanswered are abandoned (server: servers such as
	 * uvicorn drop a request whose client went away, and some close the
	 * socket with a raw system call the shim never sees). */
	(void)e;
	nl_http_release(fd);
}

void nl_http_release(int fd)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	struct nl_fd *e = nl_fd_lookup(fd);
	struct nl_httpconn *c = e && atomic_load_explicit(&e->http, memory_order_relaxed) ? conn_lookup(fd) : NULL;
	if (!c)
		return;
	struct feed f = { c, 0 };
	if (nl_h1_active(&c->h1))
		nl_h1_close(&c->h1, on_event, &f);
	drop_open(c);
	stop_following(e);
}
