/* SPDX-License-Identifier: Apache-2.0 */
/* The GenAI body scanner (see genai.h).
 *
 * The JSON side is a push state machine over the bytes, with a stack of the
 * containers on a path it takes (at most six deep: root, response, usage,
 * details; or root, choices, a choice). Any other container is skipped
 * whole by counting brackets outside strings; any other string is skipped
 * to its closing quote. Skipping reads 64 bytes at a time as bit masks
 * (SSE2; skip_container), so that the bulk of a large body (a vLLM
 * response's prompt_token_ids and logprobs, a request's messages) costs
 * about a byte's worth of instructions per byte or less. Where the bytes
 * of an object's key and value pairs are all in the call, as in a stream's
 * chunks, the pairs are read in one go (pairs()); the states take over
 * wherever a pair is split between calls or unusual, so that any split of
 * the same bytes reads the same.
 *
 * The event stream side splits lines (LF, CR or CR LF), hands each data
 * line's value to the JSON scanner (the lines of one event join with a LF,
 * which JSON reads as whitespace) and dispatches an event at its blank
 * line: its document ends there and the next event starts a new one. An
 * event's first data line that repeats the previous one but inside a string
 * that line skipped is compared with it rather than read ("repeats"): a
 * stream's chunks mostly differ from each other only in their text. */
#include "genai.h"

#include <string.h>

/* The tables below go after the code, with the shim's other tables that no
 * process reads before it records (loadpath.h's NL_COLD_RODATA, which this
 * layer cannot include: it depends on nothing). */
#define NL_COLD_RODATA __attribute__((section(".nl_cold_ro")))

#if defined(__SSE2__)
#include <emmintrin.h>
#define GENAI_SSE2 1
#endif

/* ---- paths -------------------------------------------------------------------- */

enum nl_genai_op nl_genai_path_op(const char *t, size_t n)
{
	const char *q = memchr(t, '?', n);
	if (q)
		n = (size_t)(q - t);
	/* (Arrays, not pointers: no relocation for the loader to write.) */
	static const struct {
		char suffix[21];
		uint8_t len;
		uint8_t op;
	} ops[] NL_COLD_RODATA = {
		{ "/v1/chat/completions", 20, NL_GENAI_OP_CHAT },
		{ "/v1/completions", 15, NL_GENAI_OP_COMPLETIONS },
		{ "/v1/responses", 13, NL_GENAI_OP_RESPONSES },
		{ "/v1/embeddings", 14, NL_GENAI_OP_EMBEDDINGS },
		{ "/v1/messages", 12, NL_GENAI_OP_MESSAGES },
	};
	if (n < 12 || t[n - 1] == '/')
		return NL_GENAI_OP_NONE;
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
		if (n >= ops[i].len && memcmp(t + n - ops[i].len, ops[i].suffix, ops[i].len) == 0)
			return (enum nl_genai_op)ops[i].op;
	return NL_GENAI_OP_NONE;
}

/* NeMo Gym's model server captures a call whose path (without its query) is
 * one of its three dialects' exactly, alone or after its rollout prefix:
 * /ng-rollout/<id>/, or /ng-rollout/<id>/training-token-capture/. */
bool nl_genai_gym_path(const char *t, size_t n)
{
	const char *q = memchr(t, '?', n);
	if (q)
		n = (size_t)(q - t);
	static const char prefix[] NL_COLD_RODATA = "/ng-rollout/", capture[] NL_COLD_RODATA = "/training-token-capture";
	if (n > sizeof prefix - 1 && memcmp(t, prefix, sizeof prefix - 1) == 0) {
		const char *id = t + sizeof prefix - 1, *end = memchr(id, '/', n - (size_t)(id - t));
		if (!end || end == id)
			return false;
		n -= (size_t)(end - t);
		t = end;
		if (n > sizeof capture - 1 && memcmp(t, capture, sizeof capture - 1) == 0 &&
		    t[sizeof capture - 1] == '/') {
			t += sizeof capture - 1;
			n -= sizeof capture - 1;
		}
	}
	return (n == 20 && memcmp(t, "/v1/chat/completions", 20) == 0) ||
	       (n == 13 && memcmp(t, "/v1/responses", 13) == 0) || (n == 12 && memcmp(t, "/v1/messages", 12) == 0);
}

/* ---- the JSON scanner --------------------------------------------------------- */

enum mode {
	J_VALUE,        /* a value comes (whitespace first) */
	J_KEY,          /* a key or the object's end comes */
	J_KEYSTR,       /* inside a key */
	J_COLON,
	J_AFTER,        /* after a value: ',' or the container's end */
	J_STR,          /* inside a string value that is taken */
	J_SKIPSTR,      /* inside a string value that is not */
	J_NUM,          /* inside a number that is taken */
	J_SKIPLIT,      /* inside any other literal */
	J_SKIP,         /* inside a container that is not taken */
	J_SKIPIN,       /* inside a string of a container that is not taken */
	J_DONE,         /* "[DONE]" */
	J_END,          /* the document ended: the rest is ignored */
};

/* The containers on a path that is taken. */
enum ctx {
	C_ROOT,         /* the document */
	C_SUB,          /* response or message inside the document: its keys as the document's */
	C_USAGE,
	C_DETAILS,      /* usage.*_tokens_details */
	C_CHOICES,      /* the choices array */
	C_CHOICE,       /* one of its objects */
	C_INCOMPLETE,   /* incomplete_details */
	C_ERROR,        /* error */
	C_DELTA,        /* delta (Anthropic's message_delta) */
};

/* What a value is. Containers take the C_* of what they open. */
enum target {
	T_SKIP,
	T_ROOT,
	T_OBJ_SUB, T_OBJ_USAGE, T_OBJ_DETAILS, T_ARR_CHOICES, T_OBJ_CHOICE, T_OBJ_INCOMPLETE, T_OBJ_DELTA,
	T_ERROR,        /* an object, or a string */
	T_MODEL, T_STREAM, T_TYPE, T_CODE, T_STATUS, T_FINISH, T_REASON, T_ERRTYPE, T_ERRCODE,
	T_PROMPT, T_COMPLETION, T_INPUT, T_OUTPUT, T_CACHE_READ, T_CACHE_CREATION, T_REASONING,
};

#define STACK_MAX (sizeof((struct nl_genai_json *)0)->stack)

/* The keys taken somewhere, found by their length first: a jump and one or
 * two compares of a few bytes, whatever the container. */
enum key {
	K_NONE,
	K_TYPE, K_CODE, K_MODEL, K_USAGE, K_ERROR, K_DELTA, K_STREAM, K_STATUS, K_REASON, K_CHOICES, K_MESSAGE,
	K_RESPONSE, K_STOP_REASON, K_INPUT, K_PROMPT, K_OUTPUT, K_FINISH, K_REASONING, K_COMPLETION, K_INCOMPLETE,
	K_OUTPUT_DETAILS, K_CACHE_READ, K_COMPLETION_DETAILS, K_CACHE_CREATION,
	K_N
};

