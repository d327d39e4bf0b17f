/* SPDX-License-Identifier: Apache-2.0 */
/* nl_config_load and its value parsers, against a fake environment.
 *
 * Every test builds its own environment in a static table that fake_getenv
 * reads, so nothing depends on the real process environment. Warnings are
 * silenced in the suite init, except where a test counts them on a captured
 * stderr. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "gymconfig.h"
#include "helpers.h"
#include "route.h"
#include "log.h"

/* ---- the fake environment ----------------------------------------------- */

#define ENV_MAX 96

static struct {
	const char *name;
	const char *value;
} env_tab[ENV_MAX];
static size_t env_n;

/* Names nl_config_load asked for, to check the list of variables below. */
#define QUERIED_MAX 256
static char queried[QUERIED_MAX][96];
static size_t n_queried;

static void env_set(const char *name, const char *value)
{
	for (size_t i = 0; i < env_n; i++) {
		if (strcmp(env_tab[i].name, name) == 0) {
			env_tab[i].value = value;
			return;
		}
	}
	cr_assert_lt(env_n, ENV_MAX, "fake environment full");
	env_tab[env_n].name = name;
	env_tab[env_n].value = value;
	env_n++;
}

static const char *fake_getenv(const char *name)
{
	size_t i;
	for (i = 0; i < n_queried; i++)
		if (strcmp(queried[i], name) == 0)
			break;
	if (i == n_queried && n_queried < QUERIED_MAX)
		snprintf(queried[n_queried++], sizeof queried[0], "%s", name);
	for (i = 0; i < env_n; i++)
		if (strcmp(env_tab[i].name, name) == 0)
			return env_tab[i].value;
	return NULL;
}

static void setup(void)
{
	env_n = 0;
	n_queried = 0;
	nl_log_set_level(NL_LOG_NONE);
}

TestSuite(config, .init = setup);
TestSuite(parse, .init = setup);

static void load(struct nl_config *cfg)
{
	nl_config_load(cfg, fake_getenv, "myprog");
}

/* Every variable docs/configuration.md documents (and aliases). */
static const char *const ALL_VARS[] = {
	"OTEL_SDK_DISABLED",
	"NEMO_GYM_OTEL_RUN_ID",
	"SLURM_JOB_ID",
	"NEMOLENS_RUN_ID",
	"NEMOLENS_ENABLED",
	"NEMO_GYM_OTEL_ENABLED",
	"NEMOLENS_METRICS_ENABLED",
	"NEMO_GYM_OTEL_METRICS_ENABLED",
	"NEMOLENS_MEMORY_PROFILING",
	"NEMOLENS_PROCESS_METRICS",
	"NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED",
	"OTEL_METRICS_EXPORTER",
	"NEMO_GYM_OTEL_EXPORTER",
	"OTEL_METRIC_EXPORT_INTERVAL",
	"OTEL_METRIC_EXPORT_TIMEOUT",
	"NEMOLENS_EXIT_TIMEOUT_MS",
	"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS",
	"OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
	"OTEL_EXPORTER_OTLP_TIMEOUT",
	"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
	"OTEL_EXPORTER_OTLP_COMPRESSION",
	"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
	"OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY",
	"OTEL_EXPORTER_OTLP_CLIENT_KEY",
	"OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
	"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
	"NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS",
	"NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS",
	"NEMOLENS_CARDINALITY_LIMIT",
	"NEMOLENS_HTTP",
	"NEMOLENS_HTTP_ROUTES",
	"NEMOLENS_HTTP_ROUTE_UNMATCHED",
	"NEMOLENS_HTTP_ROUTE_LIMIT",
	"NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT",
	"NEMOLENS_HTTP_SERVER_NAME_LIMIT",
	"OTEL_SEMCONV_STABILITY_OPT_IN",
	"OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS",
	"NEMOLENS_GYM_ENDPOINTS",
	"NEMOLENS_GYM_ROLLOUT_ROUTE",
	"NEMOLENS_GYM_VERIFY_ROUTE",
	"NEMOLENS_GENAI",
	"NEMOLENS_GENAI_PATHS",
	"NEMOLENS_GENAI_PROVIDER",
	"NEMOLENS_CALL_SITES",
	"NEMOLENS_CALL_SITES_LIMIT",
	"NEMOLENS_CALL_SITES_SKIP",
	"OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_SERVICE_NAME",
	"NEMOLENS_DESTINATIONS",
	"NEMOLENS_CONSOLE_PATH",
	"NEMOLENS_SERVER_NAME",
	"NEMOLENS_SERVER_TYPE",
	"NEMO_GYM_CONFIG_PATH",
	"NEMO_GYM_CONFIG_DICT",
	"NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER",
	"NEMOLENS_LOG_LEVEL",
	"NEMOLENS_LOG_PATH",
	"NEMOLENS_CRASH_REPORT",
	"NEMOLENS_OUTERMOST_PID",
	"NEMOLENS_ADOPT",
	"NEMOLENS_LEFTOVER_MAX_AGE_S",
	"XDG_RUNTIME_DIR",
};
#define N_ALL_VARS (sizeof ALL_VARS / sizeof *ALL_VARS)

/* The defaults of every non-string field, and of the string fields that have one. */
static void assert_scalar_defaults(const struct nl_config *c)
{
	cr_assert(c->enabled);
	cr_assert(c->metrics_enabled);
	cr_assert_eq(c->exporter, NL_EXPORTER_OTLP);
	cr_assert_eq(c->export_interval_ms, 10000);
	cr_assert_eq(c->export_timeout_ms, 30000);
	cr_assert_eq(c->otlp_timeout_ms, 10000);
	cr_assert_eq(c->exit_timeout_ms, 500);
	cr_assert_str_eq(c->endpoint, "http://localhost:4318/v1/metrics");
	cr_assert_eq(c->n_headers, 0);
	cr_assert_not(c->gzip);
	cr_assert_not(c->delta_counters);
	cr_assert_not(c->delta_histograms);
	cr_assert_eq(c->n_resource, 0);
	cr_assert_not(c->memory_profiling);
	cr_assert(c->process_metrics);
	cr_assert_eq(c->memory_interval_ms, 1000);
	cr_assert_eq(c->cardinality_limit, 2000);
	cr_assert_eq(c->log_level, NL_LOG_WARN);
	cr_assert(c->crash_report);
	cr_assert_eq(c->adopt, NL_ADOPT_OWN);
	cr_assert_eq(c->leftover_max_age_s, 86400);
}

Test(config, adopt_modes_and_leftover_age)
{
	struct nl_config c;
	env_set("NEMOLENS_ADOPT", "FOLD");
	env_set("NEMOLENS_LEFTOVER_MAX_AGE_S", "60");
	load(&c);
	cr_assert_eq(c.adopt, NL_ADOPT_FOLD);
	cr_assert_eq(c.leftover_max_age_s, 60);
	nl_config_free(&c);
	env_set("NEMOLENS_ADOPT", "off");
	env_set("NEMOLENS_LEFTOVER_MAX_AGE_S", "0");
	load(&c);
	cr_assert_eq(c.adopt, NL_ADOPT_OFF);
	cr_assert_eq(c.leftover_max_age_s, 86400, "out of range: the default");
	nl_config_free(&c);
	env_set("NEMOLENS_ADOPT", "sometimes");
	load(&c);
	cr_assert_eq(c.adopt, NL_ADOPT_OWN, "invalid: the default");
	nl_config_free(&c);
}

Test(config, process_metrics_on_unless_turned_off)
{
	struct nl_config c;
	env_set("NEMOLENS_PROCESS_METRICS", "false");
	load(&c);
	cr_assert_not(c.process_metrics);
	nl_config_free(&c);
	env_set("NEMOLENS_PROCESS_METRICS", "maybe");
	load(&c);
	cr_assert(c.process_metrics, "invalid: the default");
	nl_config_free(&c);
	env_set("NEMOLENS_PROCESS_METRICS", "true");
	load(&c);
	cr_assert(c.process_metrics);
	nl_config_free(&c);
}

Test(config, crash_report_on_unless_turned_off)
{
	struct nl_config c;
	env_set("NEMOLENS_CRASH_REPORT", "false");
	load(&c);
	cr_assert_not(c.crash_report);
	nl_config_free(&c);
	env_set("NEMOLENS_CRASH_REPORT", "off");
	load(&c);
	cr_assert_not(c.crash_report);
	nl_config_free(&c);
	env_set("NEMOLENS_CRASH_REPORT", "sometimes");
	load(&c);
	cr_assert(c.crash_report, "invalid: the default");
	nl_config_free(&c);
}

static void assert_defaults(const struct nl_config *c)
{
	assert_scalar_defaults(c);
	cr_assert_null(c->ca_file);
	cr_assert_null(c->client_key);
	cr_assert_null(c->client_cert);
	cr_assert_null(c->service_name);
	cr_assert_str_eq(c->server_name, "myprog");
	cr_assert_str_eq(c->server_type, "process");
	cr_assert_null(c->destinations);
	cr_assert_null(c->console_path);
}

/* ---- stderr capture ------------------------------------------------------ */

static int count_lines_starting(const char *buf, const char *prefix)
{
	int n = 0;
	size_t plen = strlen(prefix);
	for (const char *line = buf; *line;) {
		if (strncmp(line, prefix, plen) == 0)
			n++;
		const char *nl = strchr(line, '\n');
		if (!nl)
			break;
		line = nl + 1;
	}
	return n;
}

/* ---- defaults, empty values, the variable list --------------------------- */

Test(config, defaults_when_nothing_is_set)
{
	struct nl_config c;
	load(&c);
	assert_defaults(&c);
	nl_config_free(&c);
}

