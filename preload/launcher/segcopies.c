/* SPDX-License-Identifier: Apache-2.0 */
/* Copies of the tree's segments, one per process (segcopies.h). */
#include "segcopies.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "segment.h"

enum seg_copy_made seg_copy_make(const uint8_t *data, size_t len, uint32_t exporter, struct seg_copy *c)
{
	uint32_t named;
	memset(c, 0, sizeof *c);
	if (len < sizeof(struct nl_seg_header))
		return SEG_COPY_NOT_OURS;
	/* Plain copies of the header's fields: some of them are atomics. */
	memcpy(&named, data + offsetof(struct nl_seg_header, exporter), sizeof named);
	if (named != exporter)
		return SEG_COPY_NOT_OURS;
	memcpy(&c->pid, data + offsetof(struct nl_seg_header, pid), sizeof c->pid);
	memcpy(&c->proc_start, data + offsetof(struct nl_seg_header, proc_start), sizeof c->proc_start);
	memcpy(&c->start_ns, data + offsetof(struct nl_seg_header, start_unix_ns), sizeof c->start_ns);
	memcpy(c->instance, data + offsetof(struct nl_seg_header, instance_id), sizeof c->instance);
	if (!(c->data = malloc(len)))
		return SEG_COPY_NO_MEMORY;
	memcpy(c->data, data, len);
	c->len = len;
	return SEG_COPY_MADE;
}

static bool same_process(const struct seg_copy *a, const struct seg_copy *b)
{
	return a->pid == b->pid && a->proc_start == b->proc_start && a->start_ns == b->start_ns &&
	       memcmp(a->instance, b->instance, sizeof a->instance) == 0;
}

bool seg_copies_put(struct seg_copies *s, struct seg_copy *c)
{
	for (size_t i = 0; i < s->n; i++)
		if (same_process(&s->kept[i], c)) {
			free(s->kept[i].data);
			s->kept[i] = *c;
			return true;
		}
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct seg_copy *bigger = realloc(s->kept, cap * sizeof *bigger);
		if (!bigger) {
			free(c->data);
			c->data = NULL;
			return false;
		}
		s->kept = bigger;
		s->cap = cap;
	}
	s->kept[s->n++] = *c;
	return true;
}

void seg_copies_clear(struct seg_copies *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->kept[i].data);
	free(s->kept);
	s->kept = NULL;
	s->n = s->cap = 0;
}
