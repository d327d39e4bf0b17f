/* SPDX-License-Identifier: Apache-2.0 */
/* The GenAI body scanner (preload/http/genai.c): bodies and event streams
 * laid out as vLLM, OpenAI, the Responses API and Anthropic write them, each
 * fed whole, split in two at every offset, in three at many, and one byte
 * per call: the same fields every time, written here by hand. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai.h"

struct out {
	char text[1024];
	unsigned first;         /* NL_GENAI_FIRST_CONTENT reports */
	size_t first_at;        /* bytes fed up to the end of the call that reported it */
};

static void render(const struct nl_genai_scan *s, struct out *o)
{
	const struct nl_genai_result *r = &s->r;
	snprintf(o->text, sizeof o->text,
		 "kind=%u model=%.*s%s stream=%d in=%lld out=%lld reasoning=%lld finish=%.*s status=%.*s "
		 "incomplete=%.*s error=%d etype=%.*s content=%d done=%d events=%u",
		 r->kind, r->model.len, r->model.text, r->model.truncated ? "…" : "", r->stream,
		 (long long)nl_genai_input_tokens(r), (long long)nl_genai_output_tokens(r),
		 (long long)r->reasoning_tokens, r->finish.len, r->finish.text, r->status.len, r->status.text,
		 r->incomplete.len, r->incomplete.text, r->error, r->error_type.len, r->error_type.text, r->content,
		 r->done, r->events);
}

/* Feeds body in pieces ending at cuts[0..n) (increasing, < len) and the rest. */
static void run_cuts(const char *body, size_t len, const size_t *cuts, size_t n, struct out *o)
{
	struct nl_genai_scan s;
	nl_genai_init(&s);
	size_t at = 0;
	o->first = 0;
	o->first_at = 0;
	for (size_t i = 0; i <= n; i++) {
		size_t end = i < n ? cuts[i] : len;
		unsigned f = nl_genai_feed(&s, body + at, end - at);
		if (f & NL_GENAI_FIRST_CONTENT) {
			o->first++;
			o->first_at = end;
		}
		at = end;
	}
	nl_genai_end(&s);
	render(&s, o);
}

/* Every split must give what one call gives, which must be expect. Where
 * the first content came is checked too: the call holding byte first_byte. */
static void check_all_splits(const char *body, const char *expect)
{
	size_t len = strlen(body);
	struct out whole;
	run_cuts(body, len, NULL, 0, &whole);
	cr_assert_str_eq(whole.text, expect);
	cr_assert(whole.first <= 1);
	/* The byte at which content showed: the first one-byte split that reports it. */
	size_t *cuts = calloc(len + 1, sizeof *cuts);
	for (size_t i = 0; i + 1 < len; i++)
		cuts[i] = i + 1;
	struct out bytes;
	run_cuts(body, len, cuts, len ? len - 1 : 0, &bytes);
	cr_assert_str_eq(bytes.text, expect, "one byte per call");
	cr_assert_eq(bytes.first, whole.first);
	size_t content_at = bytes.first_at;
	for (size_t i = 1; i < len; i++) {
		struct out o;
		run_cuts(body, len, &i, 1, &o);
		cr_assert_str_eq(o.text, expect, "split at %zu", i);
		cr_assert_eq(o.first, whole.first, "split at %zu", i);
		if (o.first)
			cr_assert_eq(o.first_at, content_at <= i ? i : len, "split at %zu", i);
	}
	for (size_t i = 1; i < len; i += 7)
		for (size_t k = i + 1; k < len; k += 13) {
			size_t c[2] = { i, k };
			struct out o;
			run_cuts(body, len, c, 2, &o);
			cr_assert_str_eq(o.text, expect, "split at %zu, %zu", i, k);
		}
	free(cuts);
}

#define NONE "kind=%u model= stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= error=0 etype= content=0 done=0 events=0"

