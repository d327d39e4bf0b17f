/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.x message framing as a push parser: bytes in, events out.
 *
 * One struct nl_h1 follows one connection. The bytes of its two directions
 * are fed separately: the request stream (what a client writes, what a server
 * reads) and the response stream. The parser never buffers a message: it
 * keeps a small state per direction and copies only what its events report
 * (the method, the request target up to NL_H1_TARGET_MAX bytes, the Host
 * value up to NL_H1_HOST_MAX bytes), and the method and target only when the
 * call that completes them does not hold them whole: an event's pointers are
 * good during the sink's call only.
 *
 * It knows nothing of sockets, clocks or metrics and calls nothing but the
 * sink and <string.h>, so it is tested and fuzzed on its own. Any split of the
 * bytes across calls, down to one byte per call, gives the same events as one
 * call with everything, once folded events are unfolded (below).
 *
 * Folded events: one report may stand for two events in a row, to save the
 * sink a call where they belong to the same message and the same call of
 * nl_h1_feed (so nothing can happen between them, and a clock read for one
 * is right for both). Its `folded` names the event folded in:
 * - NL_H1_FOLD_BEGIN on REQ_LINE: REQ_BEGIN came just before, in this call
 *   (the whole request line came in the call of its first byte; a split may
 *   report REQ_BEGIN on its own instead);
 * - NL_H1_FOLD_END on REQ_HEAD: the request has no body, and REQ_END
 *   (body_size 0) follows at once; this one never depends on the split;
 * - NL_H1_FOLD_HEAD on RESP_END: RESP_HEAD (this status and version_minor)
 *   came just before, in this call.
 *
 * Threads: the two directions may be fed by two threads at once (one reading,
 * one writing the same socket); the only state they share is the ring of
 * requests awaiting their response, a single-producer single-consumer queue
 * of atomics. Feeding one direction from two threads at once is the caller's
 * to prevent.
 *
 * Framing follows RFC 9112: Content-Length; chunked (extensions, trailers);
 * close-delimited responses; no body for responses to HEAD and for 1xx, 204,
 * 304; interim 1xx responses before the final one; 101 and a 2xx to CONNECT
 * end parsing for the connection; pipelined requests answered in order.
 * Malformed input stops parsing for the connection (NL_H1_ERROR): what was in
 * flight is then reported as nothing rather than as wrong data.
 */
#ifndef NL_H1_H
#define NL_H1_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NL_H1_TARGET_MAX 96     /* request target bytes kept (longer: truncated) */
#define NL_H1_HOST_MAX 48       /* Host header bytes kept (longer: truncated) */
#define NL_H1_METHOD_MAX 16     /* a longer method is malformed */
#define NL_H1_PIPELINE 4        /* requests awaiting a response; one more: error */

enum nl_h1_dir { NL_H1_REQUEST, NL_H1_RESPONSE };

enum nl_h1_event_type {
	NL_H1_REQ_BEGIN,        /* the first byte of a request was fed */
	NL_H1_REQ_LINE,         /* request line complete: method, target, version */
	NL_H1_REQ_HEAD,         /* request headers complete: host */
	NL_H1_REQ_END,          /* request body complete: body_size */
	NL_H1_RESP_HEAD,        /* final response's headers complete: status, version */
	NL_H1_RESP_END,         /* final response complete: body_size */
	NL_H1_RESP_UPGRADED,    /* RESP_END of a 101, or of a 2xx to CONNECT: the last event, parsing ends */
	NL_H1_ABORTED,          /* nl_h1_close() with this request unanswered */
	NL_H1_NOT_HTTP,         /* a direction's first bytes are not HTTP/1.x */
	NL_H1_ERROR,            /* malformed input: parsing stopped */
	NL_H1_BODY,             /* body bytes of a tapped message (nl_h1_tap): body, body_size */
};

struct nl_h1_event {
	enum nl_h1_event_type type;
	/* Ring slot (0..NL_H1_PIPELINE-1) of the request this event is about, so a
	 * caller can keep per-request data (a start time) in an array of its own:
	 * request events name the request being read, response events the request
	 * being answered. */
	unsigned slot;
	const char *method;     /* REQ_LINE */
	size_t method_len;
	const char *target;     /* REQ_LINE */
	size_t target_len;
	bool target_truncated;
	/* REQ_LINE, after nl_h1_compare_lines: the method and target are those
	 * of the connection's previous request, byte for byte, as the parser
	 * could tell at little cost (a hint: false says nothing), so that a
	 * sink may reuse what it made of them. */
	bool same_line;
	/* REQ_HEAD: the Host value is the last one the connection's requests
	 * sent, byte for byte, as the parser could tell at little cost (a hint:
	 * false says nothing), so that a sink may reuse what it made of it. */
	bool same_host;
	const char *host;       /* REQ_HEAD; NULL when there was no Host header */
	size_t host_len;
	unsigned version_minor; /* REQ_LINE, RESP_HEAD (and RESP_END folding it): 0 or 1 (HTTP/1.x) */
	unsigned status;        /* RESP_HEAD, RESP_END, RESP_UPGRADED */
	uint64_t body_size;     /* REQ_END, RESP_END: body bytes, without chunk framing; BODY: these bytes */
	const void *body;       /* BODY: the bytes, chunk framing removed; NULL for bytes moved unseen */
	uint8_t folded;         /* NL_H1_FOLD_*: the event this one also stands for */
	uint8_t dir;            /* BODY: enum nl_h1_dir, the direction whose body it is */
};

