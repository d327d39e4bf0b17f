/* SPDX-License-Identifier: Apache-2.0 */
#include "registry_impl.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fork.h"
#include "forkpath.h"
#include "loadpath.h"
#include "state.h"

/* Instruments and series are only ever added, never removed while the process
 * runs, so readers walk the lists without locks; `create_lock` only orders
 * writers. The lists start in the arena's header (root) and in each
 * instrument (head), newest first, linked by offsets. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
/* Threads that hold or wait for create_lock: a fork child reads it to know
 * whether one might have held it at the fork, when the fork did not. */
static _Atomic unsigned creators;
static bool held_for_fork;              /* atfork_prepare took create_lock */
static const struct nl_fork_handlers fork_handlers;

static void create_begin(void)
{
	nl_fork_register(NL_FORK_REGISTRY, &fork_handlers);
	atomic_fetch_add(&creators, 1);
	pthread_mutex_lock(&create_lock);
}

static void create_end(void)
{
	pthread_mutex_unlock(&create_lock);
	atomic_fetch_sub(&creators, 1);
}
static _Atomic size_t cardinality_limit = 2000;

const struct nl_attr nl_overflow_attr = { .key = "otel.metric.overflow", .type = NL_ATTR_BOOL, .v.b = true };

#define INST(off) ((struct nl_instrument *)nl_seg_ptr(off))
#define SERIES(off) ((struct nl_series *)nl_seg_ptr(off))

static uint64_t off_of(const void *p) { return (uint64_t)((const char *)p - nl_seg_base); }

static uint64_t first_instrument(void) { return nl_seg_base ? atomic_load(&nl_seg_header()->root) : 0; }

uint32_t nl_registry_layout(void)
{
	/* The sizes and places of everything a reader walks. */
	const uint64_t parts[] = { sizeof(struct nl_series), sizeof(struct nl_instrument),
				   offsetof(struct nl_series, u), offsetof(struct nl_series, attrs),
				   offsetof(struct nl_hist, buckets), offsetof(struct nl_instrument, overflow),
				   offsetof(struct nl_instrument, head), sizeof(struct nl_sattr), NL_MAX_BOUNDS,
				   NL_MAX_ATTRS, sizeof(void *), 2 };
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
		h = (h ^ (uint32_t)(parts[i] * 2654435761u)) * 16777619u;
	return h;
}

size_t nl_registry_capacity(size_t limit)
{
	/* Room for every instrument the shim knows at the cardinality limit,
	 * strings included: address space, of which only what is used becomes
	 * memory. */
	uint64_t cap = (uint64_t)4 << 20;
	cap += ((uint64_t)limit + 1) * 40 * (sizeof(struct nl_series) + 256);
	if (cap > (uint64_t)1 << 30)
		cap = (uint64_t)1 << 30;
	return (size_t)(cap + 4095) / 4096 * 4096;
}

/* Values back to nothing; only the part the series' kind has is touched. */
static void series_clear(struct nl_series *s)
{
	atomic_store(&s->has_value, false);
	atomic_store(&s->retiring, false);
	s->delta_base_count = 0;
	s->delta_base_sum = 0;
	s->delta_base_time_ns = 0;
	if (s->kind != NL_HISTOGRAM) {
		atomic_store(&s->u.count, 0);
		return;
	}
	for (size_t i = 0; i <= NL_MAX_BOUNDS; i++)
		atomic_store(&s->u.hist.buckets[i], 0);
	atomic_store(&s->u.hist.sum_bits, nl_dbits(0));
	atomic_store(&s->u.hist.min_bits, nl_dbits(INFINITY));
	atomic_store(&s->u.hist.max_bits, nl_dbits(-INFINITY));
	memset(s->u.hist.delta_base_buckets, 0, sizeof s->u.hist.delta_base_buckets);
}

/* A series' attributes with pointers into this process's arena. */
static void local_attrs(const struct nl_series *s, struct nl_attr *out)
{
	const struct nl_sattr *a = s->attrs ? nl_seg_ptr(s->attrs) : NULL;
	for (size_t k = 0; k < s->n_attrs; k++) {
		out[k].key = nl_seg_ptr(a[k].key);
		out[k].type = (enum nl_attr_type)a[k].type;
		if (out[k].type == NL_ATTR_STR)
			out[k].v.s = nl_seg_ptr(a[k].v.s);
		else
			nl_sattr_scalar(&a[k], &out[k]);
	}
}

