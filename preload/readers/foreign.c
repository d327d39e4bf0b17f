/* SPDX-License-Identifier: Apache-2.0 */
/* Another process's registry (foreign.h), read from a copy of its segment
 * or a mapping of it. The records' layouts are the registry's
 * (registry_impl.h): the same build wrote them, which the segment's layout
 * fingerprint says (nl_registry_layout).
 */
#include "foreign.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "procmetrics.h"
#include "registry_impl.h"
#include "segread.h"

/* ---- reading another process's records ------------------------------------------ */

/* A reader of a segment another process left: data is a private copy of
 * the file, which may be anything (a crash mid-write is impossible, but the
 * file is only as trustworthy as every program of the user). Every offset
 * and length is checked against it, every walk is bounded, and records are
 * copied out before use. */
struct reader {
	const uint8_t *d;
	size_t len;
};

#define MAX_FOREIGN_INSTRUMENTS 4096

static bool in_range(const struct reader *r, uint64_t off, size_t size)
{
	return off >= NL_SEG_DATA && off % 16 == 0 && off <= r->len && size <= r->len - off;
}

struct foreign_inst {
	struct nl_instrument rec;
	const char *name, *unit, *description;
	double bounds[NL_MAX_BOUNDS];
};

/* Copies a record whose length depends on the kind found in its first
 * part: hdr bytes first, then the whole size (the rest of out zeroed). */
static bool copy_record(const struct reader *r, uint64_t off, void *out, size_t hdr, size_t full,
			size_t (*size_of)(const void *))
{
	memset(out, 0, full);
	if (!in_range(r, off, hdr))
		return false;
	memcpy(out, r->d + off, hdr);
	size_t size = size_of(out);
	if (size < hdr || size > full || !in_range(r, off, size))
		return false;
	memcpy(out, r->d + off, size);
	return true;
}

/* Another process's bytes are not known to hold 0 or 1 where a bool is:
 * each flag of a copied series record is made one before it is read. */
static void settle_flags(struct nl_series *s)
{
	static const size_t flags[] = { offsetof(struct nl_series, overflow), offsetof(struct nl_series, has_value),
					offsetof(struct nl_series, retiring) };
	for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
		unsigned char *b = (unsigned char *)s + flags[i];
		*b = *b != 0;
	}
}

static size_t series_record_size(const void *rec)
{
	const struct nl_series *s = rec;
	return s->kind > NL_UPDOWN ? 0 : nl_series_size((enum nl_kind)s->kind);
}

static size_t instrument_record_size(const void *rec)
{
	const struct nl_instrument *i = rec;
	return i->kind > NL_UPDOWN ? 0 : offsetof(struct nl_instrument, overflow) + nl_series_size((enum nl_kind)i->kind);
}

static bool read_instrument(const struct reader *r, uint64_t off, struct foreign_inst *out)
{
	if (!copy_record(r, off, &out->rec, offsetof(struct nl_instrument, overflow), sizeof out->rec,
			 instrument_record_size))
		return false;
	settle_flags(&out->rec.overflow);
	const struct nl_instrument *i = &out->rec;
	out->name = nl_seg_str(r->d, r->len, i->name);
	out->unit = nl_seg_str(r->d, r->len, i->unit);
	out->description = nl_seg_str(r->d, r->len, i->description);
	if (!out->name || !out->name[0] || !out->unit || !out->description || i->n_bounds > NL_MAX_BOUNDS ||
	    (i->n_bounds && !in_range(r, i->bounds, i->n_bounds * sizeof(double))) || i->overflow.kind != i->kind)
		return false;
	if (i->n_bounds)
		memcpy(out->bounds, r->d + i->bounds, i->n_bounds * sizeof(double));
	for (size_t b = 0; b < i->n_bounds; b++)
		if (!isfinite(out->bounds[b]) || (b && !(out->bounds[b] > out->bounds[b - 1])))
			return false;
	return true;
}

/* The series at off, if it is one of the instrument's kind, with its
 * attributes (pointing into the data). */
static bool read_series(const struct reader *r, uint64_t off, const struct foreign_inst *inst, struct nl_series *s,
			struct nl_attr *attrs)
{
	if (!copy_record(r, off, s, offsetof(struct nl_series, u), sizeof *s, series_record_size))
		return false;
	settle_flags(s);
	if (s->kind != inst->rec.kind || s->n_attrs > NL_MAX_ATTRS)
		return false;
	struct nl_sattr sa[NL_MAX_ATTRS];
	if (s->n_attrs && !in_range(r, s->attrs, s->n_attrs * sizeof *sa))
		return false;
	if (s->n_attrs)
		memcpy(sa, r->d + s->attrs, s->n_attrs * sizeof *sa);
	return nl_seg_get_attrs(r->d, r->len, sa, s->n_attrs, attrs);
}