#define IS(lit) (memcmp(s, lit, sizeof lit - 1) == 0)

static inline __attribute__((always_inline)) uint8_t key_id(const char *s, size_t n)
{
	switch (n) {
	case 4:
		return IS("type") ? K_TYPE : IS("code") ? K_CODE : K_NONE;
	case 5:
		return IS("model") ? K_MODEL : IS("usage") ? K_USAGE : IS("error") ? K_ERROR : IS("delta") ? K_DELTA : K_NONE;
	case 6:
		return IS("stream") ? K_STREAM : IS("status") ? K_STATUS : IS("reason") ? K_REASON : K_NONE;
	case 7:
		return IS("choices") ? K_CHOICES : IS("message") ? K_MESSAGE : K_NONE;
	case 8:
		return IS("response") ? K_RESPONSE : K_NONE;
	case 11:
		return IS("stop_reason") ? K_STOP_REASON : K_NONE;
	case 12:
		return IS("input_tokens") ? K_INPUT : K_NONE;
	case 13:
		return IS("prompt_tokens") ? K_PROMPT : IS("output_tokens") ? K_OUTPUT : IS("finish_reason") ? K_FINISH : K_NONE;
	case 16:
		return IS("reasoning_tokens") ? K_REASONING : K_NONE;
	case 17:
		return IS("completion_tokens") ? K_COMPLETION : K_NONE;
	case 18:
		return IS("incomplete_details") ? K_INCOMPLETE : K_NONE;
	case 21:
		return IS("output_tokens_details") ? K_OUTPUT_DETAILS : K_NONE;
	case 23:
		return IS("cache_read_input_tokens") ? K_CACHE_READ : K_NONE;
	case 25:
		return IS("completion_tokens_details") ? K_COMPLETION_DETAILS : K_NONE;
	case 27:
		return IS("cache_creation_input_tokens") ? K_CACHE_CREATION : K_NONE;
	}
	return K_NONE;
}

#undef IS

/* What each key's value is, in each container that takes it (T_SKIP, 0,
 * elsewhere). A response or message object takes the document's keys, but
 * not a response or message of its own. */
#define ROOT(t) { [C_ROOT] = t, [C_SUB] = t }
static const uint8_t key_targets[K_N][C_DELTA + 1] NL_COLD_RODATA = {
	[K_MODEL] = ROOT(T_MODEL),
	[K_STREAM] = ROOT(T_STREAM),
	[K_USAGE] = ROOT(T_OBJ_USAGE),
	[K_CHOICES] = ROOT(T_ARR_CHOICES),
	[K_TYPE] = { [C_ROOT] = T_TYPE, [C_SUB] = T_TYPE, [C_ERROR] = T_ERRTYPE },
	[K_CODE] = { [C_ROOT] = T_CODE, [C_SUB] = T_CODE, [C_ERROR] = T_ERRCODE },
	[K_STATUS] = ROOT(T_STATUS),
	[K_STOP_REASON] = { [C_ROOT] = T_FINISH, [C_SUB] = T_FINISH, [C_DELTA] = T_FINISH },
	[K_INCOMPLETE] = ROOT(T_OBJ_INCOMPLETE),
	[K_ERROR] = ROOT(T_ERROR),
	[K_DELTA] = ROOT(T_OBJ_DELTA),
	[K_RESPONSE] = { [C_ROOT] = T_OBJ_SUB },
	[K_MESSAGE] = { [C_ROOT] = T_OBJ_SUB },
	[K_PROMPT] = { [C_USAGE] = T_PROMPT },
	[K_COMPLETION] = { [C_USAGE] = T_COMPLETION },
	[K_INPUT] = { [C_USAGE] = T_INPUT },
	[K_OUTPUT] = { [C_USAGE] = T_OUTPUT },
	[K_CACHE_READ] = { [C_USAGE] = T_CACHE_READ },
	[K_CACHE_CREATION] = { [C_USAGE] = T_CACHE_CREATION },
	[K_COMPLETION_DETAILS] = { [C_USAGE] = T_OBJ_DETAILS },
	[K_OUTPUT_DETAILS] = { [C_USAGE] = T_OBJ_DETAILS },
	[K_REASONING] = { [C_DETAILS] = T_REASONING },
	[K_FINISH] = { [C_CHOICE] = T_FINISH },
	[K_REASON] = { [C_INCOMPLETE] = T_REASON },
};
#undef ROOT

/* The target of the value of key s[0..n) in container c. */
static inline __attribute__((always_inline)) uint8_t key_target(uint8_t c, const char *s, size_t n)
{
	return key_targets[key_id(s, n)][c];
}

/* The container an object target opens (C_* + 1), 0: not an object target. */
static uint8_t object_ctx(uint8_t t)
{
	switch (t) {
	case T_ROOT:
		return C_ROOT + 1;
	case T_OBJ_SUB:
		return C_SUB + 1;
	case T_OBJ_USAGE:
		return C_USAGE + 1;
	case T_OBJ_DETAILS:
		return C_DETAILS + 1;
	case T_OBJ_CHOICE:
		return C_CHOICE + 1;
	case T_OBJ_INCOMPLETE:
		return C_INCOMPLETE + 1;
	case T_OBJ_DELTA:
		return C_DELTA + 1;
	case T_ERROR:
		return C_ERROR + 1;
	}
	return 0;
}

static bool is_string_target(uint8_t t)
{
	return t == T_MODEL || t == T_TYPE || t == T_CODE || t == T_STATUS || t == T_FINISH || t == T_REASON ||
	       t == T_ERRTYPE || t == T_ERRCODE || t == T_ERROR;
}

static bool is_number_target(uint8_t t)
{
	return t >= T_PROMPT && t <= T_REASONING;
}

static void put_str(uint8_t *len, bool *trunc, char *text, size_t cap, const char *s, size_t n, bool t)
{
	if (n > cap)
		n = cap, t = true;
	memcpy(text, s, n);
	*len = (uint8_t)n;
	*trunc = t;
}

#define PUT(f, s, n, t) put_str(&(f).len, &(f).truncated, (f).text, sizeof(f).text, s, n, t)