Test(config, empty_values_count_as_unset)
{
	for (size_t i = 0; i < N_ALL_VARS; i++)
		env_set(ALL_VARS[i], "");
	struct nl_config c;
	load(&c);
	assert_defaults(&c);
	nl_config_free(&c);
}

/* Keeps this file honest: every variable the loader reads is one the tests
 * know about, and every variable listed here is actually read. */
Test(config, reads_exactly_the_documented_variables)
{
	struct nl_config c;
	env_set("NEMO_GYM_CONFIG_PATH", "srv");   /* the Gym variables read only then */
	load(&c);
	nl_config_free(&c);
	for (size_t i = 0; i < n_queried; i++) {
		bool known = false;
		for (size_t k = 0; k < N_ALL_VARS; k++)
			known |= strcmp(queried[i], ALL_VARS[k]) == 0;
		cr_assert(known, "nl_config_load reads %s, which no test covers", queried[i]);
	}
	for (size_t k = 0; k < N_ALL_VARS; k++) {
		bool read = false;
		for (size_t i = 0; i < n_queried; i++)
			read |= strcmp(queried[i], ALL_VARS[k]) == 0;
		cr_assert(read, "%s is never read", ALL_VARS[k]);
	}
}

Test(config, http_defaults_and_values)
{
	struct nl_config c;
	load(&c);
	cr_assert(c.http_server && c.http_client, "the HTTP layer is on by default, both sides");
	cr_assert_eq(c.http_route_unmatched, NL_ROUTE_TEMPLATE);
	cr_assert_eq(c.http_route_cap, 256);
	cr_assert_eq(c.http_route_segment_limit, 10);
	cr_assert_eq(c.http_server_name_limit, 64);
	cr_assert_not(c.http_semconv_dup);
	cr_assert_not(c.http_semconv_stable, "Gym's attributes by default");
	cr_assert(c.gym_endpoints);
	cr_assert_str_eq(c.gym_rollout_route, "/run");
	cr_assert_str_eq(c.gym_verify_route, "/verify");
	cr_assert(c.genai, "model calls are read by default");
	cr_assert_null(c.genai_paths);
	cr_assert_null(c.genai_provider);
	nl_config_free(&c);

	env_set("NEMOLENS_GENAI", "false");
	env_set("NEMOLENS_GENAI_PATHS", "/generate=text_completion");
	env_set("NEMOLENS_GENAI_PROVIDER", "vllm");
	load(&c);
	cr_assert_not(c.genai);
	cr_assert_str_eq(c.genai_paths, "/generate=text_completion");
	cr_assert_str_eq(c.genai_provider, "vllm");
	nl_config_free(&c);
	env_set("NEMOLENS_GENAI", "");
	env_set("NEMOLENS_GENAI_PATHS", "");
	env_set("NEMOLENS_GENAI_PROVIDER", "");

	load(&c);
	cr_assert(c.call_sites, "call sites are on by default");
	cr_assert_eq(c.call_sites_limit, 64);
	cr_assert_null(c.call_sites_skip, "NULL: the built-in list");
	nl_config_free(&c);
	env_set("NEMOLENS_CALL_SITES", "off");
	env_set("NEMOLENS_CALL_SITES_LIMIT", "5");
	env_set("NEMOLENS_CALL_SITES_SKIP", "libcurl,libmine");
	load(&c);
	cr_assert_not(c.call_sites);
	cr_assert_eq(c.call_sites_limit, 5);
	cr_assert_str_eq(c.call_sites_skip, "libcurl,libmine");
	nl_config_free(&c);
	env_set("NEMOLENS_CALL_SITES_LIMIT", "251");
	load(&c);
	cr_assert_eq(c.call_sites_limit, 64, "out of range: the default");
	nl_config_free(&c);
	env_set("NEMOLENS_CALL_SITES", "");
	env_set("NEMOLENS_CALL_SITES_LIMIT", "");
	env_set("NEMOLENS_CALL_SITES_SKIP", "");

	env_set("NEMOLENS_HTTP", "server");
	env_set("NEMOLENS_HTTP_ROUTE_UNMATCHED", "path");
	env_set("NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT", "0");
	env_set("NEMOLENS_HTTP_SERVER_NAME_LIMIT", "250");
	env_set("OTEL_SEMCONV_STABILITY_OPT_IN", "database, http/dup");
	env_set("NEMOLENS_GYM_ENDPOINTS", "false");
	env_set("NEMOLENS_GYM_VERIFY_ROUTE", "/check");
	load(&c);
	cr_assert(c.http_server);
	cr_assert_not(c.http_client);
	cr_assert_eq(c.http_route_unmatched, NL_ROUTE_PATH);
	cr_assert_eq(c.http_route_segment_limit, 0);
	cr_assert_eq(c.http_server_name_limit, 250);
	cr_assert(c.http_semconv_dup);
	cr_assert_not(c.http_semconv_stable);
	cr_assert_not(c.gym_endpoints);
	cr_assert_str_eq(c.gym_verify_route, "/check");
	nl_config_free(&c);

	env_set("NEMOLENS_HTTP", "sometimes");
	env_set("NEMOLENS_HTTP_ROUTE_UNMATCHED", "regex");
	env_set("NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT", "101");
	env_set("NEMOLENS_HTTP_SERVER_NAME_LIMIT", "0");
	env_set("OTEL_SEMCONV_STABILITY_OPT_IN", "http");
	load(&c);
	cr_assert(c.http_server && c.http_client, "an invalid NEMOLENS_HTTP keeps the default");
	cr_assert_eq(c.http_route_unmatched, NL_ROUTE_TEMPLATE);
	cr_assert_eq(c.http_route_segment_limit, 10, "an invalid limit keeps the default");
	cr_assert_not(c.http_semconv_dup, "only http/dup adds the old names");
	cr_assert(c.http_semconv_stable, "http: the stable attributes alone");
	cr_assert_eq(c.http_server_name_limit, 64, "an invalid limit keeps the default");
	nl_config_free(&c);

	env_set("OTEL_SEMCONV_STABILITY_OPT_IN", "http,http/dup");
	load(&c);
	cr_assert(c.http_semconv_dup);
	cr_assert_not(c.http_semconv_stable, "http/dup wins over http");
	nl_config_free(&c);
}

Test(config, free_clears_the_struct)
{
	env_set("OTEL_EXPORTER_OTLP_HEADERS", "a=1");
	env_set("OTEL_RESOURCE_ATTRIBUTES", "b=2");
	env_set("OTEL_EXPORTER_OTLP_CERTIFICATE", "/ca.pem");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_headers, 1);
	nl_config_free(&c);
	cr_assert_null(c.endpoint);
	cr_assert_null(c.server_name);
	cr_assert_null(c.ca_file);
	cr_assert_eq(c.n_headers, 0);
	cr_assert_eq(c.n_resource, 0);
}

/* ---- on/off switches ------------------------------------------------------ */

static bool enabled_with(const char *name, const char *value)
{
	setup();
	env_set(name, value);
	struct nl_config c;
	load(&c);
	bool on = c.enabled;
	nl_config_free(&c);
	return on;
}

Test(config, otel_sdk_disabled)
{
	cr_assert_not(enabled_with("OTEL_SDK_DISABLED", "true"));
	cr_assert_not(enabled_with("OTEL_SDK_DISABLED", "TRUE"));
	cr_assert_not(enabled_with("OTEL_SDK_DISABLED", "True"));
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "false"));
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "FALSE"));
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "bogus"));
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "truee"));
}

/* The OpenTelemetry specification (Environment Variable Specification,
 * "Boolean"): only the case-insensitive string "true" is true; an
 * implementation MUST NOT define additional true values. config.h promises to
 * parse standard variables as the specification says. */
Test(config, otel_sdk_disabled_only_true_is_true)
{
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "1"), "OTEL_SDK_DISABLED=1 must not disable");
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "yes"), "OTEL_SDK_DISABLED=yes must not disable");
	cr_assert(enabled_with("OTEL_SDK_DISABLED", "on"), "OTEL_SDK_DISABLED=on must not disable");
}

Test(config, nemolens_enabled_and_alias)
{
	cr_assert_not(enabled_with("NEMOLENS_ENABLED", "false"));
	cr_assert_not(enabled_with("NEMOLENS_ENABLED", "0"));
	cr_assert_not(enabled_with("NEMOLENS_ENABLED", "OFF"));
	cr_assert(enabled_with("NEMOLENS_ENABLED", "true"));
	cr_assert(enabled_with("NEMOLENS_ENABLED", "maybe"));
	cr_assert(enabled_with("NEMOLENS_ENABLED", "99999999999999999999"));
	cr_assert_not(enabled_with("NEMO_GYM_OTEL_ENABLED", "false"));
	cr_assert(enabled_with("NEMO_GYM_OTEL_ENABLED", "true"));
	cr_assert(enabled_with("NEMO_GYM_OTEL_ENABLED", "nah"));
}

Test(config, nemolens_enabled_wins_over_its_alias)
{
	env_set("NEMOLENS_ENABLED", "true");
	env_set("NEMO_GYM_OTEL_ENABLED", "false");
	struct nl_config c;
	load(&c);
	cr_assert(c.enabled);
	nl_config_free(&c);

	setup();
	env_set("NEMOLENS_ENABLED", "false");
	env_set("NEMO_GYM_OTEL_ENABLED", "true");
	load(&c);
	cr_assert_not(c.enabled);
	nl_config_free(&c);
}

Test(config, metrics_enabled_and_alias)
{
	struct nl_config c;
	env_set("NEMOLENS_METRICS_ENABLED", "false");
	load(&c);
	cr_assert_not(c.metrics_enabled);
	cr_assert(c.enabled);
	nl_config_free(&c);

	setup();
	env_set("NEMO_GYM_OTEL_METRICS_ENABLED", "false");
	load(&c);
	cr_assert_not(c.metrics_enabled);
	nl_config_free(&c);

	setup();
	env_set("NEMOLENS_METRICS_ENABLED", "sometimes");
	load(&c);
	cr_assert(c.metrics_enabled);
	nl_config_free(&c);

	setup();
	env_set("NEMOLENS_METRICS_ENABLED", "true");
	env_set("NEMO_GYM_OTEL_METRICS_ENABLED", "false");
	load(&c);
	cr_assert(c.metrics_enabled);
	nl_config_free(&c);
}

