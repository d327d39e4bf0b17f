/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run's memory trees (memsampler.h).
 *
 * The launcher (and its keeper) samples for the processes whose segments it
 * exports, so that they need no thread: each process still decides its
 * role in its constructor and registers its series, and says its role in
 * its segment; the launcher samples its tree from /proc exactly as the
 * process would have, and records into the process's own series in that
 * segment (mapped here). The values are then the process's: same names,
 * attributes and resource, exported with its other series, delivered with
 * its segment when it ends, and taken over by whoever exports it next.
 *
 * Before the first sample: nl_memsampler_configure (memsampler.h).
 */
#ifndef NL_MEMTREES_H
#define NL_MEMTREES_H

#include <stddef.h>
#include <stdint.h>

/* One sample of every tree among the live segments with delivery key key
 * exported by one of exporters (nl_seg_each_exported). */
void nl_memsampler_sample_exported(uint64_t key, const uint32_t *exporters, size_t n);
/* Before the segments of ended processes are delivered: the trees of those
 * are let go, the outermost's gym.servers.active set to 0 first. */
void nl_memsampler_ended(void);

#endif
