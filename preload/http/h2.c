/* SPDX-License-Identifier: Apache-2.0 */
#include "h2.h"

#include <string.h>

/* Frame types and flags (RFC 9113 6). */
enum {
	T_DATA,
	T_HEADERS,
	T_PRIORITY,
	T_RST_STREAM,
	T_SETTINGS,
	T_PUSH_PROMISE,
	T_PING,
	T_GOAWAY,
	T_WINDOW_UPDATE,
	T_CONTINUATION,
};
enum { F_END_STREAM = 0x1, F_ACK = 0x1, F_END_HEADERS = 0x4, F_PADDED = 0x8, F_PRIORITY = 0x20 };

/* A direction's states. */
enum { H_PREFACE, H_HEAD, H_FIXED, H_BODY, H_PAD };

/* A stream record's state bits. */
enum { S_REQ_ENDED = 1, S_RESP_HEAD = 2, S_ENDING = 4 };

static const char preface[NL_H2_PREFACE_LEN + 1] = NL_H2_PREFACE;

bool nl_h2_starts(enum nl_h2_dir dir, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	if (dir == NL_H2_REQUEST)
		return memcmp(p, preface, n < NL_H2_PREFACE_LEN ? n : NL_H2_PREFACE_LEN) == 0;
	/* SETTINGS on stream 0, without ACK, a whole number of settings */
	static const uint8_t head[9] = { 0, 0, 0, T_SETTINGS, 0, 0, 0, 0, 0 };
	for (size_t i = 0; i < n && i < 9; i++)
		if (i >= 3 && p[i] != head[i])
			return false;
	if (n >= 3) {
		uint32_t len = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
		if (len % 6 || len > 16384)
			return false;
	}
	return true;
}

static void half_init(struct nl_h2_half *s, enum nl_h2_dir dir)
{
	memset(s, 0, offsetof(struct nl_h2_half, dec));
	s->state = dir == NL_H2_REQUEST ? H_PREFACE : H_HEAD;
	s->first = true;
	s->cur = -1;
}

void nl_h2_start(struct nl_h2 *h)
{
	half_init(&h->half[0], NL_H2_REQUEST);
	half_init(&h->half[1], NL_H2_RESPONSE);
}

void nl_h2_init(struct nl_h2 *h, uint32_t cap)
{
	nl_h2_start(h);
	atomic_store_explicit(&h->stopped, 0, memory_order_relaxed);
	h->want_data = false;
	atomic_store_explicit(&h->probe_max, 0, memory_order_relaxed);
	h->max_id = 0;
	for (unsigned i = 0; i < NL_H2_STREAMS; i++) {
		atomic_store_explicit(&h->streams[i].id, 0, memory_order_relaxed);
		atomic_store_explicit(&h->streams[i].state, 0, memory_order_relaxed);
	}
	nl_hpack_table_init(&h->table[0], cap);
	nl_hpack_table_init(&h->table[1], cap);
}

/* One call's feeding. */
struct run {
	struct nl_h2 *h;
	struct nl_h2_half *s;
	enum nl_h2_dir dir;
	nl_h2_sink sink;
	void *ctx;
};

static void stop(struct run *r, enum nl_h2_event_type why)
{
	if (atomic_exchange(&r->h->stopped, 1))
		return;
	struct nl_h2_event ev = { .type = why, .dir = r->dir };
	r->sink(r->ctx, &ev);
}

/* ---- streams ---------------------------------------------------------------- */

static inline unsigned home(uint32_t id) { return (id >> 1) % NL_H2_STREAMS; }

static int find(const struct nl_h2 *h, uint32_t id)
{
	unsigned at = home(id);
	unsigned probes = atomic_load_explicit(&h->probe_max, memory_order_relaxed);
	for (unsigned k = 0; k <= probes && k < NL_H2_STREAMS; k++) {
		unsigned i = (at + k) % NL_H2_STREAMS;
		if (atomic_load_explicit(&h->streams[i].id, memory_order_acquire) == id)
			return (int)i;
	}
	return -1;
}

/* A free record for a new stream (only the request direction takes one). */
static int take(struct nl_h2 *h, uint32_t id)
{
	unsigned at = home(id);
	for (unsigned k = 0; k < NL_H2_STREAMS; k++) {
		unsigned i = (at + k) % NL_H2_STREAMS;
		if (atomic_load_explicit(&h->streams[i].id, memory_order_acquire) == 0) {
			if (k > atomic_load_explicit(&h->probe_max, memory_order_relaxed))
				atomic_store_explicit(&h->probe_max, (uint8_t)k, memory_order_relaxed);
			return (int)i;
		}
	}
	return -1;
}

