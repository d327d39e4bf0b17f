/* SPDX-License-Identifier: Apache-2.0 */
#include "route.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "relax.h"

/* Slots hold a 32-bit hash and an id in one word, so one CAS claims a slot
 * and one store publishes it: both must be lock-free for a lookup to be
 * async-signal-safe. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "route slots need lock-free 64-bit atomics");
_Static_assert(ATOMIC_CHAR_LOCK_FREE == 2, "route entries need lock-free byte atomics");

/* ---- the interned names ---------------------------------------------------- */

/* One route name. Written once, by whoever took its id, before ready and
 * the slot are published; never changed until reset. The name is followed by
 * zeros to a multiple of 8 bytes (the table starts as zero pages), as route buffers
 * are, so names compare a word at a time. */
struct entry {
	char name[NL_ROUTE_NAME_MAX + 1 + 7];
	uint8_t len;
	_Atomic uint8_t ready;
};

/* The hash table is open addressing with linear probing over slots that are
 * 0 (empty) or hash << 32 | state, state being id + 1, SLOT_PENDING (claimed,
 * name being written) or SLOT_DEAD (claimed when the cap was reached by a
 * racing insertion: a hole to probe past). Slots are never emptied, so a
 * probe that meets an empty slot has seen every slot its string could be in. */
#define SLOT_PENDING 0xFFFFFFFFu
#define SLOT_DEAD 0xFFFFFFFEu
/* How many times a lookup rechecks a pending slot of its own hash before it
 * gives up with NL_ROUTE_OVERFLOW: the writer may be the very code a signal
 * handler interrupted, so waiting for it must end. Some microseconds (a
 * pause is 10 to 150 cycles, by CPU). */
#define PENDING_SPINS 1024

static struct entry *entries;
static _Atomic unsigned long long *slots;
static uint32_t slot_mask;
static unsigned cap_ids;                /* ids 0..cap_ids-1 */
static unsigned n_template_ids;         /* ids 0..n_template_ids-1 are templates */
static _Atomic unsigned n_ids;          /* ids taken; may pass cap_ids in a race (see intern) */

/* ---- templates ------------------------------------------------------------- */

enum { SEG_LITERAL, SEG_PARAM };

struct seg {
	uint8_t kind;
	uint8_t off;            /* in text */
	uint8_t len;
};

struct tmpl {
	int id;
	uint8_t nseg;           /* segments before a final '*' */
	bool rest;              /* ends in '*' */
	bool generic;           /* the first segment is not a literal */
	uint8_t key;            /* its bucket, when not generic */
	/* The fixed bytes that must follow the first '/' of a matching path,
	 * up to 8 (up to a {param} or the '/' before a final '*'), as a word and
	 * its mask: one compare rejects most templates of a bucket. */
	uint64_t prefix, prefix_mask;
	size_t len;
	char text[NL_ROUTE_NAME_MAX + 1 + 8];   /* + zeros for hash() */
	struct seg seg[NL_ROUTE_SEGMENTS_MAX];
};

/* Templates are tried in order, but only those that can match the target:
 * bucket b lists the templates whose path begins "/b" (b the first byte of a
 * literal first segment) and those that may begin otherwise (a {param} or
 * '*' first, or an empty first segment), in order. Bucket 0 stands for a path
 * of "/" alone, and the extra bucket ALL_BUCKET lists every template, for a
 * target cut off after its first '/'. So "/run" meets one template, not all
 * of them, and the first byte of a target is all that picks its bucket. */
#define N_BUCKETS 256
#define ALL_BUCKET N_BUCKETS
static struct tmpl *tmpls;
static unsigned n_tmpls;
static uint32_t bucket_start[N_BUCKETS + 2];
static uint16_t *bucket_list;

static enum nl_route_unmatched mode;
static bool configured;

/* Whether the n bytes at a and b are the same: memcmp without the call,
 * for the few bytes of a segment or a route. */
static inline bool same(const char *a, const char *b, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t x, y;
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return false;
	}
	for (; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The same for n bytes that both a and b follow with zeros to a multiple of
 * 8: a word at a time, to the end. */
static inline bool same_padded(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t x, y;
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return false;
	}
	return true;
}

/* ---- hashing and interning ------------------------------------------------- */

/* A word-at-a-time hash; s must have zero bytes from n up to a multiple of 8,
 * so the last word needs no special case. */
static uint32_t hash(const char *s, size_t n)
{
	uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
	}
	h *= 0x94D049BB133111EBull;
	return (uint32_t)(h >> 32);
}

