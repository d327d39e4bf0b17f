/* SPDX-License-Identifier: Apache-2.0 */
/* What the scrape of nemolens-run's /metrics shows (scrape.h): the newest
 * values of every process of the tree, each kept as a copy of its segment.
 *
 * Two threads fill it. The scrape's reads the live segments of the tree at
 * every scrape, as they stand; the tree's export (tree.c) hands it every
 * segment it reads, the dead ones' last values among them, before it
 * removes those. A process that ended therefore stays with its last
 * cumulative values for as long as the launcher runs. Only segments that
 * name this launcher as their exporter are kept: other processes of the
 * user are not the tree's.
 *
 * One mutex guards the copies: a segment is copied in under it, and the
 * exposition is written from the copies under it, a few milliseconds for a
 * tree of a hundred processes. Nothing else is held while a segment file
 * is read, and the tree's export never waits on the collector with it.
 */
#ifndef NL_TREESTORE_H
#define NL_TREESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "promname.h"

/* Once, before either thread runs: the tree's delivery key, this
 * launcher's pid (the exporter its segments name), the age past which a
 * leftover is removed (NEMOLENS_LEFTOVER_MAX_AGE_S), and whether each scrape
 * samples the processes' figures from /proc first (proctree.h). */
void treestore_init(uint64_t key, uint32_t exporter, uint64_t max_age_ns, bool procs);

/* Keeps a copy of a segment just read (the adopter's seen callback):
 * data[0,len) is valid during the call only. */
void treestore_seen(const uint8_t *data, size_t len, void *arg);

/* The scrape: reads the tree's live segments now, and those of processes
 * that ended since the tree's export last delivered (read, not claimed),
 * then writes the exposition of every process kept. Returns 0, or -1 when
 * memory ran out. */
int treestore_render(struct nl_promtext *t, bool openmetrics);

/* How many processes are kept. */
size_t treestore_count(void);

#endif