/* Sets up a zeroed series record of this kind with copies of the attributes. */
static bool series_init(struct nl_series *s, enum nl_kind kind, const struct nl_attr *attrs, size_t n)
{
	s->kind = (uint8_t)kind;
	series_clear(s);
	if (!nl_seg_put_attrs(attrs, n, &s->attrs))
		return false;
	s->n_attrs = (uint16_t)n;
	return true;
}

NL_LOAD_PATH void nl_registry_set_cardinality_limit(size_t limit) { atomic_store(&cardinality_limit, limit ? limit : 1); }

struct nl_instrument *nl_registry_find_instrument(const char *name)
{
	for (uint64_t off = first_instrument(); off; off = INST(off)->next)
		if (strcmp(INST(off)->name_p, name) == 0)
			return INST(off);
	return NULL;
}

/* The window of bucket guesses (registry_impl.h): it starts a binade below
 * the smallest positive bound. A guess never exceeds the value's bucket
 * (every bound it counts is below the binade, so below the value), which
 * bucket_of then walks up to: a bound or two, for bounds a binade or more
 * apart. Exponent bits of 2048 and up are negative values: guess 0. */
static void bucket_guesses(struct nl_instrument *inst, const double *bounds, size_t n)
{
	uint64_t base = 1023;
	for (size_t j = 0; j < n; j++)
		if (bounds[j] > 0) {
			base = nl_dbits(bounds[j]) >> 52;
			break;
		}
	inst->bucket_base = (uint16_t)(base ? base - 1 : 0);
	/* The bounds ascend and so do the binades: one pass counts for all. */
	size_t below = 0;
	for (unsigned k = 0; k < NL_BUCKET_WINDOW; k++) {
		uint64_t e = inst->bucket_base + k;
		if (e >= 2048) {
			inst->bucket_from[k] = 0;
			continue;
		}
		double lo = nl_bitsd(e << 52);
		while (below < n && bounds[below] < lo)
			below++;
		inst->bucket_from[k] = (uint8_t)below;
	}
}

struct nl_instrument *nl_instrument_get(const char *name, const char *unit, const char *description,
					enum nl_kind kind, const double *bounds, size_t n_bounds)
{
	NL_ASSERT_NOT_IN_HOOK();
	if (n_bounds > NL_MAX_BOUNDS)
		return NULL;
	create_begin();
	nl_seg_arena_ensure(nl_registry_capacity(atomic_load(&cardinality_limit)));
	struct nl_instrument *i = nl_seg_base ? nl_registry_find_instrument(name) : NULL;
	uint64_t off = i || !nl_seg_base ? 0 : nl_seg_alloc(offsetof(struct nl_instrument, overflow) + nl_series_size(kind));
	if (off) {
		i = INST(off);
		i->name = nl_seg_copy_str(name);
		i->unit = nl_seg_copy_str(unit ? unit : "");
		i->description = nl_seg_copy_str(description ? description : "");
		i->bounds = n_bounds ? nl_seg_alloc(n_bounds * sizeof *bounds) : 0;
		if (i->bounds)
			memcpy(nl_seg_ptr(i->bounds), bounds, n_bounds * sizeof *bounds);
		i->kind = (uint32_t)kind;
		i->n_bounds = (uint32_t)n_bounds;
		i->name_p = name;
		i->unit_p = unit;
		i->description_p = description;
		i->bounds_p = bounds;
		bucket_guesses(i, bounds, n_bounds);
		i->overflow.overflow = true;
		if (!i->name || !i->unit || !i->description || (n_bounds && !i->bounds) ||
		    !series_init(&i->overflow, kind, &nl_overflow_attr, 1)) {
			i = NULL;   /* the arena is full */
		} else {
			/* Published last: a reader sees either no instrument or a complete one. */
			struct nl_seg_header *h = nl_seg_header();
			i->next = atomic_load(&h->root);
			atomic_store(&h->root, off);
		}
	}
	create_end();
	return i;
}

