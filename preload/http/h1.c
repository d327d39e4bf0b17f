/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.x push parser (see h1.h): one state machine per direction over the
 * bytes as they come.
 *
 * Two paths give the same results (the unit tests and the fuzz target hold
 * them to it). The quick one takes a message head whose bytes are all in
 * one call of 32 bytes or more, the usual case, in one go: the start line
 * by word compares, each field line from two 16-byte SSE2 loads at its start,
 * or one 32-byte AVX2 load where the CPU has it (its '\n', and its first ':'
 * for the one check a line of no interest gets), Content-Length and Host
 * values at once, the head's events from one event struct, and a
 * Content-Length body the call holds by arithmetic; the state is written
 * where the message ends, or where it hands over. It is in h1_quick.h,
 * built once for SSE2 and once for AVX2, chosen when the library loads. The
 * other goes through the states: whole lines at once where it can, byte by
 * byte where a line is split across calls or unusual. Only the request
 * line, the status line, Host, Content-Length and Transfer-Encoding are
 * looked into; a field line whose first letter is that of none of those
 * names is only delimited, the others are checked for their ':'. Body
 * bytes are counted, never read, but those of a tapped exchange, which are
 * handed to the sink as they are (NL_H1_BODY).
 *
 * Pending requests: the request stream pushes a request to the ring when its
 * request line is complete (after reporting REQ_LINE); the response stream
 * pops it when its final response is complete (after reporting RESP_END).
 * ring_tail is written by the request stream only, ring_head by the response
 * stream only: each reads the other's index with acquire and publishes its
 * own with release, so ring_kind[slot], and whatever a sink keeps per slot,
 * is handed over without a data race. A request is pending, and reported as
 * ABORTED at close, from its REQ_LINE until the end of its final response.
 *
 * Choices the RFC leaves open, or h1.h does not spell out:
 * - A direction is NOT_HTTP for any fault before the end of its first start
 *   line (request line: method, target and version checked; status line),
 *   ERROR after. REQ_BEGIN comes at a request's first byte (an uppercase
 *   letter), so a connection's first request may give REQ_BEGIN, NOT_HTTP.
 * - NOT_HTTP and ERROR name slot 0. Once stopped (NOT_HTTP, ERROR, upgrade,
 *   close), nothing more is reported, nl_h1_close included.
 * - Empty lines before a start line are skipped in both directions.
 * - A status line may end right after the code ("HTTP/1.1 200\r\n"); codes
 *   100..999.
 * - A field line whose first byte is a letter that starts a name looked
 *   into in its section (c, t; h in requests) needs a ':' with no byte <= SP
 *   before it. Any other field line is only delimited by its '\n': its name
 *   cannot be one that decides framing or a value the parser reports, and
 *   the peers, not the shim, judge what it holds. A first byte SP or HT
 *   (obs-fold) or ':' (an empty name) is malformed. Two Host fields, or a
 *   Host value with whitespace or controls inside, are malformed; an empty
 *   Host is reported as "" (not NULL).
 * - Content-Length may be a list of equal values, or repeat them; chunk
 *   extensions and the reason phrase are skipped unread. Fields of the
 *   trailer section are not looked into.
 * - Caps: request line (method, SP, target, SP) 16 KiB; any other line
 *   8 KiB with its CRLF; 256 field lines per section. */
#include "h1.h"

#include <string.h>

_Atomic bool nl_h1_avx2;

_Static_assert(sizeof(struct nl_h1) <= 192, "one struct nl_h1 per connection: keep it small");
_Static_assert(256 % NL_H1_PIPELINE == 0, "ring indexes wrap at 256");
_Static_assert(NL_H1_METHOD_MAX + NL_H1_TARGET_MAX <= 255 && NL_H1_HOST_MAX <= NL_H1_METHOD_MAX + NL_H1_TARGET_MAX,
	       "buf and its uint8_t length");

/* buf holds a request's method and target as the byte-wise path reads
 * them, or the first 32 bytes of its line as the quick one read it whole
 * (for the next request to compare with: same_line); then, from its field
 * lines on, its Host value at HOST_AT, past those. */
#define HOST_AT (NL_H1_METHOD_MAX + NL_H1_TARGET_MAX - NL_H1_HOST_MAX)
_Static_assert(HOST_AT >= 32 && HOST_AT + 32 <= NL_H1_METHOD_MAX + NL_H1_TARGET_MAX, "buf: the quick Host store");

/* The byte-wise paths, kept out of the quick ones; the quick ones in one piece. */
#define NOINLINE __attribute__((noinline))
#define QUICK inline __attribute__((always_inline))
/* The quick path's entry points keep nl_h1_feed's arguments as they are
 * (gcc would otherwise make copies without the unused one, which need
 * them moved into other registers first). */
#if defined(__GNUC__) && !defined(__clang__)
#define ENTRY __attribute__((noinline, noclone))
#else
#define ENTRY NOINLINE
#endif

#define START_LINE_MAX 16384    /* request line: method, SP, target, SP */
#define FIELD_LINE_MAX 8192     /* field line, status line, chunk size line, CRLF included */
#define FIELDS_MAX 256          /* field lines in a header or trailer section */

enum state {
	S_IDLE,                 /* before a start line (empty lines skipped); 0: nl_h1_init */
	S_METHOD,
	S_TARGET,
	S_REQ_VERSION,          /* "HTTP/1.x" and the line end */
	S_RESP_VERSION,         /* "HTTP/1.x " */
	S_STATUS,
	S_REASON,
	S_FIELD,                /* at the start of a field line or of the empty line */
	S_NAME,
	S_SKIP,                 /* the value of a field of no interest */
	S_VALUE,                /* the value of Content-Length, Transfer-Encoding, Host */
	S_BODY,                 /* Content-Length body */
	S_CHUNK_SIZE,
	S_CHUNK_EXT,
	S_CHUNK_DATA,
	S_CHUNK_END,            /* the CRLF after chunk data */
	S_CLOSE_BODY,           /* a response body that ends with the connection */
};

enum {
	F_MINOR1 = 1 << 0,      /* HTTP/1.1 */
	F_TRUNC = 1 << 1,       /* request target longer than NL_H1_TARGET_MAX */
	F_CL = 1 << 2,          /* Content-Length seen: its value is in remaining */
	F_TE = 1 << 3,          /* Transfer-Encoding seen */
	F_CHUNKED = 1 << 4,     /* its last coding so far is chunked */
	F_HOST = 1 << 5,        /* Host seen: its value is in buf */
	F_CR = 1 << 6,          /* a CR ended the line: only LF may follow */
	F_WS = 1 << 7,          /* name so far ends in a byte <= SP; chunk size: whitespace after it */
	F_TRAILER = 1 << 8,     /* reading the trailer section */
	F_HOST_SAME = 1 << 9,   /* the Host value is the one kept before (same_host) */
};

/* What a request compares with the one before, in the request half's
 * compare: its line (asked, nl_h1_compare_lines: same_line), and its Host
 * value when buf holds the last one's 32 bytes from the value on (stored by
 * the quick path, which alone compares: same_host). */
enum {
	CMP_LINE = 1,
	CMP_HOST = 2,
	F_TAP = 1 << 14,        /* the message's body is reported (nl_h1_tap) */
	F_HTTP = 1 << 15,       /* a start line was valid: later faults are errors, not NOT_HTTP */
};

enum { FLD_NONE, FLD_CL, FLD_TE, FLD_HOST };

/* The lowercase names of the fields looked into, by FLD_*. */
static const char *const field_name[] = { "", "content-length", "transfer-encoding", "host" };
static const uint8_t field_len[] = { 0, 14, 17, 4 };

/* What a request's response depends on; K_TAP: its body is reported too
 * (which keeps it off the quick path's Content-Length arithmetic). */
enum { K_OTHER, K_HEAD, K_CONNECT, K_KIND = 3, K_TAP = 4 };