/* The id of route name s (n bytes, zero-padded as hash() needs), inserting it
 * when new. Two threads inserting the same name meet at the same first empty
 * slot (same hash, same probe sequence), so only one CAS wins there and the
 * other waits for that name: a name never gets two ids. */
static int intern(const char *s, size_t n)
{
	uint32_t h = hash(s, n);
	unsigned long long tag = (unsigned long long)h << 32;
	uint32_t i = h & slot_mask;
	for (uint32_t probes = 0; probes <= slot_mask; probes++, i = (i + 1) & slot_mask) {
		unsigned long long v = atomic_load_explicit(&slots[i], memory_order_acquire);
		if (v == 0) {
			/* Full: new names overflow, and are not inserted, so the table
			 * never fills with them. */
			if (atomic_load_explicit(&n_ids, memory_order_relaxed) >= cap_ids)
				return NL_ROUTE_OVERFLOW;
			if (atomic_compare_exchange_strong_explicit(&slots[i], &v, tag | SLOT_PENDING,
								    memory_order_acquire, memory_order_acquire)) {
				unsigned id = atomic_fetch_add_explicit(&n_ids, 1, memory_order_relaxed);
				if (id >= cap_ids) {
					/* Another insertion took the last id since the check. */
					atomic_store_explicit(&slots[i], tag | SLOT_DEAD, memory_order_release);
					return NL_ROUTE_OVERFLOW;
				}
				struct entry *e = &entries[id];
				memcpy(e->name, s, n);
				e->len = (uint8_t)n;
				atomic_store_explicit(&e->ready, 1, memory_order_release);
				atomic_store_explicit(&slots[i], tag | (id + 1), memory_order_release);
				return (int)id;
			}
			/* Lost the slot: v is what is there now. */
		}
		if ((v & 0xFFFFFFFF00000000ull) != tag)
			continue;
		uint32_t state = (uint32_t)v;
		for (int spin = 0; state == SLOT_PENDING; spin++) {
			if (spin == PENDING_SPINS)
				return NL_ROUTE_OVERFLOW;
			nl_cpu_relax();
			state = (uint32_t)atomic_load_explicit(&slots[i], memory_order_acquire);
		}
		if (state == SLOT_DEAD)
			continue;
		const struct entry *e = &entries[state - 1];
		if (e->len == n && same_padded(e->name, s, n))
			return (int)(state - 1);
	}
	return NL_ROUTE_OVERFLOW;
}

/* Per byte, what it adds to a segment's counts, in fields of one word:
 * digits (bits 0-11), lower case (12-23), upper case (24-35), hex digits
 * (36-43) for the bytes a kept segment may have (RFC 3986 unreserved; '-',
 * '.', '_', '~' add nothing), others (44-51), and ends of a segment ('/',
 * '?', '#'; 52-59). One load and one add a byte. A field can carry into the
 * next only in a segment of 256 bytes or more, an identifier from 32 bytes
 * whatever its counts; ends are tested in the sum of four bytes only. */
#define C_DIGIT (1ull | 1ull << 36)
#define C_LOWER (1ull << 12)
#define C_HEXLOWER (C_LOWER | 1ull << 36)
#define C_UPPER (1ull << 24)
#define C_HEXUPPER (C_UPPER | 1ull << 36)
#define C_OTHER (1ull << 44)
#define C_END (1ull << 52)
#define F_DIGIT(c) ((unsigned)(c) & 0xFFF)
#define F_LOWER(c) ((unsigned)((c) >> 12) & 0xFFF)
#define F_UPPER(c) ((unsigned)((c) >> 24) & 0xFFF)
#define F_HEX(c) ((unsigned)((c) >> 36) & 0xFF)
#define M_OTHER (0xFFull << 44)
#define M_END (0xFFull << 52)
#define C_(c) ((c) >= '0' && (c) <= '9' ? C_DIGIT : (c) >= 'a' && (c) <= 'f' ? C_HEXLOWER : \
	       (c) >= 'g' && (c) <= 'z' ? C_LOWER : (c) >= 'A' && (c) <= 'F' ? C_HEXUPPER : \
	       (c) >= 'G' && (c) <= 'Z' ? C_UPPER : (c) == '-' || (c) == '.' || (c) == '_' || (c) == '~' ? 0 : \
	       (c) == '/' || (c) == '?' || (c) == '#' ? C_END : C_OTHER)
