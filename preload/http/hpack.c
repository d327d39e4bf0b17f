/* SPDX-License-Identifier: Apache-2.0 */
#include "hpack.h"

#include <string.h>

const uint8_t nl_hpack_keep[NL_HF_N] = {
	[NL_HF_OTHER] = 0,
	[NL_HF_METHOD] = 16,
	[NL_HF_PATH] = NL_HPACK_VALUE_MAX,
	[NL_HF_AUTHORITY] = 48,
	[NL_HF_STATUS] = 3,
	[NL_HF_CONTENT_TYPE] = 32,
	[NL_HF_GRPC_STATUS] = 4,
	[NL_HF_CONTENT_LENGTH] = 20,
};

/* ---- the static table (RFC 7541 Appendix A) --------------------------------- */

struct static_entry {
	const char *name, *value;
	uint8_t name_len, value_len, field;
};

#define S(n, v, f) { n, v, sizeof(n) - 1, sizeof(v) - 1, f }
static const struct static_entry static_table[62] = {
	{ "", "", 0, 0, 0 },
	S(":authority", "", NL_HF_AUTHORITY),
	S(":method", "GET", NL_HF_METHOD),
	S(":method", "POST", NL_HF_METHOD),
	S(":path", "/", NL_HF_PATH),
	S(":path", "/index.html", NL_HF_PATH),
	S(":scheme", "http", NL_HF_OTHER),
	S(":scheme", "https", NL_HF_OTHER),
	S(":status", "200", NL_HF_STATUS),
	S(":status", "204", NL_HF_STATUS),
	S(":status", "206", NL_HF_STATUS),
	S(":status", "304", NL_HF_STATUS),
	S(":status", "400", NL_HF_STATUS),
	S(":status", "404", NL_HF_STATUS),
	S(":status", "500", NL_HF_STATUS),
	S("accept-charset", "", NL_HF_OTHER),
	S("accept-encoding", "gzip, deflate", NL_HF_OTHER),
	S("accept-language", "", NL_HF_OTHER),
	S("accept-ranges", "", NL_HF_OTHER),
	S("accept", "", NL_HF_OTHER),
	S("access-control-allow-origin", "", NL_HF_OTHER),
	S("age", "", NL_HF_OTHER),
	S("allow", "", NL_HF_OTHER),
	S("authorization", "", NL_HF_OTHER),
	S("cache-control", "", NL_HF_OTHER),
	S("content-disposition", "", NL_HF_OTHER),
	S("content-encoding", "", NL_HF_OTHER),
	S("content-language", "", NL_HF_OTHER),
	S("content-length", "", NL_HF_CONTENT_LENGTH),
	S("content-location", "", NL_HF_OTHER),
	S("content-range", "", NL_HF_OTHER),
	S("content-type", "", NL_HF_CONTENT_TYPE),
	S("cookie", "", NL_HF_OTHER),
	S("date", "", NL_HF_OTHER),
	S("etag", "", NL_HF_OTHER),
	S("expect", "", NL_HF_OTHER),
	S("expires", "", NL_HF_OTHER),
	S("from", "", NL_HF_OTHER),
	S("host", "", NL_HF_AUTHORITY),
	S("if-match", "", NL_HF_OTHER),
	S("if-modified-since", "", NL_HF_OTHER),
	S("if-none-match", "", NL_HF_OTHER),
	S("if-range", "", NL_HF_OTHER),
	S("if-unmodified-since", "", NL_HF_OTHER),
	S("last-modified", "", NL_HF_OTHER),
	S("link", "", NL_HF_OTHER),
	S("location", "", NL_HF_OTHER),
	S("max-forwards", "", NL_HF_OTHER),
	S("proxy-authenticate", "", NL_HF_OTHER),
	S("proxy-authorization", "", NL_HF_OTHER),
	S("range", "", NL_HF_OTHER),
	S("referer", "", NL_HF_OTHER),
	S("refresh", "", NL_HF_OTHER),
	S("retry-after", "", NL_HF_OTHER),
	S("server", "", NL_HF_OTHER),
	S("set-cookie", "", NL_HF_OTHER),
	S("strict-transport-security", "", NL_HF_OTHER),
	S("transfer-encoding", "", NL_HF_OTHER),
	S("user-agent", "", NL_HF_OTHER),
	S("vary", "", NL_HF_OTHER),
	S("via", "", NL_HF_OTHER),
	S("www-authenticate", "", NL_HF_OTHER),
};
#undef S

