/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run --summary: what a tree of processes recorded, as text tables.
 *
 * Snapshots in, text out, nothing else: the launcher feeds it the snapshots
 * it exported (one per process), and writes the tables when the program has
 * ended. Series of the same instrument and attributes are added up over the
 * processes, as a backend's sum by (attributes) would: counters and
 * histograms (count, sum, buckets) add; a gauge shows the value of its
 * newest point. The resource (which process) is left out: the summary is
 * the tree's.
 *
 * One table per instrument that has points, instruments by name, rows by
 * value (counters, gauges) or count (histograms), largest first, ties by
 * attribute values. A histogram row shows count, mean, p50 and p99; its
 * quantiles are interpolated in the buckets exactly as a Prometheus or
 * VictoriaMetrics histogram_quantile over the same buckets answers.
 */
#ifndef NL_SUMMARY_H
#define NL_SUMMARY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "snapshot.h"

/* Lines are kept to this many columns, attribute values shortened to fit. */
#define NL_SUMMARY_WIDTH 120

struct nl_summary;

struct nl_summary *nl_summary_new(void);
void nl_summary_free(struct nl_summary *s);

/* Adds the points of snap (strings are copied: snap may go right after).
 * Returns 0, or -1 when out of memory (what was added stays). */
int nl_summary_add(struct nl_summary *s, const struct nl_snapshot *snap);

/* How many snapshots were added. */
size_t nl_summary_processes(const struct nl_summary *s);

/* Writes the tables to out. Returns 0, or -1 when out reported an error. */
int nl_summary_write(const struct nl_summary *s, FILE *out);

/* The phi-quantile (0 <= phi <= 1) of an explicit-bucket histogram:
 * buckets[0..n_bounds] are the counts per bucket (not cumulative), the last
 * one above bounds[n_bounds - 1]. Linear interpolation inside the bucket the
 * rank falls in, from 0 for the first bucket; a rank in the last (open)
 * bucket gives the highest bound. NaN when the histogram is empty. */
double nl_summary_quantile(double phi, const double *bounds, size_t n_bounds, const uint64_t *buckets);

#endif