#define C4(c) C_(c), C_(c + 1), C_(c + 2), C_(c + 3)
#define C16(c) C4(c), C4(c + 4), C4(c + 8), C4(c + 12)
#define C64(c) C16(c), C16(c + 16), C16(c + 32), C16(c + 48)
static const uint64_t byte_counts[256] = { C64(0), C64(64), C64(128), C64(192) };

/* The end of the segment at pos: the first '/', '?' or '#', or len. Eight
 * bytes a round while they last: '/' and '?' differ in one bit only, so a
 * byte that is either has "?" | 0x10, and a byte is one looked for when a
 * xor makes it zero (the lowest zero byte flagged is always a true one). */
__attribute__((noinline)) static size_t segment_end(const char *p, size_t pos, size_t len)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint64_t ones = 0x0101010101010101ull;
	while (len - pos >= 8) {
		uint64_t w;
		memcpy(&w, p + pos, 8);
		uint64_t a = (w | ones * 0x10) ^ (ones * '?'), b = w ^ (ones * '#');
		uint64_t z = (((a - ones) & ~a) | ((b - ones) & ~b)) & (ones << 7);
		if (z)
			return pos + ((unsigned)__builtin_ctzll(z) >> 3);
		pos += 8;
	}
#endif
	while (pos < len && p[pos] != '/' && p[pos] != '?' && p[pos] != '#')
		pos++;
	return pos;
}

/* The end of the segment at pos (as segment_end), adding its bytes'
 * byte_counts to *counts. Four bytes a round while they last, their sum
 * tested for an end once: this is most of the cost of an unmatched path. A
 * path's segments are short, so which of the four is the end is found from
 * the values already loaded. */
static inline size_t scan_segment(const char *p, size_t pos, size_t len, uint64_t *counts)
{
	const unsigned char *u = (const unsigned char *)p;
	uint64_t sum = 0;
	for (; len - pos >= 4; pos += 4) {
		uint64_t c0 = byte_counts[u[pos]], c1 = byte_counts[u[pos + 1]];
		uint64_t c2 = byte_counts[u[pos + 2]], c3 = byte_counts[u[pos + 3]];
		uint64_t r = c0 + c1 + c2 + c3;
		if (r & M_END) {
			if (!(c0 & M_END)) {
				sum += c0;
				pos++;
				if (!(c1 & M_END)) {
					sum += c1;
					pos++;
					if (!(c2 & M_END)) {
						sum += c2;
						pos++;
					}
				}
			}
			*counts = sum;
			return pos;
		}
		sum += r;
	}
	for (; pos < len; pos++) {
		uint64_t c = byte_counts[u[pos]];
		if (c & M_END)
			break;
		sum += c;
	}
	*counts = sum;
	return pos;
}

/* ---- matching templates ---------------------------------------------------- */

enum match { NO, YES, UNSURE };

/* Matches path p (len bytes, p[0] == '/', ending at its first '?' or '#' or
 * at len) against t. It compares the template's literals in place, so the
 * path is not scanned first. When truncated, the bytes at len were cut off:
 * UNSURE when the answer depends on them. */
static enum match match(const struct tmpl *t, const char *p, size_t len, bool truncated)
{
	size_t pos = 1;         /* a path segment begins here */
	unsigned k = 0;
	for (;;) {
		if (k == t->nseg)
			return t->rest ? YES : NO;
		const struct seg *s = &t->seg[k++];
		size_t q;
		if (s->kind == SEG_LITERAL) {
			size_t n = s->len, avail = len - pos;
			if (!same(p + pos, t->text + s->off, n < avail ? n : avail))
				return NO;
			if (n > avail)
				return truncated ? UNSURE : NO;
			q = pos + n;
		} else {
			q = segment_end(p, pos, len);
			if (q == pos && (q < len || !truncated))
				return NO;
		}
		if (q == len) {
			if (truncated)
				return UNSURE;
			break;
		}
		if (p[q] == '/') {
			pos = q + 1;
			continue;
		}
		if (p[q] == '?' || p[q] == '#')
			break;
		return NO;      /* the segment goes on past the literal */
	}
	/* The path ended with template segment k-1: '*' may match nothing more. */
	return k == t->nseg ? YES : NO;
}

/* ---- learned positions ------------------------------------------------------- */

/* What the static rules keep can still be an identifier ("alice", "k3j9x2").
 * A position of a path is the place of one segment under the route made so
 * far (its parent: "/items" for the second segment of "/items/alice"); the
 * values a position has shown are recorded, and once it has shown
 * segment_limit distinct ones, every value it has not shown yet is "{id}"
 * (the values seen before keep their routes, so no route of a given path
 * ever changes and no route a series has is taken back).
 *
 * Two fixed tables of atomics, filled by whoever meets a new position or
 * value first and never emptied: positions (key: the parent's hash; the
 * count of values recorded) and values (key: the hash of parent and value;
 * bit 0 set for a value that came past the limit, which is "{id}"). When a
 * position finds no room, its values are what the static rules make of
 * them. Parents and values are FNV-1a hashes of the route text: 64 bits, so
 * a collision (two positions or values taken for one) is not a concern at
 * these sizes. */
