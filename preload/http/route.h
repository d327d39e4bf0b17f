/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP routes: the low-cardinality http.route value for a request target.
 *
 * A request's target is mapped to a route id, in this order:
 *
 *   1. the templates configured in NEMOLENS_HTTP_ROUTES, first match wins;
 *   2. the built-in NeMo Gym routes, so a Gym server gets FastAPI's own
 *      templates with no configuration (NL_ROUTE_BUILTINS below);
 *   3. anything else by the unmatched mode (enum nl_route_unmatched).
 *
 * (In these comments "/\*" is a slash and a star, which a C comment cannot
 * hold as such.)
 *
 * Templates are matched against the path, without the query (from '?') or a
 * fragment (from '#', which clients should not send):
 *
 *   literal     matches that segment exactly (bytes as sent: no decoding)
 *   {name}      matches exactly one non-empty segment
 *   *           only as the last segment: matches the rest, zero or more
 *               segments ("/static/\*" matches "/static", "/static/" and
 *               "/static/a/b")
 *
 * The match is strict, as FastAPI's is: "/users/1/" does not match
 * "/users/{id}", and an empty segment ("//") is a segment of its own, so
 * "//v1/responses" (a client joining "http://h/" and "/v1/responses") does
 * not match "/v1/responses" either and shows as what it is.
 *
 * A target is taken as it arrived on the wire: origin-form ("/a/b?q"),
 * absolute-form ("http://h:1/a?q", reduced to its path; no path is "/") or
 * "*" (OPTIONS *, route "*"). Anything else (CONNECT's authority-form, junk)
 * has no route. A target the capture cut short (truncated) whose query was
 * not reached has a partial last segment: it is dropped and the route ends
 * in "/\*" ("/files/ab" cut short: "/files/\*"). A template decides such a
 * target only when the known part decides it ("/files/\*" does; "/files/{n}"
 * does not), and matching stops at the first template that cannot tell.
 *
 * Route names are at most NL_ROUTE_NAME_MAX characters of printable ASCII,
 * beginning with '/' (or "*"). A longer result is cut at a segment boundary
 * and ends in "/\*". Results are interned in a table preallocated by
 * nl_route_configure: the same name always has the same id, templates (the
 * configured ones, then the built-ins) have the lowest ids, and once the table
 * holds cap routes a new one is NL_ROUTE_OVERFLOW, which the caller records in
 * its overflow series (otel.metric.overflow=true).
 */
#ifndef NL_ROUTE_H
#define NL_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#define NL_ROUTE_NAME_MAX 125           /* characters in a route name */
#define NL_ROUTE_TEMPLATES_MAX 256      /* configured templates; more are skipped */
#define NL_ROUTE_SEGMENTS_MAX 32        /* segments in a template */
#define NL_ROUTE_CAP_MAX 65536          /* a larger cap is lowered to this */
#define NL_ROUTE_CAP_DEFAULT 256        /* a sensible cap for callers to default to */

#define NL_ROUTE_SEGMENT_LIMIT_DEFAULT 10  /* distinct values a position may show */
#define NL_ROUTE_SEGMENT_LIMIT_MAX 100      /* a larger limit is lowered to this */
#define NL_ROUTE_POSITIONS 1024             /* positions learned; more: the static rules */

#define NL_ROUTE_NONE (-1)      /* no http.route attribute for this request */
#define NL_ROUTE_OVERFLOW (-2)  /* past the cap: record into the overflow series */

/* FastAPI's templates for NeMo Gym servers (resources, agents, the model
 * proxy), matched after the configured ones. */
#define NL_ROUTE_BUILTINS \
	"/run,/verify,/seed_session,/aggregate_metrics,/v1/responses,/v1/chat/completions," \
	"/v1/messages,/ng-rollout/{rollout_id}/v1/responses," \
	"/ng-rollout/{rollout_id}/training-token-capture/v1/responses,/"

/* What an unmatched target becomes (NEMOLENS_HTTP_ROUTE_UNMATCHED). */
enum nl_route_unmatched {
	/* The path with its identifiers replaced by "{id}" (the default):
	 * "/users/42/orders?x=1" is "/users/{id}/orders". A segment is an
	 * identifier when it is not empty and any of:
	 *   - it has a byte other than A-Z a-z 0-9 - . _ ~ (percent-encoded
	 *     text, '@', ':', '+', '=', ',', braces, non-ASCII, controls);
	 *   - it is 32 characters or longer (a UUID, 32-digit hex);
	 *   - it has a digit and no letter ("7", "42", "2024-01-31", "1.2.3",
	 *     "10.0.0.1");
	 *   - one of its tokens, the runs between '-', '.', '_' and '~', is a
	 *     number of 2 digits or more ("run-2026-11-03-k2", "27-eced8ded",
	 *     "x86_64"), hex of 6 digits or more with a decimal digit among them
	 *     ("24ede6a", "1-c3baea9e", "abc123"), or letters and digits with 4
	 *     digits or more or 16 characters or more ("user1234", a ULID);
	 *   - it is 16 characters or longer with upper and lower case letters,
	 *     each a third of its letters or more (a base64 token without a
	 *     digit; camelCase words have fewer capitals).
	 * So words with a version or a size stay words: "v1", "v2beta1",
	 * "h100", "sha256", "gpt-4o", "llama-3-8b", "training-token-capture",
	 * "deadbeef" (hex without a digit). Empty segments stay.
	 *
	 * Then what the rules keep is learned (nl_route_set_segment_limit): a
	 * position (a segment's place under the route before it, its parent)
	 * that has shown more distinct values than the limit is a parameter
	 * for every value it had not shown by then: "/items/alice" to
	 * "/items/judy" (10) keep their routes, "/items/mallory" and every
	 * later new one is "/items/{id}". */
	NL_ROUTE_TEMPLATE,
	/* The path without the query, as is (bytes outside '!'..'~' written
	 * as %XX). For servers whose paths are few and fixed. */
	NL_ROUTE_PATH,
	/* The first segment (an identifier there is "{id}" too) then "/\*":
	 * "/static/app.js" is "/static/\*", "/" stays "/". */
	NL_ROUTE_WILDCARD,
	/* No http.route (NL_ROUTE_NONE), as OpenTelemetry's convention has it
	 * when no framework supplies one. Templates still match. */
	NL_ROUTE_UNSET,
};

/* Sets up routes from patterns (NEMOLENS_HTTP_ROUTES: comma-separated
 * templates, blanks around each ignored; NULL or "" means none) and replaces
 * any earlier set-up. A bad pattern (not beginning with '/', a brace that is
 * not a whole "{name}" segment, '*' other than as the whole last segment, a
 * space, control or non-ASCII byte, '?' or '#', empty, longer than
 * NL_ROUTE_NAME_MAX or NL_ROUTE_SEGMENTS_MAX segments, past
 * NL_ROUTE_TEMPLATES_MAX) is skipped, reported to warn when it is not NULL
 * (the pattern as a string, and why) and counted; the others still apply.
 * cap is the most distinct routes, templates and built-ins included (raised
 * to their number when smaller, lowered to NL_ROUTE_CAP_MAX). Allocates; not
 * thread-safe: call before anything looks up. Returns the number of bad
 * patterns, or -1 when memory ran out (then nothing has a route). */
int nl_route_configure(const char *patterns, enum nl_route_unmatched mode, unsigned cap,
		       void (*warn)(const char *pattern, const char *why));

/* Sets how many distinct values a path position may show before its new
 * values are "{id}" (template mode; NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT), 0 for
 * no learning: the static rules alone. nl_route_configure sets
 * NL_ROUTE_SEGMENT_LIMIT_DEFAULT; call this after it, before anything looks
 * up, to change it. What was learned is forgotten. Learning keeps
 * NL_ROUTE_POSITIONS positions (a parent route and where its segment is) and
 * their values in tables preallocated here; a position that finds no room
 * has the static rules only. Allocates; not thread-safe. Returns 0, or -1
 * when memory ran out (then no learning). */
int nl_route_set_segment_limit(unsigned limit);

/* Parses a mode name, "template", "path", "wildcard" or "unset" in any
 * case: 0 and *out set, or -1 when s is none of them. */
int nl_route_parse_mode(const char *s, enum nl_route_unmatched *out);

/* The route id (>= 0) of a request target of len bytes (not NUL-terminated),
 * truncated when the capture cut it short; NL_ROUTE_NONE for no route (also
 * before nl_route_configure), NL_ROUTE_OVERFLOW past the cap. Lock-free,
 * allocation-free and async-signal-safe; any number of threads may call it
 * at once. A lookup that meets another thread (or the code it interrupted)
 * inserting the same new route waits a bounded while for it, then gives
 * NL_ROUTE_OVERFLOW rather than wait longer. */
int nl_route_lookup(const char *target, size_t len, bool truncated);

/* The name of a route id, stable for the life of the set-up; NULL for
 * NL_ROUTE_NONE, NL_ROUTE_OVERFLOW, ids out of range and an id whose
 * insertion another thread has not finished. */
const char *nl_route_name(int id);

/* Ids 0..nl_route_count()-1 are taken (a few may not have a name yet: see
 * nl_route_name); the first nl_route_template_count() are templates. */
unsigned nl_route_count(void);
unsigned nl_route_template_count(void);

/* Frees the set-up; lookups have no route until the next configure. For
 * tests: nothing may be looking up meanwhile. */
void nl_route_reset(void);

#endif