/* Ends stream record i with event type (RESP_END, ABORTED): whoever claims
 * its end first reports it, then frees it. */
static void end_stream(struct run *r, unsigned i, enum nl_h2_event_type type)
{
	struct nl_h2_stream *st = &r->h->streams[i];
	if (atomic_fetch_or(&st->state, S_ENDING) & S_ENDING)
		return;
	struct nl_h2_event ev = {
		.type = type,
		.dir = r->dir,
		.slot = i,
		.stream = atomic_load_explicit(&st->id, memory_order_relaxed),
		.status = atomic_load_explicit(&st->status, memory_order_relaxed),
		.grpc_status = atomic_load_explicit(&st->grpc_status, memory_order_relaxed),
		.body_size = atomic_load_explicit(&st->resp_body, memory_order_relaxed),
	};
	r->sink(r->ctx, &ev);
	atomic_store_explicit(&st->state, 0, memory_order_relaxed);
	atomic_store_explicit(&st->id, 0, memory_order_release);
}

static void request_ended(struct run *r, unsigned i)
{
	struct nl_h2_stream *st = &r->h->streams[i];
	if (atomic_fetch_or(&st->state, S_REQ_ENDED) & (S_REQ_ENDED | S_ENDING))
		return;
	struct nl_h2_event ev = {
		.type = NL_H2_REQ_END,
		.dir = r->dir,
		.slot = i,
		.stream = atomic_load_explicit(&st->id, memory_order_relaxed),
		.body_size = atomic_load_explicit(&st->req_body, memory_order_relaxed),
	};
	r->sink(r->ctx, &ev);
}

/* ---- header blocks ------------------------------------------------------------ */

static unsigned digits(const char *v, unsigned n, unsigned max_digits, int64_t *out)
{
	if (n == 0 || n > max_digits)
		return 0;
	int64_t x = 0;
	for (unsigned i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return 0;
		x = x * 10 + (v[i] - '0');
	}
	*out = x;
	return n;
}

static void on_field(void *ctx, const struct nl_hpack_out *o)
{
	struct nl_h2_fields *f = ctx;
	int64_t x;
	switch (o->field) {
	case NL_HF_METHOD:
		f->method_len = o->len;
		memcpy(f->method, o->value, o->len);
		break;
	case NL_HF_PATH:
		f->path_len = o->len;
		f->path_truncated = o->truncated;
		memcpy(f->path, o->value, o->len);
		break;
	case NL_HF_AUTHORITY:
		/* :authority wins over host */
		if (!f->authority_len) {
			f->authority_len = o->len;
			memcpy(f->authority, o->value, o->len);
		}
		break;
	case NL_HF_STATUS:
		f->status = o->len == 3 && digits(o->value, 3, 3, &x) && x >= 100 ? (uint16_t)x : 0;
		break;
	case NL_HF_CONTENT_TYPE:
		f->grpc = o->len >= 16 && memcmp(o->value, "application/grpc", 16) == 0 &&
			  (o->len == 16 || o->value[16] == '+' || o->value[16] == ';');
		break;
	case NL_HF_GRPC_STATUS:
		f->grpc_status = digits(o->value, o->len, 3, &x) ? (int16_t)x : 999;
		break;
	case NL_HF_CONTENT_LENGTH:
		f->content_length = digits(o->value, o->len, 18, &x) ? x : -1;
		break;
	}
}

static void block_begin(struct nl_h2_half *s)
{
	nl_hpack_begin(&s->dec);
	s->f.method_len = s->f.path_len = s->f.authority_len = 0;
	s->f.path_truncated = s->f.grpc = false;
	s->f.status = 0;
	s->f.grpc_status = -1;
	s->f.content_length = -1;
}