/* The instruments' offsets, oldest first (they are created under the lock,
 * so older ones sit lower), or -1 when the list is not one. */
static long list_instruments(const struct reader *r, uint64_t root, uint64_t *out)
{
	size_t n = 0;
	uint64_t prev = UINT64_MAX;
	/* Only the fixed part here: the record is as long as its kind needs,
	 * which read_instrument checks. */
	for (uint64_t off = root; off;) {
		if (off >= prev || n == MAX_FOREIGN_INSTRUMENTS || !in_range(r, off, offsetof(struct nl_instrument, overflow)))
			return -1;
		out[n++] = prev = off;
		memcpy(&off, r->d + off + offsetof(struct nl_instrument, next), sizeof off);
	}
	for (size_t a = 0, b = n ? n - 1 : 0; a < b; a++, b--) {
		uint64_t t = out[a];
		out[a] = out[b];
		out[b] = t;
	}
	return (long)n;
}

/* Calls fn for every series of the instrument that has a value, the
 * overflow series last. Hooks publish series in any order of their offsets,
 * so a walk is bounded by how many series the data could hold; false when
 * something is out of place. */
typedef void (*series_fn)(void *ctx, const struct foreign_inst *inst, const struct nl_series *s,
			  const struct nl_attr *attrs);

static bool walk_series(const struct reader *r, const struct foreign_inst *inst, series_fn fn, void *ctx)
{
	struct nl_series s;
	struct nl_attr attrs[NL_MAX_ATTRS];
	size_t steps = r->len / nl_series_size(NL_COUNTER) + 1;
	for (uint64_t off = inst->rec.head; off; off = s.next) {
		if (steps-- == 0 || !read_series(r, off, inst, &s, attrs))
			return false;
		if (atomic_load(&s.has_value) && !s.overflow)
			fn(ctx, inst, &s, attrs);
	}
	memcpy(&s, &inst->rec.overflow, sizeof s);
	if (atomic_load(&s.has_value)) {
		s.n_attrs = 1;
		attrs[0] = nl_overflow_attr;
		s.overflow = true;
		fn(ctx, inst, &s, attrs);
	}
	return true;
}

static bool header_usable(const uint8_t *data, size_t len, struct reader *r)
{
	if (len < sizeof(struct nl_seg_header))
		return false;
	const struct nl_seg_header *h = (const struct nl_seg_header *)data;
	if (memcmp(h->magic, NL_SEG_MAGIC, 8) != 0 || h->layout != nl_registry_layout())
		return false;
	uint64_t used = atomic_load(&((struct nl_seg_header *)data)->used);
	r->d = data;
	r->len = used < len ? (size_t)used : len;
	return true;
}

struct counting {
	size_t points, attrs;
};

static void count_one(void *ctx, const struct foreign_inst *inst, const struct nl_series *s,
		      const struct nl_attr *attrs)
{
	(void)inst;
	(void)attrs;
	struct counting *c = ctx;
	c->points++;
	c->attrs += s->n_attrs;
}

struct filling {
	struct nl_metric *m;
	struct nl_attr *attrs;          /* next free place in the snapshot's own storage */
	bool delta;
	uint64_t start_ns, now_ns;
};

static void fill_one(void *ctx, const struct foreign_inst *inst, const struct nl_series *s,
		     const struct nl_attr *attrs)
{
	struct filling *f = ctx;
	struct nl_point *p = &f->m->points[f->m->n_points++];
	nl_registry_fill_point((enum nl_kind)inst->rec.kind, inst->rec.n_bounds, (struct nl_series *)s, f->delta,
			       f->start_ns, f->now_ns, p);
	memcpy(f->attrs, attrs, s->n_attrs * sizeof *attrs);
	p->attrs = f->attrs;
	p->series = NULL;   /* nothing to commit in a dead process */
	f->attrs += s->n_attrs;
}

