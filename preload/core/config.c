/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "gymconfig.h"
#include "route.h"
#include "loadpath.h"
#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define DEFAULT_ENDPOINT "http://localhost:4318/v1/metrics"
#define DEFAULT_GRPC_ENDPOINT "http://localhost:4317"
#define MAX_MS 2147483647L   /* the OpenTelemetry specification's integer range */

/* ---- value parsers ------------------------------------------------------ */

NL_LOAD_PATH int nl_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "1", "yes", "on" };
	static const char *const no[] = { "false", "0", "no", "off" };
	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/* Decimal digits at *p, at most max: *out, and *p moved past them. By
 * hand, not strtol or isdigit: every process under the shim parses a pid
 * at load (NL_ENV_OUTERMOST), and their code and tables are pages of libc
 * that nothing else there touches. */
NL_LOAD_PATH static int parse_digits(const char **p, long max, long *out)
{
	const char *s = *p;
	long v = 0;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (*s - '0');
		if (v > max)
			return -1;
	}
	*p = s;
	*out = v;
	return 0;
}

NL_LOAD_PATH int nl_parse_ms(const char *s, long *out)
{
	long v;
	while (*s == ' ')
		s++;
	if (parse_digits(&s, MAX_MS, &v) != 0)
		return -1;
	while (*s == ' ')
		s++;
	if (*s)
		return -1;
	*out = v;
	return 0;
}

NL_LOAD_PATH int nl_parse_pid(const char *s, long *out)
{
	long v;
	if (parse_digits(&s, 2147483647L, &v) != 0 || *s || v == 0)
		return -1;
	*out = v;
	return 0;
}

/* Fractional seconds ("2.5") to milliseconds, for NeMo Gym's *_SECONDS variables. */
NL_LOAD_PATH static int parse_seconds_as_ms(const char *s, long *out, long min_ms)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	while (*end == ' ')
		end++;
	if (errno || end == s || *end || !(v > 0) || v * 1000 > (double)MAX_MS)
		return -1;
	long ms = (long)(v * 1000 + 0.5);
	if (ms < min_ms)
		return -1;
	*out = ms;
	return 0;
}

NL_LOAD_PATH static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decodes [s, s+n) with surrounding spaces trimmed. NULL when malformed. */
NL_LOAD_PATH static char *decode_part(const char *s, size_t n)
{
	while (n && *s == ' ') {
		s++;
		n--;
	}
	while (n && s[n - 1] == ' ')
		n--;
	char *out = malloc(n + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] != '%') {
			out[o++] = s[i];
			continue;
		}
		int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
		if (hi < 0 || lo < 0) {
			free(out);
			return NULL;
		}
		out[o++] = (char)(hi * 16 + lo);
		i += 2;
	}
	out[o] = 0;
	if (!nl_utf8_valid(out, o) || memchr(out, 0, o)) {
		free(out);
		return NULL;
	}
	return out;
}

NL_LOAD_PATH void nl_free_kv_list(struct nl_header *list, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(list[i].name);
		free(list[i].value);
		list[i].name = list[i].value = NULL;
	}
}

NL_LOAD_PATH int nl_parse_kv_list(const char *s, struct nl_header *out, size_t max)
{
	size_t n = 0;
	const char *p = s;
	while (*p) {
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		bool blank = strspn(p, " ") >= (size_t)(end - p);
		if (!blank) {
			char *k = eq ? decode_part(p, (size_t)(eq - p)) : NULL;
			char *v = eq ? decode_part(eq + 1, (size_t)(end - eq - 1)) : NULL;
			if (!k || !v || !*k) {
				free(k);
				free(v);
				nl_free_kv_list(out, n);
				return -1;
			}
			if (n < max) {
				out[n].name = k;
				out[n].value = v;
				n++;
			} else {
				free(k);
				free(v);
			}
		}
		p = *end ? end + 1 : end;
	}
	return (int)n;
}

/* ---- reading the environment -------------------------------------------- */

struct env {
	nl_getenv_fn get;
};

/* Empty values count as unset, as the OpenTelemetry specification says. */
NL_LOAD_PATH static const char *env_get(const struct env *e, const char *name)
{
	const char *v = e->get(name);
	return v && *v ? v : NULL;
}

NL_LOAD_PATH static void invalid(const char *name, const char *value, const char *expect)
{
	char key[96];
	snprintf(key, sizeof key, "env.%s", name);
	nl_warn_once(key, "ignoring %s=\"%.40s%s\": expected %s", name, value,
		     strlen(value) > 40 ? "..." : "", expect);
}

