/* SPDX-License-Identifier: Apache-2.0 */
#include "genaimetrics.h"

#include <stdatomic.h>
#include <string.h>
#include <strings.h>

#include "dest.h"
#include "httpmetrics.h"
#include "instruments.h"
#include "loadpath.h"
#include "registry.h"
#include "state.h"
#include "table.h"

NL_LOAD_STATE bool nl_genai_on;
NL_LOAD_STATE uint8_t nl_genai_min_target = 255;

NL_LOAD_STATE static const char *provider_override;   /* NEMOLENS_GENAI_PROVIDER */
NL_LOAD_STATE static const char *server_name;         /* nemo.gym.server.name */
NL_LOAD_STATE static bool server_on, client_on;

/* ---- path rules (NEMOLENS_GENAI_PATHS) ------------------------------------------ */

#define RULES_MAX 16
#define RULE_LEN 64
struct rule {
	char suffix[RULE_LEN];
	uint8_t len;
	uint8_t op;
};
static struct rule rules[RULES_MAX];   /* (written only when the variable is set: not load state) */
NL_LOAD_STATE static unsigned n_rules;

/* The operations a rule may name, by what they are called in the rules. */
static const struct {
	char name[16];
	uint8_t op;
} op_names[] NL_COLD_RODATA = {
	{ "chat", NL_GENAI_OP_CHAT },
	{ "text_completion", NL_GENAI_OP_COMPLETIONS },
	{ "responses", NL_GENAI_OP_RESPONSES },
	{ "embeddings", NL_GENAI_OP_EMBEDDINGS },
	{ "messages", NL_GENAI_OP_MESSAGES },
};

/* "suffix=operation,…": a request path that ends with suffix is a call of
 * that operation, before the built-in paths. Bad entries are skipped. */
static __attribute__((noinline)) void parse_rules(const char *v)
{
	while (v && *v) {
		size_t n = strcspn(v, ",");
		const char *eq = memchr(v, '=', n);
		if (eq && eq > v && (size_t)(eq - v) < RULE_LEN && n_rules < RULES_MAX) {
			size_t k = n - (size_t)(eq - v) - 1;
			for (size_t i = 0; i < sizeof op_names / sizeof *op_names; i++)
				if (strlen(op_names[i].name) == k && strncmp(op_names[i].name, eq + 1, k) == 0) {
					struct rule *r = &rules[n_rules++];
					memcpy(r->suffix, v, (size_t)(eq - v));
					r->len = (uint8_t)(eq - v);
					r->op = op_names[i].op;
				}
		}
		v += n;
		if (*v == ',')
			v++;
	}
	if (n_rules)
		nl_genai_min_target = 1;
}

enum nl_genai_op nl_genai_rule_op(const char *t, size_t n)
{
	const char *q = memchr(t, '?', n);
	size_t path = q ? (size_t)(q - t) : n;
	for (unsigned i = 0; i < n_rules; i++)
		if (path >= rules[i].len && memcmp(t + path - rules[i].len, rules[i].suffix, rules[i].len) == 0)
			return (enum nl_genai_op)rules[i].op;
	return nl_genai_path_op(t, n);
}

/* ---- bounded names -------------------------------------------------------------- */

/* Values interned up to a limit (table.h); ids past the limit are the limit
 * itself: _OTHER. */
#define MODELS 64
#define WORDS 32
static NL_INTERN_SLOT(NL_GENAI_MODEL_MAX) model_slots[2 * MODELS], finish_slots[2 * WORDS], error_slots[2 * WORDS];
static const char *model_text[MODELS], *finish_text[WORDS], *error_text[WORDS];
static _Atomic unsigned n_models, n_finishes, n_errors;
/* Set up by the first record (nl_genaimetrics_register): zero until then,
 * no relocation for the loader to write. */
static struct nl_intern models, finishes, errors;
_Static_assert(!(MODELS & (MODELS - 1)) && !(WORDS & (WORDS - 1)), "table.h: slots a power of two");

#define NAME_NONE 0xff          /* no value: no attribute */

