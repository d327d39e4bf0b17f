/* SPDX-License-Identifier: Apache-2.0 */
/* http.route values: templates, built-in Gym routes, unmatched modes, the
 * identifier rules, truncated targets, the cap, and concurrent lookups. The
 * expected routes are written from the rules in route.h. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

static void setup(void)
{
	nl_route_reset();
}

static void teardown(void)
{
	nl_route_reset();
}

TestSuite(route, .init = setup, .fini = teardown);

/* The route of a target as a string, with the special ids spelled out. */
static const char *name_of(int id)
{
	if (id == NL_ROUTE_NONE)
		return "(none)";
	if (id == NL_ROUTE_OVERFLOW)
		return "(overflow)";
	const char *name = nl_route_name(id);
	return name ? name : "(no name)";
}

static const char *route_cut(const char *target, bool truncated)
{
	return name_of(nl_route_lookup(target, strlen(target), truncated));
}

static const char *route(const char *target)
{
	return route_cut(target, false);
}

static int id_of(const char *target)
{
	return nl_route_lookup(target, strlen(target), false);
}

static void configure(const char *patterns, enum nl_route_unmatched mode)
{
	cr_assert_eq(nl_route_configure(patterns, mode, NL_ROUTE_CAP_DEFAULT, NULL), 0);
}

#define UUID "6f1c2d3e-9a8b-4c7d-8e9f-0a1b2c3d4e5f"

/* ---- built-in routes ---------------------------------------------------------- */

Test(route, builtins_map_to_themselves)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	static const char *const builtins[] = {
		"/run", "/verify", "/seed_session", "/aggregate_metrics", "/v1/responses",
		"/v1/chat/completions", "/v1/messages", "/",
	};
	for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
		const char *b = builtins[i];
		int id = id_of(b);
		cr_assert(id >= 0 && (unsigned)id < nl_route_template_count(), "%s: id %d", b, id);
		cr_assert_str_eq(nl_route_name(id), b);
		char q[64];
		snprintf(q, sizeof q, "%s?stream=true&x=%%20", b);
		cr_assert_eq(id_of(q), id, "%s", q);
	}
	cr_assert_eq(nl_route_template_count(), 10);
	/* Built-ins have the first ids, in their order. */
	cr_assert_str_eq(nl_route_name(0), "/run");
	cr_assert_str_eq(nl_route_name(9), "/");
	cr_assert_null(nl_route_name(10));
}

Test(route, rollout_routes)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/ng-rollout/" UUID "/v1/responses"), "/ng-rollout/{rollout_id}/v1/responses");
	cr_assert_str_eq(route("/ng-rollout/" UUID "/v1/responses?a=b"), "/ng-rollout/{rollout_id}/v1/responses");
	cr_assert_str_eq(route("/ng-rollout/" UUID "/training-token-capture/v1/responses"),
			 "/ng-rollout/{rollout_id}/training-token-capture/v1/responses");
	/* {rollout_id} is any non-empty segment, but only one. */
	cr_assert_str_eq(route("/ng-rollout/r1/v1/responses"), "/ng-rollout/{rollout_id}/v1/responses");
	cr_assert_str_eq(route("/ng-rollout//v1/responses"), "/ng-rollout//v1/responses");
	cr_assert_str_eq(route("/ng-rollout/a/b/v1/responses"), "/ng-rollout/a/b/v1/responses");
	cr_assert_str_eq(route("/ng-rollout/" UUID "/v1/messages"), "/ng-rollout/{id}/v1/messages");
}

Test(route, strict_trailing_slash_and_empty_segments)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/run/"), "/run/");
	cr_assert_str_eq(route("/v1/responses/"), "/v1/responses/");
	cr_assert_str_eq(route("//v1/responses"), "//v1/responses");
	cr_assert_str_eq(route("/a//b"), "/a//b");
	cr_assert_str_eq(route("//"), "//");
	cr_assert_str_eq(route("/RUN"), "/RUN");
	cr_assert_str_eq(route("/runs"), "/runs");
}

/* ---- configured templates ----------------------------------------------------- */