/* A whole number from lo to hi, from variable name; def when it is unset,
 * and (with a warning naming what is expected) when it is not one. */
NL_LOAD_PATH static long env_range(const struct env *e, const char *name, long lo, long hi, long def,
				   const char *expect)
{
	const char *v = env_get(e, name);
	long n;
	if (!v)
		return def;
	if (nl_parse_ms(v, &n) == 0 && n >= lo && n <= hi)
		return n;
	invalid(name, v, expect);
	return def;
}

/* Reads the first of names[] that is set; returns whether one was valid.
 * The specification allows only "true" and "false" (any case) for OTEL_*
 * booleans; the shim's and NeMo Gym's own also take 1/0, yes/no, on/off. */
NL_LOAD_PATH int nl_parse_flag(const char *name, const char *s, bool *out)
{
	if (strncmp(name, "OTEL_", 5) == 0 && strcasecmp(s, "true") != 0 && strcasecmp(s, "false") != 0)
		return -1;
	return nl_parse_bool(s, out);
}

NL_LOAD_PATH static bool env_bool(const struct env *e, const char *const *names, bool *out)
{
	for (; *names; names++) {
		const char *v = env_get(e, *names);
		if (!v)
			continue;
		if (nl_parse_flag(*names, v, out) == 0)
			return true;
		invalid(*names, v, "true or false");
	}
	return false;
}

NL_LOAD_PATH static void env_ms(const struct env *e, const char *name, long *out, long min)
{
	const char *v = env_get(e, name);
	long ms;
	if (!v)
		return;
	if (nl_parse_ms(v, &ms) == 0 && ms >= min)
		*out = ms;
	else
		invalid(name, v, "a whole number of milliseconds");
}

/* ---- the configuration's strings ---------------------------------------- */

/* A copy of a (na bytes) followed by the string b, in cfg's store while it
 * has room, else on the heap. NULL only when the heap has none. */
NL_LOAD_PATH static char *keep(struct nl_config *cfg, const char *a, size_t na, const char *b)
{
	size_t nb = strlen(b);
	size_t need = na + nb + 1;
	char *out;
	if (need <= sizeof cfg->store - cfg->store_used) {
		out = cfg->store + cfg->store_used;
		cfg->store_used += need;
	} else if (!(out = malloc(need))) {
		return NULL;
	}
	memcpy(out, a, na);
	memcpy(out + na, b, nb + 1);
	return out;
}

NL_LOAD_PATH static char *keep_str(struct nl_config *cfg, const char *s)
{
	return keep(cfg, s, strlen(s), "");
}

/* Every string of cfg goes here: those in the store stay. */
NL_LOAD_PATH static void drop(struct nl_config *cfg, char *s)
{
	uintptr_t p = (uintptr_t)s, store = (uintptr_t)cfg->store;
	if (p - store >= sizeof cfg->store)
		free(s);
}

/* The table of a kv list whose variable is set: on the heap, as its
 * strings are, so that the usual environment costs nothing. */
NL_LOAD_PATH static struct nl_header *kv_table(size_t max)
{
	return calloc(max, sizeof(struct nl_header));
}

NL_LOAD_PATH static char *env_keep(struct nl_config *cfg, const struct env *e, const char *name)
{
	const char *v = env_get(e, name);
	return v ? keep_str(cfg, v) : NULL;
}

/* The METRICS_ specific variable wins over the generic one; name receives
 * the one whose value is returned, for a warning about it. */
#define OTLP_NAME_MAX 80
NL_LOAD_PATH static const char *env_otlp(const struct env *e, const char *suffix, char name[OTLP_NAME_MAX])
{
	/* Joined by hand, not by snprintf: every process reads these at load. */
	static const char metrics[] = "OTEL_EXPORTER_OTLP_METRICS_", any[] = "OTEL_EXPORTER_OTLP_";
	size_t n = strnlen(suffix, OTLP_NAME_MAX - sizeof metrics);
	memcpy(name, metrics, sizeof metrics - 1);
	memcpy(name + sizeof metrics - 1, suffix, n);
	name[sizeof metrics - 1 + n] = 0;
	const char *v = env_get(e, name);
	if (!v) {
		memcpy(name, any, sizeof any - 1);
		memcpy(name + sizeof any - 1, suffix, n);
		name[sizeof any - 1 + n] = 0;
		v = env_get(e, name);
	}
	return v;
}