struct run {
	struct nl_h1 *h;
	struct nl_h1_half *s;
	nl_h1_sink sink;
	void *ctx;
	const uint8_t *end;     /* end of this call's bytes */
	bool wide;              /* this call has 16 bytes or more */
	bool wide32;            /* 32 or more */
	bool req;
};

/* ---- bytes ------------------------------------------------------------------------ */

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~", digits, letters. */
static inline bool is_tchar(uint8_t b)
{
	static const uint64_t map[2] = { 0x03ff6cfa00000000ull, 0x57ffffffc7fffffeull };
	return b < 128 && (map[b >> 6] >> (b & 63) & 1);
}

static inline bool is_ws(uint8_t b)
{
	return b == ' ' || b == '\t';
}

static inline uint8_t lower(uint8_t b)
{
	return (uint8_t)(b | ((unsigned)(b - 'A') < 26u) << 5);
}

static inline unsigned hex_digit(uint8_t b)
{
	if ((unsigned)(b - '0') < 10u)
		return b - '0';
	if ((unsigned)(lower(b) - 'a') < 6u)
		return lower(b) - 'a' + 10u;
	return 16;
}

/* Whether p[0..n) is lname (lowercase) ignoring the case of letters. */
NOINLINE static bool ci_eq(const uint8_t *p, const char *lname, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lower(p[i]) != (uint8_t)lname[i])
			return false;
	return true;
}

static inline uint64_t load64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline uint16_t load16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline uint32_t load32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

/* ---- scanning ------------------------------------------------------------------ */

/* With SSE2 (every x86-64), runs of 16 bytes are scanned at once. A run never
 * reads outside the bytes of the call: near their end it is their last 16
 * bytes, shifted; calls of fewer than 16 bytes scan byte by byte. */
#if defined(__SSE2__) && !defined(NL_H1_NO_SIMD)
#include <emmintrin.h>
#define NL_H1_SIMD 1

/* Where the CPU has AVX2, field lines are scanned 32 bytes at a time. The
 * CPU is asked when the first parser is set up, not at load: CPUID traps to
 * the hypervisor in a virtual machine, a cost every exec of a program that
 * never speaks HTTP would pay. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(NL_H1_NO_AVX2)
#include <cpuid.h>
#include <immintrin.h>
#define NL_H1_AVX2 1

/* Asked with CPUID itself: __builtin_cpu_supports would link libgcc's CPU
 * model, whose constructor asks at load after all. AVX2 needs the OS to
 * save the YMM registers too (XCR0 bits 1 and 2). */
static bool cpu_has_avx2(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return false;
	unsigned xcr0, xcr0_hi;
	__asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
	(void)xcr0_hi;
	if ((xcr0 & 6) != 6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & bit_AVX2) != 0;
}

static void h1_cpu(void)
{
	static _Atomic bool asked;
	if (atomic_load_explicit(&asked, memory_order_acquire))
		return;
	atomic_store(&nl_h1_avx2, cpu_has_avx2());
	atomic_store_explicit(&asked, true, memory_order_release);
}
#endif

static inline __m128i run16(const struct run *r, const uint8_t *q, unsigned *shift)
{
	if (r->end - q >= 16) {
		*shift = 0;
		return _mm_loadu_si128((const __m128i *)(const void *)q);
	}
	*shift = (unsigned)(16 - (r->end - q));
	return _mm_loadu_si128((const __m128i *)(const void *)(r->end - 16));
}

/* The index of the lowest set bit of x, not 0, as a size_t for addresses:
 * one instruction, where __builtin_ctz's int may cost a sign extension and
 * a register clear besides (bsfl writes all 64 bits of its register). */
static inline size_t low_bit32(uint32_t x)
{
#if defined(__x86_64__) && !defined(__clang__)
	uint64_t i;
	__asm__("bsfl %1, %k0" : "=r"(i) : "rm"(x) : "cc");
	return (size_t)i;
#else
	return (size_t)__builtin_ctz(x);
#endif
}

static inline unsigned eq_mask(__m128i v, char c)
{
	return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c)));
}

/* Vector constants read from memory. Where it targets AVX2 the compiler
 * makes a constant it knows with a broadcast from an immediate, three
 * instructions, for each use that finds it no longer in a register; one it
 * cannot see into is an operand of the instruction that uses it. */
static const uint8_t k_lf[32] __attribute__((aligned(32))) = { [0 ... 31] = '\n' };
static const uint8_t k_colon[32] __attribute__((aligned(32))) = { [0 ... 31] = ':' };
static const uint8_t k_sp[16] __attribute__((aligned(16))) = { [0 ... 15] = 0x20 };
static const uint8_t k_del[16] __attribute__((aligned(16))) = { [0 ... 15] = 0x7f };

static inline __m128i k128(const uint8_t *k)
{
	__asm__("" : "+r"(k));
	return _mm_load_si128((const __m128i *)(const void *)k);
}

/* The '\n' of 16 bytes. */
static inline unsigned lf_mask(__m128i v)
{
	return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, k128(k_lf)));
}

/* Bytes <= 0x20 and 0x7f: SP ends a token, the others may not be in one. */
static inline unsigned ctl_mask(__m128i v)
{
	__m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, k128(k_sp)), v);
	return (unsigned)_mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(v, k128(k_del))));
}
#endif

/* The first byte of [q, lim) that is <= 0x20 or 0x7f, or lim. */
NOINLINE static const uint8_t *find_ctl(const struct run *r, const uint8_t *q, const uint8_t *lim)
{
#ifdef NL_H1_SIMD
	if (r->wide) {
		while (q < lim) {
			unsigned sh;
			__m128i v = run16(r, q, &sh);   /* sets sh: a statement of its own */
			unsigned m = ctl_mask(v) >> sh;
			size_t left = (size_t)(lim - q);
			if (left < 16)
				m &= (1u << left) - 1;
			if (m)
				return q + __builtin_ctz(m);
			if (left <= 16)
				break;
			q += 16;
		}
		return lim;
	}
#else
	(void)r;
#endif
	while (q < lim && *q > 0x20 && *q != 0x7f)
		q++;
	return q;
}

/* The first '\n' of [q, end), or NULL. */
static const uint8_t *find_nl(const struct run *r, const uint8_t *q)
{
#ifdef NL_H1_SIMD
	if (r->wide) {
		while (q < r->end) {
			unsigned sh;
			__m128i v = run16(r, q, &sh);   /* sets sh: a statement of its own */
			unsigned m = eq_mask(v, '\n') >> sh;
			if (m)
				return q + __builtin_ctz(m);
			q += 16 - sh;
		}
		return NULL;
	}
#endif
	return memchr(q, '\n', (size_t)(r->end - q));
}

/* ---- events ---------------------------------------------------------------------- */

static inline unsigned ring_slot(uint8_t i)
{
	return i % NL_H1_PIPELINE;
}

/* Events are dropped once the other direction stopped the connection. */
static QUICK void emit(const struct run *r, struct nl_h1_event *ev)
{
	if (!atomic_load_explicit(&r->h->stopped, memory_order_relaxed))
		r->sink(r->ctx, ev);
}

#ifdef NL_H1_SIMD
/* An event with every field empty, by 16-byte stores (a struct of 88 bytes
 * may otherwise be cleared by a slow string instruction). */
static inline void ev_clear(struct nl_h1_event *ev)
{
	_Static_assert(sizeof *ev > 64 && sizeof *ev <= 96, "ev_clear");
	char *b = (char *)ev;
	__m128i z = _mm_setzero_si128();
	_mm_storeu_si128((__m128i *)(void *)b, z);
	_mm_storeu_si128((__m128i *)(void *)(b + 16), z);
	_mm_storeu_si128((__m128i *)(void *)(b + 32), z);
	_mm_storeu_si128((__m128i *)(void *)(b + 48), z);
	_mm_storeu_si128((__m128i *)(void *)(b + sizeof *ev - 32), z);
	_mm_storeu_si128((__m128i *)(void *)(b + sizeof *ev - 16), z);
}
#endif

