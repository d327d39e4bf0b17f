/* SPDX-License-Identifier: Apache-2.0 */
/* The newest values of the tree's processes, for the scrape (treestore.h). */
#include "treestore.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exposition.h"
#include "foreign.h"
#include "proctree.h"
#include "registry.h"
#include "segcopies.h"
#include "segment.h"
#include "segread.h"

#ifndef NL_VERSION
#define NL_VERSION "unknown"
#endif


static struct {
	pthread_mutex_t mu;
	uint64_t key;
	uint64_t max_age_ns;
	uint32_t exporter;
	bool procs;                     /* the processes' figures from /proc (proctree.h) */
	struct seg_copies copies;       /* under mu */
} store = { .mu = PTHREAD_MUTEX_INITIALIZER };

void treestore_init(uint64_t key, uint32_t exporter, uint64_t max_age_ns, bool procs)
{
	store.procs = procs;
	store.key = key;
	store.exporter = exporter;
	store.max_age_ns = max_age_ns;
}

void treestore_seen(const uint8_t *data, size_t len, void *arg)
{
	(void)arg;
	struct seg_copy c;
	/* Copied before the lock is taken: the scrape waits for no copy. Out
	 * of memory, the older copy stays. */
	if (seg_copy_make(data, len, store.exporter, &c) != SEG_COPY_MADE)
		return;
	pthread_mutex_lock(&store.mu);
	seg_copies_put(&store.copies, &c);
	pthread_mutex_unlock(&store.mu);
}

size_t treestore_count(void)
{
	pthread_mutex_lock(&store.mu);
	size_t n = store.copies.n;
	pthread_mutex_unlock(&store.mu);
	return n;
}

/* The segments of processes that ended since the tree's export last
 * looked: read and given back as they were, for that export to deliver. A
 * segment the export holds at the moment is passed (the claim does not
 * wait): the export hands its values over itself. */
#define PEEK_MAX 1024

static void peek_dead(void)
{
	struct nl_seg_leftover *l = malloc(PEEK_MAX * sizeof *l);
	if (!l)
		return;
	size_t n = nl_seg_claim(store.key, store.max_age_ns, false, l, PEEK_MAX);
	for (size_t i = 0; i < n; i++) {
		treestore_seen(l[i].data, l[i].len, NULL);
		nl_seg_release(&l[i], false);
	}
	free(l);
}

int treestore_render(struct nl_promtext *t, bool openmetrics)
{
	uint32_t exporters[1] = { store.exporter };
	/* The figures as they are now, within the sampler's budget: a scrape
	 * right after the export's pass shows that pass's. */
	if (store.procs)
		nl_proctree_sample(store.key, exporters, 1, 0);
	nl_seg_read_exported(store.key, exporters, 1, treestore_seen, NULL);
	peek_dead();
	pthread_mutex_lock(&store.mu);
	struct nl_snapshot **snaps = calloc(store.copies.n ? store.copies.n : 1, sizeof *snaps);
	size_t n = 0;
	uint64_t now = nl_realtime_ns();
	int r = -1;
	if (snaps) {
		for (size_t i = 0; i < store.copies.n; i++) {
			struct nl_snapshot *s = nl_snapshot_of_segment(store.copies.kept[i].data, store.copies.kept[i].len, now);
			if (!s)
				continue;
			s->scope_name = "nemo.lens";
			s->scope_version = NL_VERSION;
			snaps[n++] = s;
		}
		/* The snapshots point into the copies: written before they may go. */
		r = nl_exposition_write(t, (const struct nl_snapshot *const *)snaps, n, openmetrics);
	}
	pthread_mutex_unlock(&store.mu);
	for (size_t i = 0; i < n; i++)
		nl_snapshot_free(snaps[i]);
	free(snaps);
	return r;
}
