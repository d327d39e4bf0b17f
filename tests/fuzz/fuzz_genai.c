/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the GenAI body scanner (preload/http/genai.c) and checks that it
 * never reports a value that is not at one of its paths.
 *
 * Input: the first byte picks the mode, the rest drives it.
 * - Raw: the bytes are a body, fed in pieces the input chooses (nothing to
 *   check but memory safety and the scanner's own bounds).
 * - Built: the bytes drive a generator of valid JSON documents made of the
 *   keys the scanner looks for and others, at any depth, with strings that
 *   hold JSON text, escapes, and long values. The generator writes down the
 *   path of every scalar it places; the document is fed whole, and in
 *   pieces, as a body and as the data of an event stream, and every field
 *   the scanner reports must be one of the values placed at one of the
 *   paths that field is documented to come from (a truncated one, a prefix
 *   of one).
 * - Repeats (a built document): the document, then the same with a few
 *   bytes replaced, then the first again, as the data of three events, fed
 *   whole and one byte per call: everything reported must be the same
 *   (whole, a line may be found to repeat the one before instead of read). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai.h"

/* ---- the input, as a stream of choices ---------------------------------------- */

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned pick(struct in *in, unsigned k)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++ % k;
}

/* ---- the generator ------------------------------------------------------------ */

#define DOC_MAX 8192
#define PLACED_MAX 256

struct placed {
	char path[96];
	char value[128];        /* a string's raw bytes between its quotes, or a number's digits */
	bool string;
};

struct gen {
	char doc[DOC_MAX];
	size_t len;
	bool full;
	struct placed placed[PLACED_MAX];
	unsigned n_placed;
	unsigned nodes;
};

static const char *const keys[] = {
	"model", "stream", "usage", "choices", "type", "code", "status", "stop_reason", "incomplete_details",
	"error", "delta", "response", "message", "prompt_tokens", "completion_tokens", "input_tokens",
	"output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "completion_tokens_details",
	"output_tokens_details", "reasoning_tokens", "finish_reason", "reason", "content", "x", "usagex", "mod\\u0065l",
};

static const char *const strings[] = {
	"m1", "", "stop", "error", "response.output_text.delta", "content_block_delta", "completed",
	"{\\\"usage\\\":{\\\"prompt_tokens\\\":5}}", "a\\\"b", "\\\\", "\\u0041x", "[DONE]", "}]{[,:",
	"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	"length", "end_turn",
};

static const char *const numbers[] = { "0", "7", "12345", "-3", "1.5", "2e3", "99999999999999999999", "42" };

static void out(struct gen *g, const char *s)
{
	size_t n = strlen(s);
	if (g->len + n >= DOC_MAX) {
		g->full = true;
		return;
	}
	memcpy(g->doc + g->len, s, n);
	g->len += n;
}

static void place(struct gen *g, const char *path, const char *value, bool string)
{
	if (g->n_placed == PLACED_MAX)
		return;
	struct placed *pl = &g->placed[g->n_placed++];
	snprintf(pl->path, sizeof pl->path, "%s", path);
	snprintf(pl->value, sizeof pl->value, "%s", value);
	pl->string = string;
}

static void value(struct gen *g, struct in *in, const char *path, unsigned depth);

static void object(struct gen *g, struct in *in, const char *path, unsigned depth)
{
	out(g, "{");
	unsigned n = pick(in, 5);
	for (unsigned i = 0; i < n && !g->full; i++) {
		if (i)
			out(g, pick(in, 2) ? "," : " ,\n ");
		const char *k = keys[pick(in, sizeof keys / sizeof *keys)];
		out(g, "\"");
		out(g, k);
		out(g, "\":");
		char sub[96];
		snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
		value(g, in, sub, depth + 1);
	}
	out(g, "}");
}

static void value(struct gen *g, struct in *in, const char *path, unsigned depth)
{
	if (++g->nodes > 400 || depth > 6) {
		out(g, "null");
		return;
	}
	switch (pick(in, 7)) {
	case 0:
		object(g, in, path, depth);
		break;
	case 1: {
		out(g, "[");
		unsigned n = pick(in, 4);
		char sub[96];
		snprintf(sub, sizeof sub, "%s[]", path);
		for (unsigned i = 0; i < n && !g->full; i++) {
			if (i)
				out(g, ",");
			value(g, in, sub, depth + 1);
		}
		out(g, "]");
		break;
	}
	case 2:
	case 3: {
		const char *s = strings[pick(in, sizeof strings / sizeof *strings)];
		out(g, "\"");
		out(g, s);
		out(g, "\"");
		place(g, path, s, true);
		break;
	}
	case 4: {
		const char *s = numbers[pick(in, sizeof numbers / sizeof *numbers)];
		out(g, s);
		place(g, path, s, false);
		break;
	}
	case 5:
		out(g, pick(in, 2) ? "true" : "false");
		break;
	default:
		out(g, "null");
	}
}

