/* SPDX-License-Identifier: Apache-2.0 */
/* Model calls on a followed connection: the glue between the HTTP glue
 * (follow.c), the GenAI body scanner (genai.h) and the GenAI metrics
 * (genaimetrics.h). Private to the follow layer.
 *
 * A request whose target names a model call (nl_genai_target_op) takes an
 * exchange from a preallocated pool, found again by its connection and
 * ring slot, and has its parser tap the bodies of the request and of its
 * response (nl_h1_tap); every other exchange has no state here and costs
 * nothing more. The exchange goes back to the pool when its response ends,
 * or when the connection does; with the pool empty, a call is not read.
 * Each body goes through genaiz.h, which inflates a compressed one.
 */
#ifndef NL_GENAICONN_H
#define NL_GENAICONN_H

#include <stdbool.h>
#include <stdint.h>

#include "genai.h"
#include "h1.h"

struct nl_httpconn;
struct nl_follow_feed;

/* From the sink's REQ_LINE: the request in slot is a model call of op, on
 * a path NeMo Gym's model server captures when gym. False when the pool
 * has no room (the call is then not read). */
bool nl_genai_conn_begin(struct nl_httpconn *c, unsigned slot, enum nl_genai_op op, bool gym);
/* A tapped body's bytes (NL_H1_BODY). */
void nl_genai_conn_body(struct nl_follow_feed *f, const struct nl_h1_event *ev);
/* The request's body ended. */
void nl_genai_conn_request_end(struct nl_httpconn *c, unsigned slot);
/* The call ended (status 0: the connection ended first): recorded, and its
 * exchange back to the pool. start_us: when its request started. */
void nl_genai_conn_finish(struct nl_follow_feed *f, unsigned slot, unsigned status, uint32_t start_us,
			  uint64_t duration_ns);
/* The call will not be reported (malformed input, contention). */
void nl_genai_conn_drop(struct nl_httpconn *c, unsigned slot);

#endif
