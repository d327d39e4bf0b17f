/* SPDX-License-Identifier: Apache-2.0 */
#include "instruments.h"

#include <stdatomic.h>

#include "loadpath.h"

/* OpenTelemetry GenAI semantic conventions, explicit bucket advice. */
const double nl_genai_duration_s_bounds[14] = { 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
					    1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92 };
const double nl_token_bounds[14] = { 1,	4,	 16,	  64,	    256,      1024,	4096,
				       16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864 };
/* The GenAI conventions' advice for time to first token (and first chunk)
 * and for time per output token. */
NL_COLD_RODATA const double nl_genai_ttft_s_bounds[16] = { 0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
					    0.25,  0.5,	  0.75, 1.0,  2.5,  5.0,  7.5,	10.0 };
NL_COLD_RODATA const double nl_genai_tpot_s_bounds[13] = { 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
					    0.3,  0.4,	 0.5,  0.75,  1.0, 2.5 };
/* NeMo Gym's model-call boundaries. */
NL_COLD_RODATA const double nl_gym_model_call_ms_bounds[13] = { 100,	250,   500,    1000,   2000,   5000,   10000,
						 30000, 60000, 120000, 300000, 600000, 1800000 };
NL_COLD_RODATA const double nl_gym_ttft_ms_bounds[12] = { 50, 100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000 };
NL_COLD_RODATA const double nl_gym_tokens_bounds[12] = { 16,	  64,	 256,	 1024,	 4096,	 16384,
					  32768, 65536, 131072, 262144, 524288, 1048576 };
/* NeMo Lens's GYM_DURATION_BOUNDARIES_MS. */
const double nl_gym_ms_bounds[15] = { 100,	250,	500,	1000,	 2500,	  5000,	   10000,  30000,
					60000, 120000, 300000, 600000, 1200000, 1800000, 3600000 };
/* The OpenTelemetry SDK's default boundaries: for rl.* (NeMo Lens gives no
 * advice), body sizes and the old http.server.duration (no advice either). */
const double nl_otel_default_bounds[15] = { 0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000 };

/* NeMo Gym's connection pool wait boundaries. */
const double nl_queue_ms_bounds[17] = { 0.01, 0.05, 0.1, 0.25, 0.5, 1,	 2.5,  5,    10,
					25,   50,   100, 250,  500, 1000, 5000, 30000 };

/* The HTTP semantic conventions' advice for request durations. */
const double nl_http_duration_s_bounds[14] = { 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
					       0.5,   0.75, 1,	   2.5,	 5,	7.5, 10 };

/* Start-up times, ours (Gym's SERVER_STARTUP_BOUNDARIES_MS is not known
 * here): from a C server ready in tens of milliseconds to a model server
 * that loads weights for ten minutes, about two buckets a decade, the same
 * edges in seconds for the ready duration and in milliseconds for Gym's
 * stages (whose venv set-up can take minutes too). */
NL_COLD_RODATA const double nl_ready_s_bounds[14] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
					       10,   30,  60,   120, 300, 600, 1800 };
NL_COLD_RODATA const double nl_startup_ms_bounds[15] = { 10,	50,    100,    250,    500,	1000,	2500, 5000,
						  10000, 30000, 60000, 120000, 300000, 600000, 1800000 };

#define NB(a) (sizeof(a) / sizeof *(a))

#define GAUGE(n, u, d) { n, u, d, NL_GAUGE, NULL, 0, false }
#define HIST(n, u, d, b) { n, u, d, NL_HISTOGRAM, b, NB(b), false }
/* Recorded by the HTTP layer too, from the routes. */
#define SHARED_HIST(n, u, d, b) { n, u, d, NL_HISTOGRAM, b, NB(b), true }

