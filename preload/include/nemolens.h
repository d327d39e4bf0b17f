/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens.h: the NeMo Lens instrument functions for C and C++.
 *
 * NeMo Lens gives Python programs record_inference_metrics(), record_rl_metrics()
 * and record_gym_metrics(): each takes a meter plus optional per-metric values
 * and records only the values that were given. This header offers the same
 * three functions to C and C++ (and, through ctypes, to Python programs that
 * run under the preload). The values travel through the same pipeline as the
 * shim's own metrics: one background thread exports everything over OTLP/HTTP
 * as configured by the OTEL_* / NEMOLENS_* environment variables, in the
 * instrumentation scope "nemo.lens", with one last export at process exit.
 *
 * Two ways to get it:
 *   - libnemolens_preload.so (LD_PRELOAD): the functions below are exported by
 *     the preloaded library; a program finds them without linking anything
 *     (dlsym(RTLD_DEFAULT, ...), or ctypes.CDLL(None) in Python).
 *   - libnemolens.so: link with `pkg-config --cflags --libs nemolens`. It holds
 *     the same runtime and exporter but no libc hooks: linking it does not
 *     interpose connect() or anything else. When a program linked with it also
 *     runs under the preload, the preloaded copy of these functions is the one
 *     called, so values are exported once.
 *
 * Names, types, units and attributes are exactly those of NeMo Lens:
 *
 *   inference  gen_ai.server.request.duration   histogram  s
 *              gen_ai.client.token.usage        histogram  {token}  (+ gen_ai.token.type)
 *              attributes: gen_ai.operation.name, gen_ai.provider.name,
 *                          gen_ai.request.model (only when a model is given)
 *   rl         rl.reward.mean, rl.kl_divergence, rl.policy_loss, rl.value_loss,
 *              rl.entropy, rl.response_length.mean, rl.grad_norm,
 *              rl.learning_rate                 gauge (double)  no unit
 *              rl.throughput.tokens_per_sec     gauge (double)  {token}/s
 *              rl.generation.duration_ms,
 *              rl.rollout.duration_ms           histogram  ms
 *   gym        gym.server.request_duration_ms, gym.rollout.duration_ms,
 *              gym.verify.duration_ms           histogram  ms
 *              gym.verify.success_rate          gauge (double)  no unit
 *              gym.servers.active               gauge (integer) no unit
 *   RL and Gym points carry no attributes.
 *
 * Histogram bucket boundaries: those of the OpenTelemetry GenAI semantic
 *   conventions for gen_ai.*, NeMo Lens's Gym duration boundaries for gym.*_ms,
 *   the OpenTelemetry SDK defaults for rl.*_ms (docs/metrics.md lists
 *   the values).
 *   Every histogram point also carries min and max.
 *
 * Optional values. Every value is a small struct with an explicit `set` flag:
 * a zero-initialised field is unset and records nothing. Integers have no
 * "not a number" to stand for unset, and 0 is a real value, so the flag is the
 * only marker. In C, pass only the fields you have, in one call:
 *
 *     nemolens_record_rl_metrics(meter, .reward_mean = NEMOLENS_F64(r),
 *                                       .policy_loss = NEMOLENS_F64(p));
 *
 * Values that cannot be meaningful are ignored, never recorded, never a crash:
 *   - NaN or infinite values (any field);
 *   - negative durations, negative token counts, a negative server count.
 * Gauges accept any other finite value (losses may be negative).
 *
 * ABI. Each record function takes the size of the struct the caller was
 * compiled with (the convenience macros pass it for you). New fields are only
 * ever appended, so a program built against an older header keeps working
 * with a newer library (fields it does not know are unset), and fields a newer
 * header added are ignored by an older library. A size of 0 records nothing.
 *
 * Threads and cost. Every function is thread-safe. Recording never blocks and
 * never allocates once a meter has recorded a given metric (and, for inference,
 * a given attribute set): the first use creates the series (allocation and a
 * short mutex); later calls are a lookup and a few atomic operations. When the
 * shim is disabled (NEMOLENS_ENABLED=false, OTEL_SDK_DISABLED=true,
 * NEMOLENS_METRICS_ENABLED=false) recording returns at once.
 */
#ifndef NEMOLENS_H
#define NEMOLENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Incremented when functions or fields are added. */
#define NEMOLENS_API_VERSION 1

/* ---- optional values ------------------------------------------------------ */

/* A double that may be unset: {false, ...} (or all zero) means "not given". */
struct nemolens_opt_f64 {
	bool set;
	double value;
};

/* An integer that may be unset: {false, ...} (or all zero) means "not given". */
struct nemolens_opt_i64 {
	bool set;
	int64_t value;
};

/* Initializers for a set value, for designated initializers (C) and aggregate
 * initialization (C++): .reward_mean = NEMOLENS_F64(0.75). */