static bool ends_with(const char *s, size_t n, const char *suffix, size_t k)
{
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

/* A stream's content-bearing event, by its type or event name: the
 * Responses API's response.*.delta, Anthropic's content_block_delta. */
static bool content_event(const char *s, size_t n)
{
	return (n > 15 && memcmp(s, "response.", 9) == 0 && ends_with(s, n, ".delta", 6)) ||
	       (n == 19 && memcmp(s, "content_block_delta", 19) == 0);
}

struct run {
	struct nl_genai_scan *s;
	unsigned flags;
	bool sse;
	/* A data line that may be repeated (sse_data_line): the strings it
	 * skipped, [from, to) of their contents from line, in order. */
	const uint8_t *line;    /* NULL: none */
	uint16_t (*spans)[2];
	unsigned n_spans;
};

static inline void skipped(struct run *r, const uint8_t *from, const uint8_t *to)
{
	if (r->line && r->n_spans < NL_GENAI_REPEAT_SPANS) {
		r->spans[r->n_spans][0] = (uint16_t)(from - r->line);
		r->spans[r->n_spans][1] = (uint16_t)(to - r->line);
		r->n_spans++;
	}
}

static void mark_content(struct run *r)
{
	if (!r->s->r.content) {
		r->s->r.content = true;
		r->flags |= NL_GENAI_FIRST_CONTENT;
	}
}

static void set_errtype(struct nl_genai_json *j, struct nl_genai_result *res, uint8_t rank, const char *s, size_t n,
			bool t)
{
	if (rank < j->errtype_rank)
		return;
	j->errtype_rank = rank;
	PUT(res->error_type, s, n, t);
}

/* A string value of target t, whole (s[0..n), t: truncated). */
static void take_string(struct run *r, uint8_t t, const char *s, size_t n, bool trunc)
{
	struct nl_genai_result *res = &r->s->r;
	struct nl_genai_json *j = &r->s->j;
	switch (t) {
	case T_MODEL:
		PUT(res->model, s, n, trunc);
		break;
	case T_TYPE:
		if (n == 5 && memcmp(s, "error", 5) == 0)
			j->doc_error = true;
		else if (!trunc && content_event(s, n))
			mark_content(r);
		break;
	case T_CODE:
		set_errtype(j, res, 1, s, n, trunc);
		break;
	case T_STATUS:
		PUT(res->status, s, n, trunc);
		break;
	case T_FINISH:
		PUT(res->finish, s, n, trunc);
		break;
	case T_REASON:
		PUT(res->incomplete, s, n, trunc);
		break;
	case T_ERROR:           /* "error": "text": an error, its text not taken */
		j->doc_error = true;
		break;
	case T_ERRCODE:
		set_errtype(j, res, 2, s, n, trunc);
		break;
	case T_ERRTYPE:
		set_errtype(j, res, 3, s, n, trunc);
		break;
	}
}

static void take_number(struct run *r, uint8_t t, int64_t v)
{
	struct nl_genai_result *res = &r->s->r;
	switch (t) {
	case T_PROMPT:
		res->prompt_tokens = v;
		break;
	case T_COMPLETION:
		res->completion_tokens = v;
		break;
	case T_INPUT:
		res->input_tokens = v;
		break;
	case T_OUTPUT:
		res->output_tokens = v;
		break;
	case T_CACHE_READ:
		res->cache_read = v;
		break;
	case T_CACHE_CREATION:
		res->cache_creation = v;
		break;
	case T_REASONING:
		res->reasoning_tokens = v;
		break;
	}
}

static void json_reset(struct nl_genai_json *j)
{
	j->mode = J_VALUE;
	j->depth = 0;
	j->target = T_ROOT;
	j->doc_error = false;
	j->errtype_rank = 0;
	j->esc = false;
	j->skip = 0;
}

/* The document's root closed: what it said as a whole. */
static void doc_end(struct run *r)
{
	struct nl_genai_json *j = &r->s->j;
	if (j->doc_error)
		r->s->r.error = true;
	j->mode = J_END;
}

/* The target of the next element of the array on top of the stack. */
static uint8_t element_target(const struct nl_genai_json *j)
{
	return j->stack[j->depth - 1] == C_CHOICES ? T_OBJ_CHOICE : T_SKIP;
}

static bool top_is_array(const struct nl_genai_json *j)
{
	return j->depth && j->stack[j->depth - 1] == C_CHOICES;
}

/* A container closed: back to its parent, or the document's end. */
static void pop(struct run *r)
{
	struct nl_genai_json *j = &r->s->j;
	if (--j->depth == 0)
		doc_end(r);
	else
		j->mode = J_AFTER;
}

/* The first byte of a value (not whitespace). */
static void value_begin(struct run *r, uint8_t b)
{
	struct nl_genai_json *j = &r->s->j;
	uint8_t t = j->target;
	if (t == T_ROOT && b != '{') {
		/* A document that is no object: nothing in it is taken, but an
		 * event's "[DONE]". */
		j->lit = 1;
		j->mode = b == '[' && r->sse ? J_DONE : J_END;
		return;
	}
	if (b == '{') {
		uint8_t c = object_ctx(t);
		if (c && j->depth < STACK_MAX) {
			if (t == T_ERROR)
				j->doc_error = true;
			if (t == T_OBJ_CHOICE)
				mark_content(r);
			j->stack[j->depth++] = (uint8_t)(c - 1);
			j->mode = J_KEY;
			return;
		}
		j->skip = 1;
		j->mode = J_SKIP;
		return;
	}
	if (b == '[') {
		if (t == T_ARR_CHOICES && j->depth < STACK_MAX) {
			j->stack[j->depth++] = C_CHOICES;
			j->target = T_OBJ_CHOICE;
			j->mode = J_VALUE;
			return;
		}
		j->skip = 1;
		j->mode = J_SKIP;
		return;
	}
	if (b == '"') {
		j->esc = false;
		if (is_string_target(t)) {
			j->cap.len = 0;
			j->cap.truncated = false;
			j->bad = false;
			j->mode = J_STR;
		} else {
			j->mode = J_SKIPSTR;
		}
		return;
	}
	if (is_number_target(t) && b >= '0' && b <= '9') {
		j->num = (uint64_t)(b - '0');
		j->lit = 1;
		j->bad = false;
		j->mode = J_NUM;
		return;
	}
	if (t == T_STREAM && (b == 't' || b == 'f'))
		r->s->r.stream = b == 't';
	j->mode = J_SKIPLIT;
}

/* After a value: ',' or the end of its container. */
static void after(struct run *r, uint8_t b)
{
	struct nl_genai_json *j = &r->s->j;
	if (b == ',') {
		if (top_is_array(j)) {
			j->target = element_target(j);
			j->mode = J_VALUE;
		} else {
			j->mode = J_KEY;
		}
	} else if (b == '}' || b == ']') {
		pop(r);
	}
	/* whitespace, or anything unexpected: waited past */
}

static inline bool is_ws(uint8_t b)
{
	return b == ' ' || b == '\n' || b == '\r' || b == '\t';
}

/* The first quote or backslash at or after p, or e. */
static inline const uint8_t *find_special(const uint8_t *p, const uint8_t *e)
{
#ifdef GENAI_SSE2
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
	while (e - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		unsigned bits = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)));
		if (bits)
			return p + __builtin_ctz(bits);
		p += 16;
	}
