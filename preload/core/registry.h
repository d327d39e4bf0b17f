/* SPDX-License-Identifier: Apache-2.0 */
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

struct nl_series;
struct nl_instrument;

/* Registers an instrument (strings must outlive the registry). Idempotent by name:
 * a second call with the same name returns the first instrument. NULL on OOM. */
struct nl_instrument *nl_instrument_get(const char *name, const char *unit, const char *description,
					enum nl_kind kind, const double *bounds, size_t n_bounds);

/* Finds or creates the series with exactly these attributes (order matters).
 * Past the cardinality limit, returns the instrument's overflow series.
 * May allocate and lock: never call from a hook. */
struct nl_series *nl_series_get(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n);

/* Makes ready room for n series that hooks may create (nl_series_add_static).
 * From the constructor; may allocate. Returns the room reserved. */
size_t nl_registry_reserve_static(size_t n);
/* Creates a series with these attributes without locking or allocating, from
 * the room reserved above: for hooks, which meet attribute sets only as they
 * record. The attributes' keys and strings are not copied and must outlive
 * the registry. Does not look for an existing series: the caller keeps one
 * series per attribute set. Past the cardinality limit or the reserved room,
 * returns the overflow series. */
struct nl_series *nl_series_add_static(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n);

/* The series that stands for every attribute set past the cardinality limit
 * (attribute otel.metric.overflow=true). */
struct nl_series *nl_instrument_overflow(struct nl_instrument *inst);
bool nl_series_is_overflow(const struct nl_series *s);

/* Recording: lock-free, async-signal-safe. */
void nl_counter_add(struct nl_series *s, uint64_t n);
void nl_updown_add(struct nl_series *s, int64_t n);
void nl_gauge_set(struct nl_series *s, double v);
void nl_gauge_set_int(struct nl_series *s, int64_t v);
/* The gauge has no value now: left out of exports until set again. */
void nl_gauge_clear(struct nl_series *s);
/* A gauge's integer value; false when it has none. */
bool nl_gauge_get_int(const struct nl_series *s, int64_t *v);
void nl_hist_record(struct nl_instrument *inst, struct nl_series *s, double v);

/* Index of the bucket that v falls in: bucket i holds (bounds[i-1], bounds[i]],
 * the last bucket (index n) holds values above the last bound. */
size_t nl_hist_bucket(const double *bounds, size_t n_bounds, double v);
/* The same for a histogram instrument's bounds, the way nl_hist_record
 * finds it (from a guess by the value's binade). */
size_t nl_inst_bucket(const struct nl_instrument *inst, double v);

void nl_registry_set_cardinality_limit(size_t limit);
/* Fork child: all values back to zero (counters belong to the new process). */
void nl_registry_reset_values(void);
/* A fork child, single-threaded, before it records anything: the values
 * and the segment become the child's own (nl_seg_atfork_child). Called by
 * the lifecycle in the fork handler when the parent had recorded, else at
 * the child's first record: until then the child touches no page of it. */
void nl_registry_forget_parent(void);
/* A fork child's copy of its parent's arena, at copy (not yet in use),
 * holding [0, limit) of the parent's arena as it was while being copied:
 * the parent went on creating meanwhile, so links in the copy may lead to
 * what the copy does not hold. Each such link is mended to the first node
 * the copy holds whole, found through the parent's arena (still at
 * nl_seg_base). */
void nl_registry_mend_copy(void *copy, uint64_t limit);

/* ---- Snapshots (types in snapshot.h) ----------------------------------- */

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

/* ---- The registry in a segment (segment.h) ---------------------------- */

/* A fingerprint of the record layouts the segment holds: a reader never
 * takes another layout (another build of the shim) for its own. */
uint32_t nl_registry_layout(void);
/* The address space the arena reserves for a cardinality limit. */
size_t nl_registry_capacity(size_t limit);

#endif
