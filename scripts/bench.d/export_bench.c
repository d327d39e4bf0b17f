/* SPDX-License-Identifier: Apache-2.0 */
/* Exporter cost for scripts/bench: CPU time and bytes of one export.
 *
 *   export_bench URL N REPEATS
 *
 * Linked against the project's static test library (libnl_testlib.a: the same
 * objects as the .so). Registers N series of a counter shaped like
 * gym.http.connection_pool.connect_total (one string attribute each), records
 * into every one, then exports REPEATS times, exactly as the exporter thread
 * does: nl_snapshot_take + nl_otlp_encode + nl_transport_send to URL (one kept-
 * alive connection, as in the shim). The first export (dlopen of libcurl,
 * connection set-up) is a warm-up and not measured. CPU time is the process's
 * (CLOCK_PROCESS_CPUTIME_ID: libcurl's work included).
 *
 * Prints one line:  points BYTES encode_us MEDIAN send_us MEDIAN total_us MEDIAN
 * With the default cardinality limit (2000), the 2000th series is the overflow
 * series, so N=2000 exports 2000 points.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export.h"
#include "registry.h"

/* The library carries the shim's runtime: keep it from recording this program. */
__attribute__((constructor(101))) static void keep_shim_out(void) { setenv("NEMOLENS_ENABLED", "0", 1); }

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(int realtime)
{
	struct timespec ts;
	clock_gettime(realtime ? CLOCK_REALTIME : CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: export_bench URL N REPEATS\n");
		return 2;
	}
	const char *url = argv[1];
	int n = atoi(argv[2]), reps = atoi(argv[3]);
	if (reps < 1)
		reps = 1;
	struct nl_instrument *inst = nl_instrument_get("gym.http.connection_pool.connect_total", "{connection}",
						       "Connection attempts (connect calls) per destination server",
						       NL_COUNTER, NULL, 0);
	for (int i = 0; i < n; i++) {
		char *name = malloc(32);
		snprintf(name, 32, "destination-%05d", i);
		struct nl_attr a = NL_ATTR_S("nemo.gym.http.destination.server.name", name);
		nl_counter_add(nl_series_get(inst, &a, 1), 1 + (uint64_t)i);
	}
	/* A resource like the shim's own. */
	static const struct nl_attr res[] = {
		NL_ATTR_S("service.name", "bench"),
		NL_ATTR_S("service.instance.id", "6f1c1d3e-8a7b-4c1e-9d7f-0a1b2c3d4e5f"),
		NL_ATTR_S("host.name", "bench-host"),
		NL_ATTR_I("process.pid", 4242),
		NL_ATTR_S("process.executable.name", "export_bench"),
		NL_ATTR_S("telemetry.sdk.name", "nemolens-preload"),
		NL_ATTR_S("telemetry.sdk.language", "c"),
		NL_ATTR_S("telemetry.sdk.version", "0.1.0"),
		NL_ATTR_S("nemo.gym.server.name", "bench"),
		NL_ATTR_S("nemo.gym.server.type", "process"),
	};
	struct nl_transport_config tc = { .url = url, .timeout_ms = 10000, .user_agent = "nemolens-preload/bench" };
	struct nl_transport *t = nl_transport_new(&tc);
	if (!t) {
		fprintf(stderr, "export_bench: no transport (libcurl missing?)\n");
		return 1;
	}
	uint64_t start = wall_ns(1);
	uint64_t *enc = calloc((size_t)reps, sizeof *enc), *snd = calloc((size_t)reps, sizeof *snd),
		 *tot = calloc((size_t)reps, sizeof *tot);
	size_t bytes = 0, points = 0;
	int failed = 0;
	for (int r = -1; r < reps; r++) {
		uint64_t c0 = cpu_ns();
		struct nl_snapshot *snap = nl_snapshot_take(false, false, start, wall_ns(1));
		snap->resource = res;
		snap->n_resource = sizeof res / sizeof res[0];
		snap->scope_name = "nemo.lens";
		snap->scope_version = "0.1.0";
		uint8_t *body;
		size_t len;
		if (nl_otlp_encode(snap, &body, &len) != 0)
			return 1;
		uint64_t c1 = cpu_ns();
		uint64_t deadline = wall_ns(0) + 10000000000ull;
		enum nl_send_result sr = nl_transport_send(t, body, len, deadline, 0, NULL);
		uint64_t c2 = cpu_ns();
		if (sr != NL_SEND_OK)
			failed++;
		bytes = len;
		points = snap->n_points;
		free(body);
		nl_snapshot_free(snap);
		if (r >= 0) {
			enc[r] = c1 - c0;
			snd[r] = c2 - c1;
			tot[r] = c2 - c0;
		}
	}
	qsort(enc, (size_t)reps, sizeof *enc, cmp);
	qsort(snd, (size_t)reps, sizeof *snd, cmp);
	qsort(tot, (size_t)reps, sizeof *tot, cmp);
	printf("points %zu bytes %zu encode_us %.1f send_us %.1f total_us %.1f failed %d\n", points, bytes,
	       enc[reps / 2] / 1e3, snd[reps / 2] / 1e3, tot[reps / 2] / 1e3, failed);
	nl_transport_free(t);
	return failed ? 1 : 0;
}