const char *nl_hpack_static_name(unsigned i) { return i >= 1 && i <= 61 ? static_table[i].name : NULL; }
const char *nl_hpack_static_value(unsigned i) { return i >= 1 && i <= 61 ? static_table[i].value : NULL; }

/* The field a literal name is, by its first bytes (names are lower case in
 * HTTP/2; a name with any other spelling is no kept field). */
static uint8_t field_of_name(const char *n, uint32_t len)
{
#define IS(s) (len == sizeof(s) - 1 && memcmp(n, s, sizeof(s) - 1) == 0)
	switch (len) {
	case 4: return IS("host") ? NL_HF_AUTHORITY : NL_HF_OTHER;
	case 5: return IS(":path") ? NL_HF_PATH : NL_HF_OTHER;
	case 7: return IS(":method") ? NL_HF_METHOD : IS(":status") ? NL_HF_STATUS : NL_HF_OTHER;
	case 10: return IS(":authority") ? NL_HF_AUTHORITY : NL_HF_OTHER;
	case 11: return IS("grpc-status") ? NL_HF_GRPC_STATUS : NL_HF_OTHER;
	case 12: return IS("content-type") ? NL_HF_CONTENT_TYPE : NL_HF_OTHER;
	case 14: return IS("content-length") ? NL_HF_CONTENT_LENGTH : NL_HF_OTHER;
	default: return NL_HF_OTHER;
	}
#undef IS
}

/* ---- Huffman (RFC 7541 Appendix B) ---------------------------------------------
 * The code is canonical: codes of one length are consecutive numbers given
 * to their symbols in ascending order, and the first code of a length
 * follows the last of the length before, shifted. So the code is told
 * whole by how many symbols each length has and the symbols in code order;
 * a code of len bits is symbol huff_sym[huff_off[len] + code - huff_first[len]]
 * when code - huff_first[len] < huff_count[len]. EOS (256) is the one
 * 30-bit code past the symbols listed. */
static const uint8_t huff_count[31] = { 0, 0, 0, 0, 0, 10, 26, 32, 6, 0, 5, 3, 2, 6, 2, 3,
					0, 0, 0, 3, 8, 13, 26, 29, 12, 4, 15, 19, 29, 0, 4 };
static const uint32_t huff_first[31] = {
	0, 0, 0, 0, 0, 0, 20, 92, 248, 508, 1016, 2042, 4090, 8184, 16380, 32764,
	65534, 131068, 262136, 524272, 1048550, 2097116, 4194258, 8388568, 16777194, 33554412,
	67108832, 134217694, 268435426, 536870910, 1073741820,
};
static const uint16_t huff_off[31] = { 0,  0,	0,   0,	  0,   0,   10,	 36,  68,  74,	74,  79,  82,  84,  90, 92,
				       95, 95, 95, 95, 98, 106, 119, 145, 174, 186, 190, 205, 224, 253, 253 };
