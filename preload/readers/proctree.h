/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run's process pressure (procmetrics.h): every live process whose
 * segment it exports and that wants its figures (NL_SEG_PROC_METRICS) is
 * sampled from /proc/<pid> and the figures kept in that segment's header,
 * so that they go with the process's other values, under its resource, to
 * the collector and to the scrape, and stay with its segment when it ends.
 *
 * The passes stay within a CPU budget: a pass that cost c seconds of CPU is
 * followed by the next one only after c / NL_PROCTREE_BUDGET; a pass asked
 * for before then (a scrape right after an export) leaves the figures of
 * the last one. The scrape's thread and the export's may both ask: one pass
 * runs at a time.
 */
#ifndef NL_PROCTREE_H
#define NL_PROCTREE_H

#include <stddef.h>
#include <stdint.h>

/* The share of one core the passes may take. */
#define NL_PROCTREE_BUDGET 0.01

/* One pass over the live segments with delivery key key exported by one of
 * exporters (nl_seg_each_exported), when the budget allows. pid: only that
 * process, and whatever the budget (0: all). Returns how many processes
 * were sampled. */
size_t nl_proctree_sample(uint64_t key, const uint32_t *exporters, size_t n, int pid);

/* One pass, whatever the budget (the bench times it): how many processes
 * were sampled. */
size_t nl_proctree_pass(uint64_t key, const uint32_t *exporters, size_t n);

#endif
