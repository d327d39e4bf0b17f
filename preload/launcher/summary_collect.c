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
#include "segment.h"
#include "summary.h"

/* What the tree exported, one entry per process: the segment's bytes as its
 * latest export read them. A process that ends is exported a last time and
 * its segment removed, so its values are kept here rather than looked for
 * at the program's end. Only the thread of the tree's export adds (or the
 * main thread once that thread has been joined). */
struct kept {
	int64_t pid;
	uint64_t proc_start;
	uint64_t start_ns;
	char instance[40];
	uint8_t *data;
	size_t len;
};

static struct {
	bool wanted;
	FILE *out;                      /* the file named, NULL: stderr */
	uint32_t exporter;              /* this process: the segments of its tree */
	struct kept *kept;
	size_t n, cap;
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
	struct kept k = { 0 };
	uint32_t exporter;
	if (len < sizeof(struct nl_seg_header))
		return;
	/* Plain copies of the header's fields: it is a private copy, and some
	 * of them are atomics. */
	memcpy(&exporter, data + offsetof(struct nl_seg_header, exporter), sizeof exporter);
	if (exporter != summary.exporter)
		return;
	memcpy(&k.pid, data + offsetof(struct nl_seg_header, pid), sizeof k.pid);
	memcpy(&k.proc_start, data + offsetof(struct nl_seg_header, proc_start), sizeof k.proc_start);
	memcpy(&k.start_ns, data + offsetof(struct nl_seg_header, start_unix_ns), sizeof k.start_ns);
	memcpy(k.instance, data + offsetof(struct nl_seg_header, instance_id), sizeof k.instance);
	struct kept *slot = NULL;
	for (size_t i = 0; i < summary.n && !slot; i++) {
		struct kept *o = &summary.kept[i];
		if (o->pid == k.pid && o->proc_start == k.proc_start && o->start_ns == k.start_ns &&
		    memcmp(o->instance, k.instance, sizeof k.instance) == 0)
			slot = o;
	}
	k.data = malloc(len);
	if (!k.data) {
		summary.short_of_memory = true;
		return;
	}
	memcpy(k.data, data, len);
	k.len = len;
	if (!slot) {
		if (summary.n == summary.cap) {
			size_t cap = summary.cap ? summary.cap * 2 : 16;
			struct kept *bigger = realloc(summary.kept, cap * sizeof *bigger);
			if (!bigger) {
				free(k.data);
				summary.short_of_memory = true;
				return;
			}
			summary.kept = bigger;
			summary.cap = cap;
		}
		slot = &summary.kept[summary.n++];
	} else {
		free(slot->data);
	}
	*slot = k;
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
		for (size_t i = 0; i < summary.n; i++) {
			struct kept *k = &summary.kept[i];
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
	for (size_t i = 0; i < summary.n; i++)
		free(summary.kept[i].data);
	free(summary.kept);
	summary.kept = NULL;
	summary.n = summary.cap = 0;
	if (summary.out)
		fclose(summary.out);
	else
		fflush(stderr);
	summary.out = NULL;
}
