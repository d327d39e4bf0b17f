#include "registry_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"

/* Instruments and series are only ever added, never removed while the process
 * runs, so readers walk the lists without locks; `create_lock` only orders
 * writers. */
static _Atomic(struct nl_instrument *) instruments;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t cardinality_limit = 2000;

static const struct nl_attr overflow_attr = { .key = "otel.metric.overflow", .type = NL_ATTR_BOOL, .v.b = true };

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

static double bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

static void series_clear(struct nl_series *s)
{
	atomic_store(&s->has_value, false);
	atomic_store(&s->retiring, false);
	atomic_store(&s->u.count, 0);
	for (size_t i = 0; i <= NL_MAX_BOUNDS; i++)
		atomic_store(&s->u.hist.buckets[i], 0);
	atomic_store(&s->u.hist.sum_bits, dbits(0));
	atomic_store(&s->u.hist.min_bits, dbits(INFINITY));
	atomic_store(&s->u.hist.max_bits, dbits(-INFINITY));
	s->delta_base_count = 0;
	memset(s->delta_base_buckets, 0, sizeof s->delta_base_buckets);
	s->delta_base_sum = 0;
	s->delta_base_time_ns = 0;
}

void nl_registry_set_cardinality_limit(size_t limit) { atomic_store(&cardinality_limit, limit ? limit : 1); }

struct nl_instrument *nl_instrument_get(const char *name, const char *unit, const char *description,
					enum nl_kind kind, const double *bounds, size_t n_bounds)
{
	NL_ASSERT_NOT_IN_HOOK();
	if (n_bounds > NL_MAX_BOUNDS)
		return NULL;
	pthread_mutex_lock(&create_lock);
	struct nl_instrument *i;
	for (i = atomic_load(&instruments); i; i = i->next)
		if (strcmp(i->name, name) == 0)
			break;
	if (!i && (i = calloc(1, sizeof *i))) {
		i->name = name;
		i->unit = unit;
		i->description = description;
		i->kind = kind;
		i->bounds = bounds;
		i->n_bounds = n_bounds;
		series_clear(&i->overflow);
		i->overflow.overflow = true;
		i->overflow.attrs[0] = overflow_attr;
		i->overflow.n_attrs = 1;
		/* Published last: a reader sees either no instrument or a complete one. */
		i->next = atomic_load(&instruments);
		atomic_store(&instruments, i);
	}
	pthread_mutex_unlock(&create_lock);
	return i;
}

static bool attr_equal(const struct nl_attr *a, const struct nl_attr *b)
{
	if (strcmp(a->key, b->key) != 0 || a->type != b->type)
		return false;
	switch (a->type) {
	case NL_ATTR_STR:
		return strcmp(a->v.s, b->v.s) == 0;
	case NL_ATTR_INT:
		return a->v.i == b->v.i;
	case NL_ATTR_BOOL:
		return a->v.b == b->v.b;
	case NL_ATTR_DOUBLE:
		return dbits(a->v.d) == dbits(b->v.d);
	}
	return false;
}

static struct nl_series *find(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n)
{
	for (struct nl_series *s = atomic_load(&inst->head); s; s = s->next) {
		if (s->n_attrs != n)
			continue;
		size_t k = 0;
		while (k < n && attr_equal(&s->attrs[k], &attrs[k]))
			k++;
		if (k == n)
			return s;
	}
	return NULL;
}

static void free_series(struct nl_series *s)
{
	if (s->static_attrs)
		return;   /* lives in the reserved room */
	for (size_t k = 0; k < s->n_attrs; k++) {
		free((char *)s->attrs[k].key);
		if (s->attrs[k].type == NL_ATTR_STR)
			free((char *)s->attrs[k].v.s);
	}
	free(s);
}