/* s starts with lower, in any case; by hand, as nl_parse_pid. */
NL_LOAD_PATH static bool starts_nocase(const char *s, const char *lower)
{
	for (; *lower; s++, lower++)
		if ((*s >= 'A' && *s <= 'Z' ? *s + ('a' - 'A') : *s) != *lower)
			return false;
	return true;
}

NL_LOAD_PATH static bool is_http_url(const char *s)
{
	return starts_nocase(s, "http://") || starts_nocase(s, "https://");
}

/* OTLP/gRPC names a server, not a path: scheme://host:port, anything after
 * the authority ignored, the call's path added here. A gRPC endpoint may
 * also come without a scheme (host:port): then OTEL_EXPORTER_OTLP_INSECURE
 * says whether it is plaintext, and it is TLS unless it says true. */
#define GRPC_EXPORT_PATH "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

static __attribute__((noinline)) bool keep_grpc_endpoint(struct nl_config *cfg, const char *v, bool insecure)
{
	const char *scheme = "";
	const char *auth = v;
	if (is_http_url(v))
		auth = strstr(v, "://") + 3;
	else if (strstr(v, "://") || !*v)
		return false;
	else
		scheme = insecure ? "http://" : "https://";
	size_t n = strcspn(auth, "/?#");
	if (n == 0)
		return false;
	/* scheme + authority + path, joined by hand as below. */
	size_t ns = strlen(scheme), nv = (size_t)(auth - v);
	char *url = malloc(ns + nv + n + sizeof GRPC_EXPORT_PATH);
	if (!url)
		return true;  /* out of memory: no endpoint, so no export, and no warning */
	memcpy(url, scheme, ns);
	memcpy(url + ns, v, nv + n);
	memcpy(url + ns + nv + n, GRPC_EXPORT_PATH, sizeof GRPC_EXPORT_PATH);
	cfg->endpoint = keep_str(cfg, url);
	free(url);
	return true;
}

static __attribute__((noinline)) void load_grpc_endpoint(struct nl_config *cfg, const struct env *e)
{
	char which[OTLP_NAME_MAX];
	bool insecure = false;
	const char *v = env_otlp(e, "INSECURE", which);
	if (v && strcasecmp(v, "true") == 0)
		insecure = true;
	else if (v && strcasecmp(v, "false") != 0)
		invalid(which, v, "true or false");
	static const char *const names[] = { "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
					     NULL };
	for (const char *const *name = names; *name; name++) {
		if (!(v = env_get(e, *name)))
			continue;
		if (keep_grpc_endpoint(cfg, v, insecure))
			return;
		invalid(*name, v, "http://host:port, https://host:port or host:port");
	}
	cfg->endpoint = keep_str(cfg, DEFAULT_GRPC_ENDPOINT GRPC_EXPORT_PATH);
}

