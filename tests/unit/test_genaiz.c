/* SPDX-License-Identifier: Apache-2.0 */
/* Model-call bodies compressed with gzip, zlib and raw deflate, through the
 * inflating path (preload/follow/genaiz.c): compressed here with zlib, fed split at
 * every offset, and read as the same fields the plain text says, written
 * here by hand; a corrupt stream and a full pool read as unread. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "genaiz.h"

static const char body_json[] =
	"{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"model\":\"policy\","
	"\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hello hello hello\"},"
	"\"finish_reason\":\"length\"}],"
	"\"usage\":{\"prompt_tokens\":12,\"total_tokens\":17,\"completion_tokens\":5}}";

static const char body_sse[] =
	"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},"
	"\"finish_reason\":null}]}\n\n"
	"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},"
	"\"finish_reason\":null}]}\n\n"
	"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n"
	"data: [DONE]\n\n";

/* The first chunk with a choice is the first content: the scanner tells
 * it once it has the choice's first byte, plain bytes up to here. */
static size_t first_content_end(void)
{
	return (size_t)(strstr(body_sse, "[{\"index\"") - body_sse) + 2;
}

/* len bytes of text compressed with deflateInit2's window bits wbits. */
static size_t squeeze(const char *text, size_t len, int wbits, unsigned char *out, size_t cap)
{
	z_stream z = { 0 };
	cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)(uintptr_t)text;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t n = cap - z.avail_out;
	deflateEnd(&z);
	return n;
}

/* Plain bytes zlib gives for the first n compressed bytes. */
static size_t inflated_from(const unsigned char *in, size_t n)
{
	static unsigned char out[4096];
	z_stream z = { 0 };
	cr_assert_eq(inflateInit2(&z, 16 + 15), Z_OK);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = sizeof out;
	inflate(&z, Z_NO_FLUSH);
	size_t got = sizeof out - z.avail_out;
	inflateEnd(&z);
	return got;
}

struct got {
	unsigned first;         /* NL_GENAI_FIRST_CONTENT reports */
	size_t first_at;        /* compressed bytes fed up to the end of the call that reported it */
	struct nl_genai_result r;
};

/* Feeds in split at cuts, then ends the body: its end (end), or its
 * connection's (nl_genaiz_cut). */
static void run_cuts_to(const unsigned char *in, size_t len, const size_t *cuts, size_t n, struct got *g,
			void (*end)(struct nl_genaiz *))
{
	struct nl_genaiz b = { 0 };
	nl_genaiz_init(&b);
	size_t at = 0;
	g->first = 0;
	for (size_t i = 0; i <= n; i++) {
		size_t to = i < n ? cuts[i] : len;
		if (nl_genaiz_feed(&b, in + at, to - at) & NL_GENAI_FIRST_CONTENT) {
			g->first++;
			g->first_at = to;
		}
		at = to;
	}
	end(&b);
	g->r = b.s.r;
	cr_assert_eq(nl_genaiz_in_use(), 0, "the stream went back to the pool");
}

static void run_cuts(const unsigned char *in, size_t len, const size_t *cuts, size_t n, struct got *g)
{
	run_cuts_to(in, len, cuts, n, g, nl_genaiz_end);
}

static void expect_json(const struct got *g, const char *what, size_t at)
{
	cr_assert_eq(g->r.kind, NL_GENAI_KIND_JSON, "%s %zu", what, at);
	cr_assert_eq(nl_genai_input_tokens(&g->r), 12, "%s %zu", what, at);
	cr_assert_eq(nl_genai_output_tokens(&g->r), 5, "%s %zu", what, at);
	cr_assert_eq(g->r.model.len, 6, "%s %zu", what, at);
	cr_assert(!memcmp(g->r.model.text, "policy", 6), "%s %zu", what, at);
	cr_assert_eq(g->r.finish.len, 6, "%s %zu", what, at);
}