Test(route, configured_templates_first_match_wins)
{
	configure("/users/{user_id},/users/me,/users/{user_id}/orders/{order_id},/static/*", NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/users/me"), "/users/{user_id}");
	cr_assert_str_eq(route("/users/42"), "/users/{user_id}");
	cr_assert_str_eq(route("/users/42/orders/7?x=1"), "/users/{user_id}/orders/{order_id}");
	cr_assert_str_eq(route("/users/42/orders"), "/users/{id}/orders");
	cr_assert_str_eq(route("/users"), "/users");
	cr_assert_str_eq(route("/users/"), "/users/");
	cr_assert_str_eq(route("/static"), "/static/*");
	cr_assert_str_eq(route("/static/"), "/static/*");
	cr_assert_str_eq(route("/static/js/app.js"), "/static/*");
	cr_assert_str_eq(route("/staticx"), "/staticx");
	/* Configured templates come first, built-ins still apply. */
	cr_assert_str_eq(nl_route_name(0), "/users/{user_id}");
	cr_assert_str_eq(nl_route_name(4), "/run");
	cr_assert_str_eq(route("/run"), "/run");
	cr_assert_eq(nl_route_template_count(), 14);
}

Test(route, long_fixed_prefixes)
{
	/* Targets of 9 bytes and more are first checked against the first 8
	 * fixed bytes of each template. */
	configure("/abcdefgh/*,/abcdefg/*,/ab/{x}/cd,/static/*", NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/abcdefgh"), "/abcdefgh/*");
	cr_assert_str_eq(route("/abcdefgh/ij"), "/abcdefgh/*");
	cr_assert_str_eq(route("/abcdefg?x=1"), "/abcdefg/*");
	cr_assert_str_eq(route("/abcdefg/hij"), "/abcdefg/*");
	cr_assert_str_eq(route("/abcdefgx/y"), "/abcdefgx/y");
	cr_assert_str_eq(route("/ab/zzzzzzzz/cd"), "/ab/{x}/cd");
	cr_assert_str_eq(route("/ab/zzzzzzzz/ce"), "/ab/zzzzzzzz/ce");
	cr_assert_str_eq(route("/static?v=123456"), "/static/*");
	cr_assert_str_eq(route("/v1/responses?stream=true"), "/v1/responses");
	cr_assert_str_eq(route("/v1/responsesX?a=1"), "/v1/responsesX");
}

Test(route, configured_templates_override_builtins)
{
	configure("/v1/{op},/ng-rollout/*", NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/v1/responses"), "/v1/{op}");
	cr_assert_str_eq(route("/v1/messages"), "/v1/{op}");
	cr_assert_str_eq(route("/v1/chat/completions"), "/v1/chat/completions");
	cr_assert_str_eq(route("/ng-rollout/" UUID "/v1/responses"), "/ng-rollout/*");
}

Test(route, restated_builtin_keeps_one_id)
{
	configure("/verify,/verify", NL_ROUTE_TEMPLATE);
	cr_assert_eq(id_of("/verify"), 0);
	cr_assert_str_eq(nl_route_name(0), "/verify");
	cr_assert_str_eq(nl_route_name(1), "/run");
	cr_assert_eq(nl_route_template_count(), 10);
}

Test(route, root_and_catch_all_templates)
{
	configure("/*", NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/"), "/*");
	cr_assert_str_eq(route("/run"), "/*");
	cr_assert_str_eq(route("/a/b/c?d"), "/*");
	cr_assert_str_eq(route("*"), "*");
}

Test(route, template_text_from_an_unmatched_path_has_the_template_id)
{
	/* "/files/x" cut short could still be "/files/{name}" or not: the
	 * fallback route is "/files/\*", the second template's text. */
	configure("/files/{name},/files/*", NL_ROUTE_TEMPLATE);
	int id = nl_route_lookup("/files/x", 8, true);
	cr_assert_eq(id, 1);
	cr_assert_str_eq(nl_route_name(id), "/files/*");
	cr_assert_str_eq(route("/files/x"), "/files/{name}");
	cr_assert_str_eq(route("/files/x/y"), "/files/*");
}

/* ---- bad patterns --------------------------------------------------------------- */

static int n_warned;
static char warned[16][64];
static char why[16][80];

static void on_warn(const char *pattern, const char *reason)
{
	if (n_warned < 16) {
		snprintf(warned[n_warned], sizeof warned[0], "%s", pattern);
		snprintf(why[n_warned], sizeof why[0], "%s", reason);
	}
	n_warned++;
}

Test(route, bad_patterns_are_skipped_and_counted)
{
	n_warned = 0;
	const char *patterns = "run,/a*,/a/*/b,/{x,/x}/y,/{},/a{b}/,,/ok, /trim\t,/sp ace,/q?x,/h#f";
	cr_assert_eq(nl_route_configure(patterns, NL_ROUTE_TEMPLATE, 100, on_warn), 11);
	cr_assert_eq(n_warned, 11);
	static const char *const bad[] = { "run", "/a*", "/a/*/b", "/{x", "/x}/y", "/{}", "/a{b}/", "", "/sp ace",
					   "/q?x", "/h#f" };
	for (int i = 0; i < 11; i++) {
		cr_assert_str_eq(warned[i], bad[i]);
		cr_assert_neq(strlen(why[i]), 0);
	}
	cr_assert_str_eq(route("/ok"), "/ok");
	cr_assert_str_eq(route("/trim"), "/trim");
	cr_assert_eq(id_of("/ok"), 0);
	cr_assert_eq(id_of("/trim"), 1);
	cr_assert_eq(nl_route_template_count(), 12);
}

Test(route, trailing_comma_and_blank_items)
{
	cr_assert_eq(nl_route_configure("/a,", NL_ROUTE_TEMPLATE, 100, NULL), 1);
	cr_assert_eq(nl_route_configure("", NL_ROUTE_TEMPLATE, 100, NULL), 0);
	cr_assert_eq(nl_route_configure(NULL, NL_ROUTE_TEMPLATE, 100, NULL), 0);
	cr_assert_eq(nl_route_configure(" , ", NL_ROUTE_TEMPLATE, 100, NULL), 2);
	cr_assert_eq(nl_route_template_count(), 10);
}

Test(route, too_long_and_too_many)
{
	char pattern[160] = "/";
	memset(pattern + 1, 'a', 125);         /* 126 characters */
	cr_assert_eq(nl_route_configure(pattern, NL_ROUTE_TEMPLATE, 100, NULL), 1);
	pattern[125] = 0;                       /* 125 */
	cr_assert_eq(nl_route_configure(pattern, NL_ROUTE_TEMPLATE, 100, NULL), 0);
	cr_assert_eq(id_of(pattern), 0);

	char deep[200] = "";
	for (int i = 0; i < 33; i++)
		strcat(deep, "/s");
	cr_assert_eq(nl_route_configure(deep, NL_ROUTE_TEMPLATE, 100, NULL), 1);
	deep[strlen(deep) - 2] = 0;            /* 32 segments */
	cr_assert_eq(nl_route_configure(deep, NL_ROUTE_TEMPLATE, 100, NULL), 0);

	size_t size = 300 * 8 + 1;
	char *many = calloc(1, size);
	for (int i = 0; i < 300; i++)
		snprintf(many + strlen(many), size - strlen(many), "%s/p%d", i ? "," : "", i);
	cr_assert_eq(nl_route_configure(many, NL_ROUTE_TEMPLATE, 100, NULL), 300 - NL_ROUTE_TEMPLATES_MAX);
	cr_assert_eq(nl_route_template_count(), NL_ROUTE_TEMPLATES_MAX + 10);
	cr_assert_eq(id_of("/p255"), 255);
	/* Past the limit: unmatched, and "p256" is a word. */
	cr_assert_eq(id_of("/p256"), NL_ROUTE_OVERFLOW);
	free(many);
}

/* ---- modes ---------------------------------------------------------------------- */

Test(route, template_mode)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/users/12345/orders/" UUID "?x=1"), "/users/{id}/orders/{id}");
	cr_assert_str_eq(route("/api/v1/users?page=2"), "/api/v1/users");
	cr_assert_str_eq(route("/health"), "/health");
	cr_assert_str_eq(route("/v1/models/gpt-4o-mini-2024-07-18"), "/v1/models/{id}");
	cr_assert_str_eq(route("/docs#section"), "/docs");
}

Test(route, path_mode)
{
	configure(NULL, NL_ROUTE_PATH);
	cr_assert_str_eq(route("/users/12345?x=1"), "/users/12345");
	cr_assert_str_eq(route("/users/" UUID), "/users/" UUID);
	cr_assert_str_eq(route("/run?x"), "/run");
	cr_assert_str_eq(route("/a%20b/"), "/a%20b/");
	cr_assert_str_eq(route("/a b\x01/\xff"), "/a%20b%01/%FF");
	cr_assert_str_eq(route("/{x}/*"), "/{x}/*");
}

Test(route, wildcard_mode)
{
	configure(NULL, NL_ROUTE_WILDCARD);
	cr_assert_str_eq(route("/static/app.js"), "/static/*");
	cr_assert_str_eq(route("/static"), "/static/*");
	cr_assert_str_eq(route("/static/"), "/static/*");
	cr_assert_str_eq(route("/12345/x?y"), "/{id}/*");
	cr_assert_str_eq(route("/"), "/");
	cr_assert_str_eq(route("/?q=1"), "/");
	cr_assert_str_eq(route("//x"), "//*");
	cr_assert_str_eq(route("/run"), "/run");
	cr_assert_str_eq(route("/v1/responses"), "/v1/responses");
	cr_assert_str_eq(route("/v1/models"), "/v1/*");
}

Test(route, unset_mode)
{
	configure("/users/{id}", NL_ROUTE_UNSET);
	cr_assert_eq(id_of("/other/1"), NL_ROUTE_NONE);
	cr_assert_eq(id_of("*"), NL_ROUTE_NONE);
	cr_assert_eq(id_of("/"), 10);
	cr_assert_str_eq(route("/users/1"), "/users/{id}");
	cr_assert_str_eq(route("/run?x"), "/run");
	cr_assert_eq(nl_route_lookup("/other/1", 8, true), NL_ROUTE_NONE);
	cr_assert_eq(nl_route_count(), nl_route_template_count());
}

Test(route, parse_mode)
{
	enum nl_route_unmatched m = NL_ROUTE_UNSET;
	cr_assert_eq(nl_route_parse_mode("template", &m), 0);
	cr_assert_eq(m, NL_ROUTE_TEMPLATE);
	cr_assert_eq(nl_route_parse_mode("PATH", &m), 0);
	cr_assert_eq(m, NL_ROUTE_PATH);
	cr_assert_eq(nl_route_parse_mode("wildcard", &m), 0);
	cr_assert_eq(m, NL_ROUTE_WILDCARD);
	cr_assert_eq(nl_route_parse_mode("Unset", &m), 0);
	cr_assert_eq(m, NL_ROUTE_UNSET);
	cr_assert_eq(nl_route_parse_mode("raw", &m), -1);
	cr_assert_eq(nl_route_parse_mode("", &m), -1);
	cr_assert_eq(nl_route_parse_mode(NULL, &m), -1);
	cr_assert_eq(m, NL_ROUTE_UNSET);
}

/* ---- identifiers ---------------------------------------------------------------- */

static void configure_limit(enum nl_route_unmatched mode, unsigned limit)
{
	cr_assert_eq(nl_route_configure(NULL, mode, NL_ROUTE_CAP_MAX, NULL), 0);
	cr_assert_eq(nl_route_set_segment_limit(limit), 0);
}

static void assert_segment(const char *seg, bool identifier)
{
	char target[128], want[128];
	snprintf(target, sizeof target, "/items/%s/x", seg);
	snprintf(want, sizeof want, "/items/%s/x", identifier ? "{id}" : seg);
	cr_assert_str_eq(route(target), want, "segment \"%s\"", seg);
}

Test(route, identifiers)
{
	/* The static rules alone: many words under one parent. */
	configure_limit(NL_ROUTE_TEMPLATE, 0);
	static const char *const ids[] = {
		"0", "42", "1234567890123", "2024-01-31", "1.2.3", "10.0.0.1", "-1",
		UUID, "6F1C2D3E-9A8B-4C7D-8E9F-0A1B2C3D4E5F", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
		"6f1c2d3e9a8b4c7d8e9f0a1b2c3d4e5f", "deadbeef00", "abcdef12", "ABCDEF12",
		"user1234", "abc1234", "abc123def456ghi", "abcdefghijklmno1", "gpt-4o-mini-2024-07-18",
		"sk-proj-abc12345", "hello%20world", "caf%C3%A9", "user@example.com", "a:b", "a+b", "a=b",
		"a,b", "a;b", "{id}", "*", "\xc3\xa9t\xc3\xa9", "a\x7f", "a\tb",
		"aBcDeFgHiJkLmNoP", "dGhpcyBpcyBhIHRva2Vu", "thisisaverylongsegmentwithnodigit",
		"abcdef1", "abc123",
	};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		assert_segment(ids[i], true);
	static const char *const words[] = {
		"v1", "v2", "api", "users", "chat", "completions", "sha256", "h100", "v1beta1", "x86",
		"training-token-capture", "aggregate_metrics", "getUserProfileSettings", "HelloWorldFooBar",
		"deadbeef", "deadbeefcafebabe", "abcdefghijklmn1", "README.md", "~user",
		"a-b_c.d", "..", ".", "-", "ALLCAPSWORDSHERE", "thisisalongsegmentwithnodigit",
	};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		assert_segment(words[i], false);
}

Test(route, same_route_same_id)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	int id = id_of("/users/1");
	cr_assert_geq(id, 10);
	cr_assert_eq(id_of("/users/2"), id);
	cr_assert_eq(id_of("/users/" UUID "?q"), id);
	cr_assert_eq(id_of("http://h/users/99"), id);
	cr_assert_neq(id_of("/users/1/"), id);
	cr_assert_eq(nl_route_count(), 12);
	cr_assert_str_eq(nl_route_name(id), "/users/{id}");
}

