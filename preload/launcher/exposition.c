/* SPDX-License-Identifier: Apache-2.0 */
/* The exposition of a tree's processes (exposition.h). */
#include "exposition.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct family {
	char name[NL_PROM_NAME_MAX];    /* the samples' name (a counter's with _total) */
	char base[NL_PROM_NAME_MAX];    /* the family's name in OpenMetrics */
	char unit[NL_PROM_NAME_MAX];
	enum nl_prom_type type;
	const char *help;               /* the first member's description, else its OpenTelemetry name */
	bool conflict;                  /* members of different types: left out */
};

/* One metric of one process, in the family it belongs to. */
struct member {
	size_t family, snap, metric;
};

/* The labels every sample of a process starts with. */
struct proc_labels {
	struct nl_promtext text;
};

struct label {
	char name[NL_PROM_NAME_MAX + 16];   /* room for exported_ */
	const char *key;                /* the attribute's own key: the order of a merge */
	const struct nl_attr *attr;
};

static bool kind_type(const struct nl_metric *m, enum nl_prom_type *type)
{
	switch (m->kind) {
	case NL_COUNTER:
	case NL_COUNTER_F64:
		*type = NL_PROM_COUNTER;
		return !m->delta;
	case NL_HISTOGRAM:
		*type = NL_PROM_HISTOGRAM;
		return !m->delta;
	case NL_GAUGE:
	case NL_GAUGE_INT:
	case NL_UPDOWN:
		*type = NL_PROM_GAUGE;
		return true;
	}
	return false;
}

static void put_attr_value(struct nl_promtext *t, const struct nl_attr *a)
{
	char buf[32];
	switch (a->type) {
	case NL_ATTR_STR:
		nl_prom_put_label_value(t, a->v.s);
		break;
	case NL_ATTR_INT:
		snprintf(buf, sizeof buf, "%" PRId64, a->v.i);
		nl_promtext_puts(t, buf);
		break;
	case NL_ATTR_BOOL:
		nl_promtext_puts(t, a->v.b ? "true" : "false");
		break;
	case NL_ATTR_DOUBLE:
		nl_prom_put_double(t, a->v.d);
		break;
	}
}

static int by_label(const void *a, const void *b)
{
	const struct label *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->key, y->key);
}

/* The labels the exposition sets itself: an attribute of the same name
 * becomes exported_<name>, as Prometheus renames a target's label that
 * clashes with one it sets. */