#define NEMOLENS_F64(x) { true, (double)(x) }
#define NEMOLENS_I64(x) { true, (int64_t)(x) }

/* The same as values, for assignments: m.reward_mean = nemolens_f64(0.75). */
static inline struct nemolens_opt_f64 nemolens_f64(double v)
{
	struct nemolens_opt_f64 o = { true, v };
	return o;
}

static inline struct nemolens_opt_i64 nemolens_i64(int64_t v)
{
	struct nemolens_opt_i64 o = { true, v };
	return o;
}

/* ---- meters --------------------------------------------------------------- */

/* A meter, as the `meter` argument of NeMo Lens's record functions: the
 * instruments and series a program records through are created on the
 * meter's first use of them and released with the meter. */
typedef struct nemolens_meter nemolens_meter;

/* The meter named `name` (at most 255 bytes are significant), created on first
 * call. Calls with the same name return the same meter and each takes one
 * reference: match every nemolens_meter_get() with one nemolens_meter_release().
 * NULL or "" names the default meter ("nemo.lens").
 *
 * The name identifies the meter inside the process only; it is not exported.
 * Everything the shim exports is in the one instrumentation scope "nemo.lens",
 * so meters share instruments: the same metric with the same attributes from
 * two meters is one series (a histogram holds the values of both, a gauge the
 * last value set through either).
 *
 * Returns NULL only when memory is short or 256 distinct meter names are in
 * use; NULL is accepted everywhere as the default meter. Works, and costs only
 * this bookkeeping, when the shim is disabled. */
nemolens_meter *nemolens_meter_get(const char *name);

/* The default meter, "nemo.lens", held by the library for the life of the
 * process. Takes no reference: do not release it (releasing it is ignored
 * unless nemolens_meter_get("nemo.lens") references are outstanding). */
nemolens_meter *nemolens_meter_default(void);

/* Drops one reference. When the last reference goes the meter is released:
 *   - its instruments' per-meter state (the cached series for each metric and
 *     attribute set) is freed; this waits only for record calls already
 *     running on this meter, which never block;
 *   - later record calls through the handle are ignored (the handle itself
 *     stays valid memory, so a late call never crashes; a later
 *     nemolens_meter_get() of the same name brings the meter back, and the
 *     handle with it);
 *   - the series it recorded are exported once more (so nothing recorded is
 *     lost, even when the meter is released just before exit) and then no
 *     longer, unless another live meter records the same metric with the
 *     same attributes. Cumulative series
 *     (histograms) are not reset: the backend keeps what was already exported
 *     and simply receives no further points, as for a process that ended. If
 *     the same metric and attributes are recorded again later (by a revived or
 *     another meter), the series continues from its previous totals with the
 *     same start time, so rate() and increase() see no reset.
 *     gym.servers.active is an exception: the shim's memory sampler reports it
 *     too, so its series is never hidden.
 * NULL is ignored. Releasing a meter more often than it was obtained is ignored. */
void nemolens_meter_release(nemolens_meter *meter);

/* True when the shim records metrics in this process (enabled and configured);
 * when false, the record functions return at once and record nothing. */
bool nemolens_enabled(void);

/* The library's version, e.g. "0.1.0". */
const char *nemolens_version(void);

/* ---- inference (GenAI semantic conventions) ------------------------------- */

struct nemolens_inference_metrics {
	/* gen_ai.server.request.duration, seconds. Negative, NaN or infinite: ignored. */
	struct nemolens_opt_f64 request_duration_s;
	/* gen_ai.client.token.usage with gen_ai.token.type="input", tokens. Negative: ignored. */
	struct nemolens_opt_i64 input_tokens;
	/* gen_ai.client.token.usage with gen_ai.token.type="output", tokens. Negative: ignored. */
	struct nemolens_opt_i64 output_tokens;
	/* gen_ai.request.model. NULL or "": the attribute is left out (as NeMo Lens
	 * does for an empty model). */
	const char *model;
	/* gen_ai.operation.name. NULL or "": "text_completion". */
	const char *operation_name;
	/* gen_ai.provider.name. NULL or "": "nemo". */
	const char *provider_name;
};

/* Records the set values of *values, all with the attributes
 * gen_ai.operation.name, gen_ai.provider.name and (when given)
 * gen_ai.request.model, in that order; token usage adds gen_ai.token.type.
 * Attribute strings are copied on first use; bytes that are not valid UTF-8
 * become '?', and each string is cut at 255 bytes. Each new combination of
 * attributes allocates once per meter; past 4096 combinations in one meter,
 * or past the shim's cardinality limit per metric (NEMOLENS_CARDINALITY_LIMIT),
 * values go to the series marked otel.metric.overflow=true (past 4096, a call
 * with a combination the meter has not cached takes the mutex briefly).
 * meter NULL: the default meter. values NULL: nothing. size: sizeof the struct
 * as the caller knows it. */
