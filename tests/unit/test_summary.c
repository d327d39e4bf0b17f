/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run --summary's tables: quantiles against values worked out by
 * hand from histogram_quantile's definition, series added up over
 * processes, rows in order, lines within their width. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

static const double BOUNDS[3] = { 1, 2, 5 };

/* ---- quantiles ---------------------------------------------------------- */

Test(summary, quantile_interpolates_inside_the_bucket)
{
	/* 2 at or below 1, 2 in (1,2], 1 above 5: rank 2.5 lies in (1,2] at a
	 * quarter of its two: 1 + 1 * 0.5 / 2. */
	const uint64_t b[4] = { 2, 2, 0, 1 };
	cr_expect_float_eq(nl_summary_quantile(0.5, BOUNDS, 3, b), 1.25, 1e-12);
	/* rank 4 is reached exactly at the top of (1,2]. */
	cr_expect_float_eq(nl_summary_quantile(0.8, BOUNDS, 3, b), 2.0, 1e-12);
}

Test(summary, quantile_first_bucket_starts_at_zero)
{
	const uint64_t b[4] = { 4, 0, 0, 0 };
	cr_expect_float_eq(nl_summary_quantile(0.5, BOUNDS, 3, b), 0.5, 1e-12);
	cr_expect_float_eq(nl_summary_quantile(0.99, BOUNDS, 3, b), 0.99, 1e-12);
}

Test(summary, quantile_empty_buckets_below_move_the_lower_bound)
{
	/* Everything in (2,5]: rank 1.5 of 3 is half way, 2 + 3 * 0.5. */
	const uint64_t b[4] = { 0, 0, 3, 0 };
	cr_expect_float_eq(nl_summary_quantile(0.5, BOUNDS, 3, b), 3.5, 1e-12);
}

Test(summary, quantile_in_the_open_bucket_is_the_highest_bound)
{
	const uint64_t b[4] = { 1, 0, 0, 9 };
	cr_expect_float_eq(nl_summary_quantile(0.5, BOUNDS, 3, b), 5.0, 1e-12);
	cr_expect_float_eq(nl_summary_quantile(0.99, BOUNDS, 3, b), 5.0, 1e-12);
	const uint64_t none[4] = { 0, 0, 0, 0 };
	cr_expect(isnan(nl_summary_quantile(0.5, BOUNDS, 3, none)));
}

/* ---- tables ------------------------------------------------------------- */

static char *text;
static size_t text_len;

static void free_text(void)
{
	free(text);
	text = NULL;
}

TestSuite(summary, .fini = free_text);

static const char *write_out(const struct nl_summary *s)
{
	free_text();
	FILE *f = open_memstream(&text, &text_len);
	cr_assert(f);
	cr_assert_eq(nl_summary_write(s, f), 0);
	fclose(f);
	return text;
}

/* The line of text that starts (after its indent) with first, or NULL. */
static char *line_of(const char *first)
{
	static char line[512];
	for (const char *p = text; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *q = p + strspn(p, " ");
		if (strncmp(q, first, strlen(first)) == 0 && n < sizeof line) {
			memcpy(line, p, n);
			line[n] = 0;
			return line;
		}
		p += n + (end != NULL);
	}
	return NULL;
}

/* The whitespace-separated fields of a line. */
static size_t fields(char *line, char **out, size_t max)
{
	size_t n = 0;
	for (char *t = strtok(line, " "); t && n < max; t = strtok(NULL, " "))
		out[n++] = t;
	return n;
}

static const char *const DEST = "nemo.gym.http.destination.server.name";

static struct nl_point counter_point(const struct nl_attr *a, int64_t v)
{
	return (struct nl_point){ .attrs = a, .n_attrs = 1, .ivalue = v };
}