#endif
	for (; p < e; p++)
		if (*p == '"' || *p == '\\')
			return p;
	return e;
}

/* The number of bits set in x (without the popcnt instruction, which the
 * baseline x86-64 lacks). */
static inline unsigned count_bits(uint64_t x)
{
	x = x - ((x >> 1) & 0x5555555555555555u);
	x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fu;
	return (unsigned)((x * 0x0101010101010101u) >> 56);
}

/* One block of w bytes (w <= 64) of a container that is not taken, given as
 * the masks of its quotes, backslashes, opening and closing brackets (bit i:
 * byte i). Returns the bytes it took: w, or w + 1 when the block ends in a
 * backslash whose escaped byte is the next block's first, or fewer when the
 * container ended in it (*end).
 *
 * A block without a backslash is read with masks alone: a byte is inside a
 * string when the quotes up to it, and whether the block started inside
 * one, have odd parity; and the container can only end in the block if it
 * holds as many closing brackets outside strings as there are containers
 * open. Only a block with a backslash, or the one where the container ends,
 * is walked a bracket or quote at a time. */
static inline unsigned skip_block(uint64_t q, uint64_t bs, uint64_t o, uint64_t c, unsigned w, bool *in_str,
				  uint32_t *depth, bool *end)
{
	if (!bs) {
		uint64_t s = q;
		s ^= s << 1;
		s ^= s << 2;
		s ^= s << 4;
		s ^= s << 8;
		s ^= s << 16;
		s ^= s << 32;
		s ^= 0 - (uint64_t)*in_str;
		o &= ~s;
		c &= ~s;
		bool str_after = (s >> (w - 1)) & 1;
		if (c) {
			unsigned closes = count_bits(c);
			if (closes >= *depth) {
				for (uint64_t m = o | c; m; m &= m - 1) {
					unsigned i = (unsigned)__builtin_ctzll(m);
					if ((o >> i) & 1) {
						++*depth;
					} else if (--*depth == 0) {
						*end = true;
						return i + 1;
					}
				}
				*in_str = str_after;
				return w;
			}
			*depth -= closes;
		}
		*depth += count_bits(o);
		*in_str = str_after;
		return w;
	}
	uint64_t str_m = q | bs, out_m = q | o | c;
	unsigned from = 0;
	while (from < w) {
		uint64_t m = (*in_str ? str_m : out_m) >> from;
		if (!m)
			break;
		unsigned i = from + (unsigned)__builtin_ctzll(m);
		from = i + 1;
		if (*in_str) {
			if ((bs >> i) & 1)
				from = i + 2;   /* past the escaped byte, maybe in the next block */
			else
				*in_str = false;
		} else if ((q >> i) & 1) {
			*in_str = true;
		} else if ((o >> i) & 1) {
			++*depth;
		} else if (--*depth == 0) {
			*end = true;
			return from;
		}
	}
	return from > w ? from : w;
}

/* Inside a container that is not taken (J_SKIP, J_SKIPIN): its bytes up to
 * its end, or all of [p, e). Returns past what it took; j->mode is J_AFTER
 * once the container closed. Blocks of 64 bytes (16 near the end), and
 * among them those with none of the bytes that matter here (quotes,
 * backslashes, brackets) cost a few instructions: the rest go through
 * skip_block. */
static const uint8_t *skip_container(struct nl_genai_json *j, const uint8_t *p, const uint8_t *e)
{
	bool in_str = j->mode == J_SKIPIN;
	uint32_t depth = j->skip;
	if (j->esc) {
		j->esc = false;
		p++;            /* the escaped byte (p < e: the caller has bytes) */
	}
#ifdef GENAI_SSE2
	/* Signed, the bytes above 'Z' are '[', '\\', ']', lowercase letters,
	 * '{', '}' and DEL: with '"', all that a block need be looked at for.
	 * '[' 0x5b and '{' 0x7b, ']' 0x5d and '}' 0x7d: one compare a pair,
	 * with bit 5 set. */
	const __m128i vq = _mm_set1_epi8('"'), vbs = _mm_set1_epi8('\\'), b5 = _mm_set1_epi8(0x20),
		      vo = _mm_set1_epi8('{'), vc = _mm_set1_epi8('}'), vz = _mm_set1_epi8('Z');
#define LOOK(v) _mm_or_si128(_mm_cmpgt_epi8(v, vz), _mm_cmpeq_epi8(v, vq))
#define BITS(v, x, k) ((uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, x)) << (16 * (k)))
	bool dense = false;
	while (e - p >= 16) {
		uint64_t q, bs, o, c;
		unsigned w;
		if (e - p >= 64) {
			const __m128i *at = (const __m128i *)(const void *)p;
			__m128i v0 = _mm_loadu_si128(at), v1 = _mm_loadu_si128(at + 1), v2 = _mm_loadu_si128(at + 2),
				v3 = _mm_loadu_si128(at + 3);
			if (!dense &&
			    !_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(LOOK(v0), LOOK(v1)), _mm_or_si128(LOOK(v2), LOOK(v3))))) {
				p += 64;
				continue;
			}
			w = 64;
			q = BITS(v0, vq, 0) | BITS(v1, vq, 1) | BITS(v2, vq, 2) | BITS(v3, vq, 3);
			__m128i s0 = _mm_cmpeq_epi8(v0, vbs), s1 = _mm_cmpeq_epi8(v1, vbs), s2 = _mm_cmpeq_epi8(v2, vbs),
				s3 = _mm_cmpeq_epi8(v3, vbs);
			bs = 0;
			if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(s0, s1), _mm_or_si128(s2, s3))))
				bs = (uint64_t)(uint32_t)_mm_movemask_epi8(s0) |
				     (uint64_t)(uint32_t)_mm_movemask_epi8(s1) << 16 |
				     (uint64_t)(uint32_t)_mm_movemask_epi8(s2) << 32 |
				     (uint64_t)(uint32_t)_mm_movemask_epi8(s3) << 48;
			v0 = _mm_or_si128(v0, b5);
			v1 = _mm_or_si128(v1, b5);
			v2 = _mm_or_si128(v2, b5);
			v3 = _mm_or_si128(v3, b5);
			o = BITS(v0, vo, 0) | BITS(v1, vo, 1) | BITS(v2, vo, 2) | BITS(v3, vo, 3);
			c = BITS(v0, vc, 0) | BITS(v1, vc, 1) | BITS(v2, vc, 2) | BITS(v3, vc, 3);
			/* The next block is looked at first only after one with
			 * nothing in it. */
			dense = q | bs | o | c;
			if (!dense) {
				p += 64;
				continue;
			}
		} else {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
			if (!_mm_movemask_epi8(LOOK(v))) {
				p += 16;
				continue;
			}
			w = 16;
			q = BITS(v, vq, 0);
			bs = BITS(v, vbs, 0);
			v = _mm_or_si128(v, b5);
			o = BITS(v, vo, 0);
			c = BITS(v, vc, 0);
		}
		bool end = false;
		unsigned took = skip_block(q, bs, o, c, w, &in_str, &depth, &end);
		if (end) {
			j->skip = 0;
			j->mode = J_AFTER;
			return p + took;
		}
		if (took > (size_t)(e - p)) {
			j->esc = true;  /* the escaped byte comes with the next call */
			p = e;
			break;
		}
		p += took;
	}