/* ---- the check ---------------------------------------------------------------- */

/* Whether text[0..n) (truncated: a prefix) is a value placed at one of the
 * paths, each taken at the top level and inside response and message. */
static bool placed_at(const struct gen *g, const char *const *paths, const char *text, size_t n, bool truncated,
		      bool string)
{
	static const char *const roots[] = { "", "response.", "message." };
	for (unsigned i = 0; i < g->n_placed; i++) {
		const struct placed *pl = &g->placed[i];
		if (pl->string != string)
			continue;
		size_t len = strlen(pl->value);
		if (truncated ? len < n || memcmp(pl->value, text, n) : len != n || memcmp(pl->value, text, n))
			continue;
		for (const char *const *p = paths; *p; p++)
			for (unsigned r = 0; r < 3; r++) {
				char full[96];
				snprintf(full, sizeof full, "%s%s", roots[r], *p);
				if (strcmp(full, pl->path) == 0)
					return true;
			}
	}
	return false;
}

#define PATHS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void check_str(const struct gen *g, const char *const *paths, const char *text, size_t n, bool truncated,
		      const char *what)
{
	if (!n && !truncated)
		return;
	if (!placed_at(g, paths, text, n, truncated, true)) {
		fprintf(stderr, "%s \"%.*s\" is at none of its paths in:\n%.*s\n", what, (int)n, text, (int)g->len, g->doc);
		abort();
	}
}

static void check_num(const struct gen *g, const char *const *paths, int64_t v, const char *what)
{
	if (v < 0)
		return;
	char text[32];
	int n = snprintf(text, sizeof text, "%lld", (long long)v);
	if (!placed_at(g, paths, text, (size_t)n, false, false)) {
		fprintf(stderr, "%s %lld is at none of its paths in:\n%.*s\n", what, (long long)v, (int)g->len, g->doc);
		abort();
	}
}

static void check(const struct gen *g, const struct nl_genai_result *r)
{
	check_str(g, PATHS("model"), r->model.text, r->model.len, r->model.truncated, "model");
	check_str(g, PATHS("choices[].finish_reason", "stop_reason", "delta.stop_reason"), r->finish.text, r->finish.len,
		  r->finish.truncated, "finish");
	check_str(g, PATHS("status"), r->status.text, r->status.len, r->status.truncated, "status");
	check_str(g, PATHS("incomplete_details.reason"), r->incomplete.text, r->incomplete.len, r->incomplete.truncated,
		  "incomplete");
	check_str(g, PATHS("code", "error.type", "error.code"), r->error_type.text, r->error_type.len,
		  r->error_type.truncated, "error type");
	check_num(g, PATHS("usage.prompt_tokens"), r->prompt_tokens, "prompt_tokens");
	check_num(g, PATHS("usage.completion_tokens"), r->completion_tokens, "completion_tokens");
	check_num(g, PATHS("usage.input_tokens"), r->input_tokens, "input_tokens");
	check_num(g, PATHS("usage.output_tokens"), r->output_tokens, "output_tokens");
	check_num(g, PATHS("usage.cache_read_input_tokens"), r->cache_read, "cache_read");
	check_num(g, PATHS("usage.cache_creation_input_tokens"), r->cache_creation, "cache_creation");
	check_num(g, PATHS("usage.completion_tokens_details.reasoning_tokens",
			   "usage.output_tokens_details.reasoning_tokens"),
		  r->reasoning_tokens, "reasoning_tokens");
}

/* Feeds s with body[0..n) in pieces of sizes the input picks (0: whole). */
static void feed(struct nl_genai_scan *s, const char *body, size_t n, unsigned step)
{
	for (size_t at = 0; at < n;) {
		size_t k = step ? step : n;
		if (k > n - at)
			k = n - at;
		nl_genai_feed(s, body + at, k);
		at += k;
	}
	nl_genai_end(s);
}

