/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run --print-config: the configuration as the shim in the program
 * will read it, one setting a line on stdout, credentials redacted, with
 * the warnings the shim would log about it on stderr.
 */
#include "printconfig.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "launcher.h"
#include "log.h"
#include "preload_env.h"

/* value with control characters escaped, so that every setting stays on
 * its line whatever the environment holds. */
static void put_escaped(const char *value)
{
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if (*p == '\n')
			fputs("\\n", stdout);
		else if (*p < 0x20 || *p == 0x7f)
			printf("\\x%02x", *p);
		else
			putchar(*p);
	}
}

static void put(const char *name, const char *value)
{
	printf("%-26s = ", name);
	put_escaped(value ? value : "(unset)");
	putchar('\n');
}

static void put_bool(const char *name, bool v) { put(name, v ? "true" : "false"); }

static void put_long(const char *name, long v)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%ld", v);
	put(name, buf);
}

/* Header values are credentials (Authorization, API keys): names only. */
static void put_list(const char *name, const struct nl_header *kv, size_t n, bool redact)
{
	printf("%-26s = ", name);
	if (!n)
		fputs("(none)", stdout);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputs(", ", stdout);
		put_escaped(kv[i].name);
		putchar('=');
		put_escaped(redact ? "<redacted>" : kv[i].value);
	}
	putchar('\n');
}

/* The endpoint with a password in its user info (http://user:pw@host/)
 * redacted. */
static void put_url(const char *name, const char *url)
{
	if (!url) {
		put(name, NULL);
		return;
	}
	const char *auth = strstr(url, "://");
	auth = auth ? auth + 3 : url;
	size_t auth_len = strcspn(auth, "/?#");
	const char *at = memchr(auth, '@', auth_len);
	const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
	if (!colon) {
		put(name, url);
		return;
	}
	char *shown = malloc(strlen(url) + 16);
	if (!shown) {
		put(name, "(redacted)");
		return;
	}
	sprintf(shown, "%.*s<redacted>%s", (int)(colon + 1 - url), url, at);
	put(name, shown);
	free(shown);
}

static const char *env_lookup(const char *name) { return getenv(name); }

/* Everything but NEMOLENS_LOG_LEVEL, for re-reading with warnings on. */
static const char *env_lookup_loud(const char *name)
{
	return strcmp(name, "NEMOLENS_LOG_LEVEL") == 0 ? NULL : getenv(name);
}

int print_config(const char *program)
{
	static const char *const exporters[] = { "otlp", "console", "none" };
	static const char *const levels[] = { "none", "error", "warn", "info", "debug" };
	/* The program's name as the shim sees it (the default server name). */
	const char *name = program ? strrchr(program, '/') : NULL;
	name = name ? name + 1 : program;

	struct nl_config cfg;
	nl_log_init();
	/* The warnings are the point here: on stderr, terminal or not. */
	nl_log_set_output(NL_LOG_TO_STDERR, NULL);
	nl_config_load(&cfg, env_lookup, name);
	if (cfg.log_level < NL_LOG_WARN) {
		/* NEMOLENS_LOG_LEVEL silenced the warnings, which are the point
		 * here: read once more without it, at warn. Keys not printed the
		 * first time are not marked as reported, so they print now. */
		struct nl_config again;
		nl_log_set_level(NL_LOG_WARN);
		nl_config_load(&again, env_lookup_loud, name);
		nl_config_free(&again);
	}
	fflush(stderr);

	const char *temporality = !cfg.delta_histograms ? "cumulative"
				  : cfg.delta_counters  ? "delta"
							: "lowmemory";
	put_bool("enabled", cfg.enabled);
	put_bool("metrics_enabled", cfg.metrics_enabled);
	put("exporter", exporters[cfg.exporter]);
	put("protocol", cfg.grpc ? "grpc" : "http/protobuf");
	put_url("endpoint", cfg.endpoint);
	put_list("headers", cfg.headers, cfg.n_headers, true);
	put("compression", cfg.gzip ? "gzip" : "none");
	put("certificate", cfg.ca_file);
	put("client_key", cfg.client_key);
	put("client_certificate", cfg.client_cert);
	put_long("export_interval_ms", cfg.export_interval_ms);
	put_long("export_timeout_ms", cfg.export_timeout_ms);
	put_long("otlp_timeout_ms", cfg.otlp_timeout_ms);
	put_long("exit_timeout_ms", cfg.exit_timeout_ms);
	put("temporality", temporality);
	put("service_name", cfg.service_name);
	put("server_name", cfg.server_name);
	put("server_type", cfg.server_type);
	put_list("resource_attributes", cfg.resource, cfg.n_resource, false);
	put("destinations", cfg.destinations);
	put_bool("memory_profiling", cfg.memory_profiling);
	put_bool("process_metrics", cfg.process_metrics);
	put_long("memory_sample_interval_ms", cfg.memory_interval_ms);
	put_long("cardinality_limit", (long)cfg.cardinality_limit);
	put("console_path", cfg.console_path ? cfg.console_path : "(stderr)");
	put("log_level", levels[cfg.log_level]);
	static const char *const unmatched[] = { "template", "path", "wildcard", "unset" };
	put("http", cfg.http_server && cfg.http_client ? "true" : cfg.http_server ? "server"
						     : cfg.http_client ? "client" : "false");
	put("http_routes", cfg.http_routes);
	put("http_route_unmatched", unmatched[cfg.http_route_unmatched & 3]);
	put_long("http_route_limit", cfg.http_route_cap);
	put_bool("http_semconv_dup", cfg.http_semconv_dup);
	put("http_known_methods", cfg.http_known_methods);
	put_bool("gym_endpoints", cfg.gym_endpoints);
	put("gym_rollout_route", cfg.gym_rollout_route);
	put("gym_verify_route", cfg.gym_verify_route);

	char why[WHY_MAX];
	char *shim = find_shim(why, sizeof why);
	put("preload", shim ? shim : why);
	if (shim) {
		char *list = preload_list(shim, getenv("LD_PRELOAD"));
		put("LD_PRELOAD", list);
		free(list);
	}
	free(shim);
	nl_config_free(&cfg);
	return fflush(stdout) == 0 ? 0 : EXIT_LAUNCHER;
}
