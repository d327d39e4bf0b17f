/* SPDX-License-Identifier: Apache-2.0 */
/* The insides of a summary (summary.h): its instruments and their series,
 * as summary.c adds snapshots to them and summary_write.c writes them.
 */
#ifndef NL_SUMMARY_IMPL_H
#define NL_SUMMARY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

/* An attribute as the summary keeps it: its value rendered once, as text,
 * which is also what identifies a series (as a label does in a backend). */
struct kv {
	char *key;
	char *val;
};

struct series {
	struct kv *attrs;               /* sorted by key */
	size_t n_attrs;
	int64_t ivalue;                 /* counters, up-down counters, integer gauges */
	double dvalue;                  /* gauges */
	uint64_t time_ns;               /* gauges: of the value shown */
	uint64_t count;                 /* histograms */
	double sum;
	bool buckets_ok;                /* every part had the instrument's bounds */
	uint64_t buckets[NL_MAX_BOUNDS + 1];
};

struct inst {
	char *name;
	char *unit;
	enum nl_kind kind;
	double bounds[NL_MAX_BOUNDS];
	size_t n_bounds;
	char **keys;                    /* attribute keys in the order first seen */
	size_t n_keys;
	struct series *series;
	size_t n, cap;
};

struct nl_summary {
	struct inst *insts;
	size_t n, cap;
	size_t processes;
};

#endif
