/* SPDX-License-Identifier: Apache-2.0 */
/* Reading what a collector answers: error messages, Retry-After. Everything
 * here parses bytes from the network, so it is fuzzed (tests/fuzz). */
#include "response.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "curl_dl.h"

/* Printable ASCII of s (runs of spaces and anything else become one space),
 * trimmed and truncated: a server's message goes into a log line, not
 * arbitrary bytes or an HTML page's indentation. */
void nl_printable_summary(const char *s, size_t n, char *out, size_t out_size)
{
	size_t o = 0;
	bool gap = false;
	for (size_t i = 0; i < n && o + 1 < out_size; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c > 0x20 && c < 0x7F) {
			if (gap && o > 0 && o + 2 < out_size)
				out[o++] = ' ';
			out[o++] = (char)c;
			gap = false;
		} else {
			gap = true;
		}
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
}

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7F) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* The message (field 2) of a google.rpc.Status, which is what OTLP/HTTP
 * servers return with an error status. False if the body is not one. */
bool nl_rpc_status_message(const uint8_t *p, size_t n, const char **msg, size_t *msg_len)
{
	const uint8_t *end = p + n;
	bool found = false;
	while (p < end) {
		uint64_t key, v;
		if (!read_varint(&p, end, &key))
			return false;
		switch (key & 7) {
		case 0:
			if (!read_varint(&p, end, &v))
				return false;
			break;
		case 1:
		case 5:
			if ((size_t)(end - p) < ((key & 7) == 1 ? 8u : 4u))
				return false;
			p += (key & 7) == 1 ? 8 : 4;
			break;
		case 2:
			if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p))
				return false;
			if ((key >> 3) == 2) {
				*msg = (const char *)p;
				*msg_len = (size_t)v;
				found = true;
			}
			p += v;
			break;
		default:
			return false;
		}
	}
	return found;
}

/* Retry-After is either delay-seconds or an HTTP-date. */
long nl_parse_retry_after(const char *value, size_t n)
{
	char buf[64];
	while (n && (*value == ' ' || *value == '\t'))
		value++, n--;
	while (n && (value[n - 1] == '\r' || value[n - 1] == '\n' || value[n - 1] == ' '))
		n--;
	if (n == 0 || n >= sizeof buf)
		return -1;
	memcpy(buf, value, n);
	buf[n] = '\0';
	if (strspn(buf, "0123456789") == n) {
		long s = n > 6 ? RETRY_AFTER_MAX_S : atol(buf);
		return (s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : s) * 1000;
	}
	time_t when = nl_curl.getdate(buf, NULL);
	if (when == (time_t)-1)
		return -1;
	time_t now = time(NULL);
	long s = when > now ? (long)(when - now) : 0;
	return (s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : s) * 1000;
}

