/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus names, units and escaping (preload/launcher/promname.h). The
 * expected values are those of the OpenTelemetry specification's
 * "Prometheus and OpenMetrics compatibility" section and of the exposition
 * formats: invalid characters become '_', runs of '_' one; units spelled
 * out, braces dropped, foo/bar as foo_per_bar, 1 as ratio for gauges;
 * _total for counters after the unit; label values escaped. */
#include <criterion/criterion.h>
#include <math.h>

#include "promname.h"

static const struct {
	const char *name, *unit;
	enum nl_prom_type type;
	const char *want, *want_family;
} names[] = {
	/* Dots and other invalid characters become '_'. */
	{ "http.server.active_requests", "{request}", NL_PROM_GAUGE, "http_server_active_requests",
	  "http_server_active_requests" },
	{ "a.b-c/d e", "", NL_PROM_GAUGE, "a_b_c_d_e", "a_b_c_d_e" },
	/* A run of '_' (from a run of invalid characters) becomes one. */
	{ "a..b__c", "", NL_PROM_GAUGE, "a_b_c", "a_b_c" },
	/* Colons are valid in metric names. */
	{ "job:rate", "", NL_PROM_GAUGE, "job:rate", "job:rate" },
	/* A name may not start with a digit. */
	{ "9lives", "", NL_PROM_GAUGE, "_9lives", "_9lives" },
	/* Units spelled out and appended, before _total. */
	{ "http.server.request.duration", "s", NL_PROM_HISTOGRAM, "http_server_request_duration_seconds",
	  "http_server_request_duration_seconds" },
	{ "gym.rollout.duration_ms", "ms", NL_PROM_HISTOGRAM, "gym_rollout_duration_ms_milliseconds",
	  "gym_rollout_duration_ms_milliseconds" },
	{ "gym.host.memory.usage", "By", NL_PROM_GAUGE, "gym_host_memory_usage_bytes", "gym_host_memory_usage_bytes" },
	{ "process.cpu.time", "s", NL_PROM_COUNTER, "process_cpu_time_seconds_total", "process_cpu_time_seconds" },
	{ "net.io", "By", NL_PROM_COUNTER, "net_io_bytes_total", "net_io_bytes" },
	{ "latency", "us", NL_PROM_HISTOGRAM, "latency_microseconds", "latency_microseconds" },
	{ "uptime", "d", NL_PROM_GAUGE, "uptime_days", "uptime_days" },
	{ "disk.size", "MiBy", NL_PROM_GAUGE, "disk_size_mebibytes", "disk_size_mebibytes" },
	/* What is in braces is dropped: a count is unitless. */
	{ "gym.http.connection_pool.connect_total", "{connection}", NL_PROM_COUNTER,
	  "gym_http_connection_pool_connect_total", "gym_http_connection_pool_connect" },
	{ "requests", "{request}", NL_PROM_COUNTER, "requests_total", "requests" },
	/* foo/bar is foo_per_bar, and a time after '/' is singular. */
	{ "throughput", "By/s", NL_PROM_GAUGE, "throughput_bytes_per_second", "throughput_bytes_per_second" },
	{ "rl.throughput.tokens_per_sec", "{token}/s", NL_PROM_GAUGE, "rl_throughput_tokens_per_sec_per_second",
	  "rl_throughput_tokens_per_sec_per_second" },
	/* 1 is ratio, for gauges only. */
	{ "system.memory.utilization", "1", NL_PROM_GAUGE, "system_memory_utilization_ratio",
	  "system_memory_utilization_ratio" },
	{ "events", "1", NL_PROM_COUNTER, "events_total", "events" },
	{ "fill", "1", NL_PROM_HISTOGRAM, "fill", "fill" },
	/* A name that holds its unit already gets no second one. */
	{ "request_seconds", "s", NL_PROM_HISTOGRAM, "request_seconds", "request_seconds" },
	{ "bytes_sent", "By", NL_PROM_COUNTER, "bytes_sent_total", "bytes_sent" },
	/* A unit the table does not know is appended as it is, cleaned. */
	{ "distance", "furlong", NL_PROM_GAUGE, "distance_furlong", "distance_furlong" },
	/* No unit at all. */
	{ "queue.depth", "", NL_PROM_GAUGE, "queue_depth", "queue_depth" },
	{ "queue.depth", NULL, NL_PROM_GAUGE, "queue_depth", "queue_depth" },
};

Test(promname, metric_names)
{
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		char out[NL_PROM_NAME_MAX], family[NL_PROM_NAME_MAX];
		nl_prom_metric_name(names[i].name, names[i].unit, names[i].type, out, family);
		cr_expect_str_eq(out, names[i].want, "%s [%s]", names[i].name, names[i].unit ? names[i].unit : "NULL");
		cr_expect_str_eq(family, names[i].want_family, "%s [%s] family", names[i].name,
				 names[i].unit ? names[i].unit : "NULL");
	}
}