/* ---- target forms ----------------------------------------------------------------- */

Test(route, absolute_form)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("http://h:1/a/b?q"), "/a/b");
	cr_assert_str_eq(route("https://example.com/v1/responses"), "/v1/responses");
	cr_assert_str_eq(route("HTTP://h/run"), "/run");
	cr_assert_str_eq(route("http://h:1"), "/");
	cr_assert_str_eq(route("http://h:1?x=1"), "/");
	cr_assert_str_eq(route("http://user@h:1/users/7"), "/users/{id}");
	cr_assert_str_eq(route("h:443"), "(none)");
	cr_assert_str_eq(route("ftp:/x"), "(none)");
	cr_assert_str_eq(route("://x/y"), "(none)");
	cr_assert_str_eq(route("1http://x/y"), "(none)");
	cr_assert_str_eq(route("?x"), "(none)");
	cr_assert_str_eq(route(""), "(none)");
	cr_assert_eq(nl_route_lookup(NULL, 3, false), NL_ROUTE_NONE);
}

Test(route, asterisk_form)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	int id = id_of("*");
	cr_assert_geq(id, 10);
	cr_assert_str_eq(nl_route_name(id), "*");
	cr_assert_eq(id_of("*"), id);
	cr_assert_str_eq(route("**"), "(none)");
}

