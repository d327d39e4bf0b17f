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

#endif