static void json_every_split(int wbits)
{
	static unsigned char z[2048];
	size_t n = squeeze(body_json, strlen(body_json), wbits, z, sizeof z);
	struct got g;
	run_cuts(z, n, NULL, 0, &g);
	expect_json(&g, "whole", 0);
	for (size_t i = 1; i < n; i++) {
		run_cuts(z, n, &i, 1, &g);
		expect_json(&g, "split at", i);
	}
	size_t *cuts = calloc(n, sizeof *cuts);
	for (size_t i = 0; i + 1 < n; i++)
		cuts[i] = i + 1;
	run_cuts(z, n, cuts, n - 1, &g);
	expect_json(&g, "one byte per call", n);
	free(cuts);
}

Test(genaiz, gzip_body_every_split)
{
	json_every_split(16 + 15);
}

Test(genaiz, zlib_body_every_split)
{
	json_every_split(15);
}

Test(genaiz, raw_deflate_body_every_split)
{
	json_every_split(-15);
}

static void expect_sse(const struct got *g, const char *what, size_t at)
{
	cr_assert_eq(g->r.kind, NL_GENAI_KIND_SSE, "%s %zu", what, at);
	cr_assert_eq(nl_genai_input_tokens(&g->r), 9, "%s %zu", what, at);
	cr_assert_eq(nl_genai_output_tokens(&g->r), 2, "%s %zu", what, at);
	cr_assert_eq(g->r.events, 5, "%s %zu", what, at);
	cr_assert(g->r.done, "%s %zu", what, at);
	cr_assert_eq(g->first, 1, "%s %zu", what, at);
}

Test(genaiz, gzip_stream_every_split_first_content_when_inflated)
{
	static unsigned char z[2048];
	size_t n = squeeze(body_sse, strlen(body_sse), 16 + 15, z, sizeof z);
	size_t content_end = first_content_end();
	struct got g;
	for (size_t i = 1; i < n; i++) {
		run_cuts(z, n, &i, 1, &g);
		expect_sse(&g, "split at", i);
		/* The first call reports the first content exactly when the
		 * bytes it holds inflate past that event's end. */
		bool in_first = inflated_from(z, i) >= content_end;
		cr_assert_eq(g.first_at, in_first ? i : n, "split at %zu", i);
	}
	/* Two cuts: the call that reports is the one whose bytes reach it. */
	for (size_t i = 1; i < n; i += 5)
		for (size_t k = i + 1; k < n; k += 11) {
			size_t c[2] = { i, k };
			run_cuts(z, n, c, 2, &g);
			expect_sse(&g, "split at", i * 10000 + k);
			size_t want = inflated_from(z, i) >= content_end ? i : inflated_from(z, k) >= content_end ? k : n;
			cr_assert_eq(g.first_at, want, "split at %zu, %zu", i, k);
		}
}

Test(genaiz, gzip_members_one_after_another)
{
	static unsigned char z[4096];
	size_t half = strlen(body_sse) / 2;
	size_t n = squeeze(body_sse, half, 16 + 15, z, sizeof z);
	n += squeeze(body_sse + half, strlen(body_sse) - half, 16 + 15, z + n, sizeof z - n);
	struct got g;
	for (size_t i = 1; i < n; i += 3) {
		run_cuts(z, n, &i, 1, &g);
		expect_sse(&g, "split at", i);
	}
}

