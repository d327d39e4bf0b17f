/* SPDX-License-Identifier: Apache-2.0 */
/* What an OpenAI-compatible or Anthropic exchange says of itself, read from
 * its body bytes as they pass: bytes in, fields out.
 *
 * One struct nl_genai_scan follows one message body (a request's or a
 * response's), fed with the body's bytes as the transport hands them over
 * (HTTP/1.x with its chunk framing removed, or HTTP/2 DATA), split anywhere.
 * It never buffers the body: its state is a fixed struct. What it keeps of
 * the body are the few values it reports (a model name, a finish reason,
 * an error type, token counts) and, in an event stream, the previous
 * event's data line without the contents of the strings it skipped, to
 * compare the next one with (at most 256 bytes, in the process only; see
 * struct nl_genai_repeat).
 *
 * The body's first bytes tell its kind: a JSON document ('{'), a stream of
 * server-sent events (a field name such as "data:" or "event:", or a
 * comment), or something else, which is counted as unread rather than
 * guessed at (a compressed body the caller did not inflate, for one).
 *
 * The JSON scanner knows strings, escapes and nesting, and takes only these
 * paths of a document (everything else, whatever bytes it holds, is
 * skipped):
 *   model, stream, type, code, status, stop_reason,
 *   usage.{prompt,completion,input,output}_tokens,
 *   usage.cache_read_input_tokens, usage.cache_creation_input_tokens,
 *   usage.{completion,output}_tokens_details.reasoning_tokens,
 *   choices[].finish_reason, incomplete_details.reason,
 *   error (a string, or an object's type or code), delta.stop_reason,
 * and the same paths inside the top-level `response` object (the Responses
 * API's stream events) and `message` object (Anthropic's message_start).
 * Values are kept last-wins, so a stream's final usage and finish reason
 * are what remain. A string with an escape in it is not taken; a longer one
 * than its field holds is kept truncated (and flagged).
 *
 * It calls nothing but <string.h>, so it is tested and fuzzed on its own. */
#ifndef NL_GENAI_H
#define NL_GENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The operation an exchange's request path names, by its last segments:
 * …/v1/chat/completions, …/v1/completions, …/v1/responses, …/v1/embeddings,
 * …/v1/messages (a query is ignored). */
enum nl_genai_op {
	NL_GENAI_OP_NONE,
	NL_GENAI_OP_CHAT,               /* chat completions: gen_ai.operation.name "chat" */
	NL_GENAI_OP_COMPLETIONS,        /* "text_completion" */
	NL_GENAI_OP_RESPONSES,          /* "chat" */
	NL_GENAI_OP_EMBEDDINGS,         /* "embeddings" */
	NL_GENAI_OP_MESSAGES,           /* Anthropic: "chat" */
	NL_GENAI_OP_N
};

enum nl_genai_op nl_genai_path_op(const char *target, size_t n);

/* Whether NeMo Gym's model server would capture a call to target: one of
 * /v1/chat/completions, /v1/responses and /v1/messages exactly, alone or
 * under Gym's rollout prefix /ng-rollout/<id>/ (and its
 * /training-token-capture/ form); a query is ignored. */
bool nl_genai_gym_path(const char *target, size_t n);

#define NL_GENAI_MODEL_MAX 80
#define NL_GENAI_WORD_MAX 32

enum nl_genai_kind {
	NL_GENAI_KIND_NONE,     /* no body byte yet */
	NL_GENAI_KIND_JSON,
	NL_GENAI_KIND_SSE,
	NL_GENAI_KIND_UNREAD,   /* not JSON, not an event stream, or bytes the caller did not see */
};

/* A string value, len bytes (0: none); truncated: the value went on past
 * the buffer. */
#define NL_GENAI_STR(n)           \
	struct {                  \
		uint8_t len;      \
		bool truncated;   \
		char text[n];     \
	}

/* The events that end a stream, in one dialect or another (NeMo Gym's
 * reading of a stream's end): an event named error, response.completed,
 * response.incomplete, response.failed or message_stop; data: [DONE]; a
 * data line holding an error document. */
enum nl_genai_end {
	NL_GENAI_END_EVENT_ERROR,
	NL_GENAI_END_RESPONSE_COMPLETED,
	NL_GENAI_END_RESPONSE_INCOMPLETE,
	NL_GENAI_END_RESPONSE_FAILED,
	NL_GENAI_END_MESSAGE_STOP,
	NL_GENAI_END_DONE,
	NL_GENAI_END_DATA_ERROR,
	NL_GENAI_END_N
};

