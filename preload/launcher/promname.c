/* SPDX-License-Identifier: Apache-2.0 */
/* OpenTelemetry names as Prometheus wants them (promname.h). */
#include "promname.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nl_promtext_put(struct nl_promtext *t, const char *s, size_t n)
{
	if (t->failed)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 4096;
		while (cap < t->len + n + 1)
			cap *= 2;
		char *bigger = realloc(t->p, cap);
		if (!bigger) {
			t->failed = true;
			return;
		}
		t->p = bigger;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void nl_promtext_puts(struct nl_promtext *t, const char *s) { nl_promtext_put(t, s, strlen(s)); }

void nl_promtext_free(struct nl_promtext *t)
{
	free(t->p);
	*t = (struct nl_promtext){ 0 };
}

/* ---- units ----------------------------------------------------------------- */

/* The units of the Unified Code for Units of Measure that OpenTelemetry's
 * semantic conventions use, spelled as Prometheus' base units and names are. */
static const char *const units[][2] = {
	{ "d", "days" },          { "h", "hours" },          { "min", "minutes" },     { "s", "seconds" },
	{ "ms", "milliseconds" }, { "us", "microseconds" },  { "ns", "nanoseconds" },  { "By", "bytes" },
	{ "KiBy", "kibibytes" },  { "MiBy", "mebibytes" },   { "GiBy", "gibibytes" },  { "TiBy", "tebibytes" },
	{ "KBy", "kilobytes" },   { "MBy", "megabytes" },    { "GBy", "gigabytes" },   { "TBy", "terabytes" },
	{ "m", "meters" },        { "V", "volts" },          { "A", "amperes" },       { "J", "joules" },
	{ "W", "watts" },         { "g", "grams" },          { "Cel", "celsius" },     { "Hz", "hertz" },
	{ "%", "percent" },
};

/* After a '/', a unit of time is singular: bytes per second. */
static const char *const per_units[][2] = {
	{ "s", "second" }, { "m", "minute" }, { "min", "minute" }, { "h", "hour" }, { "d", "day" },
	{ "w", "week" },   { "mo", "month" }, { "y", "year" },
};

static const char *lookup(const char *const table[][2], size_t n, const char *s, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(table[i][0]) == len && memcmp(table[i][0], s, len) == 0)
			return table[i][1];
	return NULL;
}

static bool name_byte(char c, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       (colon && c == ':');
}

/* Appends s[0,len) to out (length *n, at most NL_PROM_NAME_MAX - 1) with
 * invalid bytes made '_' and runs of '_' made one. */
static void append_clean(char *out, size_t *n, const char *s, size_t len, bool colon)
{
	for (size_t i = 0; i < len && *n < NL_PROM_NAME_MAX - 1; i++) {
		char c = name_byte(s[i], colon) ? s[i] : '_';
		if (c == '_' && *n > 0 && out[*n - 1] == '_')
			continue;
		out[(*n)++] = c;
	}
	out[*n] = '\0';
}

/* One side of a unit (what is left once braces are gone), spelled out. */
static void append_unit_part(char *out, size_t *n, const char *s, size_t len, bool per)
{
	while (len && (*s == ' ' || *s == '_'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '_'))
		len--;
	if (!len)
		return;
	const char *word = per ? lookup(per_units, sizeof per_units / sizeof *per_units, s, len) : NULL;
	if (!word)
		word = lookup(units, sizeof units / sizeof *units, s, len);
	if (word)
		append_clean(out, n, word, strlen(word), false);
	else
		append_clean(out, n, s, len, false);
}