NL_LOAD_PATH static void load_endpoint(struct nl_config *cfg, const struct env *e)
{
	if (cfg->grpc) {
		load_grpc_endpoint(cfg, e);
		return;
	}
	const char *v = env_get(e, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
	if (v) {
		if (is_http_url(v)) {
			cfg->endpoint = keep_str(cfg, v);
			return;
		}
		invalid("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", v, "an http:// or https:// URL");
	}
	v = env_get(e, "OTEL_EXPORTER_OTLP_ENDPOINT");
	if (v) {
		if (is_http_url(v)) {
			/* Joined by hand, not by sprintf: every process reads
			 * this at load, and printf's code is pages of libc that
			 * nothing else at load touches. */
			size_t n = strlen(v);
			if (v[n - 1] == '/')
				n--;
			cfg->endpoint = keep(cfg, v, n, "/v1/metrics");
			return;
		}
		invalid("OTEL_EXPORTER_OTLP_ENDPOINT", v, "an http:// or https:// URL");
	}
	cfg->endpoint = keep_str(cfg, DEFAULT_ENDPOINT);
}

NL_LOAD_PATH static void load_exporter(struct nl_config *cfg, const struct env *e)
{
	static const char *const names[] = { "OTEL_METRICS_EXPORTER", "NEMO_GYM_OTEL_EXPORTER", NULL };
	static const char *const push[] = { "otlp", "console", "none" };   /* in enum nl_exporter_kind's order */
	for (const char *const *n = names; *n; n++) {
		const char *v = env_get(e, *n);
		if (!v)
			continue;
		/* A comma-separated list: the first push exporter we know wins,
		 * prometheus goes beside it; names we do not know are passed. */
		char buf[128];
		snprintf(buf, sizeof buf, "%s", v);
		bool known = false, pushed = false;
		for (char *save, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
			if (strcasecmp(tok, "prometheus") == 0) {
				cfg->prometheus = known = true;
				continue;
			}
			for (size_t k = 0; k < sizeof push / sizeof *push && !pushed; k++)
				if (strcasecmp(tok, push[k]) == 0) {
					cfg->exporter = (enum nl_exporter_kind)k;
					pushed = known = true;
				}
		}
		if (known) {
			if (!pushed)
				cfg->exporter = NL_EXPORTER_NONE;
			break;
		}
		invalid(*n, v, "otlp, prometheus, console or none");
	}
	if (!cfg->prometheus)
		return;
	const char *host = env_get(e, "OTEL_EXPORTER_PROMETHEUS_HOST");
	if (host)
		cfg->prometheus_host = keep_str(cfg, host);
	cfg->prometheus_port = env_range(e, "OTEL_EXPORTER_PROMETHEUS_PORT", 1, 65535, NL_PROMETHEUS_PORT,
					 "a port number from 1 to 65535");
}

NL_LOAD_PATH static void load_otlp(struct nl_config *cfg, const struct env *e)
{
	char which[OTLP_NAME_MAX];
	const char *v;

	/* The protocol first: it decides what the endpoint means. */
	if ((v = env_otlp(e, "PROTOCOL", which))) {
		if (strcmp(v, "grpc") == 0) {
			cfg->grpc = true;
		} else if (strcmp(v, "http/protobuf") != 0) {
			char key[96];
			snprintf(key, sizeof key, "env.%s", which);
			nl_warn_once(key, "%s=%s is not supported; using http/protobuf", which, v);
		}
	}
	load_endpoint(cfg, e);

	if ((v = env_otlp(e, "HEADERS", which)) && (cfg->headers = kv_table(NL_MAX_HEADERS))) {
		int n = nl_parse_kv_list(v, cfg->headers, NL_MAX_HEADERS);
		if (n < 0)
			invalid(which, v, "comma-separated key=value pairs (percent-encoded)");
		else
			cfg->n_headers = (size_t)n;
	}
	if ((v = env_otlp(e, "TIMEOUT", which))) {
		long ms;
		if (nl_parse_ms(v, &ms) == 0 && ms > 0)
			cfg->otlp_timeout_ms = ms;
		else
			invalid(which, v, "a positive number of milliseconds");
	}
	if ((v = env_otlp(e, "COMPRESSION", which))) {
		if (strcasecmp(v, "gzip") == 0)
			cfg->gzip = true;
		else if (strcasecmp(v, "none") == 0)
			cfg->gzip = false;
		else
			invalid(which, v, "gzip or none");
	}
	if ((v = env_otlp(e, "CERTIFICATE", which)))
		cfg->ca_file = keep_str(cfg, v);
	if ((v = env_otlp(e, "CLIENT_KEY", which)))
		cfg->client_key = keep_str(cfg, v);
	if ((v = env_otlp(e, "CLIENT_CERTIFICATE", which)))
		cfg->client_cert = keep_str(cfg, v);

	v = env_get(e, "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE");
	if (v) {
		if (strcasecmp(v, "cumulative") == 0) {
			cfg->delta_counters = cfg->delta_histograms = false;
		} else if (strcasecmp(v, "delta") == 0) {
			cfg->delta_counters = cfg->delta_histograms = true;
		} else if (strcasecmp(v, "lowmemory") == 0) {
			/* The connection counter is an observable counter: cumulative under lowmemory. */
			cfg->delta_counters = false;
			cfg->delta_histograms = true;
		} else {
			invalid("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", v,
				"cumulative, delta or lowmemory");
		}
	}
}

NL_LOAD_PATH static void load_log_level(struct nl_config *cfg, const struct env *e)
{
	static const char *const names[] = { "none", "error", "warn", "info", "debug" };
	const char *v = env_get(e, "NEMOLENS_LOG_LEVEL");
	if (!v)
		return;
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		if (strcasecmp(v, names[i]) == 0) {
			cfg->log_level = (enum nl_log_level)i;
			nl_log_set_level(cfg->log_level);
			return;
		}
	}
	if (strcasecmp(v, "warning") == 0 || strcasecmp(v, "off") == 0) {
		cfg->log_level = strcasecmp(v, "off") == 0 ? NL_LOG_NONE : NL_LOG_WARN;
		nl_log_set_level(cfg->log_level);
		return;
	}
	invalid("NEMOLENS_LOG_LEVEL", v, "none, error, warn, info or debug");
}

