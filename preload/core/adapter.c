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
#include "log.h"
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
