/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 (RFC 9113) framing and streams as a push parser: bytes in, events
 * out, the HTTP/2 counterpart of h1.h.
 *
 * One struct nl_h2 follows one connection. Its two directions are fed
 * separately: the request stream (the client's frames, starting with the
 * connection preface) and the response stream (the server's frames,
 * starting with SETTINGS). Frames may be split anywhere across calls; the
 * parser never buffers a frame: it keeps a frame's header, the few leading
 * bytes it reads (pad length, priority, promised stream, error codes) and
 * the header block decoder's state (hpack.h).
 *
 * Followed: SETTINGS (SETTINGS_HEADER_TABLE_SIZE of each side bounds the
 * other side's encoder), HEADERS and CONTINUATION with padding and
 * priority, PUSH_PROMISE (decoded, so the table stays right, else ignored),
 * DATA with END_STREAM, RST_STREAM, GOAWAY (the server's: streams past its
 * last stream are aborted), request and response trailers, 1xx heads.
 * Streams are multiplexed in a fixed table of NL_H2_STREAMS records; a
 * stream starts with its request's header block and ends with the last
 * frame of its response (END_STREAM), a reset, the server's GOAWAY or the
 * connection's close.
 *
 * Malformed input (a frame the protocol forbids where it is, a bad header
 * block) stops the parser (NL_H2_ERROR): streams in flight are reported as
 * nothing. Past a bound (a dynamic table that outgrows its cap, more
 * streams at once than the table holds) it stops too (NL_H2_GIVEN_UP).
 *
 * Threads: as with h1.h, each direction may be fed by its own thread; they
 * share the stream table (atomics) and the header table limits.
 *
 * Body scanning: with want_data set, each DATA frame's payload (without
 * padding) is reported as NL_H2_DATA, in pieces as it arrives, so a body
 * scanner can read a stream's bodies as with HTTP/1.x.
 *
 * No libc but <string.h>; no allocation.
 */
#ifndef NL_H2_H
#define NL_H2_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hpack.h"

#define NL_H2_STREAMS 128               /* streams in flight at once; one more: given up */
#define NL_H2_METHOD_MAX 16
#define NL_H2_PATH_MAX NL_HPACK_VALUE_MAX
#define NL_H2_AUTHORITY_MAX 48
#define NL_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define NL_H2_PREFACE_LEN 24

enum nl_h2_dir { NL_H2_REQUEST, NL_H2_RESPONSE };

enum nl_h2_event_type {
	NL_H2_REQ_HEAD,         /* a new stream's request head: fields; end_stream: no body */
	NL_H2_REQ_END,          /* the request's last frame: body_size */
	NL_H2_RESP_HEAD,        /* the final response head: status, fields */
	NL_H2_RESP_END,         /* the response's last frame: status, grpc_status, body_size */
	NL_H2_ABORTED,          /* reset, GOAWAY or close before the response's end */
	NL_H2_DATA,             /* body bytes of a stream (want_data): dir, data, len */
	NL_H2_ERROR,            /* malformed: parsing stopped */
	NL_H2_GIVEN_UP,         /* past a bound (table cap, streams): parsing stopped */
};

/* The kept fields of a header block. */
struct nl_h2_fields {
	uint8_t method_len;
	uint8_t path_len;
	uint8_t authority_len;
	bool path_truncated;
	bool grpc;              /* content-type application/grpc, +..., ;... */
	uint16_t status;        /* :status, 0 when absent */
	int16_t grpc_status;    /* grpc-status, -1 when absent */
	int64_t content_length; /* -1 when absent */
	char method[NL_H2_METHOD_MAX];
	char path[NL_H2_PATH_MAX];
	char authority[NL_H2_AUTHORITY_MAX];
};

struct nl_h2_event {
	enum nl_h2_event_type type;
	enum nl_h2_dir dir;
	unsigned slot;          /* the stream's record, 0..NL_H2_STREAMS-1, for the caller's own arrays */
	uint32_t stream;        /* its stream id */
	const struct nl_h2_fields *fields;  /* REQ_HEAD, RESP_HEAD: good during the call */
	bool end_stream;        /* REQ_HEAD: the request has no body (no REQ_END follows) */
	unsigned status;        /* RESP_HEAD, RESP_END */
	int grpc_status;        /* RESP_END: from the trailers or a trailers-only head, -1 none */
	uint64_t body_size;     /* REQ_END, RESP_END: DATA bytes without padding */
	const uint8_t *data;    /* DATA */
	size_t len;
};

typedef void (*nl_h2_sink)(void *ctx, const struct nl_h2_event *ev);

struct nl_h2_stream {
	_Atomic uint32_t id;    /* 0: free */
	_Atomic uint8_t state;  /* S_* in h2.c */
	/* Written by the response direction; atomic (relaxed) as a reset read
	 * by the other direction may end the stream. */
	_Atomic uint16_t status;
	_Atomic int16_t grpc_status;
	_Atomic uint32_t req_body;  /* capped at 4 GiB */
	_Atomic uint64_t resp_body;
};

/* A direction's state. Its fields are the parser's own. */
struct nl_h2_half {
	uint8_t state;
	uint8_t pos;            /* bytes read of the preface, the frame head, the leading fields */
	uint8_t type, flags;
	uint8_t fixed;          /* the frame's leading bytes to read */
	uint8_t pad;
	uint8_t block;          /* a header block in progress: its frame type + 1 */
	uint8_t block_end;      /* END_STREAM of the HEADERS that began it */
	bool first;             /* the next frame is the direction's first */
	int16_t cur;            /* the DATA frame's stream record, -1 none */
	uint32_t stream;
	uint32_t block_stream;
	uint32_t left;          /* payload bytes still to come, padding included */
	uint8_t buf[9];
	struct nl_hpack_dec dec;
	struct nl_h2_fields f;
};

struct nl_h2 {
	struct nl_h2_half half[2];
	_Atomic uint8_t stopped;
	bool want_data;         /* report DATA payloads (NL_H2_DATA) */
	_Atomic uint8_t probe_max; /* farthest a stream record was placed from its home */
	uint32_t max_id;        /* highest request stream opened */
	struct nl_h2_stream streams[NL_H2_STREAMS];
	/* table[dir] decodes the header blocks of direction dir. Last: their
	 * rings are touched only as entries come. */
	struct nl_hpack_table table[2];
};

/* A connection from its first byte (cap: bytes of dynamic table followed
 * per direction, <= NL_HPACK_CAP). Touches the state but the tables' rings. */
void nl_h2_init(struct nl_h2 *h, uint32_t cap);
/* The same for a state in fresh, zeroed memory, with cap NL_HPACK_CAP:
 * only what is not zero is written (the directions' heads), so that the
 * stream records and the tables stay untouched until used. */
void nl_h2_start(struct nl_h2 *h);
/* n bytes of one direction; false once the connection is no longer parsed. */
bool nl_h2_feed(struct nl_h2 *h, enum nl_h2_dir dir, const void *buf, size_t n, nl_h2_sink sink, void *ctx);
/* The connection ended: every stream still open is reported NL_H2_ABORTED. */
void nl_h2_close(struct nl_h2 *h, nl_h2_sink sink, void *ctx);

static inline bool nl_h2_active(const struct nl_h2 *h)
{
	return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
}

/* Whether n bytes can be the start of a direction of HTTP/2: the preface
 * (request) or a SETTINGS frame's head (response), as far as they go. */
bool nl_h2_starts(enum nl_h2_dir dir, const void *buf, size_t n);

#endif