static bool attr_equal(const struct nl_sattr *a, const struct nl_attr *b)
{
	if ((enum nl_attr_type)a->type != b->type || strcmp(nl_seg_ptr(a->key), b->key) != 0)
		return false;
	switch (b->type) {
	case NL_ATTR_STR:
		return strcmp(nl_seg_ptr(a->v.s), b->v.s) == 0;
	case NL_ATTR_INT:
		return a->v.i == b->v.i;
	case NL_ATTR_BOOL:
		return (a->v.b != 0) == b->v.b;
	case NL_ATTR_DOUBLE:
		return a->v.d == nl_dbits(b->v.d);
	}
	return false;
}

static struct nl_series *find(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n)
{
	for (uint64_t off = atomic_load(&inst->head); off; off = SERIES(off)->next) {
		struct nl_series *s = SERIES(off);
		if (s->n_attrs != n)
			continue;
		const struct nl_sattr *a = s->attrs ? nl_seg_ptr(s->attrs) : NULL;
		size_t k = 0;
		while (k < n && attr_equal(&a[k], &attrs[k]))
			k++;
		if (k == n)
			return s;
	}
	return NULL;
}

/* A series with these attributes (copied into the arena), not yet
 * published; NULL when the arena is full. Lock-free: hooks create series. */
static struct nl_series *new_series(enum nl_kind kind, const struct nl_attr *attrs, size_t n)
{
	uint64_t off = nl_seg_alloc(nl_series_size(kind));
	if (!off)
		return NULL;
	struct nl_series *s = SERIES(off);
	return series_init(s, kind, attrs, n) ? s : NULL;
}

/* Pushes s on the instrument's list. Lock-free, since hooks publish too;
 * readers walk the list without locks and see s complete. */
static void publish(struct nl_instrument *inst, struct nl_series *s)
{
	uint64_t head = atomic_load(&inst->head);
	do
		s->next = head;
	while (!atomic_compare_exchange_weak(&inst->head, &head, off_of(s)));
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
	create_begin();
	s = find(inst, attrs, n);
	if (!s) {
		/* The overflow series itself takes one place of the limit, as in the
		 * OpenTelemetry SDK. */
		if (atomic_load(&inst->n_series) + 1 >= atomic_load(&cardinality_limit) ||
		    !(s = new_series((enum nl_kind)inst->kind, attrs, n))) {
			s = &inst->overflow;
		} else {
			publish(inst, s);
		}
	}
	create_end();
	return s;
}

/* ---- series created by hooks ------------------------------------------------ */

/* The room hooks may use is a count: their series come from the arena like
 * every other, so they are kept in the segment too. */
static _Atomic size_t static_room_n;
static _Atomic size_t static_room_used;

size_t nl_registry_reserve_static(size_t n)
{
	NL_ASSERT_NOT_IN_HOOK();
	size_t expected = 0;
	if (n && !atomic_compare_exchange_strong(&static_room_n, &expected, n))
		return expected;
	return n;
}

