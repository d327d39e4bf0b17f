/* The metric registry: instruments, their series, and snapshots of them.
 *
 * Recording is lock-free: a series is found once (or created ahead of time)
 * and then updated with atomics only, so hooks may record from any thread or
 * from a signal handler. Creating a series takes a mutex and allocates; that
 * is done only by the background thread, at configuration time, or on the
 * first use of an attribute set through the public API.
 *
 * The background thread turns the registry into an nl_snapshot, a plain
 * read-only tree that the exporter encodes without touching any atomics.
 */
#ifndef NL_REGISTRY_H
#define NL_REGISTRY_H

#include <stdatomic.h>
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
};

#define NL_MAX_BOUNDS 32
#define NL_MAX_ATTRS 8

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
	_Atomic bool has_value;         /* exported only once something was recorded */
	_Atomic bool retiring;          /* exported once more, then no longer */
	union {
		_Atomic uint64_t count;     /* NL_COUNTER */
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

/* Registers an instrument (strings must outlive the registry). Idempotent by name:
 * a second call with the same name returns the first instrument. NULL on OOM. */
struct nl_instrument *nl_instrument_get(const char *name, const char *unit, const char *description,
					enum nl_kind kind, const double *bounds, size_t n_bounds);

/* Finds or creates the series with exactly these attributes (order matters).
 * Past the cardinality limit, returns the instrument's overflow series.
 * May allocate and lock: never call from a hook. */
struct nl_series *nl_series_get(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n);

/* Recording: lock-free, async-signal-safe. */
void nl_counter_add(struct nl_series *s, uint64_t n);
void nl_gauge_set(struct nl_series *s, double v);
void nl_gauge_set_int(struct nl_series *s, int64_t v);
/* The gauge has no value now: left out of exports until set again. */
void nl_gauge_clear(struct nl_series *s);
void nl_hist_record(struct nl_instrument *inst, struct nl_series *s, double v);

/* Index of the bucket that v falls in: bucket i holds (bounds[i-1], bounds[i]],
 * the last bucket (index n) holds values above the last bound. */
size_t nl_hist_bucket(const double *bounds, size_t n_bounds, double v);

void nl_registry_set_cardinality_limit(size_t limit);
/* Fork child: all values back to zero (counters belong to the new process). */
void nl_registry_reset_values(void);
void nl_registry_atfork_prepare(void);
void nl_registry_atfork_parent(void);
void nl_registry_atfork_child(void);

/* ---- Snapshots ---------------------------------------------------------- */

struct nl_point {
	const struct nl_attr *attrs;
	size_t n_attrs;
	uint64_t start_ns;
	uint64_t time_ns;
	int64_t ivalue;                 /* NL_COUNTER, NL_GAUGE_INT */
	double dvalue;                  /* NL_GAUGE */
	/* NL_HISTOGRAM */
	uint64_t count;
	double sum;
	bool has_min_max;
	double min, max;
	uint64_t buckets[NL_MAX_BOUNDS + 1];   /* n_bounds + 1 used */
	struct nl_series *series;       /* for committing delta bases */
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

/* Takes a snapshot of every series that has a value. start_ns is the start of
 * cumulative series, now_ns the time stamped on each point. NULL on OOM. */
struct nl_snapshot *nl_snapshot_take(bool delta_counters, bool delta_histograms, uint64_t start_ns,
				     uint64_t now_ns);
/* After a successful export: for delta temporality the exported values become
 * the new base, and retiring series that were exported stop being exported. */
void nl_snapshot_commit(const struct nl_snapshot *snap);

/* A series nobody records any more (its meter was released) is exported one
 * last time, so nothing recorded is lost, and then left out. Recording into it
 * again after nl_series_unretire() brings it back with its totals. */
void nl_series_retire(struct nl_series *s);
void nl_series_unretire(struct nl_series *s);
void nl_snapshot_free(struct nl_snapshot *snap);

#endif
