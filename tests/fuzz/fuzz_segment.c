/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the reader of other processes' segments (registry.c, segment.c):
 * a file left in the private directory is read as a private copy and must
 * never make its reader read outside that copy, whatever it holds. The
 * magic and layout are patched in, so that the fuzzer spends its time past
 * the header check; every string and attribute of the snapshot is touched,
 * so that a string running past the copy is caught. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "foreign.h"
#include "registry.h"
#include "segment.h"
#include "segread.h"
#include "snapshot.h"

/* A string of the snapshot is the copy's, or one of the registry's own
 * (the overflow attribute): either way it ends before the memory does. */
static void touch(const char *s, const uint8_t *lo, const uint8_t *hi)
{
	if (!s)
		return;
	size_t n = strlen(s);
	if ((const uint8_t *)s >= lo && (const uint8_t *)s < hi && (const uint8_t *)s + n >= hi)
		abort();
}

static void touch_attrs(const struct nl_attr *a, size_t n, const uint8_t *lo, const uint8_t *hi)
{
	for (size_t i = 0; i < n; i++) {
		touch(a[i].key, lo, hi);
		if (a[i].type == NL_ATTR_STR)
			touch(a[i].v.s, lo, hi);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nl_log_set_level(NL_LOG_NONE);
	size_t len = size < sizeof(struct nl_seg_header) ? sizeof(struct nl_seg_header) : size;
	/* An exact-size copy (malloc's alignment, as a reader's of a file), so
	 * that ASan catches a read past its end. */
	uint8_t *buf = malloc(len);
	if (!buf)
		return 0;
	memset(buf, 0, len);
	memcpy(buf, data, size);
	struct nl_seg_header *h = (struct nl_seg_header *)buf;
	memcpy(h->magic, NL_SEG_MAGIC, sizeof h->magic);
	h->layout = nl_registry_layout();

	struct nl_snapshot *snap = nl_snapshot_of_segment(buf, len, 1);
	if (snap) {
		const uint8_t *hi = buf + len;
		touch_attrs(snap->resource, snap->n_resource, buf, hi);
		for (size_t m = 0; m < snap->n_metrics; m++) {
			const struct nl_metric *metric = &snap->metrics[m];
			touch(metric->name, buf, hi);
			touch(metric->unit, buf, hi);
			touch(metric->description, buf, hi);
			for (size_t b = 0; b < metric->n_bounds; b++)
				if ((const uint8_t *)&metric->bounds[b] < buf || (const uint8_t *)&metric->bounds[b + 1] > hi)
					abort();
			for (size_t p = 0; p < metric->n_points; p++)
				touch_attrs(metric->points[p].attrs, metric->points[p].n_attrs, buf, hi);
		}
		nl_snapshot_free(snap);
	}
	/* Folding adds into this process's own registry; bounded by its limit. */
	nl_registry_fold_segment(buf, len);
	free(buf);
	return 0;
}