static bool visible(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* The id of s[0..n): NAME_NONE for none, limit (_OTHER) past the limit or
 * for a value an attribute should not carry as is. */
static unsigned intern(const struct nl_intern *t, const char *s, size_t n)
{
	if (!n)
		return NAME_NONE;
	if (n > NL_GENAI_MODEL_MAX || !visible(s, n))
		return t->table.limit;
	int id = nl_intern(t, s, n);
	return id == NL_INTERN_OVERFLOW ? t->table.limit : (unsigned)id;
}

/* Attribute keys, out of the load path's pages (loadpath.h). */
static const char k_error_type[] NL_COLD_RODATA = "error.type";
static const char k_gen_ai_operation_name[] NL_COLD_RODATA = "gen_ai.operation.name";
static const char k_gen_ai_provider_name[] NL_COLD_RODATA = "gen_ai.provider.name";
static const char k_gen_ai_request_model[] NL_COLD_RODATA = "gen_ai.request.model";
static const char k_gen_ai_response_model[] NL_COLD_RODATA = "gen_ai.response.model";
static const char k_gen_ai_token_type[] NL_COLD_RODATA = "gen_ai.token.type";
static const char k_nemo_gym_http_destination_server_name[] NL_COLD_RODATA = "nemo.gym.http.destination.server.name";
static const char k_nemo_gym_model_call_dialect[] NL_COLD_RODATA = "nemo.gym.model_call.dialect";
static const char k_nemo_gym_model_call_finish_reason[] NL_COLD_RODATA = "nemo.gym.model_call.finish_reason";
static const char k_nemo_gym_model_call_outcome[] NL_COLD_RODATA = "nemo.gym.model_call.outcome";
static const char k_nemo_gym_model_call_token_type[] NL_COLD_RODATA = "nemo.gym.model_call.token.type";
static const char k_nemo_gym_server_name[] NL_COLD_RODATA = "nemo.gym.server.name";
static const char k_server_address[] NL_COLD_RODATA = "server.address";
static const char k_server_port[] NL_COLD_RODATA = "server.port";

/* ---- series by attribute ids ---------------------------------------------------- */

enum which {
	W_SERVER_DURATION, W_CLIENT_DURATION, W_TOKENS, W_TTFC, W_TTFT, W_TPOT,
	W_GYM_DURATION, W_GYM_TTFT, W_GYM_TOKENS, W_GYM_FINISH, W_N
};

static const uint8_t inst_of[W_N] NL_COLD_RODATA = {
	NL_I_REQUEST_DURATION, NL_I_GENAI_CLIENT_DURATION, NL_I_TOKEN_USAGE, NL_I_GENAI_CLIENT_TTFC,
	NL_I_GENAI_SERVER_TTFT, NL_I_GENAI_SERVER_TPOT, NL_I_GYM_MODEL_CALL_MS, NL_I_GYM_MODEL_CALL_TTFT_MS,
	NL_I_GYM_MODEL_CALL_TOKENS, NL_I_GYM_MODEL_CALL_FINISH,
};
static struct nl_instrument *insts[W_N];

enum { TOK_INPUT, TOK_OUTPUT, TOK_REASONING, TOK_NONE };
/* Attribute values as arrays, not pointers: no relocation for the loader to write. */
static const char token_type[][10] NL_COLD_RODATA = { "input", "output", "reasoning" };

enum { D_CHAT, D_RESPONSES, D_MESSAGES, D_UNKNOWN };
static const char dialect_text[][10] NL_COLD_RODATA = { "chat", "responses", "messages", "unknown" };

enum {
	O_OK, O_TIMEOUT, O_RATE_LIMIT, O_AUTH, O_NOT_FOUND, O_CLIENT_ERROR, O_UPSTREAM_ERROR, O_PARSE_ERROR,
	O_CONNECTION, O_INCOMPLETE, O_TRUNCATED, O_NONE
};
static const char outcome_text[][20] NL_COLD_RODATA = { "ok", "timeout", "rate_limit", "auth", "not_found", "client_error",
					   "upstream_error", "capture_parse_error", "connection",
					   "incomplete", "stream_truncated" };

/* What a series is: which instrument and the ids of its attributes. */
struct key {
	uint8_t which, op, client, token, dialect, outcome;
	uint8_t req_model, resp_model, error, finish;
	int16_t host, dest;
	uint16_t port;
};

static inline void pack(const struct key *k, uint64_t *k0, uint64_t *k1)
{
	*k0 = 1u | (uint64_t)k->which << 1 | (uint64_t)k->op << 6 | (uint64_t)k->client << 9 | (uint64_t)k->token << 10 |
	      (uint64_t)k->dialect << 12 | (uint64_t)k->outcome << 15 | (uint64_t)k->req_model << 19 |
	      (uint64_t)k->resp_model << 27 | (uint64_t)k->error << 35 | (uint64_t)k->finish << 43;
	*k1 = (uint64_t)(uint16_t)k->host | (uint64_t)(uint16_t)k->dest << 16 | (uint64_t)k->port << 32;
}

/* A key's op: the operation name's index, with the provider's bit (4: the
 * Anthropic format): chat completions, the Responses API and messages are
 * all "chat", and must share their series where their attributes agree. */
enum { OPN_CHAT, OPN_TEXT_COMPLETION, OPN_EMBEDDINGS, OPN_ANTHROPIC = 4 };

static unsigned key_op(unsigned op)
{
	unsigned k = op == NL_GENAI_OP_COMPLETIONS ? OPN_TEXT_COMPLETION
		     : op == NL_GENAI_OP_EMBEDDINGS ? OPN_EMBEDDINGS
						     : OPN_CHAT;
	return op == NL_GENAI_OP_MESSAGES && !provider_override ? k | OPN_ANTHROPIC : k;
}

static const char *op_text(unsigned kop)
{
	static const char names[][16] = { "chat", "text_completion", "embeddings", "chat" };
	return names[kop & 3];
}

static const char *provider_text(unsigned kop)
{
	if (provider_override)
		return provider_override;
	return kop & OPN_ANTHROPIC ? "anthropic" : "openai";
}

static const char *name_text(const struct nl_intern *t, unsigned id)
{
	return id >= t->table.limit ? "_OTHER" : t->text[id];
}

static size_t attrs_of(const struct key *k, struct nl_attr *a)
{
	size_t n = 0;
	if (k->which >= W_GYM_DURATION) {
		a[n++] = NL_ATTR_S(k_nemo_gym_server_name, server_name ? server_name : "unknown");
		a[n++] = NL_ATTR_S(k_nemo_gym_model_call_dialect, dialect_text[k->dialect]);
		if (k->which == W_GYM_DURATION)
			a[n++] = NL_ATTR_S(k_nemo_gym_model_call_outcome, outcome_text[k->outcome]);
		if (k->which == W_GYM_TOKENS)
			a[n++] = NL_ATTR_S(k_nemo_gym_model_call_token_type, token_type[k->token]);
		if (k->which == W_GYM_FINISH)
			a[n++] = NL_ATTR_S(k_nemo_gym_model_call_finish_reason, name_text(&finishes, k->finish));
		return n;
	}
	a[n++] = NL_ATTR_S(k_gen_ai_operation_name, op_text(k->op));
	a[n++] = NL_ATTR_S(k_gen_ai_provider_name, provider_text(k->op));
	if (k->req_model != NAME_NONE)
		a[n++] = NL_ATTR_S(k_gen_ai_request_model, name_text(&models, k->req_model));
	if (k->resp_model != NAME_NONE)
		a[n++] = NL_ATTR_S(k_gen_ai_response_model, name_text(&models, k->resp_model));
	if (k->token != TOK_NONE)
		a[n++] = NL_ATTR_S(k_gen_ai_token_type, token_type[k->token]);
	if (k->error != NAME_NONE)
		a[n++] = NL_ATTR_S(k_error_type, name_text(&errors, k->error));
	if (k->client) {
		if (k->host >= 0)
			a[n++] = NL_ATTR_S(k_server_address, nl_http_host_name(k->host));
		if (k->port)
			a[n++] = NL_ATTR_I(k_server_port, k->port);
		a[n++] = NL_ATTR_S(k_nemo_gym_http_destination_server_name, nl_dest_name(k->dest));
	}
	return n;
}

#define CELLS 2048
struct cell {
	struct nl_slot head;    /* ready (id 0) once s is made */
	uint64_t k0, k1;
	struct nl_series *s;
};
NL_TABLE_SLOTS(struct cell, cells, CELLS);

struct packed {
	uint64_t k0, k1;
};

static bool same_key(const struct nl_slot *e, const void *key)
{
	const struct cell *c = (const struct cell *)e;
	const struct packed *p = key;
	return c->k0 == p->k0 && c->k1 == p->k1;
}

struct making {
	const struct packed *p;
	const struct key *k;
	struct nl_instrument *inst;
};

static void make_cell(struct nl_slot *e, const void *arg)
{
	const struct making *m = arg;
	struct cell *c = (struct cell *)e;
	c->k0 = m->p->k0;
	c->k1 = m->p->k1;
	struct nl_attr a[NL_MAX_ATTRS];
	size_t n = attrs_of(m->k, a);
	c->s = nl_series_add_static(m->inst, a, n);
}

/* The series of k, made on first use; the overflow series when the table is
 * full or another thread is still making a series where k's may be
 * (perhaps this very one). */
static struct nl_series *series_for(const struct key *k)
{
	const struct nl_table t = { cells, sizeof cells[0], CELLS, 64, 0, NULL, 0 };
	struct nl_instrument *inst = insts[k->which];
	struct packed p;
	pack(k, &p.k0, &p.k1);
	uint32_t h = (uint32_t)(((p.k0 ^ p.k1 * 0xff51afd7ed558ccdull) * 0x9E3779B97F4A7C15ull) >> 40);
	const struct making m = { &p, k, inst };
	struct nl_slot *e;
	if (nl_table_get(&t, h, same_key, &p, make_cell, &m, &e) != NL_TABLE_FOUND)
		return nl_instrument_overflow(inst);
	return ((struct cell *)e)->s;
}

static void hist(struct key *k, unsigned which, double v)
{
	k->which = (uint8_t)which;
	nl_hist_record(insts[which], series_for(k), v);
}

/* ---- recording ------------------------------------------------------------------ */

static unsigned dialect_of(unsigned op)
{
	switch (op) {
	case NL_GENAI_OP_CHAT:
		return D_CHAT;
	case NL_GENAI_OP_RESPONSES:
		return D_RESPONSES;
	case NL_GENAI_OP_MESSAGES:
		return D_MESSAGES;
	}
	return D_UNKNOWN;
}

/* How a stream ended, in its dialect's terms (NeMo Gym's capture): the
 * first of the dialect's end events that came. */
enum { END_NONE, END_COMPLETE, END_INCOMPLETE, END_ERROR };

static unsigned stream_end(const struct nl_genai_result *r, unsigned dialect)
{
	/* Per dialect: the end events it knows, and what each means. */
	static const uint8_t ends[3][4][2] NL_COLD_RODATA = {
		[D_CHAT] = { { NL_GENAI_END_DONE, END_COMPLETE }, { NL_GENAI_END_EVENT_ERROR, END_ERROR },
			     { NL_GENAI_END_DATA_ERROR, END_ERROR }, { NL_GENAI_END_N, END_NONE } },
		[D_RESPONSES] = { { NL_GENAI_END_RESPONSE_COMPLETED, END_COMPLETE },
				  { NL_GENAI_END_RESPONSE_INCOMPLETE, END_INCOMPLETE },
				  { NL_GENAI_END_RESPONSE_FAILED, END_ERROR }, { NL_GENAI_END_EVENT_ERROR, END_ERROR } },
		[D_MESSAGES] = { { NL_GENAI_END_MESSAGE_STOP, END_COMPLETE }, { NL_GENAI_END_EVENT_ERROR, END_ERROR },
				 { NL_GENAI_END_N, END_NONE }, { NL_GENAI_END_N, END_NONE } },
	};
	unsigned end = END_NONE, at = 0;
	for (unsigned i = 0; i < 4 && dialect < 3; i++) {
		unsigned kind = ends[dialect][i][0];
		if (kind < NL_GENAI_END_N && r->end_at[kind] && (!at || r->end_at[kind] < at)) {
			at = r->end_at[kind];
			end = ends[dialect][i][1];
		}
	}
	return end;
}

/* Whether a response is a stream: an event stream's bytes, or, with none
 * to tell, the request asked for one. */
static bool is_stream(const struct nl_genai_call *x)
{
	return x->resp->kind == NL_GENAI_KIND_SSE ||
	       (x->resp->kind == NL_GENAI_KIND_NONE && x->req && x->req->stream == 1);
}

/* NeMo Gym's outcome of a call, decided as its capture decides it: the
 * status first, then how a stream ended, then whether the body was read. */
static unsigned outcome_of(const struct nl_genai_call *x, unsigned dialect)
{
	unsigned status = x->status;
	if (!status)
		return O_CONNECTION;    /* the client left, or the server, before any answer */
	if (status < 400) {
		if (is_stream(x)) {
			switch (stream_end(x->resp, dialect)) {
			case END_ERROR:
				return O_UPSTREAM_ERROR;
			case END_INCOMPLETE:
				return O_INCOMPLETE;
			case END_NONE:
				return O_TRUNCATED;
			}
			return O_OK;
		}
		return x->resp->kind == NL_GENAI_KIND_UNREAD ? O_PARSE_ERROR : O_OK;
	}
	if (status == 408 || status == 504)
		return O_TIMEOUT;
	if (status == 429)
		return O_RATE_LIMIT;
	if (status == 401 || status == 403)
		return O_AUTH;
	if (status == 404)
		return O_NOT_FOUND;
	if (status / 100 == 4)
		return O_CLIENT_ERROR;
	if (status / 100 == 5)
		return O_UPSTREAM_ERROR;
	return O_OK;
}

/* The finish reason in the dialect's own words: choices[].finish_reason or
 * stop_reason as given; for the Responses API, "completed", or the reason
 * an incomplete response gives (its status when it gives none). */
static unsigned finish_of(const struct nl_genai_result *r, unsigned op)
{
	if (op == NL_GENAI_OP_RESPONSES && r->status.len) {
		if (r->status.len == 9 && memcmp(r->status.text, "completed", 9) == 0)
			return intern(&finishes, "completed", 9);
		if (r->status.len == 10 && memcmp(r->status.text, "incomplete", 10) == 0 && r->incomplete.len)
			return intern(&finishes, r->incomplete.text, r->incomplete.len);
		if ((r->status.len == 11 && memcmp(r->status.text, "in_progress", 11) == 0) ||
		    (r->status.len == 6 && memcmp(r->status.text, "queued", 6) == 0))
			return NAME_NONE;
		return intern(&finishes, r->status.text, r->status.len);
	}
	return intern(&finishes, r->finish.text, r->finish.len);
}

static const char status_digits[] = "0123456789";

static unsigned error_of(const struct nl_genai_call *x)
{
	if (x->aborted)
		return intern(&errors, "connection_closed", 17);
	if (x->status >= 400) {
		char t[3] = { status_digits[x->status / 100 % 10], status_digits[x->status / 10 % 10],
			      status_digits[x->status % 10] };
		return intern(&errors, t, 3);
	}
	if (x->resp->error)
		return x->resp->error_type.len ? intern(&errors, x->resp->error_type.text, x->resp->error_type.len)
					       : intern(&errors, "error", 5);
	return NAME_NONE;
}

void nl_genai_record(const struct nl_genai_call *x)
{
	if (!insts[W_TOKENS]) {
		nl_runtime_kick();
		if (!insts[W_TOKENS])
			return;
	}
	if (x->client ? !client_on : !server_on)
		return;
	const struct nl_genai_result *resp = x->resp, *req = x->req;
	struct key k = {
		.op = (uint8_t)key_op(x->op),
		.client = x->client,
		.token = TOK_NONE,
		.dialect = 0,   /* (Gym's alone: the GenAI set's series are by its attributes) */
		.outcome = O_NONE,
		.req_model = (uint8_t)(req ? intern(&models, req->model.text, req->model.len) : NAME_NONE),
		.resp_model = (uint8_t)intern(&models, resp->model.text, resp->model.len),
		.error = NAME_NONE,
		.finish = NAME_NONE,
		.host = x->client ? x->host : -1,
		.dest = x->client ? x->dest : 0,
		.port = x->client ? x->port : 0,
	};
	double s = (double)x->duration_ns / 1e9;
	bool ok = x->status / 100 == 2 && !resp->error && !x->aborted;
	bool stream = resp->kind == NL_GENAI_KIND_SSE;
	int64_t in = nl_genai_input_tokens(resp), out = nl_genai_output_tokens(resp);

	/* The GenAI conventions' set. */
	k.error = (uint8_t)error_of(x);
	hist(&k, x->client ? W_CLIENT_DURATION : W_SERVER_DURATION, s);
	k.error = NAME_NONE;
	if (in >= 0) {
		k.token = TOK_INPUT;
		hist(&k, W_TOKENS, (double)in);
	}
	if (out >= 0) {
		k.token = TOK_OUTPUT;
		hist(&k, W_TOKENS, (double)out);
	}
	k.token = TOK_NONE;
	/* Every stream has its first chunk (the client's figure) and, once a
	 * token came, its first token (the server's), however it ended. */
	if (stream && x->client && x->first_chunk_ns >= 0)
		hist(&k, W_TTFC, (double)x->first_chunk_ns / 1e9);
	if (stream && !x->client && x->first_content_ns >= 0) {
		double first = (double)x->first_content_ns / 1e9;
		hist(&k, W_TTFT, first);
		if (ok && out > 1 && x->duration_ns >= (uint64_t)x->first_content_ns)
			hist(&k, W_TPOT, (s - first) / (double)(out - 1));
	}
	if (x->client)
		return;

	/* NeMo Gym's model-call set: the server side of a call, on the paths
	 * and in the dialects Gym's model server captures. */
	unsigned dialect = dialect_of(x->op);
	if (!x->gym || dialect == D_UNKNOWN)
		return;
	struct key g = { .dialect = (uint8_t)dialect, .token = TOK_NONE, .req_model = NAME_NONE, .resp_model = NAME_NONE,
			 .error = NAME_NONE, .finish = NAME_NONE, .host = -1 };
	g.outcome = (uint8_t)outcome_of(x, dialect);
	hist(&g, W_GYM_DURATION, (double)x->duration_ns / 1e6);
	g.outcome = O_NONE;
	if (stream && x->first_chunk_ns >= 0)
		hist(&g, W_GYM_TTFT, (double)x->first_chunk_ns / 1e6);
	int64_t tokens[3] = { in, out, resp->reasoning_tokens };
	for (unsigned t = 0; t < 3; t++)
		if (tokens[t] >= 0) {
			g.token = (uint8_t)t;
			hist(&g, W_GYM_TOKENS, (double)tokens[t]);
		}
	g.token = TOK_NONE;
	unsigned finish = finish_of(resp, x->op);
	if (finish != NAME_NONE) {
		g.finish = (uint8_t)finish;
		g.which = W_GYM_FINISH;
		nl_counter_add(series_for(&g), 1);
	}
}

/* ---- setup ---------------------------------------------------------------------- */

NL_LOAD_PATH void nl_genaimetrics_init(const struct nl_config *cfg)
{
	nl_genai_on = cfg->genai && (cfg->http_server || cfg->http_client);
	server_on = cfg->http_server;
	client_on = cfg->http_client;
	provider_override = cfg->genai_provider;
	server_name = cfg->server_name;
	n_rules = 0;
	nl_genai_min_target = nl_genai_on ? 12 : 255;
	if (nl_genai_on)
		parse_rules(cfg->genai_paths);
}

void nl_genaimetrics_register(void)
{
	if (!nl_genai_on)
		return;
	models = (struct nl_intern){ { model_slots, sizeof model_slots[0], 2 * MODELS, 2 * MODELS, NL_TABLE_SPINS, &n_models, MODELS },
				     NL_GENAI_MODEL_MAX, model_text };
	finishes = (struct nl_intern){ { finish_slots, sizeof finish_slots[0], 2 * WORDS, 2 * WORDS, NL_TABLE_SPINS, &n_finishes, WORDS },
				       NL_GENAI_MODEL_MAX, finish_text };
	errors = (struct nl_intern){ { error_slots, sizeof error_slots[0], 2 * WORDS, 2 * WORDS, NL_TABLE_SPINS, &n_errors, WORDS },
				     NL_GENAI_MODEL_MAX, error_text };
	nl_registry_reserve_static(CELLS);
	for (unsigned w = 0; w < W_N; w++)
		if (!(insts[w] = nl_inst((enum nl_inst_id)inst_of[w]))) {
			insts[W_TOKENS] = NULL;
			return;
		}
}