struct nl_snapshot *nl_snapshot_of_segment(const uint8_t *data, size_t len, uint64_t now_ns)
{
	struct reader r;
	if (!header_usable(data, len, &r))
		return NULL;
	const struct nl_seg_header *h = (const struct nl_seg_header *)data;
	uint64_t *order = malloc(MAX_FOREIGN_INSTRUMENTS * sizeof *order);
	struct foreign_inst *insts = order ? malloc(MAX_FOREIGN_INSTRUMENTS * sizeof *insts) : NULL;
	long n_inst = insts ? list_instruments(&r, h->root, order) : -1;
	struct counting c = { 0, 0 };
	size_t n_res = h->n_resource;
	bool ok = n_inst >= 0 && n_res <= 128 && (!n_res || in_range(&r, h->resource, n_res * sizeof(struct nl_sattr)));
	for (long k = 0; ok && k < n_inst; k++)
		ok = read_instrument(&r, order[k], &insts[k]) && walk_series(&r, &insts[k], count_one, &c);
	struct nl_snapshot *snap = NULL;
	if (ok)
		snap = calloc(1, sizeof *snap + (n_res + c.attrs) * sizeof(struct nl_attr));
	if (snap)
		snap->metrics = calloc(n_inst ? (size_t)n_inst : 1, sizeof *snap->metrics);
	if (!snap || !snap->metrics)
		goto fail;
	/* Resource and point attributes live right after the snapshot: freed with it. */
	struct nl_attr *storage = (struct nl_attr *)(snap + 1);
	struct nl_sattr res[128];
	if (n_res)
		memcpy(res, data + h->resource, n_res * sizeof *res);
	if (!nl_seg_get_attrs(r.d, r.len, res, n_res, storage))
		goto fail;
	snap->resource = storage;
	snap->n_resource = n_res;
	struct filling f = { .attrs = storage + n_res, .start_ns = h->start_unix_ns, .now_ns = now_ns };
	for (long k = 0; k < n_inst; k++) {
		const struct foreign_inst *inst = &insts[k];
		struct counting one = { 0, 0 };
		walk_series(&r, inst, count_one, &one);
		if (!one.points)
			continue;
		struct nl_metric *m = &snap->metrics[snap->n_metrics];
		enum nl_kind kind = (enum nl_kind)inst->rec.kind;
		/* The strings point into data, which outlives the snapshot. */
		m->name = inst->name;
		m->unit = inst->unit;
		m->description = inst->description;
		m->kind = kind;
		m->delta = kind == NL_COUNTER	  ? (h->flags & NL_SEG_DELTA_COUNTERS) != 0
			   : kind == NL_HISTOGRAM ? (h->flags & NL_SEG_DELTA_HISTOGRAMS) != 0
						  : false;
		if (inst->rec.n_bounds)
			m->bounds = (const double *)(data + inst->rec.bounds);
		m->n_bounds = inst->rec.n_bounds;
		if (!(m->points = calloc(one.points, sizeof *m->points)))
			goto fail;
		f.m = m;
		f.delta = m->delta;
		walk_series(&r, inst, fill_one, &f);
		snap->n_points += m->n_points;
		snap->n_metrics++;
	}
	/* The figures its exporter read from /proc, the last ones of a
	 * process that ended. */
	if ((h->flags & NL_SEG_PROC_METRICS) && !nl_procmetrics_append(snap, &h->proc, h->start_unix_ns, now_ns))
		goto fail;
	free(insts);
	free(order);
	return snap;
fail:
	nl_snapshot_free(snap);
	free(insts);
	free(order);
	return NULL;
}

/* ---- another process's series, by name ------------------------------------------ */

/* Whether the series' attributes hold key with the string value (key NULL:
 * any series). */
static bool attrs_match(const struct nl_attr *attrs, size_t n, const char *key, const char *value)
{
	if (!key)
		return true;
	for (size_t i = 0; i < n; i++)
		if (attrs[i].type == NL_ATTR_STR && strcmp(attrs[i].key, key) == 0 && strcmp(attrs[i].v.s, value) == 0)
			return true;
	return false;
}

uint64_t nl_segment_series_at(const uint8_t *data, size_t len, const char *name, const char *key, const char *value)
{
	struct reader r;
	if (!header_usable(data, len, &r))
		return 0;
	const struct nl_seg_header *h = (const struct nl_seg_header *)data;
	uint64_t *order = malloc(MAX_FOREIGN_INSTRUMENTS * sizeof *order);
	long n_inst = order ? list_instruments(&r, atomic_load(&h->root), order) : -1;
	uint64_t found = 0;
	for (long k = 0; k < n_inst && !found; k++) {
		struct foreign_inst inst;
		if (!read_instrument(&r, order[k], &inst) || strcmp(inst.name, name) != 0)
			continue;
		struct nl_series s;
		struct nl_attr attrs[NL_MAX_ATTRS];
		size_t steps = r.len / nl_series_size(NL_COUNTER) + 1;
		for (uint64_t off = inst.rec.head; off && steps-- && read_series(&r, off, &inst, &s, attrs); off = s.next)
			if (!s.overflow && attrs_match(attrs, s.n_attrs, key, value)) {
				found = off;
				break;
			}
	}
	free(order);
	return found;
}

