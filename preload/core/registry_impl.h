/* SPDX-License-Identifier: Apache-2.0 */
/* The registry's layouts: private to registry.c, so that nothing else has
 * to notice when they change.
 *
 * Instruments and series live in the segment's arena (segment.h): in a file
 * another process can read after this one died. Everything another process
 * needs is a value or an offset from the arena's start; the few pointers
 * kept next to them (marked "this process") are for this process alone,
 * valid here and in fork children, which map their copy of the arena at the
 * same address, and ignored by readers. nl_registry_layout() fingerprints
 * these structs, so a reader never takes another layout for its own.
 *
 * Records are as small as their kind allows: every process creates its
 * series at load, and each page of them is a page fault of every exec.
 *
 * Besides registry.c (and its unit tests), only the reader of other
 * processes' registries (preload/readers/foreign.c) includes this: it copies
 * these records out of another process's segment and folds them into this
 * process's.
 */
#ifndef NL_REGISTRY_IMPL_H
#define NL_REGISTRY_IMPL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "registry.h"
#include "segment.h"

#define NL_BUCKET_WINDOW 64     /* binades: 2^64 between the first and last bound guessed */

struct nl_hist {
	_Atomic uint64_t sum_bits;      /* double, updated by CAS */
	_Atomic uint64_t min_bits;
	_Atomic uint64_t max_bits;
	_Atomic uint64_t buckets[NL_MAX_BOUNDS + 1];
	/* Last exported buckets, for delta temporality (export thread only). */
	uint64_t delta_base_buckets[NL_MAX_BOUNDS + 1];
};

struct nl_series {
	uint64_t next;                  /* offset of the next (older) series; immutable once published */
	uint64_t attrs;                 /* offset of struct nl_sattr[n_attrs] (strings follow them) */
	uint16_t n_attrs;
	uint8_t kind;                   /* enum nl_kind: which member of u exists */
	bool overflow;                  /* the otel.metric.overflow=true series */
	_Atomic bool has_value;         /* exported only once something was recorded */
	_Atomic bool retiring;          /* exported once more, then no longer */
	uint16_t reserved;
	/* Last exported cumulative values, for delta temporality (export thread only). */
	uint64_t delta_base_count;
	double delta_base_sum;
	uint64_t delta_base_time_ns;
	/* Only the member of the series' kind is allocated: a counter's record
	 * ends after count (nl_series_size). */
	union {
		_Atomic uint64_t count;     /* NL_COUNTER, NL_UPDOWN (two's complement) */
		_Atomic uint64_t bits;      /* NL_GAUGE (double bits), NL_GAUGE_INT (int64) */
		struct nl_hist hist;        /* NL_HISTOGRAM */
	} u;
};

static inline size_t nl_series_size(enum nl_kind kind)
{
	return kind == NL_HISTOGRAM ? sizeof(struct nl_series) : offsetof(struct nl_series, u) + sizeof(uint64_t);
}

struct nl_instrument {
	uint64_t next;                  /* offset of the next (older) instrument */
	uint64_t name, unit, description;   /* offsets of the strings */
	uint64_t bounds;                /* offset of double[n_bounds] */
	uint32_t kind;                  /* enum nl_kind */
	uint32_t n_bounds;
	_Atomic uint64_t head;          /* offset of the newest series */
	_Atomic uint64_t n_series;
	/* This process: the caller's strings (nl_instrument_get). */
	const char *name_p;
	const char *unit_p;
	const char *description_p;
	const double *bounds_p;
	/* This process: a histogram's first guess of a value's bucket, by the
	 * value's binade (its exponent bits, minus bucket_base): the number of
	 * bounds below the binade's smallest value. Values outside the window
	 * are found by halving. */
	uint16_t bucket_base;
	uint8_t bucket_from[NL_BUCKET_WINDOW];
	/* Last: like every series, only as long as its kind needs. */
	struct nl_series overflow;
};

/* A double's bits, and back: histogram sums and bounds are kept as bits in
 * 64-bit atomics. */
static inline uint64_t nl_dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

static inline double nl_bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

/* A double cell updated by CAS: sign 0 adds v, -1 keeps the smaller, 1 the
 * larger. */
static inline void nl_cas_double(_Atomic uint64_t *cell, double v, int sign)
{
	uint64_t cur = atomic_load_explicit(cell, memory_order_relaxed);
	for (;;) {
		double d = nl_bitsd(cur);
		double next = sign == 0 ? d + v : v;
		if ((sign < 0 && !(v < d)) || (sign > 0 && !(v > d)))
			return;
		if (atomic_compare_exchange_weak_explicit(cell, &cur, nl_dbits(next), memory_order_relaxed,
							  memory_order_relaxed))
			return;
	}
}

/* The attribute of the series that stands for every set past the limit. */
extern const struct nl_attr nl_overflow_attr;

/* This process's instrument of that name, or NULL. */
struct nl_instrument *nl_registry_find_instrument(const char *name);

/* A snapshot point's values from series s of an instrument of this kind
 * and number of bounds; its attributes are the caller's to set. */
void nl_registry_fill_point(enum nl_kind kind, size_t n_bounds, struct nl_series *s, bool delta, uint64_t start_ns,
			    uint64_t now_ns, struct nl_point *p);

#endif
