/* SPDX-License-Identifier: Apache-2.0 */
/* The insert-only table (table.h) hammered by threads: a cache by key made
 * through claim, publish and kill, and an interner, each used by several
 * threads at once from a common start. Every reader that is told a slot is
 * ready checks that it holds what its maker wrote, key and value alike.
 *
 * A plain program, not a Criterion test, so that it also runs under
 * ThreadSanitizer, which is what makes it a test of the memory ordering:
 * were the publish a relaxed store, a reader's plain loads of the slot's
 * fields would not be ordered after the maker's plain stores, and the
 * sanitizer reports that race (and fails the run) on the first slot a
 * reader finds ready while its maker's writes are still its own. Without
 * the sanitizer it checks the protocol's answers only. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytekey.h"
#include "table.h"

#define THREADS 4
#define ROUNDS 20

static void fail(const char *what, unsigned long a, unsigned long b)
{
	fprintf(stderr, "race_table: %s (%lu, %lu)\n", what, a, b);
	exit(1);
}

static void check(int ok, const char *what, unsigned long a, unsigned long b)
{
	if (!ok)
		fail(what, a, b);
}

/* Every thread waits for the others here, so that they start together. */
static pthread_barrier_t start;

/* ---- a cache by key ------------------------------------------------------------ */

#define KEYS 1500
#define CACHE_SLOTS 4096
struct cached {
	struct nl_slot head;
	uint64_t key;
	uint64_t value;
	char text[24];
};
static struct cached cache[CACHE_SLOTS];
/* Whether a key's first slot was given up already: every seventh key's
 * first maker kills its slot, so that probes pass over holes. */
static atomic_flag killed[KEYS];
static _Atomic unsigned long made, busy;

static uint64_t value_of(uint64_t key) { return key * 0x9E3779B97F4A7C15ull + 1; }

static bool same_key(const struct nl_slot *e, const void *key)
{
	return ((const struct cached *)e)->key == *(const uint64_t *)key;
}

/* The cached value of key, made when not there; checked whichever way it
 * came. */
static void get(const struct nl_table *t, uint64_t key)
{
	uint32_t h = (uint32_t)((key * 0xff51afd7ed558ccdull) >> 32);
	for (;;) {
		struct nl_slot *e;
		uint32_t id;
		uint32_t first_id;
		struct nl_slot *first = nl_table_first(t, h, same_key, &key, &first_id);
		enum nl_table_answer a = nl_table_claim(t, h, same_key, &key, &e, &id);
		struct cached *c = (struct cached *)e;
		char want[24];
		snprintf(want, sizeof want, "key %llu", (unsigned long long)key);
		switch (a) {
		case NL_TABLE_FOUND:
			check(c->key == key, "a ready slot holds another key", (unsigned long)c->key, (unsigned long)key);
			check(c->value == value_of(key), "a ready slot's value is not its maker's", (unsigned long)key,
			      (unsigned long)c->value);
			check(strcmp(c->text, want) == 0, "a ready slot's text is not its maker's", (unsigned long)key, 0);
			check(id == (uint32_t)(key % 1000), "a ready slot's id is not its maker's", id, (unsigned long)key);
			/* What the usual answer found first is the same slot. */
			check(!first || (first == e && first_id == id), "nl_table_first found another slot",
			      (unsigned long)key, first_id);
			return;
		case NL_TABLE_CLAIMED:
			c->key = key;
			if (key % 7 == 0 && !atomic_flag_test_and_set(&killed[key])) {
				nl_table_kill(e);
				continue;       /* made again, in another slot */
			}
			c->value = value_of(key);
			memcpy(c->text, want, sizeof want);
			nl_table_publish(e, (uint32_t)(key % 1000));
			atomic_fetch_add_explicit(&made, 1, memory_order_relaxed);
			return;
		case NL_TABLE_BUSY:
			atomic_fetch_add_explicit(&busy, 1, memory_order_relaxed);
			continue;       /* asked again until made */
		case NL_TABLE_FULL:
			fail("the cache is full", (unsigned long)key, 0);
		}
	}
}

static void *cache_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	/* Half the tables wait for a slot being made, half answer busy at once. */
	const struct nl_table t = { cache, sizeof cache[0], CACHE_SLOTS, 64, seed % 2 ? NL_TABLE_SPINS : 0, NULL, 0 };
	pthread_barrier_wait(&start);
	/* Each thread its own order, so that makers and readers meet. */
	for (unsigned i = 0; i < KEYS; i++)
		get(&t, (i * (2 * seed + 1) + seed * 101) % KEYS);
	for (unsigned i = KEYS; i-- > 0;)
		get(&t, i);
	return NULL;
}

