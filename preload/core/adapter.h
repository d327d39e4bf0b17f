/* SPDX-License-Identifier: Apache-2.0 */
/* The entry points of the language adapters: code that runs inside the
 * program's own runtime (the Python adapter, preload/python) and sees what
 * the socket calls cannot, a client's connection pool. They are exported
 * from the shared libraries with the rest of nemolens_* (the Python adapter
 * calls them through ctypes), but they are not the public C API of
 * nemolens.h: their only caller is the adapter shipped with the same build.
 *
 * Each is safe from any thread, keeps errno, and does nothing while the
 * shim does not record.
 */
#ifndef NL_ADAPTER_H
#define NL_ADAPTER_H

/* One acquisition that waited wait_ms for a slot of the pool of a client
 * whose request goes to host (a name, or an address literal; IPv6 in
 * brackets) and port (-1: unknown). outcome: 0 ok (a slot was had),
 * 1 abandoned (timeout, cancellation, error while waiting). constraint:
 * 0 unknown, 1 total (the pool's limit of all connections), 2 per_host.
 * The destination is named by the NEMOLENS_DESTINATIONS rules as
 * nl_dest_match_name does. Returns 0 when recorded, -1 when the arguments
 * are not valid or nothing is recorded. */
int nemolens_pool_wait(const char *host, int port, double wait_ms, int outcome, int constraint);

/* The index of the destination of host and port, named as nemolens_pool_wait
 * names it, or -1 when the arguments are not valid or nothing is recorded.
 * The rules are fixed at load, so the adapter keeps the index of each host
 * and port it has seen and pays for this once per destination, not per
 * request. */
int nemolens_pool_destination(const char *host, int port);

/* One acquisition of a connection from a client's pool (a request that asks
 * the pool for a connection, whether it reuses one, opens one, waits or
 * fails) to a destination nemolens_pool_destination gave: one more in
 * gym.http.connection_pool.connect_total, as NeMo Gym counts it. Called on
 * every request of a pooled client, so it does no more than that; it never
 * blocks but at the first record of a process, which starts its exporter
 * and waits for nothing of the program's (the adapter calls it without
 * releasing Python's lock). An index out of range is ignored. */
void nemolens_pool_acquire(int destination);

/* An adapter has hooked this process's pools: the socket layer's handshake
 * waits are no queue samples from now on, and connect_total counts the
 * adapter's acquisitions, the socket layer's connects going to
 * nemolens.connection.opened (connmetrics.h). */
void nemolens_pool_adapter_active(void);

/* The Python runtime, as NeMo Gym's observer names it (gym.event_loop.*,
 * gym.gc.*). The adapter measures in the program's interpreter and hands
 * each value over here; these only record. Values that cannot be (NaN,
 * negative, a generation other than 0 to 2) are ignored. */

/* One wake-up of the adapter's probe on an event loop, lag_ms after the
 * time it asked for: gym.event_loop.lag_ms. */
void nemolens_loop_lag(double lag_ms);

/* The tasks not yet done on the process's running event loops:
 * gym.event_loop.tasks. */
void nemolens_loop_tasks(long long tasks);

/* One collection of generation (0 to 2) that took pause_ms and freed
 * collected objects, finding uncollectable ones it could not:
 * gym.gc.pause_duration_ms, collections_total, collected_total and
 * uncollectable_total, by nemo.gym.gc.generation. */
void nemolens_gc_collection(int generation, double pause_ms, long long collected, long long uncollectable);

/* gc.get_count(), generations 0, 1 and 2: gym.gc.count. */
void nemolens_gc_count(long long count0, long long count1, long long count2);

/* One line in the shim's log (log.h), at most once per key and process:
 * an adapter reports that it switched itself off, and why. */
void nemolens_adapter_log(const char *key, const char *message);

#endif