Test(route, truncated_targets)
{
	configure("/static/*,/files/{name}", NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route_cut("/files/abc/de", true), "/files/abc/*");
	cr_assert_str_eq(route_cut("/items/12345/de", true), "/items/{id}/*");
	cr_assert_str_eq(route_cut("/items/", true), "/items/*");
	cr_assert_str_eq(route_cut("/abcdef", true), "/*");
	cr_assert_str_eq(route_cut("/", true), "/*");
	/* The query was reached: the path is whole. */
	cr_assert_str_eq(route_cut("/items/?x=1234567", true), "/items/");
	cr_assert_str_eq(route_cut("/run?x", true), "/run");
	/* The cut segment could still be longer: "/v1/responses" is not sure. */
	cr_assert_str_eq(route_cut("/v1/responses", true), "/v1/*");
	cr_assert_str_eq(route_cut("/run", true), "/*");
	cr_assert_str_eq(route_cut("/ng-rollout/" UUID "/v1/resp", true), "/ng-rollout/{id}/v1/*");
	cr_assert_str_eq(route_cut("/ng-rollout/" UUID "/v2/x", true), "/ng-rollout/{id}/v2/*");
	/* A template that the known part decides. */
	cr_assert_str_eq(route_cut("/static/js/very-long-na", true), "/static/*");
	cr_assert_str_eq(route_cut("/stat", true), "/*");
	cr_assert_str_eq(route_cut("/files/ab", true), "/files/*");
	cr_assert_str_eq(route_cut("/files/ab/c", true), "/files/ab/*");
	/* Absolute-form cut in the authority: nothing of the path is known. */
	cr_assert_str_eq(route_cut("http://a-very-long-host", true), "/*");
	cr_assert_str_eq(route_cut("http://h/users/12345/ord", true), "/users/{id}/*");
}

