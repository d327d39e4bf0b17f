/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot -> protobuf ExportMetricsServiceRequest.
 *
 * The protobuf-c message tree is built in a private arena: one export makes
 * hundreds of small structs, and an arena turns "free everything on every
 * error path" into a single call. Numeric arrays that already exist in the
 * snapshot (bucket counts, bounds) are pointed to rather than copied; packing
 * only reads them.
 */
#include "export.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "log.h"
#include "utf8.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest Request;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics ResourceMetrics;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics ScopeMetrics;
typedef Opentelemetry__Proto__Metrics__V1__Metric Metric;
typedef Opentelemetry__Proto__Metrics__V1__Sum Sum;
typedef Opentelemetry__Proto__Metrics__V1__Gauge Gauge;
typedef Opentelemetry__Proto__Metrics__V1__Histogram Histogram;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint NumberDataPoint;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint HistogramDataPoint;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;

#define TEMPORALITY_DELTA OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_DELTA
#define TEMPORALITY_CUMULATIVE \
	OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE

/* ---- Arena ---------------------------------------------------------------- */

#define ARENA_BLOCK (32u * 1024u)
#define ARENA_ALIGN (alignof(max_align_t))

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

struct arena {
	struct arena_block *head;
};

static void *arena_alloc(struct arena *a, size_t size)
{
	size = (size + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
	struct arena_block *b = a->head;
	if (!b || b->cap - b->used < size) {
		size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
		b = malloc(sizeof *b + cap);
		if (!b)
			return NULL;
		b->next = a->head;
		b->used = 0;
		b->cap = cap;
		a->head = b;
	}
	void *p = b->data + b->used;
	b->used += size;
	return p;
}

/* n elements of size each, or NULL on OOM; n == 0 yields NULL without failing
 * (callers check `n && !p`). */
static void *arena_array(struct arena *a, size_t n, size_t size)
{
	if (n == 0)
		return NULL;
	if (n > SIZE_MAX / size)
		return NULL;
	return arena_alloc(a, n * size);
}

static void arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_block *next = a->head->next;
		free(a->head);
		a->head = next;
	}
}

/* ---- Strings -------------------------------------------------------------- */

/* Protobuf strings must be UTF-8, and a collector rejects the whole request
 * (HTTP 400) over one bad byte in, say, a file path attribute. So strings are
 * passed through when valid and copied with U+FFFD replacements otherwise. */
static char *wire_string(struct arena *a, const char *s)
{
	if (!s)
		return (char *)"";
	size_t n = strlen(s), bad, extra = 0;
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t len = nl_utf8_seq(u + i, n - i, &bad);
		if (len) {
			i += len;
		} else {
			extra += 3;  /* each replacement is at most 3 bytes longer than what it replaces */
			i += bad;
		}
	}
	if (!extra)
		return (char *)s;
	char *out = arena_alloc(a, n + extra + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t len = nl_utf8_seq(u + i, n - i, &bad);
		if (len) {
			memcpy(out + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i += bad;
		}
	}
	out[o] = '\0';
	return out;
}

/* ---- Attributes ----------------------------------------------------------- */

static int fill_any_value(struct arena *a, AnyValue *v, const struct nl_attr *attr)
{
	*v = (AnyValue)OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
	switch (attr->type) {
	case NL_ATTR_STR:
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
		v->string_value = wire_string(a, attr->v.s);
		return v->string_value ? 0 : -1;
	case NL_ATTR_INT:
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
		v->int_value = attr->v.i;
		return 0;
	case NL_ATTR_BOOL:
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
		v->bool_value = attr->v.b;
		return 0;
	case NL_ATTR_DOUBLE:
		v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
		v->double_value = attr->v.d;
		return 0;
	}
	/* An unknown type still yields a well-formed (empty) AnyValue. */
	nl_warn_once("otlp.attr_type", "attribute %s has an unknown type %d; exported as empty",
		     attr->key ? attr->key : "", (int)attr->type);
	return 0;
}

/* Builds the KeyValue pointer array for n attributes; 0 on success (including
 * n == 0, which leaves *out NULL). */
static int make_attributes(struct arena *a, const struct nl_attr *attrs, size_t n, KeyValue ***out,
			   size_t *n_out)
{
	*out = NULL;
	*n_out = 0;
	if (n == 0 || !attrs)
		return 0;
	KeyValue **ptrs = arena_array(a, n, sizeof *ptrs);
	KeyValue *kvs = arena_array(a, n, sizeof *kvs);
	AnyValue *vals = arena_array(a, n, sizeof *vals);
	if (!ptrs || !kvs || !vals)
		return -1;
	for (size_t i = 0; i < n; i++) {
		kvs[i] = (KeyValue)OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
		kvs[i].key = wire_string(a, attrs[i].key);
		if (!kvs[i].key || fill_any_value(a, &vals[i], &attrs[i]) < 0)
			return -1;
		kvs[i].value = &vals[i];
		ptrs[i] = &kvs[i];
	}
	*out = ptrs;
	*n_out = n;
	return 0;
}

