/* SPDX-License-Identifier: Apache-2.0 */
/* Callgrind driver for the GenAI body scanner (preload/http/genai.c) and
 * its inflating path (preload/follow/genaiz.c): instructions per body byte. Run by
 * scripts/bench, section 1 (scripts/bench.d/genai.sh), or by hand:
 *
 *   cc -O2 -gdwarf-4 -Ipreload/http -Ipreload/base -Ipreload/arch -Ipreload/follow scripts/bench.d/genai_bench.c \
 *      preload/http/genai.c preload/follow/genaiz.c preload/base/lazylib.c -lz -ldl -o genai_bench
 *   valgrind --tool=callgrind --toggle-collect=scan_json ./genai_bench
 *   valgrind --tool=callgrind --toggle-collect=scan_sse ./genai_bench
 *   valgrind --tool=callgrind --toggle-collect=scan_gzip ./genai_bench
 *
 * scan_json: a 200 KB vLLM chat completion (logprobs with their top
 * candidates, usage, then prompt_token_ids) fed in 16 KiB reads; scan_sse:
 * a chat completions stream of 2,000 chunks fed one event per call, as a
 * server writes it; scan_gzip: the vLLM body gzip-compressed, fed in 16 KiB
 * reads of compressed bytes (zlib is opened before, outside the count).
 * Each prints its body's size (the gzip one: compressed): divide the
 * instructions by it. Without valgrind it prints what was read, as a check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "genai.h"
#include "genaiz.h"

#if defined(__GNUC__) && !defined(__clang__)
#define OP __attribute__((noinline, noclone, used))
#else
#define OP __attribute__((noinline, used))
#endif

static char body[400000];
static size_t body_len;

static void add(const char *s)
{
	size_t n = strlen(s);
	memcpy(body + body_len, s, n);
	body_len += n;
}

static void vllm_body(void)
{
	body_len = 0;
	add("{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"Qwen/Qwen3-8B\","
	    "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"The answer is 42.\"},"
	    "\"logprobs\":{\"content\":[");
	char tmp[256];
	for (int i = 0; i < 600; i++) {
		snprintf(tmp, sizeof tmp, "%s{\"token\":\"tok%d\",\"logprob\":-0.%04d,\"bytes\":[116,111,107],"
					  "\"top_logprobs\":[{\"token\":\"alt\",\"logprob\":-1.5,\"bytes\":[97]}]}",
			 i ? "," : "", i, i);
		add(tmp);
	}
	add("]},\"finish_reason\":\"stop\",\"stop_reason\":null}],\"usage\":{\"prompt_tokens\":24000,"
	    "\"total_tokens\":24600,\"completion_tokens\":600},\"prompt_logprobs\":null,\"prompt_token_ids\":[");
	for (int i = 0; body_len < 200000; i++) {
		snprintf(tmp, sizeof tmp, "%s%d", i ? "," : "", 100 + (i * 7919) % 150000);
		add(tmp);
	}
	add("]}");
}

OP static void scan_json(struct nl_genai_scan *s)
{
	for (size_t at = 0; at < body_len; at += 16384)
		nl_genai_feed(s, body + at, body_len - at < 16384 ? body_len - at : 16384);
	nl_genai_end(s);
}

static size_t events[2100];

static void sse_body(void)
{
	body_len = 0;
	char tmp[512];
	for (int i = 0; i < 2000; i++) {
		events[i] = body_len;
		snprintf(tmp, sizeof tmp,
			 "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
			 "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word%d\"},"
			 "\"logprobs\":null,\"finish_reason\":%s}]}\n\n",
			 i, i == 1999 ? "\"stop\"" : "null");
		add(tmp);
	}
	events[2000] = body_len;
	add("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"Qwen/Qwen3-8B\","
	    "\"choices\":[],\"usage\":{\"prompt_tokens\":24,\"total_tokens\":2024,\"completion_tokens\":2000}}\n\n");
	events[2001] = body_len;
	add("data: [DONE]\n\n");
	events[2002] = body_len;
}

OP static void scan_sse(struct nl_genai_scan *s)
{
	for (int i = 0; i < 2002; i++)
		nl_genai_feed(s, body + events[i], events[i + 1] - events[i]);
	nl_genai_end(s);
}

static unsigned char gz[400000];
static size_t gz_len;

static void gzip_body(void)
{
	z_stream z = { 0 };
	if (deflateInit2(&z, 6, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		exit(1);
	z.next_in = (Bytef *)body;
	z.avail_in = (uInt)body_len;
	z.next_out = gz;
	z.avail_out = sizeof gz;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END)
		exit(1);
	gz_len = sizeof gz - z.avail_out;
	deflateEnd(&z);
}

OP static void scan_gzip(struct nl_genaiz *b)
{
	for (size_t at = 0; at < gz_len; at += 16384)
		nl_genaiz_feed(b, gz + at, gz_len - at < 16384 ? gz_len - at : 16384);
	nl_genaiz_end(b);
}

static void show(const char *what, size_t len, const struct nl_genai_scan *s)
{
	printf("%s: %zu bytes, model %.*s, input %lld, output %lld, finish %.*s, done %d\n", what, len,
	       s->r.model.len, s->r.model.text, (long long)nl_genai_input_tokens(&s->r),
	       (long long)nl_genai_output_tokens(&s->r), s->r.finish.len, s->r.finish.text, s->r.done);
}

int main(void)
{
	static struct nl_genai_scan s;
	vllm_body();
	nl_genai_init(&s);
	scan_json(&s);
	show("json", body_len, &s);
	/* The same body gzip-compressed; a first, small one opens zlib. */
	static struct nl_genaiz b;
	gzip_body();
	nl_genaiz_init(&b);
	nl_genaiz_feed(&b, gz, 64);
	nl_genaiz_end(&b);
	nl_genaiz_init(&b);
	scan_gzip(&b);
	show("gzip", gz_len, &b.s);
	sse_body();
	nl_genai_init(&s);
	scan_sse(&s);
	show("sse", body_len, &s);
	return 0;
}
