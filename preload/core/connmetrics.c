/* SPDX-License-Identifier: Apache-2.0 */
#include "connmetrics.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "callsite.h"
#include "dest.h"
#include "instruments.h"
#include "registry.h"

#define ATTR_DEST "nemo.gym.http.destination.server.name"
#define ATTR_OUTCOME "nemo.gym.http.connection_pool.queue_outcome"
#define ATTR_CONSTRAINT "nemo.gym.http.connection_pool.queue_constraint"

/* The series a counted connect() adds to, per destination. Destination 0
 * (no name) apart from the named ones: a process with no
 * NEMOLENS_DESTINATIONS never touches the table's pages. The overflow is
 * the instrument's own. */
struct attempt_series {
	struct nl_instrument *inst;
	struct nl_series *other;
	struct nl_series *named[NL_DEST_SLOTS];
};
/* connect_total's, and nemolens.connection.opened's: made when a pool
 * adapter turns on, before the hooks may record into them. */
static struct attempt_series connect_set, opened_set;
/* Which of the two connect() counts: once an adapter counts acquisitions
 * as connect_total, a new socket is "opened". One load decides, so the
 * connect path costs what it did before adapters existed. */
static const struct attempt_series *_Atomic attempts = &connect_set;
static struct nl_instrument *queue;
/* queue, for the waits the socket layer measures; NULL once a pool
 * adapter measures them itself (one load decides, as above). */
static struct nl_instrument *_Atomic socket_waits;
static struct nl_series *queue_other[2];
static struct nl_series *queue_series[NL_DEST_SLOTS][2];   /* constraint unknown */
/* The adapter's total and per_host series, made on first use: most
 * processes have no pool adapter, and they pay nothing for these. */
static struct nl_series *_Atomic pool_series[NL_DEST_SLOTS][2][2];
static const char *const outcomes[2] = { "ok", "abandoned" };

void nl_connmetrics_init(void)
{
	struct nl_instrument *connects = nl_inst(NL_I_CONNECT_TOTAL);
	queue = nl_inst(NL_I_QUEUE_MS);
	if (!connects || !queue)
		return;
	for (int d = 0; d < NL_DEST_SLOTS; d++) {
		if (d > nl_dest_count() && d != NL_DEST_OVERFLOW)
			continue;
		if (d == NL_DEST_OVERFLOW)
			continue;   /* the instruments' own, taken at use: the tables' last page stays untouched */
		struct nl_attr a = NL_ATTR_S(ATTR_DEST, nl_dest_name(d));
		*(d ? &connect_set.named[d] : &connect_set.other) = nl_series_get(connects, &a, 1);
		for (int o = 0; o < 2; o++) {
			struct nl_attr qa[3] = { a, NL_ATTR_S(ATTR_OUTCOME, outcomes[o]),
						 NL_ATTR_S(ATTR_CONSTRAINT, "unknown") };
			*(d ? &queue_series[d][o] : &queue_other[o]) = nl_series_get(queue, qa, 3);
		}
	}
	atomic_store_explicit(&socket_waits, queue, memory_order_relaxed);
	connect_set.inst = connects;   /* last: the hooks count from here on */
}

static void count(const struct attempt_series *set, int dest)
{
	if (dest < 0 || dest >= NL_DEST_SLOTS || !set->inst)
		return;
	struct nl_series *s = dest == 0		       ? set->other
			      : dest == NL_DEST_OVERFLOW ? nl_instrument_overflow(set->inst)
							 : set->named[dest];
	if (s)
		nl_counter_add(s, 1);
}

void nl_conn_attempt(int dest, const void *caller)
{
	count(atomic_load_explicit(&attempts, memory_order_acquire), dest);
	nl_callsite_count(dest, caller);
}

void nl_conn_pool_acquire(int dest) { count(&connect_set, dest); }

/* The series of an acquisition with no constraint known. */
static struct nl_series *queue_series_of(int dest, enum nl_queue_outcome outcome)
{
	return dest == 0		  ? queue_other[outcome]
	       : dest == NL_DEST_OVERFLOW ? nl_instrument_overflow(queue)
					  : queue_series[dest][outcome];
}

void nl_conn_wait(int dest, enum nl_queue_outcome outcome, uint64_t wait_ns)
{
	struct nl_instrument *q = atomic_load_explicit(&socket_waits, memory_order_relaxed);
	if (dest < 0 || dest >= NL_DEST_SLOTS || !q)
		return;
	struct nl_series *s = queue_series_of(dest, outcome);
	if (s)
		nl_hist_record(q, s, (double)wait_ns / 1e6);
}

void nl_conn_pool_adapter_on(void)
{
	if (atomic_load(&attempts) == &opened_set || !connect_set.inst)
		return;
	/* Every series the hooks may pick once the flag is up, made first:
	 * hooks never create one. Two threads may both get here: the registry
	 * hands both the same instrument and series. */
	struct nl_instrument *inst = nl_inst(NL_I_CONN_OPENED);
	if (!inst)
		return;   /* no memory: connect_total stays the socket count */
	for (int d = 0; d <= nl_dest_count() && d < NL_DEST_OVERFLOW; d++) {
		struct nl_attr a = NL_ATTR_S(ATTR_DEST, nl_dest_name(d));
		*(d ? &opened_set.named[d] : &opened_set.other) = nl_series_get(inst, &a, 1);
	}
	opened_set.inst = inst;
	atomic_store_explicit(&socket_waits, NULL, memory_order_relaxed);
	atomic_store_explicit(&attempts, &opened_set, memory_order_release);
}

static struct nl_series *pool_series_for(int dest, enum nl_queue_outcome outcome,
					 enum nl_queue_constraint constraint)
{
	if (constraint == NL_QUEUE_UNKNOWN || dest == NL_DEST_OVERFLOW)
		return queue_series_of(dest, outcome);
	struct nl_series *_Atomic *slot = &pool_series[dest][outcome][constraint - 1];
	struct nl_series *s = atomic_load_explicit(slot, memory_order_acquire);
	if (!s) {
		/* Two threads may both get here: the registry hands both the one
		 * series with these attributes. */
		struct nl_attr qa[3] = { NL_ATTR_S(ATTR_DEST, nl_dest_name(dest)),
					 NL_ATTR_S(ATTR_OUTCOME, outcomes[outcome]),
					 NL_ATTR_S(ATTR_CONSTRAINT, constraint == NL_QUEUE_TOTAL ? "total" : "per_host") };
		s = nl_series_get(queue, qa, 3);
		atomic_store_explicit(slot, s, memory_order_release);
	}
	return s;
}

void nl_conn_pool_wait(int dest, enum nl_queue_outcome outcome, enum nl_queue_constraint constraint,
		       double wait_ms)
{
	if (!queue || dest < 0 || dest >= NL_DEST_SLOTS || (unsigned)outcome > NL_QUEUE_ABANDONED ||
	    (unsigned)constraint > NL_QUEUE_PER_HOST)
		return;
	struct nl_series *s = pool_series_for(dest, outcome, constraint);
	if (s)
		nl_hist_record(queue, s, wait_ms);
}
