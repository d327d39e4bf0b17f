/* SPDX-License-Identifier: Apache-2.0 */
#include "gymconfig.h"

#include <stdbool.h>
#include <string.h>

/* The scan reads at most this much of the configuration: a server's block
 * comes where the orchestrator wrote it, and a start-up pays for no more. */
#define SCAN_MAX (1u << 20)

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* A key as YAML writes it: plain, or in single or double quotes (without
 * escapes, which no server name or type of Gym's needs). Stores it in out
 * and returns the character after it, or NULL. */
static const char *key(const char *p, const char *end, char *out, size_t size)
{
	char q = *p == '"' || *p == '\'' ? *p++ : 0;
	size_t n = 0;
	while (p < end && *p != '\n' && (q ? *p != q : *p != ':' && *p != '#')) {
		if (n + 1 >= size || (unsigned char)*p < 0x20 || (q == '"' && *p == '\\'))
			return NULL;
		out[n++] = *p++;
	}
	if (q) {
		if (p >= end || *p != q)
			return NULL;
		p++;
	}
	while (!q && n && is_space(out[n - 1]))
		n--;
	out[n] = '\0';
	return n ? p : NULL;
}

/* After a key: a colon that ends it (followed by a blank, a comment or the
 * end of the line). */
static bool colon(const char *p, const char *end)
{
	while (p < end && is_space(*p))
		p++;
	if (p >= end || *p != ':')
		return false;
	p++;
	return p >= end || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r';
}

static const char *next_line(const char *p, const char *end)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? nl + 1 : end;
}

/* Block YAML, as OmegaConf.to_yaml writes the global configuration: the
 * server is a key at column 0; the first key indented under it is its
 * type. */
static int scan_block(const char *p, const char *end, const char *name, char *type, size_t size)
{
	char k[256];
	bool inside = false;
	for (; p < end; p = next_line(p, end)) {
		const char *s = p;
		while (s < end && is_space(*s))
			s++;
		if (s >= end || *s == '\n' || *s == '\r' || *s == '#')
			continue;   /* blank or comment */
		bool top = s == p;
		if (inside) {
			if (top)
				return -1;   /* the server's block has nothing under it */
			const char *after = key(s, end, type, size);
			return after && colon(after, end) ? 0 : -1;
		}
		if (!top)
			continue;
		const char *after = key(s, end, k, sizeof k);
		if (after && colon(after, end) && strcmp(k, name) == 0)
			inside = true;
	}
	return -1;
}

/* Flow style (JSON is YAML too): {"name": {"type": {...}}, ...}. Strings are
 * skipped with their escapes; the key wanted is a string at depth 1 whose
 * value is a mapping, and the type that mapping's first key. */
static int scan_flow(const char *p, const char *end, const char *name, char *type, size_t size)
{
	int depth = 0;
	size_t name_len = strlen(name);
	bool want_value = false, want_type = false;
	while (p < end) {
		char c = *p;
		if (c == '"' || c == '\'') {
			const char *s = ++p;
			while (p < end && *p != c) {
				if (*p == '\\' && c == '"')
					p++;
				p++;
			}
			if (p >= end)
				return -1;
			size_t n = (size_t)(p - s);
			p++;
			if (want_type) {
				if (n >= size || memchr(s, '\\', n))
					return -1;
				memcpy(type, s, n);
				type[n] = '\0';
				return n ? 0 : -1;
			}
			if (depth == 1 && n == name_len && memcmp(s, name, n) == 0 && colon(p, end))
				want_value = true;
			continue;
		}
		if (c == '{' || c == '[') {
			depth++;
			if (want_value) {
				if (c != '{' || depth != 2)
					return -1;
				want_value = false;
				want_type = true;
			}
		} else if (c == '}' || c == ']') {
			if (want_type || --depth < 0)
				return -1;
		} else if (want_value && !is_space(c) && c != ':' && c != '\n' && c != '\r') {
			return -1;   /* the server's value is no mapping */
		}
		p++;
	}
	return -1;
}

int nl_gym_server_type(const char *config, const char *name, char *type, size_t size)
{
	if (!config || !name || !*name || size < 2)
		return -1;
	size_t len = strnlen(config, SCAN_MAX + 1);
	if (len > SCAN_MAX)
		return -2;
	const char *p = config, *end = config + len;
	while (p < end && (is_space(*p) || *p == '\n' || *p == '\r'))
		p++;
	int r = p < end && *p == '{' ? scan_flow(p, end, name, type, size) : scan_block(p, end, name, type, size);
	if (r != 0)
		type[0] = '\0';
	return r;
}