Test(genaiz, corrupt_stream_is_unread)
{
	static unsigned char z[2048];
	size_t n = squeeze(body_sse, strlen(body_sse), 16 + 15, z, sizeof z);
	/* The usage is in the last event: no corruption before it lets it be read. */
	for (size_t at = 10; at < n - 8; at += 3) {
		static unsigned char bad[2048];
		memcpy(bad, z, n);
		for (size_t k = at; k < at + 8; k++)
			bad[k] ^= 0xa5;
		struct got g;
		run_cuts(bad, n, NULL, 0, &g);
		/* Either zlib sees it (unread) or the gzip trailer's CRC does; a
		 * value past the damage is never taken from damaged bytes. */
		cr_assert_eq(g.r.kind, NL_GENAI_KIND_UNREAD, "damage at %zu", at);
	}
	/* Cut short before its trailer: the usage inflated, but unchecked. */
	struct got cut;
	run_cuts(z, n - 4, NULL, 0, &cut);
	cr_assert_eq(cut.r.kind, NL_GENAI_KIND_UNREAD);
	cr_assert_eq(nl_genai_output_tokens(&cut.r), -1);
	/* The same cut by its connection's end: an event stream it was, and
	 * one that did not end, its values untold. */
	run_cuts_to(z, n - 4, NULL, 0, &cut, nl_genaiz_cut);
	cr_assert_eq(cut.r.kind, NL_GENAI_KIND_SSE);
	cr_assert_eq(nl_genai_output_tokens(&cut.r), -1);
	cr_assert_not(cut.r.done);
	for (unsigned e = 0; e < NL_GENAI_END_N; e++)
		cr_assert_eq(cut.r.end_at[e], 0);
	/* A document cut short reads as unread. */
	static unsigned char zj[2048];
	size_t nj = squeeze(body_json, strlen(body_json), 16 + 15, zj, sizeof zj);
	run_cuts_to(zj, nj - 4, NULL, 0, &cut, nl_genaiz_cut);
	cr_assert_eq(cut.r.kind, NL_GENAI_KIND_UNREAD);
	/* Not compressed data at all, after a gzip magic. */
	static const unsigned char junk[] = { 0x1f, 0x8b, 0x08, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct got g;
	run_cuts(junk, sizeof junk, NULL, 0, &g);
	cr_assert_eq(g.r.kind, NL_GENAI_KIND_UNREAD);
	cr_assert_eq(nl_genai_output_tokens(&g.r), -1);
}

Test(genaiz, full_pool_reads_unread_and_frees)
{
	static unsigned char z[2048];
	size_t n = squeeze(body_json, strlen(body_json), 16 + 15, z, sizeof z);
	static struct nl_genaiz b[NL_GENAIZ_STREAMS + 1];
	for (unsigned i = 0; i <= NL_GENAIZ_STREAMS; i++) {
		nl_genaiz_init(&b[i]);
		nl_genaiz_feed(&b[i], z, 20);
	}
	cr_assert_eq(nl_genaiz_in_use(), NL_GENAIZ_STREAMS);
	cr_assert_eq(b[NL_GENAIZ_STREAMS].s.r.kind, NL_GENAI_KIND_UNREAD, "no stream left: unread");
	for (unsigned i = 0; i <= NL_GENAIZ_STREAMS; i++) {
		nl_genaiz_feed(&b[i], z + 20, n - 20);
		nl_genaiz_end(&b[i]);
		if (i < NL_GENAIZ_STREAMS)
			expect_json(&(struct got){ .r = b[i].s.r }, "stream", i);
	}
	cr_assert_eq(b[NL_GENAIZ_STREAMS].s.r.kind, NL_GENAI_KIND_UNREAD);
	cr_assert_eq(nl_genai_output_tokens(&b[NL_GENAIZ_STREAMS].s.r), -1);
	cr_assert_eq(nl_genaiz_in_use(), 0);
	/* Released when the owner lets go early (a dropped exchange) as well. */
	nl_genaiz_init(&b[0]);
	nl_genaiz_feed(&b[0], z, 20);
	cr_assert_eq(nl_genaiz_in_use(), 1);
	nl_genaiz_release(&b[0]);
	nl_genaiz_release(&b[0]);
	cr_assert_eq(nl_genaiz_in_use(), 0);
}

Test(genaiz, plain_bodies_untouched)
{
	struct got g;
	size_t len = strlen(body_json);
	for (size_t i = 1; i < len; i++) {
		run_cuts((const unsigned char *)body_json, len, &i, 1, &g);
		expect_json(&g, "split at", i);
	}
	/* A lone first byte that could start a zlib header ('x'), then text. */
	static const char sse[] = "x: 1\n\ndata: {\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n";
	size_t one = 1;
	run_cuts((const unsigned char *)sse, strlen(sse), &one, 1, &g);
	cr_assert_eq(g.r.kind, NL_GENAI_KIND_SSE);
	cr_assert_eq(nl_genai_output_tokens(&g.r), 4);
	cr_assert_eq(nl_genaiz_in_use(), 0);
}