#define POSITION_PROBES 32
#define VALUE_PROBES 64
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

/* The learning and interning tables, tens of kilobytes, straight from the
 * kernel: zero pages that cost a process nothing until a route is written
 * into them, where calloc would clear them (and fault them in) in every
 * process under the shim, HTTP or not. The length sits in front. */
#define ZEROED_HEAD 64

static void *zeroed(size_t n, size_t size)
{
	if (size && n > (SIZE_MAX - ZEROED_HEAD) / size)
		return NULL;
	size_t len = ZEROED_HEAD + n * size;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, &len, sizeof len);
	return p + ZEROED_HEAD;
}

static void zeroed_free(const volatile void *q)
{
	if (!q)
		return;
	char *p = (char *)(uintptr_t)q - ZEROED_HEAD;
	size_t len;
	memcpy(&len, p, sizeof len);
	munmap(p, len);
}

struct position {
	_Atomic uint64_t key;           /* parent | 1; 0: free */
	_Atomic uint32_t values;        /* distinct values recorded (may pass the limit) */
};

static struct position *positions;
static _Atomic uint64_t *values;
static uint32_t values_mask;
static unsigned segment_limit;          /* 0: no learning */

static inline uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
	return h;
}

static inline uint32_t spread(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xFF51AFD7ED558CCDull;
	return (uint32_t)(h >> 32);
}

/* The position of parent, claimed when new; NULL when there is no room. */
static struct position *position_of(uint64_t parent)
{
	uint64_t key = parent | 1;
	uint32_t i = spread(parent);
	for (unsigned probe = 0; probe < POSITION_PROBES; probe++, i++) {
		struct position *p = &positions[i & (NL_ROUTE_POSITIONS - 1)];
		uint64_t k = atomic_load_explicit(&p->key, memory_order_acquire);
		if (k == 0 && atomic_compare_exchange_strong_explicit(&p->key, &k, key, memory_order_acq_rel,
								      memory_order_acquire))
			return p;
		if (k == key)
			return p;
	}
	return NULL;
}

/* Whether value (the hash of the route with the segment appended to parent)
 * is a parameter at parent's position, recording it when it is new and
 * within the limit. A value that meets its own first recording in another
 * thread, just as that one passes the limit, may keep its text this once. */
static bool learned_parameter(uint64_t parent, uint64_t value)
{
	struct position *pos = position_of(parent);
	if (!pos)
		return false;
	uint64_t key = (value | 2) & ~1ull;
	uint32_t i = spread(value);
	for (unsigned probe = 0; probe < VALUE_PROBES; probe++, i++) {
		_Atomic uint64_t *slot = &values[i & values_mask];
		uint64_t v = atomic_load_explicit(slot, memory_order_acquire);
		if (v == 0) {
			if (atomic_load_explicit(&pos->values, memory_order_relaxed) >= segment_limit)
				return true;
			if (atomic_compare_exchange_strong_explicit(slot, &v, key, memory_order_acq_rel,
								    memory_order_acquire)) {
				if (atomic_fetch_add_explicit(&pos->values, 1, memory_order_relaxed) < segment_limit)
					return false;
				atomic_store_explicit(slot, key | 1, memory_order_release);
				return true;
			}
			/* Lost the slot: v is what is there now. */
		}
		if ((v & ~1ull) == key)
			return v & 1;
	}
	return atomic_load_explicit(&pos->values, memory_order_relaxed) >= segment_limit;
}

static void free_learning(void)
{
	zeroed_free(positions);
	zeroed_free(values);
	positions = NULL;
	values = NULL;
	values_mask = 0;
	segment_limit = 0;
}

int nl_route_set_segment_limit(unsigned limit)
{
	free_learning();
	if (!configured || mode != NL_ROUTE_TEMPLATE || limit == 0)
		return 0;
	if (limit > NL_ROUTE_SEGMENT_LIMIT_MAX)
		limit = NL_ROUTE_SEGMENT_LIMIT_MAX;
	/* Room for every position's values at half load at most. */
	uint32_t n = 64;
	while (n < 2u * NL_ROUTE_POSITIONS * (limit + 1))
		n *= 2;
	positions = zeroed(NL_ROUTE_POSITIONS, sizeof *positions);
	values = zeroed(n, sizeof *values);
	if (!positions || !values) {
		free_learning();
		return -1;
	}
	values_mask = n - 1;
	segment_limit = limit;
	return 0;
}

