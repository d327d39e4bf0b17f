/* SPDX-License-Identifier: Apache-2.0 */
/* The plain data a snapshot of the registry is made of: the contract
 * between the registry, which fills it, and the exporter, which encodes it
 * without touching any atomics. Attributes are typed values with string keys.
 */
#ifndef NL_SNAPSHOT_H
#define NL_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum nl_attr_type { NL_ATTR_STR, NL_ATTR_INT, NL_ATTR_BOOL, NL_ATTR_DOUBLE };

struct nl_attr {
	const char *key;
	enum nl_attr_type type;
	union {
		const char *s;
		int64_t i;
		bool b;
		double d;
	} v;
};

#define NL_ATTR_S(k, val) ((struct nl_attr){ .key = (k), .type = NL_ATTR_STR, .v.s = (val) })
#define NL_ATTR_I(k, val) ((struct nl_attr){ .key = (k), .type = NL_ATTR_INT, .v.i = (val) })
#define NL_ATTR_B(k, val) ((struct nl_attr){ .key = (k), .type = NL_ATTR_BOOL, .v.b = (val) })

enum nl_kind {
	NL_COUNTER,     /* monotonic Sum of integers */
	NL_GAUGE,       /* Gauge of doubles (last value) */
	NL_GAUGE_INT,   /* Gauge of integers (last value) */
	NL_HISTOGRAM,   /* explicit-bucket histogram of doubles */
	NL_UPDOWN,      /* non-monotonic Sum of integers, always cumulative */
	/* Monotonic Sum of doubles, cumulative. The registry holds none: only
	 * the process figures read from /proc (procmetrics.h), process.cpu.time
	 * in seconds, are added to snapshots so. */
	NL_COUNTER_F64,
};

#define NL_MAX_BOUNDS 32
#define NL_MAX_ATTRS 8

struct nl_series;   /* the registry's own; a point names the series it was taken from */

struct nl_point {
	const struct nl_attr *attrs;
	size_t n_attrs;
	uint64_t start_ns;
	uint64_t time_ns;
	int64_t ivalue;                 /* NL_COUNTER, NL_GAUGE_INT */
	double dvalue;                  /* NL_GAUGE, NL_COUNTER_F64 */
	/* NL_HISTOGRAM */
	uint64_t count;
	double sum;
	bool has_min_max;
	double min, max;
	uint64_t buckets[NL_MAX_BOUNDS + 1];   /* n_bounds + 1 used */
	struct nl_series *series;       /* for committing delta bases */
	bool overflow;                  /* the otel.metric.overflow=true series */
};

struct nl_metric {
	const char *name;
	const char *unit;
	const char *description;
	enum nl_kind kind;
	bool delta;                     /* aggregation temporality of counters/histograms */
	const double *bounds;
	size_t n_bounds;
	struct nl_point *points;
	size_t n_points;
};

struct nl_snapshot {
	const struct nl_attr *resource;
	size_t n_resource;
	const char *scope_name;
	const char *scope_version;
	struct nl_metric *metrics;
	size_t n_metrics;
	size_t n_points;                /* over all metrics */
};

#endif
