/* SPDX-License-Identifier: Apache-2.0 */
/* The insert-only table (table.h): interning in one thread, up to the limit
 * and past it; many threads interning the same and different values at once;
 * a slot left claimed for good, as a maker that a fork child does not have
 * leaves it; and a cache of values by key built on claim and publish. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bytekey.h"
#include "table.h"

#define SLOTS 128
#define MAX 31

static NL_INTERN_SLOT(MAX) slots[SLOTS];
static const char *text[SLOTS];
static _Atomic unsigned count;

static struct nl_intern names(unsigned limit, unsigned spins)
{
	return (struct nl_intern){
		.table = { slots, sizeof slots[0], SLOTS, SLOTS, spins, &count, limit },
		.max = MAX,
		.text = text,
	};
}

static void setup(void)
{
	memset(slots, 0, sizeof slots);
	memset(text, 0, sizeof text);
	atomic_store(&count, 0);
}

TestSuite(table, .init = setup);

static int id_of(const struct nl_intern *t, const char *s)
{
	return nl_intern(t, s, strlen(s));
}

Test(table, single_thread_ids_limit_and_overflow)
{
	struct nl_intern t = names(4, NL_TABLE_SPINS);
	cr_assert_eq(id_of(&t, "alpha"), 0);
	cr_assert_eq(id_of(&t, "beta"), 1);
	cr_assert_eq(id_of(&t, "alpha"), 0);
	cr_assert_eq(id_of(&t, "gamma"), 2);
	cr_assert_eq(id_of(&t, "delta"), 3);
	cr_assert_eq(id_of(&t, "epsilon"), NL_INTERN_OVERFLOW);
	cr_assert_eq(id_of(&t, "zeta"), NL_INTERN_OVERFLOW);
	/* Those seen before keep their ids past the limit. */
	cr_assert_eq(id_of(&t, "beta"), 1);
	cr_assert_eq(id_of(&t, "delta"), 3);
	cr_assert_eq(atomic_load(&count), 4u);
	cr_assert_str_eq(text[0], "alpha");
	cr_assert_str_eq(text[3], "delta");
	/* A prefix, and the value with one more byte, are other values. */
	cr_assert_eq(nl_intern(&t, "alpha", 4), NL_INTERN_OVERFLOW);
	cr_assert_eq(nl_intern(&t, "alphabet", 8), NL_INTERN_OVERFLOW);
}

Test(table, longest_value_and_a_full_table)
{
	char longest[MAX + 1];
	memset(longest, 'x', MAX);
	longest[MAX] = 0;
	struct nl_intern t = names(SLOTS, NL_TABLE_SPINS);
	cr_assert_eq(nl_intern(&t, longest, MAX), 0);
	cr_assert_eq(strlen(text[0]), (size_t)MAX);
	/* Every slot taken: a new value is not there, and no slot is left. */
	char v[16];
	for (int i = 1; i < SLOTS; i++) {
		snprintf(v, sizeof v, "v%d", i);
		cr_assert_eq(id_of(&t, v), i);
	}
	cr_assert_eq(id_of(&t, "one more"), NL_INTERN_OVERFLOW);
	cr_assert_eq(id_of(&t, "v77"), 77);
}

/* ---- threads ------------------------------------------------------------------ */

#define THREADS 8
#define KEYS 96
#define LIMIT 60
#define ROUNDS 200

static char keys[KEYS][16];
static int seen[THREADS][KEYS];

struct worker {
	const struct nl_intern *t;
	int n;
};

static void *intern_all(void *arg)
{
	const struct worker *w = arg;
	/* Every thread starts at a different key and goes its own way round,
	 * so the same keys meet in every order. */
	for (int r = 0; r < ROUNDS; r++)
		for (int i = 0; i < KEYS; i++) {
			int k = (w->n % 2 ? KEYS - 1 - i : i) + w->n * 7;
			k %= KEYS;
			int id = id_of(w->t, keys[k]);
			if (id == NL_INTERN_OVERFLOW)
				continue;
			if (seen[w->n][k] < 0)
				seen[w->n][k] = id;
			else if (seen[w->n][k] != id)
				seen[w->n][k] = -2;   /* an id that changed */
		}
	return NULL;
}

Test(table, threads_agree_on_ids_within_the_limit)
{
	for (int k = 0; k < KEYS; k++)
		snprintf(keys[k], sizeof keys[k], "key-%d", k);
	for (int attempt = 0; attempt < 20; attempt++) {
		setup();
		memset(seen, 0xff, sizeof seen);
		struct nl_intern t = names(LIMIT, NL_TABLE_SPINS);
		pthread_t th[THREADS];
		struct worker w[THREADS];
		for (int i = 0; i < THREADS; i++) {
			w[i] = (struct worker){ &t, i };
			cr_assert_eq(pthread_create(&th[i], NULL, intern_all, &w[i]), 0);
		}
		for (int i = 0; i < THREADS; i++)
			pthread_join(th[i], NULL);
		int owner[LIMIT];
		memset(owner, 0xff, sizeof owner);
		int given = 0;
		for (int k = 0; k < KEYS; k++) {
			int id = -1;
			for (int i = 0; i < THREADS; i++) {
				int s = seen[i][k];
				cr_assert_neq(s, -2, "key %d changed its id", k);
				if (s < 0)
					continue;
				cr_assert_lt(s, LIMIT);
				if (id < 0)
					id = s;
				cr_assert_eq(s, id, "threads disagree on key %d: %d and %d", k, s, id);
			}
			if (id < 0)
				continue;
			cr_assert_eq(owner[id], -1, "id %d given to keys %d and %d", id, owner[id], k);
			owner[id] = k;
			cr_assert_str_eq(text[id], keys[k]);
			given++;
		}
		/* The limit is reached (more keys than ids), never passed. */
		cr_assert_eq(given, LIMIT);
		/* Everything settled: every value with an id finds it at once. */
		for (int id = 0; id < LIMIT; id++)
			cr_assert_eq(id_of(&t, keys[owner[id]]), id);
	}
}

