/* SPDX-License-Identifier: Apache-2.0 */
#include "adapter.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "callsite.h"
#include "check.h"
#include "connmetrics.h"
#include "dest.h"
#include "instruments.h"
#include "log.h"
#include "registry.h"
#include "state.h"

/* NeMo Gym's buckets end at 30 s; a wait of more than a day is no wait a
 * program had but a broken clock. */
#define MAX_WAIT_MS (86400.0 * 1000.0)

/* Exported, as the C API of lens.c is; the version script names nemolens_*. */
#define API __attribute__((visibility("default")))

/* An adapter is armed: the switch of connmetrics (nl_conn_pool_adapter_on)
 * is made by its first record, after the kick that makes the process's
 * instruments, so a program that imports a client and never uses it starts
 * no recording. Its pool's connects all follow an acquisition. */
static _Atomic bool armed;

static void kick(void)
{
	nl_runtime_kick();   /* before the first write (state.h) */
	if (atomic_load_explicit(&armed, memory_order_relaxed)) {
		atomic_store_explicit(&armed, false, memory_order_relaxed);
		nl_conn_pool_adapter_on();
	}
}

API int nemolens_pool_wait(const char *host, int port, double wait_ms, int outcome, int constraint)
{
	NL_KEEP_ERRNO;
	if (!atomic_load_explicit(&nl_recording, memory_order_relaxed) || !host || !isfinite(wait_ms) ||
	    wait_ms < 0 || wait_ms > MAX_WAIT_MS || outcome < NL_QUEUE_OK || outcome > NL_QUEUE_ABANDONED ||
	    constraint < NL_QUEUE_UNKNOWN || constraint > NL_QUEUE_PER_HOST || port < -1 || port > 65535)
		return -1;
	int dest = nl_dest_match_name(host, strnlen(host, 1024), port);
	kick();
	nl_conn_pool_wait(dest, (enum nl_queue_outcome)outcome, (enum nl_queue_constraint)constraint, wait_ms);
	return 0;
}

API int nemolens_pool_destination(const char *host, int port)
{
	NL_KEEP_ERRNO;
	if (!atomic_load_explicit(&nl_recording, memory_order_relaxed) || !host || port < -1 || port > 65535)
		return -1;
	return nl_dest_match_name(host, strnlen(host, 1024), port);
}

API void nemolens_pool_acquire(int destination)
{
	if (!atomic_load_explicit(&nl_recording, memory_order_relaxed) || destination < 0 ||
	    destination >= NL_DEST_SLOTS)
		return;
	NL_KEEP_ERRNO;
	kick();
	nl_conn_pool_acquire(destination);
}

API void nemolens_pool_adapter_active(void)
{
	if (atomic_load_explicit(&nl_recording, memory_order_relaxed))
		atomic_store(&armed, true);
}

/* ---- the Python runtime ------------------------------------------------ */

#define ATTR_GENERATION "nemo.gym.gc.generation"
#define GENERATIONS 3
/* Counts beyond this in one collection or one sample are no count the
 * interpreter gave but garbage. */
#define MAX_COUNT (1LL << 48)

/* The series, made at first use (these are not hooks: they may lock and
 * allocate); a race makes both callers the one series the registry has. */
enum { S_LAG, S_TASKS, S_N };
static struct nl_series *_Atomic plain[S_N];
static struct nl_series *_Atomic by_generation[NL_I_GC_COUNT - NL_I_GC_PAUSE_MS + 1][GENERATIONS];

static struct nl_series *plain_series(int which, enum nl_inst_id id, struct nl_instrument **inst)
{
	*inst = nl_inst(id);
	struct nl_series *s = atomic_load_explicit(&plain[which], memory_order_acquire);
	if (!s && *inst) {
		s = nl_series_get(*inst, NULL, 0);
		atomic_store_explicit(&plain[which], s, memory_order_release);
	}
	return s;
}

