/* SPDX-License-Identifier: Apache-2.0 */
/* Delivering what other processes left behind: the segments (segment.h) of
 * processes of this user that ended without delivering everything they
 * recorded. Run by the background thread of every shim process (at its
 * start, at every export and in the exit flush) and by nemolens-run after
 * the program ended. Never on a hook's path.
 */
#ifndef NL_ADOPT_H
#define NL_ADOPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "export.h"

struct nl_adopter {
	const struct nl_config *cfg;
	/* The transport to send with, created on first need (NULL: none). */
	struct nl_transport *(*transport)(void *arg);
	/* NEMOLENS_ADOPT=fold: makes this process ready to take a dead process's
	 * values into its own series (its own segment published, so that they
	 * are not lost if it dies in turn); false: deliver them as they are.
	 * NULL (nemolens-run): never fold. */
	bool (*fold_ready)(void *arg);
	void *arg;
	const _Atomic bool *abort;      /* an in-flight send gives up when it becomes true */
	/* Non-zero: a send waits at most this long for an answer once the
	 * transport exists (what is not taken stays for later). */
	uint32_t quick_ms;
	/* When set, called with every segment whose snapshot goes into a
	 * request (before the send, whatever its outcome): the bytes the
	 * snapshot was made from, valid during the call only. nemolens-run
	 * --summary keeps them, so that its tables show what was exported. */
	void (*seen)(const uint8_t *data, size_t len, void *arg);
	void *seen_arg;
	/* Nothing is sent and nothing encoded: a segment handed to seen counts
	 * as delivered. nemolens-run serving its tree to Prometheus alone,
	 * whose scrape shows what seen kept. */
	bool no_send;
};

/* Claims, exports under their own resource (or folds) and removes the
 * leftovers whose delivery key is this configuration's, until deadline_ns
 * (CLOCK_MONOTONIC). thorough: also look at segments named after pids that
 * are alive (see nl_seg_claim). Returns how many were delivered;
 * *send_failed (may be NULL) says whether a send to the collector failed. */
size_t nl_adopt_run(const struct nl_adopter *a, uint64_t deadline_ns, bool thorough, bool *send_failed);

/* nemolens-run's export for its tree: exports the live segments whose
 * exporter is one of exporters (segread.h, nl_seg_read_exported; the first
 * is this process), each under its owner's resource and start time, in as
 * few requests as fit, until deadline_ns. Returns how many segments were
 * read; *points (may be NULL) how many points they exported. A send that
 * fails loses nothing: cumulative values go again at the next interval. */
size_t nl_adopt_live(const struct nl_adopter *a, const uint32_t *exporters, size_t n_exporters, uint64_t deadline_ns,
		     size_t *points, bool *send_failed);

/* The transport settings for cfg's endpoint. */
struct nl_transport_config nl_adopt_transport_config(const struct nl_config *cfg, const char *user_agent);

#endif