/* ---- a slot claimed for good ------------------------------------------------ */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(table, a_claim_never_published_is_busy_not_a_hang)
{
	struct nl_intern t = names(8, NL_TABLE_SPINS);
	/* The slot "stuck" would go to, claimed by a maker that never ends. */
	uint32_t h = nl_bytes_key("stuck", 5);
	struct nl_slot *e = nl_table_slot(&t.table, h % SLOTS);
	atomic_store(&e->state, NL_SLOT_CLAIMED);
	double t0 = now();
	for (int i = 0; i < 100; i++)
		cr_assert_eq(id_of(&t, "stuck"), NL_INTERN_OVERFLOW);
	cr_assert_lt(now() - t0, 5.0, "a hundred bounded waits took %.1f s", now() - t0);
	/* With no spins, busy at once. */
	struct nl_intern quick = names(8, 0);
	cr_assert_eq(id_of(&quick, "stuck"), NL_INTERN_OVERFLOW);
	cr_assert_eq(atomic_load(&count), 0u);
	/* What a fork child does with it: forgotten, then made anew. */
	nl_table_forget(&t.table);
	cr_assert_eq(atomic_load(&e->state), NL_SLOT_EMPTY);
	cr_assert_eq(id_of(&t, "stuck"), 0);
	cr_assert_eq(id_of(&t, "stuck"), 0);
}

Test(table, forget_keeps_ready_and_dead_slots)
{
	struct nl_intern t = names(1, NL_TABLE_SPINS);
	cr_assert_eq(id_of(&t, "kept"), 0);
	/* A slot given up (another insertion took the last id first). */
	struct nl_slot *dead = nl_table_slot(&t.table, nl_bytes_key("hole", 4) % SLOTS);
	atomic_store(&dead->state, NL_SLOT_DEAD);
	nl_table_forget(&t.table);
	cr_assert_eq(atomic_load(&dead->state), NL_SLOT_DEAD);
	cr_assert_eq(id_of(&t, "kept"), 0);
	cr_assert_eq(id_of(&t, "hole"), NL_INTERN_OVERFLOW);
}

/* ---- a cache by key, through claim and publish -------------------------------- */

struct cached {
	struct nl_slot head;
	uint64_t key;
	int value;
};
static struct cached cache[16];

static bool same_key(const struct nl_slot *e, const void *key)
{
	return ((const struct cached *)e)->key == *(const uint64_t *)key;
}

static int cache_get(const struct nl_table *t, uint64_t key, int make)
{
	struct nl_slot *e;
	uint32_t id;
	switch (nl_table_claim(t, (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32), same_key, &key, &e, &id)) {
	case NL_TABLE_FOUND:
		cr_assert_eq(id, 0u);
		return ((struct cached *)e)->value;
	case NL_TABLE_CLAIMED:
		((struct cached *)e)->key = key;
		((struct cached *)e)->value = make;
		nl_table_publish(e, 0);
		return make;
	case NL_TABLE_BUSY:
		return -1;
	default:
		return -2;
	}
}

Test(table, cache_by_key)
{
	memset(cache, 0, sizeof cache);
	const struct nl_table t = { cache, sizeof cache[0], 16, 4, 0, NULL, 0 };
	cr_assert_eq(cache_get(&t, 7, 70), 70);
	cr_assert_eq(cache_get(&t, 7, 71), 70);
	cr_assert_eq(cache_get(&t, 8, 80), 80);
	cr_assert_eq(cache_get(&t, 8, 81), 80);
	/* Sixty-four keys, sixteen slots, four probes a key: at most sixteen are
	 * made, the others find no room, and those made are found again. */
	memset(cache, 0, sizeof cache);
	const struct nl_table one = { cache, sizeof cache[0], 16, 4, 0, NULL, 0 };
	int made = 0, full = 0;
	for (uint64_t k = 1; k <= 64; k++) {
		int v = cache_get(&one, k, (int)k);
		made += v == (int)k;
		full += v == -2;
	}
	cr_assert_eq(made + full, 64);
	cr_assert_leq(made, 16);
	for (uint64_t k = 1; k <= 64; k++) {
		int v = cache_get(&one, k, -3);
		cr_assert(v == (int)k || v == -2);
	}
	/* A slot being made answers busy at once, with no spins. */
	memset(cache, 0, sizeof cache);
	uint64_t key = 5;
	struct nl_slot *first = nl_table_slot(&t, (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) % 16);
	atomic_store(&first->state, NL_SLOT_CLAIMED);
	cr_assert_eq(cache_get(&t, key, 50), -1);
}
