/* SPDX-License-Identifier: Apache-2.0 */
#include "genaiz.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <zlib.h>

#include "lazylib.h"
#include "loadpath.h"

enum { M_SNIFF, M_PLAIN, M_INFLATE, M_DONE };

/* inflate's state (7 KiB with zlib 1.2 and 1.3) and its 32 KiB window,
 * with room for another version's few bytes more. */
#define SLAB (44 * 1024)
/* Inflated bytes handed to the scanner per inflate() call. */
#define OUT 1024

struct stream {
	_Atomic bool used;
	bool gzip;              /* members may follow one another */
	bool ended;             /* the last byte fed ended a stream, its check included */
	size_t top;             /* slab bytes handed out */
	z_stream z;
	unsigned char out[OUT];
	_Alignas(16) unsigned char slab[SLAB];
};

static struct stream pool[NL_GENAIZ_STREAMS];

/* zlib, opened at the first compressed body: the shim needs only libc. */
static struct {
	int (*init2)(z_streamp, int, const char *, int);
	int (*inflate)(z_streamp, int);
	int (*reset)(z_streamp);
} zl;
static struct nl_lazylib zl_lib;

static bool zlib_ready(void)
{
	if (__builtin_expect(nl_lazylib_ready(&zl_lib), 1))
		return true;
	static const char names[] NL_COLD_RODATA = "inflateInit2_\0inflate\0inflateReset";
	/* One thread loads, and no other waits for it: a body another thread
	 * sees meanwhile is unread. Most programs that ask for compressed
	 * bodies have zlib mapped already: this is then a reference more, no
	 * mapping. */
	return nl_lazylib_open(&zl_lib, "libz.so.1", names, &zl, sizeof zl / sizeof(void *), 0);
}

/* zlib's allocator: from the stream's slab, never freed piecemeal (the
 * whole slab goes back with the stream). */
static voidpf slab_alloc(voidpf opaque, uInt items, uInt size)
{
	struct stream *st = opaque;
	size_t n = ((size_t)items * size + 15) & ~(size_t)15;
	if (size && items > SLAB / size)
		return Z_NULL;
	if (n > SLAB - st->top)
		return Z_NULL;  /* inflate fails: the body is unread */
	void *p = st->slab + st->top;
	st->top += n;
	return p;
}

static void slab_free(voidpf opaque, voidpf p)
{
	(void)opaque;
	(void)p;
}

static struct stream *claim(void)
{
	for (unsigned i = 0; i < NL_GENAIZ_STREAMS; i++) {
		bool free = false;
		if (!atomic_load_explicit(&pool[i].used, memory_order_relaxed) &&
		    atomic_compare_exchange_strong_explicit(&pool[i].used, &free, true, memory_order_acquire,
							    memory_order_relaxed))
			return &pool[i];
	}
	return NULL;
}

void nl_genaiz_release(struct nl_genaiz *b)
{
	if (b->slot) {
		atomic_store_explicit(&pool[b->slot - 1].used, false, memory_order_release);
		b->slot = 0;
	}
}

unsigned nl_genaiz_in_use(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < NL_GENAIZ_STREAMS; i++)
		n += atomic_load_explicit(&pool[i].used, memory_order_relaxed);
	return n;
}

void nl_genaiz_init(struct nl_genaiz *b)
{
	nl_genaiz_release(b);
	nl_genai_init(&b->s);
	b->mode = M_SNIFF;
	b->n_held = 0;
}

/* The body cannot be read on. Of a compressed body nothing stays: bytes
 * inflated before zlib saw the damage (at worst at the trailer's check)
 * may be damaged themselves. */
static void stop(struct nl_genaiz *b)
{
	if (b->mode == M_INFLATE)
		nl_genai_init(&b->s);
	nl_genai_gap(&b->s);
	nl_genaiz_release(b);
	b->mode = M_DONE;
}

/* The format of a body whose first two bytes are b0 b1: 16 + 15 (gzip),
 * 15 (zlib), -15 (raw deflate) as inflateInit2 takes them, 0: plain. */
static int sniff(uint8_t b0, uint8_t b1)
{
	if (b0 == 0x1f && b1 == 0x8b)
		return 16 + 15;
	/* RFC 1950: method 8, a window of at most 32 KiB, a valid check, no
	 * preset dictionary (HTTP has no way to name one). */
	if ((b0 & 0x0f) == 8 && (b0 >> 4) <= 7 && ((unsigned)b0 << 8 | b1) % 31 == 0 && !(b1 & 0x20))
		return 15;
	/* What the scanner would read: JSON, an event stream, whitespace. */
	if (b0 == '{' || b0 == '[' || (b0 >= 'a' && b0 <= 'z') || b0 == ':' || b0 == ' ' || b0 == '\t' ||
	    b0 == '\r' || b0 == '\n')
		return 0;
	return -15;
}

