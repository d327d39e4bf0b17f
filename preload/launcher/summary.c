/* SPDX-License-Identifier: Apache-2.0 */
#include "summary.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "summary_impl.h"

struct nl_summary *nl_summary_new(void) { return calloc(1, sizeof(struct nl_summary)); }

static void free_inst(struct inst *in)
{
	for (size_t i = 0; i < in->n; i++) {
		for (size_t k = 0; k < in->series[i].n_attrs; k++) {
			free(in->series[i].attrs[k].key);
			free(in->series[i].attrs[k].val);
		}
		free(in->series[i].attrs);
	}
	for (size_t k = 0; k < in->n_keys; k++)
		free(in->keys[k]);
	free(in->keys);
	free(in->series);
	free(in->name);
	free(in->unit);
}

void nl_summary_free(struct nl_summary *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free_inst(&s->insts[i]);
	free(s->insts);
	free(s);
}

size_t nl_summary_processes(const struct nl_summary *s) { return s->processes; }

/* ---- quantiles ---------------------------------------------------------- */

/* As histogram_quantile does over cumulative le buckets: the rank is phi
 * times the count; the first bucket whose cumulative count reaches it holds
 * the answer, interpolated between the bucket's lower bound (the previous
 * bound, 0 for the first) and its upper bound. A rank beyond the last bound
 * answers that bound: the open bucket has no upper one. */
double nl_summary_quantile(double phi, const double *bounds, size_t n_bounds, const uint64_t *buckets)
{
	uint64_t count = 0;
	for (size_t i = 0; i <= n_bounds; i++)
		count += buckets[i];
	if (count == 0 || isnan(phi))
		return NAN;
	if (phi < 0)
		return -INFINITY;
	if (phi > 1)
		return INFINITY;
	double rank = phi * (double)count;
	double prev_le = 0, prev_cum = 0, cum = 0;
	for (size_t i = 0; i < n_bounds; i++) {
		cum += (double)buckets[i];
		double le = bounds[i];
		if (cum <= 0 || cum < rank) {
			/* Empty so far, or the rank lies further up. */
			prev_le = le;
			if (cum > 0)
				prev_cum = cum;
			continue;
		}
		if (cum == prev_cum)
			return prev_le;
		return prev_le + (le - prev_le) * (rank - prev_cum) / (cum - prev_cum);
	}
	return n_bounds ? bounds[n_bounds - 1] : NAN;
}

/* ---- adding snapshots --------------------------------------------------- */

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	return d ? memcpy(d, s, n) : NULL;
}

/* The attribute's value as text; control characters become '?', so that a
 * value never breaks a table's line. */
static char *render(const struct nl_attr *a)
{
	char buf[64];
	const char *text = buf;
	switch (a->type) {
	case NL_ATTR_STR:
		text = a->v.s ? a->v.s : "";
		break;
	case NL_ATTR_INT:
		snprintf(buf, sizeof buf, "%" PRId64, a->v.i);
		break;
	case NL_ATTR_BOOL:
		text = a->v.b ? "true" : "false";
		break;
	case NL_ATTR_DOUBLE:
		snprintf(buf, sizeof buf, "%g", a->v.d);
		break;
	}
	char *out = dup_str(text);
	for (char *p = out; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return out;
}

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct kv *)a)->key, ((const struct kv *)b)->key);
}

static void free_kvs(struct kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].val);
	}
	free(kv);
}

/* The point's attributes as sorted text pairs (malloc'd), or NULL. */
static struct kv *point_kvs(const struct nl_attr *attrs, size_t n)
{
	struct kv *kv = calloc(n ? n : 1, sizeof *kv);
	if (!kv)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		kv[i].key = dup_str(attrs[i].key ? attrs[i].key : "");
		kv[i].val = render(&attrs[i]);
		if (!kv[i].key || !kv[i].val) {
			free_kvs(kv, n);
			return NULL;
		}
	}
	qsort(kv, n, sizeof *kv, by_key);
	return kv;
}

static bool same_attrs(const struct series *s, const struct kv *kv, size_t n)
{
	if (s->n_attrs != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s->attrs[i].key, kv[i].key) != 0 || strcmp(s->attrs[i].val, kv[i].val) != 0)
			return false;
	return true;
}