Test(config, memory_profiling_and_alias)
{
	struct nl_config c;
	env_set("NEMOLENS_MEMORY_PROFILING", "true");
	load(&c);
	cr_assert(c.memory_profiling);
	nl_config_free(&c);

	setup();
	env_set("NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED", "yes");
	load(&c);
	cr_assert(c.memory_profiling);
	nl_config_free(&c);

	setup();
	env_set("NEMOLENS_MEMORY_PROFILING", "2");
	load(&c);
	cr_assert_not(c.memory_profiling);
	nl_config_free(&c);

	setup();
	env_set("NEMOLENS_MEMORY_PROFILING", "false");
	env_set("NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED", "true");
	load(&c);
	cr_assert_not(c.memory_profiling);
	nl_config_free(&c);
}

/* ---- exporter selection --------------------------------------------------- */

static enum nl_exporter_kind exporter_with(const char *a, const char *b)
{
	setup();
	if (a)
		env_set("OTEL_METRICS_EXPORTER", a);
	if (b)
		env_set("NEMO_GYM_OTEL_EXPORTER", b);
	struct nl_config c;
	load(&c);
	enum nl_exporter_kind k = c.exporter;
	nl_config_free(&c);
	return k;
}

Test(config, metrics_exporter)
{
	cr_assert_eq(exporter_with("otlp", NULL), NL_EXPORTER_OTLP);
	cr_assert_eq(exporter_with("console", NULL), NL_EXPORTER_CONSOLE);
	cr_assert_eq(exporter_with("none", NULL), NL_EXPORTER_NONE);
	cr_assert_eq(exporter_with("CONSOLE", NULL), NL_EXPORTER_CONSOLE);
	cr_assert_eq(exporter_with("bogus", NULL), NL_EXPORTER_OTLP);
	/* prometheus alone: no push exporter. */
	cr_assert_eq(exporter_with("prometheus", NULL), NL_EXPORTER_NONE);
}

/* OTEL_METRICS_EXPORTER as a list with prometheus: the push exporter it
 * names first, whether prometheus is served, and its host and port. */
static const struct {
	const char *list, *host, *port;
	enum nl_exporter_kind push;
	bool prometheus;
	const char *want_host;          /* NULL: the default, localhost */
	long want_port;
} prometheus_lists[] = {
	{ "prometheus", NULL, NULL, NL_EXPORTER_NONE, true, NULL, 9464 },
	{ "otlp,prometheus", NULL, NULL, NL_EXPORTER_OTLP, true, NULL, 9464 },
	{ "prometheus, otlp", NULL, NULL, NL_EXPORTER_OTLP, true, NULL, 9464 },
	{ "PROMETHEUS,none", NULL, NULL, NL_EXPORTER_NONE, true, NULL, 9464 },
	{ "console,prometheus", NULL, NULL, NL_EXPORTER_CONSOLE, true, NULL, 9464 },
	{ "bogus,prometheus", "0.0.0.0", "9100", NL_EXPORTER_NONE, true, "0.0.0.0", 9100 },
	{ "prometheus", "::1", "0", NL_EXPORTER_NONE, true, "::1", 9464 },
	{ "prometheus", NULL, "65536", NL_EXPORTER_NONE, true, NULL, 9464 },
	{ "prometheus", NULL, "x", NL_EXPORTER_NONE, true, NULL, 9464 },
	{ "otlp", "0.0.0.0", "9100", NL_EXPORTER_OTLP, false, NULL, 9464 },
};

Test(config, metrics_exporter_prometheus)
{
	for (size_t i = 0; i < sizeof prometheus_lists / sizeof *prometheus_lists; i++) {
		setup();
		env_set("OTEL_METRICS_EXPORTER", prometheus_lists[i].list);
		if (prometheus_lists[i].host)
			env_set("OTEL_EXPORTER_PROMETHEUS_HOST", prometheus_lists[i].host);
		if (prometheus_lists[i].port)
			env_set("OTEL_EXPORTER_PROMETHEUS_PORT", prometheus_lists[i].port);
		struct nl_config c;
		load(&c);
		cr_expect_eq(c.exporter, prometheus_lists[i].push, "%s", prometheus_lists[i].list);
		cr_expect_eq(c.prometheus, prometheus_lists[i].prometheus, "%s", prometheus_lists[i].list);
		if (prometheus_lists[i].want_host)
			cr_expect_str_eq(c.prometheus_host ? c.prometheus_host : "(null)", prometheus_lists[i].want_host);
		else
			cr_expect_null(c.prometheus_host, "%s", prometheus_lists[i].list);
		cr_expect_eq(c.prometheus_port, prometheus_lists[i].want_port, "%s port %s", prometheus_lists[i].list,
			     prometheus_lists[i].port ? prometheus_lists[i].port : "-");
		nl_config_free(&c);
	}
}

Test(config, metrics_exporter_comma_lists)
{
	cr_assert_eq(exporter_with("console,otlp", NULL), NL_EXPORTER_CONSOLE);
	cr_assert_eq(exporter_with("otlp,console", NULL), NL_EXPORTER_OTLP);
	cr_assert_eq(exporter_with("bogus,none", NULL), NL_EXPORTER_NONE);
	cr_assert_eq(exporter_with("bogus, console", NULL), NL_EXPORTER_CONSOLE);
	cr_assert_eq(exporter_with("bogus,,also-bogus", NULL), NL_EXPORTER_OTLP);
	cr_assert_eq(exporter_with(",", NULL), NL_EXPORTER_OTLP);
}

Test(config, nemo_gym_exporter_alias)
{
	cr_assert_eq(exporter_with(NULL, "console"), NL_EXPORTER_CONSOLE);
	cr_assert_eq(exporter_with(NULL, "none"), NL_EXPORTER_NONE);
	cr_assert_eq(exporter_with(NULL, "bogus"), NL_EXPORTER_OTLP);
	/* The standard variable wins. */
	cr_assert_eq(exporter_with("none", "console"), NL_EXPORTER_NONE);
	cr_assert_eq(exporter_with("otlp", "console"), NL_EXPORTER_OTLP);
}

/* ---- millisecond variables ------------------------------------------------ */

static const char *const BAD_MS[] = {
	"abc", "-5", "99999999999999999999", "9223372036854775808", "100ms", "12abc", "1.5", "0x10", "--1",
};

static long field_with(const char *name, const char *value, size_t offset)
{
	setup();
	env_set(name, value);
	struct nl_config c;
	load(&c);
	long v = *(const long *)((const char *)&c + offset);
	nl_config_free(&c);
	return v;
}

#define FIELD(name, value, field) field_with((name), (value), offsetof(struct nl_config, field))

/* Each millisecond variable: values it takes (or caps), and its default,
 * which every BAD_MS value leaves in place. */
static const struct {
	const char *name;
	size_t offset;
	long fallback;
	struct {
		const char *value;
		long want;
	} good[4];
} MS_VARS[] = {
	{ "OTEL_METRIC_EXPORT_INTERVAL", offsetof(struct nl_config, export_interval_ms), 10000,
	  { { "5000", 5000 }, { "1", 1 }, { " 2500 ", 2500 }, { "0", 10000 } } },
	{ "OTEL_METRIC_EXPORT_TIMEOUT", offsetof(struct nl_config, export_timeout_ms), 30000, { { "2000", 2000 } } },
	{ "NEMOLENS_EXIT_TIMEOUT_MS", offsetof(struct nl_config, exit_timeout_ms), 500,
	  { { "250", 250 }, { "10000", 10000 }, { "10001", 10000 }, { "60000", 10000 } } },
	{ "OTEL_EXPORTER_OTLP_TIMEOUT", offsetof(struct nl_config, otlp_timeout_ms), 10000, { { "4321", 4321 } } },
	{ "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", offsetof(struct nl_config, otlp_timeout_ms), 10000,
	  { { "1234", 1234 } } },
};

Test(config, millisecond_variables)
{
	for (size_t i = 0; i < sizeof MS_VARS / sizeof *MS_VARS; i++) {
		const char *name = MS_VARS[i].name;
		for (size_t j = 0; j < 4 && MS_VARS[i].good[j].value; j++)
			cr_assert_eq(field_with(name, MS_VARS[i].good[j].value, MS_VARS[i].offset), MS_VARS[i].good[j].want,
				     "%s=%s", name, MS_VARS[i].good[j].value);
		for (size_t j = 0; j < sizeof BAD_MS / sizeof *BAD_MS; j++)
			cr_assert_eq(field_with(name, BAD_MS[j], MS_VARS[i].offset), MS_VARS[i].fallback, "%s=%s", name,
				     BAD_MS[j]);
	}
}

Test(config, otlp_timeout_metrics_specific_wins)
{
	setup();
	env_set("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1234");
	env_set("OTEL_EXPORTER_OTLP_TIMEOUT", "4321");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.otlp_timeout_ms, 1234);
	nl_config_free(&c);
}

/* ---- endpoint ------------------------------------------------------------- */

static void assert_endpoint(const char *metrics, const char *generic, const char *want)
{
	setup();
	if (metrics)
		env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", metrics);
	if (generic)
		env_set("OTEL_EXPORTER_OTLP_ENDPOINT", generic);
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.endpoint, want, "metrics=%s generic=%s", metrics ? metrics : "(unset)",
			 generic ? generic : "(unset)");
	nl_config_free(&c);
}