struct nl_series *nl_series_add_static(struct nl_instrument *inst, const struct nl_attr *attrs, size_t n)
{
	if (n > NL_MAX_ATTRS || atomic_load_explicit(&inst->n_series, memory_order_relaxed) + 1 >=
					 atomic_load_explicit(&cardinality_limit, memory_order_relaxed))
		return &inst->overflow;
	if (atomic_fetch_add(&static_room_used, 1) >= atomic_load(&static_room_n))
		return &inst->overflow;
	struct nl_series *s = new_series((enum nl_kind)inst->kind, attrs, n);
	if (!s)
		return &inst->overflow;
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
	atomic_store_explicit(&s->u.bits, nl_dbits(v), memory_order_relaxed);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

void nl_gauge_set_int(struct nl_series *s, int64_t v)
{
	atomic_store_explicit(&s->u.bits, (uint64_t)v, memory_order_relaxed);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

void nl_gauge_clear(struct nl_series *s) { atomic_store_explicit(&s->has_value, false, memory_order_release); }

bool nl_gauge_get_int(const struct nl_series *s, int64_t *v)
{
	if (!atomic_load_explicit(&s->has_value, memory_order_acquire))
		return false;
	*v = (int64_t)atomic_load_explicit(&s->u.bits, memory_order_relaxed);
	return true;
}

size_t nl_hist_bucket(const double *bounds, size_t n_bounds, double v)
{
	/* The number of bounds below v (bounds ascend). The first bucket is the
	 * usual one (a short request, an empty body) and takes one compare; the
	 * others are found by halving, a compare and a conditional move a step
	 * (three for the usual 14 or 15 bounds, where a scan of a 1 KiB body's
	 * buckets takes eleven). NaN is below nothing: bucket 0. */
	if (n_bounds == 0 || !(v > bounds[0]))
		return 0;
	size_t lo = 1, n = n_bounds - 1;   /* the answer is in [lo, lo + n] */
	while (n > 1) {
		size_t half = n / 2;
		lo = v > bounds[lo + half - 1] ? lo + half : lo;
		n -= half;
	}
	return lo + (n == 1 && v > bounds[lo]);
}

/* nl_hist_bucket, from the instrument's guess: a table load and a compare
 * or two where halving 15 bounds takes four steps. */
static inline size_t bucket_of(const struct nl_instrument *inst, double v)
{
	const double *b = inst->bounds_p;
	size_t n = inst->n_bounds;
	if (n == 0 || !(v > b[0]))
		return 0;
	uint64_t k = (nl_dbits(v) >> 52) - inst->bucket_base;
	if (k >= NL_BUCKET_WINDOW)
		return nl_hist_bucket(b, n, v);
	size_t i = inst->bucket_from[k];
	while (i < n && v > b[i])
		i++;
	return i;
}

size_t nl_inst_bucket(const struct nl_instrument *inst, double v) { return bucket_of(inst, v); }

void nl_hist_record(struct nl_instrument *inst, struct nl_series *s, double v)
{
	if (isnan(v))
		return;
	atomic_fetch_add_explicit(&s->u.hist.buckets[bucket_of(inst, v)], 1, memory_order_relaxed);
	nl_cas_double(&s->u.hist.sum_bits, v, 0);
	nl_cas_double(&s->u.hist.min_bits, v, -1);
	nl_cas_double(&s->u.hist.max_bits, v, 1);
	atomic_store_explicit(&s->has_value, true, memory_order_release);
}

/* ---- fork --------------------------------------------------------------- */

/* A child must never find a series half made: the lock is held across a
 * fork, once the registry has been written to at all (that is when this is
 * registered). */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&create_lock);
	held_for_fork = true;
}

static void atfork_parent(void)
{
	if (!held_for_fork)
		return;
	held_for_fork = false;
	pthread_mutex_unlock(&create_lock);
}

NL_FORK_PATH static void atfork_child(void)
{
	if (held_for_fork) {
		held_for_fork = false;
		pthread_mutex_unlock(&create_lock);
		return;
	}
	/* Registered while the fork was under way: the registering thread
	 * waited for this child to be made before it created anything
	 * (fork.h), unless that wait ran out (a fork taking over a second). Then
	 * a series may be half made by a thread this child does not have, and
	 * the child records nothing (fail open; an image it execs records
	 * again). */
	pthread_mutex_init(&create_lock, NULL);
	if (atomic_load(&creators)) {
		atomic_store(&creators, 0);
		atomic_store(&nl_recording, false);
	}
}

static const struct nl_fork_handlers fork_handlers = { atfork_prepare, atfork_parent, atfork_child };

void nl_registry_forget_parent(void)
{
	/* The arena first: while it is still the parent's file, zeroing would
	 * zero the parent's values; the child's first record does it then. */
	if (nl_seg_atfork_child())
		nl_registry_reset_values();
}

/* ---- a fork child's copy of the arena -------------------------------------- */

/* The first node from off on that the copy holds whole: below limit, and
 * for a series, its attributes too (each is one allocation, so a block that
 * starts below limit ends there). A node past it was published by the
 * parent after the copy began; its link is read from the parent's arena,
 * where it never changes once published. A link that makes no sense (a
 * parent's arena the child cannot read that far) ends the list: the child
 * makes again what it needs. next is the first field of both nodes. */