/* A counter that differs at every call and on every host: the time stamp
 * counter where there is one. No system call, no page of libc. */
NL_LOAD_PATH static uint64_t cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

/* nemo.run.id as NeMo Gym finds it: NEMO_GYM_OTEL_RUN_ID, else
 * SLURM_JOB_ID. Else the id the tree's outermost process made, which its
 * descendants find in NL_ENV_RUN_ID, or which this process makes when it is
 * that one (the runtime then sets the variable): 12 hex digits, as Gym's
 * own, from the time stamp counter, the pid and where the stack lies. */
NL_LOAD_PATH static void load_run_id(struct nl_config *cfg, const struct env *e)
{
	const char *v = env_get(e, "NEMO_GYM_OTEL_RUN_ID");
	if (!v || !*v)
		v = env_get(e, "SLURM_JOB_ID");
	if (!v || !*v)
		v = env_get(e, NL_ENV_RUN_ID);
	if (v && *v) {
		if ((cfg->run_id = keep_str(cfg, v)))
			nl_utf8_sanitize(cfg->run_id);
		return;
	}
	if (!cfg->outermost)
		return;
	uint64_t x = cycles() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&x;
	/* splitmix64's finalizer: every input bit reaches every output bit. */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	char id[13];
	for (int i = 0; i < 12; i++)
		id[i] = "0123456789abcdef"[(x >> (4 * i)) & 15];
	id[12] = 0;
	cfg->run_id = keep_str(cfg, id);
	cfg->run_id_made = cfg->run_id != NULL;
}

/* Where warnings go and whether this process is the outermost shim process:
 * decided before any warning, and the level as well, so that the warnings
 * about these variables themselves go where the valid ones say. */
NL_LOAD_PATH static void load_log_output(struct nl_config *cfg, const struct env *e)
{
	const char *outer = env_get(e, NL_ENV_OUTERMOST);
	long pid;
	cfg->outermost = !outer || (nl_parse_pid(outer, &pid) == 0 && pid == (long)getpid());
	nl_log_set_outermost(cfg->outermost);

	const char *v = env_get(e, "NEMOLENS_LOG_PATH");
	bool bad = false;
	if (v) {
		if (strcmp(v, "stderr") == 0)
			bad = nl_log_set_output(NL_LOG_TO_STDERR, NULL) != 0;
		else
			bad = nl_log_set_output(NL_LOG_TO_FILE, v) != 0;
		if (!bad)
			cfg->log_path = keep_str(cfg, v);
	}
	load_log_level(cfg, e);
	if (bad)
		invalid("NEMOLENS_LOG_PATH", v, "stderr or an absolute path");
}

NL_LOAD_PATH static void load_resource(struct nl_config *cfg, const struct env *e)
{
	const char *v = env_get(e, "OTEL_RESOURCE_ATTRIBUTES");
	if (v && (cfg->resource = kv_table(NL_MAX_RESOURCE_ATTRS))) {
		int n = nl_parse_kv_list(v, cfg->resource, NL_MAX_RESOURCE_ATTRS);
		if (n < 0)
			invalid("OTEL_RESOURCE_ATTRIBUTES", v, "comma-separated key=value pairs (percent-encoded)");
		else
			cfg->n_resource = (size_t)n;
	}

	const char *service = env_get(e, "OTEL_SERVICE_NAME");
	if (!service)
		for (size_t i = 0; i < cfg->n_resource; i++)
			if (strcmp(cfg->resource[i].name, "service.name") == 0 && cfg->resource[i].value[0])
				service = cfg->resource[i].value;
	if (service && (cfg->service_name = keep_str(cfg, service)))
		nl_utf8_sanitize(cfg->service_name);
}