static void same(const struct nl_genai_result *a, const struct nl_genai_result *b)
{
	/* (content and events aside, which say when, not what) */
	if (a->prompt_tokens != b->prompt_tokens || a->completion_tokens != b->completion_tokens ||
	    a->input_tokens != b->input_tokens || a->output_tokens != b->output_tokens ||
	    a->reasoning_tokens != b->reasoning_tokens || a->error != b->error || a->model.len != b->model.len ||
	    memcmp(a->model.text, b->model.text, a->model.len) || a->finish.len != b->finish.len ||
	    memcmp(a->finish.text, b->finish.text, a->finish.len))
		abort();        /* the split changed what was read */
}

/* Everything a scan reports, for the comparisons of the repeats mode. */
static void same_all(const struct nl_genai_scan *a, const struct nl_genai_scan *b)
{
	const struct nl_genai_result *x = &a->r, *y = &b->r;
	same(x, y);
	if (x->cache_read != y->cache_read || x->cache_creation != y->cache_creation || x->stream != y->stream ||
	    x->kind != y->kind || x->content != y->content || x->done != y->done || x->events != y->events ||
	    x->status.len != y->status.len || memcmp(x->status.text, y->status.text, x->status.len) ||
	    x->incomplete.len != y->incomplete.len || memcmp(x->incomplete.text, y->incomplete.text, x->incomplete.len) ||
	    x->error_type.len != y->error_type.len || memcmp(x->error_type.text, y->error_type.text, x->error_type.len))
		abort();
}

/* The repeats mode: a document, then the same with a few bytes replaced
 * (in a string's contents or anywhere), then the first again, as the data
 * of three events. Fed whole, the later lines may be found to repeat the
 * ones before; one byte per call, every line is read: the same either way. */
static void repeats(const struct gen *g, struct in *in)
{
	static const char alphabet[] = "aZ09 \"\\{}[]:,.-tfn";
	static char ev[3 * DOC_MAX + 64], line[DOC_MAX];
	memcpy(line, g->doc, g->len);
	for (size_t i = 0; i < g->len; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	size_t at = g->len ? pick(in, 251) * g->len / 251 : 0, cut = pick(in, 4), put = pick(in, 5);
	if (cut > g->len - at)
		cut = g->len - at;
	char mid[8];
	for (size_t i = 0; i < put; i++)
		mid[i] = alphabet[pick(in, sizeof alphabet - 1)];
	int n = snprintf(ev, sizeof ev, "data: %.*s\n\ndata: %.*s%.*s%.*s\n\ndata: %.*s\n\n", (int)g->len, line, (int)at,
			 line, (int)put, mid, (int)(g->len - at - cut), line + at + cut, (int)g->len, line);
	if (n < 0 || (size_t)n >= sizeof ev)
		return;
	static struct nl_genai_scan whole, bytes;
	nl_genai_init(&whole);
	feed(&whole, ev, (size_t)n, 0);
	nl_genai_init(&bytes);
	feed(&bytes, ev, (size_t)n, 1);
	same_all(&whole, &bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	struct in in = { data + 2, size - 2 };
	unsigned step = data[1] % 17;
	struct nl_genai_scan s, t;
	if (data[0] & 1) {
		nl_genai_init(&s);
		feed(&s, (const char *)in.p, in.n, step);
		nl_genai_init(&t);
		feed(&t, (const char *)in.p, in.n, 0);
		if (s.r.kind != NL_GENAI_KIND_UNREAD)
			same(&s.r, &t.r);
		return 0;
	}
	static struct gen g;
	memset(&g, 0, sizeof g);
	object(&g, &in, "", 0);
	if (g.full)
		return 0;
	if (data[0] & 2) {
		repeats(&g, &in);
		return 0;
	}
	nl_genai_init(&s);
	feed(&s, g.doc, g.len, 0);
	check(&g, &s.r);
	nl_genai_init(&t);
	feed(&t, g.doc, g.len, step);
	same(&s.r, &t.r);
	/* The same document as the data of an event; the generator writes no CR
	 * or LF inside strings, and the LFs between values are whitespace. */
	static char ev[DOC_MAX + 64];
	int n = snprintf(ev, sizeof ev, "event: x\ndata: %.*s\n\ndata: [DONE]\n\n", (int)g.len, g.doc);
	for (char *c = ev + 15; c < ev + 15 + g.len; c++)
		if (*c == '\n')
			*c = ' ';
	nl_genai_init(&t);
	feed(&t, ev, (size_t)n, step);
	check(&g, &t.r);
	same(&s.r, &t.r);
	if (!t.r.done)
		abort();
	return 0;
}