static uint64_t held_node(const char *copy, uint64_t off, uint64_t limit, uint64_t live_end, bool series)
{
	_Static_assert(offsetof(struct nl_series, next) == 0 && offsetof(struct nl_instrument, next) == 0,
		       "next comes first");
	while (off) {
		if (off % 8 || off < NL_SEG_DATA)
			return 0;
		if (off < limit) {
			const struct nl_series *s = (const void *)(copy + off);
			if (!series || s->attrs < limit)
				return off;
		}
		if (off > live_end - sizeof(uint64_t))
			return 0;
		off = ((const struct nl_series *)nl_seg_ptr(off))->next;
	}
	return 0;
}

/* The first instrument from off on that the copy holds whole, strings and
 * all. */
static uint64_t held_instrument(const char *copy, uint64_t off, uint64_t limit, uint64_t live_end)
{
	while ((off = held_node(copy, off, limit, live_end, false))) {
		const struct nl_instrument *i = (const void *)(copy + off);
		if (i->name < limit && i->unit < limit && i->description < limit && i->bounds < limit &&
		    i->overflow.attrs < limit)
			return off;
		off = ((const struct nl_instrument *)nl_seg_ptr(off))->next;
	}
	return 0;
}

void nl_registry_mend_copy(void *copy, uint64_t limit)
{
	char *c = copy;
	uint64_t live_end = atomic_load(&nl_seg_header()->backed);
	if (live_end < NL_SEG_DATA + sizeof(uint64_t))
		live_end = NL_SEG_DATA + sizeof(uint64_t);
	struct nl_seg_header *h = copy;
	uint64_t io = held_instrument(c, atomic_load(&h->root), limit, live_end);
	atomic_store(&h->root, io);
	while (io) {
		struct nl_instrument *i = (struct nl_instrument *)(c + io);
		uint64_t n = 0, so = held_node(c, atomic_load(&i->head), limit, live_end, true);
		atomic_store(&i->head, so);
		for (; so; so = ((struct nl_series *)(c + so))->next, n++) {
			struct nl_series *s = (struct nl_series *)(c + so);
			s->next = held_node(c, s->next, limit, live_end, true);
		}
		atomic_store(&i->n_series, n);
		io = i->next = held_instrument(c, i->next, limit, live_end);
	}
}

void nl_registry_reset_values(void)
{
	for (uint64_t io = first_instrument(); io; io = INST(io)->next) {
		struct nl_instrument *i = INST(io);
		series_clear(&i->overflow);
		for (uint64_t so = atomic_load(&i->head); so; so = SERIES(so)->next)
			series_clear(SERIES(so));
	}
}

/* ---- snapshots ---------------------------------------------------------- */

/* The point's values; its attributes are the caller's to set. */
void nl_registry_fill_point(enum nl_kind kind, size_t n_bounds, struct nl_series *s, bool delta, uint64_t start_ns,
			    uint64_t now_ns, struct nl_point *p)
{
	p->n_attrs = s->n_attrs;
	p->time_ns = now_ns;
	p->series = s;
	p->overflow = s->overflow;
	p->start_ns = delta && s->delta_base_time_ns ? s->delta_base_time_ns : start_ns;
	switch (kind) {
	case NL_COUNTER:
		p->ivalue = (int64_t)(atomic_load(&s->u.count) - (delta ? s->delta_base_count : 0));
		break;
	case NL_UPDOWN:
		p->ivalue = (int64_t)atomic_load(&s->u.count);
		break;
	case NL_COUNTER_F64:
		break;   /* never in the registry (snapshot.h) */
	case NL_GAUGE:
		p->dvalue = nl_bitsd(atomic_load(&s->u.bits));
		p->start_ns = 0;
		break;
	case NL_GAUGE_INT:
		p->ivalue = (int64_t)atomic_load(&s->u.bits);
		p->start_ns = 0;
		break;
	case NL_HISTOGRAM:
		/* count is the sum of the buckets, so the two always agree. */
		for (size_t b = 0; b <= n_bounds; b++) {
			p->buckets[b] = atomic_load(&s->u.hist.buckets[b]) -
					(delta ? s->u.hist.delta_base_buckets[b] : 0);
			p->count += p->buckets[b];
		}
		p->sum = nl_bitsd(atomic_load(&s->u.hist.sum_bits)) - (delta ? s->delta_base_sum : 0);
		/* min/max are since the start of the process: exported only for cumulative. */
		p->has_min_max = !delta;
		p->min = nl_bitsd(atomic_load(&s->u.hist.min_bits));
		p->max = nl_bitsd(atomic_load(&s->u.hist.max_bits));
		if (!isfinite(p->min) || !isfinite(p->max))
			p->has_min_max = false;
		break;
	}
}