static struct inst *find_inst(struct nl_summary *s, const struct nl_metric *m)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->insts[i].kind == m->kind && strcmp(s->insts[i].name, m->name) == 0)
			return &s->insts[i];
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct inst *bigger = realloc(s->insts, cap * sizeof *bigger);
		if (!bigger)
			return NULL;
		s->insts = bigger;
		s->cap = cap;
	}
	struct inst *in = &s->insts[s->n];
	memset(in, 0, sizeof *in);
	in->name = dup_str(m->name ? m->name : "");
	in->unit = dup_str(m->unit ? m->unit : "");
	if (!in->name || !in->unit) {
		free_inst(in);
		return NULL;
	}
	in->kind = m->kind;
	in->n_bounds = m->n_bounds <= NL_MAX_BOUNDS ? m->n_bounds : NL_MAX_BOUNDS;
	if (in->n_bounds)
		memcpy(in->bounds, m->bounds, in->n_bounds * sizeof *in->bounds);
	s->n++;
	return in;
}

/* Remembers the point's keys, in the order the instrument gives them. */
static int note_keys(struct inst *in, const struct nl_attr *attrs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *key = attrs[i].key ? attrs[i].key : "";
		bool known = false;
		for (size_t k = 0; k < in->n_keys && !known; k++)
			known = strcmp(in->keys[k], key) == 0;
		if (known)
			continue;
		char **bigger = realloc(in->keys, (in->n_keys + 1) * sizeof *bigger);
		if (!bigger)
			return -1;
		in->keys = bigger;
		if (!(in->keys[in->n_keys] = dup_str(key)))
			return -1;
		in->n_keys++;
	}
	return 0;
}

static struct series *find_series(struct inst *in, const struct nl_attr *attrs, size_t n)
{
	struct kv *kv = point_kvs(attrs, n);
	if (!kv)
		return NULL;
	for (size_t i = 0; i < in->n; i++)
		if (same_attrs(&in->series[i], kv, n)) {
			free_kvs(kv, n);
			return &in->series[i];
		}
	if (in->n == in->cap) {
		size_t cap = in->cap ? in->cap * 2 : 8;
		struct series *bigger = realloc(in->series, cap * sizeof *bigger);
		if (!bigger) {
			free_kvs(kv, n);
			return NULL;
		}
		in->series = bigger;
		in->cap = cap;
	}
	struct series *s = &in->series[in->n++];
	memset(s, 0, sizeof *s);
	s->attrs = kv;
	s->n_attrs = n;
	s->buckets_ok = true;
	return s;
}

static bool same_bounds(const struct inst *in, const struct nl_metric *m)
{
	if (m->n_bounds != in->n_bounds)
		return false;
	for (size_t i = 0; i < in->n_bounds; i++)
		if (m->bounds[i] != in->bounds[i])
			return false;
	return true;
}

static void add_point(struct inst *in, struct series *s, const struct nl_metric *m, const struct nl_point *p,
		      bool fresh)
{
	switch (in->kind) {
	case NL_COUNTER:
	case NL_UPDOWN:
		s->ivalue += p->ivalue;
		break;
	case NL_COUNTER_F64:
		s->dvalue += p->dvalue;
		break;
	case NL_GAUGE:
	case NL_GAUGE_INT:
		/* The newest value is the gauge's; processes do not add up. */
		if (fresh || p->time_ns >= s->time_ns) {
			s->ivalue = p->ivalue;
			s->dvalue = p->dvalue;
			s->time_ns = p->time_ns;
		}
		break;
	case NL_HISTOGRAM:
		if (p->count == 0)
			break;
		s->count += p->count;
		s->sum += p->sum;
		if (!same_bounds(in, m))
			s->buckets_ok = false;   /* no quantile can be told */
		else
			for (size_t i = 0; i <= in->n_bounds; i++)
				s->buckets[i] += p->buckets[i];
		break;
	}
}

int nl_summary_add(struct nl_summary *s, const struct nl_snapshot *snap)
{
	static const struct nl_attr overflow = { .key = "otel.metric.overflow", .type = NL_ATTR_BOOL, .v.b = true };
	s->processes++;
	for (size_t i = 0; i < snap->n_metrics; i++) {
		const struct nl_metric *m = &snap->metrics[i];
		if (!m->n_points || !m->name)
			continue;
		struct inst *in = find_inst(s, m);
		if (!in)
			return -1;
		for (size_t j = 0; j < m->n_points; j++) {
			const struct nl_point *p = &m->points[j];
			const struct nl_attr *attrs = p->attrs;
			size_t n = p->n_attrs;
			if (p->overflow && n == 0) {
				attrs = &overflow;
				n = 1;
			}
			size_t before = in->n;
			struct series *se;
			if (note_keys(in, attrs, n) != 0 || !(se = find_series(in, attrs, n)))
				return -1;
			add_point(in, se, m, p, in->n > before);
		}
	}
	return 0;
}