#undef LOOK
#undef BITS
#endif
	for (; p < e; p++) {
		uint8_t c = *p;
		if (in_str) {
			if (c == '\\') {
				if (++p == e) {
					j->esc = true;
					break;
				}
			} else if (c == '"') {
				in_str = false;
			}
		} else if (c == '"') {
			in_str = true;
		} else if ((c | 0x20) == '{') {
			depth++;
		} else if ((c | 0x20) == '}' && --depth == 0) {
			j->skip = 0;
			j->mode = J_AFTER;
			return p + 1;
		}
	}
	j->skip = depth;
	j->mode = in_str ? J_SKIPIN : J_SKIP;
	return e;
}

static inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *e)
{
	while (p < e && *p <= ' ' && is_ws(*p))
		p++;
	return p;
}

/* Past the byte c that comes next, whitespace before it skipped; NULL
 * when another byte, or none, comes. */
static inline const uint8_t *expect(const uint8_t *p, const uint8_t *e, uint8_t c)
{
	if (p < e && *p == c)
		return p + 1;
	p = skip_ws(p, e);
	return p < e && *p == c ? p + 1 : NULL;
}

/* The byte that ends a literal, as J_NUM and J_SKIPLIT have it. */
static inline bool ends_literal(uint8_t b)
{
	return b == ',' || (b | 0x20) == '}' || is_ws(b);
}

/* A container not taken, just opened at p (its first byte read): skipped
 * here when it ends within its first 48 bytes, its strings jumped with the
 * masks; a stream chunk's delta, say. Returns past its end, or NULL (and
 * skip_container reads it). */