static size_t count_series(const struct nl_instrument *inst)
{
	size_t n = atomic_load(&inst->overflow.has_value) ? 1 : 0;
	for (uint64_t off = atomic_load(&inst->head); off; off = SERIES(off)->next)
		n += atomic_load(&SERIES(off)->has_value);
	return n;
}

/* Room for n points and their attributes in one block: freed with the
 * points. */
static struct nl_point *new_points(size_t n, size_t n_attrs)
{
	return calloc(1, n * sizeof(struct nl_point) + n_attrs * sizeof(struct nl_attr));
}

/* The next point of m, from s; its attributes go to attrs. Returns where
 * the next point's attributes go. */
static struct nl_attr *add_point(struct nl_metric *m, struct nl_series *s, uint64_t start_ns, uint64_t now_ns,
				 struct nl_attr *attrs)
{
	struct nl_point *p = &m->points[m->n_points++];
	nl_registry_fill_point(m->kind, m->n_bounds, s, m->delta, start_ns, now_ns, p);
	local_attrs(s, attrs);
	p->attrs = attrs;
	return attrs + s->n_attrs;
}

struct nl_snapshot *nl_snapshot_take(bool delta_counters, bool delta_histograms, uint64_t start_ns,
				     uint64_t now_ns)
{
	struct nl_snapshot *snap = calloc(1, sizeof *snap);
	if (!snap)
		return NULL;
	size_t n_inst = 0;
	for (uint64_t off = first_instrument(); off; off = INST(off)->next)
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
	for (uint64_t off = first_instrument(); off && k; off = INST(off)->next)
		order[--k] = INST(off);

	for (size_t idx = 0; idx < n_inst; idx++) {
		struct nl_instrument *inst = order[idx];
		size_t n = inst ? count_series(inst) : 0;
		if (n == 0)
			continue;
		struct nl_metric *m = &snap->metrics[snap->n_metrics];
		m->name = inst->name_p;
		m->unit = inst->unit_p;
		m->description = inst->description_p;
		m->kind = (enum nl_kind)inst->kind;
		m->delta = inst->kind == NL_COUNTER ? delta_counters : inst->kind == NL_HISTOGRAM && delta_histograms;
		m->bounds = inst->bounds_p;
		m->n_bounds = inst->n_bounds;
		m->points = new_points(n, n * NL_MAX_ATTRS);
		if (!m->points) {
			free(order);
			nl_snapshot_free(snap);
			return NULL;
		}
		struct nl_attr *attrs = (struct nl_attr *)(m->points + n);
		/* A series may gain its first value while we walk: never exceed n. */
		for (uint64_t off = atomic_load(&inst->head); off && m->n_points < n; off = SERIES(off)->next)
			if (atomic_load(&SERIES(off)->has_value))
				attrs = add_point(m, SERIES(off), start_ns, now_ns, attrs);
		if (m->n_points < n && atomic_load(&inst->overflow.has_value))
			add_point(m, &inst->overflow, start_ns, now_ns, attrs);
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
			if (!s)
				continue;   /* another process's segment: nothing to commit */
			bool retiring = true;
			if (atomic_compare_exchange_strong(&s->retiring, &retiring, false))
				atomic_store(&s->has_value, false);
			if (!m->delta)
				continue;
			if (m->kind == NL_COUNTER) {
				s->delta_base_count += (uint64_t)p->ivalue;
			} else {
				for (size_t b = 0; b <= m->n_bounds; b++)
					s->u.hist.delta_base_buckets[b] += p->buckets[b];
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