static void request_block(struct run *r)
{
	struct nl_h2 *h = r->h;
	struct nl_h2_half *s = r->s;
	uint32_t id = s->block_stream;
	if (id > h->max_id) {
		if (!(id & 1))
			return stop(r, NL_H2_ERROR);   /* a client's streams are odd */
		h->max_id = id;
		int i = take(h, id);
		if (i < 0)
			return stop(r, NL_H2_GIVEN_UP);
		if (!s->f.method_len)
			return stop(r, NL_H2_ERROR);
		struct nl_h2_stream *st = &h->streams[i];
		atomic_store_explicit(&st->status, 0, memory_order_relaxed);
		atomic_store_explicit(&st->grpc_status, -1, memory_order_relaxed);
		atomic_store_explicit(&st->resp_body, 0, memory_order_relaxed);
		atomic_store_explicit(&st->req_body, 0, memory_order_relaxed);
		atomic_store_explicit(&st->state, s->block_end ? S_REQ_ENDED : 0, memory_order_relaxed);
		struct nl_h2_event ev = {
			.type = NL_H2_REQ_HEAD,
			.dir = r->dir,
			.slot = (unsigned)i,
			.stream = id,
			.fields = &s->f,
			.end_stream = s->block_end,
		};
		r->sink(r->ctx, &ev);
		/* release: the record and what the sink kept, before the response
		 * direction can find it */
		atomic_store_explicit(&st->id, id, memory_order_release);
		return;
	}
	/* Trailers of a stream in flight (or of one already over: nothing). */
	int i = find(h, id);
	if (i >= 0 && s->block_end)
		request_ended(r, (unsigned)i);
}

static void response_block(struct run *r)
{
	struct nl_h2 *h = r->h;
	struct nl_h2_half *s = r->s;
	int i = find(h, s->block_stream);
	if (i < 0)
		return;         /* a stream over, or one the upgrade began */
	struct nl_h2_stream *st = &h->streams[i];
	if (!(atomic_load_explicit(&st->state, memory_order_relaxed) & S_RESP_HEAD)) {
		unsigned status = s->f.status;
		if (!status)
			return stop(r, NL_H2_ERROR);
		if (status < 200) {
			if (s->block_end)
				return stop(r, NL_H2_ERROR);
			return;         /* interim: the final head follows */
		}
		atomic_store_explicit(&st->status, (uint16_t)status, memory_order_relaxed);
		atomic_store_explicit(&st->grpc_status, s->f.grpc_status, memory_order_relaxed);
		atomic_fetch_or(&st->state, S_RESP_HEAD);
		struct nl_h2_event ev = {
			.type = NL_H2_RESP_HEAD,
			.dir = r->dir,
			.slot = (unsigned)i,
			.stream = s->block_stream,
			.fields = &s->f,
			.status = status,
			.grpc_status = s->f.grpc_status,
		};
		r->sink(r->ctx, &ev);
	} else if (s->f.grpc_status >= 0) {
		atomic_store_explicit(&st->grpc_status, s->f.grpc_status, memory_order_relaxed);
	}
	if (s->block_end)
		end_stream(r, (unsigned)i, NL_H2_RESP_END);
}

static void block_done(struct run *r)
{
	struct nl_h2_half *s = r->s;
	unsigned kind = s->block;
	s->block = 0;
	if (!nl_hpack_end(&s->dec))
		return stop(r, NL_H2_ERROR);
	if (kind != T_HEADERS + 1)
		return;         /* PUSH_PROMISE: decoded for the table only */
	if (r->dir == NL_H2_REQUEST)
		request_block(r);
	else
		response_block(r);
}

/* ---- frames ---------------------------------------------------------------- */

static inline uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void frame_end(struct run *r)
{
	struct nl_h2_half *s = r->s;
	s->state = H_HEAD;
	s->pos = 0;
	switch (s->type) {
	case T_DATA:
		if ((s->flags & F_END_STREAM) && s->cur >= 0) {
			if (r->dir == NL_H2_REQUEST)
				request_ended(r, (unsigned)s->cur);
			else
				end_stream(r, (unsigned)s->cur, NL_H2_RESP_END);
		}
		break;
	case T_HEADERS:
	case T_PUSH_PROMISE:
	case T_CONTINUATION:
		if (s->flags & F_END_HEADERS)
			block_done(r);
		break;
	}
}

/* The stream a reset or the server's GOAWAY ends. */
static void abort_streams(struct run *r, uint32_t id, bool above)
{
	struct nl_h2 *h = r->h;
	if (!above) {
		int i = find(h, id);
		if (i >= 0)
			end_stream(r, (unsigned)i, NL_H2_ABORTED);
		return;
	}
	for (unsigned i = 0; i < NL_H2_STREAMS; i++) {
		uint32_t sid = atomic_load_explicit(&h->streams[i].id, memory_order_acquire);
		if (sid > id)
			end_stream(r, i, NL_H2_ABORTED);
	}
}

