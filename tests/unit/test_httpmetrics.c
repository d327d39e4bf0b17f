/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP metrics' interning of server names (preload/core/httpmetrics.c):
 * the Host values a server's requests carried become ids for
 * http.server_name, each name once, and a value an attribute cannot carry
 * as is (a byte outside visible ASCII) gets none. */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "h1.h"
#include "httpmetrics.h"

static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

static void defaults(void)
{
	static struct nl_config cfg;
	nl_config_load(&cfg, no_env, "test_httpmetrics");
	nl_httpmetrics_init(&cfg);
}

TestSuite(server_name, .init = defaults);

/* len visible bytes, different for every length and seed. */
static void visible(char *s, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		s[i] = (char)(0x21 + (seed * 31 + i * 7 + len) % 94);
}

Test(server_name, each_name_once_at_every_length)
{
	char a[NL_H1_HOST_MAX + 8], b[NL_H1_HOST_MAX + 8];
	int ids[NL_H1_HOST_MAX + 1];
	for (size_t len = 1; len <= NL_H1_HOST_MAX; len++) {
		visible(a, len, 1);
		ids[len] = nl_http_server_name(a, len);
		cr_assert_geq(ids[len], 0, "a name of %zu bytes: %d", len, ids[len]);
		for (size_t k = 1; k < len; k++)
			cr_assert_neq(ids[len], ids[k], "names of %zu and %zu bytes share id %d", len, k, ids[len]);
		/* The same bytes from another buffer: the same id. */
		memcpy(b, a, len);
		cr_assert_eq(nl_http_server_name(b, len), ids[len], "a name of %zu bytes again", len);
	}
	for (size_t len = 1; len <= NL_H1_HOST_MAX; len++) {
		visible(a, len, 1);
		cr_assert_eq(nl_http_server_name(a, len), ids[len], "a name of %zu bytes, later", len);
	}
}

Test(server_name, a_byte_outside_visible_ascii_gives_none)
{
	static const unsigned char bad[] = { 0x00, 0x01, 0x09, 0x20, 0x7f, 0x80, 0xc3, 0xff };
	char s[NL_H1_HOST_MAX + 8];
	for (size_t len = 1; len <= NL_H1_HOST_MAX; len++)
		for (size_t at = 0; at < len; at++)
			for (size_t k = 0; k < sizeof bad; k++) {
				visible(s, len, 2);
				s[at] = (char)bad[k];
				cr_assert_eq(nl_http_server_name(s, len), NL_HTTP_NAME_NONE,
					     "byte 0x%02x at %zu of %zu", bad[k], at, len);
			}
	/* The edges of the range are visible. */
	cr_assert_geq(nl_http_server_name("!~", 2), 0);
	cr_assert_geq(nl_http_server_name("host.example:8080~!", 19), 0);
}

Test(server_name, none_for_no_value_or_a_long_one)
{
	char s[NL_H1_HOST_MAX + 2];
	visible(s, sizeof s, 3);
	cr_assert_eq(nl_http_server_name(NULL, 0), NL_HTTP_NAME_NONE);
	cr_assert_eq(nl_http_server_name(s, 0), NL_HTTP_NAME_NONE);
	cr_assert_eq(nl_http_server_name(s, NL_H1_HOST_MAX + 1), NL_HTTP_NAME_NONE);
}