static const uint8_t huff_sym[256] = {
	/* 5 bits */
	'0', '1', '2', 'a', 'c', 'e', 'i', 'o', 's', 't',
	/* 6 bits */
	' ', '%', '-', '.', '/', '3', '4', '5', '6', '7', '8', '9', '=', 'A', '_', 'b', 'd', 'f', 'g', 'h',
	'l', 'm', 'n', 'p', 'r', 'u',
	/* 7 bits */
	':', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L', 'M', 'N', 'O', 'P', 'Q', 'R', 'S', 'T',
	'U', 'V', 'W', 'Y', 'j', 'k', 'q', 'v', 'w', 'x', 'y', 'z',
	/* 8 bits */
	'&', '*', ',', ';', 'X', 'Z',
	/* 10 bits */
	'!', '"', '(', ')', '?',
	/* 11, 12 bits */
	'\'', '+', '|', '#', '>',
	/* 13 bits */
	0, '$', '@', '[', ']', '~',
	/* 14, 15 bits */
	'^', '}', '<', '`', '{',
	/* 19 bits */
	'\\', 195, 208,
	/* 20 bits */
	128, 130, 131, 162, 184, 194, 224, 226,
	/* 21 bits */
	153, 161, 167, 172, 176, 177, 179, 209, 216, 217, 227, 229, 230,
	/* 22 bits */
	129, 132, 133, 134, 136, 146, 154, 156, 160, 163, 164, 169, 170, 173, 178, 181, 185, 186, 187, 189,
	190, 196, 198, 228, 232, 233,
	/* 23 bits */
	1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155, 157, 158, 165, 166, 168, 174,
	175, 180, 182, 183, 188, 191, 197, 231, 239,
	/* 24 bits */
	9, 142, 144, 145, 148, 159, 171, 206, 215, 225, 236, 237,
	/* 25 bits */
	199, 207, 234, 235,
	/* 26 bits */
	192, 193, 200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255,
	/* 27 bits */
	203, 204, 211, 212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250, 251, 252, 253, 254,
	/* 28 bits */
	2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 23, 24, 25, 26, 27, 28, 29, 30, 31,
	127, 220, 249,
	/* 30 bits (then EOS) */
	10, 13, 22,
};

/* ---- the dynamic table ------------------------------------------------------ */

void nl_hpack_table_init(struct nl_hpack_table *t, uint32_t cap)
{
	t->size = 0;
	t->max_d = 0;
	t->cap_d = cap > NL_HPACK_CAP ? 0 : NL_HPACK_CAP - cap;
	atomic_store_explicit(&t->limit_d, 0, memory_order_relaxed);
	t->first = 0;
	t->n = 0;
	t->wpos = 0;
}