static void emit_simple(const struct run *r, enum nl_h1_event_type type, unsigned slot)
{
	struct nl_h1_event ev = { .type = type, .slot = slot };
	emit(r, &ev);
}

/* Body bytes of a tapped message (p NULL: moved unseen). Out of line: only
 * tapped messages come here. */
NOINLINE static void emit_body(struct nl_h1 *h, const struct nl_h1_half *s, bool req, const void *p, size_t n,
			       nl_h1_sink sink, void *ctx)
{
	if (atomic_load_explicit(&h->stopped, memory_order_relaxed) || !n)
		return;
	struct nl_h1_event ev = {
		.type = NL_H1_BODY,
		.slot = req ? s->slot : ring_slot(atomic_load_explicit(&h->ring_head, memory_order_relaxed)),
		.body = p,
		.body_size = n,
		.dir = req ? NL_H1_REQUEST : NL_H1_RESPONSE,
	};
	sink(ctx, &ev);
}

/* Stops the connection with one NOT_HTTP (while this direction has not yet
 * shown a valid start line) or ERROR; whichever direction gets there first
 * reports it. */
NOINLINE static bool fail(const struct run *r)
{
	enum nl_h1_event_type type = r->s->flags & F_HTTP ? NL_H1_ERROR : NL_H1_NOT_HTTP;
	if (!atomic_exchange_explicit(&r->h->stopped, 1, memory_order_relaxed)) {
		struct nl_h1_event ev = { .type = type };
		r->sink(r->ctx, &ev);
	}
	return false;
}

/* Adds n bytes to the line being read; false past cap. */
static inline bool line_add(struct nl_h1_half *s, size_t n, unsigned cap)
{
	if (n > cap - s->line_len)
		return false;
	s->line_len = (uint16_t)(s->line_len + n);
	return true;
}

static void message_begin(struct nl_h1_half *s)
{
	s->flags &= F_HTTP;
	s->sub = 0;
	s->len = 0;
	s->line_len = 0;
	s->remaining = 0;
	s->body_size = 0;
}

static bool message_end(const struct run *r)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	s->state = S_IDLE;
	if (r->req) {
		struct nl_h1_event ev = { .type = NL_H1_REQ_END, .slot = s->slot, .body_size = s->body_size };
		emit(r, &ev);
		return true;
	}
	uint8_t head = atomic_load_explicit(&h->ring_head, memory_order_relaxed);
	struct nl_h1_event ev = {
		.type = NL_H1_RESP_END, .slot = ring_slot(head), .status = s->status, .body_size = s->body_size,
	};
	emit(r, &ev);
	/* After the sink: what it did for the slot happens before the slot's reuse. */
	atomic_store_explicit(&h->ring_head, (uint8_t)(head + 1), memory_order_release);
	return true;
}

static const uint8_t *parse_fields(const struct run *r, const uint8_t *p, const uint8_t *e);

/* ---- request line ------------------------------------------------------------------ */

static bool request_begin(const struct run *r)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	uint8_t tail = atomic_load_explicit(&h->ring_tail, memory_order_relaxed);
	uint8_t head = atomic_load_explicit(&h->ring_head, memory_order_acquire);
	if ((uint8_t)(tail - head) >= NL_H1_PIPELINE)
		return fail(r);
	message_begin(s);
	s->slot = (uint8_t)ring_slot(tail);
	s->prev = 0;            /* the byte-wise copy overwrites buf from its start */
	s->state = S_METHOD;
	emit_simple(r, NL_H1_REQ_BEGIN, s->slot);
	return true;
}

static void request_line_done(const struct run *r)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	s->flags = (uint16_t)((s->flags & ~F_CR) | F_HTTP);
	uint8_t kind = K_OTHER;
	if (s->aux == 4 && !memcmp(h->buf, "HEAD", 4))
		kind = K_HEAD;
	else if (s->aux == 7 && !memcmp(h->buf, "CONNECT", 7))
		kind = K_CONNECT;
	struct nl_h1_event ev = {
		.type = NL_H1_REQ_LINE,
		.slot = s->slot,
		.method = h->buf,
		.method_len = s->aux,
		.target = h->buf + s->aux,
		.target_len = (size_t)(s->len - s->aux),
		.target_truncated = s->flags & F_TRUNC,
		.version_minor = s->flags & F_MINOR1,
	};
	uint8_t tail = atomic_load_explicit(&h->ring_tail, memory_order_relaxed);
	h->ring_kind[ring_slot(tail)] = kind;   /* (before the event: nl_h1_tap marks it) */
	emit(r, &ev);
	atomic_store_explicit(&h->ring_tail, (uint8_t)(tail + 1), memory_order_release);
	s->len = 0;             /* buf now keeps the Host value, at HOST_AT */
	s->n_headers = 0;
	s->state = S_FIELD;
}

/* "HTTP/1.0" or "HTTP/1.1" as a word: the minor version, or -1. */
static inline int version_word(const uint8_t *p)
{
	uint64_t w = load64(p);
	if (w == load64("HTTP/1.1"))
		return 1;
	return w == load64("HTTP/1.0") ? 0 : -1;
}

/* "HTTP/1.0" or "HTTP/1.1", then CRLF or LF. */
static const uint8_t *parse_req_version(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	if (s->sub == 0 && e - p >= 10) {
		/* All of it at once; anything unusual byte by byte. */
		int minor = version_word(p);
		int eol = p[8] == '\n' ? 1 : p[8] == '\r' && p[9] == '\n' ? 2 : 0;
		if (minor >= 0 && eol) {
			s->flags |= (uint16_t)(minor * F_MINOR1);
			request_line_done(r);
			return parse_fields(r, p + 8 + eol, e);
		}
	}
	for (; p < e; p++) {
		uint8_t b = *p;
		if (s->sub < 7) {
			if (b != (uint8_t)"HTTP/1."[s->sub])
				return fail(r), NULL;
			s->sub++;
		} else if (s->sub == 7) {
			if (b != '0' && b != '1')
				return fail(r), NULL;
			s->flags |= (uint16_t)(b - '0') * F_MINOR1;
			s->sub = 8;
		} else if (b == '\n') {
			request_line_done(r);
			return p + 1;
		} else if (b != '\r' || (s->flags & F_CR)) {
			return fail(r), NULL;
		} else {
			s->flags |= F_CR;
		}
	}
	return p;
}

static const uint8_t *parse_target(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *q = find_ctl(r, p, e);
	if (q < e && *q != ' ')
		return fail(r), NULL;   /* a control byte */
	size_t n = (size_t)(q - p);
	size_t room = (size_t)(s->aux + NL_H1_TARGET_MAX - s->len);
	char *to = r->h->buf + s->len;
	s->compare &= (uint8_t)~CMP_HOST;   /* the target's bytes may cover the Host's */
	if (n > room) {
		s->flags |= F_TRUNC;
		n = room;
	}
	/* Copies of a fixed size are inline; the bytes past n do no harm. */
	if (n <= 32 && room >= 32 && e - p >= 32)
		memcpy(to, p, 32);
	else if (room == NL_H1_TARGET_MAX && e - p >= NL_H1_TARGET_MAX)
		memcpy(to, p, NL_H1_TARGET_MAX);
	else
		memcpy(to, p, n);
	s->len = (uint8_t)(s->len + n);
	if (!line_add(s, (size_t)(q - p) + (q < e), START_LINE_MAX))
		return fail(r), NULL;
	if (q == e)
		return e;
	if (s->len == s->aux)
		return fail(r), NULL;   /* empty target */
	s->sub = 0;
	s->state = S_REQ_VERSION;
	return parse_req_version(r, q + 1, e);
}

