/* SPDX-License-Identifier: Apache-2.0 */
/* The memory sampler's trees, private to memsampler.c and to the trees
 * nemolens-run samples for the processes it exports (preload/readers/
 * memtrees.c): the same walk and the same budget, for a tree other than
 * this process's own.
 */
#ifndef NL_MEMSAMPLER_IMPL_H
#define NL_MEMSAMPLER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memsampler.h"
#include "procfs.h"

enum { NL_MEM_RSS, NL_MEM_PSS };

struct nl_series;
struct nl_pss_entry;

/* One tree to sample: that of a server root, or the outermost process's
 * view of everything below it, or both. In a shim process, the process's
 * own (self); in nemolens-run, one per such process whose segment it
 * exports, its series in that segment (mapped here). */
struct nl_mtree {
	int pid;
	uint64_t start;
	uint64_t env_start, env_end;
	bool is_root, is_outermost;
	struct nl_series *s_usage[2], *s_peak[2], *s_procs;
	struct nl_series *s_host_usage, *s_host_avail, *s_host_total, *s_host_peak, *s_servers;
	int64_t peak[2], host_peak;
	struct nl_pss_entry *cache, *next_cache;
	size_t n_cache, cap_cache, cap_next;
	/* nemolens-run: the owner's segment, mapped for writing */
	uint8_t *map;
	size_t map_len;
	uint64_t ino;
	bool seen;                      /* in this round's listing */
};

/* Makes room for n elements of size sz in *arr (capacity *cap). */
bool nl_memsampler_reserve(void **arr, size_t *cap, size_t n, size_t sz);
/* /proc/<pid>/stat; 0, or -1 (vanished or malformed). */
int nl_memsampler_stat_of(int pid, struct nl_proc_stat *st);
/* Scans /proc for every process (pid, ppid, start time); 0, or -1. */
int nl_memsampler_scan(void);
/* One sample of T, /proc scanned (nl_memsampler_scan). */
void nl_memsampler_sample_tree(struct nl_mtree *T, uint64_t now);
/* T's peaks from its series: an exporter that sampled before this one may
 * have recorded higher ones. */
void nl_memsampler_peaks_from_series(struct nl_mtree *T);

#endif
