/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration, read once from the environment.
 *
 * Standard OpenTelemetry variables are parsed as the SDK specification says:
 * an empty value is unset; an invalid value gets one warning and the default.
 * NeMo Gym's NEMO_GYM_OTEL_* variables are honoured as aliases, and the
 * shim's own variables use the NEMOLENS_ prefix. docs/configuration.md lists them all.
 */
#ifndef NL_CONFIG_H
#define NL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kv.h"
#include "log.h"
#include "utf8.h"

/* OTEL_METRICS_EXPORTER is a comma-separated list. Its push exporters
 * (otlp, console, none) are exclusive: the first named wins, as the shim
 * exports one way at a time. prometheus is a pull exporter, served by
 * nemolens-run, and goes beside any of them: a list that names only
 * prometheus has the push exporter none. */
enum nl_exporter_kind { NL_EXPORTER_OTLP, NL_EXPORTER_CONSOLE, NL_EXPORTER_NONE };
/* NEMOLENS_ADOPT: what happens to the values of a process that ended
 * without delivering them (docs/export.md). */
enum nl_adopt_mode { NL_ADOPT_OWN, NL_ADOPT_FOLD, NL_ADOPT_OFF };

#define NL_MAX_HEADERS 32
#define NL_MAX_RESOURCE_ATTRS 64

struct nl_config {
	bool enabled;                   /* false: the shim does nothing at all */
	bool metrics_enabled;
	enum nl_exporter_kind exporter;  /* the push exporter */
	bool prometheus;                /* OTEL_METRICS_EXPORTER names prometheus */
	char *prometheus_host;          /* OTEL_EXPORTER_PROMETHEUS_HOST, NULL: localhost */
	long prometheus_port;           /* OTEL_EXPORTER_PROMETHEUS_PORT, default 9464 */
	/* Not read from the environment: the nemolens-run that serves a tree
	 * to Prometheus alone, set by the code that knows it (the runtime from
	 * NL_ENV_RUN_EXPORTER, the launcher itself). Such a tree's segments
	 * have a delivery key of their own: no other process may deliver them
	 * (segment.h, nl_seg_delivery_key). */
	unsigned prometheus_tree;
	long export_interval_ms;
	long export_timeout_ms;         /* OTEL_METRIC_EXPORT_TIMEOUT */
	long otlp_timeout_ms;           /* OTEL_EXPORTER_OTLP_[METRICS_]TIMEOUT */
	long exit_timeout_ms;           /* NEMOLENS_EXIT_TIMEOUT_MS */
	char *endpoint;                 /* full metrics URL (OTLP/gRPC: the Export call's) */
	bool grpc;                      /* OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL=grpc */
	struct nl_header *headers;      /* NL_MAX_HEADERS entries, allocated when the variable is set */
	size_t n_headers;
	bool gzip;
	char *ca_file;
	char *client_key;
	char *client_cert;
	bool delta_counters;            /* temporality preference: delta for counters */
	bool delta_histograms;          /* ... and for histograms (delta and lowmemory) */
	char *service_name;             /* OTEL_SERVICE_NAME or service.name resource attr; may be NULL */
	char *server_name;              /* NEMOLENS_SERVER_NAME, else service name, else program name */
	char *server_type;              /* NEMOLENS_SERVER_TYPE, default "process" */
	bool server_type_known;         /* server_type was given or read from Gym's configuration */
	char *run_id;                   /* nemo.run.id: NEMO_GYM_OTEL_RUN_ID, SLURM_JOB_ID, NL_ENV_RUN_ID, or made */
	bool run_id_made;               /* made here, by the tree's outermost process: its descendants get it */
	struct nl_header *resource;     /* OTEL_RESOURCE_ATTRIBUTES, decoded; as headers */
	size_t n_resource;
	char *destinations;             /* NEMOLENS_DESTINATIONS, raw */
	bool memory_profiling;
	bool process_metrics;           /* NEMOLENS_PROCESS_METRICS: process.* from /proc (procmetrics.h) */
	long memory_interval_ms;
	size_t cardinality_limit;
	char *console_path;             /* NEMOLENS_CONSOLE_PATH, NULL = stderr */
	char *log_path;                 /* NEMOLENS_LOG_PATH: NULL (default), "stderr" or an absolute path */
	bool outermost;                 /* no shim ancestor: NL_ENV_OUTERMOST unset or this process */
	enum nl_log_level log_level;
	bool crash_report;              /* NEMOLENS_CRASH_REPORT: a fault in the shim is reported (crash.h) */
	/* The HTTP layer (NEMOLENS_HTTP and friends; docs/metrics.md, "HTTP requests"). */
	bool http_server;               /* parse accepted sockets */
	bool http_client;               /* parse connected TCP sockets */
	char *http_routes;              /* NEMOLENS_HTTP_ROUTES, raw */
	int http_route_unmatched;       /* enum nl_route_unmatched */
	long http_route_cap;            /* NEMOLENS_HTTP_ROUTE_LIMIT */
	long http_route_segment_limit;  /* NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT; 0: no learning */
	bool http_semconv_dup;          /* OTEL_SEMCONV_STABILITY_OPT_IN has http/dup */
	bool http_semconv_stable;       /* it has http and not http/dup: stable attributes alone */
	long http_server_name_limit;    /* NEMOLENS_HTTP_SERVER_NAME_LIMIT */
	char *http_known_methods;       /* OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS, raw */
	bool gym_endpoints;             /* NEMOLENS_GYM_ENDPOINTS */
	char *gym_rollout_route;        /* NEMOLENS_GYM_ROLLOUT_ROUTE, default /run */
	char *gym_verify_route;         /* NEMOLENS_GYM_VERIFY_ROUTE, default /verify */
	/* Model calls read from the bytes (docs/model-calls.md). */
	bool genai;                     /* NEMOLENS_GENAI, default true */
	char *genai_paths;              /* NEMOLENS_GENAI_PATHS, raw: suffix=operation,… */
	char *genai_provider;           /* NEMOLENS_GENAI_PROVIDER: gen_ai.provider.name for every call */
	/* Call sites of connections (docs/call-sites.md). */
	bool call_sites;                /* NEMOLENS_CALL_SITES, default true */
	long call_sites_limit;          /* NEMOLENS_CALL_SITES_LIMIT, default 64 */
	char *call_sites_skip;          /* NEMOLENS_CALL_SITES_SKIP, raw; NULL: the default list */
	/* Segments (segment.h): what a process leaves when it ends. */
	enum nl_adopt_mode adopt;       /* NEMOLENS_ADOPT */
	long leftover_max_age_s;        /* NEMOLENS_LEFTOVER_MAX_AGE_S: undeliverable leftovers go then */
	char *runtime_dir;              /* XDG_RUNTIME_DIR, raw */
	/* The strings above live in this store while it has room, on the heap
	 * after that: reading the usual environment takes no malloc, which at
	 * load would be the process's first (a heap set up, a page touched).
	 * nl_config_free tells the two apart, so a configuration is never
	 * copied by value. */
	size_t store_used;
	char store[256];
};