/* ---- Data points ---------------------------------------------------------- */

static int make_number_points(struct arena *a, const struct nl_metric *m, NumberDataPoint ***out)
{
	*out = NULL;
	if (m->n_points == 0 || !m->points)
		return 0;
	NumberDataPoint **ptrs = arena_array(a, m->n_points, sizeof *ptrs);
	NumberDataPoint *dps = arena_array(a, m->n_points, sizeof *dps);
	if (!ptrs || !dps)
		return -1;
	for (size_t i = 0; i < m->n_points; i++) {
		const struct nl_point *p = &m->points[i];
		NumberDataPoint *dp = &dps[i];
		*dp = (NumberDataPoint)OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__INIT;
		if (make_attributes(a, p->attrs, p->n_attrs, &dp->attributes, &dp->n_attributes) < 0)
			return -1;
		dp->start_time_unix_nano = p->start_ns;  /* proto3: 0 is simply not encoded */
		dp->time_unix_nano = p->time_ns;
		if (m->kind == NL_GAUGE || m->kind == NL_COUNTER_F64) {
			dp->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
			dp->as_double = p->dvalue;
		} else {
			dp->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
			dp->as_int = p->ivalue;
		}
		ptrs[i] = dp;
	}
	*out = ptrs;
	return 0;
}

static int make_histogram_points(struct arena *a, const struct nl_metric *m, HistogramDataPoint ***out)
{
	*out = NULL;
	if (m->n_points == 0 || !m->points)
		return 0;
	HistogramDataPoint **ptrs = arena_array(a, m->n_points, sizeof *ptrs);
	HistogramDataPoint *dps = arena_array(a, m->n_points, sizeof *dps);
	if (!ptrs || !dps)
		return -1;
	size_t n_bounds = nl_usable_bounds(m);
	if (m->bounds && n_bounds < m->n_bounds)
		nl_warn_once("otlp.bounds", "histogram %s has %zu bounds; only %d are exported",
			     m->name ? m->name : "", m->n_bounds, NL_MAX_BOUNDS);
	for (size_t i = 0; i < m->n_points; i++) {
		const struct nl_point *p = &m->points[i];
		HistogramDataPoint *dp = &dps[i];
		*dp = (HistogramDataPoint)OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__INIT;
		if (make_attributes(a, p->attrs, p->n_attrs, &dp->attributes, &dp->n_attributes) < 0)
			return -1;
		dp->start_time_unix_nano = p->start_ns;
		dp->time_unix_nano = p->time_ns;
		dp->count = p->count;
		dp->_sum_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___SUM_SUM;
		dp->sum = p->sum;
		/* Packing only reads these arrays, so the snapshot's own storage is used. */
		dp->n_bucket_counts = n_bounds + 1;
		dp->bucket_counts = (uint64_t *)p->buckets;
		dp->n_explicit_bounds = n_bounds;
		dp->explicit_bounds = (double *)m->bounds;
		if (p->has_min_max) {
			dp->_min_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___MIN_MIN;
			dp->min = p->min;
			dp->_max_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT___MAX_MAX;
			dp->max = p->max;
		}
		ptrs[i] = dp;
	}
	*out = ptrs;
	return 0;
}

/* ---- Metrics -------------------------------------------------------------- */

static int fill_sum(struct arena *a, Metric *out, const struct nl_metric *m, bool monotonic)
{
	Sum *sum = arena_alloc(a, sizeof *sum);
	if (!sum)
		return -1;
	*sum = (Sum)OPENTELEMETRY__PROTO__METRICS__V1__SUM__INIT;
	if (make_number_points(a, m, &sum->data_points) < 0)
		return -1;
	sum->n_data_points = sum->data_points ? m->n_points : 0;
	sum->aggregation_temporality = m->delta ? TEMPORALITY_DELTA : TEMPORALITY_CUMULATIVE;
	sum->is_monotonic = monotonic;
	out->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
	out->sum = sum;
	return 0;
}

static int fill_gauge(struct arena *a, Metric *out, const struct nl_metric *m)
{
	Gauge *gauge = arena_alloc(a, sizeof *gauge);
	if (!gauge)
		return -1;
	*gauge = (Gauge)OPENTELEMETRY__PROTO__METRICS__V1__GAUGE__INIT;
	if (make_number_points(a, m, &gauge->data_points) < 0)
		return -1;
	gauge->n_data_points = gauge->data_points ? m->n_points : 0;
	out->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
	out->gauge = gauge;
	return 0;
}

