/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP glue's per-connection state and its feeding's usual case, for
 * the glue (follow.c) and the I/O hooks (io.c), which feed a followed
 * socket's bytes with no call between the hook and the parser. Private
 * to the follow layer and the I/O hooks: everything else sees a conn
 * through follow.h and conn.h.
 */
#ifndef NL_HTTPCONN_H
#define NL_HTTPCONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "clock.h"
#include "conn.h"
#include "fdtable.h"
#include "h1.h"

/* What the glue keeps per request in flight, by the parser's ring slot.
 * Times are CLOCK_MONOTONIC microseconds modulo 2^32: their differences are
 * exact for exchanges shorter than 71 minutes, at a third of the space. */
struct pending {
	uint32_t start_us;
	/* Capped at 4 GiB. Atomic, like the Host fields below: the request stream
	 * writes it after handing the request over (REQ_END), and a second thread
	 * reading the response may read it meanwhile. */
	_Atomic uint32_t request_body;
	int16_t route;          /* server: route id */
	uint8_t kind;           /* its method's index and the NL_PENDING_* flags, in one byte that
				 * a request line writes in one store */
	uint8_t name;           /* server: its server name id + 2 (httpmetrics.h) */
};

enum {
	NL_PENDING_METHOD = 0x1f,       /* the method's index (httpmetrics.h) */
	NL_PENDING_CALL = 0x20,         /* the target names a model call */
	NL_PENDING_GENAI = 0x40,        /* a model call being read: its exchange is in genaiconn.c's pool */
	NL_PENDING_MINOR = 0x80,        /* HTTP/1.1 (else 1.0) */
};

enum { NL_SLOT_OPEN = 1, NL_SLOT_COUNTED = 2 };

struct nl_h2conn;
/* fed: the parser was set up (2), or the connection is HTTP/2 (NL_FED_H2,
 * follow_h2.h: h1 is then the HTTP/2 state's place). */
enum { NL_FED_H2 = 3 };
enum { NL_UPGRADE_101 = 1, NL_UPGRADE_OVER = 2 };

struct nl_httpconn {
	union {
		struct nl_h1 h1;
		struct nl_h2conn *h2;   /* fed NL_FED_H2: from follow_h2.c's pool */
	};
	_Atomic uint8_t busy[2];        /* a direction being fed; a second feeder stops parsing */
	/* By ring slot: NL_SLOT_OPEN, its request is open (reported when it ends);
	 * NL_SLOT_COUNTED, counted in active_requests (server, from its head on).
	 * A byte each, so that every change is one exchange or one
	 * compare-and-swap, never a loop. */
	_Atomic uint8_t open[NL_H1_PIPELINE];
	uint8_t side;                   /* enum nl_fd_http */
	_Atomic uint8_t fed;            /* bytes were fed: the parser was set up (above) */
	uint8_t flags;                  /* NL_HTTPCONN_TLS, NL_HTTPCONN_DEST_BY_NAME */
	/* NL_UPGRADE_101 from the event of a 101 (or a 2xx to CONNECT) to the
	 * end of the call that carried it, NL_UPGRADE_OVER after: follow_h2.c. */
	_Atomic uint8_t upgrade;
	_Atomic int16_t dest;           /* client: destination index */
	_Atomic int16_t host;           /* host id of the last Host value (client), its server name id (server) */
	_Atomic uint16_t port;
	uint32_t begin_us;              /* request stream: first byte of the request being read */
	uint32_t host_key;              /* host_key() of the last Host value; 0 none */
	struct pending slots[NL_H1_PIPELINE];
};

_Static_assert(sizeof(struct nl_httpconn) <= NL_HTTPCONN_SIZE, "an HTTP connection's state must stay within 256 bytes");

/* The conns by fd, a chunk of NL_FD_CHUNK mapped at a time (follow.c): each
 * slot holds a struct nl_httpconn[NL_FD_CHUNK] once mapped (chunk.h). */
extern _Atomic(void *) nl_httpconn_chunks[NL_FD_CHUNKS];

static inline __attribute__((always_inline)) struct nl_httpconn *nl_httpconn_lookup(int fd)
{
	if ((unsigned)fd >= NL_FD_LIMIT)
		return NULL;
	struct nl_httpconn *c =
		atomic_load_explicit(&nl_httpconn_chunks[(unsigned)fd >> NL_FD_CHUNK_BITS], memory_order_acquire);
	return c ? &c[(unsigned)fd & (NL_FD_CHUNK - 1)] : NULL;
}

/* One call's feeding, the parser's context for nl_follow_on_event. */
struct nl_follow_feed {
	struct nl_httpconn *c;
	uint64_t now_ns;        /* read once per call, when an event needs it */
	struct nl_fd *e;        /* nl_follow_feed_bytes: the fd's entry, and */
	_Atomic uint8_t *busy;  /* the busy flag of the direction it claimed */
};

/* The time of a feed's call, in the glue's microseconds: read once, when
 * something first needs it. */
static inline uint32_t nl_follow_feed_now_us(struct nl_follow_feed *f)
{
	if (!f->now_ns)
		f->now_ns = nl_monotonic_ns();
	return (uint32_t)(f->now_ns / 1000);
}