Test(genai, paths)
{
	cr_assert_eq(nl_genai_path_op("/v1/chat/completions", 20), NL_GENAI_OP_CHAT);
	cr_assert_eq(nl_genai_path_op("/openai/v1/chat/completions?x=1", 31), NL_GENAI_OP_CHAT);
	cr_assert_eq(nl_genai_path_op("/v1/completions", 15), NL_GENAI_OP_COMPLETIONS);
	cr_assert_eq(nl_genai_path_op("/ng-rollout/abc-123/v1/responses", 32), NL_GENAI_OP_RESPONSES);
	cr_assert_eq(nl_genai_path_op("/v1/embeddings", 14), NL_GENAI_OP_EMBEDDINGS);
	cr_assert_eq(nl_genai_path_op("/v1/messages", 12), NL_GENAI_OP_MESSAGES);
	cr_assert_eq(nl_genai_path_op("/v1/messages/", 13), NL_GENAI_OP_NONE);
	cr_assert_eq(nl_genai_path_op("/v1/models", 10), NL_GENAI_OP_NONE);
	cr_assert_eq(nl_genai_path_op("/v2/chat/completions", 20), NL_GENAI_OP_NONE);
	cr_assert_eq(nl_genai_path_op("/x/v1/messagesx", 15), NL_GENAI_OP_NONE);
	cr_assert_eq(nl_genai_path_op("/run", 4), NL_GENAI_OP_NONE);
}

Test(genai, request_model_after_messages)
{
	/* The model after a messages array whose text holds the keys taken. */
	const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"say \\\"model\\\": \\\"x\\\", "
			   "{\\\"usage\\\":{\\\"prompt_tokens\\\":7}} [ { \"}],\n"
			   "  \"temperature\": 0.5, \"stream\" : true, \"stream_options\":{\"include_usage\":true},"
			   "\"model\":\"Qwen/Qwen3-8B\"}";
	check_all_splits(body, "kind=1 model=Qwen/Qwen3-8B stream=1 in=-1 out=-1 reasoning=-1 finish= status= "
			       "incomplete= error=0 etype= content=0 done=0 events=0");
}

