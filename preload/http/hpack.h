/* SPDX-License-Identifier: Apache-2.0 */
/* HPACK (RFC 7541) header block decoding as a push decoder: bytes in,
 * header fields out, for the HTTP/2 follower (h2.h).
 *
 * One struct nl_hpack_table is the dynamic table of one direction of a
 * connection; one struct nl_hpack_dec the decoding state of the header
 * block being read in that direction. A block may arrive in any number of
 * pieces (frames, and calls within a frame): the decoder keeps the little
 * state it takes to resume anywhere, down to one byte per call, inside an
 * integer or a Huffman code.
 *
 * Only the fields the metrics need are kept (nl_hpack_field), their values
 * truncated to NL_HPACK_VALUE_MAX bytes; every other field is decoded for
 * its length alone. The dynamic table still accounts each entry's full
 * size (name, value and 32 bytes), as the encoder does, so indexes stay
 * right: it stores an entry's size, which kept field it is, and the kept
 * prefix of its value, in a ring of at most NL_HPACK_CAP bytes (a kept
 * prefix is never longer than its entry's size, so the live prefixes never
 * need more room than the table's size).
 *
 * Bounded: the table's maximum size follows the encoder's size updates up
 * to the limit the decoder's side announced (SETTINGS_HEADER_TABLE_SIZE);
 * a table that would hold more than its cap (NL_HPACK_CAP, or less) gives
 * up (NL_HPACK_OVER_CAP) rather than forget entries the encoder still uses.
 *
 * No libc but <string.h>; no allocation. Not thread-safe: one decoder and
 * its table are fed by one thread at a time (the limit may be set from the
 * other direction's thread: it is atomic).
 */
#ifndef NL_HPACK_H
#define NL_HPACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NL_HPACK_CAP 4096u              /* bytes of table (RFC 7541 size) followed, at most */
#define NL_HPACK_ENTRIES (NL_HPACK_CAP / 32)
#define NL_HPACK_DEFAULT_SIZE 4096      /* SETTINGS_HEADER_TABLE_SIZE's initial value */
#define NL_HPACK_VALUE_MAX 96           /* value bytes kept of a kept field (longer: truncated) */
#define NL_HPACK_STRING_MAX (1u << 24)  /* a longer string is malformed */

/* The fields kept. */
enum nl_hpack_field {
	NL_HF_OTHER,
	NL_HF_METHOD,           /* :method */
	NL_HF_PATH,             /* :path */
	NL_HF_AUTHORITY,        /* :authority, or host */
	NL_HF_STATUS,           /* :status */
	NL_HF_CONTENT_TYPE,     /* content-type */
	NL_HF_GRPC_STATUS,      /* grpc-status */
	NL_HF_CONTENT_LENGTH,   /* content-length */
	NL_HF_N
};

/* Bytes kept of each field's value. */
extern const uint8_t nl_hpack_keep[NL_HF_N];

struct nl_hpack_entry {
	uint16_t size;          /* RFC 7541 4.1: name + value + 32 */
	uint16_t name_len;
	uint16_t off;           /* where its kept value bytes are in the ring */
	uint8_t field;          /* enum nl_hpack_field */
	uint8_t len;            /* value bytes kept */
};

/* Every field is 0 in a new table of cap NL_HPACK_CAP: the three sizes
 * below are kept as their distance from their first value (modulo 2^32), so
 * that a table in fresh, zeroed memory is ready without a write, and its
 * pages stay untouched until it holds an entry. */
struct nl_hpack_table {
	uint32_t size;          /* sum of the entries' sizes */
	uint32_t max_d;         /* maximum size, as the last size update set it: nl_hpack_table_max */
	uint32_t cap_d;         /* NL_HPACK_CAP - most bytes followed */
	_Atomic uint32_t limit_d; /* most the decoder's side allows (SETTINGS_HEADER_TABLE_SIZE), less
				   * NL_HPACK_DEFAULT_SIZE */
	uint16_t first;         /* oldest entry in e[] */
	uint16_t n;             /* entries */
	uint16_t wpos;          /* where the next kept value goes in ring[] */
	struct nl_hpack_entry e[NL_HPACK_ENTRIES];
	char ring[NL_HPACK_CAP];
};

/* One decoded field: the value's kept bytes (good during the call only). */
struct nl_hpack_out {
	uint8_t field;
	bool truncated;
	uint8_t len;
	const char *value;
	uint32_t value_len;     /* decoded length (0: not known, an entry of the table) */
	const char *name;       /* NULL: not known (an entry of the table); else its first name_len bytes, */
	uint32_t name_len;      /* at most 16 of them kept */
};

/* The state of the header block being decoded. */
struct nl_hpack_dec {
	uint8_t state;
	uint8_t rep;            /* the representation being read */
	uint8_t field;          /* the field, once its name is known */
	uint8_t shift;          /* integer: bits of value read past the prefix */
	uint8_t huff;           /* the string is Huffman-coded */
	uint8_t hbits;          /* Huffman: bits pending in hcode */
	uint8_t nlen;           /* the name is known (literal or static): nl_hpack_out.name */
	uint8_t vlen;           /* value bytes kept */
	bool vtrunc;
	uint8_t updates;        /* size updates in a row at the block's start */
	bool started;           /* a field was read in this block */
	bool all;               /* report every field, not only the kept ones (tests) */
	uint32_t hcode;
	uint32_t val;           /* integer being read */
	uint32_t left;          /* string: encoded bytes still to come */
	uint32_t slen;          /* string: decoded bytes so far */
	uint32_t name_len;      /* decoded length of the name */
	char name[16];
	char value[NL_HPACK_VALUE_MAX];
};

enum nl_hpack_result { NL_HPACK_OK, NL_HPACK_BAD, NL_HPACK_OVER_CAP };

typedef void (*nl_hpack_sink)(void *ctx, const struct nl_hpack_out *f);

/* A table of at most cap bytes (cap <= NL_HPACK_CAP), empty, with the
 * default maximum size. (Zeroed memory is such a table of cap NL_HPACK_CAP.) */
void nl_hpack_table_init(struct nl_hpack_table *t, uint32_t cap);
/* Its maximum size, as the last size update set it. */
static inline uint32_t nl_hpack_table_max(const struct nl_hpack_table *t)
{
	return NL_HPACK_DEFAULT_SIZE + t->max_d;
}
/* The decoder's side announced SETTINGS_HEADER_TABLE_SIZE v: size updates
 * up to the largest value announced are allowed (an encoder may use a new
 * limit only once it saw it, and the shim sees the settings first). */
void nl_hpack_table_limit(struct nl_hpack_table *t, uint32_t v);

/* A new header block (all: see struct nl_hpack_dec). */
void nl_hpack_begin(struct nl_hpack_dec *d);
/* n bytes of the block: kept fields go to sink as they complete. */
enum nl_hpack_result nl_hpack_feed(struct nl_hpack_dec *d, struct nl_hpack_table *t, const uint8_t *p, size_t n,
				   nl_hpack_sink sink, void *ctx);
/* The block ended: false when it ended inside a representation. */
bool nl_hpack_end(const struct nl_hpack_dec *d);

/* The static table (RFC 7541 Appendix A), index 1..61, for tests. */
const char *nl_hpack_static_name(unsigned i);
const char *nl_hpack_static_value(unsigned i);

#endif