Test(route, truncated_in_other_modes)
{
	configure(NULL, NL_ROUTE_PATH);
	cr_assert_str_eq(route_cut("/a/b/cdef", true), "/a/b/*");
	cr_assert_str_eq(route_cut("/a/b/cdef?", true), "/a/b/cdef");
	configure(NULL, NL_ROUTE_WILDCARD);
	cr_assert_str_eq(route_cut("/static/app", true), "/static/*");
	cr_assert_str_eq(route_cut("/stat", true), "/*");
}

Test(route, long_results_end_in_a_wildcard)
{
	configure(NULL, NL_ROUTE_PATH);
	char path[256] = "", want[256] = "";
	for (int i = 0; i < 20; i++)
		strcat(path, "/abcdefghi");
	for (int i = 0; i < 12; i++)
		strcat(want, "/abcdefghi");
	strcat(want, "/*");
	cr_assert_str_eq(route(path), want);

	configure(NULL, NL_ROUTE_TEMPLATE);
	path[0] = want[0] = 0;
	for (int i = 0; i < 60; i++)
		strcat(path, "/1");
	for (int i = 0; i < 24; i++)
		strcat(want, "/{id}");
	strcat(want, "/*");
	cr_assert_str_eq(route(path), want);
	/* 25 "/{id}" are 125 characters: they fit. */
	path[0] = want[0] = 0;
	for (int i = 0; i < 25; i++) {
		strcat(path, "/1");
		strcat(want, "/{id}");
	}
	cr_assert_str_eq(route(path), want);
	/* One long segment in path mode leaves "/\*". */
	configure(NULL, NL_ROUTE_PATH);
	memset(path, 'a', 200);
	path[0] = '/';
	path[200] = 0;
	cr_assert_str_eq(route(path), "/*");
}

/* ---- the cap -------------------------------------------------------------------- */

