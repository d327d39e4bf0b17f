/* SPDX-License-Identifier: Apache-2.0 */
/* nl_otlp_encode: encode hand-built snapshots, decode them back with the
 * protobuf-c generated code, and compare every field with the test's inputs. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "helpers.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest Request;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics ScopeMetrics;
typedef Opentelemetry__Proto__Metrics__V1__Metric Metric;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint NumberDataPoint;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint HistogramDataPoint;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

#define DATA_SUM OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM
#define DATA_GAUGE OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE
#define DATA_HISTOGRAM OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM
#define DELTA OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA
#define CUMULATIVE OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE
#define AS_INT OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT
#define AS_DOUBLE OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE
#define SUM_SET OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___SUM_SUM
#define MIN_SET OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___MIN_MIN
#define MAX_SET OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___MAX_MAX
#define MIN_UNSET OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___MIN__NOT_SET
#define MAX_UNSET OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___MAX__NOT_SET
#define V_STRING OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define V_INT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE
#define V_BOOL OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE
#define V_DOUBLE OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE

#define NL_ATTR_D(k, val) ((struct nl_attr){ .key = (k), .type = NL_ATTR_DOUBLE, .v.d = (val) })

static const double BOUNDS[17] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000 };

static const uint64_t START = 1700000000000000000ull;
static const uint64_t NOW = 1700000060123456789ull;

static Request *decoded;

static void free_decoded(void)
{
	if (decoded)
		opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(decoded, NULL);
	decoded = NULL;
}

TestSuite(otlp, .fini = free_decoded);

/* Encodes, decodes, and checks the one-resource/one-scope envelope. */
static ScopeMetrics *roundtrip(const struct nl_snapshot *snap)
{
	uint8_t *buf = (uint8_t *)"not touched";
	size_t len = 12345;
	cr_assert_eq(nl_otlp_encode(snap, &buf, &len), 0);
	cr_assert_not_null(buf);
	decoded = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(NULL, len, buf);
	free(buf);
	cr_assert_not_null(decoded, "the encoder output does not decode");
	cr_assert_eq(decoded->n_resource_metrics, 1);
	cr_assert_eq(decoded->resource_metrics[0]->n_scope_metrics, 1);
	ScopeMetrics *sm = decoded->resource_metrics[0]->scope_metrics[0];
	cr_assert_eq(sm->n_metrics, snap->n_metrics);
	return sm;
}

static void check_attrs(KeyValue **kv, size_t n, const struct nl_attr *want, size_t n_want)
{
	cr_assert_eq(n, n_want);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(kv[i]->key, want[i].key);
		cr_assert_not_null(kv[i]->value);
		switch (want[i].type) {
		case NL_ATTR_STR:
			cr_assert_eq(kv[i]->value->value_case, V_STRING, "attribute %s", want[i].key);
			cr_assert_str_eq(kv[i]->value->string_value, want[i].v.s);
			break;
		case NL_ATTR_INT:
			cr_assert_eq(kv[i]->value->value_case, V_INT, "attribute %s", want[i].key);
			cr_assert_eq(kv[i]->value->int_value, want[i].v.i);
			break;
		case NL_ATTR_BOOL:
			cr_assert_eq(kv[i]->value->value_case, V_BOOL, "attribute %s", want[i].key);
			cr_assert_eq(!!kv[i]->value->bool_value, want[i].v.b);
			break;
		case NL_ATTR_DOUBLE:
			cr_assert_eq(kv[i]->value->value_case, V_DOUBLE, "attribute %s", want[i].key);
			cr_assert(kv[i]->value->double_value == want[i].v.d);
			break;
		}
	}
}

static void check_names(const Metric *m, const struct nl_metric *want)
{
	cr_assert_str_eq(m->name, want->name);
	cr_assert_str_eq(m->unit, want->unit ? want->unit : "");
	cr_assert_str_eq(m->description, want->description ? want->description : "");
}

