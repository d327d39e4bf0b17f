/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers for what a collector sends back. */
#ifndef NL_RESPONSE_H
#define NL_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RETRY_AFTER_MAX_S 86400   /* keeps the ms arithmetic far from overflow */

/* Printable ASCII of s[0..n) (runs of spaces and anything else become one
 * space), trimmed and truncated to fit out_size: a server's message goes into
 * a log line, not arbitrary bytes or an HTML page's indentation. */
void nl_printable_summary(const char *s, size_t n, char *out, size_t out_size);

/* The message (field 2) of a protobuf google.rpc.Status, which OTLP/HTTP servers
 * return with an error status; points into p. False if the body is not one. */
bool nl_rpc_status_message(const uint8_t *p, size_t n, const char **msg, size_t *msg_len);

/* gRPC (the trailers of an OTLP/gRPC answer) ------------------------------ */

/* The delay of the google.rpc.RetryInfo among the details of a serialised
 * google.rpc.Status (grpc-status-details-bin, decoded), in milliseconds, at
 * most RETRY_AFTER_MAX_S seconds; 0 for a RetryInfo without a delay; -1 when
 * there is none or the bytes are malformed. */
long nl_grpc_retry_delay_ms(const uint8_t *status, size_t n);

/* Decodes base64 (padded or not, standard or URL-safe alphabet) of in[0..n)
 * into out (cap bytes). False when it is not base64 or does not fit. */
bool nl_base64_decode(const char *in, size_t n, uint8_t *out, size_t cap, size_t *out_len);

/* A grpc-message value (percent-encoded UTF-8) made printable for a log
 * line, as nl_printable_summary. */
void nl_grpc_message(const char *v, size_t n, char *out, size_t out_size);

/* The first message of a gRPC body: a flag byte (1: compressed with the
 * call's grpc-encoding), a 32-bit big-endian length, the message. False
 * when p does not begin with a whole one. */
bool nl_grpc_unframe(const uint8_t *p, size_t n, bool *compressed, const uint8_t **msg, size_t *msg_len);

/* A Retry-After header value (delay-seconds or an HTTP-date) in milliseconds,
 * at most RETRY_AFTER_MAX_S seconds; -1 when invalid. HTTP-dates need libcurl
 * loaded (nl_curl_load). */
long nl_parse_retry_after(const char *value, size_t n);

#endif