static struct nl_series *generation_series(enum nl_inst_id id, int generation, struct nl_instrument **inst)
{
	*inst = nl_inst(id);
	struct nl_series *_Atomic *slot = &by_generation[id - NL_I_GC_PAUSE_MS][generation];
	struct nl_series *s = atomic_load_explicit(slot, memory_order_acquire);
	if (!s && *inst) {
		struct nl_attr a = NL_ATTR_I(ATTR_GENERATION, generation);
		s = nl_series_get(*inst, &a, 1);
		atomic_store_explicit(slot, s, memory_order_release);
	}
	return s;
}

static bool recording(void) { return atomic_load_explicit(&nl_recording, memory_order_relaxed); }

API void nemolens_loop_lag(double lag_ms)
{
	if (!recording() || !isfinite(lag_ms) || lag_ms < 0 || lag_ms > MAX_WAIT_MS)
		return;
	NL_KEEP_ERRNO;
	nl_runtime_kick();
	struct nl_instrument *inst;
	struct nl_series *s = plain_series(S_LAG, NL_I_LOOP_LAG_MS, &inst);
	if (s)
		nl_hist_record(inst, s, lag_ms);
}

API void nemolens_loop_tasks(long long tasks)
{
	if (!recording() || tasks < 0 || tasks > MAX_COUNT)
		return;
	NL_KEEP_ERRNO;
	nl_runtime_kick();
	struct nl_instrument *inst;
	struct nl_series *s = plain_series(S_TASKS, NL_I_LOOP_TASKS, &inst);
	if (s)
		nl_gauge_set_int(s, tasks);
}

API void nemolens_gc_collection(int generation, double pause_ms, long long collected, long long uncollectable)
{
	if (!recording() || generation < 0 || generation >= GENERATIONS || !isfinite(pause_ms) || pause_ms < 0 ||
	    pause_ms > MAX_WAIT_MS || collected < 0 || collected > MAX_COUNT || uncollectable < 0 ||
	    uncollectable > MAX_COUNT)
		return;
	NL_KEEP_ERRNO;
	nl_runtime_kick();
	struct nl_instrument *inst;
	struct nl_series *s = generation_series(NL_I_GC_PAUSE_MS, generation, &inst);
	if (s)
		nl_hist_record(inst, s, pause_ms);
	if ((s = generation_series(NL_I_GC_COLLECTIONS, generation, &inst)))
		nl_counter_add(s, 1);
	/* Zero adds nothing, but the series is there from the first
	 * collection: a dashboard's rate() sees 0, not no data. */
	if ((s = generation_series(NL_I_GC_COLLECTED, generation, &inst)))
		nl_counter_add(s, (uint64_t)collected);
	if ((s = generation_series(NL_I_GC_UNCOLLECTABLE, generation, &inst)))
		nl_counter_add(s, (uint64_t)uncollectable);
}

API void nemolens_gc_count(long long count0, long long count1, long long count2)
{
	const long long counts[GENERATIONS] = { count0, count1, count2 };
	if (!recording())
		return;
	NL_KEEP_ERRNO;
	nl_runtime_kick();
	for (int g = 0; g < GENERATIONS; g++) {
		if (counts[g] < 0 || counts[g] > MAX_COUNT)
			continue;
		struct nl_instrument *inst;
		struct nl_series *s = generation_series(NL_I_GC_COUNT, g, &inst);
		if (s)
			nl_gauge_set_int(s, counts[g]);
	}
}

API void nemolens_adapter_log(const char *key, const char *message)
{
	NL_KEEP_ERRNO;
	if (!message)
		return;
	/* Keys are the adapter's own short names; bound what a caller can pass. */
	char k[64];
	snprintf(k, sizeof k, "adapter.%s", key ? key : "python");
	nl_warn_once(k, "%.400s", message);
}

API int nemolens_call_site(const char *function, const char *file, long line)
{
	if (!atomic_load_explicit(&nl_recording, memory_order_relaxed) || !function)
		return -1;
	return nl_callsite_named(function, file, line);
}

API void nemolens_call_site_next(int site) { nl_callsite_next(site); }
