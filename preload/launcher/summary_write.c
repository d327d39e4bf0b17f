/* SPDX-License-Identifier: Apache-2.0 */
/* --summary's tables written out (summary.h): one per instrument, its rows
 * ordered, its columns fitted to the width.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"
#include "summary_impl.h"

/* Display columns of UTF-8 text: one per character. */
static size_t width_of(const char *t)
{
	size_t w = 0;
	for (const unsigned char *p = (const unsigned char *)t; *p; p++)
		w += (*p & 0xc0) != 0x80;
	return w;
}

/* Writes t in a field of w columns: cut with an ellipsis when wider, padded
 * on the right (left aligned) or the left. */
static void put_field(FILE *out, const char *t, size_t w, bool left)
{
	size_t tw = width_of(t);
	if (tw > w && w > 0) {
		size_t cols = 0;
		const char *p = t;
		/* w - 1 characters, then the ellipsis. */
		while (*p) {
			if (((unsigned char)*p & 0xc0) != 0x80) {
				if (cols == w - 1)
					break;
				cols++;
			}
			p++;
		}
		fwrite(t, 1, (size_t)(p - t), out);
		fputs("\u2026", out);
		return;
	}
	if (!left)
		fprintf(out, "%*s", (int)(w - tw), "");
	fputs(t, out);
	if (left)
		fprintf(out, "%*s", (int)(w - tw), "");
}

static const char *kind_name(enum nl_kind k)
{
	switch (k) {
	case NL_COUNTER:
	case NL_COUNTER_F64:
		return "counter";
	case NL_UPDOWN:
		return "up-down counter";
	case NL_GAUGE:
	case NL_GAUGE_INT:
		return "gauge";
	case NL_HISTOGRAM:
		return "histogram";
	}
	return "?";
}

/* Numbers as short as they stay exact enough to read (and to compare with a
 * backend's: six significant digits). */
static void fmt_double(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, n, "%.0f", v);
	else
		snprintf(buf, n, "%.6g", v);
}

#define MAX_NUMS 4
#define NUM_LEN 32

struct row {
	const struct series *s;
	const char **vals;              /* per shown column */
	size_t n_vals;
	double key;                     /* what rows are ordered by, largest first */
	char nums[MAX_NUMS][NUM_LEN];
};

static const char *value_of(const struct series *s, const char *key)
{
	for (size_t i = 0; i < s->n_attrs; i++)
		if (strcmp(s->attrs[i].key, key) == 0)
			return s->attrs[i].val;
	return NULL;
}

static int row_order(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	for (size_t i = 0; i < x->n_vals; i++) {
		int c = strcmp(x->vals[i], y->vals[i]);
		if (c)
			return c;
	}
	return 0;
}

static int by_name(const void *a, const void *b)
{
	const struct inst *x = *(const struct inst *const *)a, *y = *(const struct inst *const *)b;
	int c = strcmp(x->name, y->name);
	return c ? c : (int)x->kind - (int)y->kind;
}

/* The key as a column's header, short enough that a table of a few keys
 * fits its line with nothing cut: the destination, in every connection
 * table, is "destination"; NeMo Gym's own prefixes say nothing in a table
 * of its metrics (the longest that fits is taken off), nor does the
 * namespace of the instrument itself ("http." in http.server.*). The
 * caller also drops a prefix that every shown header shares. */
static const char *short_key(const char *key, const char *instrument)
{
	static const char *const gym[] = { "nemo.gym.http.connection_pool.", "nemo.gym.http.", "nemo.gym." };
	if (strcmp(key, "nemo.gym.http.destination.server.name") == 0)
		return "destination";
	for (size_t i = 0; i < sizeof gym / sizeof *gym; i++) {
		size_t n = strlen(gym[i]);
		if (strncmp(key, gym[i], n) == 0 && key[n])
			return key + n;
	}
	size_t ns = strcspn(instrument, ".");
	if (instrument[ns] == '.' && strncmp(key, instrument, ns + 1) == 0 && key[ns + 1])
		return key + ns + 1;
	return key;
}