static void cache_round(void)
{
	memset(cache, 0, sizeof cache);
	for (unsigned i = 0; i < KEYS; i++)
		atomic_flag_clear(&killed[i]);
	atomic_store(&made, 0);
	pthread_t th[THREADS];
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, cache_thread, (void *)(uintptr_t)(i + 1));
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	/* Every key made exactly once: one ready slot each, nothing left claimed. */
	check(atomic_load(&made) == KEYS, "keys made", atomic_load(&made), KEYS);
	static unsigned char seen[KEYS];
	memset(seen, 0, sizeof seen);
	unsigned dead = 0;
	for (unsigned i = 0; i < CACHE_SLOTS; i++) {
		uint32_t st = atomic_load(&cache[i].head.state);
		check(st != NL_SLOT_CLAIMED, "a slot left claimed", i, 0);
		dead += st == NL_SLOT_DEAD;
		if (nl_slot_ready(st)) {
			check(cache[i].key < KEYS && !seen[cache[i].key]++, "a key in two ready slots", i,
			      (unsigned long)cache[i].key);
		}
	}
	check(dead == (KEYS + 6) / 7, "slots given up", dead, (KEYS + 6) / 7);
}

/* ---- an interner --------------------------------------------------------------- */

#define NAMES 600
#define LIMIT 400
#define NAME_SLOTS 1024
static NL_INTERN_SLOT(15) name_slots[NAME_SLOTS];
static const char *name_text[LIMIT];
static _Atomic unsigned n_names;
static int ids[THREADS][NAMES];

static void *intern_thread(void *arg)
{
	unsigned who = (unsigned)(uintptr_t)arg;
	const struct nl_intern t = { { name_slots, sizeof name_slots[0], NAME_SLOTS, NAME_SLOTS,
				       who % 2 ? NL_TABLE_SPINS : 0, &n_names, LIMIT },
				     15, name_text };
	pthread_barrier_wait(&start);
	for (unsigned k = 0; k < NAMES; k++) {
		unsigned i = who % 2 ? k : NAMES - 1 - k;
		char s[16];
		int n = snprintf(s, sizeof s, "name-%u", i);
		int id;
		/* Overflow also when a slot it may be in is being made: asked
		 * again until the answer is an id, or the limit is reached. */
		do
			id = nl_intern(&t, s, (size_t)n);
		while (id == NL_INTERN_OVERFLOW && atomic_load(&n_names) < LIMIT);
		if (id != NL_INTERN_OVERFLOW) {
			/* The text by id is there for whoever is given the id. */
			check(id < LIMIT, "an id past the limit", (unsigned long)id, LIMIT);
			check(strcmp(name_text[id], s) == 0, "an id's text is another value's", (unsigned long)id, i);
			check(nl_intern(&t, s, (size_t)n) == id, "a value's id changed", (unsigned long)id, i);
		}
		ids[who][i] = id;
	}
	return NULL;
}

static void intern_round(void)
{
	memset(name_slots, 0, sizeof name_slots);
	memset(name_text, 0, sizeof name_text);
	atomic_store(&n_names, 0);
	pthread_t th[THREADS];
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, intern_thread, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	/* One id a value for every thread that got one, one value an id, and
	 * exactly the limit's worth of them given out. */
	static int owner[LIMIT];
	for (unsigned id = 0; id < LIMIT; id++)
		owner[id] = -1;
	unsigned given = 0;
	for (unsigned i = 0; i < NAMES; i++) {
		int id = NL_INTERN_OVERFLOW;
		for (unsigned w = 0; w < THREADS; w++) {
			if (ids[w][i] == NL_INTERN_OVERFLOW)
				continue;
			check(id == NL_INTERN_OVERFLOW || id == ids[w][i], "two ids for one value", i, (unsigned long)ids[w][i]);
			id = ids[w][i];
		}
		if (id == NL_INTERN_OVERFLOW)
			continue;
		check(owner[id] == -1, "two values for one id", (unsigned long)id, i);
		owner[id] = (int)i;
		given++;
	}
	check(given == LIMIT, "ids given", given, LIMIT);
	check(atomic_load(&n_names) >= LIMIT, "the count", atomic_load(&n_names), LIMIT);
}

int main(void)
{
	pthread_barrier_init(&start, NULL, THREADS);
	for (int r = 0; r < ROUNDS; r++) {
		cache_round();
		intern_round();
	}
	printf("race_table: %d rounds, %lu busy answers\n", ROUNDS, atomic_load(&busy));
	return 0;
}