/* The parser's sink: the events of one feed (f). */
void nl_follow_on_event(void *ctx, const struct nl_h1_event *ev);
/* For the HTTP/2 glue (follow_h2.c): a client request's Host (:authority), and
 * the server name id of a server request's. */
void nl_follow_request_host(struct nl_httpconn *c, const char *host, size_t n);
int nl_follow_conn_name(struct nl_httpconn *c, const char *host, size_t n);
/* The HTTP/1.x parser stopped on these bytes of direction dir (claimed):
 * when they start HTTP/2, the connection goes on as HTTP/2 (follow_h2.c) and
 * they are fed to it. Whether it is still followed. */
bool nl_follow_h2_switch(struct nl_httpconn *c, enum nl_h1_dir dir, const void *buf, size_t n, uint64_t t0_ns)
	__attribute__((noinline));
/* nl_follow_feed_bytes's parser stopped on the call's n bytes at buf: the
 * switch to HTTP/2 tried, the direction freed, the fd no longer followed
 * unless HTTP/2 goes on. (An I/O hook keeps buf and n across the parser's
 * call anyway: the one returns what the other says.) */
void nl_follow_feed_stopped(const struct nl_follow_feed *f, const void *buf, size_t n) __attribute__((noinline));
/* Bytes the program moved without the shim seeing them (sendfile, splice):
 * they can only be a body. nl_follow_feed_opaque past its usual case. */
void nl_follow_opaque(struct nl_fd *e, int fd, int out, size_t n) __attribute__((cold));
/* nl_follow_feed_bytes past its usual case: a connection's first bytes, another
 * thread feeding the same direction. */
void nl_follow_bytes_slow(struct nl_fd *e, int fd, int out, const void *buf, size_t n, uint64_t t0_ns)
	__attribute__((noinline));

/* The usual case of a call on a followed fd, inline in the I/O hooks: its
 * conn set up and the call's direction free, which this claims. NULL for
 * anything else (a connection's first bytes, another thread feeding the same
 * direction, the fd no longer followed), which the caller's out-of-line path
 * sorts out. */
static inline __attribute__((always_inline)) struct nl_httpconn *nl_follow_claim_quick(struct nl_fd *e, int fd, int out,
										     enum nl_h1_dir *dir)
{
	uint8_t w = atomic_load_explicit(&e->watch, memory_order_acquire);
	unsigned side = w & NL_WATCH_HTTP;
	struct nl_httpconn *c = (w & NL_WATCH_FED) && side ? nl_httpconn_lookup(fd) : NULL;
	if (__builtin_expect(!c, 0))
		return NULL;
	*dir = (side == NL_HTTP_SERVER) == (out != 0) ? NL_H1_RESPONSE : NL_H1_REQUEST;
	if (__builtin_expect(atomic_load_explicit(&c->fed, memory_order_acquire) != 2 ||
				     atomic_exchange_explicit(&c->busy[*dir], 1, memory_order_acquire),
			     0))
		return NULL;
	return c;
}

/* The end of a call that nl_follow_claim_quick claimed: the direction freed,
 * the fd no longer followed once its parsing stopped. */
static inline __attribute__((always_inline)) void nl_follow_unclaim_quick(const struct nl_follow_feed *f, bool active)
{
	atomic_store_explicit(f->busy, 0, memory_order_release);
	if (!active)
		nl_fd_http_stop(f->e);
}

/* One buffer's bytes (nl_follow_iov in follow.h says what), inline in the I/O
 * hooks: the usual case in as few steps as it takes. What the parser's
 * return needs (the entry, the direction's busy flag) waits in the feed on
 * the stack rather than in saved registers. */
static inline __attribute__((always_inline)) void nl_follow_feed_bytes(struct nl_fd *e, int fd, int out, const void *buf,
								    size_t n, uint64_t t0_ns)
{
	NL_HOOK_SCOPE;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = nl_follow_claim_quick(e, fd, out, &dir);
	if (__builtin_expect(!c, 0)) {
		nl_follow_bytes_slow(e, fd, out, buf, n, t0_ns);
		return;
	}
	struct nl_follow_feed f = { .c = c, .now_ns = t0_ns, .e = e, .busy = &c->busy[dir] };
	if (__builtin_expect(!nl_h1_feed(&c->h1, dir, buf, n, nl_follow_on_event, &f), 0)) {
		nl_follow_feed_stopped(&f, buf, n);
		return;
	}
	atomic_store_explicit(f.busy, 0, memory_order_release);
}

/* The same for bytes moved unseen (nl_follow_opaque above): nginx sends
 * every file body so. */
static inline __attribute__((always_inline)) void nl_follow_feed_opaque(struct nl_fd *e, int fd, int out, size_t n)
{
	NL_HOOK_SCOPE;
	enum nl_h1_dir dir;
	struct nl_httpconn *c = nl_follow_claim_quick(e, fd, out, &dir);
	if (__builtin_expect(!c, 0)) {
		nl_follow_opaque(e, fd, out, n);
		return;
	}
	struct nl_follow_feed f = { .c = c, .e = e, .busy = &c->busy[dir] };
	bool active = nl_h1_feed_opaque(&c->h1, dir, n, nl_follow_on_event, &f);
	nl_follow_unclaim_quick(&f, active);
}

#endif