/* NEMOLENS_HTTP: on (both sides), server, client, or off. */
NL_LOAD_PATH static void load_http(struct nl_config *cfg, const struct env *e)
{
	cfg->http_server = cfg->http_client = true;
	const char *v = env_get(e, "NEMOLENS_HTTP");
	bool on;
	if (v) {
		if (strcasecmp(v, "server") == 0)
			cfg->http_client = false;
		else if (strcasecmp(v, "client") == 0)
			cfg->http_server = false;
		else if (nl_parse_bool(v, &on) == 0)
			cfg->http_server = cfg->http_client = on;
		else
			invalid("NEMOLENS_HTTP", v, "true, false, server or client");
	}
	cfg->http_routes = env_keep(cfg, e, "NEMOLENS_HTTP_ROUTES");
	cfg->http_route_unmatched = NL_ROUTE_TEMPLATE;
	if ((v = env_get(e, "NEMOLENS_HTTP_ROUTE_UNMATCHED"))) {
		enum nl_route_unmatched mode;
		if (nl_route_parse_mode(v, &mode) == 0)
			cfg->http_route_unmatched = (int)mode;
		else
			invalid("NEMOLENS_HTTP_ROUTE_UNMATCHED", v, "template, path, wildcard or unset");
	}
	cfg->http_route_cap = env_range(e, "NEMOLENS_HTTP_ROUTE_LIMIT", 16, 4096, 256, "a number from 16 to 4096");
	cfg->http_route_segment_limit = env_range(e, "NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT", 0, NL_ROUTE_SEGMENT_LIMIT_MAX,
						  NL_ROUTE_SEGMENT_LIMIT_DEFAULT, "a number from 0 to 100");
	/* As OpenTelemetry's Python instrumentations read it: a comma-separated
	 * list in which http/dup asks for both the old and the stable names. */
	if ((v = env_get(e, "OTEL_SEMCONV_STABILITY_OPT_IN"))) {
		for (const char *p = v; *p;) {
			size_t n = strcspn(p, ",");
			while (n && p[n - 1] == ' ')
				n--;
			while (*p == ' ' && n)
				p++, n--;
			if (n == 8 && strncmp(p, "http/dup", 8) == 0)
				cfg->http_semconv_dup = true;
			else if (n == 4 && strncmp(p, "http", 4) == 0)
				cfg->http_semconv_stable = true;
			p += strcspn(p, ",");
			if (*p == ',')
				p++;
		}
	}
	if (cfg->http_semconv_dup)
		cfg->http_semconv_stable = false;       /* http/dup wins, as OpenTelemetry has it */
	cfg->http_server_name_limit =
		env_range(e, "NEMOLENS_HTTP_SERVER_NAME_LIMIT", 1, 250, 64, "a number from 1 to 250");
	cfg->http_known_methods = env_keep(cfg, e, "OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS");
	static const char *const gym[] = { "NEMOLENS_GYM_ENDPOINTS", NULL };
	cfg->gym_endpoints = true;
	if (env_bool(e, gym, &on))
		cfg->gym_endpoints = on;
	v = env_get(e, "NEMOLENS_GYM_ROLLOUT_ROUTE");
	cfg->gym_rollout_route = keep_str(cfg, v && v[0] == '/' ? v : "/run");
	if (v && v[0] != '/')
		invalid("NEMOLENS_GYM_ROLLOUT_ROUTE", v, "a route starting with /");
	v = env_get(e, "NEMOLENS_GYM_VERIFY_ROUTE");
	cfg->gym_verify_route = keep_str(cfg, v && v[0] == '/' ? v : "/verify");
	if (v && v[0] != '/')
		invalid("NEMOLENS_GYM_VERIFY_ROUTE", v, "a route starting with /");
	static const char *const genai[] = { "NEMOLENS_GENAI", NULL };
	cfg->genai = true;
	if (env_bool(e, genai, &on))
		cfg->genai = on;
	cfg->genai_paths = env_keep(cfg, e, "NEMOLENS_GENAI_PATHS");
	if ((cfg->genai_provider = env_keep(cfg, e, "NEMOLENS_GENAI_PROVIDER")))
		nl_utf8_sanitize(cfg->genai_provider);
	static const char *const sites[] = { "NEMOLENS_CALL_SITES", NULL };
	cfg->call_sites = true;
	if (env_bool(e, sites, &on))
		cfg->call_sites = on;
	cfg->call_sites_limit = env_range(e, "NEMOLENS_CALL_SITES_LIMIT", 1, 250, 64, "a number from 1 to 250");
	if ((cfg->call_sites_skip = env_keep(cfg, e, "NEMOLENS_CALL_SITES_SKIP")))
		nl_utf8_sanitize(cfg->call_sites_skip);
}

