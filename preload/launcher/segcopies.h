/* SPDX-License-Identifier: Apache-2.0 */
/* Copies of the tree's segments, one per process (segcopies.c): what the
 * summary and the scrape keep of what the tree's export reads, the newest
 * copy of each process's segment. */
#ifndef NL_SEGCOPIES_H
#define NL_SEGCOPIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A process's segment, copied, and the process it is of: told apart from
 * a later process with the same pid by its start time and instance id. */
struct seg_copy {
	int64_t pid;
	uint64_t proc_start;
	uint64_t start_ns;
	char instance[40];
	uint8_t *data;          /* malloc'd */
	size_t len;
};

/* The newest copy of each process's segment. */
struct seg_copies {
	struct seg_copy *kept;
	size_t n, cap;
};

enum seg_copy_made { SEG_COPY_MADE, SEG_COPY_NOT_OURS, SEG_COPY_NO_MEMORY };

/* A copy of the segment data[0..len) into c, when it names exporter as
 * its tree's exporter. Leftovers of other processes of the user, read
 * along the way, are not the tree's. */
enum seg_copy_made seg_copy_make(const uint8_t *data, size_t len, uint32_t exporter, struct seg_copy *c);

/* Puts c in s, in place of the copy of the same process if s has one; s
 * then owns c's data. False when s cannot grow: c's data is freed, and
 * what s held stays. */
bool seg_copies_put(struct seg_copies *s, struct seg_copy *c);

/* Frees every copy; s is empty again. */
void seg_copies_clear(struct seg_copies *s);

#endif
