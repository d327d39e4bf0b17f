/* SPDX-License-Identifier: Apache-2.0 */
/* nl_json_encode: structure by string assertions, validity and decoded values
 * by a strict Python json parser (no bare NaN, strict UTF-8). */
#include <criterion/criterion.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export.h"
#include "helpers.h"

#define NL_ATTR_D(k, val) ((struct nl_attr){ .key = (k), .type = NL_ATTR_DOUBLE, .v.d = (val) })

static const double BOUNDS[17] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000 };

static char *json;

static void free_json(void)
{
	free(json);
	json = NULL;
}

TestSuite(json, .fini = free_json);

static const char *encode(const struct nl_snapshot *snap)
{
	size_t len = 777;
	json = (char *)"untouched";
	cr_assert_eq(nl_json_encode(snap, &json, &len), 0);
	cr_assert_not_null(json);
	cr_assert_eq(len, strlen(json), "out_len must match the NUL-terminated length");
	cr_assert_null(strchr(json, '\n'), "one line only");
	return json;
}

/* Runs a strict JSON parser on text and prints json.dumps(<expr>) for the
 * decoded document d (ASCII-only, so non-ASCII shows as \uXXXX). Returns the
 * exit status; out gets the printed line. */
static int python_eval(const char *text, const char *expr, char *out, size_t out_size)
{
	static const char script[] =
		"import json,os,sys\n"
		"def bare(c): raise ValueError('bare constant ' + c)\n"
		"d = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'), parse_constant=bare)\n"
		"print(json.dumps(eval(os.environ['NL_PY_EXPR'])))\n";
	char path[] = "/tmp/nl_test_json_XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	size_t len = strlen(text);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);

	char cmd[512];
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"$NL_PY_SCRIPT\" %s 2>/dev/null", path);
	setenv("NL_PY_SCRIPT", script, 1);
	setenv("NL_PY_EXPR", expr, 1);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	out[0] = '\0';
	if (!fgets(out, (int)out_size, p))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	int status = pclose(p);
	unlink(path);
	return status;
}

/* Asserts text parses strictly and that the expression decodes to want. */
static void expect_py(const char *text, const char *expr, const char *want)
{
	char got[4096];
	cr_assert_eq(python_eval(text, expr, got, sizeof got), 0, "not valid JSON (or bad expr %s): %s", expr, text);
	cr_assert_str_eq(got, want, "%s: got %s, want %s", expr, got, want);
}

/* Asserts that each of parts[0..n) stands in the JSON text s. */
static void expect_parts(const char *s, const char *const *parts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cr_assert(strstr(s, parts[i]), "no %s in %s", parts[i], s);
}

#define M0 "d['resourceMetrics'][0]['scopeMetrics'][0]['metrics'][0]"
#define M1 "d['resourceMetrics'][0]['scopeMetrics'][0]['metrics'][1]"

Test(json, the_validator_itself_rejects_bad_json)
{
	char out[64];
	cr_assert_neq(python_eval("{\"a\":NaN}", "d", out, sizeof out), 0);
	cr_assert_neq(python_eval("{\"a\":\"\xff\"}", "d", out, sizeof out), 0);
	cr_assert_neq(python_eval("{\"a\":\"\x01\"}", "d", out, sizeof out), 0);
	cr_assert_neq(python_eval("{\"a\":1,}", "d", out, sizeof out), 0);
	cr_assert_eq(python_eval("{\"a\":\"x\"}", "d['a']", out, sizeof out), 0);
	cr_assert_str_eq(out, "\"x\"");
}

Test(json, zero_metrics_exact)
{
	struct nl_snapshot snap = { .scope_name = "nemolens", .scope_version = "1" };
	cr_assert_str_eq(encode(&snap), "{\"resourceMetrics\":[{\"resource\":{},\"scopeMetrics\":[{\"scope\":"
					"{\"name\":\"nemolens\",\"version\":\"1\"},\"metrics\":[]}]}]}");
	expect_py(json, "d['resourceMetrics'][0]['scopeMetrics'][0]['metrics']", "[]");
}

