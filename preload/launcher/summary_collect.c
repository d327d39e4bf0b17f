/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run --summary: the segments of the program's tree as its export
 * read them, kept until the program ended, then made into the tables
 * (summary.h) on stderr or in the file named.
 */
#include "summary_collect.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "foreign.h"
#include "launcher.h"
#include "registry.h"
#include "segcopies.h"
#include "segment.h"
#include "summary.h"

/* What the tree exported, one entry per process: the segment's bytes as its
 * latest export read them. A process that ends is exported a last time and
 * its segment removed, so its values are kept here rather than looked for
 * at the program's end. Only the thread of the tree's export adds (or the
 * main thread once that thread has been joined). */

static struct {
	bool wanted;
	FILE *out;                      /* the file named, NULL: stderr */
	uint32_t exporter;              /* this process: the segments of its tree */
	struct seg_copies copies;
	bool short_of_memory;
} summary;

/* --summary[=FILE]: the file is opened (and emptied) before the program
 * starts, so that a path relative to the current directory means what it
 * did on the command line, and a problem with it is told before the
 * program's own output. Close-on-exec: the program never holds it. */
void want_summary(const char *file)
{
	summary.wanted = true;
	if (summary.out)
		fclose(summary.out);
	summary.out = NULL;
	if (!file)
		return;
	if (!*file || !(summary.out = fopen(file, "we")))
		fprintf(stderr, "%s: --summary=%s: %s; it goes to stderr\n", progname, file,
			*file ? strerror(errno) : "no file named");
}

bool summary_wanted(void) { return summary.wanted; }

void summary_set_exporter(uint32_t pid) { summary.exporter = pid; }

void summary_forget(void)
{
	summary.wanted = false;
	if (summary.out)
		fclose(summary.out);
	summary.out = NULL;
}

/* Keeps a copy of a segment the tree's export just read. Leftovers of other
 * processes of the user, delivered along the way, are not the tree's. */
void summary_seen(const uint8_t *data, size_t len, void *arg)
{
	(void)arg;
	struct seg_copy c;
	enum seg_copy_made made = seg_copy_make(data, len, summary.exporter, &c);
	if (made == SEG_COPY_NO_MEMORY || (made == SEG_COPY_MADE && !seg_copies_put(&summary.copies, &c)))
		summary.short_of_memory = true;
}

/* After the program ended, its output done: the tables, on stderr or in the
 * file named. Nothing here changes the exit status. why: when the tree was
 * not exported by this process, the reason there is nothing to show. */
void summary_print(const char *why)
{
	FILE *out = summary.out ? summary.out : stderr;
	struct nl_summary *s = why ? NULL : nl_summary_new();
	if (why) {
		fprintf(out, "%s: --summary: nothing to show: %s\n", progname, why);
	} else if (!s) {
		fprintf(out, "%s: --summary: out of memory\n", progname);
	} else {
		for (size_t i = 0; i < summary.copies.n; i++) {
			const struct seg_copy *k = &summary.copies.kept[i];
			struct nl_snapshot *snap = nl_snapshot_of_segment(k->data, k->len, nl_realtime_ns());
			if (!snap || nl_summary_add(s, snap) != 0)
				summary.short_of_memory = true;
			nl_snapshot_free(snap);
		}
		nl_summary_write(s, out);
		if (summary.short_of_memory)
			fprintf(out, "%s: --summary: out of memory: the tables miss some values\n", progname);
	}
	nl_summary_free(s);
	seg_copies_clear(&summary.copies);
	if (summary.out)
		fclose(summary.out);
	else
		fflush(stderr);
	summary.out = NULL;
}