static bool start(struct nl_genaiz *b, int wbits)
{
	struct stream *st;
	if (!zlib_ready() || !(st = claim()))
		return false;
	b->slot = (uint8_t)(st - pool + 1);
	st->top = 0;
	st->gzip = wbits > 15;
	st->ended = false;
	memset(&st->z, 0, sizeof st->z);
	st->z.zalloc = slab_alloc;
	st->z.zfree = slab_free;
	st->z.opaque = st;
	return zl.init2(&st->z, wbits, ZLIB_VERSION, (int)sizeof st->z) == Z_OK;
}

static unsigned inflate_feed(struct nl_genaiz *b, const uint8_t *p, size_t n)
{
	struct stream *st = &pool[b->slot - 1];
	z_stream *z = &st->z;
	unsigned flags = 0;
	while (n) {
		/* avail_in is 32 bits wide. */
		uInt take = n > 0x40000000u ? 0x40000000u : (uInt)n;
		z->next_in = (Bytef *)(uintptr_t)p;
		z->avail_in = take;
		st->ended = false;
		do {
			z->next_out = st->out;
			z->avail_out = OUT;
			int rc = zl.inflate(z, Z_NO_FLUSH);
			size_t got = OUT - z->avail_out;
			if (got)
				flags |= nl_genai_feed(&b->s, st->out, got);
			if (rc == Z_STREAM_END) {
				/* Another gzip member may follow; after a zlib or raw
				 * stream, nothing may. */
				if (z->avail_in && (!st->gzip || zl.reset(z) != Z_OK)) {
					stop(b);
					return flags;
				}
				if (!z->avail_in) {
					st->ended = true;
					break;
				}
			} else if (rc != Z_OK && !(rc == Z_BUF_ERROR && !z->avail_in)) {
				stop(b);        /* corrupt, or the slab is full */
				return flags;
			}
		} while (z->avail_in || !z->avail_out);
		p += take;
		n -= take;
	}
	return flags;
}

unsigned nl_genaiz_feed(struct nl_genaiz *b, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	if (__builtin_expect(b->mode == M_PLAIN, 1))
		return nl_genai_feed(&b->s, p, n);
	if (b->mode == M_INFLATE)
		return inflate_feed(b, p, n);
	if (b->mode == M_DONE || !n)
		return 0;
	/* Sniffing: two bytes decide. */
	if (!b->n_held) {
		if (n == 1 && (p[0] == 0x1f || (p[0] & 0x0f) == 8)) {
			b->held = p[0];
			b->n_held = 1;
			return 0;
		}
	}
	uint8_t b0 = b->n_held ? b->held : p[0];
	uint8_t b1 = b->n_held ? p[0] : n > 1 ? p[1] : 0;
	int wbits = sniff(b0, b1);   /* b1 is 0 only when b0 cannot start a zlib stream */
	if (!wbits) {
		b->mode = M_PLAIN;
		unsigned flags = 0;
		if (b->n_held)
			flags = nl_genai_feed(&b->s, &b->held, 1);
		b->n_held = 0;
		return flags | nl_genai_feed(&b->s, p, n);
	}
	if (!start(b, wbits)) {
		stop(b);
		return 0;
	}
	b->mode = M_INFLATE;
	unsigned flags = 0;
	if (b->n_held)
		flags = inflate_feed(b, &b->held, 1);
	b->n_held = 0;
	if (b->mode == M_INFLATE)
		flags |= inflate_feed(b, p, n);
	return flags;
}

void nl_genaiz_gap(struct nl_genaiz *b)
{
	stop(b);
}

void nl_genaiz_cut(struct nl_genaiz *b)
{
	/* Its values are not told, as of any compressed body cut short; that
	 * it was an event stream stays known, as it does of a plain one cut
	 * short: a stream that did not end. */
	if (b->mode == M_INFLATE && !pool[b->slot - 1].ended) {
		bool stream = b->s.r.kind == NL_GENAI_KIND_SSE;
		stop(b);
		if (stream)
			b->s.r.kind = NL_GENAI_KIND_SSE;
		return;
	}
	nl_genaiz_end(b);
}

void nl_genaiz_end(struct nl_genaiz *b)
{
	if (b->mode == M_SNIFF && b->n_held) {
		/* One byte of body: too short for any compressed format. */
		nl_genai_feed(&b->s, &b->held, 1);
		b->n_held = 0;
	}
	/* A compressed body cut short was not checked: nothing of it is told. */
	if (b->mode == M_INFLATE && !pool[b->slot - 1].ended) {
		stop(b);
		return;
	}
	nl_genai_end(&b->s);
	nl_genaiz_release(b);
	b->mode = M_DONE;
}
