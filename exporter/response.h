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

/* A Retry-After header value (delay-seconds or an HTTP-date) in milliseconds,
 * at most RETRY_AFTER_MAX_S seconds; -1 when invalid. HTTP-dates need libcurl
 * loaded (nl_curl_load). */
long nl_parse_retry_after(const char *value, size_t n);

#endif