static int fill_histogram(struct arena *a, Metric *out, const struct nl_metric *m)
{
	Histogram *hist = arena_alloc(a, sizeof *hist);
	if (!hist)
		return -1;
	*hist = (Histogram)OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM__INIT;
	if (make_histogram_points(a, m, &hist->data_points) < 0)
		return -1;
	hist->n_data_points = hist->data_points ? m->n_points : 0;
	hist->aggregation_temporality = m->delta ? TEMPORALITY_DELTA : TEMPORALITY_CUMULATIVE;
	out->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
	out->histogram = hist;
	return 0;
}

static int fill_metric(struct arena *a, Metric *out, const struct nl_metric *m)
{
	*out = (Metric)OPENTELEMETRY__PROTO__METRICS__V1__METRIC__INIT;
	out->name = wire_string(a, m->name);
	out->unit = wire_string(a, m->unit);
	out->description = wire_string(a, m->description);
	if (!out->name || !out->unit || !out->description)
		return -1;
	switch (m->kind) {
	case NL_COUNTER:
	case NL_COUNTER_F64:
		return fill_sum(a, out, m, true);
	case NL_UPDOWN:
		return fill_sum(a, out, m, false);
	case NL_GAUGE:
	case NL_GAUGE_INT:
		return fill_gauge(a, out, m);
	case NL_HISTOGRAM:
		return fill_histogram(a, out, m);
	}
	nl_warn_once("otlp.kind", "metric %s has an unknown kind %d; exported without data",
		     m->name ? m->name : "", (int)m->kind);
	return 0;
}

static int make_metrics(struct arena *a, const struct nl_snapshot *snap, Metric ***out)
{
	*out = NULL;
	if (snap->n_metrics == 0 || !snap->metrics)
		return 0;
	Metric **ptrs = arena_array(a, snap->n_metrics, sizeof *ptrs);
	Metric *metrics = arena_array(a, snap->n_metrics, sizeof *metrics);
	if (!ptrs || !metrics)
		return -1;
	for (size_t i = 0; i < snap->n_metrics; i++) {
		if (fill_metric(a, &metrics[i], &snap->metrics[i]) < 0)
			return -1;
		ptrs[i] = &metrics[i];
	}
	*out = ptrs;
	return 0;
}

/* ---- Request -------------------------------------------------------------- */

/* All the single-instance messages of the envelope, kept together. */
struct envelope {
	Request req;
	ResourceMetrics rm, *rm_ptr;
	Resource resource;
	ScopeMetrics sm, *sm_ptr;
	Scope scope;
};

static int build_request(struct arena *a, const struct nl_snapshot *snap, struct envelope *e)
{
	e->resource = (Resource)OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
	if (make_attributes(a, snap->resource, snap->n_resource, &e->resource.attributes,
			    &e->resource.n_attributes) < 0)
		return -1;

	e->scope = (Scope)OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	e->scope.name = wire_string(a, snap->scope_name);
	e->scope.version = wire_string(a, snap->scope_version);
	if (!e->scope.name || !e->scope.version)
		return -1;

	e->sm = (ScopeMetrics)OPENTELEMETRY__PROTO__METRICS__V1__SCOPE_METRICS__INIT;
	e->sm.scope = &e->scope;
	if (make_metrics(a, snap, &e->sm.metrics) < 0)
		return -1;
	e->sm.n_metrics = e->sm.metrics ? snap->n_metrics : 0;
	e->sm_ptr = &e->sm;

	e->rm = (ResourceMetrics)OPENTELEMETRY__PROTO__METRICS__V1__RESOURCE_METRICS__INIT;
	e->rm.resource = &e->resource;
	e->rm.n_scope_metrics = 1;
	e->rm.scope_metrics = &e->sm_ptr;
	e->rm_ptr = &e->rm;

	e->req = (Request)OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT;
	e->req.n_resource_metrics = 1;
	e->req.resource_metrics = &e->rm_ptr;
	return 0;
}

static int pack_request(const Request *req, uint8_t **out, size_t *out_len)
{
	size_t len = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);  /* malloc(0) may return NULL: not an OOM */
	if (!buf)
		return -1;
	size_t packed = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(req, buf);
	if (packed != len) {
		nl_warn_once("otlp.pack", "protobuf packing produced %zu bytes, expected %zu", packed, len);
		free(buf);
		return -1;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

int nl_otlp_encode(const struct nl_snapshot *snap, uint8_t **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (!snap)
		return -1;
	struct arena arena = { 0 };
	struct envelope env;
	int rc = build_request(&arena, snap, &env);
	if (rc == 0)
		rc = pack_request(&env.req, out, out_len);
	arena_free(&arena);
	return rc;
}
