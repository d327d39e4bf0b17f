/* SPDX-License-Identifier: Apache-2.0 */
/* The export for the program's tree, and its keeper (tree.c). */
#ifndef NL_TREE_H
#define NL_TREE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "config.h"
#include "export.h"

/* What a delivery sends with: the transport is made on first need. */
struct delivery {
	const struct nl_config *cfg;
	struct nl_transport *transport;
	char user_agent[64];
};

/* While the program runs, this process exports for its whole tree: every
 * export interval it reads the segments of the processes that name it as
 * their exporter (NL_ENV_RUN_EXPORTER), live ones as they stand, and
 * delivers those whose owner ended; each under its owner's resource and
 * start time. The processes themselves start no thread, load no export
 * library and open no socket of the shim's. A thread of this process does
 * it, so that a collector that does not answer never delays the signals
 * this process passes on, nor its exit. */
struct tree {
	struct nl_config cfg;
	struct delivery d;
	bool on;
	bool sending;                   /* OTLP: the export sends to the collector */
	bool serving;                   /* Prometheus: the scrape (scrape.h) shows what the export reads */
	uint32_t exporters[2];          /* this process, and the one it took over from */
	size_t n_exporters;
	uint64_t interval_ns;
	bool sampling;                  /* memory profiling: the processes' sampler runs here */
	uint64_t sample_ns;
	uint64_t next_sample;           /* CLOCK_MONOTONIC */
	unsigned rounds;
	uint64_t first_export;          /* CLOCK_MONOTONIC: an interval after the program's start */
	bool watching;                  /* the segments' directory is looked at (tree_watch) */
	struct stat dir_seen;           /* as it was when the watch began */
	uint64_t next_look;             /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool running;
	int keeper_fd;                  /* the keeper's socket (-1: none) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;                      /* under mu */
	_Atomic bool abort;             /* an in-flight send gives up */
};

/* How often the segments' directory is looked at until the first export,
 * in milliseconds (tree_watch). */
#define TREE_LOOK_MS 20

/* When this process does not export for the tree, after the program
 * ended: what the program's dead processes left (and other dead processes
 * of this user configured for the same collector), delivered within
 * NEMOLENS_EXIT_TIMEOUT_MS. */
void nl_deliver_leftovers(void);

/* Before the program starts: the configuration read, and whether this
 * process exports for the tree (t->on), to the collector (t->sending)
 * and to Prometheus (t->serving); if so, the program's environment names
 * it as the exporter. */
void tree_setup(struct tree *t);

/* Why this process does not export for its tree, for --summary. */
const char *tree_off_reason(const struct nl_config *c);

/* Before the program starts: the first look at the segments' directory,
 * and when the first export is due. */
void tree_watch(struct tree *t);

/* Whether something was created in the segments' directory since
 * tree_watch (or it cannot be told). */
bool tree_watch_saw(const struct tree *t);

/* The directory is looked at no more. */
void tree_unwatch(struct tree *t);
/* A child of nemolens-run has ended and is not reaped yet: its last figures
 * from /proc (its final CPU time) go into its segment now. */
void tree_ended(struct tree *t, int pid);

/* Forks the keeper, which takes over the export if this process ends
 * first; it runs with the signal mask mask. */
void keeper_start(struct tree *t, const sigset_t *mask);

/* Starts the thread that exports every interval. */
void tree_start(struct tree *t);

/* After the program ended: the last export, and the keeper told to go or
 * left to take over. started: whether keeper and thread were started. */
void tree_finish(struct tree *t, bool started);

#endif