/* The frame's leading fields are read: its padding, what they say. */
static void fixed_done(struct run *r)
{
	struct nl_h2_half *s = r->s;
	if (s->flags & F_PADDED && (s->type == T_DATA || s->type == T_HEADERS || s->type == T_PUSH_PROMISE)) {
		s->pad = s->buf[0];
		if (s->pad > s->left)
			return stop(r, NL_H2_ERROR);
	}
	if (s->type == T_RST_STREAM)
		abort_streams(r, s->stream, false);
	else if (s->type == T_GOAWAY && r->dir == NL_H2_RESPONSE)
		abort_streams(r, be32(s->buf) & 0x7fffffff, true);
	if (!nl_h2_active(r->h))
		return;
	if (s->left > s->pad)
		s->state = H_BODY;
	else if (s->left)
		s->state = H_PAD;
	else
		frame_end(r);
}

static void frame_start(struct run *r)
{
	struct nl_h2_half *s = r->s;
	const uint8_t *b = s->buf;
	uint32_t len = (uint32_t)b[0] << 16 | (uint32_t)b[1] << 8 | b[2];
	s->type = b[3];
	s->flags = b[4];
	s->stream = be32(b + 5) & 0x7fffffff;
	s->left = len;
	s->pad = 0;
	s->fixed = 0;
	s->pos = 0;
	if (s->first) {
		s->first = false;
		if (s->type != T_SETTINGS || (s->flags & F_ACK))
			return stop(r, NL_H2_ERROR);
	}
	if (s->block && (s->type != T_CONTINUATION || s->stream != s->block_stream))
		return stop(r, NL_H2_ERROR);
	bool padded = s->flags & F_PADDED;
	switch (s->type) {
	case T_DATA:
		if (!s->stream)
			return stop(r, NL_H2_ERROR);
		s->fixed = padded;
		s->cur = (int16_t)find(r->h, s->stream);
		/* a response's DATA before its final head is malformed */
		if (s->cur >= 0 && r->dir == NL_H2_RESPONSE &&
		    !(atomic_load_explicit(&r->h->streams[s->cur].state, memory_order_relaxed) & S_RESP_HEAD))
			return stop(r, NL_H2_ERROR);
		break;
	case T_HEADERS:
		if (!s->stream)
			return stop(r, NL_H2_ERROR);
		s->fixed = (uint8_t)(padded + (s->flags & F_PRIORITY ? 5 : 0));
		s->block = T_HEADERS + 1;
		s->block_stream = s->stream;
		s->block_end = s->flags & F_END_STREAM;
		block_begin(s);
		break;
	case T_PUSH_PROMISE:
		if (r->dir != NL_H2_RESPONSE || !s->stream)
			return stop(r, NL_H2_ERROR);
		s->fixed = (uint8_t)(padded + 4);
		s->block = T_PUSH_PROMISE + 1;
		s->block_stream = s->stream;
		block_begin(s);
		break;
	case T_CONTINUATION:
		if (!s->block)
			return stop(r, NL_H2_ERROR);
		break;
	case T_RST_STREAM:
		if (len != 4 || !s->stream)
			return stop(r, NL_H2_ERROR);
		s->fixed = 4;
		break;
	case T_SETTINGS:
		if (s->stream || (s->flags & F_ACK ? len != 0 : len % 6 != 0))
			return stop(r, NL_H2_ERROR);
		break;
	case T_GOAWAY:
		if (len < 8 || s->stream)
			return stop(r, NL_H2_ERROR);
		s->fixed = 8;
		break;
	}
	if (s->fixed > len)
		return stop(r, NL_H2_ERROR);
	if (s->fixed) {
		s->state = H_FIXED;
		return;
	}
	fixed_done(r);
}

/* k bytes of the frame's content (past its leading fields, before its
 * padding). */