Test(json, counter_structure_and_int64_strings)
{
	const struct nl_attr a[] = { NL_ATTR_S("method", "GET"), NL_ATTR_I("code", -5), NL_ATTR_B("ok", true),
				     NL_ATTR_D("ratio", 0.5) };
	struct nl_point p = { .attrs = a, .n_attrs = 4, .start_ns = 1700000000000000001ull,
			      .time_ns = 1700000060123456789ull, .ivalue = 9007199254740993ll /* 2^53 + 1 */ };
	struct nl_metric m = { .name = "requests", .unit = "{request}", .description = "Requests",
			       .kind = NL_COUNTER, .points = &p, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const char *s = encode(&snap);

	cr_assert(strstr(s, "{\"resourceMetrics\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
			    "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeMetrics\":[{\"scope\":{\"name\":"
			    "\"nemolens\",\"version\":\"9.8.7\"},\"metrics\":[{") == s, "%s", s);
	static const char *const parts[] = {
		"\"name\":\"requests\"",
		"\"unit\":\"{request}\"",
		"\"description\":\"Requests\"",
		"\"sum\":{\"dataPoints\":[{",
		"\"startTimeUnixNano\":\"1700000000000000001\"",
		"\"timeUnixNano\":\"1700000060123456789\"",
		"\"asInt\":\"9007199254740993\"",
		"\"aggregationTemporality\":2",
		"\"isMonotonic\":true",
		"{\"key\":\"code\",\"value\":{\"intValue\":\"-5\"}}",
		"{\"key\":\"ok\",\"value\":{\"boolValue\":true}}",
		"{\"key\":\"ratio\",\"value\":{\"doubleValue\":0.5}}",
	};
	expect_parts(s, parts, sizeof parts / sizeof *parts);

	expect_py(s, M0 "['sum']['dataPoints'][0]['asInt']", "\"9007199254740993\"");
	expect_py(s, M0 "['sum']['dataPoints'][0]['timeUnixNano']", "\"1700000060123456789\"");
	expect_py(s, M0 "['sum']['aggregationTemporality']", "2");
	expect_py(s, M0 "['sum']['isMonotonic']", "true");
	expect_py(s, "[a['value'] for a in " M0 "['sum']['dataPoints'][0]['attributes']]",
		  "[{\"stringValue\": \"GET\"}, {\"intValue\": \"-5\"}, {\"boolValue\": true}, {\"doubleValue\": 0.5}]");
}

Test(json, delta_counter_and_gauges)
{
	struct nl_point c = { .time_ns = 10, .start_ns = 5, .ivalue = 3 };
	struct nl_point gi = { .time_ns = 11, .ivalue = INT64_MIN };
	struct nl_point gd = { .time_ns = 12, .dvalue = 0.1 };
	struct nl_metric ms[] = {
		{ .name = "c", .kind = NL_COUNTER, .delta = true, .points = &c, .n_points = 1 },
		{ .name = "gi", .kind = NL_GAUGE_INT, .points = &gi, .n_points = 1 },
		{ .name = "gd", .kind = NL_GAUGE, .points = &gd, .n_points = 1 },
	};
	struct nl_snapshot snap = snapshot(ms, 3);
	const char *s = encode(&snap);
	cr_assert(strstr(s, "\"aggregationTemporality\":1"), "%s", s);
	cr_assert(strstr(s, "\"gauge\":{\"dataPoints\":[{\"timeUnixNano\":\"11\",\"asInt\":\"-9223372036854775808\"}]}"),
		  "%s", s);
	/* shortest round-trip form, and no start time when it is 0 */
	cr_assert(strstr(s, "\"gauge\":{\"dataPoints\":[{\"timeUnixNano\":\"12\",\"asDouble\":0.1}]}"), "%s", s);
	cr_assert_null(strstr(s, "\"unit\""), "empty strings are default values: omitted");
	expect_py(s, M1 "['gauge']['dataPoints'][0]['asInt']", "\"-9223372036854775808\"");
	expect_py(s, "d['resourceMetrics'][0]['scopeMetrics'][0]['metrics'][2]['gauge']['dataPoints'][0]['asDouble']",
		  "0.1");
	expect_py(s, "'startTimeUnixNano' in " M1 "['gauge']['dataPoints'][0]", "false");
}

Test(json, histogram_fields)
{
	struct nl_point p = { .start_ns = 1, .time_ns = 2, .sum = 12.75, .has_min_max = true, .min = 0.001, .max = 40000 };
	for (size_t i = 0; i <= 17; i++) {
		p.buckets[i] = i + 100;
		p.count += p.buckets[i];
	}
	struct nl_point q = p;
	q.has_min_max = false;
	struct nl_metric ms[] = {
		{ .name = "h", .unit = "ms", .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 17, .points = &p,
		  .n_points = 1 },
		{ .name = "hd", .kind = NL_HISTOGRAM, .delta = true, .bounds = BOUNDS, .n_bounds = 17, .points = &q,
		  .n_points = 1 },
	};
	struct nl_snapshot snap = snapshot(ms, 2);
	const char *s = encode(&snap);
	static const char *const parts[] = {
		"\"histogram\":{\"dataPoints\":[{",
		"\"count\":\"1953\"",   /* 18 * 100 + 0 + 1 + ... + 17 */
		"\"sum\":12.75",
		"\"bucketCounts\":[\"100\",\"101\",",
		"\"explicitBounds\":[0.01,0.05,0.1,0.25,0.5,1,2.5,5,10,25,50,100,250,500,1000,5000,30000]",
		"\"min\":0.001,\"max\":40000",
	};
	expect_parts(s, parts, sizeof parts / sizeof *parts);

	expect_py(s, M0 "['histogram']['dataPoints'][0]['explicitBounds'] == [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, "
		     "10, 25, 50, 100, 250, 500, 1000, 5000, 30000]",
		  "true");
	expect_py(s, "[int(x) for x in " M0 "['histogram']['dataPoints'][0]['bucketCounts']] == list(range(100, 118))",
		  "true");
	expect_py(s, M0 "['histogram']['aggregationTemporality']", "2");
	expect_py(s, M1 "['histogram']['aggregationTemporality']", "1");
	expect_py(s, "sorted(k for k in " M1 "['histogram']['dataPoints'][0])",
		  "[\"bucketCounts\", \"count\", \"explicitBounds\", \"startTimeUnixNano\", \"sum\", \"timeUnixNano\"]");
	expect_py(s, M0 "['histogram']['dataPoints'][0]['max']", "40000");
}

Test(json, nan_and_infinities_are_strings)
{
	const struct nl_attr a[] = { NL_ATTR_D("x", NAN) };
	struct nl_point pn = { .attrs = a, .n_attrs = 1, .time_ns = 1, .dvalue = NAN };
	struct nl_point pi = { .time_ns = 1, .dvalue = INFINITY };
	struct nl_point pm = { .time_ns = 1, .dvalue = -INFINITY };
	struct nl_point ph = { .time_ns = 1, .count = 1, .sum = NAN, .has_min_max = true, .min = -INFINITY,
			       .max = INFINITY };
	struct nl_metric ms[] = {
		{ .name = "n", .kind = NL_GAUGE, .points = &pn, .n_points = 1 },
		{ .name = "i", .kind = NL_GAUGE, .points = &pi, .n_points = 1 },
		{ .name = "m", .kind = NL_GAUGE, .points = &pm, .n_points = 1 },
		{ .name = "h", .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 1, .points = &ph, .n_points = 1 },
	};
	struct nl_snapshot snap = snapshot(ms, 4);
	const char *s = encode(&snap);
	static const char *const parts[] = {
		"\"asDouble\":\"NaN\"",
		"\"asDouble\":\"Infinity\"",
		"\"asDouble\":\"-Infinity\"",
		"\"doubleValue\":\"NaN\"",
		"\"sum\":\"NaN\"",
		"\"min\":\"-Infinity\",\"max\":\"Infinity\"",
	};
	expect_parts(s, parts, sizeof parts / sizeof *parts);
	expect_py(s, "[m['gauge']['dataPoints'][0]['asDouble'] for m in d['resourceMetrics'][0]['scopeMetrics'][0]"
		     "['metrics'][:3]]",
		  "[\"NaN\", \"Infinity\", \"-Infinity\"]");
}

Test(json, extreme_doubles_round_trip)
{
	struct nl_point p[] = { { .time_ns = 1, .dvalue = 1e300 }, { .time_ns = 1, .dvalue = -2.5e-310 },
				{ .time_ns = 1, .dvalue = 0.30000000000000004 }, { .time_ns = 1, .dvalue = -0.0 } };
	struct nl_metric m = { .name = "g", .kind = NL_GAUGE, .points = p, .n_points = 4 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const char *s = encode(&snap);
	expect_py(s, "[x['asDouble'] for x in " M0 "['gauge']['dataPoints']] == [1e300, -2.5e-310, "
		     "0.30000000000000004, 0.0]",
		  "true");
	cr_assert(strstr(s, "\"asDouble\":-0}"), "the sign of zero is kept: %s", s);
}

Test(json, string_escaping)
{
	const char *nasty = "q\"b\\s/n\nt\tc\x01\x1f" "del\x7f" "bad\xff\xC3(ok\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
	const struct nl_attr a[] = { NL_ATTR_S("k\"ey\n", nasty) };
	struct nl_point p = { .attrs = a, .n_attrs = 1, .time_ns = 1, .ivalue = 1 };
	struct nl_metric m = { .name = nasty, .description = "tab\there", .kind = NL_COUNTER, .points = &p,
			       .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const char *s = encode(&snap);
	cr_assert(strstr(s, "\"name\":\"q\\\"b\\\\s/n\\u000at\\u0009c\\u0001\\u001fdel\x7f"
			    "bad\xEF\xBF\xBD\xEF\xBF\xBD(ok\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""),
		  "%s", s);
	cr_assert(strstr(s, "\"key\":\"k\\\"ey\\u000a\""), "%s", s);
	cr_assert(strstr(s, "\"description\":\"tab\\u0009here\""), "%s", s);
	const char *want = "\"q\\\"b\\\\s/n\\nt\\tc\\u0001\\u001fdel\\u007fbad\\ufffd\\ufffd(ok\\u00e9\\u20ac\\ud83d\\ude00\"";
	expect_py(s, M0 "['name']", want);
	expect_py(s, M0 "['sum']['dataPoints'][0]['attributes'][0]['value']['stringValue']", want);
	expect_py(s, M0 "['sum']['dataPoints'][0]['attributes'][0]['key']", "\"k\\\"ey\\n\"");
}

Test(json, invalid_utf8_sequences)
{
	/* overlong, surrogate, above U+10FFFF, truncated at the end */
	const struct nl_attr a[] = { NL_ATTR_S("v", "a\xC0\xAF" "b\xED\xA0\x80" "c\xF4\x90\x80\x80" "d\xE2\x82") };
	struct nl_point p = { .attrs = a, .n_attrs = 1, .time_ns = 1 };
	struct nl_metric m = { .name = "x", .kind = NL_GAUGE_INT, .points = &p, .n_points = 1 };
	struct nl_snapshot snap = snapshot(&m, 1);
	const char *s = encode(&snap);
	/* one U+FFFD per maximal ill-formed subpart, as Python's 'replace' does */
	char want[256];
	char got[256];
	cr_assert_eq(python_eval("{}", "b'a\\xc0\\xafb\\xed\\xa0\\x80c\\xf4\\x90\\x80\\x80d\\xe2\\x82'.decode('utf-8', "
				       "'replace')",
				 want, sizeof want),
		     0);
	cr_assert_eq(python_eval(s, M0 "['gauge']['dataPoints'][0]['attributes'][0]['value']['stringValue']", got,
				 sizeof got),
		     0, "%s", s);
	cr_assert_str_eq(got, want);
}

Test(json, resource_attributes_of_every_type)
{
	const struct nl_attr res[] = { NL_ATTR_S("service.name", "gym"), NL_ATTR_I("process.pid", 4242),
				       NL_ATTR_B("flag", false), NL_ATTR_D("load", -1.25) };
	struct nl_snapshot snap = { .resource = res, .n_resource = 4, .scope_name = "s" };
	const char *s = encode(&snap);
	cr_assert_null(strstr(s, "\"version\""), "%s", s);
	expect_py(s, "d['resourceMetrics'][0]['resource']['attributes']",
		  "[{\"key\": \"service.name\", \"value\": {\"stringValue\": \"gym\"}}, {\"key\": \"process.pid\", "
		  "\"value\": {\"intValue\": \"4242\"}}, {\"key\": \"flag\", \"value\": {\"boolValue\": false}}, "
		  "{\"key\": \"load\", \"value\": {\"doubleValue\": -1.25}}]");
}

/* A host program may run with a locale whose decimal point is ','. */
static bool use_comma_locale(void)
{
	if (setlocale(LC_NUMERIC, "de_DE.UTF-8"))
		return true;
	char dir[] = "/tmp/nl_test_locale_XXXXXX";
	if (!mkdtemp(dir))
		return false;
	char cmd[256];
	snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
	int rc = system(cmd);
	setenv("LOCPATH", dir, 1);
	bool ok = rc == 0 && setlocale(LC_NUMERIC, "de_DE.UTF-8");
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return ok;
	return ok;
}

Test(json, numbers_ignore_the_locale)
{
	if (!use_comma_locale())
		cr_skip_test("no de_DE locale available");
	char probe[16];
	snprintf(probe, sizeof probe, "%.2f", 0.5);
	cr_assert_str_eq(probe, "0,50", "the locale is really in effect");
	struct nl_point p = { .time_ns = 1, .dvalue = 1234.5 };
	struct nl_point h = { .time_ns = 1, .sum = 0.25, .has_min_max = true, .min = 1e-5, .max = 2.5e20 };
	struct nl_metric ms[] = { { .name = "g", .kind = NL_GAUGE, .points = &p, .n_points = 1 },
				  { .name = "h", .kind = NL_HISTOGRAM, .bounds = BOUNDS, .n_bounds = 17, .points = &h,
				    .n_points = 1 } };
	struct nl_snapshot snap = snapshot(ms, 2);
	const char *s = encode(&snap);
	setlocale(LC_NUMERIC, "C");
	cr_assert(strstr(s, "\"asDouble\":1234.5"), "%s", s);
	cr_assert(strstr(s, "\"explicitBounds\":[0.01,0.05,0.1,0.25,0.5,1,2.5,"), "%s", s);
	expect_py(s, "[" M1 "['histogram']['dataPoints'][0][k] for k in ('sum', 'min', 'max')]", "[0.25, 1e-05, 2.5e+20]");
}

Test(json, null_snapshot_fails_cleanly)
{
	char *out = (char *)"x";
	size_t len = 3;
	cr_assert_eq(nl_json_encode(NULL, &out, &len), -1);
	cr_assert_null(out);
	cr_assert_eq(len, 0);
}
