/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run's memory trees (memtrees.h): one per process it exports
 * that is a server root or the outermost process, sampled with the shim's
 * own sampler (memsampler_impl.h) into that process's series.
 */
#include "memtrees.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "clock.h"
#include "foreign.h"
#include "memsampler_impl.h"
#include "registry.h"
#include "segread.h"

/* One per process of the tree that is a server root or the outermost
 * process (its segment's flags), found at every sample. Its series are
 * those the process registered in its segment, mapped here for writing: a
 * value this process records is in the process's own segment, exported
 * under its resource like everything else it recorded, delivered with it
 * when it ends, and there for whoever exports it next. */
static struct nl_mtree *trees;
static size_t n_trees, cap_trees;

/* The process of T runs (a zombie does not). */
static bool tree_alive(const struct nl_mtree *T, struct nl_proc_stat *st)
{
	return nl_memsampler_stat_of(T->pid, st) == 0 && st->starttime == T->start && st->state != 'Z' &&
	       st->state != 'X';
}

static void tree_free(struct nl_mtree *T)
{
	munmap(T->map, T->map_len);
	free(T->cache);
	free(T->next_cache);
}

static struct nl_series *series_in(const struct nl_mtree *T, const char *name, const char *key, const char *value)
{
	uint64_t off = nl_segment_series_at(T->map, T->map_len, name, key, value);
	return off ? (struct nl_series *)(T->map + off) : NULL;
}

static void track(int fd, const struct nl_seg_header *h, const struct stat *st, void *arg)
{
	(void)arg;
	for (size_t i = 0; i < n_trees; i++)
		if (trees[i].pid == h->pid && trees[i].ino == (uint64_t)st->st_ino) {
			trees[i].seen = true;
			return;
		}
	struct nl_proc_stat ps;
	if (!nl_memsampler_reserve((void **)&trees, &cap_trees, n_trees + 1, sizeof *trees) ||
	    nl_memsampler_stat_of((int)h->pid, &ps) != 0 || ps.starttime != h->proc_start || ps.state == 'Z' ||
	    ps.state == 'X')
		return;
	void *map = mmap(NULL, (size_t)st->st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return;
	struct nl_mtree *T = &trees[n_trees];
	*T = (struct nl_mtree){ .pid = (int)h->pid, .start = ps.starttime, .env_start = ps.env_start,
			     .env_end = ps.env_end, .is_root = (h->flags & NL_SEG_MEM_ROOT) != 0,
			     .is_outermost = (h->flags & NL_SEG_MEM_OUTERMOST) != 0, .peak = { -1, -1 },
			     .host_peak = -1, .map = map, .map_len = (size_t)st->st_size,
			     .ino = (uint64_t)st->st_ino, .seen = true };
	static const char *const types[2] = { "rss", "pss" };
	bool ok = true;
	if (T->is_root) {
		for (int t = 0; t < 2; t++) {
			T->s_usage[t] = series_in(T, "gym.server.memory.usage", "memory.type", types[t]);
			T->s_peak[t] = series_in(T, "gym.server.memory.sampled_peak", "memory.type", types[t]);
		}
		T->s_procs = series_in(T, "gym.server.processes", NULL, NULL);
		ok = T->s_usage[NL_MEM_RSS] && T->s_procs;
	}
	if (T->is_outermost) {
		T->s_host_usage = series_in(T, "gym.host.memory.usage", NULL, NULL);
		T->s_host_avail = series_in(T, "gym.host.memory.available", NULL, NULL);
		T->s_host_total = series_in(T, "gym.host.memory.total", NULL, NULL);
		T->s_host_peak = series_in(T, "gym.host.memory.sampled_peak", NULL, NULL);
		T->s_servers = series_in(T, "gym.servers.active", NULL, NULL);
		ok = ok && T->s_host_usage && T->s_servers;
	}
	if (!ok) {
		/* Not (yet) readable as such: looked at again next time. */
		munmap(map, T->map_len);
		return;
	}
	nl_memsampler_peaks_from_series(T);
	n_trees++;
}

/* Drops the trees whose process ended, or that this process no longer
 * exports (keep: those seen in this round's listing). The outermost
 * process's gym.servers.active says 0 in its last export, as when it
 * samples itself. */
static void drop_trees(bool keep_seen)
{
	size_t k = 0;
	for (size_t i = 0; i < n_trees; i++) {
		struct nl_mtree *T = &trees[i];
		struct nl_proc_stat st;
		bool alive = tree_alive(T, &st);
		if (alive && (!keep_seen || T->seen)) {
			trees[k++] = *T;
			continue;
		}
		if (!alive && T->s_servers)
			nl_gauge_set_int(T->s_servers, 0);
		tree_free(T);
	}
	n_trees = k;
}

void nl_memsampler_ended(void) { drop_trees(false); }

void nl_memsampler_sample_exported(uint64_t key, const uint32_t *exporters, size_t n)
{
	for (size_t i = 0; i < n_trees; i++)
		trees[i].seen = false;
	nl_seg_each_exported(key, exporters, n, NL_SEG_MEM_ROOT | NL_SEG_MEM_OUTERMOST, track, NULL);
	drop_trees(true);
	if (!n_trees || nl_memsampler_scan() != 0)
		return;
	uint64_t now = nl_monotonic_ns();
	for (size_t i = 0; i < n_trees; i++)
		nl_memsampler_sample_tree(&trees[i], now);
}
