/* SPDX-License-Identifier: Apache-2.0 */
/* The connection metrics of NeMo Gym (gym.http.connection_pool.*), recorded
 * by the socket hooks. Every function here is lock-free, allocation-free and
 * async-signal-safe: the series are created ahead of time by nl_connmetrics_init. */
#ifndef NL_CONNMETRICS_H
#define NL_CONNMETRICS_H

#include <stdint.h>

enum nl_queue_outcome { NL_QUEUE_OK, NL_QUEUE_ABANDONED };
/* Which limit of the client's pool made an acquisition wait. The socket
 * layer cannot see a pool: its samples are always NL_QUEUE_UNKNOWN. */
enum nl_queue_constraint { NL_QUEUE_UNKNOWN, NL_QUEUE_TOTAL, NL_QUEUE_PER_HOST };

/* Registers the instruments and one series per destination (and outcome). */
void nl_connmetrics_init(void);

/* One connect() attempt to destination dest (an index from dest.h): into
 * connect_total, or into nemolens.connection.opened once a pool adapter is
 * active (connect_total then counts the adapter's acquisitions); and into
 * its call site's count (callsite.h), caller being where connect() was
 * called from. */
void nl_conn_attempt(int dest, const void *caller);
/* One acquisition of a connection from a client's pool, seen by a language
 * adapter (adapter.h): NeMo Gym's connect_total. */
void nl_conn_pool_acquire(int dest);
/* An acquisition that had to wait ended after wait_ns (the socket layer's
 * handshake wait). Ignored once a pool adapter is active in the process. */
void nl_conn_wait(int dest, enum nl_queue_outcome outcome, uint64_t wait_ns);

/* A wait for a slot of the client's own pool, seen by a language adapter
 * (adapter.h), into the same instrument. Not for hooks: the first sample of
 * a (destination, outcome, constraint) creates its series, which may lock
 * and allocate. */
void nl_conn_pool_wait(int dest, enum nl_queue_outcome outcome, enum nl_queue_constraint constraint,
		       double wait_ms);
/* An adapter sees this process's pool: from now on the socket layer's
 * handshake waits are no queue samples (they are not pool waits), and its
 * connect() calls count in nemolens.connection.opened, connect_total being
 * the adapter's acquisitions. Not for hooks (it creates series). Inherited
 * by fork children, which run the same adapter. */
void nl_conn_pool_adapter_on(void);

#endif
