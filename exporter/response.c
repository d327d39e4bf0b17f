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

/* One field of a protobuf message: its number, and its value as a varint
 * (wire types 0, 1 and 5, the fixed ones read little-endian) or as bytes
 * (wire type 2). */
struct field {
	uint64_t number;
	bool is_bytes;
	uint64_t value;
	const uint8_t *bytes;
	size_t len;
};

/* Reads the field at *p and moves past it. False at the end of the message
 * or on anything malformed (groups included: nothing we read has them). */
static bool next_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
	uint64_t key;
	if (*p >= end || !read_varint(p, end, &key))
		return false;
	f->number = key >> 3;
	f->is_bytes = false;
	f->value = 0;
	switch (key & 7) {
	case 0:
		return read_varint(p, end, &f->value);
	case 1:
	case 5: {
		size_t width = (key & 7) == 1 ? 8 : 4;
		if ((size_t)(end - *p) < width)
			return false;
		for (size_t i = width; i-- > 0;)
			f->value = f->value << 8 | (*p)[i];
		*p += width;
		return true;
	}
	case 2:
		if (!read_varint(p, end, &f->value) || f->value > (uint64_t)(end - *p))
			return false;
		f->is_bytes = true;
		f->bytes = *p;
		f->len = (size_t)f->value;
		*p += f->len;
		return true;
	default:
		return false;
	}
}

/* The message (field 2) of a google.rpc.Status, which is what OTLP/HTTP
 * servers return with an error status. False if the body is not one. */
bool nl_rpc_status_message(const uint8_t *p, size_t n, const char **msg, size_t *msg_len)
{
	const uint8_t *end = p + n;
	struct field f;
	bool found = false;
	while (p < end) {
		if (!next_field(&p, end, &f))
			return false;
		if (f.number == 2 && f.is_bytes) {
			*msg = (const char *)f.bytes;
			*msg_len = f.len;
			found = true;
		}
	}
	return found;
}

/* google.protobuf.Duration {seconds = 1, nanos = 2} in milliseconds, at
 * most RETRY_AFTER_MAX_S seconds; -1 when malformed or negative. */
static long duration_ms(const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	struct field f;
	int64_t seconds = 0, nanos = 0;
	while (p < end) {
		if (!next_field(&p, end, &f) || f.is_bytes)
			return -1;
		if (f.number == 1)
			seconds = (int64_t)f.value;
		else if (f.number == 2)
			nanos = (int32_t)(uint32_t)f.value;
	}
	if (seconds < 0 || nanos < 0 || nanos >= 1000000000)
		return -1;
	if (seconds >= RETRY_AFTER_MAX_S)
		return RETRY_AFTER_MAX_S * 1000L;
	return (long)seconds * 1000 + (long)((nanos + 999999) / 1000000);
}

static bool ends_with(const uint8_t *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* google.rpc.Status {code = 1, message = 2, details = 3 (repeated Any)};
 * Any {type_url = 1, value = 2}; RetryInfo {retry_delay = 1 (Duration)}. */
long nl_grpc_retry_delay_ms(const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	struct field f;
	long delay = -1;
	while (p < end) {
		if (!next_field(&p, end, &f))
			return -1;
		if (f.number != 3 || !f.is_bytes)
			continue;
		const uint8_t *q = f.bytes, *qend = f.bytes + f.len;
		const uint8_t *value = NULL;
		size_t value_len = 0;
		bool retry_info = false;
		struct field g;
		while (q < qend) {
			if (!next_field(&q, qend, &g))
				return -1;
			if (g.number == 1 && g.is_bytes)
				retry_info = ends_with(g.bytes, g.len, "/google.rpc.RetryInfo");
			else if (g.number == 2 && g.is_bytes)
				value = g.bytes, value_len = g.len;
		}
		if (!retry_info)
			continue;
		/* RetryInfo with no delay asks for a retry at once: 0 ms. */
		delay = 0;
		const uint8_t *r = value, *rend = value ? value + value_len : NULL;
		while (r && r < rend) {
			if (!next_field(&r, rend, &g))
				return -1;
			if (g.number == 1 && g.is_bytes)
				delay = duration_ms(g.bytes, g.len);
		}
	}
	return delay;
}

static int base64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* gRPC's binary metadata is base64, padded or not (both must be accepted);
 * the URL-safe alphabet is taken too. Stops at the first '=' or space. */
bool nl_base64_decode(const char *in, size_t n, uint8_t *out, size_t cap, size_t *out_len)
{
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t o = 0, i = 0;
	for (; i < n && in[i] != '=' && in[i] != ' ' && in[i] != '\t' && in[i] != '\r' && in[i] != '\n'; i++) {
		int v = base64_value((unsigned char)in[i]);
		if (v < 0)
			return false;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == cap)
				return false;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	*out_len = o;
	return bits < 6;  /* one dangling character is not base64 */
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

void nl_grpc_message(const char *v, size_t n, char *out, size_t out_size)
{
	char buf[256];
	size_t o = 0;
	for (size_t i = 0; i < n && o < sizeof buf; i++) {
		int hi, lo;
		if (v[i] == '%' && i + 2 < n && (hi = hex_value(v[i + 1])) >= 0 && (lo = hex_value(v[i + 2])) >= 0) {
			buf[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			buf[o++] = v[i];
		}
	}
	nl_printable_summary(buf, o, out, out_size);
}

bool nl_grpc_unframe(const uint8_t *p, size_t n, bool *compressed, const uint8_t **msg, size_t *msg_len)
{
	if (n < 5 || p[0] > 1)
		return false;
	uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	if (len > n - 5)
		return false;
	*compressed = p[0] == 1;
	*msg = p + 5;
	*msg_len = len;
	return true;
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