/* The pid of the outermost shim process of a tree: the shim puts it into
 * its own environment at load when no shim ancestor did, so that every
 * descendant inherits it (through any non-shim process in between). */
#define NL_ENV_OUTERMOST "NEMOLENS_OUTERMOST_PID"
/* The run id the outermost process made for its tree, when neither NeMo
 * Gym's variable nor Slurm's gives one: set by it at load, for its
 * descendants (docs/configuration.md). */
#define NL_ENV_RUN_ID "NEMOLENS_RUN_ID"
/* Set by nemolens-run for its program: its own pid, the process that exports
 * the segments of the whole tree (docs/export.md). */
#define NL_ENV_RUN_EXPORTER "NEMOLENS_RUN_EXPORTER"
/* The defaults of OTEL_EXPORTER_PROMETHEUS_HOST and _PORT. */
#define NL_PROMETHEUS_HOST "localhost"
#define NL_PROMETHEUS_PORT 9464

typedef const char *(*nl_getenv_fn)(const char *name);

/* Fills cfg from the environment seen through get (getenv in production).
 * Never fails: every problem is a warning and a default. */
void nl_config_load(struct nl_config *cfg, nl_getenv_fn get, const char *program_name);
void nl_config_free(struct nl_config *cfg);

/* Value parsers, exposed for tests and fuzzing. Each returns 0 on success,
 * -1 (leaving *out untouched) on an invalid value. */
int nl_parse_bool(const char *s, bool *out);
int nl_parse_ms(const char *s, long *out);
/* A process id: decimal digits only, 1 to 2^31 - 1. */
int nl_parse_pid(const char *s, long *out);
/* "k1=v1,k2=v2" with percent-decoding of keys and values (W3C baggage style, as
 * OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS). Returns the number of
 * pairs stored (at most max), or -1 when the whole value is malformed. */
int nl_parse_kv_list(const char *s, struct nl_header *out, size_t max);
void nl_free_kv_list(struct nl_header *list, size_t n);
/* A boolean variable's value as the shim reads it: OTEL_* variables take
 * only true/false (any case), the shim's and NeMo Gym's own also 1/0, yes/no,
 * on/off. */
int nl_parse_flag(const char *name, const char *s, bool *out);

#endif