Test(config, metrics_endpoint_is_used_as_is)
{
	assert_endpoint("http://collector:9999/custom/path", NULL, "http://collector:9999/custom/path");
	assert_endpoint("http://collector:4318", NULL, "http://collector:4318");
	assert_endpoint("https://collector:4318/", NULL, "https://collector:4318/");
}

Test(config, generic_endpoint_gets_v1_metrics)
{
	assert_endpoint(NULL, "http://collector:4318", "http://collector:4318/v1/metrics");
	assert_endpoint(NULL, "http://collector:4318/", "http://collector:4318/v1/metrics");
	assert_endpoint(NULL, "https://c.example/otlp", "https://c.example/otlp/v1/metrics");
	assert_endpoint(NULL, "https://c.example/otlp/", "https://c.example/otlp/v1/metrics");
}

Test(config, metrics_endpoint_wins)
{
	assert_endpoint("http://m:1/x", "http://g:2", "http://m:1/x");
}

Test(config, invalid_endpoint_gets_default)
{
	assert_endpoint(NULL, "collector:4318", "http://localhost:4318/v1/metrics");
	assert_endpoint(NULL, "ftp://collector", "http://localhost:4318/v1/metrics");
	assert_endpoint("not a url", NULL, "http://localhost:4318/v1/metrics");
}

/* ---- headers -------------------------------------------------------------- */

Test(config, headers)
{
	env_set("OTEL_EXPORTER_OTLP_HEADERS", "api-key=secret,x-tenant=acme");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_headers, 2);
	cr_assert_str_eq(c.headers[0].name, "api-key");
	cr_assert_str_eq(c.headers[0].value, "secret");
	cr_assert_str_eq(c.headers[1].name, "x-tenant");
	cr_assert_str_eq(c.headers[1].value, "acme");
	nl_config_free(&c);
}

Test(config, headers_percent_decoded_and_trimmed)
{
	env_set("OTEL_EXPORTER_OTLP_HEADERS", " k%20ey = va%2Clue , Authorization=Basic%20YWxhZGRpbjpvcGVuc2VzYW1l");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_headers, 2);
	cr_assert_str_eq(c.headers[0].name, "k ey");
	cr_assert_str_eq(c.headers[0].value, "va,lue");
	cr_assert_str_eq(c.headers[1].name, "Authorization");
	cr_assert_str_eq(c.headers[1].value, "Basic YWxhZGRpbjpvcGVuc2VzYW1l");
	nl_config_free(&c);
}

Test(config, metrics_headers_win)
{
	env_set("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "a=1");
	env_set("OTEL_EXPORTER_OTLP_HEADERS", "b=2,c=3");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_headers, 1);
	cr_assert_str_eq(c.headers[0].name, "a");
	cr_assert_str_eq(c.headers[0].value, "1");
	nl_config_free(&c);
}

static const char *const BAD_KV[] = {
	"a=%4",   "a=%zz",       "a=%",      "novalue", "=v",   "a=1,bad", "a=1,=2",
	"a=\xff", "a=%FF",       "a=%C0%80", "a=%00b",  "\xfe=1", "a=%ED%A0%80",
	"a=%4g",  "k=v,k2=%2",
};

Test(config, invalid_headers_get_default)
{
	for (size_t i = 0; i < sizeof BAD_KV / sizeof *BAD_KV; i++) {
		setup();
		env_set("OTEL_EXPORTER_OTLP_HEADERS", BAD_KV[i]);
		struct nl_config c;
		load(&c);
		cr_assert_eq(c.n_headers, 0, "OTEL_EXPORTER_OTLP_HEADERS=\"%s\" gave %zu headers", BAD_KV[i],
			     c.n_headers);
		nl_config_free(&c);

		setup();
		env_set("OTEL_EXPORTER_OTLP_METRICS_HEADERS", BAD_KV[i]);
		load(&c);
		cr_assert_eq(c.n_headers, 0);
		nl_config_free(&c);
	}
}

Test(config, at_most_max_headers)
{
	static char buf[4096];
	size_t o = 0;
	for (int i = 0; i < NL_MAX_HEADERS + 8; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%sh%d=v%d", i ? "," : "", i, i);
	env_set("OTEL_EXPORTER_OTLP_HEADERS", buf);
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_headers, NL_MAX_HEADERS);
	cr_assert_str_eq(c.headers[0].name, "h0");
	cr_assert_str_eq(c.headers[NL_MAX_HEADERS - 1].value, "v31");
	nl_config_free(&c);
}

/* ---- compression, protocol, TLS files, temporality ------------------------ */

static bool gzip_with(const char *metrics, const char *generic)
{
	setup();
	if (metrics)
		env_set("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", metrics);
	if (generic)
		env_set("OTEL_EXPORTER_OTLP_COMPRESSION", generic);
	struct nl_config c;
	load(&c);
	bool gz = c.gzip;
	nl_config_free(&c);
	return gz;
}

Test(config, compression)
{
	cr_assert(gzip_with(NULL, "gzip"));
	cr_assert(gzip_with(NULL, "GZIP"));
	cr_assert_not(gzip_with(NULL, "none"));
	cr_assert_not(gzip_with(NULL, "brotli"));
	cr_assert(gzip_with("gzip", NULL));
	cr_assert_not(gzip_with("zstd", NULL));
	cr_assert_not(gzip_with("none", "gzip"));
	cr_assert(gzip_with("gzip", "none"));
}

/* The endpoint and the number of warnings a protocol setting gives, with
 * the endpoint variables as given (NULL: unset). */
static int load_protocol(const char *metrics, const char *generic, const char *endpoint,
			 const char *metrics_endpoint, const char *insecure, struct nl_config *c)
{
	setup();
	nl_log_set_level(NL_LOG_WARN);
	if (metrics)
		env_set("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", metrics);
	if (generic)
		env_set("OTEL_EXPORTER_OTLP_PROTOCOL", generic);
	if (endpoint)
		env_set("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
	if (metrics_endpoint)
		env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", metrics_endpoint);
	if (insecure)
		env_set("OTEL_EXPORTER_OTLP_INSECURE", insecure);
	struct capture cap;
	capture_begin(&cap);
	load(c);
	const char *out = capture_end(&cap);
	return count_lines_starting(out, "nemolens: ");
}

#define EXPORT_CALL "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

/* http/protobuf (the default) and grpc; anything else is a warning and
 * http/protobuf. The METRICS_ variable wins over the generic one. For gRPC
 * the endpoint is scheme://host:port (a path is ignored, the call's is
 * added), 4317 by default; without a scheme, INSECURE=true means
 * plaintext, else TLS. */
Test(config, protocol_and_endpoint)
{
	static const struct {
		const char *metrics, *generic, *endpoint, *metrics_endpoint, *insecure;
		bool grpc;
		const char *url;
		int warnings;
	} rows[] = {
		{ NULL, "http/protobuf", NULL, NULL, NULL, false, "http://localhost:4318/v1/metrics", 0 },
		{ "http/protobuf", NULL, NULL, NULL, NULL, false, "http://localhost:4318/v1/metrics", 0 },
		{ "http/protobuf", "grpc", NULL, NULL, NULL, false, "http://localhost:4318/v1/metrics", 0 },
		{ "http/json", "http/protobuf", NULL, NULL, NULL, false, "http://localhost:4318/v1/metrics", 1 },
		{ NULL, "grpc", NULL, NULL, NULL, true, "http://localhost:4317" EXPORT_CALL, 0 },
		{ "grpc", "http/protobuf", NULL, NULL, NULL, true, "http://localhost:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "http://col:4317", NULL, NULL, true, "http://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "https://col:4317/", NULL, NULL, true, "https://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "http://col:4317/v1/metrics?x", NULL, NULL, true, "http://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "http://a:1", "http://b:2", NULL, true, "http://b:2" EXPORT_CALL, 0 },
		{ NULL, "grpc", "col:4317", NULL, NULL, true, "https://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "col:4317", NULL, "false", true, "https://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "col:4317", NULL, "true", true, "http://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "https://col:4317", NULL, "true", true, "https://col:4317" EXPORT_CALL, 0 },
		{ NULL, "grpc", "col:4317", NULL, "maybe", true, "https://col:4317" EXPORT_CALL, 1 },
		{ NULL, "grpc", "ftp://col:21", NULL, NULL, true, "http://localhost:4317" EXPORT_CALL, 1 },
		{ NULL, "grpc", "http://a:1", "ftp://b", NULL, true, "http://a:1" EXPORT_CALL, 1 },
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		struct nl_config c;
		int warnings = load_protocol(rows[i].metrics, rows[i].generic, rows[i].endpoint,
					     rows[i].metrics_endpoint, rows[i].insecure, &c);
		cr_assert_eq(c.grpc, rows[i].grpc, "row %zu", i);
		cr_assert_str_eq(c.endpoint, rows[i].url, "row %zu", i);
		cr_assert_eq(warnings, rows[i].warnings, "row %zu", i);
		nl_config_free(&c);
	}
}

/* A warning is given once a variable: this one in a test of its own. */
Test(config, grpc_endpoint_without_a_host)
{
	struct nl_config c;
	cr_assert_eq(load_protocol(NULL, "grpc", "http://", NULL, NULL, &c), 1);
	cr_assert_str_eq(c.endpoint, "http://localhost:4317" EXPORT_CALL);
	nl_config_free(&c);
}

Test(config, tls_files)
{
	env_set("OTEL_EXPORTER_OTLP_CERTIFICATE", "/g/ca.pem");
	env_set("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/g/key.pem");
	env_set("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/g/cert.pem");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.ca_file, "/g/ca.pem");
	cr_assert_str_eq(c.client_key, "/g/key.pem");
	cr_assert_str_eq(c.client_cert, "/g/cert.pem");
	nl_config_free(&c);
}

Test(config, tls_files_metrics_specific_win)
{
	env_set("OTEL_EXPORTER_OTLP_CERTIFICATE", "/g/ca.pem");
	env_set("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/g/key.pem");
	env_set("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/g/cert.pem");
	env_set("OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", "/m/ca.pem");
	env_set("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY", "/m/key.pem");
	env_set("OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE", "/m/cert.pem");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.ca_file, "/m/ca.pem");
	cr_assert_str_eq(c.client_key, "/m/key.pem");
	cr_assert_str_eq(c.client_cert, "/m/cert.pem");
	nl_config_free(&c);
}

static void assert_temporality(const char *value, bool counters, bool histograms)
{
	setup();
	env_set("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", value);
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.delta_counters, counters, "%s: delta_counters", value);
	cr_assert_eq(c.delta_histograms, histograms, "%s: delta_histograms", value);
	nl_config_free(&c);
}