void nl_hpack_table_limit(struct nl_hpack_table *t, uint32_t v)
{
	if (v <= NL_HPACK_DEFAULT_SIZE)
		return;         /* the limit only grows, from the default */
	uint32_t d = v - NL_HPACK_DEFAULT_SIZE, cur = atomic_load_explicit(&t->limit_d, memory_order_relaxed);
	while (d > cur && !atomic_compare_exchange_weak_explicit(&t->limit_d, &cur, d, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

static void evict_to(struct nl_hpack_table *t, uint32_t room)
{
	while (t->n && t->size > room) {
		t->size -= t->e[t->first].size;
		t->first = (uint16_t)((t->first + 1) % NL_HPACK_ENTRIES);
		t->n--;
	}
}

/* Entry i (0: the newest). */
static inline const struct nl_hpack_entry *entry(const struct nl_hpack_table *t, unsigned i)
{
	return &t->e[(t->first + t->n - 1 - i) % NL_HPACK_ENTRIES];
}

static void ring_read(const struct nl_hpack_table *t, unsigned off, char *out, unsigned len)
{
	unsigned k = NL_HPACK_CAP - off < len ? NL_HPACK_CAP - off : len;
	memcpy(out, t->ring + off, k);
	memcpy(out + k, t->ring, len - k);
}

static enum nl_hpack_result insert(struct nl_hpack_table *t, uint32_t name_len, uint32_t value_len, uint8_t field,
				   const char *value, unsigned kept)
{
	uint32_t size = name_len + value_len + 32, max = nl_hpack_table_max(t);
	if (size > max) {
		/* RFC 7541 4.4: an entry larger than the table empties it. */
		evict_to(t, 0);
		return NL_HPACK_OK;
	}
	evict_to(t, max - size);
	if (t->size + size > NL_HPACK_CAP - t->cap_d)
		return NL_HPACK_OVER_CAP;
	/* size <= cap: a uint16_t holds it, and an entry's kept bytes never
	 * outgrow its size, so the live ones fit the ring. */
	struct nl_hpack_entry *e = &t->e[(t->first + t->n) % NL_HPACK_ENTRIES];
	e->size = (uint16_t)size;
	e->name_len = (uint16_t)name_len;
	e->field = field;
	e->len = (uint8_t)kept;
	e->off = t->wpos;
	unsigned k = NL_HPACK_CAP - t->wpos < kept ? NL_HPACK_CAP - t->wpos : kept;
	memcpy(t->ring + t->wpos, value, k);
	memcpy(t->ring, value + k, kept - k);
	t->wpos = (uint16_t)((t->wpos + kept) % NL_HPACK_CAP);
	t->n++;
	t->size += size;
	return NL_HPACK_OK;
}

/* ---- decoding ------------------------------------------------------------ */

enum {
	ST_REP,                 /* a representation's first byte */
	ST_INT,                 /* an integer's continuation bytes */
	ST_STR_HEAD,            /* a string's first byte (H, length) */
	ST_STR,                 /* a string's bytes */
};

/* What the integer or string being read is (rep's low bits say the
 * representation, its high bits the part). */
enum {
	R_INDEXED = 1,          /* 1xxxxxxx: index */
	R_INC = 2,              /* 01xxxxxx: literal, incremental indexing */
	R_NOINC = 3,            /* 0000xxxx, 0001xxxx: literal, not indexed */
	R_SIZE = 4,             /* 001xxxxx: dynamic table size update */
	R_KIND = 7,
	P_NAME = 8,             /* the literal name's length or bytes */
	P_VALUE = 16,           /* the value's length or bytes */
};

void nl_hpack_begin(struct nl_hpack_dec *d)
{
	d->state = ST_REP;
	d->started = false;
	d->updates = 0;
}

bool nl_hpack_end(const struct nl_hpack_dec *d) { return d->state == ST_REP; }

static enum nl_hpack_result emit_indexed(struct nl_hpack_dec *d, const struct nl_hpack_table *t, uint32_t i,
					 nl_hpack_sink sink, void *ctx)
{
	struct nl_hpack_out o;
	if (i == 0)
		return NL_HPACK_BAD;
	if (i <= 61) {
		const struct static_entry *s = &static_table[i];
		d->started = true;
		if (s->field == NL_HF_OTHER && !d->all)
			return NL_HPACK_OK;
		o.field = s->field;
		o.truncated = false;
		o.value = s->value;
		o.len = s->value_len;
		o.value_len = s->value_len;
		o.name = s->name;
		o.name_len = s->name_len;
	} else {
		if (i - 62 >= t->n)
			return NL_HPACK_BAD;
		const struct nl_hpack_entry *e = entry(t, i - 62);
		d->started = true;
		if (e->field == NL_HF_OTHER && !d->all)
			return NL_HPACK_OK;     /* (nothing of it is kept, nor read) */
		o.field = e->field;
		/* In place, unless the value wraps round the ring's end: the
		 * sink copies what it keeps before the table changes. */
		if (e->off + e->len <= NL_HPACK_CAP) {
			o.value = t->ring + e->off;
		} else {
			ring_read(t, e->off, d->value, e->len);
			o.value = d->value;
		}
		o.len = e->len;
		o.truncated = e->field == NL_HF_PATH && e->len < e->size - 32 - e->name_len;
		o.value_len = 0;
		o.name = NULL;
		o.name_len = 0;
	}
	sink(ctx, &o);
	return NL_HPACK_OK;
}

/* The literal's name came as an index: its field and length. */
static enum nl_hpack_result name_indexed(struct nl_hpack_dec *d, const struct nl_hpack_table *t, uint32_t i)
{
	if (i <= 61) {
		d->field = static_table[i].field;
		d->name_len = static_table[i].name_len;
		if (d->all)
			memcpy(d->name, static_table[i].name, d->name_len < sizeof d->name ? d->name_len : sizeof d->name);
		return NL_HPACK_OK;
	}
	if (i - 62 >= t->n)
		return NL_HPACK_BAD;
	const struct nl_hpack_entry *e = entry(t, i - 62);
	d->field = e->field;
	d->name_len = e->name_len;
	return NL_HPACK_OK;
}

static enum nl_hpack_result literal_done(struct nl_hpack_dec *d, struct nl_hpack_table *t, nl_hpack_sink sink,
					 void *ctx)
{
	unsigned keep = nl_hpack_keep[d->field];
	unsigned kept = d->vlen < keep ? d->vlen : keep;
	d->started = true;
	if (d->field != NL_HF_OTHER || d->all) {
		if (d->field == NL_HF_OTHER)
			kept = d->vlen;
		bool known = d->nlen;   /* a literal or static name (not one of the table's) */
		struct nl_hpack_out o = { .field = d->field, .value = d->value, .len = (uint8_t)kept,
					  .truncated = d->slen > kept, .value_len = d->slen,
					  .name = known ? d->name : NULL, .name_len = known ? d->name_len : 0 };
		sink(ctx, &o);
	}
	if ((d->rep & R_KIND) == R_INC)
		return insert(t, d->name_len, d->slen, d->field, d->value, kept);
	return NL_HPACK_OK;
}

/* An integer is complete: what it was for. */
static enum nl_hpack_result int_done(struct nl_hpack_dec *d, struct nl_hpack_table *t, nl_hpack_sink sink,
				     void *ctx)
{
	uint32_t v = d->val;
	d->state = ST_REP;
	switch (d->rep) {
	case R_INDEXED:
		return emit_indexed(d, t, v, sink, ctx);
	case R_SIZE:
		if (d->started || ++d->updates > 2 ||
		    v > NL_HPACK_DEFAULT_SIZE + atomic_load_explicit(&t->limit_d, memory_order_relaxed))
			return NL_HPACK_BAD;
		t->max_d = v - NL_HPACK_DEFAULT_SIZE;
		evict_to(t, v);
		return NL_HPACK_OK;
	case R_INC:
	case R_NOINC:
		/* The name's index; 0: a literal name follows. */
		d->nlen = 1;
		if (v == 0) {
			d->rep |= P_NAME;
		} else {
			if (name_indexed(d, t, v) != NL_HPACK_OK)
				return NL_HPACK_BAD;
			d->nlen = v <= 61;
			d->rep |= P_VALUE;
		}
		d->state = ST_STR_HEAD;
		return NL_HPACK_OK;
	default:
		/* a string's length */
		if (v > NL_HPACK_STRING_MAX)
			return NL_HPACK_BAD;
		d->left = v;
		d->slen = 0;
		d->hbits = 0;
		d->hcode = 0;
		if (d->rep & P_VALUE)
			d->vlen = 0;
		d->state = ST_STR;
		return NL_HPACK_OK;
	}
}

/* A string is complete. */
static enum nl_hpack_result str_done(struct nl_hpack_dec *d, struct nl_hpack_table *t, nl_hpack_sink sink,
				     void *ctx)
{
	/* RFC 7541 5.2: padding is fewer than 8 bits, the most significant
	 * bits of EOS (all ones). */
	if (d->huff && (d->hbits > 7 || d->hcode != (1u << d->hbits) - 1))
		return NL_HPACK_BAD;
	d->state = ST_STR_HEAD;
	if (d->rep & P_NAME) {
		d->name_len = d->slen;
		d->field = d->slen <= sizeof d->name ? field_of_name(d->name, d->slen) : NL_HF_OTHER;
		d->rep = (uint8_t)((d->rep & R_KIND) | P_VALUE);
		return NL_HPACK_OK;
	}
	d->state = ST_REP;
	return literal_done(d, t, sink, ctx);
}

static inline void put(struct nl_hpack_dec *d, uint8_t c)
{
	if (d->rep & P_NAME) {
		if (d->slen < sizeof d->name)
			d->name[d->slen] = (char)c;
	} else if (d->vlen < sizeof d->value) {
		d->value[d->vlen++] = (char)c;
	}
	d->slen++;
}

/* Huffman-coded bytes: the codes they complete. hcode holds the bits of
 * the code in progress (hbits of them, at most 29, below 30 bits' EOS). */
static enum nl_hpack_result huff_bytes(struct nl_hpack_dec *d, const uint8_t *p, size_t n)
{
	uint64_t acc = d->hcode;
	unsigned bits = d->hbits;
	for (size_t i = 0; i < n; i++) {
		acc = acc << 8 | p[i];
		bits += 8;
		/* Decode every whole code in acc, from its top. */
		for (;;) {
			if (bits < 5)
				break;
			unsigned len = 5;
			uint32_t code = (uint32_t)(acc >> (bits - 5));
			while (code - huff_first[len] >= huff_count[len]) {
				if (++len > bits || len > 30)
					goto more;
				code = (uint32_t)(acc >> (bits - len));
			}
			unsigned k = huff_off[len] + (code - huff_first[len]);
			if (k >= 256)
				return NL_HPACK_BAD;    /* EOS inside a string */
			put(d, huff_sym[k]);
			bits -= len;
			acc &= ((uint64_t)1 << bits) - 1;
		}
	more:
		if (bits > 30)
			return NL_HPACK_BAD;    /* cannot happen with a complete code table */
	}
	d->hcode = (uint32_t)acc;
	d->hbits = (uint8_t)bits;
	return NL_HPACK_OK;
}

enum nl_hpack_result nl_hpack_feed(struct nl_hpack_dec *d, struct nl_hpack_table *t, const uint8_t *p, size_t n,
				   nl_hpack_sink sink, void *ctx)
{
	size_t i = 0;
	enum nl_hpack_result r = NL_HPACK_OK;
	while (i < n && r == NL_HPACK_OK) {
		uint8_t b;
		unsigned prefix;
		switch (d->state) {
		case ST_REP:
			b = p[i++];
			if (b & 0x80) {
				/* An indexed field, most of a block once the table
				 * is in use: straight to it when the index fits. */
				if (b != 0xff) {
					r = emit_indexed(d, t, b & 0x7fu, sink, ctx);
					break;
				}
				d->rep = R_INDEXED;
				prefix = 7;
			} else if (b & 0x40) {
				d->rep = R_INC;
				prefix = 6;
			} else if (b & 0x20) {
				d->rep = R_SIZE;
				prefix = 5;
			} else {
				d->rep = R_NOINC;
				prefix = 4;
			}
			if ((d->rep & R_KIND) != R_SIZE)
				d->field = NL_HF_OTHER;
		start_int:
			d->val = b & ((1u << prefix) - 1);
			if (d->val == (1u << prefix) - 1) {
				d->shift = 0;
				d->state = ST_INT;
			} else {
				r = int_done(d, t, sink, ctx);
			}
			break;
		case ST_INT:
			b = p[i++];
			if (d->shift > 21)
				return NL_HPACK_BAD;    /* past 2^28: no index or length is that long */
			d->val += (uint32_t)(b & 0x7f) << d->shift;
			d->shift = (uint8_t)(d->shift + 7);
			if (!(b & 0x80))
				r = int_done(d, t, sink, ctx);
			break;
		case ST_STR_HEAD:
			b = p[i++];
			d->huff = b >> 7;
			prefix = 7;
			goto start_int;
		case ST_STR: {
			size_t k = n - i < d->left ? n - i : d->left;
			if (d->huff) {
				r = huff_bytes(d, p + i, k);
			} else if (d->rep & P_NAME) {
				for (size_t j = 0; j < k; j++)
					put(d, p[i + j]);
			} else {
				size_t room = sizeof d->value - d->vlen;
				size_t c = k < room ? k : room;
				memcpy(d->value + d->vlen, p + i, c);
				d->vlen = (uint8_t)(d->vlen + c);
				d->slen += (uint32_t)k;
			}
			i += k;
			d->left -= (uint32_t)k;
			if (r == NL_HPACK_OK && d->left == 0)
				r = str_done(d, t, sink, ctx);
			break;
		}
		}
	}
	/* A zero-length string ends as soon as its length is read. */
	if (r == NL_HPACK_OK && d->state == ST_STR && d->left == 0)
		r = str_done(d, t, sink, ctx);
	return r;
}
