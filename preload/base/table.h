/* SPDX-License-Identifier: Apache-2.0 */
/* An insert-only table of fixed capacity, written by hooks in any thread
 * and read by the others without a lock: what an interner (bytes to a small
 * id) and a cache of series by key are built on.
 *
 * The table is open addressing over the caller's own slots, each beginning
 * with a 32-bit state: EMPTY (0), CLAIMED (a thread is making it), READY(id)
 * (2 + id), or DEAD (claimed, then given up: a hole that a probe passes
 * over). A slot only ever goes EMPTY -> CLAIMED -> READY or DEAD, so a probe
 * that meets an empty slot has seen every slot its key could be in, and a
 * ready slot's key never changes under its reader. The one exception is
 * nl_table_forget, for a fork child whose parent's thread was making a slot.
 *
 * Use: nl_table_claim looks the key up. Found, the slot is ready and its id
 * is given. Claimed, the caller owns an empty slot: it writes its key and
 * whatever the slot holds, then publishes it with nl_table_publish (or
 * nl_table_kill, giving it up). Busy, another thread is making a slot that
 * might be this key's; full, the key is not there and may not be added.
 * nl_table_get does all of that for a cache, whose slots are made once
 * and never given up, with the making passed as a function.
 * nl_table_first is the usual answer alone, a key ready in the first slot
 * it may be in, for a caller's hot path; the caller asks nl_table_claim
 * from out of line when it answers NULL. A table of one probe whose hashes
 * are the slots' own indexes (nl_table_by_index) is an array of cells, each
 * made once, on first use, by the same protocol.
 *
 * Memory ordering. The claim is a compare-exchange of the state from EMPTY
 * to CLAIMED: of the threads that find a slot empty only one wins it, and
 * the others read, with acquire, the state it holds now. The winner writes the slot's
 * other fields with plain stores; nobody reads them while the state says
 * CLAIMED. The publish is a store with release of the final state, after
 * those writes. Every reader loads the state with acquire before it reads
 * anything else of the slot, so a reader that sees READY sees the key and
 * the value as the maker wrote them, and whatever the maker wrote before
 * (a series made in the registry, a text by id). DEAD is published the
 * same way, though nothing of a dead slot is read.
 *
 * A reader that finds a slot claimed waits for it a bounded while: a fixed
 * number of pause instructions, then the busy answer. It must never wait
 * longer, since the maker may be the very code that the reader's signal
 * handler interrupted on the same thread, or a thread of a fork parent that
 * the child does not have; the caller records into its overflow instead.
 * A table made with no spins answers busy at once. A caller may yield the
 * processor and ask again, a bounded number of times, when a maker that is
 * descheduled halfway is likelier than one it interrupted (the call sites
 * do): the table itself never sleeps. */
#ifndef NL_TABLE_H
#define NL_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "relax.h"

#define NL_SLOT_EMPTY 0u
#define NL_SLOT_CLAIMED 1u
#define NL_SLOT_DEAD 0xFFFFFFFFu
#define NL_SLOT_READY(id) (2u + (uint32_t)(id))

/* How long a reader waits for a claimed slot, in pauses (some microseconds:
 * a pause is 10 to 150 cycles, by CPU), when a table waits at all. */
#define NL_TABLE_SPINS 1024

/* The state every slot begins with. */
struct nl_slot {
	_Atomic uint32_t state;
};

/* The slots of a table: a static array of n of type, n a power of two. */
#define NL_TABLE_SLOTS(type, name, n) \
	static type name[n];          \
	_Static_assert(!((n) & ((n) - 1)), "table.h: slots a power of two")

/* A table over the caller's slots. Made where it is used (a constant of a
 * function, or filled in at the first record), never as an initialised
 * static: its pointer would be one more relocation for the loader to write
 * in every process, recording or not (loadpath.h). */
struct nl_table {
	void *slots;
	size_t size;            /* bytes a slot, its struct nl_slot first */
	unsigned n;             /* slots, a power of two */
	unsigned probes;        /* slots a key may be in, from its hash on; at most n */
	unsigned spins;         /* the wait for a claimed slot; 0: busy at once */
	_Atomic unsigned *count; /* when not NULL, no claim once it reaches limit */
	unsigned limit;
};

enum nl_table_answer { NL_TABLE_FOUND, NL_TABLE_CLAIMED, NL_TABLE_BUSY, NL_TABLE_FULL };

static inline struct nl_slot *nl_table_slot(const struct nl_table *t, unsigned i)
{
	return (struct nl_slot *)((char *)t->slots + (size_t)i * t->size);
}

/* Whether a state is READY(id), for some id. */
static inline bool nl_slot_ready(uint32_t st)
{
	return st - NL_SLOT_READY(0) < NL_SLOT_DEAD - NL_SLOT_READY(0);
}

/* Looks up the key of hash h, same(slot, key) telling whether a ready slot
 * holds it; claims an empty slot for it when it is not there. *slot is the
 * slot found or claimed, *id the id of the one found. Inline, so that same
 * is inlined too. A ready slot is tested first: it is what a key seen
 * before meets, on the path every record takes. */