Test(otlp, counter_with_attributes)
{
	const struct nl_attr a0[] = { NL_ATTR_S("http.method", "GET"), NL_ATTR_I("http.status_code", 200),
				      NL_ATTR_B("error", false), NL_ATTR_D("ratio", 0.75) };
	const struct nl_attr a1[] = { NL_ATTR_S("http.method", "POST"), NL_ATTR_I("http.status_code", -1),
				      NL_ATTR_B("error", true), NL_ATTR_D("ratio", -1e300) };
	struct nl_point pts[] = {
		{ .attrs = a0, .n_attrs = 4, .start_ns = START, .time_ns = NOW, .ivalue = 12 },
		{ .attrs = a1, .n_attrs = 4, .start_ns = START + 1, .time_ns = NOW + 2, .ivalue = INT64_MAX },
	};
	struct nl_metric m = { .name = "http.server.requests", .unit = "{request}", .description = "Requests served",
			       .kind = NL_COUNTER, .points = pts, .n_points = 2 };
	struct nl_snapshot snap = snapshot(&m, 1);
	ScopeMetrics *sm = roundtrip(&snap);

	cr_assert_str_eq(sm->scope->name, "nemolens");
	cr_assert_str_eq(sm->scope->version, "9.8.7");
	const Metric *out = sm->metrics[0];
	check_names(out, &m);
	cr_assert_eq(out->data_case, DATA_SUM);
	cr_assert(out->sum->is_monotonic);
	cr_assert_eq(out->sum->aggregation_temporality, CUMULATIVE);
	cr_assert_eq(out->sum->n_data_points, 2);
	for (size_t i = 0; i < 2; i++) {
		const NumberDataPoint *dp = out->sum->data_points[i];
		cr_assert_eq(dp->value_case, AS_INT);
		cr_assert_eq(dp->as_int, pts[i].ivalue);
		cr_assert_eq(dp->start_time_unix_nano, pts[i].start_ns);
		cr_assert_eq(dp->time_unix_nano, pts[i].time_ns);
		check_attrs(dp->attributes, dp->n_attributes, pts[i].attrs, pts[i].n_attrs);
	}
}