Test(config, temporality_preference)
{
	assert_temporality("cumulative", false, false);
	assert_temporality("delta", true, true);
	assert_temporality("Delta", true, true);
	assert_temporality("lowmemory", false, true);
	assert_temporality("LowMemory", false, true);
	assert_temporality("bogus", false, false);
	assert_temporality("delta,", false, false);
}

/* ---- memory sampling interval --------------------------------------------- */

Test(config, memory_interval_seconds)
{
	cr_assert_eq(FIELD("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", "2.5", memory_interval_ms), 2500);
	cr_assert_eq(FIELD("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", "0.25", memory_interval_ms), 250);
	cr_assert_eq(FIELD("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", "3", memory_interval_ms), 3000);
	static const char *const bad[] = { "abc", "-1", "0", "1.5s", "nan", "inf", "-0.5", "1e300", "2,5" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(FIELD("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", bad[i], memory_interval_ms),
			     1000, "NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS=%s", bad[i]);
}

/* A positive number of seconds that rounds to 0 ms must not become an interval
 * of zero. */
Test(config, memory_interval_tiny_seconds_not_zero)
{
	long ms = FIELD("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", "0.0001", memory_interval_ms);
	cr_assert_gt(ms, 0, "NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS=0.0001 gave %ld ms", ms);
}

Test(config, memory_interval_ms)
{
	cr_assert_eq(FIELD("NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS", "250", memory_interval_ms), 250);
	cr_assert_eq(FIELD("NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS", "0", memory_interval_ms), 1000);
	for (size_t i = 0; i < sizeof BAD_MS / sizeof *BAD_MS; i++)
		cr_assert_eq(FIELD("NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS", BAD_MS[i], memory_interval_ms), 1000,
			     "NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS=%s", BAD_MS[i]);
}

Test(config, memory_interval_nemolens_wins)
{
	env_set("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", "2.5");
	env_set("NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS", "300");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.memory_interval_ms, 300);
	nl_config_free(&c);
}

/* ---- cardinality limit, log level ------------------------------------------ */

static size_t cardinality_with(const char *value)
{
	setup();
	env_set("NEMOLENS_CARDINALITY_LIMIT", value);
	struct nl_config c;
	load(&c);
	size_t n = c.cardinality_limit;
	nl_config_free(&c);
	return n;
}

Test(config, cardinality_limit_bounds)
{
	cr_assert_eq(cardinality_with("1"), 1);
	cr_assert_eq(cardinality_with("500"), 500);
	cr_assert_eq(cardinality_with("100000"), 100000);
	cr_assert_eq(cardinality_with("0"), 2000);
	cr_assert_eq(cardinality_with("100001"), 2000);
	cr_assert_eq(cardinality_with("-3"), 2000);
	cr_assert_eq(cardinality_with("99999999999999999999"), 2000);
	cr_assert_eq(cardinality_with("12k"), 2000);
	cr_assert_eq(cardinality_with("lots"), 2000);
}

static void assert_log_level(const char *value, enum nl_log_level want)
{
	setup();
	env_set("NEMOLENS_LOG_LEVEL", value);
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.log_level, want, "NEMOLENS_LOG_LEVEL=%s", value);
	nl_config_free(&c);
}

Test(config, log_level)
{
	assert_log_level("none", NL_LOG_NONE);
	assert_log_level("error", NL_LOG_ERROR);
	assert_log_level("warn", NL_LOG_WARN);
	assert_log_level("info", NL_LOG_INFO);
	assert_log_level("debug", NL_LOG_DEBUG);
	assert_log_level("DEBUG", NL_LOG_DEBUG);
	assert_log_level("warning", NL_LOG_WARN);
	assert_log_level("off", NL_LOG_NONE);
	assert_log_level("verbose", NL_LOG_WARN);
	assert_log_level("3", NL_LOG_WARN);
	nl_log_set_level(NL_LOG_NONE);
}

Test(config, log_level_applies_to_the_logger)
{
	env_set("NEMOLENS_LOG_LEVEL", "error");
	struct nl_config c;
	load(&c);
	cr_assert_eq(nl_log_get_level(), NL_LOG_ERROR);
	nl_config_free(&c);
	nl_log_set_level(NL_LOG_NONE);
}

/* ---- service, server, resource --------------------------------------------- */

Test(config, service_name_from_otel_service_name)
{
	env_set("OTEL_SERVICE_NAME", "svc");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.service_name, "svc");
	cr_assert_str_eq(c.server_name, "svc");
	nl_config_free(&c);
}

Test(config, service_name_from_resource_attributes)
{
	env_set("OTEL_RESOURCE_ATTRIBUTES", "team=x,service.name=my%20svc");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.service_name, "my svc");
	cr_assert_str_eq(c.server_name, "my svc");
	nl_config_free(&c);
}

Test(config, otel_service_name_wins_over_resource)
{
	env_set("OTEL_SERVICE_NAME", "from-env");
	env_set("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-res");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.service_name, "from-env");
	nl_config_free(&c);
}

Test(config, server_name_precedence)
{
	struct nl_config c;
	env_set("NEMOLENS_SERVER_NAME", "srv");
	env_set("OTEL_SERVICE_NAME", "svc");
	env_set("OTEL_RESOURCE_ATTRIBUTES", "service.name=res");
	load(&c);
	cr_assert_str_eq(c.server_name, "srv");
	cr_assert_str_eq(c.service_name, "svc");
	nl_config_free(&c);

	setup();
	env_set("OTEL_RESOURCE_ATTRIBUTES", "service.name=res");
	load(&c);
	cr_assert_str_eq(c.server_name, "res");
	nl_config_free(&c);

	setup();
	nl_config_load(&c, fake_getenv, "prog-name");
	cr_assert_null(c.service_name);
	cr_assert_str_eq(c.server_name, "prog-name");
	nl_config_free(&c);

	setup();
	nl_config_load(&c, fake_getenv, NULL);
	cr_assert_not_null(c.server_name);
	cr_assert_gt(strlen(c.server_name), 0);
	nl_config_free(&c);
}

Test(config, names_with_invalid_utf8_come_out_valid)
{
	struct nl_config c;
	env_set("OTEL_SERVICE_NAME", "svc\xffx");
	env_set("NEMOLENS_SERVER_TYPE", "w\xc3orker");
	load(&c);
	cr_assert(nl_utf8_valid(c.service_name, strlen(c.service_name)));
	cr_assert(nl_utf8_valid(c.server_name, strlen(c.server_name)));
	cr_assert(nl_utf8_valid(c.server_type, strlen(c.server_type)));
	cr_assert_str_eq(c.service_name, "svc?x");
	nl_config_free(&c);

	setup();
	env_set("NEMOLENS_SERVER_NAME", "\xc0\x80name");
	load(&c);
	cr_assert(nl_utf8_valid(c.server_name, strlen(c.server_name)));
	nl_config_free(&c);

	setup();
	nl_config_load(&c, fake_getenv, "prog\xe2\x82");
	cr_assert(nl_utf8_valid(c.server_name, strlen(c.server_name)));
	nl_config_free(&c);
}

Test(config, server_type)
{
	env_set("NEMOLENS_SERVER_TYPE", "worker");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.server_type, "worker");
	nl_config_free(&c);
}

Test(config, resource_attributes)
{
	env_set("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod, k8s.pod.name=p%2D1 ,empty=");
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_resource, 3);
	cr_assert_str_eq(c.resource[0].name, "deployment.environment");
	cr_assert_str_eq(c.resource[0].value, "prod");
	cr_assert_str_eq(c.resource[1].name, "k8s.pod.name");
	cr_assert_str_eq(c.resource[1].value, "p-1");
	cr_assert_str_eq(c.resource[2].name, "empty");
	cr_assert_str_eq(c.resource[2].value, "");
	cr_assert_null(c.service_name);
	nl_config_free(&c);
}

Test(config, invalid_resource_attributes_discarded)
{
	for (size_t i = 0; i < sizeof BAD_KV / sizeof *BAD_KV; i++) {
		setup();
		env_set("OTEL_RESOURCE_ATTRIBUTES", BAD_KV[i]);
		struct nl_config c;
		load(&c);
		cr_assert_eq(c.n_resource, 0, "OTEL_RESOURCE_ATTRIBUTES=\"%s\" gave %zu attributes", BAD_KV[i],
			     c.n_resource);
		nl_config_free(&c);
	}
	/* A malformed list with a service.name in it gives no service name. */
	setup();
	env_set("OTEL_RESOURCE_ATTRIBUTES", "service.name=svc,broken=%4");
	struct nl_config c;
	load(&c);
	cr_assert_null(c.service_name);
	cr_assert_str_eq(c.server_name, "myprog");
	nl_config_free(&c);
}