static size_t common_prefix(const char **keys, size_t n)
{
	if (n < 2)
		return 0;
	size_t len = 0;   /* up to and with the last dot all share */
	for (size_t i = 0;; i++) {
		char c = keys[0][i];
		for (size_t k = 1; k < n; k++)
			if (keys[k][i] != c)
				return len;
		if (!c)
			return len;
		if (c == '.')
			len = i + 1;
	}
}

/* Whether every series has key, with one value (returned). */
static const char *constant_value(const struct inst *in, const char *key)
{
	const char *v = in->n ? value_of(&in->series[0], key) : NULL;
	for (size_t i = 1; v && i < in->n; i++) {
		const char *w = value_of(&in->series[i], key);
		if (!w || strcmp(v, w) != 0)
			return NULL;
	}
	return v;
}

static void fill_numbers(const struct inst *in, struct row *r)
{
	const struct series *s = r->s;
	switch (in->kind) {
	case NL_COUNTER:
	case NL_UPDOWN:
	case NL_GAUGE_INT:
		snprintf(r->nums[0], NUM_LEN, "%" PRId64, s->ivalue);
		r->key = (double)s->ivalue;
		break;
	case NL_GAUGE:
	case NL_COUNTER_F64:
		fmt_double(r->nums[0], NUM_LEN, s->dvalue);
		r->key = isnan(s->dvalue) ? -INFINITY : s->dvalue;
		break;
	case NL_HISTOGRAM: {
		snprintf(r->nums[0], NUM_LEN, "%" PRIu64, s->count);
		fmt_double(r->nums[1], NUM_LEN, s->count ? s->sum / (double)s->count : NAN);
		double p50 = NAN, p99 = NAN;
		if (s->buckets_ok && in->n_bounds) {
			p50 = nl_summary_quantile(0.5, in->bounds, in->n_bounds, s->buckets);
			p99 = nl_summary_quantile(0.99, in->bounds, in->n_bounds, s->buckets);
		}
		fmt_double(r->nums[2], NUM_LEN, p50);
		fmt_double(r->nums[3], NUM_LEN, p99);
		r->key = (double)s->count;
		break;
	}
	}
}