static bool reserved(const char *name)
{
	static const char *const names[] = { "job", "instance", "le", "otel_scope_name", "otel_scope_version" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* Appends ,name="value" for each attribute, their names cleaned; attributes
 * whose names clean to the same label have their values joined with ';' in
 * the order of their own keys. skip: keys left out (NULL-terminated). */
static void put_attrs(struct nl_promtext *t, const struct nl_attr *attrs, size_t n, const char *const *skip)
{
	struct label stack[16], *l = n <= 16 ? stack : malloc(n * sizeof *l);
	if (!l) {
		t->failed = true;
		return;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		bool skipped = false;
		for (const char *const *s = skip; s && *s && !skipped; s++)
			skipped = strcmp(attrs[i].key, *s) == 0;
		if (skipped)
			continue;
		char clean[NL_PROM_NAME_MAX];
		nl_prom_label_name(attrs[i].key, clean);
		if (reserved(clean))
			snprintf(l[k].name, sizeof l[k].name, "exported_%s", clean);
		else
			memcpy(l[k].name, clean, sizeof clean);
		l[k].key = attrs[i].key;
		l[k].attr = &attrs[i];
		k++;
	}
	qsort(l, k, sizeof *l, by_label);
	for (size_t i = 0; i < k; i++) {
		bool same = i > 0 && strcmp(l[i].name, l[i - 1].name) == 0;
		if (same) {
			nl_promtext_put(t, ";", 1);
		} else {
			if (i > 0)
				nl_promtext_put(t, "\"", 1);
			nl_promtext_put(t, ",", 1);
			nl_promtext_puts(t, l[i].name);
			nl_promtext_put(t, "=\"", 2);
		}
		put_attr_value(t, l[i].attr);
	}
	if (k)
		nl_promtext_put(t, "\"", 1);
	if (l != stack)
		free(l);
}

static const struct nl_attr *resource_attr(const struct nl_snapshot *s, const char *key)
{
	for (size_t i = 0; i < s->n_resource; i++)
		if (strcmp(s->resource[i].key, key) == 0)
			return &s->resource[i];
	return NULL;
}

/* job="…",instance="…" of a process: service.namespace/service.name (or
 * service.name alone) and service.instance.id, empty when missing. */
static void put_job_instance(struct nl_promtext *t, const struct nl_snapshot *s)
{
	const struct nl_attr *ns = resource_attr(s, "service.namespace");
	const struct nl_attr *name = resource_attr(s, "service.name");
	const struct nl_attr *id = resource_attr(s, "service.instance.id");
	nl_promtext_puts(t, "job=\"");
	if (ns) {
		put_attr_value(t, ns);
		nl_promtext_put(t, "/", 1);
	}
	if (name)
		put_attr_value(t, name);
	nl_promtext_puts(t, "\",instance=\"");
	if (id)
		put_attr_value(t, id);
	nl_promtext_put(t, "\"", 1);
}

static void proc_labels_make(struct proc_labels *p, const struct nl_snapshot *s)
{
	p->text = (struct nl_promtext){ 0 };
	put_job_instance(&p->text, s);
	if (s->scope_name) {
		nl_promtext_puts(&p->text, ",otel_scope_name=\"");
		nl_prom_put_label_value(&p->text, s->scope_name);
		nl_promtext_puts(&p->text, "\",otel_scope_version=\"");
		nl_prom_put_label_value(&p->text, s->scope_version);
		nl_promtext_put(&p->text, "\"", 1);
	}
}

static void put_sample(struct nl_promtext *t, const char *name, const char *suffix, const struct nl_promtext *labels,
		       const char *le, const char *value)
{
	nl_promtext_puts(t, name);
	nl_promtext_puts(t, suffix);
	nl_promtext_put(t, "{", 1);
	nl_promtext_put(t, labels->p, labels->len);
	if (le) {
		nl_promtext_puts(t, ",le=\"");
		nl_promtext_puts(t, le);
		nl_promtext_put(t, "\"", 1);
	}
	nl_promtext_put(t, "} ", 2);
	nl_promtext_puts(t, value);
	nl_promtext_put(t, "\n", 1);
}

static void format_double(char *buf, size_t size, double v)
{
	struct nl_promtext t = { 0 };
	nl_prom_put_double(&t, v);
	snprintf(buf, size, "%s", t.p ? t.p : "NaN");
	nl_promtext_free(&t);
}

static void put_points(struct nl_promtext *t, const struct family *f, const struct nl_metric *m,
		       const struct proc_labels *proc)
{
	struct nl_promtext labels = { 0 };
	char value[48], le[48];
	for (size_t i = 0; i < m->n_points; i++) {
		const struct nl_point *p = &m->points[i];
		labels.len = 0;
		labels.failed = false;
		nl_promtext_put(&labels, proc->text.p, proc->text.len);
		put_attrs(&labels, p->attrs, p->n_attrs, NULL);
		if (labels.failed) {
			t->failed = true;
			break;
		}
		if (f->type != NL_PROM_HISTOGRAM) {
			if (m->kind == NL_GAUGE || m->kind == NL_COUNTER_F64)
				format_double(value, sizeof value, p->dvalue);
			else
				snprintf(value, sizeof value, "%" PRId64, p->ivalue);
			put_sample(t, f->name, "", &labels, NULL, value);
			continue;
		}
		uint64_t below = 0;
		for (size_t b = 0; b < m->n_bounds && b < NL_MAX_BOUNDS; b++) {
			below += p->buckets[b];
			format_double(le, sizeof le, m->bounds[b]);
			snprintf(value, sizeof value, "%" PRIu64, below);
			put_sample(t, f->name, "_bucket", &labels, le, value);
		}
		snprintf(value, sizeof value, "%" PRIu64, p->count);
		put_sample(t, f->name, "_bucket", &labels, "+Inf", value);
		/* The sum is a counter only when no value can be negative. */
		if ((m->n_bounds == 0 || m->bounds[0] >= 0) && !(p->has_min_max && p->min < 0)) {
			format_double(value, sizeof value, p->sum);
			put_sample(t, f->name, "_sum", &labels, NULL, value);
		}
		snprintf(value, sizeof value, "%" PRIu64, p->count);
		put_sample(t, f->name, "_count", &labels, NULL, value);
	}
	nl_promtext_free(&labels);
}

static void put_metadata(struct nl_promtext *t, const struct family *f, bool om)
{
	static const char *const types[] = { "counter", "gauge", "histogram" };
	const char *name = om ? f->base : f->name;
	nl_promtext_puts(t, "# HELP ");
	nl_promtext_puts(t, name);
	nl_promtext_put(t, " ", 1);
	nl_prom_put_help(t, f->help, om);
	nl_promtext_puts(t, "\n# TYPE ");
	nl_promtext_puts(t, name);
	nl_promtext_put(t, " ", 1);
	nl_promtext_puts(t, types[f->type]);
	nl_promtext_put(t, "\n", 1);
	/* OpenMetrics wants the unit as the family name's suffix: a name that
	 * held the unit elsewhere already says it without UNIT. */
	size_t n = strlen(name), u = strlen(f->unit);
	if (om && u && n > u && name[n - u - 1] == '_' && strcmp(name + n - u, f->unit) == 0) {
		nl_promtext_puts(t, "# UNIT ");
		nl_promtext_puts(t, name);
		nl_promtext_put(t, " ", 1);
		nl_promtext_puts(t, f->unit);
		nl_promtext_put(t, "\n", 1);
	}
}

static void put_target_info(struct nl_promtext *t, const struct nl_snapshot *const *snaps, size_t n, bool om)
{
	static const char *const identity[] = { "service.name", "service.namespace", "service.instance.id", NULL };
	(void)om;
	bool any = false;
	for (size_t i = 0; i < n; i++) {
		if (!snaps[i]->n_resource)
			continue;
		if (!any)
			nl_promtext_puts(t, "# HELP target_info Target metadata\n# TYPE target_info gauge\n");
		any = true;
		nl_promtext_puts(t, "target_info{");
		put_job_instance(t, snaps[i]);
		put_attrs(t, snaps[i]->resource, snaps[i]->n_resource, identity);
		nl_promtext_puts(t, "} 1\n");
	}
}

static int by_member(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	if (x->snap != y->snap)
		return x->snap < y->snap ? -1 : 1;
	return x->metric < y->metric ? -1 : x->metric > y->metric;
}

/* Families are found by name among those made so far: a tree's processes
 * share a few dozen instruments. Returns the index, or SIZE_MAX when out of
 * memory. */
static size_t family_of(struct family **fams, size_t *n, size_t *cap, const struct nl_metric *m, enum nl_prom_type type)
{
	char name[NL_PROM_NAME_MAX], base[NL_PROM_NAME_MAX];
	nl_prom_metric_name(m->name, m->unit, type, name, base);
	for (size_t i = 0; i < *n; i++) {
		struct family *f = &(*fams)[i];
		if (strcmp(f->name, name) != 0)
			continue;
		if (f->type != type && !f->conflict) {
			f->conflict = true;
			nl_debug("prometheus: %s is both a %d and a %d: left out", name, (int)f->type, (int)type);
		}
		return i;
	}
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		struct family *bigger = realloc(*fams, c * sizeof *bigger);
		if (!bigger)
			return SIZE_MAX;
		*fams = bigger;
		*cap = c;
	}
	struct family *f = &(*fams)[(*n)++];
	memcpy(f->name, name, sizeof name);
	memcpy(f->base, base, sizeof base);
	nl_prom_unit(m->unit, type, f->unit);
	f->type = type;
	f->help = m->description && *m->description ? m->description : m->name;
	f->conflict = false;
	return *n - 1;
}

static int by_family_name(const void *a, const void *b, void *fams)
{
	const struct family *f = fams;
	return strcmp(f[*(const size_t *)a].name, f[*(const size_t *)b].name);
}

int nl_exposition_write(struct nl_promtext *t, const struct nl_snapshot *const *snaps, size_t n, bool om)
{
	struct family *fams = NULL;
	size_t n_fams = 0, cap_fams = 0, n_members = 0, cap_members = 0;
	struct member *members = NULL;
	struct proc_labels *procs = calloc(n ? n : 1, sizeof *procs);
	size_t *order = NULL, *rank = NULL;
	bool ok = procs != NULL;
	for (size_t s = 0; ok && s < n; s++) {
		proc_labels_make(&procs[s], snaps[s]);
		for (size_t m = 0; ok && m < snaps[s]->n_metrics; m++) {
			const struct nl_metric *metric = &snaps[s]->metrics[m];
			enum nl_prom_type type;
			if (!metric->n_points || !kind_type(metric, &type))
				continue;
			size_t f = family_of(&fams, &n_fams, &cap_fams, metric, type);
			if (f != SIZE_MAX && n_members == cap_members) {
				size_t c = cap_members ? cap_members * 2 : 256;
				struct member *bigger = realloc(members, c * sizeof *bigger);
				if (bigger) {
					members = bigger;
					cap_members = c;
				}
			}
			if (f == SIZE_MAX || n_members == cap_members) {
				ok = false;
				break;
			}
			members[n_members++] = (struct member){ f, s, m };
		}
	}
	/* Families in the order of their names, so that scrapes compare. */
	if (ok && n_fams) {
		order = malloc(n_fams * sizeof *order);
		rank = malloc(n_fams * sizeof *rank);
		ok = order && rank;
		for (size_t i = 0; ok && i < n_fams; i++)
			order[i] = i;
		if (ok) {
			qsort_r(order, n_fams, sizeof *order, by_family_name, fams);
			for (size_t i = 0; i < n_fams; i++)
				rank[order[i]] = i;
			for (size_t i = 0; i < n_members; i++)
				members[i].family = rank[members[i].family];
			qsort(members, n_members, sizeof *members, by_member);
		}
	}
	for (size_t i = 0; ok && i < n_members; i++) {
		const struct family *f = &fams[order[members[i].family]];
		if (f->conflict)
			continue;
		if (i == 0 || members[i - 1].family != members[i].family)
			put_metadata(t, f, om);
		put_points(t, f, &snaps[members[i].snap]->metrics[members[i].metric], &procs[members[i].snap]);
	}
	if (ok)
		put_target_info(t, snaps, n, om);
	if (ok && om)
		nl_promtext_puts(t, "# EOF\n");
	for (size_t s = 0; procs && s < n; s++)
		nl_promtext_free(&procs[s].text);
	free(procs);
	free(members);
	free(fams);
	free(order);
	free(rank);
	if (!ok)
		t->failed = true;
	return t->failed ? -1 : 0;
}
