/* SPDX-License-Identifier: Apache-2.0 */
/* Other processes' segments (segment.h): the leftovers of processes that
 * are gone, and the live segments that another process (nemolens-run)
 * exports for their owners. Never on a hook's path.
 */
#ifndef NL_SEGREAD_H
#define NL_SEGREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "segment.h"
#include "snapshot.h"

/* ---- leftovers ----------------------------------------------------------- */

struct nl_seg_leftover {
	int fd;                         /* open and locked: this process owns it now */
	char name[96];
	uint8_t *data;                  /* a private copy of the file */
	size_t len;
};

static inline const struct nl_seg_header *nl_seg_leftover_header(const struct nl_seg_leftover *l)
{
	return (const struct nl_seg_header *)l->data;
}

/* Looks through the directory and claims up to max segments whose owner is
 * gone and whose delivery key is key. Along the way removes what can never
 * be delivered: files that are not segments, segments of another boot,
 * delivered ones, and any older than max_age_ns (counted from the owner's
 * last sign of life). Segments named after a pid that is alive are looked
 * at only when thorough (that costs reading its /proc maps). Allocates
 * nothing unless it claims something. */
size_t nl_seg_claim(uint64_t key, uint64_t max_age_ns, bool thorough, struct nl_seg_leftover *out, size_t max);
/* Gives a claimed segment back. delivered: marked done and removed; else
 * left for the next attempt. */
void nl_seg_release(struct nl_seg_leftover *l, bool delivered);

/* ---- live segments, for the process that exports them ------------------- */

/* Live segments exported by another process (nemolens-run): calls fn with a
 * private copy of every segment with delivery key key whose owner runs and
 * whose exporter is one of the n pids in exporters; first sets their
 * exporter to exporters[0] (a successor taking over) and their heartbeat to
 * now (the exporter's sign of life stands in for the owner's, which has no
 * thread). Returns how many fn got. Reads without a lock (a live
 * segment's values are atomics and its records are complete before they
 * are linked); takes the file's lock only to name itself, so that an owner
 * that took its export back (nl_seg_take_export) is passed. */
size_t nl_seg_read_exported(uint64_t key, const uint32_t *exporters, size_t n,
			    void (*fn)(const uint8_t *data, size_t len, void *arg), void *arg);

/* Calls fn for every live segment with delivery key key, exported by one
 * of exporters, whose flags have any of the bits of flags: with its header
 * (a copy), its file's status and the file open for reading and writing
 * (fn may map it; it is closed after). Returns how many fn got. For
 * nemolens-run's memory sampler, which records into them. */
struct stat;
size_t nl_seg_each_exported(uint64_t key, const uint32_t *exporters, size_t n, uint32_t flags,
			    void (*fn)(int fd, const struct nl_seg_header *h, const struct stat *st, void *arg), void *arg);

/* ---- reading a segment -------------------------------------------------- */

/* Readers' validation: the NUL-terminated string at off inside data[0,len),
 * or NULL; and n attributes into out (strings pointing into data). False
 * when anything points outside data. */
const char *nl_seg_str(const uint8_t *data, size_t len, uint64_t off);
bool nl_seg_get_attrs(const uint8_t *data, size_t len, const struct nl_sattr *in, size_t n, struct nl_attr *out);

#endif