NOINLINE static const uint8_t *parse_method(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	char *buf = r->h->buf;
	unsigned len = s->len;
	for (; p < e; p++) {
		uint8_t b = *p;
		if (b == ' ') {
			s->aux = s->len = (uint8_t)len;
			s->line_len = (uint16_t)(len + 1);
			s->state = S_TARGET;
			return parse_target(r, p + 1, e);
		}
		if (!is_tchar(b) || len == NL_H1_METHOD_MAX)
			return fail(r), NULL;
		buf[len++] = (char)b;
	}
	s->len = (uint8_t)len;
	return p;
}

/* ---- status line ------------------------------------------------------------------- */

/* "HTTP/1.0 " or "HTTP/1.1 " (the H was seen). */
NOINLINE static const uint8_t *parse_resp_version(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	for (; p < e; p++) {
		uint8_t b = *p;
		if (s->sub < 7) {
			if (b != (uint8_t)"HTTP/1."[s->sub])
				return fail(r), NULL;
			s->sub++;
		} else if (s->sub == 7) {
			if (b != '0' && b != '1')
				return fail(r), NULL;
			s->flags |= (uint16_t)(b - '0') * F_MINOR1;
			s->sub = 8;
		} else {
			if (b != ' ')
				return fail(r), NULL;
			s->sub = 0;
			s->status = 0;
			s->state = S_STATUS;
			return p + 1;
		}
	}
	return p;
}

/* Three digits, 100..999, then SP and a reason, or the line end at once. */
NOINLINE static const uint8_t *parse_status(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	for (; p < e; p++) {
		uint8_t b = *p;
		if (s->sub < 3) {
			unsigned d = (unsigned)(b - '0');
			if (d > 9 || (s->sub == 0 && d == 0))
				return fail(r), NULL;
			s->status = (uint16_t)(s->status * 10 + d);
			s->sub++;
			continue;
		}
		if (b != ' ' && b != '\r' && b != '\n')
			return fail(r), NULL;
		s->line_len = 12;
		s->state = S_REASON;
		return b == ' ' ? p + 1 : p;
	}
	return p;
}

/* The reason phrase is not looked at. */
static const uint8_t *parse_reason(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	const uint8_t *nl = find_nl(r, p);
	const uint8_t *q = nl ? nl + 1 : e;
	if (!line_add(s, (size_t)(q - p), FIELD_LINE_MAX))
		return fail(r), NULL;
	if (!nl)
		return e;
	s->flags |= F_HTTP;
	if (atomic_load_explicit(&h->ring_tail, memory_order_acquire) ==
	    atomic_load_explicit(&h->ring_head, memory_order_relaxed))
		return fail(r), NULL;   /* a response to nothing */
	s->n_headers = 0;
	s->state = S_FIELD;
	return parse_fields(r, q, e);
}

/* ---- message heads ------------------------------------------------------------------- */

static void chunk_begin(struct nl_h1_half *s)
{
	s->state = S_CHUNK_SIZE;
	s->sub = 0;
	s->remaining = 0;
	s->line_len = 0;
	s->flags &= (uint16_t)~(F_WS | F_CR);
}

static bool request_head_done(const struct run *r)
{
	struct nl_h1_half *s = r->s;
	if ((s->flags & (F_TE | F_CHUNKED)) == F_TE)
		return fail(r);   /* a request body that only the close could end */
	bool ends = !(s->flags & F_TE) && !s->remaining;
	struct nl_h1_event ev = {
		.type = NL_H1_REQ_HEAD,
		.slot = s->slot,
		.host = s->flags & F_HOST ? r->h->buf + HOST_AT : NULL,
		.host_len = s->flags & F_HOST ? s->len : 0,
		.folded = ends ? NL_H1_FOLD_END : 0,
	};
	emit(r, &ev);
	s->body_size = 0;
	if (s->flags & F_TE) {
		chunk_begin(s);
		return true;
	}
	if (s->remaining) {
		s->state = S_BODY;
		return true;
	}
	s->state = S_IDLE;      /* REQ_END folded into REQ_HEAD */
	return true;
}

static bool response_head_done(const struct run *r)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	unsigned st = s->status;
	if (st < 200 && st != 101) {
		s->state = S_IDLE;      /* interim: the final response follows */
		return true;
	}
	uint8_t head = atomic_load_explicit(&h->ring_head, memory_order_relaxed);
	unsigned slot = ring_slot(head);
	uint8_t kind = h->ring_kind[slot];
	if (kind & K_TAP) {
		s->flags |= F_TAP;
		kind &= K_KIND;
	}
	struct nl_h1_event ev = {
		.type = NL_H1_RESP_HEAD, .slot = slot, .status = st, .version_minor = s->flags & F_MINOR1,
	};
	bool upgrade = st == 101 || (kind == K_CONNECT && st / 100 == 2);
	s->body_size = 0;
	if (upgrade || kind == K_HEAD || st == 204 || st == 304 ||
	    ((s->flags & (F_CL | F_TE)) == F_CL && !s->remaining)) {
		/* It ends here: RESP_HEAD folded into RESP_END. */
		ev.type = upgrade ? NL_H1_RESP_UPGRADED : NL_H1_RESP_END;
		ev.folded = NL_H1_FOLD_HEAD;
		s->state = S_IDLE;
		emit(r, &ev);
		if (upgrade) {
			atomic_store_explicit(&h->stopped, 1, memory_order_relaxed);
			return false;
		}
		/* After the sink: what it did for the slot happens before the slot's reuse. */
		atomic_store_explicit(&h->ring_head, (uint8_t)(head + 1), memory_order_release);
		return true;
	}
	emit(r, &ev);
	if (s->flags & F_TE) {
		if (s->flags & F_CHUNKED)
			chunk_begin(s);
		else
			s->state = S_CLOSE_BODY;
		return true;
	}
	if (!(s->flags & F_CL)) {
		s->state = S_CLOSE_BODY;
		return true;
	}
	s->state = S_BODY;      /* remaining > 0: an empty body ended above */
	return true;
}

/* The empty line ending a header or trailer section. */
static bool section_done(const struct run *r)
{
	if (r->s->flags & F_TRAILER)
		return message_end(r);
	return r->req ? request_head_done(r) : response_head_done(r);
}

/* ---- field values ------------------------------------------------------------------ */

static bool value_begin(const struct run *r)
{
	struct nl_h1_half *s = r->s;
	s->aux = 0;
	switch (s->field) {
	case FLD_CL:
		s->body_size = 0;
		break;
	case FLD_TE:
		s->flags |= F_TE;
		break;
	case FLD_HOST:
		if (s->flags & F_HOST)
			return false;   /* two Host fields */
		s->flags |= F_HOST;
		s->len = 0;
		break;
	}
	return true;
}

/* One complete Content-Length number (of a possible list of equal ones). */
static bool cl_number(struct nl_h1_half *s)
{
	if ((s->flags & F_CL) && s->remaining != s->body_size)
		return false;
	s->flags |= F_CL;
	s->remaining = s->body_size;
	s->body_size = 0;
	return true;
}

/* Content-Length = 1*DIGIT, or a list of equal ones; aux: 0 before a number,
 * 1 in it, 2 in whitespace after it. */
NOINLINE static bool cl_byte(struct nl_h1_half *s, uint8_t b)
{
	unsigned d = (unsigned)(b - '0');
	if (d < 10) {
		if (s->aux == 2 || s->body_size > (UINT64_MAX - d) / 10)
			return false;
		s->body_size = s->body_size * 10 + d;
		s->aux = 1;
	} else if (is_ws(b)) {
		if (s->aux == 1)
			s->aux = 2;
	} else if (b == ',') {
		if (s->aux == 0 || !cl_number(s))
			return false;
		s->aux = 0;
	} else {
		return false;
	}
	return true;
}