/* ---- unmatched paths --------------------------------------------------------- */

/* Whether a token of a segment (the bytes between '-', '.', '_' and '~'; t
 * bytes, counts as byte_counts adds them up) is an identifier: a number of
 * two digits or more, hex of 6 digits or more with a decimal digit among
 * them, or letters and digits with 4 digits or more, or 16 bytes or more.
 * A version or a model size ("v1", "v2beta1", "h100", "4o", "8b") is none of
 * them. */
static inline bool token_is_identifier(size_t t, uint64_t counts)
{
	unsigned digit = F_DIGIT(counts);
	if (!digit)
		return false;
	unsigned letters = F_LOWER(counts) + F_UPPER(counts);
	if (!letters)
		return digit >= 2;
	return digit >= 4 || t >= 16 || (t >= 6 && F_HEX(counts) == t);
}

/* The identifier rules of NL_ROUTE_TEMPLATE (route.h), from a segment's
 * bytes s, its length and counts. UUIDs, ULIDs and 32-digit hex fall under
 * the length or the token rules. */
static inline bool is_identifier(const char *s, size_t n, uint64_t counts)
{
	/* Most segments: short words, with no digit and nothing else. */
	if (n < 16 && !(counts & (M_OTHER | 0xFFF)))
		return false;
	if (n >= 32 || (counts & M_OTHER))
		return true;
	unsigned lower = F_LOWER(counts), upper = F_UPPER(counts);
	unsigned letters = lower + upper;
	if (F_DIGIT(counts)) {
		if (!letters)
			return true;    /* a number, a date, an address */
		/* Letters and digits: token by token ('-', '.', '_' and '~' are
		 * the bytes that count nothing). */
		const unsigned char *u = (const unsigned char *)s;
		uint64_t sum = 0;
		size_t start = 0;
		for (size_t i = 0; i <= n; i++) {
			uint64_t c = i < n ? byte_counts[u[i]] : 0;
			if (c) {
				sum += c;
				continue;
			}
			if (token_is_identifier(i - start, sum))
				return true;
			sum = 0;
			start = i + 1;
		}
	}
	return n >= 16 && upper && lower && upper * 3 >= letters && lower * 3 >= letters;
}

/* Ends route b (len bytes) in "/\*", dropping whole segments from its end
 * until that fits. b[0] is '/' when len > 0, so this ends at "/\*" at worst. */
static size_t end_wild(char *b, size_t len)
{
	while (len + 2 > NL_ROUTE_NAME_MAX) {
		do
			len--;
		while (b[len] != '/');
	}
	b[len++] = '/';
	b[len++] = '*';
	return len;
}

/* Appends "/" and segment s, as is, or false when that does not fit. When
 * the source has the bytes (avail from s), whole words are copied: what
 * lands past the segment is overwritten by what follows or cleared by the
 * caller, and b has the room (NL_ROUTE_NAME_MAX + 17 bytes at least). */
static inline bool put_segment(char *b, size_t *len, const char *s, size_t n, size_t avail)
{
	if (*len + 1 + n > NL_ROUTE_NAME_MAX)
		return false;
	char *d = b + *len + 1;
	d[-1] = '/';
	if (n <= 16 && avail >= 16) {
		memcpy(d, s, 8);
		memcpy(d + 8, s + 8, 8);
	} else {
		memcpy(d, s, n);
	}
	*len += 1 + n;
	return true;
}

/* Appends "/" and segment s with bytes outside '!'..'~' as %XX. */
static bool put_encoded(char *b, size_t *len, const char *s, size_t n)
{
	static const char hexdig[] = "0123456789ABCDEF";
	size_t l = *len;
	if (l + 1 > NL_ROUTE_NAME_MAX)
		return false;
	b[l++] = '/';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c > 0x20 && c < 0x7F) {
			if (l + 1 > NL_ROUTE_NAME_MAX)
				return false;
			b[l++] = (char)c;
		} else {
			if (l + 3 > NL_ROUTE_NAME_MAX)
				return false;
			b[l++] = '%';
			b[l++] = hexdig[c >> 4];
			b[l++] = hexdig[c & 15];
		}
	}
	*len = l;
	return true;
}