Test(summary, counters_add_up_over_processes_largest_first)
{
	struct nl_attr policy[1] = { NL_ATTR_S(DEST, "policy") };
	struct nl_attr judge[1] = { NL_ATTR_S(DEST, "judge") };
	struct nl_point p1[2] = { counter_point(policy, 3), counter_point(judge, 10) };
	struct nl_point p2[1] = { counter_point(policy, 9) };
	struct nl_metric m1 = { .name = "gym.http.connection_pool.connect_total", .unit = "{connection}",
				.kind = NL_COUNTER, .points = p1, .n_points = 2 };
	struct nl_metric m2 = m1;
	m2.points = p2;
	m2.n_points = 1;
	struct nl_snapshot s1 = { .metrics = &m1, .n_metrics = 1, .n_points = 2 };
	struct nl_snapshot s2 = { .metrics = &m2, .n_metrics = 1, .n_points = 1 };

	struct nl_summary *s = nl_summary_new();
	cr_assert(s);
	cr_assert_eq(nl_summary_add(s, &s1), 0);
	cr_assert_eq(nl_summary_add(s, &s2), 0);
	cr_expect_eq(nl_summary_processes(s), 2);
	write_out(s);
	nl_summary_free(s);

	cr_expect(line_of("gym.http.connection_pool.connect_total ({connection}, counter)"), "%s", text);
	cr_expect(line_of("destination  value"), "the destination's header is short:\n%s", text);
	/* policy 3 + 9 = 12 comes before judge's 10. */
	const char *pol = strstr(text, "policy"), *jud = strstr(text, "judge");
	cr_assert(pol && jud, "%s", text);
	cr_expect_lt(pol, jud, "%s", text);
	char *f[8];
	cr_assert_eq(fields(line_of("policy"), f, 8), 2);
	cr_expect_str_eq(f[1], "12");
	cr_assert_eq(fields(line_of("judge"), f, 8), 2);
	cr_expect_str_eq(f[1], "10");
}

static const double MS[17] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000 };

Test(summary, histograms_add_buckets_and_show_quantiles)
{
	struct nl_attr ok[3] = { NL_ATTR_S(DEST, "policy"),
				 NL_ATTR_S("nemo.gym.http.connection_pool.queue_outcome", "ok"),
				 NL_ATTR_S("nemo.gym.http.connection_pool.queue_constraint", "unknown") };
	struct nl_attr gone[3] = { NL_ATTR_S(DEST, "policy"),
				   NL_ATTR_S("nemo.gym.http.connection_pool.queue_outcome", "abandoned"),
				   NL_ATTR_S("nemo.gym.http.connection_pool.queue_constraint", "unknown") };
	/* Process one: 3 waits in (1,2.5] ms; process two: 1 more there and
	 * 4 in (2.5,5]. Together 8: p50 at rank 4 is the top of (1,2.5];
	 * p99 at rank 7.92 lies in (2.5,5]: 2.5 + 2.5 * 3.92 / 4 = 4.95. */
	struct nl_point a = { .attrs = ok, .n_attrs = 3, .count = 3, .sum = 6 };
	a.buckets[6] = 3;
	struct nl_point b = { .attrs = ok, .n_attrs = 3, .count = 5, .sum = 18 };
	b.buckets[6] = 1;
	b.buckets[7] = 4;
	struct nl_point c = { .attrs = gone, .n_attrs = 3, .count = 1, .sum = 300 };
	c.buckets[13] = 1;
	struct nl_point pa[2] = { a, c }, pb[1] = { b };
	struct nl_metric ma = { .name = "gym.http.connection_pool.queue_duration_ms", .unit = "ms",
				.kind = NL_HISTOGRAM, .bounds = MS, .n_bounds = 17, .points = pa, .n_points = 2 };
	struct nl_metric mb = ma;
	mb.points = pb;
	mb.n_points = 1;
	struct nl_snapshot sa = { .metrics = &ma, .n_metrics = 1 }, sb = { .metrics = &mb, .n_metrics = 1 };

	struct nl_summary *s = nl_summary_new();
	cr_assert_eq(nl_summary_add(s, &sa), 0);
	cr_assert_eq(nl_summary_add(s, &sb), 0);
	write_out(s);
	nl_summary_free(s);

	cr_expect(line_of("gym.http.connection_pool.queue_duration_ms (ms, histogram)"), "%s", text);
	/* destination and constraint are the same in both rows: said once. */
	cr_expect(line_of("all: destination=policy, queue_constraint=unknown"), "%s", text);
	char *f[8];
	cr_assert_eq(fields(line_of("queue_outcome"), f, 8), 5, "%s", text);
	cr_expect_str_eq(f[1], "count");
	cr_expect_str_eq(f[3], "p50");
	cr_expect_str_eq(f[4], "p99");
	cr_assert_eq(fields(line_of("ok "), f, 8), 5, "%s", text);
	cr_expect_str_eq(f[1], "8");
	cr_expect_str_eq(f[2], "3");      /* (6 + 18) / 8 */
	cr_expect_str_eq(f[3], "2.5");
	cr_expect_str_eq(f[4], "4.95");
	cr_assert_eq(fields(line_of("abandoned"), f, 8), 5, "%s", text);
	cr_expect_str_eq(f[1], "1");
	cr_expect_str_eq(f[2], "300");
	/* One value in (250,500]: ranks 0.5 and 0.99 of 1 interpolate there. */
	cr_expect_str_eq(f[3], "375");
	cr_expect_str_eq(f[4], "497.5");
	/* The row with more waits comes first. */
	cr_expect_lt(strstr(text, " ok "), strstr(text, "abandoned"), "%s", text);
}

