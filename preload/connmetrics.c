#include "connmetrics.h"

#include <stddef.h>

#include "dest.h"
#include "registry.h"

const double nl_queue_bounds_ms[17] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5,  5,    10,
					25,   50,   100, 250,  500, 1000, 5000, 30000 };

#define ATTR_DEST "nemo.gym.http.destination.server.name"
#define ATTR_OUTCOME "nemo.gym.http.connection_pool.queue_outcome"
#define ATTR_CONSTRAINT "nemo.gym.http.connection_pool.queue_constraint"

static struct nl_instrument *connects;
static struct nl_instrument *queue;
static struct nl_series *connect_series[NL_DEST_SLOTS];
static struct nl_series *queue_series[NL_DEST_SLOTS][2];

void nl_connmetrics_init(void)
{
	connects = nl_instrument_get("gym.http.connection_pool.connect_total", "{connection}",
				     "Connection attempts (connect calls) per destination server", NL_COUNTER, NULL, 0);
	queue = nl_instrument_get("gym.http.connection_pool.queue_duration_ms", "ms",
				  "Time a connection acquisition waited until it was established or abandoned",
				  NL_HISTOGRAM, nl_queue_bounds_ms, 17);
	if (!connects || !queue)
		return;
	static const char *const outcomes[2] = { "ok", "abandoned" };
	for (int d = 0; d < NL_DEST_SLOTS; d++) {
		if (d > nl_dest_count() && d != NL_DEST_OVERFLOW)
			continue;
		if (d == NL_DEST_OVERFLOW) {
			connect_series[d] = &connects->overflow;
			queue_series[d][0] = queue_series[d][1] = &queue->overflow;
			continue;
		}
		struct nl_attr a = NL_ATTR_S(ATTR_DEST, nl_dest_name(d));
		connect_series[d] = nl_series_get(connects, &a, 1);
		for (int o = 0; o < 2; o++) {
			struct nl_attr qa[3] = { a, NL_ATTR_S(ATTR_OUTCOME, outcomes[o]),
						 NL_ATTR_S(ATTR_CONSTRAINT, "unknown") };
			queue_series[d][o] = nl_series_get(queue, qa, 3);
		}
	}
}

void nl_conn_attempt(int dest)
{
	if (dest >= 0 && dest < NL_DEST_SLOTS && connect_series[dest])
		nl_counter_add(connect_series[dest], 1);
}

void nl_conn_wait(int dest, enum nl_queue_outcome outcome, uint64_t wait_ns)
{
	if (dest >= 0 && dest < NL_DEST_SLOTS && queue_series[dest][outcome])
		nl_hist_record(queue, queue_series[dest][outcome], (double)wait_ns / 1e6);
}