/* The route of unmatched path p (len bytes, p[0] == '/', ending at its first
 * '?' or '#' or at len, which was cut off when truncated) by the mode, into
 * b (NL_ROUTE_NAME_MAX + 17 bytes at least); returns its length. */
static size_t unmatched(char *b, const char *p, size_t len, bool truncated)
{
	static const char id[16] = "{id}";
	size_t olen = 0, pos = 1;
	if (mode == NL_ROUTE_PATH) {
		for (;;) {
			size_t start = pos;
			pos = segment_end(p, pos, len);
			if (pos == len && truncated)
				return end_wild(b, olen);       /* the cut-off segment */
			size_t at = olen;
			if (!put_encoded(b, &olen, p + start, pos - start))
				return end_wild(b, at);
			if (pos == len || p[pos] != '/')
				return olen;
			pos++;
		}
	}
	/* Template mode learns positions (see learned_parameter): parent is
	 * the hash of the route so far. */
	bool learn = segment_limit && mode == NL_ROUTE_TEMPLATE;
	uint64_t parent = FNV_OFFSET;
	for (;;) {
		size_t start = pos;
		uint64_t counts;
		pos = scan_segment(p, pos, len, &counts);
		if (pos == len && truncated)
			return end_wild(b, olen);
		size_t at = olen, n = pos - start;
		bool param = is_identifier(p + start, n, counts);
		uint64_t child = 0;
		if (learn && !param) {
			child = fnv(fnv(parent, "/", 1), p + start, n);
			param = n && learned_parameter(parent, child);
		}
		bool fits = param ? put_segment(b, &olen, id, 4, sizeof id)
				  : put_segment(b, &olen, p + start, n, len - start);
		if (!fits)
			return end_wild(b, at);
		bool last = pos == len || p[pos] != '/';
		if (mode == NL_ROUTE_WILDCARD)
			return olen == 1 && last ? olen : end_wild(b, olen);
		if (last)
			return olen;
		if (learn)
			parent = param ? fnv(parent, "/{id}", 5) : child;
		pos++;
	}
}

/* Out of line, so that a target a template matches (the usual case) does
 * not pay for this one's stack frame and registers. */
__attribute__((noinline)) static int intern_unmatched(const char *p, size_t len, bool truncated)
{
	_Alignas(8) char out[NL_ROUTE_NAME_MAX + 1 + 16];
	size_t olen = unmatched(out, p, len, truncated);
	memset(out + olen, 0, 8);
	return intern(out, olen);
}

/* ---- lookup ---------------------------------------------------------------- */

/* The length of "scheme://authority" at the start of an absolute-form
 * target, or 0 when it is not one. */