void nl_prom_unit(const char *unit, enum nl_prom_type type, char *out)
{
	size_t n = 0;
	out[0] = '\0';
	if (!unit)
		return;
	if (strcmp(unit, "1") == 0) {
		if (type == NL_PROM_GAUGE)
			append_clean(out, &n, "ratio", 5, false);
		return;
	}
	/* What is inside braces is an annotation, not a unit: dropped. */
	char bare[NL_PROM_NAME_MAX];
	size_t b = 0;
	int depth = 0;
	for (const char *p = unit; *p && b < sizeof bare - 1; p++) {
		if (*p == '{')
			depth++;
		else if (*p == '}' && depth > 0)
			depth--;
		else if (!depth)
			bare[b++] = *p;
	}
	bare[b] = '\0';
	const char *slash = strchr(bare, '/');
	size_t first = slash ? (size_t)(slash - bare) : b;
	append_unit_part(out, &n, bare, first, false);
	if (slash) {
		char per[NL_PROM_NAME_MAX];
		size_t p = 0;
		append_unit_part(per, &p, slash + 1, strlen(slash + 1), true);
		if (p) {
			if (n)
				append_clean(out, &n, "_", 1, false);
			append_clean(out, &n, "per_", 4, false);
			append_clean(out, &n, per, p, false);
		}
	}
	/* Trailing '_' of a cleaned unit would double the separator. */
	while (n && out[n - 1] == '_')
		out[--n] = '\0';
}

/* ---- names ----------------------------------------------------------------- */

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* Whether name holds word between underscores (or at either end). */
static bool holds_word(const char *name, const char *word)
{
	size_t k = strlen(word);
	for (const char *p = strstr(name, word); p; p = strstr(p + 1, word))
		if ((p == name || p[-1] == '_') && (p[k] == '\0' || p[k] == '_'))
			return true;
	return false;
}

void nl_prom_metric_name(const char *name, const char *unit, enum nl_prom_type type, char *out, char *family)
{
	size_t n = 0;
	out[0] = '\0';
	if (name && (name[0] >= '0' && name[0] <= '9'))
		append_clean(out, &n, "_", 1, true);
	if (name)
		append_clean(out, &n, name, strlen(name), true);
	/* A counter's _total goes last, after the unit: taken off first. */
	if (type == NL_PROM_COUNTER && ends_with(out, n, "_total")) {
		n -= 6;
		out[n] = '\0';
	}
	char u[NL_PROM_NAME_MAX];
	nl_prom_unit(unit, type, u);
	if (u[0] && !holds_word(out, u)) {
		if (n && out[n - 1] != '_')
			append_clean(out, &n, "_", 1, true);
		append_clean(out, &n, u, strlen(u), true);
	}
	if (family)
		memcpy(family, out, n + 1);
	if (type == NL_PROM_COUNTER) {
		if (n && out[n - 1] != '_')
			append_clean(out, &n, "_", 1, true);
		append_clean(out, &n, "total", 5, true);
	}
}

void nl_prom_label_name(const char *key, char *out)
{
	size_t n = 0;
	out[0] = '\0';
	if (key && key[0] >= '0' && key[0] <= '9')
		append_clean(out, &n, "key_", 4, false);
	if (key)
		append_clean(out, &n, key, strlen(key), false);
	if (!n)
		append_clean(out, &n, "_", 1, false);
}

/* ---- escaping -------------------------------------------------------------- */

static void put_escaped(struct nl_promtext *t, const char *s, bool quote)
{
	const char *run = s;
	for (; *s; s++) {
		const char *esc = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : quote && *s == '"' ? "\\\"" : NULL;
		if (!esc)
			continue;
		nl_promtext_put(t, run, (size_t)(s - run));
		nl_promtext_put(t, esc, 2);
		run = s + 1;
	}
	nl_promtext_put(t, run, (size_t)(s - run));
}

void nl_prom_put_label_value(struct nl_promtext *t, const char *s) { put_escaped(t, s ? s : "", true); }

void nl_prom_put_help(struct nl_promtext *t, const char *s, bool openmetrics)
{
	put_escaped(t, s ? s : "", openmetrics);
}

void nl_prom_put_double(struct nl_promtext *t, double v)
{
	if (isnan(v)) {
		nl_promtext_puts(t, "NaN");
		return;
	}
	if (isinf(v)) {
		nl_promtext_puts(t, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	char buf[40];
	/* Whole numbers as integers (10, not 1e+01), the rest as the shortest
	 * %g that reads back the same. */
	if (v == (double)(long long)v && fabs(v) < 1e15) {
		snprintf(buf, sizeof buf, "%lld", (long long)v);
		nl_promtext_puts(t, buf);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	nl_promtext_puts(t, buf);
}
