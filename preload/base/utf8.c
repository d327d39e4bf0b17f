/* SPDX-License-Identifier: Apache-2.0 */
#include "utf8.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "loadpath.h"

NL_LOAD_PATH size_t nl_utf8_seq(const unsigned char *s, size_t n, size_t *bad_len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	size_t need;
	*bad_len = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1;
	else if (c >= 0xE0 && c <= 0xEF)
		need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else
		return 0;
	for (size_t i = 1; i <= need; i++) {
		unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
		if (i >= n || s[i] < min || s[i] > max) {
			*bad_len = i;
			return 0;
		}
	}
	return need + 1;
}

bool nl_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t bad, len;
	for (size_t i = 0; i < n; i += len)
		if ((len = nl_utf8_seq(s + i, n - i, &bad)) == 0)
			return false;
	return true;
}

NL_LOAD_PATH void nl_utf8_sanitize(char *s)
{
	size_t n = strlen(s);
	size_t i = 0;
	while (i < n) {
		/* The longest valid sequence starting here (1 to 4 bytes), if any. */
		size_t len = 4;
		while (len > 0 && (i + len > n || !nl_utf8_valid(s + i, len)))
			len--;
		if (len == 0)
			s[i++] = '?';
		else
			i += len;
	}
}

char *nl_utf8_sanitized_dup(const char *s)
{
	char *out = strdup(s);
	if (out)
		nl_utf8_sanitize(out);
	return out;
}
