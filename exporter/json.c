/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshot -> one line of OTLP/JSON.
 *
 * Follows the protobuf JSON mapping as OTLP/JSON specifies it: lowerCamelCase
 * keys, enums as integers, 64-bit integers as decimal strings, NaN and the
 * infinities as the strings "NaN", "Infinity" and "-Infinity". Fields with a
 * proto3 default value (0, "") are left out, as protobuf's own printer does.
 *
 * Output goes through a growable buffer whose OOM flag is sticky, so the
 * emitters need no error checks of their own: one check at the end suffices.
 */
#include "export.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "log.h"
#include "utf8.h"

struct jbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static bool jb_reserve(struct jbuf *b, size_t more)
{
	if (b->oom)
		return false;
	if (more <= b->cap - b->len)
		return true;
	size_t cap = b->cap ? b->cap : 1024;
	while (cap - b->len < more) {
		if (cap > SIZE_MAX / 2) {
			b->oom = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void jb_put(struct jbuf *b, const char *s, size_t n)
{
	if (jb_reserve(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

static void jb_str(struct jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }

static void jb_char(struct jbuf *b, char c) { jb_put(b, &c, 1); }

/* ---- Scalars -------------------------------------------------------------- */

/* A JSON string literal; NULL is the empty string. Output is always valid
 * JSON whatever the bytes: controls are escaped, bad UTF-8 becomes U+FFFD. */
static void jb_string(struct jbuf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)u), bad;
	jb_char(b, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		size_t len = nl_utf8_seq(u + i, n - i, &bad);
		if (c == '"' || c == '\\') {
			char esc[2] = { '\\', (char)c };
			jb_put(b, esc, 2);
		} else if (c < 0x20) {
			char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			jb_put(b, esc, 6);
		} else if (len) {
			jb_put(b, (const char *)u + i, len);
			i += len;
			continue;
		} else {
			jb_put(b, "\xEF\xBF\xBD", 3);
			i += bad;
			continue;
		}
		i++;
	}
	jb_char(b, '"');
}

static void jb_key(struct jbuf *b, const char *key)
{
	jb_char(b, '"');
	jb_str(b, key);
	jb_put(b, "\":", 2);
}

/* int64/uint64 are strings in the JSON mapping: JavaScript numbers lose
 * precision past 2^53. */
static void jb_i64(struct jbuf *b, int64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "\"%" PRId64 "\"", v);
	jb_put(b, tmp, (size_t)n);
}

static void jb_u64(struct jbuf *b, uint64_t v)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof tmp, "\"%" PRIu64 "\"", v);
	jb_put(b, tmp, (size_t)n);
}

/* printf honours the host process's LC_NUMERIC, which may well not be "C" in a
 * process we are preloaded into: whatever it used as the decimal point (one or
 * more bytes) becomes '.'. Digits, signs and the exponent marker are the same
 * in every locale. */
static size_t delocalize_number(const char *in, char *out)
{
	size_t o = 0;
	for (const char *p = in; *p;) {
		if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e' || *p == 'E') {
			out[o++] = *p++;
			continue;
		}
		out[o++] = '.';
		while (*p && !((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e' || *p == 'E'))
			p++;
	}
	out[o] = '\0';
	return o;
}

/* The shortest of %.15g/%.16g/%.17g that reads back as the same double, so
 * 0.1 prints as 0.1 and not 0.10000000000000001. */
static void jb_double(struct jbuf *b, double v)
{
	if (isnan(v)) {
		jb_str(b, "\"NaN\"");
		return;
	}
	if (isinf(v)) {
		jb_str(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
		return;
	}
	char tmp[64], clean[64];
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(tmp, sizeof tmp, "%.*g", prec, v);
		if (prec == 17 || strtod(tmp, NULL) == v)  /* strtod reads the same locale */
			break;
	}
	jb_put(b, clean, delocalize_number(tmp, clean));
}

/* ---- Messages ------------------------------------------------------------- */

static void emit_any_value(struct jbuf *b, const struct nl_attr *a)
{
	jb_char(b, '{');
	switch (a->type) {
	case NL_ATTR_STR:
		jb_key(b, "stringValue");
		jb_string(b, a->v.s);
		break;
	case NL_ATTR_INT:
		jb_key(b, "intValue");
		jb_i64(b, a->v.i);
		break;
	case NL_ATTR_BOOL:
		jb_key(b, "boolValue");
		jb_str(b, a->v.b ? "true" : "false");
		break;
	case NL_ATTR_DOUBLE:
		jb_key(b, "doubleValue");
		jb_double(b, a->v.d);
		break;
	default:
		/* An empty AnyValue keeps the output well-formed. */
		nl_warn_once("json.attr_type", "attribute %s has an unknown type %d; exported as empty",
			     a->key ? a->key : "", (int)a->type);
		break;
	}
	jb_char(b, '}');
}

/* `"attributes":[...]` when there are any; returns whether it wrote it, so
 * callers know whether a separating comma is due. */
static bool emit_attributes(struct jbuf *b, const struct nl_attr *attrs, size_t n)
{
	if (n == 0 || !attrs)
		return false;
	jb_key(b, "attributes");
	jb_char(b, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			jb_char(b, ',');
		jb_char(b, '{');
		jb_key(b, "key");
		jb_string(b, attrs[i].key);
		jb_char(b, ',');
		jb_key(b, "value");
		emit_any_value(b, &attrs[i]);
		jb_char(b, '}');
	}
	jb_char(b, ']');
	return true;
}

/* Attributes and times, common to both point types; ends with a comma. */
static void emit_point_head(struct jbuf *b, const struct nl_point *p)
{
	if (emit_attributes(b, p->attrs, p->n_attrs))
		jb_char(b, ',');
	if (p->start_ns) {
		jb_key(b, "startTimeUnixNano");
		jb_u64(b, p->start_ns);
		jb_char(b, ',');
	}
	jb_key(b, "timeUnixNano");
	jb_u64(b, p->time_ns);
	jb_char(b, ',');
}

static void emit_number_point(struct jbuf *b, const struct nl_metric *m, const struct nl_point *p)
{
	jb_char(b, '{');
	emit_point_head(b, p);
	if (m->kind == NL_GAUGE || m->kind == NL_COUNTER_F64) {
		jb_key(b, "asDouble");
		jb_double(b, p->dvalue);
	} else {
		jb_key(b, "asInt");
		jb_i64(b, p->ivalue);
	}
	jb_char(b, '}');
}

static void emit_histogram_point(struct jbuf *b, const struct nl_metric *m, const struct nl_point *p)
{
	size_t n_bounds = nl_usable_bounds(m);
	jb_char(b, '{');
	emit_point_head(b, p);
	jb_key(b, "count");
	jb_u64(b, p->count);
	jb_char(b, ',');
	jb_key(b, "sum");
	jb_double(b, p->sum);
	jb_char(b, ',');
	jb_key(b, "bucketCounts");
	jb_char(b, '[');
	for (size_t i = 0; i <= n_bounds; i++) {
		if (i)
			jb_char(b, ',');
		jb_u64(b, p->buckets[i]);
	}
	jb_put(b, "],", 2);
	jb_key(b, "explicitBounds");
	jb_char(b, '[');
	for (size_t i = 0; i < n_bounds; i++) {
		if (i)
			jb_char(b, ',');
		jb_double(b, m->bounds[i]);
	}
	jb_char(b, ']');
	if (p->has_min_max) {
		jb_char(b, ',');
		jb_key(b, "min");
		jb_double(b, p->min);
		jb_char(b, ',');
		jb_key(b, "max");
		jb_double(b, p->max);
	}
	jb_char(b, '}');
}

static void emit_data_points(struct jbuf *b, const struct nl_metric *m)
{
	jb_key(b, "dataPoints");
	jb_char(b, '[');
	for (size_t i = 0; m->points && i < m->n_points; i++) {
		if (i)
			jb_char(b, ',');
		if (m->kind == NL_HISTOGRAM)
			emit_histogram_point(b, m, &m->points[i]);
		else
			emit_number_point(b, m, &m->points[i]);
	}
	jb_char(b, ']');
}

/* AggregationTemporality enum values: DELTA = 1, CUMULATIVE = 2. */
static void emit_temporality(struct jbuf *b, const struct nl_metric *m)
{
	jb_char(b, ',');
	jb_key(b, "aggregationTemporality");
	jb_char(b, m->delta ? '1' : '2');
}

static void emit_optional_string(struct jbuf *b, const char *key, const char *value)
{
	if (!value || !*value)
		return;
	jb_char(b, ',');
	jb_key(b, key);
	jb_string(b, value);
}

static void emit_metric(struct jbuf *b, const struct nl_metric *m)
{
	jb_char(b, '{');
	jb_key(b, "name");
	jb_string(b, m->name);
	emit_optional_string(b, "description", m->description);
	emit_optional_string(b, "unit", m->unit);
	switch (m->kind) {
	case NL_COUNTER:
	case NL_COUNTER_F64:
		jb_str(b, ",\"sum\":{");
		emit_data_points(b, m);
		emit_temporality(b, m);
		jb_str(b, ",\"isMonotonic\":true}");
		break;
	case NL_UPDOWN:
		jb_str(b, ",\"sum\":{");
		emit_data_points(b, m);
		emit_temporality(b, m);
		jb_char(b, '}');   /* isMonotonic false: the default, left out */
		break;
	case NL_GAUGE:
	case NL_GAUGE_INT:
		jb_str(b, ",\"gauge\":{");
		emit_data_points(b, m);
		jb_char(b, '}');
		break;
	case NL_HISTOGRAM:
		jb_str(b, ",\"histogram\":{");
		emit_data_points(b, m);
		emit_temporality(b, m);
		jb_char(b, '}');
		break;
	default:
		nl_warn_once("json.kind", "metric %s has an unknown kind %d; exported without data",
			     m->name ? m->name : "", (int)m->kind);
		break;
	}
	jb_char(b, '}');
}

static void emit_resource(struct jbuf *b, const struct nl_snapshot *snap)
{
	jb_key(b, "resource");
	jb_char(b, '{');
	emit_attributes(b, snap->resource, snap->n_resource);
	jb_char(b, '}');
}

static void emit_scope(struct jbuf *b, const struct nl_snapshot *snap)
{
	jb_key(b, "scope");
	jb_char(b, '{');
	jb_key(b, "name");
	jb_string(b, snap->scope_name);
	emit_optional_string(b, "version", snap->scope_version);
	jb_char(b, '}');
}

static void emit_request(struct jbuf *b, const struct nl_snapshot *snap)
{
	jb_str(b, "{\"resourceMetrics\":[{");
	emit_resource(b, snap);
	jb_str(b, ",\"scopeMetrics\":[{");
	emit_scope(b, snap);
	jb_str(b, ",\"metrics\":[");
	for (size_t i = 0; snap->metrics && i < snap->n_metrics; i++) {
		if (i)
			jb_char(b, ',');
		emit_metric(b, &snap->metrics[i]);
	}
	jb_str(b, "]}]}]}");
}

int nl_json_encode(const struct nl_snapshot *snap, char **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (!snap)
		return -1;
	struct jbuf b = { 0 };
	emit_request(&b, snap);
	jb_char(&b, '\0');
	if (b.oom) {
		free(b.p);
		return -1;
	}
	*out = b.p;
	*out_len = b.len - 1;
	return 0;
}