Test(otlp, delta_counter)
{
	struct nl_point pt = { .start_ns = START, .time_ns = NOW, .ivalue = 5 };
	struct nl_metric m = { .name = "c", .unit = "1", .description = "d", .kind = NL_COUNTER, .delta = true,
			       .points = &pt, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const Metric *out = roundtrip(&snap)->metrics[0];
	cr_assert_eq(out->data_case, DATA_SUM);
	cr_assert_eq(out->sum->aggregation_temporality, DELTA);
	cr_assert(out->sum->is_monotonic);
	cr_assert_eq(out->sum->data_points[0]->as_int, 5);
	cr_assert_eq(out->sum->data_points[0]->n_attributes, 0);
}

Test(otlp, gauges_int_and_double)
{
	const struct nl_attr a[] = { NL_ATTR_S("fd.kind", "socket") };
	struct nl_point ip = { .attrs = a, .n_attrs = 1, .start_ns = 0, .time_ns = NOW, .ivalue = -42 };
	struct nl_point dp = { .start_ns = START, .time_ns = NOW, .dvalue = 3.25 };
	struct nl_metric ms[] = {
		{ .name = "process.open_fds", .unit = "{fd}", .description = "Open fds", .kind = NL_GAUGE_INT,
		  .points = &ip, .n_points = 1 },
		{ .name = "process.cpu.utilization", .unit = "1", .description = "CPU", .kind = NL_GAUGE,
		  .points = &dp, .n_points = 1 },
	};
	struct nl_snapshot snap = snapshot(ms, 2);
	ScopeMetrics *sm = roundtrip(&snap);

	const Metric *gi = sm->metrics[0];
	check_names(gi, &ms[0]);
	cr_assert_eq(gi->data_case, DATA_GAUGE);
	cr_assert_eq(gi->gauge->n_data_points, 1);
	cr_assert_eq(gi->gauge->data_points[0]->value_case, AS_INT);
	cr_assert_eq(gi->gauge->data_points[0]->as_int, -42);
	cr_assert_eq(gi->gauge->data_points[0]->start_time_unix_nano, 0);
	cr_assert_eq(gi->gauge->data_points[0]->time_unix_nano, NOW);
	check_attrs(gi->gauge->data_points[0]->attributes, gi->gauge->data_points[0]->n_attributes, a, 1);

	const Metric *gd = sm->metrics[1];
	check_names(gd, &ms[1]);
	cr_assert_eq(gd->data_case, DATA_GAUGE);
	cr_assert_eq(gd->gauge->data_points[0]->value_case, AS_DOUBLE);
	cr_assert(gd->gauge->data_points[0]->as_double == 3.25);
	cr_assert_eq(gd->gauge->data_points[0]->start_time_unix_nano, START);
}

static struct nl_point histogram_point(bool min_max)
{
	struct nl_point p = { .start_ns = START, .time_ns = NOW, .count = 0, .sum = 1234.5,
			      .has_min_max = min_max, .min = 0.002, .max = 31000 };
	for (size_t i = 0; i <= 17; i++) {
		p.buckets[i] = i * 3 + 1;  /* distinct per bucket, so a shift shows */
		p.count += p.buckets[i];
	}
	return p;
}

static void check_histogram_point(const HistogramDataPoint *dp, const struct nl_point *want)
{
	cr_assert_eq(dp->count, want->count);
	cr_assert_eq(dp->_sum_case, SUM_SET);
	cr_assert(dp->sum == want->sum);
	cr_assert_eq(dp->start_time_unix_nano, want->start_ns);
	cr_assert_eq(dp->time_unix_nano, want->time_ns);
	cr_assert_eq(dp->n_explicit_bounds, 17);
	for (size_t i = 0; i < 17; i++)
		cr_assert(dp->explicit_bounds[i] == BOUNDS[i], "bound %zu", i);
	cr_assert_eq(dp->n_bucket_counts, 18);
	for (size_t i = 0; i < 18; i++)
		cr_assert_eq(dp->bucket_counts[i], want->buckets[i], "bucket %zu", i);
}

Test(otlp, histogram_with_min_max)
{
	const struct nl_attr a[] = { NL_ATTR_S("op", "read"), NL_ATTR_B("cached", true) };
	struct nl_point p = histogram_point(true);
	p.attrs = a;
	p.n_attrs = 2;
	struct nl_metric m = { .name = "io.duration", .unit = "ms", .description = "I/O latency",
			       .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 17, .points = &p, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const Metric *out = roundtrip(&snap)->metrics[0];
	check_names(out, &m);
	cr_assert_eq(out->data_case, DATA_HISTOGRAM);
	cr_assert_eq(out->histogram->aggregation_temporality, CUMULATIVE);
	cr_assert_eq(out->histogram->n_data_points, 1);
	const HistogramDataPoint *dp = out->histogram->data_points[0];
	check_histogram_point(dp, &p);
	cr_assert_eq(dp->_min_case, MIN_SET);
	cr_assert_eq(dp->_max_case, MAX_SET);
	cr_assert(dp->min == 0.002);
	cr_assert(dp->max == 31000);
	check_attrs(dp->attributes, dp->n_attributes, a, 2);
}

Test(otlp, histogram_without_min_max_delta)
{
	struct nl_point p = histogram_point(false);
	struct nl_metric m = { .name = "h", .unit = "s", .description = "x", .kind = NL_HISTOGRAM, .delta = true,
			       .bounds = BOUNDS, .n_bounds = 17, .points = &p, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const Metric *out = roundtrip(&snap)->metrics[0];
	cr_assert_eq(out->data_case, DATA_HISTOGRAM);
	cr_assert_eq(out->histogram->aggregation_temporality, DELTA);
	const HistogramDataPoint *dp = out->histogram->data_points[0];
	check_histogram_point(dp, &p);
	cr_assert_eq(dp->_min_case, MIN_UNSET);
	cr_assert_eq(dp->_max_case, MAX_UNSET);
}

Test(otlp, histogram_zero_sum_is_still_present)
{
	/* A proto3 `optional` field is encoded even when 0: sum must be present. */
	struct nl_point p = { .time_ns = NOW };
	struct nl_metric m = { .name = "h", .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 3,
			       .points = &p, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const HistogramDataPoint *dp = roundtrip(&snap)->metrics[0]->histogram->data_points[0];
	cr_assert_eq(dp->_sum_case, SUM_SET);
	cr_assert(dp->sum == 0);
	cr_assert_eq(dp->n_bucket_counts, 4);
	cr_assert_eq(dp->n_explicit_bounds, 3);
	cr_assert_eq(dp->start_time_unix_nano, 0);
}

Test(otlp, resource_attributes_of_every_type)
{
	const struct nl_attr res[] = { NL_ATTR_S("service.name", "gym"), NL_ATTR_I("process.pid", 4242),
				       NL_ATTR_B("nemolens.enabled", true), NL_ATTR_D("host.load", 1.5),
				       NL_ATTR_S("empty", "") };
	struct nl_snapshot snap = { .resource = res, .n_resource = 5, .scope_name = "s", .scope_version = "v" };
	roundtrip(&snap);
	const Opentelemetry__Proto__Resource__V1__Resource *r = decoded->resource_metrics[0]->resource;
	cr_assert_not_null(r);
	check_attrs(r->attributes, r->n_attributes, res, 5);
}

Test(otlp, zero_metrics)
{
	struct nl_snapshot snap = { .scope_name = "nemolens", .scope_version = "1" };
	ScopeMetrics *sm = roundtrip(&snap);
	cr_assert_eq(sm->n_metrics, 0);
	cr_assert_str_eq(sm->scope->name, "nemolens");
	cr_assert_eq(decoded->resource_metrics[0]->resource->n_attributes, 0);
}

Test(otlp, metrics_without_points_and_null_strings)
{
	struct nl_metric ms[] = {
		{ .name = "a", .kind = NL_COUNTER },
		{ .name = "b", .kind = NL_GAUGE },
		{ .name = "c", .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 17 },
	};
	struct nl_snapshot snap = snapshot(ms, 3);
	snap.scope_version = NULL;
	ScopeMetrics *sm = roundtrip(&snap);
	cr_assert_str_eq(sm->scope->version, "");
	for (size_t i = 0; i < 3; i++)
		check_names(sm->metrics[i], &ms[i]);
	cr_assert_eq(sm->metrics[0]->data_case, DATA_SUM);
	cr_assert_eq(sm->metrics[0]->sum->n_data_points, 0);
	cr_assert_eq(sm->metrics[1]->data_case, DATA_GAUGE);
	cr_assert_eq(sm->metrics[1]->gauge->n_data_points, 0);
	cr_assert_eq(sm->metrics[2]->data_case, DATA_HISTOGRAM);
	cr_assert_eq(sm->metrics[2]->histogram->n_data_points, 0);
}

Test(otlp, invalid_utf8_is_replaced)
{
	/* truncated 2-byte sequence, lone continuation, overlong '/', surrogate, valid "é€😀" */
	const struct nl_attr a[] = { NL_ATTR_S("path", "a\xC3" "b\x80" "c\xC0\xAF" "d\xED\xA0\x80" "e\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") };
	struct nl_point p = { .attrs = a, .n_attrs = 1, .time_ns = NOW, .ivalue = 1 };
	struct nl_metric m = { .name = "bad\xFFname", .kind = NL_COUNTER, .points = &p, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const Metric *out = roundtrip(&snap)->metrics[0];
	cr_assert_str_eq(out->name, "bad\xEF\xBF\xBDname");
	cr_assert_str_eq(out->sum->data_points[0]->attributes[0]->value->string_value,
			 "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
			 "e\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

Test(otlp, many_points_span_several_arena_blocks)
{
	enum { N = 3000 };
	static struct nl_point pts[N];
	static struct nl_attr attrs[N][2];
	static char names[N][16];
	for (size_t i = 0; i < N; i++) {
		snprintf(names[i], sizeof names[i], "v%zu", i);
		attrs[i][0] = NL_ATTR_S("id", names[i]);
		attrs[i][1] = NL_ATTR_I("n", (int64_t)i);
		pts[i] = (struct nl_point){ .attrs = attrs[i], .n_attrs = 2, .start_ns = START, .time_ns = NOW,
					    .ivalue = (int64_t)i * 7 };
	}
	struct nl_metric m = { .name = "big", .kind = NL_COUNTER, .points = pts, .n_points = N };
	struct nl_snapshot snap = snapshot(&m, 1);
	const Metric *out = roundtrip(&snap)->metrics[0];
	cr_assert_eq(out->sum->n_data_points, N);
	for (size_t i = 0; i < N; i++) {
		const NumberDataPoint *dp = out->sum->data_points[i];
		cr_assert_eq(dp->as_int, (int64_t)i * 7);
		check_attrs(dp->attributes, dp->n_attributes, attrs[i], 2);
	}
}

Test(otlp, nan_and_infinity_survive)
{
	struct nl_point p = { .time_ns = NOW, .dvalue = NAN };
	struct nl_point q = { .time_ns = NOW, .dvalue = -INFINITY };
	struct nl_metric ms[] = { { .name = "n", .kind = NL_GAUGE, .points = &p, .n_points = 1 },
				  { .name = "i", .kind = NL_GAUGE, .points = &q, .n_points = 1 } };
	struct nl_snapshot snap = snapshot(ms, 2);
	ScopeMetrics *sm = roundtrip(&snap);
	cr_assert(isnan(sm->metrics[0]->gauge->data_points[0]->as_double));
	cr_assert(isinf(sm->metrics[1]->gauge->data_points[0]->as_double));
	cr_assert(sm->metrics[1]->gauge->data_points[0]->as_double < 0);
}

Test(otlp, null_snapshot_fails_cleanly)
{
	uint8_t *buf = (uint8_t *)"x";
	size_t len = 9;
	cr_assert_eq(nl_otlp_encode(NULL, &buf, &len), -1);
	cr_assert_null(buf);
	cr_assert_eq(len, 0);
}
