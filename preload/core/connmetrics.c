#include "connmetrics.h"

#include <stddef.h>

#include "dest.h"
#include "instruments.h"
#include "registry.h"

#define ATTR_DEST "nemo.gym.http.destination.server.name"
#define ATTR_OUTCOME "nemo.gym.http.connection_pool.queue_outcome"
#define ATTR_CONSTRAINT "nemo.gym.http.connection_pool.queue_constraint"

static struct nl_instrument *connects;
static struct nl_instrument *queue;
static struct nl_series *connect_series[NL_DEST_SLOTS];
static struct nl_series *queue_series[NL_DEST_SLOTS][2];

void nl_connmetrics_init(void)
{
	connects = nl_inst(NL_I_CONNECT_TOTAL);
	queue = nl_inst(NL_I_QUEUE_MS);
	if (!connects || !queue)
		return;
	static const char *const outcomes[2] = { "ok", "abandoned" };
	for (int d = 0; d < NL_DEST_SLOTS; d++) {
		if (d > nl_dest_count() && d != NL_DEST_OVERFLOW)
			continue;
		if (d == NL_DEST_OVERFLOW) {
			connect_series[d] = nl_instrument_overflow(connects);
			queue_series[d][0] = queue_series[d][1] = nl_instrument_overflow(queue);
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