Test(route, cap_reached_overflows)
{
	cr_assert_eq(nl_route_configure(NULL, NL_ROUTE_PATH, 12, NULL), 0);
	cr_assert_eq(id_of("/a"), 10);
	cr_assert_eq(id_of("/b"), 11);
	cr_assert_eq(id_of("/c"), NL_ROUTE_OVERFLOW);
	cr_assert_eq(id_of("*"), NL_ROUTE_OVERFLOW);
	cr_assert_eq(id_of("/a?x"), 10);
	cr_assert_eq(id_of("/b"), 11);
	cr_assert_eq(id_of("/run"), 0);
	cr_assert_eq(nl_route_count(), 12);
	cr_assert_null(nl_route_name(12));
	cr_assert_null(nl_route_name(NL_ROUTE_OVERFLOW));
	cr_assert_null(nl_route_name(NL_ROUTE_NONE));
}

Test(route, cap_below_the_templates)
{
	cr_assert_eq(nl_route_configure("/x", NL_ROUTE_PATH, 1, NULL), 0);
	cr_assert_eq(nl_route_count(), 11);
	cr_assert_eq(id_of("/x"), 0);
	cr_assert_eq(id_of("/run"), 1);
	cr_assert_eq(id_of("/y"), NL_ROUTE_OVERFLOW);
	cr_assert_eq(nl_route_configure(NULL, NL_ROUTE_PATH, 0, NULL), 0);
	cr_assert_eq(id_of("/y"), NL_ROUTE_OVERFLOW);
	cr_assert_eq(id_of("/"), 9);
}

Test(route, not_configured)
{
	cr_assert_eq(id_of("/run"), NL_ROUTE_NONE);
	cr_assert_null(nl_route_name(0));
	cr_assert_eq(nl_route_count(), 0);
}

Test(route, reconfigure_replaces)
{
	configure("/a/{b}", NL_ROUTE_TEMPLATE);
	cr_assert_str_eq(route("/a/1"), "/a/{b}");
	configure(NULL, NL_ROUTE_PATH);
	cr_assert_str_eq(route("/a/1"), "/a/1");
	cr_assert_eq(id_of("/a/1"), 10);
}

/* ---- threads ---------------------------------------------------------------------- */

#define N_THREADS 4
#define N_PATHS 2000
#define THREAD_CAP 500

static int seen[N_THREADS][N_PATHS];

static void path_of(int k, char *buf, size_t size)
{
	snprintf(buf, size, "/p/%d", k);
}

static void *lookup_all(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < N_PATHS; i++) {
			/* Each thread its own order (a step prime to N_PATHS visits
			 * every path), so insertions race everywhere. */
			static const int step[N_THREADS] = { 1, 3, 7, 9 };
			int k = (i * step[t] + t * 517) % N_PATHS;
			char buf[32];
			path_of(k, buf, sizeof buf);
			int id = nl_route_lookup(buf, strlen(buf), false);
			if (round == 0 || seen[t][k] == NL_ROUTE_OVERFLOW)
				seen[t][k] = id;
			else if (id != NL_ROUTE_OVERFLOW && id != seen[t][k])
				seen[t][k] = -100;      /* an id changed */
			/* Names of ids just taken may be read while they are written. */
			unsigned n = nl_route_count();
			const char *name = nl_route_name((int)n - 1);
			if (name && name[0] != '/')
				seen[t][k] = -101;
		}
	return NULL;
}

Test(route, threads_agree_on_ids)
{
	cr_assert_eq(nl_route_configure(NULL, NL_ROUTE_PATH, THREAD_CAP, NULL), 0);
	pthread_t th[N_THREADS];
	for (int t = 0; t < N_THREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, lookup_all, (void *)(intptr_t)t), 0);
	for (int t = 0; t < N_THREADS; t++)
		pthread_join(th[t], NULL);

	unsigned dynamic = THREAD_CAP - 10;
	cr_assert_eq(nl_route_count(), THREAD_CAP);
	static bool used[THREAD_CAP];
	unsigned distinct = 0;
	for (int k = 0; k < N_PATHS; k++) {
		char buf[32];
		path_of(k, buf, sizeof buf);
		int id = nl_route_lookup(buf, strlen(buf), false);
		for (int t = 0; t < N_THREADS; t++) {
			int s = seen[t][k];
			cr_assert(s == NL_ROUTE_OVERFLOW || s == id, "thread %d: %s got %d, now %d", t, buf, s, id);
		}
		if (id == NL_ROUTE_OVERFLOW)
			continue;
		cr_assert(id >= 10 && id < THREAD_CAP, "%s: id %d", buf, id);
		cr_assert_not(used[id], "id %d twice", id);
		used[id] = true;
		cr_assert_str_eq(nl_route_name(id), buf);
		distinct++;
	}
	/* Every id went to a path: an insertion that lost the race for the last
	 * id takes none. */
	cr_assert_eq(distinct, dynamic);
}

