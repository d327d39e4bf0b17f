/* SPDX-License-Identifier: Apache-2.0 */
/* Model calls read from the bytes (genai.h): the GenAI semantic
 * conventions' instruments on both sides, NeMo Lens's on the server side,
 * and NeMo Gym's model-call set (gym.model_call.*) on the server side,
 * recorded by the HTTP glue (preload/follow/) when a call's response ends.
 *
 * Like httpmetrics.h: lock-free, allocation-free and async-signal-safe once
 * registered; series come from the registry's reserved room, found again by
 * their attributes' ids. Model names, finish reasons and error types are
 * interned up to a per-process limit each, then recorded as "_OTHER", so a
 * server can never grow the series without end; nothing of a prompt or a
 * completion is ever kept.
 */
#ifndef NL_GENAIMETRICS_H
#define NL_GENAIMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "genai.h"

/* Whether model calls are read at all (NEMOLENS_GENAI, and the HTTP layer). */
extern bool nl_genai_on;
/* The shortest request target that may be a model call: 12, the built-in
 * paths' (each ends in "s"); 1 with rules of NEMOLENS_GENAI_PATHS; 255
 * with the feature off. */
extern uint8_t nl_genai_min_target;

void nl_genaimetrics_init(const struct nl_config *cfg);
void nl_genaimetrics_register(void);

/* The operation of a request target: the configured rules first, then the
 * built-in suffixes (genai.h). */
enum nl_genai_op nl_genai_rule_op(const char *target, size_t n);

/* A cheap first look at a request target: whether it may be a model call.
 * Every built-in path ends in "s"; with rules of its own, any may. */
static inline enum nl_genai_op nl_genai_target_op(const char *t, size_t n)
{
	unsigned min = nl_genai_min_target;
	if (n < min || (min == 12 && t[n - 1] != 's'))
		return NL_GENAI_OP_NONE;
	return nl_genai_rule_op(t, n);
}

/* One finished call. */
struct nl_genai_call {
	const struct nl_genai_result *req, *resp;
	uint64_t duration_ns;
	int64_t first_content_ns;       /* from the request's start to its first content chunk; -1: none */
	int64_t first_chunk_ns;         /* to the response's first body chunk, keep-alive comments aside; -1: none */
	uint16_t status;                /* 0: the connection ended before the response's head */
	bool aborted;                   /* the connection ended before the response did */
	bool gym;                       /* a path NeMo Gym's model server captures (nl_genai_gym_path) */
	uint8_t op;                     /* enum nl_genai_op */
	bool client;
	int16_t host;                   /* client: server.address id (httpmetrics.h), -1 unknown */
	uint16_t port;                  /* client: server.port */
	int16_t dest;                   /* client: destination index */
};
void nl_genai_record(const struct nl_genai_call *x);

#endif