enum {
	NL_H1_FOLD_BEGIN = 1,   /* REQ_LINE: REQ_BEGIN just before it */
	NL_H1_FOLD_END = 2,     /* REQ_HEAD: REQ_END, body_size 0, just after it */
	NL_H1_FOLD_HEAD = 4,    /* RESP_END: RESP_HEAD just before it */
};

typedef void (*nl_h1_sink)(void *ctx, const struct nl_h1_event *ev);

/* A direction's state. Its fields are the parser's own. */
struct nl_h1_half {
	uint8_t state;
	uint8_t sub;            /* position inside a token being matched */
	uint8_t field;          /* the field line being read, when it matters */
	uint8_t aux;            /* request line: method length; field value: its sub-state */
	uint8_t len;            /* request stream: bytes in buf */
	uint8_t slot;           /* request stream: ring slot of the request being read */
	uint8_t prev;           /* request stream: bytes of the previous request's line (method,
				 * SP, target) kept at the start of buf (0: none) */
	uint8_t compare;        /* request stream: what a request compares with the one before (h1.c) */
	uint16_t flags;
	uint16_t status;
	uint16_t n_headers;
	uint16_t line_len;      /* bytes of the line being read, against its cap */
	uint64_t remaining;     /* body or chunk bytes still to come; Content-Length while reading fields */
	uint64_t body_size;     /* body bytes so far; the Content-Length digits while reading them */
};

struct nl_h1 {
	struct nl_h1_half req, resp;
	_Atomic uint8_t ring_head;      /* next slot the response stream answers */
	_Atomic uint8_t ring_tail;      /* next slot the request stream fills */
	_Atomic uint8_t stopped;        /* not HTTP, malformed, or upgraded */
	bool avx2;                      /* nl_h1_avx2 when the connection started */
	uint8_t ring_kind[NL_H1_PIPELINE];   /* per pending request: HEAD, CONNECT, other */
	char buf[NL_H1_METHOD_MAX + NL_H1_TARGET_MAX];   /* request stream only */
};

/* A connection starts with nl_h1_init (or all-zero memory). */
void nl_h1_init(struct nl_h1 *h);

/* From now on REQ_LINE events tell same_line, at a cost of some twenty
 * instructions a request: for a sink that makes something costly of a
 * line (a server's route), not for one that would save less. */
void nl_h1_compare_lines(struct nl_h1 *h);

/* From the sink's REQ_LINE call only: the body bytes of this request, and
 * of its final response, are reported as they pass (NL_H1_BODY, in order,
 * before the message's END), as many events as it takes, any split. Every
 * other message costs what it did. */
void nl_h1_tap(struct nl_h1 *h);

/* Feeds n bytes of one direction. Returns false once the connection is no
 * longer parsed (not HTTP, malformed, upgraded): the caller may then stop
 * feeding it at all. */
bool nl_h1_feed(struct nl_h1 *h, enum nl_h1_dir dir, const void *buf, size_t n, nl_h1_sink sink, void *ctx);

/* n bytes of one direction that the caller moved without seeing them
 * (sendfile, splice): they must fall inside a body, whose framing says how
 * many are due; anywhere else parsing stops (NL_H1_ERROR). */
bool nl_h1_feed_opaque(struct nl_h1 *h, enum nl_h1_dir dir, size_t n, nl_h1_sink sink, void *ctx);

/* The connection ended (close, or end of stream read). A close-delimited
 * response in progress ends here (RESP_END); every request still awaiting its
 * response is reported as NL_H1_ABORTED, oldest first. */
void nl_h1_close(struct nl_h1 *h, nl_h1_sink sink, void *ctx);

/* Whether whole field lines are scanned with AVX2, for connections that
 * start from now on: set from the CPU (x86-64) by the first nl_h1_init. The
 * outcome is the same either way; tests clear it to run the SSE2 code as
 * well. */
extern _Atomic bool nl_h1_avx2;

/* True while the connection is still parsed. */
static inline bool nl_h1_active(const struct nl_h1 *h)
{
	return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
}

#endif
