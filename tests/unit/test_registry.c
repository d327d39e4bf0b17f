/* SPDX-License-Identifier: Apache-2.0 */
/* The metric registry: histogram bucketing, recording, snapshots, the
 * cardinality limit, delta temporality and resets.
 *
 * The registry is process-global: every test uses instrument names of its own
 * and looks its metrics up by name, so tests do not depend on one another. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "registry.h"
#include "registry_impl.h"

static const double BOUNDS[17] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000 };
#define NB (sizeof BOUNDS / sizeof *BOUNDS)

static const uint64_t START = 1000;
static const uint64_t T1 = 2000, T2 = 3000, T3 = 4000;

static void restore_limit(void)
{
	nl_registry_set_cardinality_limit(2000);
}

TestSuite(hist_bucket);
TestSuite(registry, .init = restore_limit, .fini = restore_limit);

/* ---- helpers -------------------------------------------------------------- */

static const struct nl_metric *must_find_metric(const struct nl_snapshot *snap, const char *name)
{
	const struct nl_metric *m = find_metric(snap, name);
	cr_assert_not_null(m, "metric %s missing from the snapshot", name);
	return m;
}

/* The point whose first attribute is the string key=value. */
static const struct nl_point *find_point(const struct nl_metric *m, const char *key, const char *value)
{
	for (size_t i = 0; i < m->n_points; i++) {
		const struct nl_point *p = &m->points[i];
		if (p->n_attrs >= 1 && p->attrs[0].type == NL_ATTR_STR && strcmp(p->attrs[0].key, key) == 0 &&
		    strcmp(p->attrs[0].v.s, value) == 0)
			return p;
	}
	cr_assert_fail("no point %s=%s in %s", key, value, m->name);
	return NULL;
}

static const struct nl_point *find_overflow_point(const struct nl_metric *m)
{
	for (size_t i = 0; i < m->n_points; i++) {
		const struct nl_point *p = &m->points[i];
		for (size_t k = 0; k < p->n_attrs; k++)
			if (strcmp(p->attrs[k].key, "otel.metric.overflow") == 0)
				return p;
	}
	return NULL;
}

static struct nl_series *series_s(struct nl_instrument *inst, const char *key, const char *value)
{
	struct nl_attr a = NL_ATTR_S(key, value);
	struct nl_series *s = nl_series_get(inst, &a, 1);
	cr_assert_not_null(s);
	return s;
}

static struct nl_snapshot *take(bool dc, bool dh, uint64_t now)
{
	struct nl_snapshot *snap = nl_snapshot_take(dc, dh, START, now);
	cr_assert_not_null(snap);
	size_t total = 0;
	for (size_t i = 0; i < snap->n_metrics; i++)
		total += snap->metrics[i].n_points;
	cr_assert_eq(snap->n_points, total, "snapshot n_points disagrees with its metrics");
	return snap;
}

static void assert_buckets(const struct nl_point *p, const uint64_t *want, size_t n)
{
	for (size_t b = 0; b < n; b++)
		cr_assert_eq(p->buckets[b], want[b], "bucket %zu: %llu, want %llu", b,
			     (unsigned long long)p->buckets[b], (unsigned long long)want[b]);
}

/* ---- nl_hist_bucket --------------------------------------------------------- */

/* The neighbouring doubles of a positive finite v (nextafter without libm,
 * which the test link line does not include). */
static double next_up(double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	u++;
	memcpy(&v, &u, sizeof v);
	return v;
}

static double next_down(double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	u--;
	memcpy(&v, &u, sizeof v);
	return v;
}

Test(hist_bucket, value_equal_to_a_bound_is_in_that_bucket)
{
	for (size_t i = 0; i < NB; i++)
		cr_assert_eq(nl_hist_bucket(BOUNDS, NB, BOUNDS[i]), i, "v=%g", BOUNDS[i]);
}

Test(hist_bucket, just_above_a_bound_is_in_the_next_bucket)
{
	for (size_t i = 0; i < NB; i++) {
		double v = next_up(BOUNDS[i]);
		cr_assert_gt(v, BOUNDS[i]);
		cr_assert_eq(nl_hist_bucket(BOUNDS, NB, v), i + 1, "v=%.17g", v);
	}
}

Test(hist_bucket, just_below_a_bound_is_in_its_bucket)
{
	for (size_t i = 0; i < NB; i++) {
		double v = next_down(BOUNDS[i]);
		cr_assert_lt(v, BOUNDS[i]);
		cr_assert_eq(nl_hist_bucket(BOUNDS, NB, v), i, "v=%.17g", v);
	}
}

Test(hist_bucket, typical_values)
{
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 0.02), 1);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 0.06), 2);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 0.3), 4);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 1), 5);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 1.5), 6);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 7), 8);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 99), 11);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 4999), 15);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 5001), 16);
}

Test(hist_bucket, zero_and_negative_go_to_bucket_0)
{
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 0.0), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, -0.0), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, -1), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, -30001), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, -DBL_MAX), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, -INFINITY), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, DBL_MIN), 0);
}