static const struct {
	const char *unit;
	enum nl_prom_type type;
	const char *want;
} units[] = {
	{ "ms", NL_PROM_HISTOGRAM, "milliseconds" }, { "s", NL_PROM_GAUGE, "seconds" },
	{ "ns", NL_PROM_GAUGE, "nanoseconds" },      { "min", NL_PROM_GAUGE, "minutes" },
	{ "h", NL_PROM_GAUGE, "hours" },             { "By", NL_PROM_GAUGE, "bytes" },
	{ "KiBy", NL_PROM_GAUGE, "kibibytes" },      { "GBy", NL_PROM_GAUGE, "gigabytes" },
	{ "Cel", NL_PROM_GAUGE, "celsius" },         { "%", NL_PROM_GAUGE, "percent" },
	{ "{packet}", NL_PROM_COUNTER, "" },         { "{token}", NL_PROM_HISTOGRAM, "" },
	{ "1", NL_PROM_GAUGE, "ratio" },             { "1", NL_PROM_COUNTER, "" },
	{ "m/s", NL_PROM_GAUGE, "meters_per_second" }, { "{request}/min", NL_PROM_GAUGE, "per_minute" },
	{ "", NL_PROM_GAUGE, "" },
};

Test(promname, units)
{
	for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
		char out[NL_PROM_NAME_MAX];
		nl_prom_unit(units[i].unit, units[i].type, out);
		cr_expect_str_eq(out, units[i].want, "unit %s", units[i].unit);
	}
}

static const struct {
	const char *key, *want;
} labels[] = {
	{ "http.request.method", "http_request_method" },
	{ "nemo.gym.http.destination.server.name", "nemo_gym_http_destination_server_name" },
	{ "server.port", "server_port" },
	{ "a..b", "a_b" },
	{ "a:b", "a_b" },   /* colons are for metric names only */
	{ "2xx", "key_2xx" },
	{ "k\xc3\xa9y", "k_y" },
	{ "_private", "_private" },
};

Test(promname, label_names)
{
	for (size_t i = 0; i < sizeof labels / sizeof *labels; i++) {
		char out[NL_PROM_NAME_MAX];
		nl_prom_label_name(labels[i].key, out);
		cr_expect_str_eq(out, labels[i].want, "key %s", labels[i].key);
	}
}

static const struct {
	const char *in, *want_label, *want_help_text, *want_help_om;
} escapes[] = {
	{ "plain", "plain", "plain", "plain" },
	{ "a\"b", "a\\\"b", "a\"b", "a\\\"b" },
	{ "back\\slash", "back\\\\slash", "back\\\\slash", "back\\\\slash" },
	{ "two\nlines", "two\\nlines", "two\\nlines", "two\\nlines" },
	{ "", "", "", "" },
	{ "\\\"\n", "\\\\\\\"\\n", "\\\\\"\\n", "\\\\\\\"\\n" },
};

Test(promname, escaping)
{
	for (size_t i = 0; i < sizeof escapes / sizeof *escapes; i++) {
		struct nl_promtext label = { 0 }, text = { 0 }, om = { 0 };
		nl_prom_put_label_value(&label, escapes[i].in);
		nl_prom_put_help(&text, escapes[i].in, false);
		nl_prom_put_help(&om, escapes[i].in, true);
		cr_expect_str_eq(label.p ? label.p : "", escapes[i].want_label, "label value %zu", i);
		cr_expect_str_eq(text.p ? text.p : "", escapes[i].want_help_text, "help %zu", i);
		cr_expect_str_eq(om.p ? om.p : "", escapes[i].want_help_om, "OpenMetrics help %zu", i);
		nl_promtext_free(&label);
		nl_promtext_free(&text);
		nl_promtext_free(&om);
	}
}

static const struct {
	double v;
	const char *want;
} doubles[] = {
	{ 0.01, "0.01" }, { 2.5, "2.5" }, { 10, "10" }, { 30000, "30000" }, { 0, "0" },
	{ -1, "-1" },     { 0.1 + 0.2, "0.30000000000000004" }, { 1e300, "1e+300" },
};

Test(promname, values)
{
	for (size_t i = 0; i < sizeof doubles / sizeof *doubles; i++) {
		struct nl_promtext t = { 0 };
		nl_prom_put_double(&t, doubles[i].v);
		cr_expect_str_eq(t.p, doubles[i].want, "value %zu", i);
		nl_promtext_free(&t);
	}
	const double special[] = { INFINITY, -INFINITY, NAN };
	const char *const spelled[] = { "+Inf", "-Inf", "NaN" };
	for (size_t i = 0; i < 3; i++) {
		struct nl_promtext t = { 0 };
		nl_prom_put_double(&t, special[i]);
		cr_expect_str_eq(t.p, spelled[i]);
		nl_promtext_free(&t);
	}
}