Test(genai, vllm_chat_body)
{
	/* vLLM: usage before prompt_token_ids; logprobs; generated text with "usage" in it. */
	const char *body =
		"{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"policy\","
		"\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"{\\\"usage\\\": "
		"{\\\"completion_tokens\\\": 99}} \\\\\",\"tool_calls\":[]},"
		"\"logprobs\":{\"content\":[{\"token\":\"\\\"usage\",\"logprob\":-0.5,\"bytes\":[34,117],"
		"\"top_logprobs\":[]}]},\"finish_reason\":\"length\",\"stop_reason\":null}],"
		"\"usage\":{\"prompt_tokens\":12,\"total_tokens\":17,\"completion_tokens\":5,"
		"\"completion_tokens_details\":{\"reasoning_tokens\":3},\"prompt_tokens_details\":null},"
		"\"prompt_logprobs\":null,\"prompt_token_ids\":[1,2,3,4,5,6,7,8,9,10,11,12],\"kv_transfer_params\":null}";
	check_all_splits(body, "kind=1 model=policy stream=-1 in=12 out=5 reasoning=3 finish=length status= "
			       "incomplete= error=0 etype= content=1 done=0 events=0");
}

Test(genai, chat_stream_include_usage)
{
	const char *body =
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m1\",\"choices\":[{\"index\":0,"
		"\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
		"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \\\"usage\\\"\"},"
		"\"finish_reason\":null}]}\r\n\r\n"
		"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		"data: {\"id\":\"c\",\"model\":\"m1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,"
		"\"total_tokens\":11}}\n\n"
		"data: [DONE]\n\n";
	check_all_splits(body, "kind=2 model=m1 stream=-1 in=9 out=2 reasoning=-1 finish=stop status= incomplete= "
			       "error=0 etype= content=1 done=1 events=5");
}

Test(genai, chat_stream_first_content_where)
{
	/* The first content is the first chunk with a choice, not before. */
	const char *body = ": comment\n\ndata: {\"choices\":[],\"model\":\"m\"}\n\ndata: {\"choices\":[{\"delta\":{}}]}\n\n";
	size_t len = strlen(body), at = strstr(body, "{\"delta") - body;   /* the choice's first byte */
	for (size_t i = 1; i < len; i++) {
		struct out o;
		run_cuts(body, len, &i, 1, &o);
		cr_assert_eq(o.first, 1);
		cr_assert_eq(o.first_at, i > at ? i : len, "split at %zu", i);
	}
}

Test(genai, responses_stream)
{
	const char *body =
		"event: response.created\n"
		"data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"model\":\"gpt-x\","
		"\"status\":\"in_progress\",\"usage\":null,\"error\":null,\"incomplete_details\":null,\"output\":[]}}\n\n"
		"event: response.output_text.delta\n"
		"data: {\"type\":\"response.output_text.delta\",\"delta\":\"usage\",\"item_id\":\"i\"}\n\n"
		"event: response.completed\n"
		"data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"model\":\"gpt-x-2025\","
		"\"status\":\"completed\",\"error\":null,\"incomplete_details\":null,\"output\":[{\"type\":\"message\","
		"\"content\":[{\"type\":\"output_text\",\"text\":\"usage\"}]}],\"usage\":{\"input_tokens\":20,"
		"\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":8,\"output_tokens_details\":"
		"{\"reasoning_tokens\":4},\"total_tokens\":28}}}\n\n";
	check_all_splits(body, "kind=2 model=gpt-x-2025 stream=-1 in=20 out=8 reasoning=4 finish= status=completed "
			       "incomplete= error=0 etype= content=1 done=0 events=3");
}

Test(genai, responses_incomplete_body)
{
	const char *body = "{\"id\":\"r\",\"object\":\"response\",\"status\":\"incomplete\",\"incomplete_details\":"
			   "{\"reason\":\"max_output_tokens\"},\"model\":\"m\",\"error\":null,\"usage\":{\"input_tokens\":3,"
			   "\"output_tokens\":16}}";
	check_all_splits(body, "kind=1 model=m stream=-1 in=3 out=16 reasoning=-1 finish= status=incomplete "
			       "incomplete=max_output_tokens error=0 etype= content=0 done=0 events=0");
}

Test(genai, anthropic_stream)
{
	const char *body =
		"event: message_start\n"
		"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg\",\"type\":\"message\",\"role\":\"assistant\","
		"\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":25,"
		"\"cache_creation_input_tokens\":10,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n"
		"event: ping\ndata: {\"type\": \"ping\"}\n\n"
		"event: content_block_start\n"
		"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		"event: content_block_delta\n"
		"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
		"event: message_delta\n"
		"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
		"\"usage\":{\"output_tokens\":15}}\n\n"
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
	check_all_splits(body, "kind=2 model=claude-x stream=-1 in=40 out=15 reasoning=-1 finish=end_turn status= "
			       "incomplete= error=0 etype= content=1 done=0 events=6");
}

Test(genai, anthropic_body)
{
	const char *body = "{\"id\":\"msg\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
			   "\"text\":\"\\\"stop_reason\\\":\\\"x\\\"\"}],\"model\":\"claude-y\",\"stop_reason\":\"max_tokens\","
			   "\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"output_tokens\":64}}";
	check_all_splits(body, "kind=1 model=claude-y stream=-1 in=7 out=64 reasoning=-1 finish=max_tokens status= "
			       "incomplete= error=0 etype= content=0 done=0 events=0");
}

Test(genai, error_event_in_stream)
{
	const char *body =
		"data: {\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n"
		"data: {\"error\":{\"object\":\"error\",\"message\":\"boom \\\"type\\\"\",\"type\":\"BadRequestError\","
		"\"param\":null,\"code\":400}}\n\n"
		"data: [DONE]\n\n";
	check_all_splits(body, "kind=2 model=m stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= "
			       "error=1 etype=BadRequestError content=1 done=1 events=3");
}

Test(genai, anthropic_error_event)
{
	const char *body = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
			   "\"message\":\"Overloaded\"}}";   /* no blank line: the body's end dispatches it */
	check_all_splits(body, "kind=2 model= stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= "
			       "error=1 etype=overloaded_error content=0 done=0 events=1");
}

Test(genai, responses_error_event)
{
	const char *body = "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"x\"}\n\n";
	check_all_splits(body, "kind=2 model= stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= "
			       "error=1 etype=server_error content=0 done=0 events=1");
}

Test(genai, error_body)
{
	const char *body = "{\"error\":{\"message\":\"no\",\"type\":\"invalid_request_error\",\"code\":\"model_not_found\"}}";
	check_all_splits(body, "kind=1 model= stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= "
			       "error=1 etype=invalid_request_error content=0 done=0 events=0");
}

Test(genai, not_taken)
{
	struct out o;
	/* gzip's magic, and an escape in a model name, and a long one */
	const char gz[] = "\x1f\x8b\x08\x00";
	run_cuts(gz, 4, NULL, 0, &o);
	char expect[512];
	snprintf(expect, sizeof expect, NONE, NL_GENAI_KIND_UNREAD);
	cr_assert_str_eq(o.text, expect);
	const char *esc = "{\"model\":\"a\\u0041\",\"usage\":{\"prompt_tokens\":1.5e3,\"completion_tokens\":-1}}";
	run_cuts(esc, strlen(esc), NULL, 0, &o);
	snprintf(expect, sizeof expect, NONE, NL_GENAI_KIND_JSON);
	cr_assert_str_eq(o.text, expect);
	char big[400];
	snprintf(big, sizeof big, "{\"model\":\"%0120d\"}", 0);
	run_cuts(big, strlen(big), NULL, 0, &o);
	cr_assert(strstr(o.text, "…"), "%s", o.text);
	/* nested keys of the same names deeper down are not taken */
	const char *deep = "{\"data\":{\"model\":\"x\",\"usage\":{\"prompt_tokens\":3}},\"choices\":[{\"message\":"
			   "{\"finish_reason\":\"y\"}}]}";
	run_cuts(deep, strlen(deep), NULL, 0, &o);
	cr_assert_str_eq(o.text, "kind=1 model= stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= "
				 "error=0 etype= content=1 done=0 events=0");
}

Test(genai, gap)
{
	struct nl_genai_scan s;
	nl_genai_init(&s);
	nl_genai_feed(&s, "{\"model\":", 9);
	nl_genai_gap(&s);
	nl_genai_feed(&s, "\"m\"}", 4);
	cr_assert_eq(s.r.kind, NL_GENAI_KIND_UNREAD);
	cr_assert_eq(s.r.model.len, 0);
}

/* A stream's chunks that repeat the one before but for what some of the
 * strings the scanner skips hold are compared, not read (genai.c,
 * "repeats"): fed whole they go that way, in pieces the split lines are
 * read. Either way the same fields, whatever changed where. */
#define CHUNK(model, id, created, content, finish)                                                       \
	"data: {\"model\":\"" model "\",\"id\":\"" id "\",\"object\":\"chat.completion.chunk\",\"created\":" \
	created ",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" content "\"},\"finish_reason\":"     \
	finish "}]}\n\n"

Test(genai, repeated_chunks)
{
	const char *body = CHUNK("m1", "c1", "1", "Hel", "null")        /* read */
		CHUNK("m1", "c1", "1", "lo, wor", "null")               /* longer text: a repeat */
		CHUNK("m1", "c1", "1", "", "null")                      /* none */
		CHUNK("m1", "c1", "1", "\\\"usage\\\":{", "null")       /* escapes: read */
		CHUNK("m1", "c1", "1", "ld", "null")
		CHUNK("m1", "c1", "1", "ld", "null")                    /* the same bytes */
		CHUNK("m1", "c2", "1", "ld", "null")                    /* another skipped string */
		CHUNK("m1", "c3", "1", "d!", "null")                    /* two of them */
		CHUNK("m2", "c2", "1", "!", "null")                     /* a value taken changed */
		CHUNK("m2", "c2", "2", "!", "\"length\"")               /* a number, a value taken */
		"data: [DONE]\n\n";
	check_all_splits(body, "kind=2 model=m2 stream=-1 in=-1 out=-1 reasoning=-1 finish=length status= "
			       "incomplete= error=0 etype= content=1 done=1 events=11");
}

Test(genai, repeats_only_inside_one_skipped_string)
{
	const char *body =
		"data: {\"model\":\"m1\",\"id\":\"c1\",\"usage\":{\"prompt_tokens\":1}}\n\n"
		/* the id's contents end where a quote now ends the string */
		"data: {\"model\":\"m1\",\"id\":\"c1\",\"model\":\"m3\",\"usage\":{\"prompt_tokens\":1}}\n\n"
		"data: {\"model\":\"m3\",\"id\":\"c1\",\"usage\":{\"prompt_tokens\":1}}\n\n"
		/* from one string's contents to a number */
		"data: {\"model\":\"m3\",\"id\":\"c1x\",\"usage\":{\"prompt_tokens\":2}}\n\n"
		/* a key is no string's contents */
		"data: {\"model\":\"m3\",\"id\":\"c1x\",\"usage\":{\"input_tokens\":2}}\n\n"
		/* a string that is empty, and one that grows at its end */
		"data: {\"model\":\"m4\",\"id\":\"\",\"object\":\"a\"}\n\n"
		"data: {\"model\":\"m4\",\"id\":\"x\",\"object\":\"a\"}\n\n"
		"data: {\"model\":\"m4\",\"id\":\"x\",\"object\":\"ab\"}\n\n"
		"data: {\"model\":\"m4\",\"id\":\"x\",\"object\":\"ab\\\"\",\"model\":\"m5\"}\n\n";
	check_all_splits(body, "kind=2 model=m5 stream=-1 in=2 out=-1 reasoning=-1 finish= status= incomplete= "
			       "error=0 etype= content=0 done=0 events=9");
}

Test(genai, repeat_of_a_line_read_otherwise)
{
	/* An event's second data line, and a line split between calls, are
	 * read as the states read them: the next line is read too. */
	const char *body = "data: {\"model\":\"a\",\"id\":\"1\"}\ndata: {\"model\":\"z\"}\n\n"
			   "data: {\"model\":\"a\",\"id\":\"2\"}\n\n"
			   "data: {\"model\":\"b\",\"id\":\"2\",\"response\":{\"model\":\"c\"}}\n\n"
			   "data: {\"model\":\"b\",\"id\":\"3\",\"response\":{\"model\":\"c\"}}\n\n";
	check_all_splits(body, "kind=2 model=c stream=-1 in=-1 out=-1 reasoning=-1 finish= status= incomplete= "
			       "error=0 etype= content=0 done=0 events=4");
}

/* NeMo Gym's model server captures its three dialects' paths exactly, alone
 * or under its rollout prefix (its capture middleware's path rule). */
Test(genai, gym_paths)
{
	static const struct {
		const char *target;
		bool gym;
	} rows[] = {
		{ "/v1/chat/completions", true },
		{ "/v1/responses", true },
		{ "/v1/messages", true },
		{ "/v1/messages?beta=true", true },
		{ "/ng-rollout/r-17/v1/responses", true },
		{ "/ng-rollout/r-17/training-token-capture/v1/chat/completions", true },
		{ "/ng-rollout/r-17/v1/messages?x", true },
		{ "/v1/completions", false },
		{ "/v1/embeddings", false },
		{ "/v1/models", false },
		{ "/v1/chat/completions/", false },
		{ "/openai/v1/chat/completions", false },
		{ "/ng-rollout//v1/responses", false },
		{ "/ng-rollout/r-17", false },
		{ "/ng-rollout/r-17/", false },
		{ "/ng-rollout/r-17/v1/completions", false },
		{ "/ng-rollout/r-17/training-token-capture", false },
		{ "/ng-rollout/r-17/x/v1/responses", false },
		{ "", false },
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
		cr_assert_eq(nl_genai_gym_path(rows[i].target, strlen(rows[i].target)), rows[i].gym, "%s",
			     rows[i].target);
}

/* Where each kind of end event came first (1 for the first event), fed
 * whole and one byte per call: only events ended by their blank line. */
static void expect_ends(const char *body, const uint16_t want[NL_GENAI_END_N])
{
	size_t len = strlen(body);
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		struct nl_genai_scan s;
		nl_genai_init(&s);
		if (bytewise)
			for (size_t i = 0; i < len; i++)
				nl_genai_feed(&s, body + i, 1);
		else
			nl_genai_feed(&s, body, len);
		nl_genai_end(&s);
		for (unsigned e = 0; e < NL_GENAI_END_N; e++)
			cr_assert_eq(s.r.end_at[e], want[e], "end %u, %s: %s", e, bytewise ? "bytewise" : "whole", body);
	}
}

Test(genai, end_events)
{
	enum { EV_ERR = NL_GENAI_END_EVENT_ERROR, R_DONE = NL_GENAI_END_RESPONSE_COMPLETED,
	       R_INC = NL_GENAI_END_RESPONSE_INCOMPLETE, R_FAIL = NL_GENAI_END_RESPONSE_FAILED,
	       M_STOP = NL_GENAI_END_MESSAGE_STOP, DONE = NL_GENAI_END_DONE, D_ERR = NL_GENAI_END_DATA_ERROR };
	static const struct {
		const char *body;
		uint16_t at[NL_GENAI_END_N];
	} rows[] = {
		/* chat: [DONE] ends it; an error document before it comes first */
		{ "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", { [DONE] = 2 } },
		{ "data: {\"choices\":[]}\n\ndata: {\"error\":{\"type\":\"X\"}}\n\ndata: [DONE]\n\n",
		  { [D_ERR] = 2, [DONE] = 3 } },
		{ "data: {\"choices\":[]}\n\nevent: error\ndata: {}\n\n", { [EV_ERR] = 2 } },
		/* the last event without its blank line has not ended the stream */
		{ "data: {\"choices\":[]}\n\ndata: [DONE]\n", { 0 } },
		{ "data: {\"choices\":[]}\n\n", { 0 } },
		/* the Responses API, by event name */
		{ "event: response.created\ndata: {}\n\nevent: response.completed\ndata: {}\n\n", { [R_DONE] = 2 } },
		{ "event: response.created\ndata: {}\n\nevent: response.incomplete\ndata: {}\n\n", { [R_INC] = 2 } },
		{ "event: response.failed\ndata: {}\n\nevent: error\ndata: {}\n\n", { [R_FAIL] = 1, [EV_ERR] = 2 } },
		/* Anthropic's */
		{ "event: message_start\ndata: {}\n\nevent: message_stop\ndata: {}\n\n", { [M_STOP] = 2 } },
		/* a comment is no event; an event's name is whole or nothing */
		{ ": keep-alive\n\nevent: message_stopped\ndata: {}\n\nevent: message_stop\ndata: {}\n\n", { [M_STOP] = 3 } },
		/* the first of a kind counts */
		{ "event: error\ndata: {}\n\nevent: error\ndata: {}\n\n", { [EV_ERR] = 1 } },
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
		expect_ends(rows[i].body, rows[i].at);
}