/* NEMOLENS_ADOPT and the leftovers' age limit (docs/export.md). */
NL_LOAD_PATH static void load_adopt(struct nl_config *cfg, const struct env *e)
{
	static const char *const modes[] = { "own", "fold", "off" };
	cfg->adopt = NL_ADOPT_OWN;
	const char *v = env_get(e, "NEMOLENS_ADOPT");
	if (v) {
		size_t i = 0;
		while (i < 3 && strcasecmp(v, modes[i]) != 0)
			i++;
		if (i < 3)
			cfg->adopt = (enum nl_adopt_mode)i;
		else
			invalid("NEMOLENS_ADOPT", v, "own, fold or off");
	}
	cfg->leftover_max_age_s = env_range(e, "NEMOLENS_LEFTOVER_MAX_AGE_S", 1, 30L * 86400, 86400,
					    "seconds from 1 to 2592000 (30 days)");
	cfg->runtime_dir = env_keep(cfg, e, "XDG_RUNTIME_DIR");
}

#define GYM_NAME_MAX 256
#define GYM_TYPE_MAX 64

/* A server started by NeMo Gym's orchestrator: NEMO_GYM_CONFIG_PATH is its
 * name (returned, or NULL when it is not one), its type the first key under
 * that name in NEMO_GYM_CONFIG_DICT (gym_type, empty when not found), and,
 * as Gym names it, service.name is "<OTEL_SERVICE_NAME>/<name>" unless
 * NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER is false. Out of line: only Gym's
 * servers pay for it. */
static __attribute__((noinline)) const char *load_gym(struct nl_config *cfg, const struct env *e, const char *name,
						      char gym_type[GYM_TYPE_MAX])
{
	static const char *const per_server[] = { "NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER", NULL };
	gym_type[0] = '\0';
	size_t n = strnlen(name, GYM_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) {
			n = GYM_NAME_MAX;   /* refused below; and no byte past the name is read */
			break;
		}
	}
	if (n >= GYM_NAME_MAX) {
		invalid("NEMO_GYM_CONFIG_PATH", name, "a server name (at most 255 characters)");
		return NULL;
	}
	const char *dict = env_get(e, "NEMO_GYM_CONFIG_DICT");
	int r = dict ? nl_gym_server_type(dict, name, gym_type, GYM_TYPE_MAX) : -1;
	if (r == -2)
		nl_warn_once("env.NEMO_GYM_CONFIG_DICT", "NEMO_GYM_CONFIG_DICT is longer than 1 MiB: "
			     "the server type of %.60s is not read from it", name);
	else if (dict && r != 0)
		nl_warn_once("env.NEMO_GYM_CONFIG_DICT", "NEMO_GYM_CONFIG_DICT has no server type for %.60s", name);
	bool suffix = true;
	env_bool(e, per_server, &suffix);
	if (suffix) {
		char service[512];
		const char *group = cfg->service_name ? cfg->service_name : "nemo-gym";
		if (snprintf(service, sizeof service, "%s/%s", group, name) < (int)sizeof service) {
			char *s = keep_str(cfg, service);
			if (s) {
				nl_utf8_sanitize(s);
				drop(cfg, cfg->service_name);
				cfg->service_name = s;
			}
		}
	}
	return name;
}