Test(hist_bucket, above_the_last_bound_goes_to_the_last_bucket)
{
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 30000.5), 17);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 30001), 17);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, 1e300), 17);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, DBL_MAX), 17);
	cr_assert_eq(nl_hist_bucket(BOUNDS, NB, INFINITY), 17);
}

Test(hist_bucket, no_bounds_one_bucket)
{
	cr_assert_eq(nl_hist_bucket(BOUNDS, 0, -5), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, 0, 5), 0);
	cr_assert_eq(nl_hist_bucket(BOUNDS, 0, INFINITY), 0);
	static const double one[1] = { 10 };
	cr_assert_eq(nl_hist_bucket(one, 1, 10), 0);
	cr_assert_eq(nl_hist_bucket(one, 1, 10.5), 1);
}

/* The instrument's way (a guess by binade, walked up) agrees with halving
 * for every bound set the shim uses and a few odd ones, at every bound and
 * its neighbours, and across the whole range of doubles. */
Test(hist_bucket, instrument_guess_agrees_with_halving)
{
	static const double body[15] = { 0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000 };
	static const double duration[14] = { 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
					     0.5,   0.75, 1,     2.5,  5,     7.5, 10 };
	static const double negative[5] = { -1000, -1, -0.5, 0, 1e-300 };
	static const double wide[6] = { 1e-200, 1e-50, 1, 1e50, 1e200, DBL_MAX };
	static const double close[4] = { 1, 1.25, 1.5, 1.75 };
	static const double huge[2] = { 1e308, DBL_MAX };
	const struct {
		const char *name;
		const double *b;
		size_t n;
	} sets[] = {
		{ "test.guess.body", body, 15 },	{ "test.guess.duration", duration, 14 },
		{ "test.guess.registry", BOUNDS, NB },	{ "test.guess.negative", negative, 5 },
		{ "test.guess.wide", wide, 6 },		{ "test.guess.close", close, 4 },
		{ "test.guess.huge", huge, 2 },		{ "test.guess.none", NULL, 0 },
	};
	for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
		struct nl_instrument *inst = nl_instrument_get(sets[k].name, "1", "", NL_HISTOGRAM, sets[k].b, sets[k].n);
		cr_assert_not_null(inst);
		const double *b = sets[k].b;
		size_t n = sets[k].n;
		for (size_t i = 0; i < n; i++) {
			double vs[3] = { b[i], b[i] > 0 ? next_up(b[i]) : b[i] + 1e-9, b[i] > 0 ? next_down(b[i]) : b[i] - 1e-9 };
			for (int j = 0; j < 3; j++)
				cr_assert_eq(nl_inst_bucket(inst, vs[j]), nl_hist_bucket(b, n, vs[j]), "%s v=%.17g",
					     sets[k].name, vs[j]);
		}
		/* Every binade, positive and negative, and a few values in each. */
		for (uint64_t e = 0; e < 2047; e++)
			for (uint64_t m = 0; m < 4; m++) {
				uint64_t u = e << 52 | m * 0x4000000000000ull;
				double v;
				memcpy(&v, &u, sizeof v);
				cr_assert_eq(nl_inst_bucket(inst, v), nl_hist_bucket(b, n, v), "%s v=%.17g", sets[k].name, v);
				cr_assert_eq(nl_inst_bucket(inst, -v), nl_hist_bucket(b, n, -v), "%s v=%.17g", sets[k].name,
					     -v);
			}
		cr_assert_eq(nl_inst_bucket(inst, INFINITY), nl_hist_bucket(b, n, INFINITY));
		cr_assert_eq(nl_inst_bucket(inst, -INFINITY), nl_hist_bucket(b, n, -INFINITY));
	}
}

/* ---- instruments and series ---------------------------------------------------- */