static struct nl_series *new_series(const struct nl_attr *attrs, size_t n)
{
	struct nl_series *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	series_clear(s);
	for (size_t k = 0; k < n; k++) {
		s->attrs[k] = attrs[k];
		s->attrs[k].key = strdup(attrs[k].key);
		if (attrs[k].type == NL_ATTR_STR)
			s->attrs[k].v.s = strdup(attrs[k].v.s);
		s->n_attrs = k + 1;
		if (!s->attrs[k].key || (attrs[k].type == NL_ATTR_STR && !s->attrs[k].v.s)) {
			free_series(s);
			return NULL;
		}
	}
	return s;
}

/* Pushes s on the instrument's list. Lock-free, since hooks publish too;
 * readers walk the list without locks and see s complete. */
static void publish(struct nl_instrument *inst, struct nl_series *s)
{
	struct nl_series *head = atomic_load(&inst->head);
	do
		s->next = head;
	while (!atomic_compare_exchange_weak(&inst->head, &head, s));
	atomic_fetch_add(&inst->n_series, 1);
}

struct nl_series *nl_series_get(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n)
{
	NL_ASSERT_NOT_IN_HOOK();
	if (n > NL_MAX_ATTRS)
		return &inst->overflow;
	struct nl_series *s = find(inst, attrs, n);
	if (s)
		return s;
	pthread_mutex_lock(&create_lock);
	s = find(inst, attrs, n);
	if (!s) {
		/* The overflow series itself takes one place of the limit, as in the
		 * OpenTelemetry SDK. */
		if (atomic_load(&inst->n_series) + 1 >= atomic_load(&cardinality_limit) ||
		    !(s = new_series(attrs, n))) {
			s = &inst->overflow;
		} else {
			publish(inst, s);
		}
	}
	pthread_mutex_unlock(&create_lock);
	return s;
}

/* ---- series created by hooks ------------------------------------------------ */

static struct nl_series *static_room;
static size_t static_room_n;
static _Atomic size_t static_room_used;