static size_t absolute_prefix(const char *t, size_t len)
{
	size_t i = 0;
	unsigned char c = (unsigned char)t[0];
	if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
		return 0;
	while (i < len) {
		c = (unsigned char)t[i];
		if (!(((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
		      c == '.'))
			break;
		i++;
	}
	if (len - i < 3 || t[i] != ':' || t[i + 1] != '/' || t[i + 2] != '/')
		return 0;
	i += 3;
	while (i < len && t[i] != '/' && t[i] != '?' && t[i] != '#')
		i++;
	return i;
}

int nl_route_lookup(const char *target, size_t len, bool truncated)
{
	if (!configured || !target || len == 0)
		return NL_ROUTE_NONE;
	const char *p = target;
	if (p[0] != '/') {
		if (len == 1 && p[0] == '*') {
			static const char star[8] = "*";
			return mode == NL_ROUTE_UNSET ? NL_ROUTE_NONE : intern(star, 1);
		}
		size_t skip = absolute_prefix(p, len);
		if (!skip)
			return NL_ROUTE_NONE;
		if (skip < len && p[skip] == '/') {
			p += skip;
			len -= skip;
		} else {
			/* No path: "/", unless the capture ended in the authority,
			 * when nothing of the path is known. */
			truncated = truncated && skip == len;
			p = "/";
			len = 1;
		}
	}

	unsigned b = 0;
	if (len > 1 && p[1] != '?' && p[1] != '#')
		b = (unsigned char)p[1];
	else if (len == 1 && truncated)
		b = ALL_BUCKET;
	uint64_t head = 0;
	bool has_head = len >= 9;
	if (has_head)
		memcpy(&head, p + 1, 8);
	for (uint32_t i = bucket_start[b]; i < bucket_start[b + 1]; i++) {
		const struct tmpl *t = &tmpls[bucket_list[i]];
		if (has_head && ((head ^ t->prefix) & t->prefix_mask))
			continue;
		enum match m = match(t, p, len, truncated);
		if (m == YES)
			return t->id;
		if (m == UNSURE)
			break;  /* a later match might not be the first */
	}

	if (mode == NL_ROUTE_UNSET)
		return NL_ROUTE_NONE;
	return intern_unmatched(p, len, truncated);
}

/* ---- names ----------------------------------------------------------------- */

const char *nl_route_name(int id)
{
	if (!configured || id < 0 || (unsigned)id >= cap_ids)
		return NULL;
	const struct entry *e = &entries[id];
	return atomic_load_explicit(&e->ready, memory_order_acquire) ? e->name : NULL;
}

unsigned nl_route_count(void)
{
	unsigned n = atomic_load_explicit(&n_ids, memory_order_relaxed);
	return n < cap_ids ? n : cap_ids;
}

unsigned nl_route_template_count(void) { return n_template_ids; }

int nl_route_parse_mode(const char *s, enum nl_route_unmatched *out)
{
	static const char *const names[] = {
		[NL_ROUTE_TEMPLATE] = "template",
		[NL_ROUTE_PATH] = "path",
		[NL_ROUTE_WILDCARD] = "wildcard",
		[NL_ROUTE_UNSET] = "unset",
	};
	if (!s)
		return -1;
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcasecmp(s, names[i]) == 0) {
			*out = (enum nl_route_unmatched)i;
			return 0;
		}
	return -1;
}

/* ---- configuration ----------------------------------------------------------- */

void nl_route_reset(void)
{
	free_learning();
	zeroed_free(entries);
	zeroed_free(slots);
	free(tmpls);
	free(bucket_list);
	entries = NULL;
	slots = NULL;
	tmpls = NULL;
	bucket_list = NULL;
	slot_mask = 0;
	cap_ids = n_template_ids = n_tmpls = 0;
	atomic_store(&n_ids, 0);
	memset(bucket_start, 0, sizeof bucket_start);
	mode = NL_ROUTE_TEMPLATE;
	configured = false;
}

/* Compiles pattern s (n bytes) into t; NULL, or why it is bad. */
static const char *compile(const char *s, size_t n, struct tmpl *t)
{
	if (n == 0)
		return "empty pattern";
	if (s[0] != '/')
		return "a route template must begin with '/'";
	if (n > NL_ROUTE_NAME_MAX)
		return "longer than 125 characters";
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7F)
			return "a space, control character or non-ASCII byte";
		if (c == '?' || c == '#')
			return "'?' or '#' (templates match the path only)";
	}
	memset(t, 0, sizeof *t);
	memcpy(t->text, s, n);
	t->len = n;
	size_t pos = 1;
	for (;;) {
		size_t e = pos;
		while (e < n && s[e] != '/')
			e++;
		const char *seg = s + pos;
		size_t len = e - pos;
		if (memchr(seg, '*', len)) {
			if (len == 1 && e == n) {
				t->rest = true;
				break;
			}
			return "'*' other than as the whole last segment";
		}
		uint8_t kind = SEG_LITERAL;
		if (memchr(seg, '{', len) || memchr(seg, '}', len)) {
			if (len < 3 || seg[0] != '{' || seg[len - 1] != '}' || memchr(seg + 1, '{', len - 2) ||
			    memchr(seg + 1, '}', len - 2))
				return "a brace that is not a whole {name} segment";
			kind = SEG_PARAM;
		}
		if (t->nseg == NL_ROUTE_SEGMENTS_MAX)
			return "more than 32 segments";
		t->seg[t->nseg++] = (struct seg){ kind, (uint8_t)pos, (uint8_t)len };
		if (e == n)
			break;
		pos = e + 1;
	}
	size_t fixed = 0;
	while (fixed < 8 && 1 + fixed < n && t->text[1 + fixed] != '{' && t->text[1 + fixed] != '*')
		fixed++;
	if (t->rest && 1 + fixed == n - 1 && fixed > 0)
		fixed--;        /* "/static/\*" matches "/static" */
	unsigned char mask[8] = { 0 };
	memset(mask, 0xFF, fixed);
	memcpy(&t->prefix, t->text + 1, 8);
	memcpy(&t->prefix_mask, mask, 8);
	t->prefix &= t->prefix_mask;
	/* Bucket: the byte after the first '/'; 0 for "/" alone. */
	if (t->nseg == 0 || t->seg[0].kind == SEG_PARAM)
		t->generic = true;
	else if (t->seg[0].len)
		t->key = (uint8_t)t->text[1];
	else if (t->nseg == 1 && !t->rest)
		t->key = 0;
	else
		t->generic = true;
	return NULL;
}

