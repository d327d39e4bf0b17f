/* The registry's layouts: private to registry.c, so that nothing else has
 * to notice when they change (they are about to live in shared memory). */
#ifndef NL_REGISTRY_IMPL_H
#define NL_REGISTRY_IMPL_H

#include <stdatomic.h>

#include "registry.h"

struct nl_hist {
	_Atomic uint64_t buckets[NL_MAX_BOUNDS + 1];
	_Atomic uint64_t sum_bits;      /* double, updated by CAS */
	_Atomic uint64_t min_bits;
	_Atomic uint64_t max_bits;
};

struct nl_series {
	struct nl_series *next;         /* immutable once published */
	struct nl_attr attrs[NL_MAX_ATTRS];
	size_t n_attrs;
	bool overflow;                  /* the otel.metric.overflow=true series */
	bool static_attrs;              /* attributes borrowed, not owned (nl_series_add_static) */
	_Atomic bool has_value;         /* exported only once something was recorded */
	_Atomic bool retiring;          /* exported once more, then no longer */
	union {
		_Atomic uint64_t count;     /* NL_COUNTER, NL_UPDOWN (two's complement) */
		_Atomic uint64_t bits;      /* NL_GAUGE (double bits), NL_GAUGE_INT (int64) */
		struct nl_hist hist;        /* NL_HISTOGRAM */
	} u;
	/* Last exported cumulative values, for delta temporality (export thread only). */
	uint64_t delta_base_count;
	uint64_t delta_base_buckets[NL_MAX_BOUNDS + 1];
	double delta_base_sum;
	uint64_t delta_base_time_ns;
};

struct nl_instrument {
	struct nl_instrument *next;
	const char *name;
	const char *unit;
	const char *description;
	enum nl_kind kind;
	const double *bounds;           /* NL_HISTOGRAM only */
	size_t n_bounds;
	_Atomic(struct nl_series *) head;
	_Atomic size_t n_series;
	struct nl_series overflow;
};

#endif
