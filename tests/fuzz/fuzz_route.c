/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes http.route lookups. The first byte chooses the set-up: bits 0-1 the
 * unmatched mode, bit 2 truncated targets, bit 3 whether the first line is
 * NEMOLENS_HTTP_ROUTES, bits 4-7 the cap, and with it the segment limit
 * (bits 4-5: 1, 2, 10 or none). Every further line is a request target,
 * looked up on its own in a buffer of exactly its size. A route is always a
 * template of the path it came from, learned positions included. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

static bool ends_wild(const char *name, size_t len)
{
	return len >= 2 && name[len - 2] == '/' && name[len - 1] == '*';
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
static bool is_separator(char c) { return c == '-' || c == '.' || c == '_' || c == '~'; }

/* Whether segment s (n bytes) is one the static rules keep (route.h):
 * unreserved bytes, under 32, a letter if it has a digit, and no token that
 * is a number of 2+ digits, 6+ hex with a digit, or letters and digits with
 * 4+ digits or 16+ bytes. (The base64 rule is left out: it only removes.) */
static bool kept_word(const char *s, size_t n)
{
	if (n >= 32)
		return false;
	unsigned digits = 0, letters = 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]) && !is_letter(s[i]) && !is_separator(s[i]))
			return false;
		digits += is_digit(s[i]);
		letters += is_letter(s[i]);
	}
	if (digits && !letters)
		return false;
	for (size_t i = 0; i < n;) {
		size_t e = i;
		unsigned d = 0, l = 0, h = 0;
		for (; e < n && !is_separator(s[e]); e++) {
			d += is_digit(s[e]);
			l += is_letter(s[e]);
			h += is_hex(s[e]);
		}
		size_t t = e - i;
		if (d && ((!l && d >= 2) || (l && (d >= 4 || t >= 16 || (t >= 6 && h == t)))))
			return false;
		i = e + 1;
	}
	return true;
}

/* A template-mode route made from a path: kept words and "{id}", and "/\*"
 * only at the end. */
static bool templated(const char *name, size_t len)
{
	if (name[0] != '/')
		return false;
	size_t end = ends_wild(name, len) ? len - 2 : len;
	for (size_t i = 1; i <= end;) {
		size_t e = i;
		while (e < end && name[e] != '/')
			e++;
		if (!(e - i == 4 && memcmp(name + i, "{id}", 4) == 0) && !kept_word(name + i, e - i))
			return false;
		i = e + 1;
	}
	return true;
}

/* Whether route name is a template of path p (len bytes, up to its query):
 * segment by segment the path's own or "{id}", the same number of them,
 * unless the name ends in "/\*" where the path goes on (cut, or too long). */
static bool template_of(const char *name, size_t n, const char *p, size_t len)
{
	size_t q = 0;
	while (q < len && p[q] != '?' && p[q] != '#')
		q++;
	size_t i = 1, j = 1;    /* after a '/' in name and in p */
	for (;;) {
		size_t e = i;
		while (e < n && name[e] != '/')
			e++;
		size_t f = j;
		while (f < q && p[f] != '/')
			f++;
		bool wild = e - i == 1 && name[i] == '*' && e == n;
		if (wild)
			return true;
		bool same = e - i == f - j && memcmp(name + i, p + j, e - i) == 0;
		bool param = e - i == 4 && memcmp(name + i, "{id}", 4) == 0 && f > j;
		if (!same && !param)
			return false;
		if (e == n)
			return f == q;
		if (n - e == 2 && name[e + 1] == '*')
			return true;    /* "/static/\*" from "/static" too */
		if (f == q)
			return false;
		i = e + 1;
		j = f + 1;
	}
}

/* A whole origin-form target against the capture of its first cut bytes:
 * once the query is in, the cut changes nothing; and a template the cut
 * target was given (a name not ending in "/\*" is never a cut-off route) is
 * the whole target's too, for a template decides a cut target only when the
 * rest cannot change the answer. */