static inline const uint8_t *skip_short(struct run *r, const uint8_t *p, const uint8_t *e)
{
	const uint8_t *lim = e - p > 48 ? p + 48 : e;
	unsigned depth = 1;
	for (; p < lim; p++) {
		uint8_t b = *p;
		if (b == '"') {
			const uint8_t *s = p + 1;
			p = find_special(s, e);
			if (p == e || *p != '"')
				return NULL;
			skipped(r, s, p);
		} else if ((b | 0x20) == '{') {
			depth++;
		} else if ((b | 0x20) == '}' && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

/* At J_KEY: the pairs of the object that [p, e) holds whole, read in one
 * go, each the way the states above would read it byte by byte, and on
 * into the containers they open and out of those they close. This is
 * where an event stream's chunks spend their time: a dozen short pairs
 * each. Returns past what it read, with j->mode where that left it; p
 * itself when the first pair is not whole here, or not plain ("key": then
 * a string without escapes, a literal, or a container's first byte, with
 * whitespace only between), for the states to read. */
static const uint8_t *pairs(struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_genai_json *j = &r->s->j;
	for (;;) {
		const uint8_t *pair = p, *k;
		if (p < e && *p == '"')
			k = p + 1;
		else if (!(k = expect(p, e, '"')))
			return pair;
		const uint8_t *q = find_special(k, e);
		if (q == e || *q != '"')
			return pair;
		uint8_t t = key_target(j->stack[j->depth - 1], (const char *)k, (size_t)(q - k));
		p = q + 1;
		if (p < e && *p == ':')
			p++;
		else if (!(p = expect(p, e, ':')))
			return pair;
		if (p == e || *p <= ' ') {
			p = skip_ws(p, e);
			if (p == e)
				return pair;
		}
		uint8_t b = *p;
		if (b == '"') {
			const uint8_t *s = p + 1;
			q = find_special(s, e);
			if (q == e || *q != '"')
				return pair;
			if (is_string_target(t)) {
				size_t n = (size_t)(q - s);
				bool trunc = n > sizeof j->cap.text;
				take_string(r, t, (const char *)s, trunc ? sizeof j->cap.text : n, trunc);
			} else {
				skipped(r, s, q);
			}
			p = q + 1;
		} else if (b == '{' || b == '[') {
			j->target = t;
			value_begin(r, b);
			p++;
			if (j->mode == J_VALUE && p < e && *p == '{')
				value_begin(r, *p++);   /* the choices array's first object */
			if (j->mode == J_KEY)
				continue;               /* an object taken: its pairs */
			if (j->mode != J_SKIP || j->skip != 1)
				return p;
			/* A container not taken: skipped here, when it ends here. */
			q = skip_short(r, p, e);
			if (q) {
				j->skip = 0;
				j->mode = J_AFTER;
				p = q;
			} else {
				p = skip_container(j, p, e);
				if (j->mode != J_AFTER)
					return p;
			}
		} else if (b != ']' && b != ',' && b != '}') {
			q = p;
			if (b == 'n' && e - p > 4 && memcmp(p, "null", 4) == 0)
				q = p + 4;
			while (q < e && !ends_literal(*q))
				q++;
			if (q == e)
				return pair;
			if (is_number_target(t)) {
				size_t n = (size_t)(q - p);
				uint64_t v = 0;
				size_t i = 0;
				for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
					v = v * 10 + (uint64_t)(p[i] - '0');
				if (i == n && n <= 18)
					take_number(r, t, (int64_t)v);
			} else if (t == T_STREAM && (b == 't' || b == 'f')) {
				r->s->r.stream = b == 't';
			}
			p = q;
		} else {
			return pair;
		}
		/* After the value: the next pair, or the next element of the
		 * choices array, or the container's end and what comes after
		 * it; whatever else, the states read. */
		j->mode = J_AFTER;
		for (;;) {
			if (p < e && *p <= ' ')
				p = skip_ws(p, e);
			if (p == e)
				return p;
			b = *p;
			if (b == ',') {
				p++;
				if (!top_is_array(j)) {
					j->mode = J_KEY;
					break;
				}
				j->target = element_target(j);
				j->mode = J_VALUE;
				if (p < e && *p == '{')
					value_begin(r, *p++);
				if (j->mode != J_KEY)
					return p;
				break;
			}
			if (b != '}' && b != ']')
				return p;
			pop(r);
			p++;
			if (j->mode != J_AFTER)
				return p;       /* the document's end */
		}
	}
}

/* JSON bytes [p, e). */
static void json_feed(struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_genai_json *j = &r->s->j;
	while (p < e) {
		uint8_t b;
		switch ((enum mode)j->mode) {
		case J_VALUE:
			b = *p++;
			if (b == ']' && top_is_array(j))
				pop(r);         /* an empty array */
			else if (!is_ws(b))
				value_begin(r, b);
			break;
		case J_KEY: {
			const uint8_t *q = pairs(r, p, e);
			if (q != p) {
				p = q;
				break;
			}
			b = *p++;
			if (b == '"') {
				j->key_len = 0;
				j->bad = false;
				j->esc = false;
				j->mode = J_KEYSTR;
			} else if (b == '}') {
				pop(r);
			}
			break;
		}
		case J_KEYSTR: {
			if (j->esc) {
				j->esc = false;
				p++;
				break;
			}
			const uint8_t *q = find_special(p, e);
			size_t n = (size_t)(q - p);
			if (q < e && *q == '"' && !j->key_len && !j->bad) {
				/* The whole key in this call, the usual case: read where it is. */
				j->target = key_target(j->stack[j->depth - 1], (const char *)p, n);
				j->mode = J_COLON;
				p = q + 1;
				break;
			}
			if (!j->bad) {
				if (n > sizeof j->key - j->key_len)
					j->bad = true;
				else
					memcpy(j->key + j->key_len, p, n), j->key_len = (uint8_t)(j->key_len + n);
			}
			p = q;
			if (p == e)
				break;
			if (*p++ == '\\') {
				j->bad = true;  /* no key that is taken has an escape */
				j->esc = true;
				break;
			}
			j->target = j->bad ? T_SKIP : key_target(j->stack[j->depth - 1], j->key, j->key_len);
			j->mode = J_COLON;
			break;
		}
		case J_COLON:
			b = *p++;
			if (b == ':')
				j->mode = J_VALUE;
			break;
		case J_AFTER:
			after(r, *p++);
			break;
		case J_SKIPIN:
			p = skip_container(j, p, e);
			break;
		case J_STR:
		case J_SKIPSTR: {
			if (j->esc) {
				j->esc = false;
				p++;
				break;
			}
			const uint8_t *q = find_special(p, e);
			if (j->mode == J_STR && !j->bad) {
				size_t n = (size_t)(q - p), room = sizeof j->cap.text - j->cap.len;
				if (n > room)
					n = room, j->cap.truncated = true;
				memcpy(j->cap.text + j->cap.len, p, n);
				j->cap.len = (uint8_t)(j->cap.len + n);
			}
			p = q;
			if (p == e)
				break;
			if (*p++ == '\\') {
				j->bad = true;  /* a string with an escape is not taken */
				j->esc = true;
				break;
			}
			if (j->mode == J_STR && !j->bad)
				take_string(r, j->target, j->cap.text, j->cap.len, j->cap.truncated);
			else if (j->target == T_ERROR)
				j->doc_error = true;
			j->mode = J_AFTER;
			break;
		}
		case J_NUM:
			b = *p;
			if (b >= '0' && b <= '9') {
				if (j->lit < 18)
					j->num = j->num * 10 + (uint64_t)(b - '0');
				else
					j->bad = true;
				j->lit++;
				p++;
				break;
			}
			if (b == ',' || b == '}' || b == ']' || is_ws(b)) {
				if (!j->bad)
					take_number(r, j->target, (int64_t)j->num);
				j->mode = J_AFTER;
				break;   /* the byte is read as what comes after */
			}
			j->bad = true;  /* a fraction or exponent: not taken */
			j->mode = J_SKIPLIT;
			p++;
			break;
		case J_SKIPLIT:
			while (p < e && *p != ',' && *p != '}' && *p != ']' && !is_ws(*p))
				p++;
			if (p < e)
				j->mode = J_AFTER;
			break;
		case J_SKIP:
			p = skip_container(j, p, e);
			break;
		case J_DONE:
			b = *p++;
			if (b != (uint8_t)"[DONE]"[j->lit]) {
				j->mode = J_END;
				break;
			}
			if (++j->lit == 6) {
				r->s->r.done = true;
				j->mode = J_END;
			}
			break;
		case J_END:
			return;
		}
	}
}

/* ---- event streams ------------------------------------------------------------ */

enum line {
	L_START,        /* at the start of a line */
	L_NAME,         /* a field name */
	L_SPACE,        /* right after the colon: one space is skipped */
	L_DATA,         /* a data line's value */
	L_EVENT,        /* an event line's value */
	L_IGNORE,       /* the rest of a line of no interest */
};

static bool event_is(const struct nl_genai_scan *s, const char *name, size_t n)
{
	return s->event.len == n && !s->event.truncated && memcmp(s->event.text, name, n) == 0;
}

/* The end event this one is, if any (enum nl_genai_end; NL_GENAI_END_N:
 * none): by its name, else by its data. */
static unsigned end_kind(const struct nl_genai_scan *s, bool data_error, bool done)
{
	if (event_is(s, "error", 5))
		return NL_GENAI_END_EVENT_ERROR;
	if (event_is(s, "response.completed", 18))
		return NL_GENAI_END_RESPONSE_COMPLETED;
	if (event_is(s, "response.incomplete", 19))
		return NL_GENAI_END_RESPONSE_INCOMPLETE;
	if (event_is(s, "response.failed", 15))
		return NL_GENAI_END_RESPONSE_FAILED;
	if (event_is(s, "message_stop", 12))
		return NL_GENAI_END_MESSAGE_STOP;
	if (data_error)
		return NL_GENAI_END_DATA_ERROR;
	if (done)
		return NL_GENAI_END_DONE;
	return NL_GENAI_END_N;
}

/* An event ends: by its blank line (blank), or by the body's end. */
static void dispatch(struct run *r, bool blank)
{
	struct nl_genai_scan *s = r->s;
	bool data_error = s->has_data && s->j.doc_error;
	bool done = s->r.done && !s->done_dispatched;
	if (!s->event.len)
		;               /* no event line: a data-only stream's event */
	else if (event_is(s, "error", 5))
		s->r.error = true;
	else if (content_event(s->event.text, s->event.len) && s->has_data)
		mark_content(r);
	if (s->has_data) {
		if (data_error)
			s->r.error = true;
		s->r.events++;
	}
	if (s->r.dispatched < UINT16_MAX)
		s->r.dispatched++;
	unsigned end = blank ? end_kind(s, data_error, done) : NL_GENAI_END_N;
	if (end < NL_GENAI_END_N && !s->r.end_at[end])
		s->r.end_at[end] = s->r.dispatched;
	s->done_dispatched = s->r.done;
	s->has_data = false;
	s->event.len = 0;
	s->event.truncated = false;
	json_reset(&s->j);
}

static inline const uint8_t *find_eol(const uint8_t *lo, const uint8_t *p, const uint8_t *e)
{
#ifdef GENAI_SSE2
	/* Bytes up to CR (unsigned): LF, CR, and control bytes that a data
	 * line seldom holds, looked at one by one. 64 bytes at a time. */
	const __m128i cr = _mm_set1_epi8('\r');
#define LOW(v) _mm_cmpeq_epi8(_mm_min_epu8(v, cr), v)
	while (e - p >= 64) {
		const __m128i *at = (const __m128i *)(const void *)p;
		__m128i v0 = LOW(_mm_loadu_si128(at)), v1 = LOW(_mm_loadu_si128(at + 1)), v2 = LOW(_mm_loadu_si128(at + 2)),
			v3 = LOW(_mm_loadu_si128(at + 3));
		if (_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(v0, v1), _mm_or_si128(v2, v3))))
			break;
		p += 64;
	}
	while (e - p >= 16) {
		unsigned bits = (unsigned)_mm_movemask_epi8(LOW(_mm_loadu_si128((const __m128i *)(const void *)p)));
		for (; bits; bits &= bits - 1) {
			const uint8_t *q = p + __builtin_ctz(bits);
			if (*q == '\n' || *q == '\r')
				return q;
		}
		p += 16;
	}
	if (p < e && e - lo >= 16) {
		/* The last bytes: the 16 that end at e, those before p left out. */
		unsigned bits = (unsigned)_mm_movemask_epi8(LOW(_mm_loadu_si128((const __m128i *)(const void *)(e - 16))));
		for (bits >>= 16 - (e - p); bits; bits &= bits - 1) {
			const uint8_t *q = p + __builtin_ctz(bits);
			if (*q == '\n' || *q == '\r')
				return q;
		}
		return e;
	}
#undef LOW
#endif
	for (; p < e; p++)
		if (*p == '\n' || *p == '\r')
			return p;
	return e;
}

/* A line's field name ended: a data line joins the event's data (its
 * lines join with a LF), an event line starts the event's name. */
static void field_name(struct run *r, bool data, bool event)
{
	struct nl_genai_scan *s = r->s;
	if (data) {
		s->rep.len = 0;         /* read otherwise: no repeat of it to find */
		if (s->has_data)
			json_feed(r, (const uint8_t *)"\n", (const uint8_t *)"\n" + 1);
		s->has_data = true;
	}
	if (event)
		s->event.len = 0, s->event.truncated = false;
}

/* ---- repeats ------------------------------------------------------------------ */

/* A stream's chunks mostly repeat each other: the same id, model and
 * layout, with a few bytes of generated text inside a string that the
 * scanner skips. What such a string holds (without a quote or a backslash)
 * changes nothing of what reading the line does. So a data line that is
 * the previous one but for what some of the strings that line skipped hold
 * reads as that one did: every value it would take is what the previous
 * one took and the result holds already (values are kept last-wins, and
 * nothing else writes them between two events' first data lines), and its
 * document ends as that one's did. Such a line is compared, not read: with
 * the previous line's skeleton, its bytes without those strings' contents.
 * (Its generated text is not kept, then, unless in a string skipped
 * otherwise: one with an escape, or past the eighth.) */

/* Whether a[0..n) and b[0..n) are the same bytes. */
static inline bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
#ifdef GENAI_SSE2
	if (n >= 16) {
		size_t i = 0;
		for (; n - i > 16; i += 16)
			if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(a + i)),
							      _mm_loadu_si128((const __m128i *)(const void *)(b + i)))) !=
			    0xffff)
				return false;
		/* the last 16, overlapping what was compared */
		return _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(a + n - 16)),
							_mm_loadu_si128((const __m128i *)(const void *)(b + n - 16)))) ==
		       0xffff;
	}