/* ---- folding a dead process into this one -------------------------------------- */

struct folding {
	struct nl_instrument *own;
	size_t series;
};

static void fold_one(void *ctx, const struct foreign_inst *inst, const struct nl_series *cs,
		     const struct nl_attr *attrs)
{
	struct folding *f = ctx;
	struct nl_series *s = (struct nl_series *)cs;   /* a private copy: read only */
	struct nl_series *t = s->overflow ? &f->own->overflow : nl_series_get(f->own, attrs, s->n_attrs);
	if (inst->rec.kind == NL_COUNTER) {
		nl_counter_add(t, atomic_load(&s->u.count));
	} else {
		for (size_t b = 0; b <= inst->rec.n_bounds; b++)
			atomic_fetch_add(&t->u.hist.buckets[b], atomic_load(&s->u.hist.buckets[b]));
		nl_cas_double(&t->u.hist.sum_bits, nl_bitsd(atomic_load(&s->u.hist.sum_bits)), 0);
		double mn = nl_bitsd(atomic_load(&s->u.hist.min_bits));
		double mx = nl_bitsd(atomic_load(&s->u.hist.max_bits));
		if (isfinite(mn) && isfinite(mx)) {
			nl_cas_double(&t->u.hist.min_bits, mn, -1);
			nl_cas_double(&t->u.hist.max_bits, mx, 1);
		}
		atomic_store(&t->has_value, true);
	}
	f->series++;
}

/* This process's instrument of the same name, kind and bounds, created
 * (with copies of the names in the arena) when it has none. */
static struct nl_instrument *own_instrument(const struct foreign_inst *inst)
{
	struct nl_instrument *i = nl_seg_base ? nl_registry_find_instrument(inst->name) : NULL;
	if (!i) {
		uint64_t name = nl_seg_copy_str(inst->name), unit = nl_seg_copy_str(inst->unit);
		uint64_t desc = nl_seg_copy_str(inst->description);
		uint64_t bounds = inst->rec.n_bounds ? nl_seg_alloc(inst->rec.n_bounds * sizeof(double)) : 0;
		if (!name || !unit || !desc || (inst->rec.n_bounds && !bounds))
			return NULL;
		if (bounds)
			memcpy(nl_seg_ptr(bounds), inst->bounds, inst->rec.n_bounds * sizeof(double));
		i = nl_instrument_get(nl_seg_ptr(name), nl_seg_ptr(unit), nl_seg_ptr(desc), (enum nl_kind)inst->rec.kind,
				      bounds ? nl_seg_ptr(bounds) : NULL, inst->rec.n_bounds);
	}
	if (!i || i->kind != inst->rec.kind || i->n_bounds != inst->rec.n_bounds ||
	    (i->n_bounds && memcmp(i->bounds_p, inst->bounds, i->n_bounds * sizeof(double)) != 0))
		return NULL;
	return i;
}

long nl_registry_fold_segment(const uint8_t *data, size_t len)
{
	NL_ASSERT_NOT_IN_HOOK();
	struct reader r;
	if (!header_usable(data, len, &r))
		return -1;
	const struct nl_seg_header *h = (const struct nl_seg_header *)data;
	uint64_t *order = malloc(MAX_FOREIGN_INSTRUMENTS * sizeof *order);
	long n_inst = order ? list_instruments(&r, h->root, order) : -1;
	struct folding f = { NULL, 0 };
	for (long k = 0; k < n_inst; k++) {
		struct foreign_inst inst;
		/* Counters and histograms only: a gauge or an up-down counter is the
		 * state of a process that no longer exists. */
		if (!read_instrument(&r, order[k], &inst) ||
		    (inst.rec.kind != NL_COUNTER && inst.rec.kind != NL_HISTOGRAM) || !(f.own = own_instrument(&inst)))
			continue;
		walk_series(&r, &inst, fold_one, &f);
	}
	free(order);
	return n_inst < 0 ? -1 : (long)f.series;
}
