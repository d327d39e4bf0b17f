/* SPDX-License-Identifier: Apache-2.0 */
/* Process pressure: the OpenTelemetry process figures of one process
 * (process.cpu.time, process.memory.usage, process.thread.count,
 * process.open_file_descriptor.count, process.context_switches), read
 * from /proc by whoever exports that process and kept in its segment's
 * header (struct nl_seg_proc of segment.h), from which every snapshot of
 * the process gets them.
 *
 * Who samples: a process that exports itself, on its background thread
 * before each export (nl_procmetrics_sample_self); under nemolens-run the
 * launcher, for every live process it exports (preload/readers/
 * proctree.h). Nothing of it runs in a hook or in the program's threads,
 * and a process that never exports is never sampled. A dead process keeps
 * the values of its last sample in its segment.
 */
#ifndef NL_PROCMETRICS_H
#define NL_PROCMETRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "segment.h"
#include "snapshot.h"

/* Which fields of a sample (and of struct nl_seg_proc) hold a value. */
enum {
	NL_PROC_HAVE_CPU = 1,
	NL_PROC_HAVE_SWITCHES = 2,
	NL_PROC_HAVE_RSS = 4,
	NL_PROC_HAVE_THREADS = 8,
	NL_PROC_HAVE_FDS = 16,
};

struct nl_proc_sample {
	uint32_t have;                  /* NL_PROC_HAVE_* */
	uint64_t cpu_user_ns, cpu_system_ns;
	uint64_t switches_voluntary, switches_involuntary;
	uint64_t rss_bytes;
	uint64_t threads;
	uint64_t fds;
};

/* Reads the process behind dirfd, an open /proc/<pid> directory. start:
 * its start time (stat field 22), checked again through the directory so
 * that a reused pid is never taken for it; 0 takes any. own_fds: the
 * descriptors the caller holds in that process for the reading (reading
 * /proc/self: the directory), left out of the count. Returns 0 with what
 * could be read (have), or -1 when the process is gone or is another one.
 * A zombie has its CPU time and context switches still, nothing else. */
int nl_procmetrics_read(int dirfd, uint64_t start, unsigned own_fds, struct nl_proc_sample *out);

/* Stores what s has into blk: the cumulative figures never go back, so two
 * samplers racing (the scrape and the export of nemolens-run) or a sample
 * older than the one stored leave the larger value. */
void nl_procmetrics_store(struct nl_seg_proc *blk, const struct nl_proc_sample *s);

/* This process's own sample into its segment's header: the background
 * thread calls it before an export. Does nothing before the first record
 * (no segment yet) or when turned off. */
void nl_procmetrics_sample_self(void);

/* Adds blk's figures to snap, one metric each, as points of the process
 * whose cumulative series start at start_ns, stamped now_ns. Nothing when
 * blk holds nothing; false when memory ran out (snap is left whole). */
bool nl_procmetrics_append(struct nl_snapshot *snap, const struct nl_seg_proc *blk, uint64_t start_ns,
			   uint64_t now_ns);

#endif