/* Compiles each comma-separated pattern of list into tmpls[n_tmpls...];
 * returns the number of bad ones. */
static int add_patterns(const char *list, unsigned max, void (*warn)(const char *, const char *))
{
	int bad = 0;
	unsigned added = 0;
	for (const char *s = list; s && *s;) {
		const char *end = strchr(s, ',');
		if (!end)
			end = s + strlen(s);
		const char *a = s, *z = end;
		while (a < z && (*a == ' ' || *a == '\t'))
			a++;
		while (z > a && (z[-1] == ' ' || z[-1] == '\t'))
			z--;
		const char *why = added == max ? "more than 256 templates" : compile(a, (size_t)(z - a), &tmpls[n_tmpls]);
		if (why) {
			bad++;
			if (warn) {
				char *copy = strndup(a, (size_t)(z - a));
				warn(copy ? copy : "", why);
				free(copy);
			}
		} else {
			n_tmpls++;
			added++;
		}
		if (!*end)
			break;
		s = end + 1;
		if (!*s) {
			/* "a," ends in an empty pattern too. */
			bad++;
			if (warn)
				warn("", "empty pattern");
		}
	}
	return bad;
}

int nl_route_configure(const char *patterns, enum nl_route_unmatched unmatched_mode, unsigned cap,
		       void (*warn)(const char *pattern, const char *why))
{
	nl_route_reset();
	unsigned n_builtins = 1;
	for (const char *c = NL_ROUTE_BUILTINS; *c; c++)
		n_builtins += *c == ',';
	/* Room for the patterns there are, not for the most there may be: every
	 * process pays for this table at load. Each ',' ends one at most. */
	unsigned n_given = 1;
	for (const char *c = patterns; c && *c && n_given < NL_ROUTE_TEMPLATES_MAX; c++)
		n_given += *c == ',';
	tmpls = calloc(n_given + n_builtins, sizeof *tmpls);
	if (!tmpls)
		return -1;
	int bad = add_patterns(patterns, NL_ROUTE_TEMPLATES_MAX, warn);
	add_patterns(NL_ROUTE_BUILTINS, n_builtins, NULL);

	/* Templates are interned like any route, so an unmatched path whose
	 * route is a template's text gets the template's id. */
	if (cap > NL_ROUTE_CAP_MAX)
		cap = NL_ROUTE_CAP_MAX;
	unsigned room = cap > n_tmpls ? cap : n_tmpls;
	uint32_t n_slots = 64;
	while (n_slots < 2 * room + 64)
		n_slots *= 2;
	/* Fresh zero pages (zeroed()): a process pays in
	 * resident memory only for the routes it has. */
	entries = zeroed(room, sizeof *entries);
	slots = zeroed(n_slots, sizeof *slots);
	bucket_list = calloc((size_t)(N_BUCKETS + 1) * n_tmpls + 1, sizeof *bucket_list);
	if (!entries || !slots || !bucket_list) {
		nl_route_reset();
		return -1;
	}
	slot_mask = n_slots - 1;
	cap_ids = room;

	/* A pattern whose text an earlier one had (a configured template that
	 * restates a built-in) matches nothing the earlier one does not. */
	unsigned kept = 0;
	for (unsigned i = 0; i < n_tmpls; i++) {
		unsigned before = atomic_load(&n_ids);
		int id = intern(tmpls[i].text, tmpls[i].len);
		if ((unsigned)id < before)
			continue;
		tmpls[i].id = id;
		if (kept != i)
			tmpls[kept] = tmpls[i];
		kept++;
	}
	n_tmpls = kept;
	n_template_ids = atomic_load(&n_ids);
	cap_ids = cap > n_template_ids ? cap : n_template_ids;

	uint32_t k = 0;
	for (unsigned b = 0; b <= ALL_BUCKET; b++) {
		bucket_start[b] = k;
		for (unsigned i = 0; i < n_tmpls; i++)
			if (b == ALL_BUCKET || tmpls[i].generic || tmpls[i].key == b)
				bucket_list[k++] = (uint16_t)i;
	}
	bucket_start[ALL_BUCKET + 1] = k;

	mode = (unsigned)unmatched_mode <= NL_ROUTE_UNSET ? unmatched_mode : NL_ROUTE_TEMPLATE;
	configured = true;
	if (nl_route_set_segment_limit(NL_ROUTE_SEGMENT_LIMIT_DEFAULT) < 0) {
		nl_route_reset();
		return -1;
	}
	return bad;
}
