/* SPDX-License-Identifier: Apache-2.0 */
/* What the two encoders of a snapshot, OTLP protobuf (otlp.c) and OTLP/JSON
 * (json.c), share: they must read a snapshot alike, so that the collector
 * and the console see the same values. Private to exporter/. */
#ifndef NL_ENCODE_H
#define NL_ENCODE_H

#include <stddef.h>

#include "snapshot.h"

/* The bounds of histogram m that its points can be read with: a point holds
 * NL_MAX_BOUNDS + 1 buckets, and bounds beyond those would read past it. */
static inline size_t nl_usable_bounds(const struct nl_metric *m)
{
	if (!m->bounds)
		return 0;
	return m->n_bounds > NL_MAX_BOUNDS ? NL_MAX_BOUNDS : m->n_bounds;
}

#endif