/* Transfer-Encoding = #( token *( OWS ";" OWS parameter ) ); what matters is
 * whether the last coding is chunked. aux: 0 before a coding, 1 in its name
 * (sub: bytes of "chunked" matched, 0xff: not chunked), 2 after it, 3 in its
 * parameters. */
static void te_coding_done(struct nl_h1_half *s)
{
	if (s->sub == 7)
		s->flags |= F_CHUNKED;
	else
		s->flags &= (uint16_t)~F_CHUNKED;
	s->aux = 0;
}

NOINLINE static bool te_byte(struct nl_h1_half *s, uint8_t b)
{
	if (s->aux == 3) {
		if (b == ',')
			te_coding_done(s);
		return true;
	}
	if (is_tchar(b)) {
		if (s->aux == 2)
			return false;
		if (s->aux == 0) {
			s->aux = 1;
			s->sub = 0;
		}
		if (s->sub < 7 && lower(b) == (uint8_t)"chunked"[s->sub])
			s->sub++;
		else
			s->sub = 0xff;
	} else if (is_ws(b)) {
		if (s->aux == 1)
			s->aux = 2;
	} else if (b == ',') {
		if (s->aux != 0)
			te_coding_done(s);
	} else if (b == ';') {
		if (s->aux == 0)
			return false;
		s->aux = 3;
	} else {
		return false;
	}
	return true;
}

/* Host = uri-host [ ":" port ], kept up to NL_H1_HOST_MAX bytes; aux: 0
 * before it, 1 in it, 2 in whitespace after it. */
NOINLINE static bool host_byte(const struct run *r, uint8_t b)
{
	struct nl_h1_half *s = r->s;
	if (is_ws(b)) {
		if (s->aux == 1)
			s->aux = 2;
		return true;
	}
	if (b < 0x21 || b == 0x7f || s->aux == 2)
		return false;
	s->aux = 1;
	s->compare &= (uint8_t)~CMP_HOST;
	if (s->len < NL_H1_HOST_MAX)
		r->h->buf[HOST_AT + s->len++] = (char)b;
	return true;
}

static bool value_done(struct nl_h1_half *s)
{
	switch (s->field) {
	case FLD_CL:
		return s->aux != 0 && cl_number(s);
	case FLD_TE:
		if (s->aux != 0)
			te_coding_done(s);
		return true;
	}
	return true;
}

/* Value bytes of an interesting field, up to (without) its '\n'. */
NOINLINE static bool value_bytes(const struct run *r, const uint8_t *p, const uint8_t *q)
{
	struct nl_h1_half *s = r->s;
	for (; p < q; p++) {
		uint8_t b = *p;
		bool ok;
		if (s->flags & F_CR)
			ok = false;
		else if (b == '\r')
			ok = true, s->flags |= F_CR;
		else if (s->field == FLD_CL)
			ok = cl_byte(s, b);
		else if (s->field == FLD_TE)
			ok = te_byte(s, b);
		else
			ok = host_byte(r, b);
		if (!ok)
			return false;
	}
	return true;
}

NOINLINE static const uint8_t *parse_value(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *q = memchr(p, '\n', (size_t)(e - p));
	if (!q)
		q = e;
	if (!value_bytes(r, p, q) || !line_add(s, (size_t)(q - p) + (q < e), FIELD_LINE_MAX))
		return fail(r), NULL;
	if (q == e)
		return e;
	s->flags &= (uint16_t)~F_CR;
	if (!value_done(s))
		return fail(r), NULL;
	s->state = S_FIELD;
	return q + 1;
}

/* A whole value [v, ve) ('\n' at ve): the common form of Content-Length at
 * once, Host with its whitespace trimmed, the rest byte by byte; the same
 * outcome either way. */
static bool value_line(const struct run *r, const uint8_t *v, const uint8_t *ve)
{
	struct nl_h1_half *s = r->s;
	/* The usual form: one SP, the value, CRLF or LF. */
	const uint8_t *a = v + (v < ve && *v == ' ');
	if (s->field == FLD_CL) {
		uint64_t n = 0;
		const uint8_t *q = a;
		/* *ve is '\n', no digit; more than 19 digits may have wrapped: those
		 * go byte by byte. */
		for (unsigned k; (k = (unsigned)(*q - '0')) < 10; q++)
			n = n * 10 + k;
		if (q > a && q - a <= 19 && (q == ve || (q + 1 == ve && *q == '\r'))) {
			s->body_size = n;
			return cl_number(s);
		}
	} else if (s->field == FLD_HOST) {
		/* Any whitespace around it (the usual form goes the quick way). */
		const uint8_t *b = ve;
		if (b > a && b[-1] == '\r')
			b--;
		while (a < b && is_ws(*a))
			a++;
		while (b > a && is_ws(b[-1]))
			b--;
		if (find_ctl(r, a, b) != b)
			return false;
		size_t n = (size_t)(b - a);
		if (n > NL_H1_HOST_MAX)
			n = NL_H1_HOST_MAX;
		memcpy(r->h->buf + HOST_AT, a, n);
		s->compare &= (uint8_t)~CMP_HOST;
		s->len = (uint8_t)n;
		return true;
	}
	if (!value_bytes(r, v, ve))
		return false;
	s->flags &= (uint16_t)~F_CR;
	return value_done(s);
}

/* ---- field lines --------------------------------------------------------------------- */

/* The name of a field line up to ':', byte-wise; a whole line with a field
 * of no interest is consumed here at once. Only lines whose first letter is
 * that of a field looked into come here; the others are only delimited
 * (S_SKIP). */
NOINLINE static const uint8_t *parse_name(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
	const uint8_t *lim = nl ? nl : e;
	const uint8_t *colon = memchr(p, ':', (size_t)(lim - p));
	const uint8_t *ne = colon ? colon : lim;
	size_t n = (size_t)(ne - p);
	if (s->field) {
		if (s->sub + n > field_len[s->field] || !ci_eq(p, field_name[s->field] + s->sub, n))
			s->field = FLD_NONE;
		else
			s->sub = (uint8_t)(s->sub + n);
	}
	if (n)
		s->flags = (uint16_t)((s->flags & ~F_WS) | (ne[-1] <= ' ' ? F_WS : 0));
	if (!colon) {
		if (nl || !line_add(s, n, FIELD_LINE_MAX))
			return fail(r), NULL;   /* a field line without ':' */
		return e;
	}
	if (s->flags & F_WS)
		return fail(r), NULL;   /* whitespace (or a control byte) between name and ':' */
	if (s->field && s->sub != field_len[s->field])
		s->field = FLD_NONE;
	if (s->field) {
		if (!line_add(s, n + 1, FIELD_LINE_MAX) || !value_begin(r))
			return fail(r), NULL;
		s->state = S_VALUE;
		return colon + 1;
	}
	const uint8_t *q = nl ? nl + 1 : e;
	if (!line_add(s, (size_t)(q - p), FIELD_LINE_MAX))
		return fail(r), NULL;
	s->state = nl ? S_FIELD : S_SKIP;
	return q;
}

NOINLINE static const uint8_t *parse_skip(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
	const uint8_t *q = nl ? nl + 1 : e;
	if (!line_add(s, (size_t)(q - p), FIELD_LINE_MAX))
		return fail(r), NULL;
	if (nl)
		s->state = S_FIELD;
	return q;
}

/* The first byte of a field line, or of the empty line, byte-wise. */
NOINLINE static const uint8_t *parse_field(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	uint8_t b = *p;
	if (b == '\r' && !(s->flags & F_CR) && e - p >= 2 && p[1] == '\n')
		return section_done(r) ? p + 2 : NULL;
	if (b == '\n') {
		s->flags &= (uint16_t)~F_CR;
		return section_done(r) ? p + 1 : NULL;
	}
	if (s->flags & F_CR)
		return fail(r), NULL;
	if (b == '\r') {
		s->flags |= F_CR;
		return p + 1;
	}
	if (is_ws(b) || b == ':' || ++s->n_headers > FIELDS_MAX)
		return fail(r), NULL;   /* obs-fold, empty name, too many */
	uint8_t f = FLD_NONE;
	if (!(s->flags & F_TRAILER)) {
		uint8_t l = lower(b);
		if (l == 'c')
			f = FLD_CL;
		else if (l == 't')
			f = FLD_TE;
		else if (l == 'h' && r->req)
			f = FLD_HOST;
	}
	s->field = f;
	s->sub = 0;
	s->line_len = 0;
	s->flags &= (uint16_t)~F_WS;
	/* A name that cannot be one looked into: the line is only delimited. */
	s->state = f ? S_NAME : S_SKIP;
	return p;
}