Test(summary, other_bounds_leave_no_quantile)
{
	struct nl_attr r[1] = { NL_ATTR_S("http.route", "/run") };
	struct nl_point a = { .attrs = r, .n_attrs = 1, .count = 2, .sum = 2 };
	a.buckets[0] = 2;
	struct nl_point b = a;
	struct nl_metric ma = { .name = "h", .unit = "s", .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 3,
				.points = &a, .n_points = 1 };
	struct nl_metric mb = { .name = "h", .unit = "s", .kind = NL_HISTOGRAM, .bounds = MS, .n_bounds = 17,
				.points = &b, .n_points = 1 };
	struct nl_snapshot sa = { .metrics = &ma, .n_metrics = 1 }, sb = { .metrics = &mb, .n_metrics = 1 };
	struct nl_summary *s = nl_summary_new();
	cr_assert_eq(nl_summary_add(s, &sa), 0);
	cr_assert_eq(nl_summary_add(s, &sb), 0);
	write_out(s);
	nl_summary_free(s);
	char *f[8];
	cr_assert_eq(fields(line_of("/run"), f, 8), 5, "%s", text);
	cr_expect_str_eq(f[1], "4");
	cr_expect_str_eq(f[3], "-");
	cr_expect_str_eq(f[4], "-");
}

Test(summary, a_gauge_shows_its_newest_value)
{
	struct nl_attr r[1] = { NL_ATTR_S("gym.server.name", "policy") };
	struct nl_point old = { .attrs = r, .n_attrs = 1, .dvalue = 100.5, .time_ns = 2000 };
	struct nl_point new = { .attrs = r, .n_attrs = 1, .dvalue = 7.25, .time_ns = 3000 };
	struct nl_metric mo = { .name = "gym.server.memory.usage", .unit = "By", .kind = NL_GAUGE, .points = &old,
				.n_points = 1 };
	struct nl_metric mn = mo;
	mn.points = &new;
	struct nl_snapshot so = { .metrics = &mo, .n_metrics = 1 }, sn = { .metrics = &mn, .n_metrics = 1 };
	struct nl_summary *s = nl_summary_new();
	/* The newer first: the older, added after, does not win. */
	cr_assert_eq(nl_summary_add(s, &sn), 0);
	cr_assert_eq(nl_summary_add(s, &so), 0);
	write_out(s);
	nl_summary_free(s);
	char *f[4];
	cr_assert_eq(fields(line_of("policy"), f, 4), 2, "%s", text);
	cr_expect_str_eq(f[1], "7.25");
	cr_expect(line_of("gym.server.memory.usage (By, gauge)"), "%s", text);
}

/* Display columns of a UTF-8 line. */
static size_t columns(const char *line)
{
	size_t w = 0;
	for (const unsigned char *p = (const unsigned char *)line; *p; p++)
		w += (*p & 0xc0) != 0x80;
	return w;
}