static int write_inst(const struct inst *in, FILE *out)
{
	static const char *const hist_heads[] = { "count", "mean", "p50", "p99" };
	static const char *const value_head[] = { "value" };
	bool hist = in->kind == NL_HISTOGRAM;
	const char *const *num_heads = hist ? hist_heads : value_head;
	size_t n_nums = hist ? MAX_NUMS : 1;

	if (*in->unit)
		fprintf(out, "%s (%s, %s)\n", in->name, in->unit, kind_name(in->kind));
	else
		fprintf(out, "%s (%s)\n", in->name, kind_name(in->kind));

	/* Keys with one value in every row of several go on one line above the
	 * table rather than repeat in each row. */
	const char **cols = calloc(in->n_keys + 1, sizeof *cols);
	const char **heads = calloc(in->n_keys + 1, sizeof *heads);
	struct row *rows = calloc(in->n, sizeof *rows);
	const char **vals = calloc(in->n * (in->n_keys + 1), sizeof *vals);
	if (!cols || !heads || !rows || !vals) {
		free(cols);
		free(heads);
		free(rows);
		free(vals);
		return -1;
	}
	size_t n_cols = 0;
	/* The attributes every row shares, on "all:" lines of their own: as
	 * many key=value items a line as fit the width, an item wider than a
	 * line cut with an ellipsis. */
	static const char lead[] = "  all: ", more[] = "       ";
	size_t line = 0;
	bool started = false;
	for (size_t k = 0; k < in->n_keys; k++) {
		const char *v = in->n > 1 ? constant_value(in, in->keys[k]) : NULL;
		if (!v) {
			cols[n_cols++] = in->keys[k];
			continue;
		}
		const char *key = short_key(in->keys[k], in->name);
		size_t w = width_of(key) + 1 + width_of(v);
		if (line && line + 2 + w > NL_SUMMARY_WIDTH) {
			fputc('\n', out);
			line = 0;
		}
		if (!line) {
			fputs(started ? more : lead, out);
			line = sizeof lead - 1;
			started = true;
		} else {
			fputs(", ", out);
			line += 2;
		}
		char item[512];
		snprintf(item, sizeof item, "%s=%s", key, v);
		size_t room = NL_SUMMARY_WIDTH - line;
		put_field(out, item, w < room ? w : room, true);
		line += w < room ? w : room;
	}
	if (line)
		fputc('\n', out);
	for (size_t c = 0; c < n_cols; c++)
		heads[c] = short_key(cols[c], in->name);
	size_t common = common_prefix(heads, n_cols);
	for (size_t c = 0; c < n_cols; c++)
		heads[c] += common;

	for (size_t i = 0; i < in->n; i++) {
		struct row *r = &rows[i];
		r->s = &in->series[i];
		r->vals = vals + i * (in->n_keys + 1);
		r->n_vals = n_cols;
		for (size_t c = 0; c < n_cols; c++) {
			const char *v = value_of(r->s, cols[c]);
			r->vals[c] = v ? v : "-";
		}
		fill_numbers(in, r);
	}
	qsort(rows, in->n, sizeof *rows, row_order);

	/* Widths: numbers in full; attribute values share what is left of the
	 * line, the widest giving way first, none below a few columns. */
	size_t num_w[MAX_NUMS], used = 2;
	for (size_t j = 0; j < n_nums; j++) {
		num_w[j] = strlen(num_heads[j]);
		for (size_t i = 0; i < in->n; i++)
			if (strlen(rows[i].nums[j]) > num_w[j])
				num_w[j] = strlen(rows[i].nums[j]);
		used += num_w[j] + 2;
	}
	size_t *w = calloc(n_cols + 1, sizeof *w), total = 0;
	if (!w) {
		free(cols);
		free(heads);
		free(rows);
		free(vals);
		return -1;
	}
	for (size_t c = 0; c < n_cols; c++) {
		w[c] = width_of(heads[c]);
		for (size_t i = 0; i < in->n; i++)
			if (width_of(rows[i].vals[c]) > w[c])
				w[c] = width_of(rows[i].vals[c]);
		if (w[c] > 60)
			w[c] = 60;
		total += w[c] + 2;
	}
	while (used + total > NL_SUMMARY_WIDTH) {
		size_t widest = 0;
		for (size_t c = 1; c < n_cols; c++)
			if (w[c] > w[widest])
				widest = c;
		if (!n_cols || w[widest] <= 8)
			break;
		w[widest]--;
		total--;
	}

	fputs("  ", out);
	for (size_t c = 0; c < n_cols; c++) {
		put_field(out, heads[c], w[c], true);
		fputs("  ", out);
	}
	for (size_t j = 0; j < n_nums; j++) {
		put_field(out, num_heads[j], num_w[j], false);
		fputs(j + 1 < n_nums ? "  " : "\n", out);
	}
	for (size_t i = 0; i < in->n; i++) {
		fputs("  ", out);
		for (size_t c = 0; c < n_cols; c++) {
			put_field(out, rows[i].vals[c], w[c], true);
			fputs("  ", out);
		}
		for (size_t j = 0; j < n_nums; j++) {
			put_field(out, rows[i].nums[j], num_w[j], false);
			fputs(j + 1 < n_nums ? "  " : "\n", out);
		}
	}
	free(w);
	free(cols);
	free(heads);
	free(rows);
	free(vals);
	return 0;
}

int nl_summary_write(const struct nl_summary *s, FILE *out)
{
	size_t shown = 0;
	for (size_t i = 0; i < s->n; i++)
		shown += s->insts[i].n > 0;
	if (!shown) {
		fprintf(out, "nemolens-run: the tree recorded nothing\n");
		return fflush(out) == 0 && !ferror(out) ? 0 : -1;
	}
	const struct inst **order = calloc(s->n, sizeof *order);
	if (!order)
		return -1;
	for (size_t i = 0; i < s->n; i++)
		order[i] = &s->insts[i];
	qsort(order, s->n, sizeof *order, by_name);
	fprintf(out, "nemolens-run: what the tree recorded (%zu process%s, %zu instrument%s)\n", s->processes,
		s->processes == 1 ? "" : "es", shown, shown == 1 ? "" : "s");
	int rc = 0;
	for (size_t i = 0; i < s->n && rc == 0; i++) {
		if (!order[i]->n)
			continue;
		fputc('\n', out);
		rc = write_inst(order[i], out);
	}
	free(order);
	if (fflush(out) != 0 || ferror(out))
		rc = -1;
	return rc;
}