static void check_cut(const char *target, size_t len, size_t cut)
{
	int whole = nl_route_lookup(target, len, false);
	int part = nl_route_lookup(target, cut, true);
	if (memchr(target, '?', cut) || memchr(target, '#', cut)) {
		if (part != whole)
			abort();
		return;
	}
	if (part < 0 || (unsigned)part >= nl_route_template_count())
		return;
	const char *name = nl_route_name(part);
	if (!ends_wild(name, strlen(name)) && part != whole)
		abort();
}

static void check(const char *target, size_t len, bool truncated, enum nl_route_unmatched mode, bool patterns)
{
	if (!truncated && len > 1 && target[0] == '/') {
		check_cut(target, len, len / 2);
		check_cut(target, len, len - 1);
	}
	int id = nl_route_lookup(target, len, truncated);
	if (id == NL_ROUTE_NONE || id == NL_ROUTE_OVERFLOW) {
		if (nl_route_lookup(target, len, truncated) != id)
			abort();
		return;
	}
	if (id < 0 || (unsigned)id >= nl_route_count())
		abort();
	const char *name = nl_route_name(id);
	if (!name)
		abort();
	size_t n = strlen(name);
	if (n == 0 || n > NL_ROUTE_NAME_MAX)
		abort();
	if (name[0] != '/' && strcmp(name, "*") != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (name[i] <= 0x20 || name[i] >= 0x7F)
			abort();
	/* The same target, the same id. */
	if (nl_route_lookup(target, len, truncated) != id)
		abort();

	bool dynamic = (unsigned)id >= nl_route_template_count();
	if (!dynamic || strcmp(name, "*") == 0)
		return;
	if (mode == NL_ROUTE_UNSET)
		abort();        /* only templates have routes */
	if (mode == NL_ROUTE_TEMPLATE && !templated(name, n))
		abort();        /* a raw identifier got through */
	if ((mode == NL_ROUTE_TEMPLATE || mode == NL_ROUTE_WILDCARD) && target[0] == '/' && !template_of(name, n, target, len))
		abort();        /* not a template of the path it came from */
	if (mode == NL_ROUTE_WILDCARD) {
		/* "/first/\*" or "/\*" */
		const char *second = strchr(name + 1, '/');
		if (!ends_wild(name, n) || (second && second != name + n - 2))
			abort();
	}
	/* A cut-off path with no query reached ends in "/\*". */
	if (truncated && target[0] == '/' && !memchr(target, '?', len) && !memchr(target, '#', len) &&
	    !ends_wild(name, n))
		abort();
	/* A route is its own route, unless it was cut (the "*" segment is an
	 * identifier to template mode), or path mode %-encoded a byte that a
	 * configured literal "%20" matches only once encoded. */
	if ((mode == NL_ROUTE_TEMPLATE || mode == NL_ROUTE_PATH) && !ends_wild(name, n) &&
	    !(mode == NL_ROUTE_PATH && patterns && strchr(name, '%')) && nl_route_lookup(name, n, false) != id)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint8_t flags = data[0];
	enum nl_route_unmatched mode = (enum nl_route_unmatched)(flags & 3);
	bool truncated = flags & 4;
	bool patterns = flags & 8;
	unsigned cap = 10 + (flags >> 4) * 4u;
	const uint8_t *p = data + 1, *end = data + size;

	char *list = NULL;
	if (patterns) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		list = malloc(n + 1);
		if (!list)
			return 0;
		memcpy(list, p, n);
		list[n] = 0;
		p += nl ? n + 1 : n;
	}
	int bad = nl_route_configure(list, mode, cap, NULL);
	free(list);
	static const unsigned limits[4] = { 1, 2, NL_ROUTE_SEGMENT_LIMIT_DEFAULT, 0 };
	if (bad < 0 || nl_route_set_segment_limit(limits[(flags >> 4) & 3]) < 0)
		return 0;
	if (nl_route_template_count() < 10 || nl_route_count() != nl_route_template_count())
		abort();

	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *target = malloc(n ? n : 1);
		if (!target)
			break;
		memcpy(target, p, n);
		check(target, n, truncated, mode, patterns);
		free(target);
		p += nl ? n + 1 : n;
	}
	/* Single-threaded, every id taken has its name. */
	for (unsigned i = 0; i < nl_route_count(); i++)
		if (!nl_route_name((int)i))
			abort();
	nl_route_reset();
	return 0;
}