Test(summary, long_values_are_cut_to_the_width)
{
	char long_route[300];
	memset(long_route, 'r', sizeof long_route - 1);
	long_route[0] = '/';
	long_route[sizeof long_route - 1] = 0;
	struct nl_attr a[4] = { NL_ATTR_S("http.route", long_route), NL_ATTR_S("http.request.method", "GET"),
				NL_ATTR_I("http.response.status_code", 200), NL_ATTR_S("server.address", "x\ny") };
	struct nl_attr b[4] = { NL_ATTR_S("http.route", "/short"), NL_ATTR_S("http.request.method", "POST"),
				NL_ATTR_I("http.response.status_code", 503), NL_ATTR_S("server.address", "z") };
	struct nl_point p[2] = { { .attrs = a, .n_attrs = 4, .ivalue = 5 }, { .attrs = b, .n_attrs = 4, .ivalue = 1 } };
	struct nl_metric m = { .name = "c", .unit = "", .kind = NL_COUNTER, .points = p, .n_points = 2 };
	struct nl_snapshot snap = { .metrics = &m, .n_metrics = 1 };
	struct nl_summary *s = nl_summary_new();
	cr_assert_eq(nl_summary_add(s, &snap), 0);
	write_out(s);
	nl_summary_free(s);

	cr_expect(line_of("c (counter)"), "%s", text);
	cr_expect(strstr(text, "/rrr") && strstr(text, "r\u2026 "), "cut with an ellipsis:\n%s", text);
	cr_expect(strstr(text, "x?y"), "%s", text);
	size_t lines = 0;
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
		cr_expect_leq(columns(l), NL_SUMMARY_WIDTH, "%zu columns: %s", columns(l), l);
		lines++;
	}
	/* Title line, blank line skipped by strtok, table title, header, two
	 * rows: the control character did not split a row. */
	cr_expect_eq(lines, 5);
}

Test(summary, shared_values_wrap_within_the_width)
{
	/* Three attributes every row shares, 60 and 70 and 200 columns wide: one
	 * "all:" line cannot hold them; each starts a line of its own, the
	 * widest cut with an ellipsis. */
	char v1[61], v2[71], v3[201];
	memset(v1, 'a', 60), v1[60] = 0;
	memset(v2, 'b', 70), v2[70] = 0;
	memset(v3, 'c', 200), v3[200] = 0;
	struct nl_attr a[4] = { NL_ATTR_S("one", v1), NL_ATTR_S("two", v2), NL_ATTR_S("three", v3),
				NL_ATTR_S("site", "f") };
	struct nl_attr b[4] = { NL_ATTR_S("one", v1), NL_ATTR_S("two", v2), NL_ATTR_S("three", v3),
				NL_ATTR_S("site", "g") };
	struct nl_point p[2] = { { .attrs = a, .n_attrs = 4, .ivalue = 5 }, { .attrs = b, .n_attrs = 4, .ivalue = 1 } };
	struct nl_metric m = { .name = "c", .unit = "", .kind = NL_COUNTER, .points = p, .n_points = 2 };
	struct nl_snapshot snap = { .metrics = &m, .n_metrics = 1 };
	struct nl_summary *s = nl_summary_new();
	cr_assert_eq(nl_summary_add(s, &snap), 0);
	write_out(s);
	nl_summary_free(s);

	cr_expect(strstr(text, "  all: one=aaa"), "%s", text);
	cr_expect(strstr(text, "\n       two=bbb"), "%s", text);
	cr_expect(strstr(text, "\n       three=ccc") && strstr(text, "c\u2026\n"), "%s", text);
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		cr_expect_leq(columns(l), NL_SUMMARY_WIDTH, "%zu columns: %s", columns(l), l);
}

Test(summary, nothing_recorded_says_so)
{
	struct nl_summary *s = nl_summary_new();
	write_out(s);
	nl_summary_free(s);
	cr_expect_str_eq(text, "nemolens-run: the tree recorded nothing\n");
}