/* The model-call instruments' strings, out of the load path's pages (loadpath.h). */
static const char cs0[] NL_COLD_RODATA = "gen_ai.client.operation.duration";
static const char cs1[] NL_COLD_RODATA = "s";
static const char cs2[] NL_COLD_RODATA = "GenAI operation duration.";
static const char cs3[] NL_COLD_RODATA = "gen_ai.client.operation.time_to_first_chunk";
static const char cs4[] NL_COLD_RODATA = "Time to receive the first chunk of a streamed response.";
static const char cs5[] NL_COLD_RODATA = "gen_ai.server.time_to_first_token";
static const char cs6[] NL_COLD_RODATA = "Time to generate first token for successful responses.";
static const char cs7[] NL_COLD_RODATA = "gen_ai.server.time_per_output_token";
static const char cs8[] NL_COLD_RODATA = "Time per output token generated after the first token for successful responses.";
static const char cs9[] NL_COLD_RODATA = "gym.model_call.duration_ms";
static const char cs10[] NL_COLD_RODATA = "ms";
static const char cs11[] NL_COLD_RODATA = "Wall-clock time of one model call at a Gym model server, success or failure.";
static const char cs12[] NL_COLD_RODATA = "gym.model_call.ttft_ms";
static const char cs13[] NL_COLD_RODATA = "Time to the first streamed chunk of one model call.";
static const char cs14[] NL_COLD_RODATA = "gym.model_call.tokens";
static const char cs15[] NL_COLD_RODATA = "{token}";
static const char cs16[] NL_COLD_RODATA = "Token usage one model call reported, by token type.";
static const char cs17[] NL_COLD_RODATA = "gym.model_call.finish_total";
static const char cs18[] NL_COLD_RODATA = "1";
static const char cs19[] NL_COLD_RODATA = "Model responses by the finish reason the provider reported.";