Test(config, destinations_and_console_path_raw)
{
	env_set("NEMOLENS_DESTINATIONS", "policy=policy-host:8000,judge=10.0.3.0/24");
	env_set("NEMOLENS_CONSOLE_PATH", "/tmp/metrics.jsonl");
	struct nl_config c;
	load(&c);
	cr_assert_str_eq(c.destinations, "policy=policy-host:8000,judge=10.0.3.0/24");
	cr_assert_str_eq(c.console_path, "/tmp/metrics.jsonl");
	nl_config_free(&c);
}

/* ---- hostile values --------------------------------------------------------- */

#define MB (1024 * 1024)

Test(config, one_megabyte_resource_value)
{
	char *v = malloc(MB + 1);
	cr_assert_not_null(v);
	memcpy(v, "k=", 2);
	memset(v + 2, 'x', MB - 2);
	v[MB] = 0;
	env_set("OTEL_RESOURCE_ATTRIBUTES", v);
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_resource, 1);
	cr_assert_str_eq(c.resource[0].name, "k");
	cr_assert_eq(strlen(c.resource[0].value), (size_t)MB - 2);
	nl_config_free(&c);
	free(v);
}

Test(config, one_megabyte_garbage_everywhere)
{
	char *v = malloc(MB + 1);
	cr_assert_not_null(v);
	memset(v, 'x', MB);
	v[MB] = 0;
	for (size_t i = 0; i < N_ALL_VARS; i++)
		env_set(ALL_VARS[i], v);
	struct nl_config c;
	load(&c);
	assert_scalar_defaults(&c);
	cr_assert_eq(strlen(c.server_name), (size_t)MB);
	nl_config_free(&c);
	free(v);
}

Test(config, ten_thousand_resource_pairs)
{
	size_t cap = 10000 * 16;
	char *v = malloc(cap);
	cr_assert_not_null(v);
	size_t o = 0;
	for (int i = 0; i < 10000; i++)
		o += (size_t)snprintf(v + o, cap - o, "%sk%d=v%d", i ? "," : "", i, i);
	env_set("OTEL_RESOURCE_ATTRIBUTES", v);
	struct nl_config c;
	load(&c);
	cr_assert_eq(c.n_resource, NL_MAX_RESOURCE_ATTRS);
	cr_assert_str_eq(c.resource[0].name, "k0");
	cr_assert_str_eq(c.resource[0].value, "v0");
	cr_assert_str_eq(c.resource[NL_MAX_RESOURCE_ATTRS - 1].name, "k63");
	cr_assert_str_eq(c.resource[NL_MAX_RESOURCE_ATTRS - 1].value, "v63");
	nl_config_free(&c);
	free(v);
}

/* ---- warnings --------------------------------------------------------------- */

Test(config, same_bad_value_warns_once)
{
	nl_log_set_level(NL_LOG_WARN);
	env_set("OTEL_METRIC_EXPORT_INTERVAL", "abc");
	struct nl_config c1, c2;
	struct capture cap;
	capture_begin(&cap);
	load(&c1);
	load(&c2);
	const char *out = capture_end(&cap);
	cr_assert_eq(count_lines_starting(out, "nemolens: "), 1, "stderr was:\n%s", out);
	cr_assert_not_null(strstr(out, "OTEL_METRIC_EXPORT_INTERVAL"), "stderr was:\n%s", out);
	cr_assert_eq(c1.export_interval_ms, 10000);
	cr_assert_eq(c2.export_interval_ms, 10000);
	nl_config_free(&c1);
	nl_config_free(&c2);
}

Test(config, valid_values_do_not_warn)
{
	nl_log_set_level(NL_LOG_WARN);
	env_set("OTEL_METRIC_EXPORT_INTERVAL", "1000");
	env_set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
	env_set("OTEL_RESOURCE_ATTRIBUTES", "a=b");
	env_set("NEMOLENS_CARDINALITY_LIMIT", "10");
	struct nl_config c;
	struct capture cap;
	capture_begin(&cap);
	load(&c);
	const char *out = capture_end(&cap);
	cr_assert_eq(count_lines_starting(out, "nemolens: "), 0, "stderr was:\n%s", out);
	nl_config_free(&c);
}

/* ---- where warnings go ------------------------------------------------------ */

Test(config, log_path)
{
	struct nl_config c;
	load(&c);
	cr_assert_null(c.log_path);
	cr_assert_eq(nl_log_get_output(), NL_LOG_TO_TERMINAL);
	nl_config_free(&c);

	env_set("NEMOLENS_LOG_PATH", "stderr");
	load(&c);
	cr_assert_str_eq(c.log_path, "stderr");
	cr_assert_eq(nl_log_get_output(), NL_LOG_TO_STDERR);
	nl_config_free(&c);

	env_set("NEMOLENS_LOG_PATH", "/var/log/nemolens.log");
	load(&c);
	cr_assert_str_eq(c.log_path, "/var/log/nemolens.log");
	cr_assert_eq(nl_log_get_output(), NL_LOG_TO_FILE);
	nl_config_free(&c);

	/* Invalid: one warning, and the output stays as it was. */
	static const char *const bad[] = { "relative.log", "STDERR", "./x", "~/x" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		nl_log_set_output(NL_LOG_TO_TERMINAL, NULL);
		env_set("NEMOLENS_LOG_PATH", bad[i]);
		load(&c);
		cr_assert_null(c.log_path, "%s", bad[i]);
		cr_assert_eq(nl_log_get_output(), NL_LOG_TO_TERMINAL, "%s", bad[i]);
		nl_config_free(&c);
	}
	char *long_path = malloc(8192);
	cr_assert_not_null(long_path);
	memset(long_path, 'a', 8191);
	long_path[0] = '/';
	long_path[8191] = 0;
	env_set("NEMOLENS_LOG_PATH", long_path);
	load(&c);
	cr_assert_null(c.log_path);
	cr_assert_eq(nl_log_get_output(), NL_LOG_TO_TERMINAL);
	nl_config_free(&c);
	free(long_path);
}

Test(config, outermost_from_the_inherited_marker)
{
	struct nl_config c;
	load(&c);
	cr_assert(c.outermost, "no shim ancestor");
	nl_config_free(&c);

	char mine[24];
	snprintf(mine, sizeof mine, "%d", (int)getpid());
	env_set("NEMOLENS_OUTERMOST_PID", mine);
	load(&c);
	cr_assert(c.outermost, "the marker is this process's own (it exec'd)");
	nl_config_free(&c);

	static const char *const other[] = { "1", "999999999", "12x", "-3" };
	for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
		env_set("NEMOLENS_OUTERMOST_PID", other[i]);
		load(&c);
		cr_assert_not(c.outermost, "%s", other[i]);
		nl_config_free(&c);
	}
}

/* nemo.run.id: Gym's variable, else Slurm's, else the tree's; the outermost
 * process makes one when none is set, a descendant never does. */
Test(config, run_id_from_gym_then_slurm_then_the_tree)
{
	static const struct {
		const char *gym, *slurm, *tree, *want;
	} rows[] = {
		{ "gym-run", "4242", "0123456789ab", "gym-run" },
		{ NULL, "4242", "0123456789ab", "4242" },
		{ "", "4242", NULL, "4242" },
		{ NULL, NULL, "0123456789ab", "0123456789ab" },
		{ "", "", "0123456789ab", "0123456789ab" },
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		setup();
		if (rows[i].gym)
			env_set("NEMO_GYM_OTEL_RUN_ID", rows[i].gym);
		if (rows[i].slurm)
			env_set("SLURM_JOB_ID", rows[i].slurm);
		if (rows[i].tree)
			env_set("NEMOLENS_RUN_ID", rows[i].tree);
		struct nl_config c;
		load(&c);
		cr_assert_str_eq(c.run_id, rows[i].want, "row %zu", i);
		cr_assert_not(c.run_id_made, "row %zu", i);
		nl_config_free(&c);
	}
}

Test(config, run_id_made_by_the_outermost_process_only)
{
	struct nl_config a, b;
	load(&a);
	load(&b);
	cr_assert(a.run_id_made && b.run_id_made);
	cr_assert_eq(strlen(a.run_id), 12);
	cr_assert_eq(strspn(a.run_id, "0123456789abcdef"), 12, "%s", a.run_id);
	cr_assert_str_neq(a.run_id, b.run_id, "two runs, two ids");
	nl_config_free(&a);
	nl_config_free(&b);

	env_set("NEMOLENS_OUTERMOST_PID", "1");   /* a shim ancestor: it made the id */
	load(&a);
	cr_assert_null(a.run_id);
	cr_assert_not(a.run_id_made);
	nl_config_free(&a);
}

/* By default only the outermost process writes, and only to a terminal: the
 * capture file is neither. */
