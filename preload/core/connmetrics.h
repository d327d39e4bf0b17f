/* The connection metrics of NeMo Gym (gym.http.connection_pool.*), recorded
 * by the socket hooks. Every function here is lock-free, allocation-free and
 * async-signal-safe: the series are created ahead of time by nl_connmetrics_init. */
#ifndef NL_CONNMETRICS_H
#define NL_CONNMETRICS_H

#include <stdint.h>

enum nl_queue_outcome { NL_QUEUE_OK, NL_QUEUE_ABANDONED };

/* Registers the instruments and one series per destination (and outcome). */
void nl_connmetrics_init(void);

/* One connect() attempt to destination dest (an index from dest.h). */
void nl_conn_attempt(int dest);
/* An acquisition that had to wait ended after wait_ns. */
void nl_conn_wait(int dest, enum nl_queue_outcome outcome, uint64_t wait_ns);

#endif