void nemolens_record_inference(nemolens_meter *meter, const struct nemolens_inference_metrics *values,
			       size_t size);

/* ---- RL (rl.*) --------------------------------------------------------------- */

struct nemolens_rl_metrics {
	struct nemolens_opt_f64 reward_mean;           /* rl.reward.mean, gauge */
	struct nemolens_opt_f64 kl_divergence;         /* rl.kl_divergence, gauge */
	struct nemolens_opt_f64 policy_loss;           /* rl.policy_loss, gauge */
	struct nemolens_opt_f64 value_loss;            /* rl.value_loss, gauge */
	struct nemolens_opt_f64 entropy;               /* rl.entropy, gauge */
	struct nemolens_opt_f64 response_length_mean;  /* rl.response_length.mean, gauge, tokens */
	struct nemolens_opt_f64 grad_norm;             /* rl.grad_norm, gauge */
	struct nemolens_opt_f64 learning_rate;         /* rl.learning_rate, gauge */
	struct nemolens_opt_f64 throughput_tokens_per_sec; /* rl.throughput.tokens_per_sec, gauge, {token}/s */
	struct nemolens_opt_f64 generation_duration_ms; /* rl.generation.duration_ms, histogram, ms (negative: ignored) */
	struct nemolens_opt_f64 rollout_duration_ms;   /* rl.rollout.duration_ms, histogram, ms (negative: ignored) */
};

/* Records the set values of *values (no attributes). meter NULL: the default
 * meter. values NULL: nothing. size: sizeof the struct as the caller knows it. */
void nemolens_record_rl(nemolens_meter *meter, const struct nemolens_rl_metrics *values, size_t size);

/* ---- Gym (gym.*) ------------------------------------------------------------- */

struct nemolens_gym_metrics {
	struct nemolens_opt_f64 server_request_duration_ms; /* gym.server.request_duration_ms, histogram, ms */
	struct nemolens_opt_f64 rollout_duration_ms;        /* gym.rollout.duration_ms, histogram, ms */
	struct nemolens_opt_f64 verify_duration_ms;         /* gym.verify.duration_ms, histogram, ms */
	/* gym.verify.success_rate, gauge: the fraction of verifications that completed
	 * (not that passed), cumulative over the process's lifetime, as NeMo Gym defines it. */
	struct nemolens_opt_f64 verify_success_rate;
	/* gym.servers.active, integer gauge: the number of servers the orchestrator
	 * started; set it after startup and to 0 at shutdown. Negative: ignored. */
	struct nemolens_opt_i64 active_servers;
};

/* Records the set values of *values (no attributes). Negative durations are
 * ignored. meter NULL: the default meter. values NULL: nothing. size: sizeof
 * the struct as the caller knows it. */
void nemolens_record_gym(nemolens_meter *meter, const struct nemolens_gym_metrics *values, size_t size);

#ifdef __cplusplus
}
#endif

/* ---- one-call forms ------------------------------------------------------ */

#ifndef __cplusplus
/* nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(0.42),
 *                                   .model = "llama-3-8b", .input_tokens = NEMOLENS_I64(128));
 * Fields not named are unset. Expands to a compound literal and its size. */
#define nemolens_record_inference_metrics(meter, ...)                                              \
	nemolens_record_inference((meter), &(const struct nemolens_inference_metrics){ __VA_ARGS__ }, \
				  sizeof(struct nemolens_inference_metrics))
/* nemolens_record_rl_metrics(meter, .reward_mean = NEMOLENS_F64(0.75), ...); */
#define nemolens_record_rl_metrics(meter, ...)                                               \
	nemolens_record_rl((meter), &(const struct nemolens_rl_metrics){ __VA_ARGS__ },       \
			   sizeof(struct nemolens_rl_metrics))
/* nemolens_record_gym_metrics(meter, .verify_duration_ms = NEMOLENS_F64(120), ...); */
#define nemolens_record_gym_metrics(meter, ...)                                              \
	nemolens_record_gym((meter), &(const struct nemolens_gym_metrics){ __VA_ARGS__ },     \
			    sizeof(struct nemolens_gym_metrics))
#else
/* C++: fill a struct, then nemolens_record(meter, m):
 *     nemolens_rl_metrics m{};
 *     m.reward_mean = nemolens_f64(0.75);
 *     nemolens_record(meter, m); */
inline void nemolens_record(nemolens_meter *meter, const nemolens_inference_metrics &m)
{
	nemolens_record_inference(meter, &m, sizeof m);
}
inline void nemolens_record(nemolens_meter *meter, const nemolens_rl_metrics &m)
{
	nemolens_record_rl(meter, &m, sizeof m);
}
inline void nemolens_record(nemolens_meter *meter, const nemolens_gym_metrics &m)
{
	nemolens_record_gym(meter, &m, sizeof m);
}
#endif

#endif
