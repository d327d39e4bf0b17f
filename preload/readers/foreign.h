/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of another process's segment (segment.h, registry.h): its
 * series read as a snapshot, found by name, or folded into this process's
 * own. For the delivery of leftovers (adopt.c) and for nemolens-run; never
 * on a hook's path.
 */
#ifndef NL_FOREIGN_H
#define NL_FOREIGN_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* A snapshot of what the segment in data[0,len) (a private copy of the
 * file another process left) holds, under its resource and start time;
 * NULL when the data is not a segment of this layout, or on OOM. Strings
 * point into data, which must outlive the snapshot. nl_snapshot_commit
 * ignores its points. */
struct nl_snapshot *nl_snapshot_of_segment(const uint8_t *data, size_t len, uint64_t now_ns);
/* Adds the counters and histograms of such a segment to this process's own
 * series of the same names and attributes (NEMOLENS_ADOPT=fold); gauges and
 * up-down counters, the state of a process that is gone, are dropped.
 * Returns the number of series folded, -1 when data is not a segment. */
long nl_registry_fold_segment(const uint8_t *data, size_t len);
/* The offset in data[0,len) (a segment of this layout, possibly another
 * process's live one, mapped) of the first series of the instrument name
 * whose string attribute key is value (key NULL: its first series); 0 when
 * there is none. nemolens-run records into it (its memory sampler). */
uint64_t nl_segment_series_at(const uint8_t *data, size_t len, const char *name, const char *key, const char *value);

#endif