#endif
	if (n >= 8) {
		uint64_t x, y, x2, y2;
		memcpy(&x, a, 8), memcpy(&y, b, 8), memcpy(&x2, a + n - 8, 8), memcpy(&y2, b + n - 8, 8);
		return x == y && x2 == y2;
	}
	if (n >= 4) {
		uint32_t x, y, x2, y2;
		memcpy(&x, a, 4), memcpy(&y, b, 4), memcpy(&x2, a + n - 4, 4), memcpy(&y2, b + n - 4, 4);
		return x == y && x2 == y2;
	}
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The first quote, backslash or byte up to CR (a line's end) at or after
 * p, or e. */
static inline const uint8_t *find_special_or_eol(const uint8_t *p, const uint8_t *e)
{
#ifdef GENAI_SSE2
	const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), cr = _mm_set1_epi8('\r');
	while (e - p >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
		unsigned bits = (unsigned)_mm_movemask_epi8(_mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, bs)), _mm_cmpeq_epi8(_mm_min_epu8(v, cr), v)));
		if (bits)
			return p + __builtin_ctz(bits);
		p += 16;
	}
#endif
	for (; p < e; p++)
		if (*p == '"' || *p == '\\' || *p <= '\r')
			return p;
	return e;
}

/* Whether the data line that starts at v, in [v, e), is the previous one
 * but for what its skipped strings hold (above): its end (the LF or CR
 * after it), or NULL. */
static const uint8_t *repeats(const struct nl_genai_repeat *rep, const uint8_t *v, const uint8_t *e)
{
	const uint8_t *p = v;
	size_t k = 0;
	for (unsigned i = 0; i < rep->n_spans; i++) {
		size_t seg = rep->span[i] - k;
		if ((size_t)(e - p) < seg || !same_bytes(p, rep->skel + k, seg))
			return NULL;
		k = rep->span[i];
		/* The string's contents: up to its closing quote, which the
		 * skeleton's next bytes begin with. */
		p = find_special_or_eol(p + seg, e);
		if (p == e || *p != '"')
			return NULL;
	}
	/* The rest, and the line's end right after it (the skeleton holds
	 * no LF or CR). */
	size_t seg = rep->len - k;
	if ((size_t)(e - p) <= seg || (p[seg] != '\n' && p[seg] != '\r') || !same_bytes(p, rep->skel + k, seg))
		return NULL;
	return p + seg;
}

/* After reading the line v[0..n): its skeleton, when it was one document
 * and the skeleton fits (the spans skipped() noted are in order). */
