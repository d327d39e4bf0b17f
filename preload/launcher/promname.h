/* SPDX-License-Identifier: Apache-2.0 */
/* OpenTelemetry names as Prometheus wants them, as the OpenTelemetry
 * specification's "Prometheus and OpenMetrics compatibility" section says
 * (OTLP metric points to Prometheus):
 *
 *   - a metric name keeps [a-zA-Z0-9_:], every other byte becomes '_', and
 *     a run of '_' becomes one; a name that starts with a digit gets '_'
 *     in front, since it may not start with one;
 *   - the unit is spelled out (ms: milliseconds, By: bytes), what is inside
 *     braces ({request}) is dropped, foo/bar becomes foo_per_bar, and 1 is
 *     ratio for gauges only; the result is appended to the name unless the
 *     name holds it already, before the type's own suffix;
 *   - a monotonic sum (a counter) ends in _total;
 *   - a label name keeps [a-zA-Z0-9_], every other byte becomes '_', and a
 *     run of '_' becomes one; one that starts with a digit gets key_ in
 *     front;
 *   - label values and help texts are escaped as the exposition formats
 *     say.
 *
 * Pure functions over strings, no state: the exposition (exposition.h)
 * calls them for every metric and label it writes.
 */
#ifndef NL_PROMNAME_H
#define NL_PROMNAME_H

#include <stdbool.h>
#include <stddef.h>

/* Text that grows as it is written, for the answer to a scrape. A write
 * that finds no memory sets failed and writes nothing more. */
struct nl_promtext {
	char *p;
	size_t len, cap;
	bool failed;
};

void nl_promtext_put(struct nl_promtext *t, const char *s, size_t n);
void nl_promtext_puts(struct nl_promtext *t, const char *s);
void nl_promtext_free(struct nl_promtext *t);

/* The Prometheus type a metric becomes. */
enum nl_prom_type { NL_PROM_COUNTER, NL_PROM_GAUGE, NL_PROM_HISTOGRAM };

/* The longest name or unit written; longer ones are cut (names of the
 * shim's instruments and their attributes are far shorter). */
#define NL_PROM_NAME_MAX 256

/* The unit spelled out for Prometheus, in out (NL_PROM_NAME_MAX bytes):
 * "" when it has none (empty, only braces, or 1 on a metric that is not a
 * gauge). */
void nl_prom_unit(const char *unit, enum nl_prom_type type, char *out);

/* The metric name of an instrument: name, then the unit's suffix, then
 * _total for a counter; in out (NL_PROM_NAME_MAX bytes). family: for a
 * counter, the name without _total (OpenMetrics names the family so and
 * its samples with _total); otherwise the same as out. May be NULL. */
void nl_prom_metric_name(const char *name, const char *unit, enum nl_prom_type type, char *out, char *family);

/* A label name from an attribute key, in out (NL_PROM_NAME_MAX bytes). */
void nl_prom_label_name(const char *key, char *out);

/* Appends s as the inside of a quoted label value: backslash, double
 * quote and line feed escaped. */
void nl_prom_put_label_value(struct nl_promtext *t, const char *s);

/* Appends s as a HELP text: backslash and line feed escaped, and in
 * OpenMetrics the double quote too. */
void nl_prom_put_help(struct nl_promtext *t, const char *s, bool openmetrics);

/* Appends a sample value or le bound: the shortest decimal that reads back
 * as the same double; NaN, +Inf and -Inf as the formats spell them. */
void nl_prom_put_double(struct nl_promtext *t, double v);

#endif
