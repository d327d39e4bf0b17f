/* SPDX-License-Identifier: Apache-2.0 */
/* The exporter: a snapshot in, bytes out, bytes sent.
 *
 * Encoders turn an nl_snapshot into an OTLP ExportMetricsServiceRequest,
 * either protobuf (for OTLP/HTTP) or the protobuf JSON mapping (for the
 * console exporter). The transport sends protobuf bodies with libcurl, over
 * OTLP/HTTP or OTLP/gRPC, following each one's retry rules. Only the background thread
 * and the exit flush use these; never a hook.
 */
#ifndef NL_EXPORT_H
#define NL_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "snapshot.h"

/* Encodes snap as a protobuf ExportMetricsServiceRequest into a malloc'd buffer.
 * Returns 0, or -1 on OOM. */
int nl_otlp_encode(const struct nl_snapshot *snap, uint8_t **out, size_t *out_len);

/* Encodes snap as one line of OTLP/JSON (no trailing newline), malloc'd, NUL-terminated.
 * Returns 0, or -1 on OOM. */
int nl_json_encode(const struct nl_snapshot *snap, char **out, size_t *out_len);

struct nl_transport_config {
	const char *url;                /* full URL, e.g. http://127.0.0.1:4318/v1/metrics */
	bool grpc;                      /* OTLP/gRPC: url is the Export call's, over HTTP/2 */
	const struct nl_header *headers;
	size_t n_headers;
	bool gzip;
	long timeout_ms;                /* one export, retries included */
	const char *ca_file;            /* OTEL_EXPORTER_OTLP_CERTIFICATE, NULL if unset */
	const char *client_key;
	const char *client_cert;
	const char *user_agent;
};

enum nl_send_result {
	NL_SEND_OK,                     /* 2xx (an empty body is success) */
	NL_SEND_RETRYABLE_FAILED,       /* gave up within the deadline; data kept for next time */
	NL_SEND_REJECTED,               /* non-retryable 4xx/5xx: dropped */
	NL_SEND_ABORTED,                /* *abort became true */
};

struct nl_transport;

struct nl_transport *nl_transport_new(const struct nl_transport_config *cfg);
/* Sends one body, retrying 429/502/503/504 and transport failures with exponential
 * backoff, jitter and Retry-After. Nothing runs past deadline_ns and no new attempt
 * starts after retry_until_ns (both CLOCK_MONOTONIC; retry_until_ns <= now means a
 * single attempt). Watches *abort (may be NULL) during transfers and backoff sleeps.
 * A transport is used by one thread at a time. */
enum nl_send_result nl_transport_send(struct nl_transport *t, const uint8_t *body, size_t len,
				      uint64_t deadline_ns, uint64_t retry_until_ns, const _Atomic bool *abort);
/* final: the sends that follow are the last of this process (the exit
 * flush). Their failures then say that the values are lost, or with kept
 * that another process delivers them, not that they are sent again at the
 * next export. */
void nl_transport_set_final(struct nl_transport *t, bool final, bool kept);
/* Each send from now on waits at most ms for its answer, counted from its
 * start (0: only the deadlines bound it). */
void nl_transport_set_wait(struct nl_transport *t, long ms);
void nl_transport_free(struct nl_transport *t);

/* Around fork() (pthread_atfork handlers of the runtime): prepare waits, at
 * most 300 us (50 ms during the one-time set-up of libcurl and its TLS
 * library), until no thread is inside a call into those libraries, and
 * holds them off until parent or child runs. A send that waits on the
 * network holds nothing, so a fork never waits on a collector. A child
 * forked while a call could not be waited for never creates a transport
 * (nl_transport_new returns NULL there). */
void nl_transport_fork_prepare(void);
void nl_transport_fork_parent(void);
void nl_transport_fork_child(void);

#endif