/* What a field line's first byte says, by section (request header, response
 * header, trailer): L_SPECIAL for a line for the byte-wise path, else the
 * length of a name that matters with that first letter (0: none, the
 * line is only delimited). */
enum { L_SPECIAL = 0x80 };
#define LENS_SPECIAL ['\r'] = L_SPECIAL, ['\n'] = L_SPECIAL, [' '] = L_SPECIAL, ['\t'] = L_SPECIAL, [':'] = L_SPECIAL
#define LENS_CT ['c'] = 14, ['C'] = 14, ['t'] = 17, ['T'] = 17
static const uint8_t name_lens[3][256] = {
	{ LENS_SPECIAL, LENS_CT, ['h'] = 4, ['H'] = 4 },
	{ LENS_SPECIAL, LENS_CT },
	{ LENS_SPECIAL },
};

/* The field named p[0..n) (a name looked into has 4, 14 or 17 bytes), by
 * words: letters are compared with 0x20 set (the mask has it at letter
 * positions only), other bytes exactly. */
static inline uint8_t match_name(const uint8_t *p, size_t n)
{
	const uint64_t letters = 0x2020202020202020ull;
	switch (n) {
	case 14:
		if ((load64(p) | load64("\x20\x20\x20\x20\x20\x20\x20\x00")) == load64("content-") &&
		    (load64(p + 6) | load64("\x20\x00\x20\x20\x20\x20\x20\x20")) == load64("t-length"))
			return FLD_CL;
		break;
	case 17:
		if ((load64(p) | letters) == load64("transfer") && p[8] == '-' &&
		    (load64(p + 9) | letters) == load64("encoding"))
			return FLD_TE;
		break;
	case 4:
		if ((load32(p) | (uint32_t)letters) == load32("host"))
			return FLD_HOST;
		break;
	}
	return FLD_NONE;
}

/* The first '\n' of [p, e) (NULL: none) and the first ':' before it (NULL:
 * none), for a call of 16 bytes or more. */
static inline const uint8_t *find_line(const uint8_t *p, const uint8_t *e, const uint8_t **colon)
{
#ifdef NL_H1_SIMD
	const uint8_t *last = e - 16, *c = NULL;
	for (const uint8_t *q = p;;) {
		const uint8_t *at = q <= last ? q : last;
		unsigned sh = (unsigned)(q - at);
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)at);
		unsigned mn = eq_mask(v, '\n') >> sh;
		if (!c) {
			/* mn ^ (mn - 1): the bits up to the first '\n'; all when none. */
			unsigned mc = (eq_mask(v, ':') >> sh) & (mn ^ (mn - 1));
			if (mc)
				c = q + __builtin_ctz(mc);
		}
		if (mn) {
			*colon = c;
			return q + __builtin_ctz(mn);
		}
		q += 16 - sh;
		if (q >= e)
			return NULL;
	}
#else
	const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
	*colon = nl ? memchr(p, ':', (size_t)(nl - p)) : NULL;
	return nl;
#endif
}

/* A whole field line whose name p[0..colon) may matter, of n bytes: '\n' at nl. */
static bool field_line(const struct run *r, const uint8_t *p, const uint8_t *colon, const uint8_t *nl, unsigned n)
{
	struct nl_h1_half *s = r->s;
	s->field = match_name(p, n);
	return !s->field || (value_begin(r) && value_line(r, colon + 1, nl));
}

#ifdef NL_H1_SIMD
/* The bytes of a, then b, equal to those of c, as 32 bits. */
static inline uint32_t mask32(__m128i a, __m128i b, __m128i c)
{
	return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, c)) | (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(b, c)) << 16;
}

/* The first '\n' at or after q, 16 bytes at a time, for a long line (NULL:
 * none in the call); e - 16 is inside the call. */
static inline const uint8_t *line_end(const uint8_t *q, const uint8_t *e)
{
	const __m128i NL = _mm_set1_epi8('\n');
	for (; q < e; q += 16) {
		unsigned m;
		if (e - q >= 16) {
			m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)q), NL));
		} else {
			unsigned sh = (unsigned)(16 - (e - q));
			m = (unsigned)_mm_movemask_epi8(
				    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(e - 16)), NL)) >> sh;
		}
		if (m)
			return q + (unsigned)__builtin_ctz(m);
	}
	return NULL;
}

/* A whole field line whose name, of n bytes (a length of a name that
 * matters), may matter: ':' at p + n, '\n' at nl. Content-Length and Host in
 * their usual forms at once, anything else by field_line; false: malformed. */
static QUICK bool quick_value(const struct run *r, const uint8_t *p, unsigned n, const uint8_t *nl)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *a = p + n + 1;
	a += *a == ' ';         /* a <= nl */
	if (n == 14) {
		if (match_name(p, 14) != FLD_CL)
			return true;
		/* Digits up to the line end (*nl is '\n', no digit); more than 19
		 * may have wrapped: those go byte by byte. */
		uint64_t v = 0;
		const uint8_t *q = a;
		for (uint64_t d; (d = (uint64_t)*q - '0') < 10; q++)
			v = v * 10 + d;
		if ((size_t)(q - a) - 1 < 19 && q + (*q == '\r') == nl) {
			if ((s->flags & F_CL) && s->remaining != v)
				return false;
			s->flags |= F_CL;
			s->remaining = v;
			s->body_size = 0;
			return true;
		}
	} else if (n == 4) {
		if (match_name(p, 4) != FLD_HOST)
			return true;
		if (s->flags & F_HOST)
			return false;   /* two Host fields */
		if (r->end - a >= 32) {
			__m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)a);
			unsigned m = ctl_mask(v0);
			__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(a + 16));
			if (!m)
				m = ctl_mask(v1) << 16;
			const uint8_t *c = a + low_bit32(m | 1u << 31);
			if (m && c + (*c == '\r') == nl) {
				/* Bytes of no harm past the value. The value is the
				 * one kept before when the 32 bytes are (a field line
				 * after it that changes, the hint is lost, no more). */
				char *to = r->h->buf + HOST_AT;
				__m128i eq = _mm_and_si128(
					_mm_cmpeq_epi8(v0, _mm_loadu_si128((const __m128i *)(void *)to)),
					_mm_cmpeq_epi8(v1, _mm_loadu_si128((const __m128i *)(void *)(to + 16))));
				bool same = (s->compare & CMP_HOST) && _mm_movemask_epi8(eq) == 0xffff;
				s->compare |= CMP_HOST;
				_mm_storeu_si128((__m128i *)(void *)to, v0);
				_mm_storeu_si128((__m128i *)(void *)(to + 16), v1);
				s->flags |= (uint16_t)(F_HOST | (same ? F_HOST_SAME : 0));
				s->len = (uint8_t)(c - a);
				return true;
			}
		} else {
			/* Near the end of the call, as in a short request whose last
			 * field is Host (wrk's, ab's): the call's last 32 bytes,
			 * shifted (a quick path's call has 32 or more). The line's
			 * '\n' is among them, so m is never 0. */
			unsigned sh = (unsigned)(a - (r->end - 32));
			__m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)(r->end - 32));
			__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(r->end - 16));
			uint32_t m = (ctl_mask(v0) | ctl_mask(v1) << 16) >> sh;
			const uint8_t *c = a + low_bit32(m);
			if (c + (*c == '\r') == nl) {
				memcpy(r->h->buf + HOST_AT, a, (size_t)(c - a));
				s->compare &= (uint8_t)~CMP_HOST;
				s->flags |= F_HOST;
				s->len = (uint8_t)(c - a);
				return true;
			}
		}
	}
	return field_line(r, p, p + n, nl, n);
}