Test(config, default_output_writes_nothing_to_a_file_or_pipe)
{
	nl_log_set_level(NL_LOG_WARN);
	env_set("OTEL_METRIC_EXPORT_INTERVAL", "abc");
	struct nl_config c;
	struct capture cap;
	capture_begin(&cap);
	nl_log_set_output(NL_LOG_TO_TERMINAL, NULL);
	load(&c);
	const char *out = capture_end(&cap);
	cr_assert_str_eq(out, "");
	nl_config_free(&c);
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = calloc(1, 65536);
	cr_assert_not_null(buf);
	size_t n = fread(buf, 1, 65535, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* NEMOLENS_LOG_PATH applies to the warnings about the logging variables too,
 * and lines carry the time, program name and pid. */
Test(config, log_file_lines)
{
	char dir[] = "/tmp/nl-logtest.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char path[64];
	snprintf(path, sizeof path, "%s/log", dir);
	nl_log_set_level(NL_LOG_WARN);
	env_set("NEMOLENS_LOG_PATH", path);
	env_set("NEMOLENS_LOG_LEVEL", "verbose");
	env_set("OTEL_METRIC_EXPORT_INTERVAL", "abc");
	struct nl_config c;
	load(&c);
	nl_config_free(&c);
	load(&c);   /* the same problems again: no new line */
	nl_config_free(&c);
	char *text = read_all(path);
	cr_assert_not_null(text);
	cr_assert_not_null(strstr(text, "ignoring NEMOLENS_LOG_LEVEL"), "%s", text);
	cr_assert_not_null(strstr(text, "ignoring OTEL_METRIC_EXPORT_INTERVAL"), "%s", text);
	int lines = 0;
	for (char *line = text, *next; *line; line = next) {
		next = strchr(line, '\n');
		cr_assert_not_null(next, "unterminated line in:\n%s", text);
		*next++ = 0;
		int y, mo, d, h, mi, s, ms, pid, used = 0;
		char prog[64];
		cr_assert_eq(sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ %63[^[][%d] nemolens: %n", &y, &mo, &d, &h, &mi,
				    &s, &ms, prog, &pid, &used),
			     9, "%s", line);
		cr_assert_gt(used, 0, "%s", line);
		cr_assert(y >= 2024 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 && s < 61, "%s",
			  line);
		cr_assert_str_eq(prog, program_invocation_short_name);
		cr_assert_eq(pid, (int)getpid());
		lines++;
	}
	cr_assert_eq(lines, 2);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
	free(text);
	unlink(path);
	rmdir(dir);
}

/* A symlink at the path is refused: its target is not written, and nothing
 * is written anywhere else either. */
Test(config, log_file_symlink_refused)
{
	char dir[] = "/tmp/nl-logtest.XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char path[64], target[64];
	snprintf(path, sizeof path, "%s/log", dir);
	snprintf(target, sizeof target, "%s/target", dir);
	FILE *f = fopen(target, "w");
	cr_assert_not_null(f);
	fputs("original\n", f);
	fclose(f);
	cr_assert_eq(symlink(target, path), 0);
	nl_log_set_level(NL_LOG_WARN);
	env_set("NEMOLENS_LOG_PATH", path);
	env_set("OTEL_METRIC_EXPORT_INTERVAL", "abc");
	struct nl_config c;
	struct capture cap;
	capture_begin(&cap);
	nl_log_set_output(NL_LOG_TO_TERMINAL, NULL);
	load(&c);
	const char *out = capture_end(&cap);
	nl_config_free(&c);
	cr_assert_str_eq(out, "");
	char *text = read_all(target);
	cr_assert_str_eq(text, "original\n");
	free(text);
	unlink(path);
	unlink(target);
	rmdir(dir);
}

/* ---- the parsers ------------------------------------------------------------ */

Test(parse, bool_values)
{
	static const char *const yes[] = { "true", "TRUE", "True", "1", "yes", "on", "ON" };
	static const char *const no[] = { "false", "FALSE", "0", "no", "off", "Off" };
	static const char *const bad[] = { "", "2", "truex", "t", "nope", "-1", "true ", "00" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		bool b = false;
		cr_assert_eq(nl_parse_bool(yes[i], &b), 0, "%s", yes[i]);
		cr_assert(b, "%s", yes[i]);
	}
	for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
		bool b = true;
		cr_assert_eq(nl_parse_bool(no[i], &b), 0, "%s", no[i]);
		cr_assert_not(b, "%s", no[i]);
	}
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		bool b = true;
		cr_assert_eq(nl_parse_bool(bad[i], &b), -1, "\"%s\"", bad[i]);
		cr_assert(b, "out touched for \"%s\"", bad[i]);
		b = false;
		cr_assert_eq(nl_parse_bool(bad[i], &b), -1, "\"%s\"", bad[i]);
		cr_assert_not(b, "out touched for \"%s\"", bad[i]);
	}
}

