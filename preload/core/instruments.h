/* SPDX-License-Identifier: Apache-2.0 */
/* Every instrument the shim defines, once: name, unit, description, kind and
 * bucket boundaries. An instrument that two paths record (the C API and the
 * HTTP layer both record gym.verify.duration_ms) is defined here and nowhere
 * else, so the two can never disagree. */
#ifndef NL_INSTRUMENTS_H
#define NL_INSTRUMENTS_H

#include <stdbool.h>
#include <stddef.h>

#include "registry.h"

enum nl_inst_id {
	NL_I_CONNECT_TOTAL,
	NL_I_QUEUE_MS,
	NL_I_REQUEST_DURATION,
	NL_I_TOKEN_USAGE,
	NL_I_RL_REWARD_MEAN,
	NL_I_RL_KL,
	NL_I_RL_POLICY_LOSS,
	NL_I_RL_VALUE_LOSS,
	NL_I_RL_ENTROPY,
	NL_I_RL_RESPONSE_LENGTH,
	NL_I_RL_GRAD_NORM,
	NL_I_RL_LEARNING_RATE,
	NL_I_RL_THROUGHPUT,
	NL_I_RL_GENERATION_MS,
	NL_I_RL_ROLLOUT_MS,
	NL_I_GYM_REQUEST_MS,
	NL_I_GYM_ROLLOUT_MS,
	NL_I_GYM_VERIFY_MS,
	NL_I_GYM_SUCCESS_RATE,
	NL_I_GYM_SERVERS_ACTIVE,
	NL_I_HTTP_SERVER_DURATION,
	NL_I_HTTP_SERVER_ACTIVE,
	NL_I_HTTP_SERVER_REQUEST_BODY,
	NL_I_HTTP_SERVER_RESPONSE_BODY,
	NL_I_HTTP_CLIENT_DURATION,
	NL_I_HTTP_SERVER_DURATION_OLD,
	NL_I_GENAI_CLIENT_DURATION,
	NL_I_GENAI_CLIENT_TTFC,
	NL_I_GENAI_SERVER_TTFT,
	NL_I_GENAI_SERVER_TPOT,
	NL_I_GYM_MODEL_CALL_MS,
	NL_I_GYM_MODEL_CALL_TTFT_MS,
	NL_I_GYM_MODEL_CALL_TOKENS,
	NL_I_GYM_MODEL_CALL_FINISH,
	NL_I_RPC_SERVER_DURATION,
	NL_I_RPC_CLIENT_DURATION,
	NL_I_HTTP2_GIVEN_UP,
	NL_I_CONN_OPENED,
	NL_I_CONN_CALL_SITE,
	NL_I_LOOP_LAG_MS,
	NL_I_LOOP_TASKS,
	NL_I_GC_PAUSE_MS,
	NL_I_GC_COLLECTIONS,
	NL_I_GC_COLLECTED,
	NL_I_GC_UNCOLLECTABLE,
	NL_I_GC_COUNT,
	NL_I_SERVER_READY,
	NL_I_GYM_STARTUP_STAGE_MS,
	NL_N_INST
};

struct nl_inst_def {
	const char *name;
	const char *unit;
	const char *description;
	enum nl_kind kind;
	const double *bounds;
	size_t n_bounds;
	bool shared;            /* also recorded by the shim itself: never hidden */
};

extern const struct nl_inst_def nl_inst_defs[NL_N_INST];

/* The registered instrument of id (registered on first use; idempotent and
 * thread-safe). NULL on OOM. May lock and allocate: never from a hook. */
struct nl_instrument *nl_inst(enum nl_inst_id id);

/* Bucket boundaries (OpenTelemetry and NeMo Lens advice). */
extern const double nl_genai_duration_s_bounds[14];
extern const double nl_token_bounds[14];
extern const double nl_gym_ms_bounds[15];
extern const double nl_otel_default_bounds[15];
extern const double nl_http_duration_s_bounds[14];
extern const double nl_queue_ms_bounds[17];
extern const double nl_genai_ttft_s_bounds[16];
extern const double nl_genai_tpot_s_bounds[13];
extern const double nl_gym_model_call_ms_bounds[13];
extern const double nl_gym_ttft_ms_bounds[12];
extern const double nl_gym_tokens_bounds[12];
extern const double nl_ready_s_bounds[14];
extern const double nl_startup_ms_bounds[15];

#endif