#endif

#ifdef NL_H1_SIMD
/* The quick path (h1_quick.h, included below): its SSE2 copy serves the
 * general code too. */
static QUICK const uint8_t *quick_fields_sse2(const struct run *r, const uint8_t *p, const uint8_t *e, unsigned *fields,
					      const uint8_t *lens);
static QUICK const uint8_t *request_quick_sse2(const struct run *r, const uint8_t *p, const uint8_t *e);
static QUICK const uint8_t *response_quick_sse2(const struct run *r, const uint8_t *p, const uint8_t *e);
#endif

/* Field lines: whole ones at once, each found with one scan for '\n' and
 * ':'; a partial line, the empty line or an unusual first byte go the
 * byte-wise way. Too many lines fail after the loop: nothing is reported
 * in it. */
static const uint8_t *parse_fields(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	if (p == e)
		return p;
	if (r->wide && !(s->flags & F_CR)) {
		unsigned fields = s->n_headers;
		const uint8_t *lens = name_lens[s->flags & F_TRAILER ? 2 : !r->req];
		for (;;) {
#ifdef NL_H1_SIMD
			if (r->wide32) {
				p = quick_fields_sse2(r, p, e, &fields, lens);
				if (!p)
					return NULL;
			}
#endif
			/* Any other whole line, one. */
			if (p == e)
				break;
			unsigned want = lens[*p];
			if (want & L_SPECIAL)
				break;
			if (!want) {
				/* A field of no interest: its end, no more. */
				const uint8_t *nl = find_nl(r, p);
				if (!nl)
					break;
				if (nl - p >= FIELD_LINE_MAX)
					return fail(r), NULL;
				fields++;
				p = nl + 1;
				continue;
			}
			const uint8_t *colon, *nl = find_line(p, e, &colon);
			if (!nl)
				break;
			if (nl - p >= FIELD_LINE_MAX || !colon || colon[-1] <= ' ')
				return fail(r), NULL;
			fields++;
			if (want == colon - p && !field_line(r, p, colon, nl, want))
				return fail(r), NULL;
			p = nl + 1;
		}
		if (fields > FIELDS_MAX)
			return fail(r), NULL;
		s->n_headers = (uint16_t)fields;
		if (p == e)
			return p;
		if (p[0] == '\r' && e - p >= 2 && p[1] == '\n')
			return section_done(r) ? p + 2 : NULL;
	}
	return parse_field(r, p, e);
}

/* ---- the quick path --------------------------------------------------------------- */

#ifdef NL_H1_SIMD
/* The request line the byte-wise way, from its first byte: REQ_BEGIN first
 * (the quick way folds it into REQ_LINE). */
NOINLINE static const uint8_t *method_slow(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	r->s->prev = 0;         /* the byte-wise copy overwrites buf from its start */
	emit_simple(r, NL_H1_REQ_BEGIN, r->s->slot);
	return parse_method(r, p, e);
}

#endif

/* ---- bodies ------------------------------------------------------------------ */

/* The chunk size line is complete. */
static void chunk_line_done(struct nl_h1_half *s)
{
	s->flags &= (uint16_t)~(F_CR | F_WS);
	if (s->remaining) {
		s->state = S_CHUNK_DATA;
		return;
	}
	s->flags |= F_TRAILER;  /* last-chunk: the trailer section follows */
	s->n_headers = 0;
	s->state = S_FIELD;
}

NOINLINE static const uint8_t *parse_chunk_size(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *q = p;
	for (; q < e; q++) {
		uint8_t b = *q;
		if (b == '\n' || b == ';')
			break;
		if (s->flags & F_CR)
			return fail(r), NULL;
		unsigned d = hex_digit(b);
		if (d < 16 && !(s->flags & F_WS)) {
			if (s->remaining >> 60)
				return fail(r), NULL;
			s->remaining = s->remaining << 4 | d;
			s->sub = 1;
		} else if (!s->sub) {
			return fail(r), NULL;
		} else if (b == '\r') {
			s->flags |= F_CR;
		} else if (is_ws(b)) {
			s->flags |= F_WS;
		} else {
			return fail(r), NULL;
		}
	}
	if (!line_add(s, (size_t)(q - p) + (q < e), FIELD_LINE_MAX))
		return fail(r), NULL;
	if (q == e)
		return e;
	if (!s->sub || (*q == ';' && (s->flags & F_CR)))
		return fail(r), NULL;
	if (*q == ';')
		s->state = S_CHUNK_EXT;
	else
		chunk_line_done(s);
	return q + 1;
}

/* Chunk extensions are not looked at. */
NOINLINE static const uint8_t *parse_chunk_ext(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	const uint8_t *nl = memchr(p, '\n', (size_t)(e - p));
	const uint8_t *q = nl ? nl + 1 : e;
	if (!line_add(s, (size_t)(q - p), FIELD_LINE_MAX))
		return fail(r), NULL;
	if (nl)
		chunk_line_done(s);
	return q;
}

NOINLINE static const uint8_t *parse_chunk_end(const struct run *r, const uint8_t *p)
{
	struct nl_h1_half *s = r->s;
	uint8_t b = *p;
	if (b == '\n') {
		chunk_begin(s);
		return p + 1;
	}
	if (b != '\r' || (s->flags & F_CR))
		return fail(r), NULL;
	s->flags |= F_CR;
	return p + 1;
}

/* Takes up to remaining bytes as body. */
static const uint8_t *take_body(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	size_t avail = (size_t)(e - p);
	size_t n = s->remaining < avail ? (size_t)s->remaining : avail;
	s->remaining -= n;
	s->body_size += n;
	if (s->flags & F_TAP)
		emit_body(r->h, s, r->req, p, n, r->sink, r->ctx);
	return p + n;
}

/* ---- the loop ------------------------------------------------------------------ */

static const uint8_t *parse_idle(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	uint8_t b = *p;
	if (b == '\n') {
		s->flags &= (uint16_t)~F_CR;
		return p + 1;
	}
	if (s->flags & F_CR)
		return fail(r), NULL;
	if (b == '\r') {
		s->flags |= F_CR;       /* an empty line before the start line */
		return p + 1;
	}
	if (r->req) {
		if ((unsigned)(b - 'A') >= 26u)
			return fail(r), NULL;
#ifdef NL_H1_SIMD
		if (e - p >= 32)
			return request_quick_sse2(r, p, e);
#endif
		if (!request_begin(r))
			return NULL;
		return parse_method(r, p, e);
	}
	if (b != 'H')
		return fail(r), NULL;
#ifdef NL_H1_SIMD
	if (e - p >= 32)
		return response_quick_sse2(r, p, e);
#endif
	message_begin(s);
	if (e - p >= 13) {
		/* "HTTP/1.x 200" and what follows at once; anything unusual byte by byte. */
		int minor = version_word(p);
		unsigned d0 = (unsigned)(p[9] - '0'), d1 = (unsigned)(p[10] - '0'), d2 = (unsigned)(p[11] - '0');
		uint8_t after = p[12];
		if (minor >= 0 && p[8] == ' ' && d0 - 1 < 9 && d1 < 10 && d2 < 10 &&
		    (after == ' ' || after == '\r' || after == '\n')) {
			s->flags |= (uint16_t)(minor * F_MINOR1);
			s->status = (uint16_t)(d0 * 100 + d1 * 10 + d2);
			s->line_len = 12;
			s->state = S_REASON;
			return parse_reason(r, p + 12 + (after == ' '), e);
		}
	}
	s->sub = 1;
	s->state = S_RESP_VERSION;
	return p + 1;
}