static inline enum nl_table_answer nl_table_claim(const struct nl_table *t, uint32_t h,
						  bool (*same)(const struct nl_slot *, const void *),
						  const void *key, struct nl_slot **slot, uint32_t *id)
{
	*slot = NULL;
	*id = 0;
	for (unsigned probe = 0; probe < t->probes; probe++) {
		struct nl_slot *e = nl_table_slot(t, (h + probe) & (t->n - 1));
		uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
		if (__builtin_expect(!nl_slot_ready(st), 0)) {
			if (st == NL_SLOT_EMPTY) {
				if (t->count && atomic_load_explicit(t->count, memory_order_relaxed) >= t->limit)
					return NL_TABLE_FULL;
				if (atomic_compare_exchange_strong_explicit(&e->state, &st, NL_SLOT_CLAIMED,
									    memory_order_acquire, memory_order_acquire)) {
					*slot = e;
					return NL_TABLE_CLAIMED;
				}
				/* Lost the slot: st is what is there now. */
			}
			/* Being made: it may be this very key. */
			for (unsigned spin = 0; st == NL_SLOT_CLAIMED; spin++) {
				if (spin == t->spins)
					return NL_TABLE_BUSY;
				nl_cpu_relax();
				st = atomic_load_explicit(&e->state, memory_order_acquire);
			}
			if (st == NL_SLOT_DEAD)
				continue;
		}
		if (same(e, key)) {
			*slot = e;
			*id = st - NL_SLOT_READY(0);
			return NL_TABLE_FOUND;
		}
	}
	return NL_TABLE_FULL;
}

/* nl_table_claim's usual answer, for the path every record takes: the key
 * ready in the first slot it may be in. NULL otherwise, and the caller then
 * asks nl_table_claim, from a function of its own kept out of line, so that
 * finding a key seen before costs a load and a compare, with no stack frame
 * for the making of a new one. */
static inline struct nl_slot *nl_table_first(const struct nl_table *t, uint32_t h,
					     bool (*same)(const struct nl_slot *, const void *), const void *key,
					     uint32_t *id)
{
	struct nl_slot *e = nl_table_slot(t, h & (t->n - 1));
	uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
	*id = st - NL_SLOT_READY(0);
	return nl_slot_ready(st) && same(e, key) ? e : NULL;
}

/* The same of a table whose keys are the slots' own indexes, passed as the
 * hash, with one probe: each slot is a cell made once, on first use, and
 * whatever slot the hash names holds that key. */
static inline bool nl_table_by_index(const struct nl_slot *e, const void *key)
{
	(void)e;
	(void)key;
	return true;
}

/* Makes a claimed slot ready with id, after everything it holds is written. */
static inline void nl_table_publish(struct nl_slot *e, uint32_t id)
{
	atomic_store_explicit(&e->state, NL_SLOT_READY(id), memory_order_release);
}

/* A cache's look-up, for tables whose slots are made once and never given
 * up: the slot of key, found, or claimed, written whole by make(slot, arg),
 * its key included, and published with id 0. Found either way, with *slot
 * ready; busy and full as nl_table_claim answers them. */
static inline enum nl_table_answer nl_table_get(const struct nl_table *t, uint32_t h,
					       bool (*same)(const struct nl_slot *, const void *), const void *key,
					       void (*make)(struct nl_slot *, const void *), const void *arg,
					       struct nl_slot **slot)
{
	uint32_t id;
	enum nl_table_answer a = nl_table_claim(t, h, same, key, slot, &id);
	if (a != NL_TABLE_CLAIMED)
		return a;
	make(*slot, arg);
	nl_table_publish(*slot, 0);
	return NL_TABLE_FOUND;
}

/* Gives a claimed slot up for good. */
static inline void nl_table_kill(struct nl_slot *e)
{
	atomic_store_explicit(&e->state, NL_SLOT_DEAD, memory_order_release);
}

/* In a fork child: the slots a thread of the parent was making are empty
 * again, for the child to make anew (that thread does not exist here). */
void nl_table_forget(const struct nl_table *t);

/* ---- interning ------------------------------------------------------------- */

/* Bytes interned as ids 0..limit-1, in the order they were first seen; the
 * table's count and limit are the ids', and its slots are NL_INTERN_SLOT
 * of the longest value. A value's text stays where it is until the process
 * ends. The count orders nothing (relaxed): two threads may both see room
 * for the last id and claim a slot each, and the one whose increment
 * passes the limit makes its slot DEAD. */
struct nl_intern_slot {
	struct nl_slot head;
	uint32_t len;
	char text[];
};
#define NL_INTERN_SLOT(max)                \
	struct {                           \
		struct nl_slot head;       \
		uint32_t len;              \
		char text[(max) + 1];      \
	}
#define NL_INTERN_OVERFLOW (-1)

struct nl_intern {
	struct nl_table table;
	size_t max;             /* the longest value */
	const char **text;      /* by id, limit of them; NULL: not kept */
};

/* The id of s[0..n), which must have 1 to max bytes; NL_INTERN_OVERFLOW
 * past the limit, when the table is full, or when another thread is still
 * writing the slot it might be in. */
int nl_intern(const struct nl_intern *t, const char *s, size_t n);

#endif
