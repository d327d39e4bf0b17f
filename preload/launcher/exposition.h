/* SPDX-License-Identifier: Apache-2.0 */
/* The exposition of a tree's processes: snapshots in, the text a scrape of
 * nemolens-run's /metrics answers with out, in the Prometheus text format
 * 0.0.4 or in OpenMetrics 1.0.
 *
 * Many processes in one exposition, as a federating endpoint has many
 * targets: every sample carries its process's job (service.namespace/
 * service.name, or service.name) and instance (service.instance.id), so
 * that two processes' series never merge in a Prometheus that scrapes with
 * honor_labels: true; the rest of each process's resource is a target_info
 * sample with the same job and instance. Every sample also carries the
 * instrumentation scope as otel_scope_name and otel_scope_version.
 *
 * A metric family (names and units as promname.h makes them) gets its
 * HELP and TYPE once, and in OpenMetrics its UNIT, followed by the samples
 * of every process that has it. Counters (monotonic sums) are counters
 * ending in _total, gauges and up-down counters (non-monotonic sums) are
 * gauges, histograms are _bucket samples with le up to +Inf, _sum and
 * _count. Two instruments that would make one family of different types
 * are both left out, as the specification says. target_info is a gauge of
 * value 1 in both formats: Prometheus' own promtool, which reads the text
 * format only, does not parse the OpenMetrics info type.
 */
#ifndef NL_EXPOSITION_H
#define NL_EXPOSITION_H

#include <stdbool.h>
#include <stddef.h>

#include "promname.h"
#include "snapshot.h"

#define NL_EXPOSITION_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define NL_EXPOSITION_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"

/* Appends the exposition of the n snapshots (one per process, each with
 * its resource and scope) to t; OpenMetrics ends it with # EOF. Returns 0,
 * or -1 when memory ran out (t->failed). */
int nl_exposition_write(struct nl_promtext *t, const struct nl_snapshot *const *snaps, size_t n, bool openmetrics);

#endif
