/* SPDX-License-Identifier: Apache-2.0 */
/* The insert-only table's out-of-line parts: forgetting slots being made
 * (a fork child) and interning bytes (table.h). */
#include "table.h"

#include <string.h>

#include "bytekey.h"

void nl_table_forget(const struct nl_table *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct nl_slot *e = nl_table_slot(t, i);
		if (atomic_load_explicit(&e->state, memory_order_relaxed) == NL_SLOT_CLAIMED)
			atomic_store_explicit(&e->state, NL_SLOT_EMPTY, memory_order_relaxed);
	}
}

struct bytes {
	const char *s;
	size_t n;
};

static bool same_bytes(const struct nl_slot *e, const void *key)
{
	const struct nl_intern_slot *x = (const struct nl_intern_slot *)e;
	const struct bytes *b = key;
	return x->len == b->n && memcmp(x->text, b->s, b->n) == 0;
}

int nl_intern(const struct nl_intern *t, const char *s, size_t n)
{
	struct bytes key = { s, n };
	struct nl_slot *e;
	uint32_t id;
	switch (nl_table_claim(&t->table, nl_bytes_key(s, n), same_bytes, &key, &e, &id)) {
	case NL_TABLE_FOUND:
		return (int)id;
	case NL_TABLE_CLAIMED:
		break;
	default:
		return NL_INTERN_OVERFLOW;
	}
	/* The count was below the limit when the slot was empty, but another
	 * insertion may have taken the last id since: the slot is then a hole. */
	id = atomic_fetch_add_explicit(t->table.count, 1, memory_order_relaxed);
	if (id >= t->table.limit) {
		nl_table_kill(e);
		return NL_INTERN_OVERFLOW;
	}
	struct nl_intern_slot *x = (struct nl_intern_slot *)e;
	memcpy(x->text, s, n);
	x->text[n] = 0;
	x->len = (uint32_t)n;
	if (t->text)
		t->text[id] = x->text;
	nl_table_publish(e, id);
	return (int)id;
}