Test(registry, instrument_get_is_idempotent_by_name)
{
	struct nl_instrument *a = nl_instrument_get("t.idem", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *b = nl_instrument_get("t.idem", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *c = nl_instrument_get("t.idem.other", "1", "d", NL_COUNTER, NULL, 0);
	cr_assert_not_null(a);
	cr_assert_eq(a, b);
	cr_assert_neq(a, c);
}

Test(registry, instrument_with_too_many_bounds_is_refused)
{
	static double many[NL_MAX_BOUNDS + 1];
	for (size_t i = 0; i <= NL_MAX_BOUNDS; i++)
		many[i] = (double)i;
	cr_assert_null(nl_instrument_get("t.toomany", "ms", "d", NL_HISTOGRAM, many, NL_MAX_BOUNDS + 1));
	cr_assert_not_null(nl_instrument_get("t.justenough", "ms", "d", NL_HISTOGRAM, many, NL_MAX_BOUNDS));
}

Test(registry, series_identity_by_attributes)
{
	struct nl_instrument *inst = nl_instrument_get("t.series.identity", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_attr ab[2] = { NL_ATTR_S("a", "1"), NL_ATTR_S("b", "2") };
	struct nl_attr ba[2] = { NL_ATTR_S("b", "2"), NL_ATTR_S("a", "1") };
	struct nl_attr ai[1] = { NL_ATTR_I("a", 1) };
	struct nl_attr as[1] = { NL_ATTR_S("a", "1") };
	struct nl_attr abool[1] = { NL_ATTR_B("a", true) };

	struct nl_series *s1 = nl_series_get(inst, ab, 2);
	cr_assert_not_null(s1);
	cr_assert_eq(nl_series_get(inst, ab, 2), s1);
	cr_assert_neq(nl_series_get(inst, ba, 2), s1, "attribute order matters");
	cr_assert_neq(nl_series_get(inst, ai, 1), nl_series_get(inst, as, 1), "INT 1 is not STR \"1\"");
	cr_assert_neq(nl_series_get(inst, abool, 1), nl_series_get(inst, ai, 1));
	cr_assert_neq(nl_series_get(inst, as, 1), s1, "a prefix is another attribute set");
	cr_assert_eq(nl_series_get(inst, ai, 1), nl_series_get(inst, ai, 1));
	struct nl_series *none = nl_series_get(inst, NULL, 0);
	cr_assert_not_null(none);
	cr_assert_eq(nl_series_get(inst, NULL, 0), none);
	cr_assert_not(nl_series_is_overflow(none));
}

Test(registry, series_attributes_are_copied)
{
	struct nl_instrument *inst = nl_instrument_get("t.series.copy", "1", "d", NL_COUNTER, NULL, 0);
	char key[8] = "dest";
	char val[8] = "alpha";
	struct nl_attr a = NL_ATTR_S(key, val);
	struct nl_series *s = nl_series_get(inst, &a, 1);
	nl_counter_add(s, 1);
	strcpy(key, "XXXX");
	strcpy(val, "beta");
	struct nl_attr again = NL_ATTR_S("dest", "alpha");
	cr_assert_eq(nl_series_get(inst, &again, 1), s);

	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.series.copy");
	cr_assert_eq(m->n_points, 1);
	cr_assert_str_eq(m->points[0].attrs[0].key, "dest");
	cr_assert_str_eq(m->points[0].attrs[0].v.s, "alpha");
	nl_snapshot_free(snap);
}

/* ---- counters and gauges through snapshots ---------------------------------------- */

Test(registry, counter_sums)
{
	struct nl_instrument *inst = nl_instrument_get("t.counter", "{connection}", "conns", NL_COUNTER, NULL, 0);
	struct nl_series *a = series_s(inst, "dest", "a");
	struct nl_series *b = series_s(inst, "dest", "b");
	nl_counter_add(a, 3);
	nl_counter_add(a, 4);
	nl_counter_add(b, 1);

	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.counter");
	cr_assert_eq(m->kind, NL_COUNTER);
	cr_assert_str_eq(m->unit, "{connection}");
	cr_assert_str_eq(m->description, "conns");
	cr_assert_not(m->delta);
	cr_assert_eq(m->n_points, 2);
	const struct nl_point *pa = find_point(m, "dest", "a");
	cr_assert_eq(pa->ivalue, 7);
	cr_assert_eq(pa->start_ns, START);
	cr_assert_eq(pa->time_ns, T1);
	cr_assert_eq(find_point(m, "dest", "b")->ivalue, 1);
	nl_snapshot_free(snap);

	/* cumulative: the next snapshot has the totals, same start */
	nl_counter_add(a, 10);
	snap = take(false, false, T2);
	m = must_find_metric(snap, "t.counter");
	pa = find_point(m, "dest", "a");
	cr_assert_eq(pa->ivalue, 17);
	cr_assert_eq(pa->start_ns, START);
	cr_assert_eq(pa->time_ns, T2);
	nl_snapshot_free(snap);
}

Test(registry, gauge_keeps_last_value)
{
	struct nl_instrument *g = nl_instrument_get("t.gauge", "By", "d", NL_GAUGE, NULL, 0);
	struct nl_instrument *gi = nl_instrument_get("t.gauge.int", "1", "d", NL_GAUGE_INT, NULL, 0);
	struct nl_series *s = series_s(g, "k", "v");
	struct nl_series *si = series_s(gi, "k", "v");
	nl_gauge_set(s, 1.5);
	nl_gauge_set(s, 2.25);
	nl_gauge_set_int(si, 7);
	nl_gauge_set_int(si, -42);

	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.gauge");
	cr_assert_eq(m->kind, NL_GAUGE);
	cr_assert_eq(m->n_points, 1);
	cr_assert_float_eq(m->points[0].dvalue, 2.25, 1e-12);
	cr_assert_eq(m->points[0].time_ns, T1);
	const struct nl_metric *mi = must_find_metric(snap, "t.gauge.int");
	cr_assert_eq(mi->kind, NL_GAUGE_INT);
	cr_assert_eq(mi->n_points, 1);
	cr_assert_eq(mi->points[0].ivalue, -42);
	nl_snapshot_free(snap);
}

Test(registry, series_appear_only_after_a_value)
{
	struct nl_instrument *c = nl_instrument_get("t.lazy.counter", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *h = nl_instrument_get("t.lazy.hist", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_instrument *g = nl_instrument_get("t.lazy.gauge", "1", "d", NL_GAUGE, NULL, 0);
	struct nl_series *c1 = series_s(c, "k", "one");
	struct nl_series *c2 = series_s(c, "k", "two");
	(void)c2;
	struct nl_series *h1 = series_s(h, "k", "one");
	struct nl_series *g1 = series_s(g, "k", "one");

	struct nl_snapshot *snap = take(false, false, T1);
	cr_assert_null(find_metric(snap, "t.lazy.counter"));
	cr_assert_null(find_metric(snap, "t.lazy.hist"));
	cr_assert_null(find_metric(snap, "t.lazy.gauge"));
	nl_snapshot_free(snap);

	nl_counter_add(c1, 2);
	snap = take(false, false, T2);
	const struct nl_metric *m = must_find_metric(snap, "t.lazy.counter");
	cr_assert_eq(m->n_points, 1, "only the series with a value");
	cr_assert_str_eq(m->points[0].attrs[0].v.s, "one");
	cr_assert_null(find_metric(snap, "t.lazy.hist"));
	cr_assert_null(find_metric(snap, "t.lazy.gauge"));
	nl_snapshot_free(snap);

	nl_hist_record(h, h1, 1);
	nl_gauge_set(g1, 0);
	snap = take(false, false, T3);
	cr_assert_not_null(find_metric(snap, "t.lazy.hist"));
	cr_assert_not_null(find_metric(snap, "t.lazy.gauge"), "a gauge set to 0 has a value");
	nl_snapshot_free(snap);
}

Test(registry, metrics_in_creation_order)
{
	struct nl_instrument *first = nl_instrument_get("t.order.first", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *second = nl_instrument_get("t.order.second", "1", "d", NL_COUNTER, NULL, 0);
	nl_counter_add(series_s(second, "k", "v"), 1);
	nl_counter_add(series_s(first, "k", "v"), 1);
	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *a = must_find_metric(snap, "t.order.first");
	const struct nl_metric *b = must_find_metric(snap, "t.order.second");
	cr_assert_lt(a, b);
	nl_snapshot_free(snap);
}

/* ---- histograms through snapshots ------------------------------------------------- */

Test(registry, histogram_record)
{
	struct nl_instrument *h = nl_instrument_get("t.hist", "ms", "waits", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *s = series_s(h, "dest", "a");
	nl_hist_record(h, s, 0.01);
	nl_hist_record(h, s, 0.02);
	nl_hist_record(h, s, NAN);
	nl_hist_record(h, s, 7);
	nl_hist_record(h, s, 30000);
	nl_hist_record(h, s, 50000);

	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.hist");
	cr_assert_eq(m->kind, NL_HISTOGRAM);
	cr_assert_not(m->delta);
	cr_assert_eq(m->n_bounds, NB);
	cr_assert_eq(m->bounds, BOUNDS);
	cr_assert_eq(m->n_points, 1);
	const struct nl_point *p = &m->points[0];
	cr_assert_eq(p->count, 5);
	cr_assert_float_eq(p->sum, 0.01 + 0.02 + 7 + 30000 + 50000, 1e-9);
	cr_assert(p->has_min_max);
	cr_assert_float_eq(p->min, 0.01, 1e-15);
	cr_assert_float_eq(p->max, 50000, 1e-9);
	cr_assert_eq(p->start_ns, START);
	cr_assert_eq(p->time_ns, T1);
	uint64_t want[NB + 1] = { 0 };
	want[0] = 1;   /* 0.01 */
	want[1] = 1;   /* 0.02 in (0.01, 0.05] */
	want[8] = 1;   /* 7 in (5, 10] */
	want[16] = 1;  /* 30000 in (5000, 30000] */
	want[17] = 1;  /* 50000 above */
	assert_buckets(p, want, NB + 1);
	nl_snapshot_free(snap);
}

Test(registry, histogram_zero_and_negative)
{
	struct nl_instrument *h = nl_instrument_get("t.hist.neg", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *s = series_s(h, "k", "v");
	nl_hist_record(h, s, -3);
	nl_hist_record(h, s, 0);
	nl_hist_record(h, s, INFINITY);
	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_point *p = &must_find_metric(snap, "t.hist.neg")->points[0];
	cr_assert_eq(p->count, 3);
	cr_assert_eq(p->buckets[0], 2);
	cr_assert_eq(p->buckets[NB], 1);
	cr_assert_float_eq(p->min, -3, 1e-12);
	nl_snapshot_free(snap);
}

Test(registry, histogram_min_max_follow_values)
{
	struct nl_instrument *h = nl_instrument_get("t.hist.minmax", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *s = series_s(h, "k", "v");
	nl_hist_record(h, s, 5);
	nl_hist_record(h, s, 2);
	nl_hist_record(h, s, 9);
	nl_hist_record(h, s, 3);
	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_point *p = &must_find_metric(snap, "t.hist.minmax")->points[0];
	cr_assert(p->has_min_max);
	cr_assert_float_eq(p->min, 2, 1e-12);
	cr_assert_float_eq(p->max, 9, 1e-12);
	cr_assert_float_eq(p->sum, 19, 1e-12);
	cr_assert_eq(p->count, 4);
	nl_snapshot_free(snap);
}

Test(registry, histogram_nan_only_is_no_value)
{
	struct nl_instrument *h = nl_instrument_get("t.hist.nan", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *s = series_s(h, "k", "v");
	nl_hist_record(h, s, NAN);
	nl_hist_record(h, s, -NAN);
	struct nl_snapshot *snap = take(false, false, T1);
	cr_assert_null(find_metric(snap, "t.hist.nan"));
	nl_snapshot_free(snap);

	nl_hist_record(h, s, 2);
	nl_hist_record(h, s, NAN);
	snap = take(false, false, T2);
	const struct nl_point *p = &must_find_metric(snap, "t.hist.nan")->points[0];
	cr_assert_eq(p->count, 1);
	cr_assert_float_eq(p->sum, 2, 1e-12);
	cr_assert_float_eq(p->min, 2, 1e-12);
	cr_assert_float_eq(p->max, 2, 1e-12);
	nl_snapshot_free(snap);
}

/* ---- cardinality limit ---------------------------------------------------------------- */

static void assert_is_overflow_attr_set(const struct nl_attr *attrs, size_t n)
{
	cr_assert_eq(n, 1, "the overflow series carries exactly one attribute, has %zu", n);
	cr_assert_str_eq(attrs[0].key, "otel.metric.overflow");
	cr_assert_eq(attrs[0].type, NL_ATTR_BOOL);
	cr_assert(attrs[0].v.b);
}

/* As in the OpenTelemetry SDK, the overflow series takes one place of the
 * limit: with a limit of 3, two attribute sets get series of their own. */
Test(registry, cardinality_limit_sends_extra_sets_to_overflow)
{
	nl_registry_set_cardinality_limit(3);
	struct nl_instrument *inst = nl_instrument_get("t.card", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_series *a = series_s(inst, "k", "a");
	struct nl_series *b = series_s(inst, "k", "b");
	struct nl_series *c = series_s(inst, "k", "c");
	struct nl_series *d = series_s(inst, "k", "d");
	cr_assert_neq(a, b);
	cr_assert_not(nl_series_is_overflow(a));
	cr_assert_not(nl_series_is_overflow(b));
	cr_assert(nl_series_is_overflow(c));
	cr_assert_eq(c, d, "all extra attribute sets share one overflow series");
	cr_assert_eq(series_s(inst, "k", "a"), a, "existing series are still found");
	
	nl_counter_add(a, 1);
	nl_counter_add(b, 2);
	nl_counter_add(c, 10);
	nl_counter_add(d, 5);
	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.card");
	cr_assert_eq(m->n_points, 3);
	cr_assert_eq(find_point(m, "k", "a")->ivalue, 1);
	cr_assert_eq(find_point(m, "k", "b")->ivalue, 2);
	const struct nl_point *o = find_overflow_point(m);
	cr_assert_not_null(o);
	assert_is_overflow_attr_set(o->attrs, o->n_attrs);
	cr_assert_eq(o->ivalue, 15);
	nl_snapshot_free(snap);
}

Test(registry, cardinality_limit_is_per_instrument)
{
	nl_registry_set_cardinality_limit(3);
	struct nl_instrument *x = nl_instrument_get("t.card.x", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *y = nl_instrument_get("t.card.y", "1", "d", NL_COUNTER, NULL, 0);
	cr_assert_not(nl_series_is_overflow(series_s(x, "k", "a")));
	cr_assert_not(nl_series_is_overflow(series_s(x, "k", "b")));
	cr_assert(nl_series_is_overflow(series_s(x, "k", "c")));
	cr_assert_not(nl_series_is_overflow(series_s(y, "k", "a")));
	cr_assert_not(nl_series_is_overflow(series_s(y, "k", "b")));
	cr_assert(nl_series_is_overflow(series_s(y, "k", "c")));
	cr_assert_neq(series_s(x, "k", "c"), series_s(y, "k", "c"));
}

Test(registry, cardinality_limit_one_means_only_overflow)
{
	nl_registry_set_cardinality_limit(1);
	struct nl_instrument *inst = nl_instrument_get("t.card.one", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_series *a = series_s(inst, "k", "a");
	cr_assert(nl_series_is_overflow(a));
	nl_counter_add(a, 4);
	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.card.one");
	cr_assert_eq(m->n_points, 1);
	assert_is_overflow_attr_set(m->points[0].attrs, m->points[0].n_attrs);
	cr_assert_eq(m->points[0].ivalue, 4);
	nl_snapshot_free(snap);
}

Test(registry, overflow_histogram)
{
	nl_registry_set_cardinality_limit(2);
	struct nl_instrument *h = nl_instrument_get("t.card.hist", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *a = series_s(h, "k", "a");
	struct nl_series *o = series_s(h, "k", "b");
	cr_assert_not(nl_series_is_overflow(a));
	cr_assert(nl_series_is_overflow(o));
	nl_hist_record(h, o, 0.5);
	nl_hist_record(h, series_s(h, "k", "c"), 100);
	struct nl_snapshot *snap = take(false, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.card.hist");
	cr_assert_eq(m->n_points, 1);
	const struct nl_point *p = &m->points[0];
	assert_is_overflow_attr_set(p->attrs, p->n_attrs);
	cr_assert_eq(p->count, 2);
	cr_assert_eq(p->buckets[4], 1);
	cr_assert_eq(p->buckets[11], 1);
	cr_assert_float_eq(p->min, 0.5, 1e-12);
	cr_assert_float_eq(p->max, 100, 1e-12);
	nl_snapshot_free(snap);
}

Test(registry, too_many_attributes_go_to_overflow)
{
	struct nl_instrument *inst = nl_instrument_get("t.card.attrs", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_attr attrs[NL_MAX_ATTRS + 1];
	static const char *const keys[] = { "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8" };
	for (size_t i = 0; i <= NL_MAX_ATTRS; i++)
		attrs[i] = NL_ATTR_S(keys[i], "v");
	struct nl_series *s = nl_series_get(inst, attrs, NL_MAX_ATTRS + 1);
	cr_assert_not_null(s);
	cr_assert(nl_series_is_overflow(s));
	struct nl_series *ok = nl_series_get(inst, attrs, NL_MAX_ATTRS);
	cr_assert_not(nl_series_is_overflow(ok));
}

/* ---- delta temporality ------------------------------------------------------------------ */

Test(registry, delta_counter_take_commit_take)
{
	struct nl_instrument *inst = nl_instrument_get("t.delta.counter", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_series *s = series_s(inst, "k", "v");
	nl_counter_add(s, 5);

	struct nl_snapshot *snap = take(true, false, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.delta.counter");
	cr_assert(m->delta);
	cr_assert_eq(m->points[0].ivalue, 5);
	cr_assert_eq(m->points[0].start_ns, START);
	cr_assert_eq(m->points[0].time_ns, T1);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	nl_counter_add(s, 3);
	snap = take(true, false, T2);
	m = must_find_metric(snap, "t.delta.counter");
	cr_assert_eq(m->points[0].ivalue, 3);
	cr_assert_eq(m->points[0].start_ns, T1, "start is the previous snapshot's time");
	cr_assert_eq(m->points[0].time_ns, T2);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	snap = take(true, false, T3);
	m = must_find_metric(snap, "t.delta.counter");
	cr_assert_eq(m->points[0].ivalue, 0);
	cr_assert_eq(m->points[0].start_ns, T2);
	nl_snapshot_free(snap);
}

/* Without a commit (the export failed), the next delta covers both periods. */
Test(registry, delta_without_commit_accumulates)
{
	struct nl_instrument *inst = nl_instrument_get("t.delta.nocommit", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_series *s = series_s(inst, "k", "v");
	nl_counter_add(s, 5);
	struct nl_snapshot *snap = take(true, false, T1);
	cr_assert_eq(must_find_metric(snap, "t.delta.nocommit")->points[0].ivalue, 5);
	nl_snapshot_free(snap);

	nl_counter_add(s, 2);
	snap = take(true, false, T2);
	const struct nl_metric *m = must_find_metric(snap, "t.delta.nocommit");
	cr_assert_eq(m->points[0].ivalue, 7);
	cr_assert_eq(m->points[0].start_ns, START);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	nl_counter_add(s, 1);
	snap = take(true, false, T3);
	m = must_find_metric(snap, "t.delta.nocommit");
	cr_assert_eq(m->points[0].ivalue, 1);
	cr_assert_eq(m->points[0].start_ns, T2);
	nl_snapshot_free(snap);
}

Test(registry, delta_histogram_take_commit_take)
{
	struct nl_instrument *h = nl_instrument_get("t.delta.hist", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *s = series_s(h, "k", "v");
	nl_hist_record(h, s, 1);
	nl_hist_record(h, s, 2);

	struct nl_snapshot *snap = take(false, true, T1);
	const struct nl_metric *m = must_find_metric(snap, "t.delta.hist");
	cr_assert(m->delta);
	const struct nl_point *p = &m->points[0];
	cr_assert_eq(p->count, 2);
	cr_assert_float_eq(p->sum, 3, 1e-12);
	cr_assert_eq(p->buckets[5], 1);   /* 1 in (0.5, 1] */
	cr_assert_eq(p->buckets[6], 1);   /* 2 in (1, 2.5] */
	cr_assert_not(p->has_min_max, "min/max since process start are not a delta's");
	cr_assert_eq(p->start_ns, START);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	nl_hist_record(h, s, 100);
	snap = take(false, true, T2);
	m = must_find_metric(snap, "t.delta.hist");
	p = &m->points[0];
	cr_assert_eq(p->count, 1);
	cr_assert_float_eq(p->sum, 100, 1e-9);
	uint64_t want[NB + 1] = { 0 };
	want[11] = 1;   /* 100 in (50, 100] */
	assert_buckets(p, want, NB + 1);
	cr_assert_eq(p->start_ns, T1);
	cr_assert_eq(p->time_ns, T2);
	nl_snapshot_free(snap);

	/* the cumulative view is unaffected by delta bases */
	snap = take(false, false, T3);
	p = &must_find_metric(snap, "t.delta.hist")->points[0];
	cr_assert_eq(p->count, 3);
	cr_assert_float_eq(p->sum, 103, 1e-9);
	cr_assert(p->has_min_max);
	cr_assert_float_eq(p->min, 1, 1e-12);
	cr_assert_float_eq(p->max, 100, 1e-12);
	cr_assert_eq(p->start_ns, START);
	nl_snapshot_free(snap);
}

/* lowmemory: delta histograms, cumulative counters; gauges are never delta. */
Test(registry, temporality_per_kind)
{
	struct nl_instrument *c = nl_instrument_get("t.kind.counter", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *h = nl_instrument_get("t.kind.hist", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_instrument *g = nl_instrument_get("t.kind.gauge", "1", "d", NL_GAUGE, NULL, 0);
	struct nl_series *cs = series_s(c, "k", "v");
	struct nl_series *hs = series_s(h, "k", "v");
	nl_counter_add(cs, 4);
	nl_hist_record(h, hs, 1);
	nl_gauge_set(series_s(g, "k", "v"), 3.5);

	struct nl_snapshot *snap = take(false, true, T1);
	cr_assert_not(must_find_metric(snap, "t.kind.counter")->delta);
	cr_assert(must_find_metric(snap, "t.kind.hist")->delta);
	cr_assert_not(must_find_metric(snap, "t.kind.gauge")->delta);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	nl_counter_add(cs, 1);
	nl_hist_record(h, hs, 1);
	snap = take(false, true, T2);
	const struct nl_point *cp = &must_find_metric(snap, "t.kind.counter")->points[0];
	cr_assert_eq(cp->ivalue, 5, "a cumulative counter is not affected by the commit");
	cr_assert_eq(cp->start_ns, START);
	cr_assert_eq(must_find_metric(snap, "t.kind.hist")->points[0].count, 1);
	cr_assert_float_eq(must_find_metric(snap, "t.kind.gauge")->points[0].dvalue, 3.5, 1e-12);
	nl_snapshot_free(snap);

	snap = take(true, true, T3);
	cr_assert(must_find_metric(snap, "t.kind.counter")->delta);
	cr_assert_not(must_find_metric(snap, "t.kind.gauge")->delta);
	nl_snapshot_free(snap);
}

Test(registry, delta_overflow_series)
{
	nl_registry_set_cardinality_limit(2);
	struct nl_instrument *inst = nl_instrument_get("t.delta.overflow", "1", "d", NL_COUNTER, NULL, 0);
	nl_counter_add(series_s(inst, "k", "a"), 1);
	nl_counter_add(series_s(inst, "k", "b"), 2);
	struct nl_snapshot *snap = take(true, false, T1);
	const struct nl_point *o = find_overflow_point(must_find_metric(snap, "t.delta.overflow"));
	cr_assert_not_null(o);
	cr_assert_eq(o->ivalue, 2);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	nl_counter_add(series_s(inst, "k", "c"), 5);
	snap = take(true, false, T2);
	o = find_overflow_point(must_find_metric(snap, "t.delta.overflow"));
	cr_assert_not_null(o);
	cr_assert_eq(o->ivalue, 5);
	cr_assert_eq(o->start_ns, T1);
	nl_snapshot_free(snap);
}

/* ---- reset -------------------------------------------------------------------------------- */

Test(registry, reset_values_zeroes_everything)
{
	struct nl_instrument *c = nl_instrument_get("t.reset.counter", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *h = nl_instrument_get("t.reset.hist", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_instrument *g = nl_instrument_get("t.reset.gauge", "1", "d", NL_GAUGE_INT, NULL, 0);
	struct nl_series *cs = series_s(c, "k", "v");
	struct nl_series *hs = series_s(h, "k", "v");
	struct nl_series *gs = series_s(g, "k", "v");
	nl_counter_add(cs, 10);
	nl_hist_record(h, hs, 0.2);
	nl_hist_record(h, hs, 4000);
	nl_gauge_set_int(gs, 99);

	nl_registry_reset_values();
	struct nl_snapshot *snap = take(false, false, T1);
	cr_assert_null(find_metric(snap, "t.reset.counter"));
	cr_assert_null(find_metric(snap, "t.reset.hist"));
	cr_assert_null(find_metric(snap, "t.reset.gauge"));
	nl_snapshot_free(snap);

	/* the series stay usable, starting again from zero */
	nl_counter_add(cs, 2);
	nl_hist_record(h, hs, 7);
	snap = take(false, false, T2);
	cr_assert_eq(must_find_metric(snap, "t.reset.counter")->points[0].ivalue, 2);
	const struct nl_point *p = &must_find_metric(snap, "t.reset.hist")->points[0];
	cr_assert_eq(p->count, 1);
	cr_assert_float_eq(p->sum, 7, 1e-12);
	cr_assert_float_eq(p->min, 7, 1e-12, "min must not remember 0.2 from before the reset");
	cr_assert_float_eq(p->max, 7, 1e-12, "max must not remember 4000 from before the reset");
	cr_assert_eq(p->buckets[3], 0);
	cr_assert_eq(p->buckets[8], 1);
	cr_assert_eq(p->buckets[15], 0);
	cr_assert_null(find_metric(snap, "t.reset.gauge"));
	nl_snapshot_free(snap);
}

Test(registry, reset_values_clears_delta_bases)
{
	struct nl_instrument *c = nl_instrument_get("t.reset.delta", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_instrument *h = nl_instrument_get("t.reset.delta.hist", "ms", "d", NL_HISTOGRAM, BOUNDS, NB);
	struct nl_series *cs = series_s(c, "k", "v");
	struct nl_series *hs = series_s(h, "k", "v");
	nl_counter_add(cs, 10);
	nl_hist_record(h, hs, 3);
	nl_hist_record(h, hs, 3);
	struct nl_snapshot *snap = take(true, true, T1);
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);

	nl_registry_reset_values();
	nl_counter_add(cs, 2);
	nl_hist_record(h, hs, 3);
	snap = take(true, true, T2);
	const struct nl_point *cp = &must_find_metric(snap, "t.reset.delta")->points[0];
	cr_assert_eq(cp->ivalue, 2);
	const struct nl_point *hp = &must_find_metric(snap, "t.reset.delta.hist")->points[0];
	cr_assert_eq(hp->count, 1);
	cr_assert_eq(hp->buckets[7], 1);
	cr_assert_float_eq(hp->sum, 3, 1e-12);
	nl_snapshot_free(snap);
}

Test(registry, reset_values_clears_overflow)
{
	nl_registry_set_cardinality_limit(1);
	struct nl_instrument *c = nl_instrument_get("t.reset.overflow", "1", "d", NL_COUNTER, NULL, 0);
	nl_counter_add(series_s(c, "k", "a"), 3);
	nl_registry_reset_values();
	struct nl_snapshot *snap = take(false, false, T1);
	cr_assert_null(find_metric(snap, "t.reset.overflow"));
	nl_snapshot_free(snap);
}

/* ---- a fork child's copy of the arena ------------------------------------- */

static uint64_t off_in(const void *base, const void *p) { return (uint64_t)((const char *)p - (const char *)base); }

/* A fork child copies its parent's arena while the parent's threads go on:
 * the copy holds [0, limit), but its links may already lead to a series or
 * an instrument made after the copy began. Mending leaves every link on
 * what the copy holds whole, and keeps every older node. */
Test(registry, mend_copy_skips_what_the_copy_does_not_hold)
{
	struct nl_instrument *a = nl_instrument_get("t.mend.a", "1", "d", NL_COUNTER, NULL, 0);
	struct nl_series *a1 = series_s(a, "k", "a1"), *a2 = series_s(a, "k", "a2");
	uint64_t limit = atomic_load(&nl_seg_header()->used);
	char *copy = malloc(limit);
	cr_assert_not_null(copy);
	memcpy(copy, nl_seg_base, limit);

	/* The parent goes on: a new series of a, a new instrument. */
	struct nl_series *a3 = series_s(a, "k", "a3");
	struct nl_instrument *b = nl_instrument_get("t.mend.b", "1", "d", NL_COUNTER, NULL, 0);
	series_s(b, "k", "b1");
	cr_assert_geq(off_in(nl_seg_base, a3), limit);
	cr_assert_geq(off_in(nl_seg_base, b), limit);
	/* ...and the copy read a's head and the root after that. */
	struct nl_instrument *ca = (struct nl_instrument *)(copy + off_in(nl_seg_base, a));
	atomic_store(&ca->head, off_in(nl_seg_base, a3));
	atomic_store(&((struct nl_seg_header *)copy)->root, atomic_load(&nl_seg_header()->root));

	nl_registry_mend_copy(copy, limit);

	uint64_t root = atomic_load(&((struct nl_seg_header *)copy)->root);
	cr_assert(root != 0 && root < limit, "root %#llx", (unsigned long long)root);
	bool found_a = false;
	for (uint64_t io = root; io; io = ((struct nl_instrument *)(copy + io))->next) {
		cr_assert_lt(io, limit);
		found_a |= io == off_in(nl_seg_base, a);
	}
	cr_assert(found_a, "the older instrument is kept");
	cr_assert_eq(atomic_load(&ca->head), off_in(nl_seg_base, a2));
	cr_assert_eq(((struct nl_series *)(copy + off_in(nl_seg_base, a2)))->next, off_in(nl_seg_base, a1));
	cr_assert_eq(atomic_load(&ca->n_series), 2);
	free(copy);
}