/* ---- tokens inside a segment -------------------------------------------------- */

Test(route, identifier_tokens)
{
	/* The static rules alone: many words under one parent. */
	configure_limit(NL_ROUTE_TEMPLATE, 0);
	/* One rule each: a number of two digits or more; 6+ hex with a digit; a
	 * UUID, a ULID; letters and digits with 4+ digits or 16+ characters. */
	static const char *const ids[] = {
		"run-2026-11-03-k2", "27-eced8ded", "1-c3baea9e", "item_42", "v1.10", "x86_64", "page-10",
		"24ede6a", "eced8ded", "0a1b2c", "ABC123", "build-9f8e7d", "sha-1a2b3c4d",
		("order-" UUID), "01ARZ3NDEKTSV4RRFFQ69G5FAV", "01arz3ndektsv4rrffq69g5fav", "job~user1234",
		"a1b2c3d4e5f6g7h8", "report.2026", "k2-1234",
	};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		assert_segment(ids[i], true);
	/* Versions, sizes, short hashes of fewer than 6 hex, hex without a digit. */
	static const char *const words[] = {
		"v1", "v2beta1", "h100", "gpt-4o", "llama-3-8b", "training-token-capture", "gpt-4o-mini",
		"meta-llama-3.1-8b-instruct", "qwen2.5-7b", "a1-b2-c3-d4", "abc12", "face-off", "decade",
		"v1_2", "e2e", "x86", "k3j9x2", "s3", "ipv6",
	};
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
		assert_segment(words[i], false);
}

/* ---- learned positions ---------------------------------------------------------- */

static const char *const NAMES[] = {
	"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
	"mallory", "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe",
};

Test(route, a_position_past_the_limit_is_a_parameter)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	char t[64], want[64];
	/* The first 10 distinct values keep their routes, also when seen again. */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 10; i++) {
			snprintf(t, sizeof t, "/items/%s", NAMES[i]);
			cr_assert_str_eq(route(t), t);
		}
	/* The 11th and every later new value is {id}, again and again. */
	for (int round = 0; round < 2; round++)
		for (int i = 10; i < 20; i++) {
			snprintf(t, sizeof t, "/items/%s?x=1", NAMES[i]);
			cr_assert_str_eq(route(t), "/items/{id}", "%s", t);
		}
	cr_assert_str_eq(route("/items/alice"), "/items/alice");
	/* What the static rules make {id} does not count. */
	cr_assert_str_eq(route("/things/42"), "/things/{id}");
	/* Deeper positions hang under the route so far. */
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/items/%s/orders", NAMES[i]);
		snprintf(want, sizeof want, "/items/%s/orders", i < 10 ? NAMES[i] : "{id}");
		cr_assert_str_eq(route(t), want);
	}
	cr_assert_str_eq(route("/items/zoe/orders/" UUID), "/items/{id}/orders/{id}");
}

Test(route, the_limit_is_per_parent)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	char t[64], want[64];
	/* 10 values under each of /a/x and /a/y, and 10 children of /b: all kept. */
	for (int i = 0; i < 10; i++) {
		snprintf(t, sizeof t, "/a/x/%s", NAMES[i]);
		cr_assert_str_eq(route(t), t);
		snprintf(t, sizeof t, "/a/y/%s", NAMES[i + 10]);
		cr_assert_str_eq(route(t), t);
		snprintf(t, sizeof t, "/b/%s/leaf", NAMES[i]);
		cr_assert_str_eq(route(t), t);
	}
	/* The 11th under /a/x only. */
	cr_assert_str_eq(route("/a/x/zed"), "/a/x/{id}");
	cr_assert_str_eq(route("/a/y/alice"), "/a/y/{id}");
	cr_assert_str_eq(route("/a/z/alice"), "/a/z/alice");
	snprintf(want, sizeof want, "/b/{id}/leaf");
	cr_assert_str_eq(route("/b/zed/leaf"), want);
	/* A trailing slash is an empty segment, which stays: not a value. */
	cr_assert_str_eq(route("/a/x/"), "/a/x/");
	/* Fixed paths under a few parents stay exactly as they are. */
	static const char *const fixed[] = { "/health", "/metrics", "/v1/models", "/api/v2/status", "/docs",
					     "/openapi.json" };
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		cr_assert_str_eq(route(fixed[i]), fixed[i]);
	/* The root has now shown a, b, health, metrics, v1, api, docs,
	 * openapi.json: two more are kept, then new ones are {id}. */
	cr_assert_str_eq(route("/c"), "/c");
	cr_assert_str_eq(route("/d/e"), "/d/e");
	cr_assert_str_eq(route("/f/e"), "/{id}/e");
	cr_assert_str_eq(route("/health"), "/health");
	cr_assert_str_eq(route("/v1/models"), "/v1/models");
}