Test(parse, ms_values)
{
	long v = -7;
	cr_assert_eq(nl_parse_ms("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(nl_parse_ms("250", &v), 0);
	cr_assert_eq(v, 250);
	cr_assert_eq(nl_parse_ms(" 42 ", &v), 0);
	cr_assert_eq(v, 42);
	cr_assert_eq(nl_parse_ms("3600000", &v), 0);
	cr_assert_eq(v, 3600000);
	static const char *const bad[] = { "", " ", "-1", "abc", "12abc", "1.5", "0x10", "1e3",
					   "99999999999999999999", "9223372036854775807",
					   "9223372036854775808", "18446744073709551617", "1 2" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		v = -7;
		cr_assert_eq(nl_parse_ms(bad[i], &v), -1, "\"%s\"", bad[i]);
		cr_assert_eq(v, -7, "out touched for \"%s\"", bad[i]);
	}
}

Test(parse, pid_values)
{
	long v = -7;
	cr_assert_eq(nl_parse_pid("1", &v), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(nl_parse_pid("4194304", &v), 0);
	cr_assert_eq(v, 4194304);
	cr_assert_eq(nl_parse_pid("2147483647", &v), 0);
	cr_assert_eq(v, 2147483647L);
	static const char *const bad[] = { "", "0", " 1", "1 ", "-1", "+1", "12abc", "2147483648",
					   "99999999999999999999" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		v = -7;
		cr_assert_eq(nl_parse_pid(bad[i], &v), -1, "\"%s\"", bad[i]);
		cr_assert_eq(v, -7, "out touched for \"%s\"", bad[i]);
	}
}

Test(parse, kv_list)
{
	struct nl_header h[4] = { 0 };
	cr_assert_eq(nl_parse_kv_list("", h, 4), 0);
	cr_assert_eq(nl_parse_kv_list("  ,  , ", h, 4), 0);
	cr_assert_eq(nl_parse_kv_list("a=1,,b=%3D%2c", h, 4), 2);
	cr_assert_str_eq(h[0].name, "a");
	cr_assert_str_eq(h[0].value, "1");
	cr_assert_str_eq(h[1].name, "b");
	cr_assert_str_eq(h[1].value, "=,");
	nl_free_kv_list(h, 2);
	cr_assert_null(h[0].name);
	cr_assert_null(h[1].value);

	/* max caps what is stored, the rest is dropped */
	cr_assert_eq(nl_parse_kv_list("a=1,b=2,c=3,d=4,e=5,f=6", h, 4), 4);
	cr_assert_str_eq(h[3].name, "d");
	nl_free_kv_list(h, 4);

	/* a value may contain '=' after the first */
	cr_assert_eq(nl_parse_kv_list("tok=a=b", h, 4), 1);
	cr_assert_str_eq(h[0].name, "tok");
	cr_assert_str_eq(h[0].value, "a=b");
	nl_free_kv_list(h, 1);

	/* UTF-8 passes through, raw or percent-encoded */
	cr_assert_eq(nl_parse_kv_list("name=caf\xc3\xa9,emoji=%F0%9F%98%80", h, 4), 2);
	cr_assert_str_eq(h[0].value, "caf\xc3\xa9");
	cr_assert_str_eq(h[1].value, "\xf0\x9f\x98\x80");
	nl_free_kv_list(h, 2);

	for (size_t i = 0; i < sizeof BAD_KV / sizeof *BAD_KV; i++) {
		memset(h, 0, sizeof h);
		cr_assert_eq(nl_parse_kv_list(BAD_KV[i], h, 4), -1, "\"%s\"", BAD_KV[i]);
		for (size_t k = 0; k < 4; k++)
			cr_assert_null(h[k].name, "\"%s\" left an entry behind", BAD_KV[i]);
	}
}

Test(parse, utf8_valid)
{
	cr_assert(nl_utf8_valid("", 0));
	cr_assert(nl_utf8_valid("plain ascii", 11));
	cr_assert(nl_utf8_valid("caf\xc3\xa9", 5));
	cr_assert(nl_utf8_valid("\xe2\x82\xac", 3));             /* U+20AC */
	cr_assert(nl_utf8_valid("\xf0\x9f\x98\x80", 4));         /* U+1F600 */
	cr_assert(nl_utf8_valid("\xf4\x8f\xbf\xbf", 4));         /* U+10FFFF */
	cr_assert(nl_utf8_valid("\xed\x9f\xbf", 3));             /* U+D7FF */
	cr_assert(nl_utf8_valid("a\0b", 3));                     /* n, not NUL, ends it */

	cr_assert_not(nl_utf8_valid("\xff", 1));
	cr_assert_not(nl_utf8_valid("\x80", 1));                 /* lone continuation */
	cr_assert_not(nl_utf8_valid("\xc3", 1));                 /* truncated */
	cr_assert_not(nl_utf8_valid("\xc3\xa9", 1));             /* truncated by n */
	cr_assert_not(nl_utf8_valid("\xe2\x82", 2));
	cr_assert_not(nl_utf8_valid("\xc3(", 2));                /* bad continuation */
	cr_assert_not(nl_utf8_valid("\xc0\x80", 2));             /* overlong NUL */
	cr_assert_not(nl_utf8_valid("\xc1\xbf", 2));             /* overlong */
	cr_assert_not(nl_utf8_valid("\xe0\x80\xaf", 3));         /* overlong '/' */
	cr_assert_not(nl_utf8_valid("\xf0\x8f\xbf\xbf", 4));     /* overlong */
	cr_assert_not(nl_utf8_valid("\xed\xa0\x80", 3));         /* U+D800 surrogate */
	cr_assert_not(nl_utf8_valid("\xed\xbf\xbf", 3));         /* U+DFFF surrogate */
	cr_assert_not(nl_utf8_valid("\xf4\x90\x80\x80", 4));     /* U+110000 */
	cr_assert_not(nl_utf8_valid("\xf5\x80\x80\x80", 4));
	cr_assert_not(nl_utf8_valid("\xf8\x88\x80\x80\x80", 5));
}

static void assert_sanitized(const char *in, const char *want)
{
	char *out = nl_utf8_sanitized_dup(in);
	cr_assert_not_null(out);
	cr_assert_str_eq(out, want, "sanitizing \"%s\"", in);
	cr_assert(nl_utf8_valid(out, strlen(out)));
	free(out);
}

Test(parse, utf8_sanitized_dup)
{
	assert_sanitized("", "");
	assert_sanitized("hello", "hello");
	assert_sanitized("caf\xc3\xa9", "caf\xc3\xa9");
	assert_sanitized("abc\xf0\x9f\x98\x80z", "abc\xf0\x9f\x98\x80z");
	assert_sanitized("svc\xffx", "svc?x");
	assert_sanitized("\x80\x80", "??");
	assert_sanitized("\xc0\x80", "??");
	assert_sanitized("\xed\xa0\x80", "???");
	assert_sanitized("end\xe2\x82", "end??");
	assert_sanitized("\xe2\x82\xac\xe2", "\xe2\x82\xac?");
	assert_sanitized("a\xc3(b", "a?(b");
}

static bool in_store(const struct nl_config *c, const char *s)
{
	return s && (uintptr_t)s >= (uintptr_t)c->store && (uintptr_t)s < (uintptr_t)c->store + sizeof c->store;
}

/* A process with the usual environment loads the shim without a malloc:
 * its configuration's strings are in the configuration itself. Longer ones
 * go to the heap, and both kinds read back and are freed (ASan checks the
 * frees). */
Test(config, strings_live_in_the_store_until_it_is_full)
{
	struct nl_config c;
	env_set("XDG_RUNTIME_DIR", "/run/user/1000");
	load(&c);
	const char *small[] = { c.endpoint, c.gym_rollout_route, c.gym_verify_route, c.server_name, c.server_type,
				c.runtime_dir };
	for (size_t i = 0; i < sizeof small / sizeof *small; i++)
		cr_assert(in_store(&c, small[i]), "string %zu (%s) is not in the store", i, small[i]);
	cr_assert_str_eq(c.server_name, "myprog");
	cr_assert_str_eq(c.runtime_dir, "/run/user/1000");
	nl_config_free(&c);

	static char big[3][300];
	for (int i = 0; i < 3; i++) {
		memset(big[i], 'a' + i, sizeof big[i] - 1);
		big[i][0] = '/';
	}
	env_set("NEMOLENS_HTTP_ROUTES", big[0]);
	env_set("NEMOLENS_GYM_ROLLOUT_ROUTE", big[1]);
	env_set("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318/");
	env_set("NEMOLENS_SERVER_NAME", big[2]);
	load(&c);
	cr_assert_str_eq(c.http_routes, big[0]);
	cr_assert_str_eq(c.gym_rollout_route, big[1]);
	cr_assert_str_eq(c.server_name, big[2]);
	cr_assert_str_eq(c.endpoint, "http://collector.example:4318/v1/metrics");
	cr_assert_str_eq(c.runtime_dir, "/run/user/1000");
	cr_assert_str_eq(c.gym_verify_route, "/verify");
	cr_assert(!in_store(&c, c.http_routes) && !in_store(&c, c.server_name), "too long for the store");
	cr_assert_leq(c.store_used, sizeof c.store);
	nl_config_free(&c);
}

/* NeMo Gym's orchestrator starts each server with its name and the global
 * configuration (YAML, as OmegaConf writes it). */
static const char GYM_YAML[] =
	"# written by the orchestrator\n"
	"config_paths:\n"
	"- a.yaml\n"
	"policy_model:\n"
	"  responses_api_models:\n"
	"    vllm_model:\n"
	"      entrypoint: app.py\n"
	"      host: 127.0.0.1\n"
	"\n"
	"math_verify:\n"
	"  # the type follows\n"
	"  'resources_servers':\n"
	"    math:\n"
	"      entrypoint: app.py\n"
	"simple_agent:\n"
	"  responses_api_agents:\n"
	"    simple_agent: {entrypoint: app.py}\n";

Test(config, gym_identity_from_the_orchestrators_variables)
{
	struct nl_config c;
	env_set("NEMO_GYM_CONFIG_PATH", "math_verify");
	env_set("NEMO_GYM_CONFIG_DICT", GYM_YAML);
	load(&c);
	cr_assert_str_eq(c.server_name, "math_verify");
	cr_assert_str_eq(c.server_type, "resources_servers");
	cr_assert_str_eq(c.service_name, "nemo-gym/math_verify");
	nl_config_free(&c);

	setup();
	env_set("NEMO_GYM_CONFIG_PATH", "policy_model");
	env_set("NEMO_GYM_CONFIG_DICT", GYM_YAML);
	env_set("OTEL_SERVICE_NAME", "rl-run");
	load(&c);
	cr_assert_str_eq(c.server_type, "responses_api_models");
	cr_assert_str_eq(c.service_name, "rl-run/policy_model");
	nl_config_free(&c);

	/* NEMOLENS_SERVER_NAME and _TYPE win; Gym's switch for the suffix. */
	setup();
	env_set("NEMO_GYM_CONFIG_PATH", "simple_agent");
	env_set("NEMO_GYM_CONFIG_DICT", GYM_YAML);
	env_set("NEMOLENS_SERVER_NAME", "mine");
	env_set("NEMOLENS_SERVER_TYPE", "kind");
	env_set("NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER", "false");
	env_set("OTEL_SERVICE_NAME", "svc");
	load(&c);
	cr_assert_str_eq(c.server_name, "mine");
	cr_assert_str_eq(c.server_type, "kind");
	cr_assert_str_eq(c.service_name, "svc");
	nl_config_free(&c);

	/* JSON is YAML too. */
	setup();
	env_set("NEMO_GYM_CONFIG_PATH", "judge");
	env_set("NEMO_GYM_CONFIG_DICT", " {\"x\": {\"judge\": {\"a\": 1}}, \"judge\" : {\"resources_servers\": {}}}");
	load(&c);
	cr_assert_str_eq(c.server_type, "resources_servers");
	nl_config_free(&c);
}

static char *gym_type_of(const char *config, const char *name)
{
	static char type[64];
	return nl_gym_server_type(config, name, type, sizeof type) == 0 ? type : NULL;
}

Test(parse, gym_server_type)
{
	cr_assert_str_eq(gym_type_of(GYM_YAML, "simple_agent"), "responses_api_agents");
	cr_assert_null(gym_type_of(GYM_YAML, "vllm_model"), "a key below the top is no server");
	cr_assert_null(gym_type_of(GYM_YAML, "config_paths"), "a list is no mapping of types");
	cr_assert_null(gym_type_of(GYM_YAML, "policy"), "a prefix of a name is not the name");
	cr_assert_null(gym_type_of("srv: {}\n", "srv"));
	cr_assert_null(gym_type_of("srv:\nother:\n  t:\n", "srv"));
	cr_assert_str_eq(gym_type_of("srv:\r\n  t:\r\n", "srv"), "t");
	cr_assert_str_eq(gym_type_of("\"srv\":\n  \"t\": {}\n", "srv"), "t");
	cr_assert_null(gym_type_of("srv:\n  \"t\\\"x\": 1\n", "srv"));
	cr_assert_null(gym_type_of("{\"srv\": 1}", "srv"));
	cr_assert_null(gym_type_of("{\"srv\": {\"unterminated", "srv"));
	cr_assert_null(gym_type_of("{\"srv\": {}}", "srv"));
	cr_assert_null(gym_type_of("{{{{", "srv"));
	cr_assert_null(gym_type_of("", "srv"));
	cr_assert_null(gym_type_of(GYM_YAML, ""));
	/* A type longer than its buffer is none. */
	char longer[200];
	snprintf(longer, sizeof longer, "srv:\n  %0100d:\n", 0);
	cr_assert_null(gym_type_of(longer, "srv"));
}

/* A configuration Gym did not write costs one warning; the server keeps its
 * name from NEMO_GYM_CONFIG_PATH, and the type is the default. (Each test
 * runs in a process of its own: a warning is once per process.) */
static void assert_one_warning_for(const char *dict)
{
	nl_log_set_level(NL_LOG_WARN);
	env_set("NEMO_GYM_CONFIG_PATH", "srv");
	env_set("NEMO_GYM_CONFIG_DICT", dict);
	struct capture cap;
	capture_begin(&cap);
	struct nl_config c;
	load(&c);
	const char *out = capture_end(&cap);
	cr_assert_eq(count_lines_starting(out, "nemolens: "), 1, "stderr was:\n%s", out);
	cr_assert_not_null(strstr(out, "NEMO_GYM_CONFIG_DICT"), "stderr was:\n%s", out);
	cr_assert_str_eq(c.server_name, "srv");
	cr_assert_str_eq(c.server_type, "process");
	nl_config_free(&c);
}

Test(config, gym_config_huge)
{
	size_t n = (2u << 20) + 1;
	char *huge = malloc(n);
	cr_assert_not_null(huge);
	memset(huge, 'a', n - 1);
	huge[n - 1] = '\0';
	memcpy(huge, "srv:\n  t:\n", 10);   /* in the first MiB, but the whole is too long */
	assert_one_warning_for(huge);
	free(huge);
}

Test(config, gym_config_unterminated) { assert_one_warning_for("{\"srv\": ["); }
Test(config, gym_config_no_mapping) { assert_one_warning_for("srv: [1, 2]\n"); }
Test(config, gym_config_binary) { assert_one_warning_for("\x01\x02\xff"); }

Test(config, gym_config_path_not_a_name)
{
	nl_log_set_level(NL_LOG_WARN);
	env_set("NEMO_GYM_CONFIG_PATH", "bad\nname");
	struct capture cap;
	capture_begin(&cap);
	struct nl_config c;
	load(&c);
	const char *out = capture_end(&cap);
	cr_assert_eq(count_lines_starting(out, "nemolens: "), 1, "stderr was:\n%s", out);
	cr_assert_str_eq(c.server_name, "myprog");
	cr_assert_null(c.service_name);
	nl_config_free(&c);
}