static void keep_skeleton(struct nl_genai_scan *s, const uint8_t *v, size_t n, const uint16_t (*from)[2],
			  unsigned n_spans)
{
	struct nl_genai_repeat *rep = &s->rep;
	size_t at = 0, k = 0;
	rep->len = 0;
	if (s->j.mode != J_END)
		return;
	for (unsigned i = 0; i < n_spans; i++) {
		size_t seg = from[i][0] - at;
		if (k + seg > sizeof rep->skel)
			return;
		memcpy(rep->skel + k, v + at, seg);
		k += seg;
		rep->span[i] = (uint16_t)k;
		at = from[i][1];
	}
	if (k + (n - at) > sizeof rep->skel)
		return;
	memcpy(rep->skel + k, v + at, n - at);
	rep->n_spans = (uint8_t)n_spans;
	rep->len = (uint16_t)(k + (n - at));
}

/* An event's first data line v[0..n), whole in this call and holding a
 * JSON object: read, and its skeleton kept. */
static void sse_data_line(struct run *r, const uint8_t *v, size_t n)
{
	uint16_t spans[NL_GENAI_REPEAT_SPANS][2];
	r->s->has_data = true;
	r->line = v;
	r->spans = spans;
	r->n_spans = 0;
	json_feed(r, v, v + n);
	r->line = NULL;
	keep_skeleton(r->s, v, n, (const uint16_t(*)[2])spans, r->n_spans);
}

static void sse_feed(struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_genai_scan *s = r->s;
	const uint8_t *lo = p;          /* the call's first byte */
	while (p < e) {
		uint8_t b = *p;
		if (s->cr) {
			s->cr = false;
			if (b == '\n') {
				p++;
				continue;
			}
		}
		switch ((enum line)s->line) {
		case L_START:
			if (b == '\n' || b == '\r') {
				s->cr = b == '\r';
				p++;
				dispatch(r, true);
				break;
			}
			/* A data or event line whose name is all here: straight to
			 * its value. */
			if (e - p >= 6 && (memcmp(p, "data:", 5) == 0 || memcmp(p, "event:", 6) == 0)) {
				bool data = *p == 'd';
				if (data && !s->has_data) {
					/* The event's first data line, all here: a
					 * repeat of the previous one, or read. */
					const uint8_t *v = p + 5 + (p[5] == ' '), *q;
					if (s->rep.len && (q = repeats(&s->rep, v, e))) {
						s->has_data = true;
						s->j.mode = J_END;
					} else if ((q = find_eol(lo, v, e)) < e && v < q && *v == '{' && q - v <= UINT16_MAX) {
						sse_data_line(r, v, (size_t)(q - v));
					} else {
						q = NULL;
					}
					if (q) {
						s->cr = *q == '\r';
						p = q + 1;
						break;
					}
				}
				p += data ? 5 : 6;
				field_name(r, data, !data);
				s->line = L_SPACE;
				s->name[7] = data;
				break;
			}
			s->name_len = 0;
			s->line = L_NAME;
			break;
		case L_NAME:
			p++;
			if (b == ':' || b == '\n' || b == '\r') {
				/* A line without a colon names a field with an empty value. */
				bool data = s->name_len == 4 && memcmp(s->name, "data", 4) == 0;
				bool event = s->name_len == 5 && memcmp(s->name, "event", 5) == 0;
				field_name(r, data, event);
				if (b != ':') {
					s->cr = b == '\r';
					s->line = L_START;
					break;
				}
				s->line = data ? L_SPACE : event ? L_SPACE : L_IGNORE;
				s->name[7] = data;   /* which one, past the name */
				break;
			}
			if (s->name_len < 7)
				s->name[s->name_len] = (char)b;
			if (s->name_len < 255)
				s->name_len++;
			break;
		case L_SPACE:
			if (b == ' ')
				p++;
			s->line = s->name[7] ? L_DATA : L_EVENT;
			break;
		case L_DATA:
		case L_EVENT:
		case L_IGNORE: {
			const uint8_t *q = find_eol(lo, p, e);
			if (s->line == L_DATA) {
				json_feed(r, p, q);
			} else if (s->line == L_EVENT) {
				size_t n = (size_t)(q - p), room = sizeof s->event.text - s->event.len;
				if (n > room)
					n = room, s->event.truncated = true;
				memcpy(s->event.text + s->event.len, p, n);
				s->event.len = (uint8_t)(s->event.len + n);
			}
			p = q;
			if (p < e) {
				s->cr = *p == '\r';
				p++;
				s->line = L_START;
			}
			break;
		}
		}
	}
}

/* ---- the API ------------------------------------------------------------------ */

void nl_genai_init(struct nl_genai_scan *s)
{
	memset(s, 0, offsetof(struct nl_genai_scan, rep));
	s->rep.len = 0;
	struct nl_genai_result *r = &s->r;
	r->prompt_tokens = r->completion_tokens = r->input_tokens = r->output_tokens = -1;
	r->cache_read = r->cache_creation = r->reasoning_tokens = -1;
	r->stream = -1;
	s->lead = true;
	json_reset(&s->j);
}

unsigned nl_genai_feed(struct nl_genai_scan *s, const void *buf, size_t n)
{
	const uint8_t *p = buf, *e = p + n;
	struct run r = { s, 0, s->r.kind == NL_GENAI_KIND_SSE, NULL, NULL, 0 };
	if (s->r.kind == NL_GENAI_KIND_NONE) {
		while (p < e && is_ws(*p))
			p++;
		if (p == e)
			return 0;
		uint8_t b = *p;
		if (b == '{' || b == '[')
			s->r.kind = NL_GENAI_KIND_JSON;
		else if ((b >= 'a' && b <= 'z') || b == ':')
			s->r.kind = NL_GENAI_KIND_SSE;
		else
			s->r.kind = NL_GENAI_KIND_UNREAD;
		r.sse = s->r.kind == NL_GENAI_KIND_SSE;
	}
	if (s->r.kind == NL_GENAI_KIND_JSON)
		json_feed(&r, p, e);
	else if (s->r.kind == NL_GENAI_KIND_SSE)
		sse_feed(&r, p, e);
	return r.flags;
}

void nl_genai_gap(struct nl_genai_scan *s)
{
	s->r.kind = NL_GENAI_KIND_UNREAD;
}

void nl_genai_end(struct nl_genai_scan *s)
{
	if (s->r.kind == NL_GENAI_KIND_SSE && (s->has_data || s->event.len)) {
		struct run r = { s, 0, true, NULL, NULL, 0 };
		dispatch(&r, false);
	}
}

int64_t nl_genai_input_tokens(const struct nl_genai_result *r)
{
	if (r->prompt_tokens >= 0)
		return r->prompt_tokens;
	if (r->input_tokens < 0)
		return -1;
	return r->input_tokens + (r->cache_read > 0 ? r->cache_read : 0) + (r->cache_creation > 0 ? r->cache_creation : 0);
}

int64_t nl_genai_output_tokens(const struct nl_genai_result *r)
{
	return r->completion_tokens >= 0 ? r->completion_tokens : r->output_tokens;
}