const struct nl_inst_def nl_inst_defs[NL_N_INST] = {
	[NL_I_CONNECT_TOTAL] = { "gym.http.connection_pool.connect_total", "{connection}",
				 "Connection attempts per destination server: pool acquisitions where a pool adapter "
				 "runs, connect calls elsewhere",
				 NL_COUNTER, NULL, 0, true },
	[NL_I_QUEUE_MS] = { "gym.http.connection_pool.queue_duration_ms", "ms",
			    "Time a connection acquisition waited until it was established or abandoned", NL_HISTOGRAM,
			    nl_queue_ms_bounds, 17, true },
	/* The C API's, and model calls read from the bytes (genaimetrics.c). */
	[NL_I_REQUEST_DURATION] = HIST("gen_ai.server.request.duration", "s", "GenAI server request duration.",
				    nl_genai_duration_s_bounds),
	[NL_I_TOKEN_USAGE] = HIST("gen_ai.client.token.usage", "{token}", "Number of input and output tokens used.",
			       nl_token_bounds),
	[NL_I_RL_REWARD_MEAN] = GAUGE("rl.reward.mean", "", "Mean reward across rollout batch."),
	[NL_I_RL_KL] = GAUGE("rl.kl_divergence", "", "KL divergence between policy and reference."),
	[NL_I_RL_POLICY_LOSS] = GAUGE("rl.policy_loss", "", "Policy gradient loss."),
	[NL_I_RL_VALUE_LOSS] = GAUGE("rl.value_loss", "", "Value function loss."),
	[NL_I_RL_ENTROPY] = GAUGE("rl.entropy", "", "Policy entropy."),
	[NL_I_RL_RESPONSE_LENGTH] = GAUGE("rl.response_length.mean", "", "Mean generated response length (tokens)."),
	[NL_I_RL_GRAD_NORM] = GAUGE("rl.grad_norm", "", "Gradient norm of the policy update."),
	[NL_I_RL_LEARNING_RATE] = GAUGE("rl.learning_rate", "", "Current optimizer learning rate."),
	[NL_I_RL_THROUGHPUT] = GAUGE("rl.throughput.tokens_per_sec", "{token}/s", "Training throughput (tokens/sec)."),
	[NL_I_RL_GENERATION_MS] = HIST("rl.generation.duration_ms", "ms", "Duration of text generation in milliseconds.",
				    nl_otel_default_bounds),
	[NL_I_RL_ROLLOUT_MS] = HIST("rl.rollout.duration_ms", "ms", "Duration of rollout collection in milliseconds.",
				 nl_otel_default_bounds),
	[NL_I_GYM_REQUEST_MS] = HIST("gym.server.request_duration_ms", "ms",
				  "Gym server request duration in milliseconds.", nl_gym_ms_bounds),
	[NL_I_GYM_ROLLOUT_MS] = SHARED_HIST("gym.rollout.duration_ms", "ms", "Rollout collection duration in milliseconds.",
				  nl_gym_ms_bounds),
	[NL_I_GYM_VERIFY_MS] = SHARED_HIST("gym.verify.duration_ms", "ms", "Verification endpoint duration in milliseconds.",
				 nl_gym_ms_bounds),
	[NL_I_HTTP_SERVER_DURATION] = { "http.server.request.duration", "s", "Duration of HTTP server requests.",
					NL_HISTOGRAM, nl_http_duration_s_bounds, 14, true },
	[NL_I_HTTP_SERVER_ACTIVE] = { "http.server.active_requests", "{request}",
				      "Number of active HTTP server requests.", NL_UPDOWN, NULL, 0, true },
	[NL_I_HTTP_SERVER_REQUEST_BODY] = { "http.server.request.body.size", "By",
					    "Size of HTTP server request bodies.", NL_HISTOGRAM,
					    nl_otel_default_bounds, 15, true },
	[NL_I_HTTP_SERVER_RESPONSE_BODY] = { "http.server.response.body.size", "By",
					     "Size of HTTP server response bodies.", NL_HISTOGRAM,
					     nl_otel_default_bounds, 15, true },
	[NL_I_HTTP_CLIENT_DURATION] = { "http.client.request.duration", "s", "Duration of HTTP client requests.",
					NL_HISTOGRAM, nl_http_duration_s_bounds, 14, true },
	[NL_I_HTTP_SERVER_DURATION_OLD] = { "http.server.duration", "ms",
					    "Duration of HTTP server requests (old semantic conventions).",
					    NL_HISTOGRAM, nl_otel_default_bounds, 15, true },
	[NL_I_GYM_SUCCESS_RATE] = { "gym.verify.success_rate", "", "Fraction of successful verifications.", NL_GAUGE,
				  NULL, 0, true },
	[NL_I_GENAI_CLIENT_DURATION] = SHARED_HIST(cs0, cs1,
						  cs2, nl_genai_duration_s_bounds),
	[NL_I_GENAI_CLIENT_TTFC] = SHARED_HIST(cs3, cs1,
					      cs4,
					      nl_genai_ttft_s_bounds),
	[NL_I_GENAI_SERVER_TTFT] = SHARED_HIST(cs5, cs1,
					      cs6,
					      nl_genai_ttft_s_bounds),
	[NL_I_GENAI_SERVER_TPOT] = SHARED_HIST(cs7, cs1,
					      cs8,
					      nl_genai_tpot_s_bounds),
	[NL_I_GYM_MODEL_CALL_MS] = SHARED_HIST(cs9, cs10, cs11,
					      nl_gym_model_call_ms_bounds),
	[NL_I_GYM_MODEL_CALL_TTFT_MS] = SHARED_HIST(cs12, cs10,
						   cs13,
						   nl_gym_ttft_ms_bounds),
	[NL_I_GYM_MODEL_CALL_TOKENS] = SHARED_HIST(cs14, cs15, cs16,
						  nl_gym_tokens_bounds),
	[NL_I_GYM_MODEL_CALL_FINISH] = { cs17, cs18, cs19,
					 NL_COUNTER, NULL, 0, true },
	/* OpenTelemetry semantic conventions v1.40.0, RPC metrics. */
	[NL_I_RPC_SERVER_DURATION] = { "rpc.server.call.duration", "s",
				       "Measures the duration of inbound remote procedure calls.", NL_HISTOGRAM,
				       nl_http_duration_s_bounds, 14, true },
	[NL_I_RPC_CLIENT_DURATION] = { "rpc.client.call.duration", "s",
				       "Measures the duration of outbound remote procedure calls.", NL_HISTOGRAM,
				       nl_http_duration_s_bounds, 14, true },
	[NL_I_HTTP2_GIVEN_UP] = { "nemo.lens.http2.connections_given_up", "{connection}",
				  "HTTP/2 connections no longer followed: past a bound of the shim's state.", NL_COUNTER,
				  NULL, 0, true },
	/* The socket count of a process whose connect_total counts pool
	 * acquisitions (connmetrics.h): its new connections stay visible. */
	[NL_I_CONN_OPENED] = { "nemolens.connection.opened", "{connection}",
			       "New connections (connect calls) per destination server, in processes whose "
			       "connect_total counts pool acquisitions",
			       NL_COUNTER, NULL, 0, true },
	[NL_I_CONN_CALL_SITE] = { "nemolens.connection.call_site", "{connection}",
				  "Connections counted per destination server, by the code that asked for them",
				  NL_COUNTER, NULL, 0, true },
	/* The Python runtime, recorded by the adapter (adapter.h). Lag and
	 * pauses are waits in milliseconds like the pool's, and share its
	 * boundaries: from 10 us (a young collection) to 30 s. */
	[NL_I_LOOP_LAG_MS] = { "gym.event_loop.lag_ms", "ms",
			       "How late a coroutine that slept a fixed interval woke up", NL_HISTOGRAM,
			       nl_queue_ms_bounds, 17, true },
	[NL_I_LOOP_TASKS] = { "gym.event_loop.tasks", "{task}", "Tasks not yet done on the process's event loops",
			      NL_GAUGE_INT, NULL, 0, true },
	[NL_I_GC_PAUSE_MS] = { "gym.gc.pause_duration_ms", "ms", "Duration of one garbage collection", NL_HISTOGRAM,
			       nl_queue_ms_bounds, 17, true },
	[NL_I_GC_COLLECTIONS] = { "gym.gc.collections_total", "{collection}", "Garbage collections, by generation",
				  NL_COUNTER, NULL, 0, true },
	[NL_I_GC_COLLECTED] = { "gym.gc.collected_total", "{object}", "Objects garbage collections freed",
				NL_COUNTER, NULL, 0, true },
	[NL_I_GC_UNCOLLECTABLE] = { "gym.gc.uncollectable_total", "{object}",
				    "Objects garbage collections found uncollectable", NL_COUNTER, NULL, 0, true },
	[NL_I_GC_COUNT] = { "gym.gc.count", "{object}",
			    "The collector's counts (gc.get_count): allocations since the last collection for "
			    "generation 0, collections of the younger generation for the others",
			    NL_GAUGE_INT, NULL, 0, true },
	/* Recorded once per server process, at its first response (startup.h). */
	[NL_I_SERVER_READY] = { "nemolens.server.ready.duration", "s",
				"Time from the process's start to the first response it wrote on a socket it accepted",
				NL_HISTOGRAM, nl_ready_s_bounds, NB(nl_ready_s_bounds), true },
	[NL_I_GYM_STARTUP_STAGE_MS] = { "gym.server.startup_stage_duration_ms", "ms",
					"Duration of one stage of a server's start-up, from NeMo Gym's launch stamps",
					NL_HISTOGRAM, nl_startup_ms_bounds, NB(nl_startup_ms_bounds), true },
	/* Same name, unit and kind as the memory sampler's registration. */
	[NL_I_GYM_SERVERS_ACTIVE] = { "gym.servers.active", "", "Number of active Gym servers.", NL_GAUGE_INT, NULL, 0,
				   true },
};


static _Atomic(struct nl_instrument *) registered[NL_N_INST];

struct nl_instrument *nl_inst(enum nl_inst_id id)
{
	struct nl_instrument *inst = atomic_load_explicit(&registered[id], memory_order_acquire);
	if (!inst) {
		const struct nl_inst_def *d = &nl_inst_defs[id];
		/* nl_instrument_get is idempotent by name: racing callers get one instrument. */
		inst = nl_instrument_get(d->name, d->unit, d->description, d->kind, d->bounds, d->n_bounds);
		atomic_store_explicit(&registered[id], inst, memory_order_release);
	}
	return inst;
}