NL_LOAD_PATH void nl_config_load(struct nl_config *cfg, nl_getenv_fn get, const char *program_name)
{
	struct env e = { get };
	static const char *const enabled[] = { "NEMOLENS_ENABLED", "NEMO_GYM_OTEL_ENABLED", NULL };
	static const char *const metrics[] = { "NEMOLENS_METRICS_ENABLED", "NEMO_GYM_OTEL_METRICS_ENABLED", NULL };
	static const char *const memory[] = { "NEMOLENS_MEMORY_PROFILING",
					      "NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED", NULL };
	static const char *const sdk_disabled[] = { "OTEL_SDK_DISABLED", NULL };

	memset(cfg, 0, sizeof *cfg);
	cfg->enabled = true;
	cfg->metrics_enabled = true;
	cfg->exporter = NL_EXPORTER_OTLP;
	cfg->prometheus_port = NL_PROMETHEUS_PORT;
	cfg->export_interval_ms = 10000;
	cfg->export_timeout_ms = 30000;
	cfg->otlp_timeout_ms = 10000;
	cfg->exit_timeout_ms = 500;
	cfg->memory_interval_ms = 1000;
	cfg->cardinality_limit = 2000;
	cfg->log_level = NL_LOG_WARN;

	load_log_output(cfg, &e);   /* first, so it governs the warnings below */

	bool disabled = false;
	if (env_bool(&e, sdk_disabled, &disabled) && disabled)
		cfg->enabled = false;
	bool on;
	if (env_bool(&e, enabled, &on) && !on)
		cfg->enabled = false;
	if (env_bool(&e, metrics, &on))
		cfg->metrics_enabled = on;
	if (env_bool(&e, memory, &on))
		cfg->memory_profiling = on;
	static const char *const process[] = { "NEMOLENS_PROCESS_METRICS", NULL };
	cfg->process_metrics = true;
	if (env_bool(&e, process, &on))
		cfg->process_metrics = on;
	static const char *const crash[] = { "NEMOLENS_CRASH_REPORT", NULL };
	cfg->crash_report = true;
	if (env_bool(&e, crash, &on))
		cfg->crash_report = on;

	load_exporter(cfg, &e);
	env_ms(&e, "OTEL_METRIC_EXPORT_INTERVAL", &cfg->export_interval_ms, 1);
	env_ms(&e, "OTEL_METRIC_EXPORT_TIMEOUT", &cfg->export_timeout_ms, 1);
	env_ms(&e, "NEMOLENS_EXIT_TIMEOUT_MS", &cfg->exit_timeout_ms, 0);
	if (cfg->exit_timeout_ms > 10000) {
		nl_warn_once("env.NEMOLENS_EXIT_TIMEOUT_MS", "NEMOLENS_EXIT_TIMEOUT_MS capped at 10000");
		cfg->exit_timeout_ms = 10000;
	}
	load_otlp(cfg, &e);

	const char *v = env_get(&e, "NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS");
	if (v && parse_seconds_as_ms(v, &cfg->memory_interval_ms, 10) != 0)
		invalid("NEMO_GYM_OTEL_MEMORY_PROFILING_INTERVAL_SECONDS", v, "a positive number of seconds");
	env_ms(&e, "NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS", &cfg->memory_interval_ms, 10);

	cfg->cardinality_limit = (size_t)env_range(&e, "NEMOLENS_CARDINALITY_LIMIT", 1, 100000,
						   (long)cfg->cardinality_limit, "a number from 1 to 100000");

	load_resource(cfg, &e);
	cfg->destinations = env_keep(cfg, &e, "NEMOLENS_DESTINATIONS");
	cfg->console_path = env_keep(cfg, &e, "NEMOLENS_CONSOLE_PATH");

	char gym_type[GYM_TYPE_MAX];
	const char *gym_name = env_get(&e, "NEMO_GYM_CONFIG_PATH");
	if (gym_name)
		gym_name = load_gym(cfg, &e, gym_name, gym_type);
	v = env_get(&e, "NEMOLENS_SERVER_NAME");
	if (!v)
		v = gym_name		? gym_name
		    : cfg->service_name ? cfg->service_name
		    : program_name && *program_name ? program_name
						    : "unknown";
	if ((cfg->server_name = keep_str(cfg, v)))
		nl_utf8_sanitize(cfg->server_name);
	v = env_get(&e, "NEMOLENS_SERVER_TYPE");
	cfg->server_type_known = v || (gym_name && gym_type[0]);
	if (!v)
		v = gym_name && gym_type[0] ? gym_type : "process";
	if ((cfg->server_type = keep_str(cfg, v)))
		nl_utf8_sanitize(cfg->server_type);
	load_run_id(cfg, &e);
	load_http(cfg, &e);
	load_adopt(cfg, &e);
}

void nl_config_free(struct nl_config *cfg)
{
	char *strings[] = { cfg->http_routes, cfg->http_known_methods, cfg->gym_rollout_route,
			    cfg->gym_verify_route, cfg->endpoint, cfg->ca_file, cfg->client_key,
			    cfg->client_cert, cfg->service_name, cfg->server_name, cfg->server_type, cfg->run_id,
			    cfg->destinations, cfg->console_path, cfg->log_path, cfg->runtime_dir,
			    cfg->genai_paths, cfg->genai_provider, cfg->call_sites_skip, cfg->prometheus_host };
	for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
		drop(cfg, strings[i]);
	nl_free_kv_list(cfg->headers, cfg->n_headers);   /* n is 0 without a table */
	nl_free_kv_list(cfg->resource, cfg->n_resource);
	free(cfg->headers);
	free(cfg->resource);
	memset(cfg, 0, sizeof *cfg);
}