Test(route, the_limit_is_configurable)
{
	configure_limit(NL_ROUTE_TEMPLATE, 2);
	cr_assert_str_eq(route("/u/alice"), "/u/alice");
	cr_assert_str_eq(route("/u/bob"), "/u/bob");
	cr_assert_str_eq(route("/u/carol"), "/u/{id}");
	/* 0: the static rules alone. */
	configure_limit(NL_ROUTE_TEMPLATE, 0);
	char t[64];
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/u/%s", NAMES[i]);
		cr_assert_str_eq(route(t), t);
	}
	/* Other modes do not learn. */
	configure(NULL, NL_ROUTE_WILDCARD);
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/%s/x", NAMES[i]);
		snprintf(t + 40, 24, "/%s/*", NAMES[i]);
		cr_assert_str_eq(route(t), t + 40);
	}
	configure(NULL, NL_ROUTE_PATH);
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/u/%s", NAMES[i]);
		cr_assert_str_eq(route(t), t);
	}
	/* Templates are matched before anything is learned. */
	configure("/u/{name}", NL_ROUTE_TEMPLATE);
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/u/%s", NAMES[i]);
		cr_assert_str_eq(route(t), "/u/{name}");
	}
	configure(NULL, NL_ROUTE_TEMPLATE);
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/run/%s", NAMES[i]);
		cr_assert_str_eq(route(t), i < 10 ? t : "/run/{id}");
	}
	cr_assert_str_eq(route("/run"), "/run");
	/* A cut-off segment is not a value. */
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/cut/%s", NAMES[i]);
		cr_assert_str_eq(route_cut(t, true), "/cut/*");
	}
	cr_assert_str_eq(route("/cut/x"), "/cut/x");
}

Test(route, full_tables_leave_the_static_rules)
{
	/* With a limit of 2, each position keeps x and y and makes z {id}: the
	 * 3^8 paths of 8 segments from x, y, z meet 3280 parents, more than the
	 * table holds. */
	configure_limit(NL_ROUTE_TEMPLATE, 2);
	char t[64];
	for (int k = 0; k < 6561; k++) {
		size_t n = 0;
		for (int d = 0, v = k; d < 8; d++, v /= 3)
			n += (size_t)snprintf(t + n, sizeof t - n, "/%c", "xyz"[v % 3]);
		cr_assert_neq(id_of(t), NL_ROUTE_OVERFLOW);
	}
	cr_assert_str_eq(route("/x/y/z/x/y/z/x/y"), "/x/y/{id}/x/y/{id}/x/y");
	/* A new parent finds no room: its values stay what the static rules
	 * make of them, past the limit. */
	for (int i = 0; i < 20; i++) {
		snprintf(t, sizeof t, "/x/x/x/x/x/x/x/x/%s", NAMES[i]);
		cr_assert_str_eq(route(t), t);
	}
	cr_assert_str_eq(route("/x/x/x/x/x/x/x/x/42"), "/x/x/x/x/x/x/x/x/{id}");
	/* Known positions still learn. */
	cr_assert_str_eq(route("/x/alice"), "/x/{id}");
	cr_assert_str_eq(route("/x/y"), "/x/y");
}

#define LEARN_THREADS 4
static int learn_ids[LEARN_THREADS][200];

static void *learn_all(void *arg)
{
	int th = (int)(intptr_t)arg;
	for (int i = 0; i < 200; i++) {
		int k = (i * 7 + th * 31) % 200;
		char t[32];
		snprintf(t, sizeof t, "/m/w%c%c", 'a' + k / 26, 'a' + k % 26);
		learn_ids[th][k] = nl_route_lookup(t, strlen(t), false);
	}
	return NULL;
}

Test(route, threads_learn_one_limit)
{
	configure(NULL, NL_ROUTE_TEMPLATE);
	pthread_t th[LEARN_THREADS];
	for (int t = 0; t < LEARN_THREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, learn_all, (void *)(intptr_t)t), 0);
	for (int t = 0; t < LEARN_THREADS; t++)
		pthread_join(th[t], NULL);
	/* At most 10 raw routes and {id}, whatever the interleaving. */
	unsigned raw = 0;
	for (int k = 0; k < 200; k++) {
		const char *name = nl_route_name(learn_ids[0][k]);
		cr_assert_not_null(name);
		if (strcmp(name, "/m/{id}") != 0)
			raw++;
	}
	cr_assert_leq(raw, 10);
	cr_assert_geq(raw, 9);
	cr_assert_leq(nl_route_count(), nl_route_template_count() + 12);
}
