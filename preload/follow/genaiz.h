/* SPDX-License-Identifier: Apache-2.0 */
/* A model call's body as it passes, compressed or not: the GenAI body
 * scanner (genai.h) behind an inflater. Private to the follow layer.
 *
 * The HTTP parser does not keep Content-Encoding, so a body's first bytes
 * tell: 1f 8b is gzip, a valid zlib header (RFC 1950, what RFC 9110 calls
 * deflate) is zlib, and a first byte that is neither JSON nor an event
 * stream nor whitespace is tried as raw deflate. Anything else goes to the
 * scanner as it is, which costs one test of a byte more than before.
 *
 * zlib is opened with dlopen at the first compressed body of the process
 * (the shim itself needs only libc), and inflates into memory from a
 * preallocated pool: NL_GENAIZ_STREAMS bodies at once, each with a slab of
 * its own, no malloc. A body that finds the pool empty, that zlib cannot be
 * loaded for, or whose stream is corrupt, is counted as unread: what was
 * read of it up to there stays, nothing is guessed. The inflated bytes go
 * through a small fixed buffer into the scanner; no body is ever kept.
 *
 * A slab belongs to its body until nl_genaiz_release(): the exchange that
 * holds the body releases it when it ends, is dropped or is taken again
 * (a fork child's exchanges left over from its parent included, as the
 * exchange pool itself is). */
#ifndef NL_GENAIZ_H
#define NL_GENAIZ_H

#include <stddef.h>
#include <stdint.h>

#include "genai.h"

#define NL_GENAIZ_STREAMS 32

struct nl_genaiz {
	struct nl_genai_scan s;
	uint8_t mode;           /* private: sniffing, plain, inflating, done */
	uint8_t held;           /* private: a first byte kept until the second comes */
	uint8_t n_held;
	uint8_t slot;           /* private: the pool's stream + 1, 0: none */
};

void nl_genaiz_init(struct nl_genaiz *b);
/* n body bytes, in order: nl_genai_feed's flags, of the inflated bytes for
 * a compressed body. */
unsigned nl_genaiz_feed(struct nl_genaiz *b, const void *buf, size_t n);
/* Body bytes moved unseen: the body is unread. */
void nl_genaiz_gap(struct nl_genaiz *b);
/* The body ended (nl_genai_end); its stream goes back to the pool. */
void nl_genaiz_end(struct nl_genaiz *b);
/* The body was cut short by its connection's end: as nl_genaiz_end, but a
 * compressed event stream stays known as one (its values are not told). */
void nl_genaiz_cut(struct nl_genaiz *b);
/* Its stream back to the pool, if it holds one (any time, any number of times). */
void nl_genaiz_release(struct nl_genaiz *b);

/* Streams of the pool in use now (for tests). */
unsigned nl_genaiz_in_use(void);

#endif