static void body(struct run *r, const uint8_t *p, size_t k)
{
	struct nl_h2 *h = r->h;
	struct nl_h2_half *s = r->s;
	switch (s->type) {
	case T_DATA:
		if (s->cur < 0)
			break;
		if (r->dir == NL_H2_REQUEST) {
			struct nl_h2_stream *st = &h->streams[s->cur];
			uint32_t v = atomic_load_explicit(&st->req_body, memory_order_relaxed);
			atomic_store_explicit(&st->req_body, v + k < v || v + k > UINT32_MAX ? UINT32_MAX : (uint32_t)(v + k),
					      memory_order_relaxed);
		} else {
			_Atomic uint64_t *b = &h->streams[s->cur].resp_body;
			atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + k, memory_order_relaxed);
		}
		if (h->want_data) {
			struct nl_h2_event ev = {
				.type = NL_H2_DATA, .dir = r->dir, .slot = (unsigned)s->cur, .stream = s->stream, .data = p, .len = k
			};
			r->sink(r->ctx, &ev);
		}
		break;
	case T_HEADERS:
	case T_PUSH_PROMISE:
	case T_CONTINUATION: {
		enum nl_hpack_result res = nl_hpack_feed(&s->dec, &h->table[r->dir], p, k, on_field, &s->f);
		if (res != NL_HPACK_OK)
			stop(r, res == NL_HPACK_OVER_CAP ? NL_H2_GIVEN_UP : NL_H2_ERROR);
		break;
	}
	case T_SETTINGS:
		if (s->flags & F_ACK)
			break;
		for (size_t i = 0; i < k; i++) {
			s->buf[s->pos++] = p[i];
			if (s->pos < 6)
				continue;
			s->pos = 0;
			/* SETTINGS_HEADER_TABLE_SIZE: what the sender's decoder
			 * allows the other direction's encoder. */
			if (s->buf[0] == 0 && s->buf[1] == 1)
				nl_hpack_table_limit(&h->table[!r->dir], be32(s->buf + 2));
		}
		break;
	}
}

bool nl_h2_feed(struct nl_h2 *h, enum nl_h2_dir dir, const void *buf, size_t n, nl_h2_sink sink, void *ctx)
{
	struct run r = { .h = h, .s = &h->half[dir], .dir = dir, .sink = sink, .ctx = ctx };
	struct nl_h2_half *s = r.s;
	const uint8_t *p = buf;
	size_t i = 0;
	while (i < n && nl_h2_active(h)) {
		switch (s->state) {
		case H_PREFACE: {
			size_t k = n - i < (size_t)(NL_H2_PREFACE_LEN - s->pos) ? n - i : (size_t)(NL_H2_PREFACE_LEN - s->pos);
			if (memcmp(p + i, preface + s->pos, k) != 0) {
				stop(&r, NL_H2_ERROR);
				break;
			}
			i += k;
			s->pos = (uint8_t)(s->pos + k);
			if (s->pos == NL_H2_PREFACE_LEN) {
				s->state = H_HEAD;
				s->pos = 0;
			}
			break;
		}
		case H_HEAD:
			if (s->pos == 0 && n - i >= 9) {
				memcpy(s->buf, p + i, 9);
				i += 9;
				frame_start(&r);
				break;
			}
			s->buf[s->pos++] = p[i++];
			if (s->pos == 9)
				frame_start(&r);
			break;
		case H_FIXED:
			s->buf[s->pos++] = p[i++];
			s->left--;
			if (s->pos == s->fixed) {
				s->pos = 0;
				fixed_done(&r);
			}
			break;
		case H_BODY: {
			size_t want = s->left - s->pad;
			size_t k = n - i < want ? n - i : want;
			body(&r, p + i, k);
			i += k;
			s->left -= (uint32_t)k;
			if (s->left == s->pad) {
				if (s->left)
					s->state = H_PAD;
				else if (nl_h2_active(h))
					frame_end(&r);
			}
			break;
		}
		case H_PAD: {
			size_t k = n - i < s->left ? n - i : s->left;
			i += k;
			s->left -= (uint32_t)k;
			if (!s->left)
				frame_end(&r);
			break;
		}
		}
	}
	return nl_h2_active(h);
}

void nl_h2_close(struct nl_h2 *h, nl_h2_sink sink, void *ctx)
{
	if (!nl_h2_active(h))
		return;
	struct run r = { .h = h, .s = &h->half[NL_H2_RESPONSE], .dir = NL_H2_RESPONSE, .sink = sink, .ctx = ctx };
	for (unsigned i = 0; i < NL_H2_STREAMS; i++)
		if (atomic_load_explicit(&h->streams[i].id, memory_order_acquire))
			end_stream(&r, i, NL_H2_ABORTED);
	atomic_store(&h->stopped, 1);
}