NOINLINE static bool parse(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1_half *s = r->s;
	while (p < e) {
		switch ((enum state)s->state) {
		case S_IDLE:
			p = parse_idle(r, p, e);
			break;
		case S_METHOD:
			p = parse_method(r, p, e);
			break;
		case S_TARGET:
			p = parse_target(r, p, e);
			break;
		case S_REQ_VERSION:
			p = parse_req_version(r, p, e);
			break;
		case S_RESP_VERSION:
			p = parse_resp_version(r, p, e);
			break;
		case S_STATUS:
			p = parse_status(r, p, e);
			break;
		case S_REASON:
			p = parse_reason(r, p, e);
			break;
		case S_FIELD:
			p = parse_fields(r, p, e);
			break;
		case S_NAME:
			p = parse_name(r, p, e);
			break;
		case S_SKIP:
			p = parse_skip(r, p, e);
			break;
		case S_VALUE:
			p = parse_value(r, p, e);
			break;
		case S_BODY:
			p = take_body(r, p, e);
			if (!s->remaining && !message_end(r))
				p = NULL;
			break;
		case S_CHUNK_SIZE:
			p = parse_chunk_size(r, p, e);
			break;
		case S_CHUNK_EXT:
			p = parse_chunk_ext(r, p, e);
			break;
		case S_CHUNK_DATA:
			p = take_body(r, p, e);
			if (!s->remaining)
				s->state = S_CHUNK_END;
			break;
		case S_CHUNK_END:
			p = parse_chunk_end(r, p);
			break;
		case S_CLOSE_BODY:
			s->body_size += (uint64_t)(e - p);
			if (s->flags & F_TAP)
				emit_body(r->h, s, r->req, p, (size_t)(e - p), r->sink, r->ctx);
			p = e;
			break;
		}
		if (!p)
			return false;
	}
	return true;
}

/* ---- the API ------------------------------------------------------------------ */

void nl_h1_init(struct nl_h1 *h)
{
	memset(h, 0, sizeof *h);
#ifdef NL_H1_AVX2
	h1_cpu();
	h->avx2 = atomic_load_explicit(&nl_h1_avx2, memory_order_relaxed);
#endif
}

void nl_h1_compare_lines(struct nl_h1 *h) { h->req.compare |= CMP_LINE; }

/* The request's body is tapped from now on, and its ring entry (written
 * before REQ_LINE, published after it) carries the tap to the response. */
void nl_h1_tap(struct nl_h1 *h)
{
	h->req.flags |= F_TAP;
	h->ring_kind[ring_slot(atomic_load_explicit(&h->ring_tail, memory_order_relaxed))] |= K_TAP;
}

/* Bytes through the states (out of line, so that nl_h1_feed's quick cases
 * need no stack frame). */
NOINLINE static bool feed_states(struct nl_h1 *h, struct nl_h1_half *s, const uint8_t *p, size_t n, nl_h1_sink sink,
				 void *ctx, bool req)
{
	struct run r = { h, s, sink, ctx, p + n, n >= 16, n >= 32, req };
	return parse(&r, p, p + n) && !atomic_load_explicit(&h->stopped, memory_order_relaxed);
}

#ifdef NL_H1_SIMD
/* A call at the start of a message that the quick path does not take: fewer
 * than 32 bytes, a CR pending, or the connection stopped. */
NOINLINE static bool feed_start(struct nl_h1 *h, bool req, const void *buf, size_t n, nl_h1_sink sink, void *ctx)
{
	if (atomic_load_explicit(&h->stopped, memory_order_relaxed))
		return false;
	if (!n)
		return true;
	return feed_states(h, req ? &h->req : &h->resp, buf, n, sink, ctx, req);
}

#define Q(name) name##_sse2
#define Q_TARGET
#include "h1_quick.h"
#undef Q
#undef Q_TARGET
#ifdef NL_H1_AVX2
#define Q(name) name##_avx2
#define Q_TARGET __attribute__((target("avx2")))
#define Q_AVX2 1
#include "h1_quick.h"
#undef Q
#undef Q_TARGET
#undef Q_AVX2
#endif
#endif

bool nl_h1_feed(struct nl_h1 *h, enum nl_h1_dir dir, const void *buf, size_t n, nl_h1_sink sink, void *ctx)
{
	bool req = dir == NL_H1_REQUEST;
	struct nl_h1_half *s = req ? &h->req : &h->resp;
#ifdef NL_H1_SIMD
	/* The start of a message: the quick path, which tests the rest (the
	 * usual case, a whole head, with the fewest instructions before it). */
	if (s->state == S_IDLE) {
#ifdef NL_H1_AVX2
		if (h->avx2)
			return req ? feed_request_avx2(h, dir, buf, n, sink, ctx) : feed_response_avx2(h, dir, buf, n, sink, ctx);
#endif
		return req ? feed_request_sse2(h, dir, buf, n, sink, ctx) : feed_response_sse2(h, dir, buf, n, sink, ctx);
	}
#endif
	if (atomic_load_explicit(&h->stopped, memory_order_relaxed))
		return false;
	if (!n)
		return true;
	if ((s->state == S_BODY || s->state == S_CHUNK_DATA) && n < s->remaining) {
		/* Inside a body that goes on past the call: counted at once, as
		 * parse would. */
		s->remaining -= n;
		s->body_size += n;
		if (s->flags & F_TAP)
			emit_body(h, s, req, buf, n, sink, ctx);
		return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
	}
	if (s->state == S_CLOSE_BODY) {
		s->body_size += n;
		if (s->flags & F_TAP)
			emit_body(h, s, req, buf, n, sink, ctx);
		return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
	}
	return feed_states(h, s, buf, n, sink, ctx, req);
}

void nl_h1_close(struct nl_h1 *h, nl_h1_sink sink, void *ctx)
{
	if (atomic_load_explicit(&h->stopped, memory_order_relaxed))
		return;
	struct run r = { h, &h->resp, sink, ctx, NULL, false, false, false };
	if (h->resp.state == S_CLOSE_BODY)
		message_end(&r);
	uint8_t head = atomic_load_explicit(&h->ring_head, memory_order_relaxed);
	uint8_t tail = atomic_load_explicit(&h->ring_tail, memory_order_acquire);
	for (; head != tail; head++)
		emit_simple(&r, NL_H1_ABORTED, ring_slot(head));
	atomic_store_explicit(&h->ring_head, head, memory_order_relaxed);
	atomic_store_explicit(&h->stopped, 1, memory_order_relaxed);
}

bool nl_h1_feed_opaque(struct nl_h1 *h, enum nl_h1_dir dir, size_t n, nl_h1_sink sink, void *ctx)
{
	if (atomic_load_explicit(&h->stopped, memory_order_relaxed))
		return false;
	bool req = dir == NL_H1_REQUEST;
	struct run r = { h, req ? &h->req : &h->resp, sink, ctx, NULL, false, false, req };
	struct nl_h1_half *s = r.s;
	if (!n)
		return true;
	/* Unseen bytes fit only where bytes are counted, not read. */
	if (s->state == S_CLOSE_BODY) {
		s->body_size += n;
		if (s->flags & F_TAP)
			emit_body(h, s, req, NULL, n, sink, ctx);
		return true;
	}
	if ((s->state != S_BODY && s->state != S_CHUNK_DATA) || n > s->remaining) {
		s->flags |= F_HTTP;     /* unseen bytes are no sign of another protocol: ERROR */
		return fail(&r);
	}
	s->remaining -= n;
	s->body_size += n;
	if (s->flags & F_TAP)
		emit_body(h, s, req, NULL, n, sink, ctx);
	if (!s->remaining) {
		if (s->state == S_CHUNK_DATA)
			s->state = S_CHUNK_END;
		else if (!message_end(&r))
			return false;
	}
	return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
}