struct nl_genai_result {
	/* Token counts, -1 when the body did not say. */
	int64_t prompt_tokens, completion_tokens;       /* usage.prompt_tokens, usage.completion_tokens */
	int64_t input_tokens, output_tokens;            /* usage.input_tokens, usage.output_tokens */
	int64_t cache_read, cache_creation;             /* usage.cache_{read,creation}_input_tokens */
	int64_t reasoning_tokens;                       /* usage.*_tokens_details.reasoning_tokens */
	int8_t stream;                                  /* a request's "stream": 1 true, 0 false, -1 absent */
	uint8_t kind;                                   /* enum nl_genai_kind */
	bool error;             /* an error document or event (error object, "type":"error", event: error) */
	bool content;           /* a content-bearing chunk or event came (see nl_genai_feed) */
	bool done;              /* data: [DONE] */
	uint32_t events;        /* server-sent events with data, dispatched */
	/* Where each kind of end event came first: the ordinal of the event
	 * (1 for the first one dispatched), 0 for never. Only events ended
	 * by their blank line count: a stream cut after an end event's
	 * last line has not ended. */
	uint16_t dispatched;
	uint16_t end_at[NL_GENAI_END_N];
	NL_GENAI_STR(NL_GENAI_MODEL_MAX) model;
	NL_GENAI_STR(NL_GENAI_WORD_MAX) finish;         /* choices[].finish_reason, stop_reason, delta.stop_reason */
	NL_GENAI_STR(NL_GENAI_WORD_MAX) status;         /* the Responses API's status */
	NL_GENAI_STR(NL_GENAI_WORD_MAX) incomplete;     /* incomplete_details.reason */
	NL_GENAI_STR(NL_GENAI_WORD_MAX) error_type;     /* error.type, else error.code, else a top-level code */
};

/* The scanner's own state: its fields are private. */
struct nl_genai_json {
	uint8_t mode;
	uint8_t depth;                  /* containers on the stack */
	uint8_t target;                 /* what the value being read is */
	uint8_t key_len;
	uint8_t lit;                    /* a literal's bytes so far */
	bool esc;                       /* the byte after a backslash comes next */
	bool bad;                       /* the string or number being read is not taken */
	bool doc_error;                 /* this document is an error */
	uint8_t errtype_rank;           /* where error_type came from: 0 none, 1 code, 2 error.code, 3 error.type */
	uint32_t skip;                  /* open containers inside a skipped value */
	uint64_t num;
	uint8_t stack[6];
	char key[28];
	NL_GENAI_STR(NL_GENAI_MODEL_MAX) cap;
};

/* The previous event's first data line, when it held one JSON object and
 * was read in one call: its skeleton, the bytes of it but the contents of
 * the strings it skipped (genai.c, "repeats"). */
#define NL_GENAI_SKELETON_MAX 256
#define NL_GENAI_REPEAT_SPANS 8
struct nl_genai_repeat {
	uint16_t len;                   /* of the skeleton; 0: none */
	uint8_t n_spans;
	uint16_t span[NL_GENAI_REPEAT_SPANS];   /* where each string's contents were, in order */
	uint8_t skel[NL_GENAI_SKELETON_MAX];
};

struct nl_genai_scan {
	struct nl_genai_result r;
	struct nl_genai_json j;
	uint8_t line;                   /* event stream: where in a line */
	uint8_t name_len;
	bool cr;                        /* a CR ended the last line: a LF right after belongs to it */
	bool has_data;                  /* the event being read has a data line */
	bool lead;                      /* sniffing: only whitespace so far */
	bool done_dispatched;           /* the [DONE] seen was its event's, dispatched */
	char name[8];                   /* the field name being read */
	NL_GENAI_STR(NL_GENAI_WORD_MAX) event;
	struct nl_genai_repeat rep;     /* last: nl_genai_init clears only its length */
};

/* Flags nl_genai_feed returns. */
enum {
	NL_GENAI_FIRST_CONTENT = 1,     /* the first content-bearing chunk came in this call: a chat or
					 * completions chunk with a choice, a Responses API
					 * response.*.delta event, Anthropic's content_block_delta */
};

void nl_genai_init(struct nl_genai_scan *s);
/* n body bytes, in order. */
unsigned nl_genai_feed(struct nl_genai_scan *s, const void *buf, size_t n);
/* n body bytes the caller moved without seeing them: the body is unread. */
void nl_genai_gap(struct nl_genai_scan *s);
/* The body ended: an event stream's last event is dispatched even without
 * its blank line. */
void nl_genai_end(struct nl_genai_scan *s);

/* Token counts in the GenAI conventions' terms, -1 when not reported:
 * input is prompt_tokens, or input_tokens plus Anthropic's cache reads and
 * writes; output is completion_tokens, or output_tokens. */
int64_t nl_genai_input_tokens(const struct nl_genai_result *r);
int64_t nl_genai_output_tokens(const struct nl_genai_result *r);

#endif