size_t nl_registry_reserve_static(size_t n)
{
	NL_ASSERT_NOT_IN_HOOK();
	if (static_room || n == 0)
		return static_room_n;
	/* Untouched pages cost no memory: the room is paid for as it is used. */
	void *p = mmap(NULL, n * sizeof *static_room, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 0;
	static_room = p;
	static_room_n = n;
	return n;
}

struct nl_series *nl_series_add_static(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n)
{
	if (n > NL_MAX_ATTRS || atomic_load_explicit(&inst->n_series, memory_order_relaxed) + 1 >=
					 atomic_load_explicit(&cardinality_limit, memory_order_relaxed))
		return &inst->overflow;
	size_t i = atomic_fetch_add(&static_room_used, 1);
	if (i >= static_room_n)
		return &inst->overflow;
	struct nl_series *s = &static_room[i];
	series_clear(s);
	s->static_attrs = true;
	memcpy(s->attrs, attrs, n * sizeof *attrs);
	s->n_attrs = n;
	publish(inst, s);
	return s;
}
struct nl_series *nl_instrument_overflow(struct nl_instrument *inst) { return &inst->overflow; }
bool nl_series_is_overflow(const struct nl_series *s) { return s->overflow; }

/* ---- recording ---------------------------------------------------------- */

void nl_counter_add(struct nl_series *s, uint64_t n)
{
	atomic_fetch_add_explicit(&s->u.count, n, memory_order_relaxed);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

void nl_updown_add(struct nl_series *s, int64_t n)
{
	atomic_fetch_add_explicit(&s->u.count, (uint64_t)n, memory_order_relaxed);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

void nl_gauge_set(struct nl_series *s, double v)
{
	atomic_store_explicit(&s->u.bits, dbits(v), memory_order_relaxed);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

void nl_gauge_set_int(struct nl_series *s, int64_t v)
{
	atomic_store_explicit(&s->u.bits, (uint64_t)v, memory_order_relaxed);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

void nl_gauge_clear(struct nl_series *s) { atomic_store_explicit(&s->has_value, false, memory_order_release); }

size_t nl_hist_bucket(const double *bounds, size_t n_bounds, double v)
{
	size_t i = 0;
	while (i < n_bounds && v > bounds[i])
		i++;
	return i;
}

static void cas_update(_Atomic uint64_t *cell, double v, int sign)
{
	uint64_t cur = atomic_load_explicit(cell, memory_order_relaxed);
	for (;;) {
		double d = bitsd(cur);
		double next = sign == 0 ? d + v : v;
		if ((sign < 0 && !(v < d)) || (sign > 0 && !(v > d)))
			return;
		if (atomic_compare_exchange_weak_explicit(cell, &cur, dbits(next), memory_order_relaxed,
							  memory_order_relaxed))
			return;
	}
}

void nl_hist_record(struct nl_instrument *inst, struct nl_series *s, double v)
{
	if (isnan(v))
		return;
	atomic_fetch_add_explicit(&s->u.hist.buckets[nl_hist_bucket(inst->bounds, inst->n_bounds, v)], 1,
				  memory_order_relaxed);
	cas_update(&s->u.hist.sum_bits, v, 0);
	cas_update(&s->u.hist.min_bits, v, -1);
	cas_update(&s->u.hist.max_bits, v, 1);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

/* ---- fork --------------------------------------------------------------- */

void nl_registry_atfork_prepare(void) { pthread_mutex_lock(&create_lock); }
void nl_registry_atfork_parent(void) { pthread_mutex_unlock(&create_lock); }
void nl_registry_atfork_child(void)
{
	pthread_mutex_init(&create_lock, NULL);
	nl_registry_reset_values();
}

void nl_registry_reset_values(void)
{
	for (struct nl_instrument *i = atomic_load(&instruments); i; i = i->next) {
		series_clear(&i->overflow);
		for (struct nl_series *s = atomic_load(&i->head); s; s = s->next)
			series_clear(s);
	}
}

/* ---- snapshots ---------------------------------------------------------- */

static void fill_point(const struct nl_instrument *inst, struct nl_series *s, bool delta, uint64_t start_ns,
		       uint64_t now_ns, struct nl_point *p)
{
	p->attrs = s->attrs;
	p->n_attrs = s->n_attrs;
	p->time_ns = now_ns;
	p->series = s;
	p->overflow = s->overflow;
	p->start_ns = delta && s->delta_base_time_ns ? s->delta_base_time_ns : start_ns;
	switch (inst->kind) {
	case NL_COUNTER:
		p->ivalue = (int64_t)(atomic_load(&s->u.count) - (delta ? s->delta_base_count : 0));
		break;
	case NL_UPDOWN:
		p->ivalue = (int64_t)atomic_load(&s->u.count);
		break;
	case NL_GAUGE:
		p->dvalue = bitsd(atomic_load(&s->u.bits));
		p->start_ns = 0;
		break;
	case NL_GAUGE_INT:
		p->ivalue = (int64_t)atomic_load(&s->u.bits);
		p->start_ns = 0;
		break;
	case NL_HISTOGRAM:
		/* count is the sum of the buckets, so the two always agree. */
		for (size_t b = 0; b <= inst->n_bounds; b++) {
			p->buckets[b] = atomic_load(&s->u.hist.buckets[b]) - (delta ? s->delta_base_buckets[b] : 0);
			p->count += p->buckets[b];
		}
		p->sum = bitsd(atomic_load(&s->u.hist.sum_bits)) - (delta ? s->delta_base_sum : 0);
		/* min/max are since the start of the process: exported only for cumulative. */
		p->has_min_max = !delta;
		p->min = bitsd(atomic_load(&s->u.hist.min_bits));
		p->max = bitsd(atomic_load(&s->u.hist.max_bits));
		if (!isfinite(p->min) || !isfinite(p->max))
			p->has_min_max = false;
		break;
	}
}

static size_t count_series(const struct nl_instrument *inst)
{
	size_t n = atomic_load(&inst->overflow.has_value) ? 1 : 0;
	for (struct nl_series *s = atomic_load(&inst->head); s; s = s->next)
		n += atomic_load(&s->has_value);
	return n;
}

struct nl_snapshot *nl_snapshot_take(bool delta_counters, bool delta_histograms, uint64_t start_ns,
				     uint64_t now_ns)
{
	struct nl_snapshot *snap = calloc(1, sizeof *snap);
	if (!snap)
		return NULL;
	size_t n_inst = 0;
	for (struct nl_instrument *i = atomic_load(&instruments); i; i = i->next)
		n_inst++;
	snap->metrics = calloc(n_inst ? n_inst : 1, sizeof *snap->metrics);
	if (!snap->metrics) {
		free(snap);
		return NULL;
	}
	/* Instruments are listed newest first; export them in creation order. */
	struct nl_instrument **order = calloc(n_inst ? n_inst : 1, sizeof *order);
	if (!order) {
		nl_snapshot_free(snap);
		return NULL;
	}
	size_t k = n_inst;
	for (struct nl_instrument *i = atomic_load(&instruments); i && k; i = i->next)
		order[--k] = i;

	for (size_t idx = 0; idx < n_inst; idx++) {
		struct nl_instrument *inst = order[idx];
		size_t n = inst ? count_series(inst) : 0;
		if (n == 0)
			continue;
		struct nl_metric *m = &snap->metrics[snap->n_metrics];
		m->name = inst->name;
		m->unit = inst->unit;
		m->description = inst->description;
		m->kind = inst->kind;
		m->delta = inst->kind == NL_COUNTER ? delta_counters : inst->kind == NL_HISTOGRAM && delta_histograms;
		m->bounds = inst->bounds;
		m->n_bounds = inst->n_bounds;
		m->points = calloc(n, sizeof *m->points);
		if (!m->points) {
			free(order);
			nl_snapshot_free(snap);
			return NULL;
		}
		/* A series may gain its first value while we walk: never exceed n. */
		for (struct nl_series *s = atomic_load(&inst->head); s && m->n_points < n; s = s->next)
			if (atomic_load(&s->has_value))
				fill_point(inst, s, m->delta, start_ns, now_ns, &m->points[m->n_points++]);
		if (m->n_points < n && atomic_load(&inst->overflow.has_value))
			fill_point(inst, &inst->overflow, m->delta, start_ns, now_ns, &m->points[m->n_points++]);
		snap->n_points += m->n_points;
		snap->n_metrics++;
	}
	free(order);
	return snap;
}

void nl_series_retire(struct nl_series *s) { atomic_store(&s->retiring, true); }
void nl_series_unretire(struct nl_series *s) { atomic_store(&s->retiring, false); }

void nl_snapshot_commit(const struct nl_snapshot *snap)
{
	for (size_t i = 0; i < snap->n_metrics; i++) {
		const struct nl_metric *m = &snap->metrics[i];
		for (size_t j = 0; j < m->n_points; j++) {
			const struct nl_point *p = &m->points[j];
			struct nl_series *s = p->series;
			bool retiring = true;
			if (atomic_compare_exchange_strong(&s->retiring, &retiring, false))
				atomic_store(&s->has_value, false);
			if (!m->delta)
				continue;
			if (m->kind == NL_COUNTER) {
				s->delta_base_count += (uint64_t)p->ivalue;
			} else {
				for (size_t b = 0; b <= m->n_bounds; b++)
					s->delta_base_buckets[b] += p->buckets[b];
				s->delta_base_sum += p->sum;
			}
			s->delta_base_time_ns = p->time_ns;
		}
	}
}

void nl_snapshot_free(struct nl_snapshot *snap)
{
	if (!snap)
		return;
	for (size_t i = 0; i < snap->n_metrics; i++)
		free(snap->metrics[i].points);
	free(snap->metrics);
	free(snap);
}
