/* SPDX-License-Identifier: Apache-2.0 */
/* The NeMo Lens C API (nemolens.h): every record function and every argument
 * lands in the registry with exactly NeMo Lens's name, type, unit, attributes
 * and value; unset arguments record nothing; meters and their release; bad
 * calls; concurrency.
 *
 * Criterion runs each test in its own process, so every test starts from an
 * empty registry. The runtime of the test binary must record (ctest sets
 * NEMOLENS_ENABLED=false for unit tests), but must not export: a constructor
 * that runs before the runtime's (priority 101 < default) sets that up.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "nemolens.h"
#include "registry.h"
#include "runtime.h"
#include "state.h"

/* The test binary links the runtime without its constructor: start it here,
 * recording but never exporting, as the shared library would at load. */
__attribute__((constructor)) static void record_without_exporting(void)
{
	setenv("NEMOLENS_ENABLED", "true", 1);
	setenv("NEMOLENS_METRICS_ENABLED", "true", 1);
	setenv("OTEL_METRICS_EXPORTER", "none", 1);
	setenv("NEMOLENS_LOG_LEVEL", "none", 1);
	unsetenv("OTEL_SDK_DISABLED");
	nl_runtime_load();
}

TestSuite(lens);

/* ---- helpers -------------------------------------------------------------- */

static struct nl_snapshot *take(void)
{
	struct nl_snapshot *snap = nl_snapshot_take(false, false, 1000, 2000);
	cr_assert_not_null(snap);
	return snap;
}

static const struct nl_metric *must_metric(const struct nl_snapshot *snap, const char *name)
{
	const struct nl_metric *m = find_metric(snap, name);
	cr_assert_not_null(m, "metric %s missing", name);
	return m;
}

/* Names of the metrics in the snapshot, comma-separated, for messages. */
static const char *names(const struct nl_snapshot *snap)
{
	static char buf[4096];
	buf[0] = 0;
	for (size_t i = 0; i < snap->n_metrics; i++) {
		strncat(buf, snap->metrics[i].name, sizeof buf - strlen(buf) - 2);
		strncat(buf, ",", sizeof buf - strlen(buf) - 1);
	}
	return buf;
}

/* Asserts p's attributes are exactly keys[i]=values[i], in that order. */
static void assert_attrs(const struct nl_point *p, size_t n, const char *const *keys, const char *const *values)
{
	cr_assert_eq(p->n_attrs, n, "%zu attributes, expected %zu", p->n_attrs, n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(p->attrs[i].key, keys[i]);
		cr_assert_eq(p->attrs[i].type, NL_ATTR_STR);
		cr_assert_str_eq(p->attrs[i].v.s, values[i]);
	}
}

/* The only point of metric name, which must be the only metric in the snapshot. */
static const struct nl_point *only_point(const struct nl_snapshot *snap, const char *name)
{
	cr_assert_eq(snap->n_metrics, 1, "expected only %s, got: %s", name, names(snap));
	const struct nl_metric *m = must_metric(snap, name);
	cr_assert_eq(m->n_points, 1);
	return &m->points[0];
}

/* The point of m whose gen_ai.token.type (or model) matches, NULL when absent. */
static const struct nl_point *point_with(const struct nl_metric *m, const char *key, const char *value)
{
	for (size_t i = 0; i < m->n_points; i++) {
		const char *v = attr(&m->points[i], key);
		if (v && strcmp(v, value) == 0)
			return &m->points[i];
	}
	return NULL;
}

static const char *const INF_KEYS[] = { "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
					"gen_ai.token.type" };

static const double DURATION_BOUNDS[14] = { 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
					    1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92 };
static const double TOKEN_BOUNDS[14] = { 1,     4,	16,	64,	 256,	   1024,     4096,
					 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864 };
static const double GYM_BOUNDS[15] = { 100,   250,    500,    1000,   2500,	5000,	 10000,	  30000,
				       60000, 120000, 300000, 600000, 1200000, 1800000, 3600000 };
static const double RL_BOUNDS[15] = { 0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000 };

static void assert_bounds(const struct nl_metric *m, const double *bounds, size_t n)
{
	cr_assert_eq(m->n_bounds, n, "%s: %zu bounds", m->name, m->n_bounds);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(m->bounds[i], bounds[i], "%s bound %zu", m->name, i);
}

static void assert_hist(const struct nl_metric *m, const struct nl_point *p, uint64_t count, double sum, double min,
			double max)
{
	cr_assert_eq(m->kind, NL_HISTOGRAM, "%s is not a histogram", m->name);
	cr_assert_eq(p->count, count, "%s count %llu", m->name, (unsigned long long)p->count);
	cr_assert_float_eq(p->sum, sum, 1e-9, "%s sum %g", m->name, p->sum);
	cr_assert(p->has_min_max);
	cr_assert_eq(p->min, min);
	cr_assert_eq(p->max, max);
	uint64_t total = 0;
	for (size_t b = 0; b <= m->n_bounds; b++)
		total += p->buckets[b];
	cr_assert_eq(total, count);
}

static size_t bucket_of(const struct nl_metric *m, double v) { return nl_hist_bucket(m->bounds, m->n_bounds, v); }

/* ---- inference -------------------------------------------------------------- */

Test(lens, inference_duration_only)
{
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(0.42), .model = "llama-3-8b");
	struct nl_snapshot *snap = take();
	const struct nl_point *p = only_point(snap, "gen_ai.server.request.duration");
	const struct nl_metric *m = must_metric(snap, "gen_ai.server.request.duration");
	cr_assert_str_eq(m->unit, "s");
	assert_bounds(m, DURATION_BOUNDS, 14);
	assert_hist(m, p, 1, 0.42, 0.42, 0.42);
	cr_assert_eq(p->buckets[bucket_of(m, 0.42)], 1);
	cr_assert_eq(bucket_of(m, 0.42), 6);   /* (0.32, 0.64] */
	const char *vals[] = { "text_completion", "nemo", "llama-3-8b" };
	assert_attrs(p, 3, INF_KEYS, vals);
	nl_snapshot_free(snap);
}

Test(lens, inference_input_tokens_only)
{
	nemolens_record_inference_metrics(NULL, .input_tokens = NEMOLENS_I64(128), .model = "m");
	struct nl_snapshot *snap = take();
	const struct nl_point *p = only_point(snap, "gen_ai.client.token.usage");
	const struct nl_metric *m = must_metric(snap, "gen_ai.client.token.usage");
	cr_assert_str_eq(m->unit, "{token}");
	assert_bounds(m, TOKEN_BOUNDS, 14);
	assert_hist(m, p, 1, 128, 128, 128);
	const char *vals[] = { "text_completion", "nemo", "m", "input" };
	assert_attrs(p, 4, INF_KEYS, vals);
	nl_snapshot_free(snap);
}

Test(lens, inference_output_tokens_only)
{
	nemolens_record_inference_metrics(NULL, .output_tokens = NEMOLENS_I64(0));   /* 0 is a value */
	struct nl_snapshot *snap = take();
	const struct nl_point *p = only_point(snap, "gen_ai.client.token.usage");
	assert_hist(must_metric(snap, "gen_ai.client.token.usage"), p, 1, 0, 0, 0);
	/* No model given: no gen_ai.request.model attribute. */
	const char *keys[] = { "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.token.type" };
	const char *vals[] = { "text_completion", "nemo", "output" };
	assert_attrs(p, 3, keys, vals);
	nl_snapshot_free(snap);
}

Test(lens, inference_all_values_and_overrides)
{
	nemolens_meter *meter = nemolens_meter_get("inference");
	nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(2), .model = "gpt",
					  .input_tokens = NEMOLENS_I64(100), .output_tokens = NEMOLENS_I64(50),
					  .operation_name = "chat", .provider_name = "openai");
	nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(4), .model = "gpt",
					  .input_tokens = NEMOLENS_I64(300), .output_tokens = NEMOLENS_I64(70),
					  .operation_name = "chat", .provider_name = "openai");
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, 2, "%s", names(snap));
	const struct nl_metric *d = must_metric(snap, "gen_ai.server.request.duration");
	cr_assert_eq(d->n_points, 1);
	assert_hist(d, &d->points[0], 2, 6, 2, 4);
	const char *dv[] = { "chat", "openai", "gpt" };
	assert_attrs(&d->points[0], 3, INF_KEYS, dv);

	const struct nl_metric *t = must_metric(snap, "gen_ai.client.token.usage");
	cr_assert_eq(t->n_points, 2);
	const struct nl_point *in = point_with(t, "gen_ai.token.type", "input");
	const struct nl_point *out = point_with(t, "gen_ai.token.type", "output");
	cr_assert(in && out);
	assert_hist(t, in, 2, 400, 100, 300);
	assert_hist(t, out, 2, 120, 50, 70);
	const char *iv[] = { "chat", "openai", "gpt", "input" };
	const char *ov[] = { "chat", "openai", "gpt", "output" };
	assert_attrs(in, 4, INF_KEYS, iv);
	assert_attrs(out, 4, INF_KEYS, ov);
	nl_snapshot_free(snap);
	nemolens_meter_release(meter);
}

Test(lens, inference_empty_strings_are_unset)
{
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(1), .model = "",
					  .operation_name = "", .provider_name = "");
	struct nl_snapshot *snap = take();
	const struct nl_point *p = only_point(snap, "gen_ai.server.request.duration");
	const char *vals[] = { "text_completion", "nemo" };
	assert_attrs(p, 2, INF_KEYS, vals);
	nl_snapshot_free(snap);
}

Test(lens, inference_models_are_separate_series)
{
	for (int i = 0; i < 3; i++) {
		nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(1), .model = "a");
		nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(2), .model = "b");
	}
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(3));
	struct nl_snapshot *snap = take();
	const struct nl_metric *m = must_metric(snap, "gen_ai.server.request.duration");
	cr_assert_eq(m->n_points, 3);
	assert_hist(m, point_with(m, "gen_ai.request.model", "a"), 3, 3, 1, 1);
	assert_hist(m, point_with(m, "gen_ai.request.model", "b"), 3, 6, 2, 2);
	nl_snapshot_free(snap);
}

Test(lens, inference_strings_sanitized_and_cut)
{
	char longname[1000];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(1), .model = "bad\xff\xfe");
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(1), .model = longname);
	struct nl_snapshot *snap = take();
	const struct nl_metric *m = must_metric(snap, "gen_ai.server.request.duration");
	cr_assert_eq(m->n_points, 2);
	cr_assert_not_null(point_with(m, "gen_ai.request.model", "bad??"));
	char cut[256];
	memset(cut, 'x', 255);
	cut[255] = 0;
	cr_assert_not_null(point_with(m, "gen_ai.request.model", cut));
	nl_snapshot_free(snap);
}

Test(lens, inference_cardinality_limit_uses_overflow_series)
{
	nl_registry_set_cardinality_limit(5);
	char model[32];
	for (int i = 0; i < 10; i++) {
		snprintf(model, sizeof model, "model-%d", i);
		nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(1), .model = model);
	}
	struct nl_snapshot *snap = take();
	const struct nl_metric *m = must_metric(snap, "gen_ai.server.request.duration");
	cr_assert_eq(m->n_points, 5);   /* 4 series + the overflow series */
	uint64_t total = 0;
	bool overflow = false;
	for (size_t i = 0; i < m->n_points; i++) {
		total += m->points[i].count;
		overflow |= m->points[i].overflow;
	}
	cr_assert_eq(total, 10);
	cr_assert(overflow);
	nl_snapshot_free(snap);
	nl_registry_set_cardinality_limit(2000);
}

/* ---- RL ------------------------------------------------------------------- */

struct field {
	size_t offset;
	const char *name;
	enum nl_kind kind;
	const char *unit;
};

#define RLF(f, n, k, u) { offsetof(struct nemolens_rl_metrics, f), n, k, u }
static const struct field RL[] = {
	RLF(reward_mean, "rl.reward.mean", NL_GAUGE, ""),
	RLF(kl_divergence, "rl.kl_divergence", NL_GAUGE, ""),
	RLF(policy_loss, "rl.policy_loss", NL_GAUGE, ""),
	RLF(value_loss, "rl.value_loss", NL_GAUGE, ""),
	RLF(entropy, "rl.entropy", NL_GAUGE, ""),
	RLF(response_length_mean, "rl.response_length.mean", NL_GAUGE, ""),
	RLF(grad_norm, "rl.grad_norm", NL_GAUGE, ""),
	RLF(learning_rate, "rl.learning_rate", NL_GAUGE, ""),
	RLF(throughput_tokens_per_sec, "rl.throughput.tokens_per_sec", NL_GAUGE, "{token}/s"),
	RLF(generation_duration_ms, "rl.generation.duration_ms", NL_HISTOGRAM, "ms"),
	RLF(rollout_duration_ms, "rl.rollout.duration_ms", NL_HISTOGRAM, "ms"),
};
#define N_RL (sizeof RL / sizeof *RL)

Test(lens, rl_struct_has_every_field)
{
	cr_assert_eq(sizeof(struct nemolens_rl_metrics), N_RL * sizeof(struct nemolens_opt_f64));
}

/* Each argument alone: exactly its metric, with its type, unit and value. */
Test(lens, rl_each_argument)
{
	for (size_t f = 0; f < N_RL; f++) {
		pid_t pid = fork();
		cr_assert_neq(pid, -1);
		if (pid == 0) {
			/* A fresh registry per field: the child records and checks. */
			nl_registry_reset_values();
			struct nemolens_rl_metrics v = { 0 };
			struct nemolens_opt_f64 *o = (struct nemolens_opt_f64 *)((char *)&v + RL[f].offset);
			*o = nemolens_f64(250.5 + (double)f);
			nemolens_record_rl(NULL, &v, sizeof v);
			struct nl_snapshot *snap = nl_snapshot_take(false, false, 1, 2);
			int ok = snap->n_metrics == 1 && strcmp(snap->metrics[0].name, RL[f].name) == 0 &&
				 snap->metrics[0].kind == RL[f].kind && strcmp(snap->metrics[0].unit, RL[f].unit) == 0 &&
				 snap->metrics[0].n_points == 1 && snap->metrics[0].points[0].n_attrs == 0;
			if (ok && RL[f].kind == NL_GAUGE)
				ok = snap->metrics[0].points[0].dvalue == 250.5 + (double)f;
			if (ok && RL[f].kind == NL_HISTOGRAM) {
				const struct nl_metric *m = &snap->metrics[0];
				ok = m->points[0].count == 1 && m->points[0].sum == 250.5 + (double)f && m->n_bounds == 15 &&
				     memcmp(m->bounds, RL_BOUNDS, sizeof RL_BOUNDS) == 0 &&
				     m->points[0].buckets[8] == 1;   /* (250, 500] */
			}
			_exit(ok ? 0 : 1);
		}
		int status;
		waitpid(pid, &status, 0);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "field %s", RL[f].name);
	}
}

Test(lens, rl_all_arguments_in_one_call)
{
	nemolens_record_rl_metrics(NULL, .reward_mean = NEMOLENS_F64(0.75), .kl_divergence = NEMOLENS_F64(0.01),
				   .policy_loss = NEMOLENS_F64(-0.3), .value_loss = NEMOLENS_F64(0.5),
				   .entropy = NEMOLENS_F64(2.1), .response_length_mean = NEMOLENS_F64(128),
				   .grad_norm = NEMOLENS_F64(1.7), .learning_rate = NEMOLENS_F64(3e-6),
				   .throughput_tokens_per_sec = NEMOLENS_F64(18500),
				   .generation_duration_ms = NEMOLENS_F64(450), .rollout_duration_ms = NEMOLENS_F64(2300));
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, N_RL, "%s", names(snap));
	static const double g[] = { 0.75, 0.01, -0.3, 0.5, 2.1, 128, 1.7, 3e-6, 18500 };
	for (size_t f = 0; f < 9; f++) {
		const struct nl_metric *m = must_metric(snap, RL[f].name);
		cr_assert_eq(m->kind, NL_GAUGE);
		cr_assert_str_eq(m->unit, RL[f].unit);
		cr_assert_eq(m->n_points, 1);
		cr_assert_eq(m->points[0].n_attrs, 0);
		cr_assert_eq(m->points[0].dvalue, g[f], "%s = %g", RL[f].name, m->points[0].dvalue);
	}
	const struct nl_metric *gen = must_metric(snap, "rl.generation.duration_ms");
	assert_hist(gen, &gen->points[0], 1, 450, 450, 450);
	const struct nl_metric *roll = must_metric(snap, "rl.rollout.duration_ms");
	assert_hist(roll, &roll->points[0], 1, 2300, 2300, 2300);
	assert_bounds(roll, RL_BOUNDS, 15);
	nl_snapshot_free(snap);
}

Test(lens, rl_gauge_keeps_last_value)
{
	for (int i = 1; i <= 5; i++)
		nemolens_record_rl_metrics(NULL, .reward_mean = NEMOLENS_F64(i / 10.0));
	struct nl_snapshot *snap = take();
	cr_assert_eq(only_point(snap, "rl.reward.mean")->dvalue, 0.5);
	nl_snapshot_free(snap);
}

Test(lens, unset_arguments_record_nothing)
{
	struct nemolens_rl_metrics rl = { 0 };
	struct nemolens_gym_metrics gym = { 0 };
	struct nemolens_inference_metrics inf = { .model = "m", .operation_name = "chat" };
	nemolens_record_rl(NULL, &rl, sizeof rl);
	nemolens_record_gym(NULL, &gym, sizeof gym);
	nemolens_record_inference(NULL, &inf, sizeof inf);
	/* A value with set=false is unset, whatever the value. */
	nemolens_record_rl_metrics(NULL, .reward_mean = { false, 1.0 }, .grad_norm = { .value = 2.0 });
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_points, 0, "recorded: %s", names(snap));
	nl_snapshot_free(snap);
}

/* ---- Gym ------------------------------------------------------------------ */

Test(lens, gym_each_argument)
{
	nemolens_record_gym_metrics(NULL, .server_request_duration_ms = NEMOLENS_F64(42));
	struct nl_snapshot *snap = take();
	const struct nl_point *p = only_point(snap, "gym.server.request_duration_ms");
	const struct nl_metric *m = must_metric(snap, "gym.server.request_duration_ms");
	cr_assert_str_eq(m->unit, "ms");
	assert_bounds(m, GYM_BOUNDS, 15);
	assert_hist(m, p, 1, 42, 42, 42);
	cr_assert_eq(p->buckets[0], 1);
	cr_assert_eq(p->n_attrs, 0);
	nl_snapshot_free(snap);
	nl_registry_reset_values();

	nemolens_record_gym_metrics(NULL, .rollout_duration_ms = NEMOLENS_F64(75000));
	snap = take();
	m = must_metric(snap, "gym.rollout.duration_ms");
	p = only_point(snap, "gym.rollout.duration_ms");
	cr_assert_str_eq(m->unit, "ms");
	assert_bounds(m, GYM_BOUNDS, 15);
	assert_hist(m, p, 1, 75000, 75000, 75000);
	cr_assert_eq(p->buckets[9], 1);   /* (60000, 120000] */
	nl_snapshot_free(snap);
	nl_registry_reset_values();

	nemolens_record_gym_metrics(NULL, .verify_duration_ms = NEMOLENS_F64(120));
	snap = take();
	m = must_metric(snap, "gym.verify.duration_ms");
	p = only_point(snap, "gym.verify.duration_ms");
	cr_assert_str_eq(m->unit, "ms");
	assert_hist(m, p, 1, 120, 120, 120);
	nl_snapshot_free(snap);
	nl_registry_reset_values();

	nemolens_record_gym_metrics(NULL, .verify_success_rate = NEMOLENS_F64(0.87));
	snap = take();
	p = only_point(snap, "gym.verify.success_rate");
	m = must_metric(snap, "gym.verify.success_rate");
	cr_assert_eq(m->kind, NL_GAUGE);
	cr_assert_str_eq(m->unit, "");
	cr_assert_eq(p->dvalue, 0.87);
	cr_assert_eq(p->n_attrs, 0);
	nl_snapshot_free(snap);
	nl_registry_reset_values();

	nemolens_record_gym_metrics(NULL, .active_servers = NEMOLENS_I64(4));
	snap = take();
	p = only_point(snap, "gym.servers.active");
	m = must_metric(snap, "gym.servers.active");
	cr_assert_eq(m->kind, NL_GAUGE_INT);
	cr_assert_str_eq(m->unit, "");
	cr_assert_eq(p->ivalue, 4);
	cr_assert_eq(p->n_attrs, 0);
	nl_snapshot_free(snap);
	nl_registry_reset_values();

	nemolens_record_gym_metrics(NULL, .active_servers = NEMOLENS_I64(0));   /* 0 at shutdown */
	snap = take();
	cr_assert_eq(only_point(snap, "gym.servers.active")->ivalue, 0);
	nl_snapshot_free(snap);
}

/* ---- bad calls ------------------------------------------------------------ */

Test(lens, invalid_values_are_ignored)
{
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(-1));
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(NAN));
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(INFINITY));
	nemolens_record_inference_metrics(NULL, .input_tokens = NEMOLENS_I64(-5), .output_tokens = NEMOLENS_I64(-1));
	nemolens_record_rl_metrics(NULL, .reward_mean = NEMOLENS_F64(NAN), .entropy = NEMOLENS_F64(-INFINITY),
				   .generation_duration_ms = NEMOLENS_F64(-3), .rollout_duration_ms = NEMOLENS_F64(NAN));
	nemolens_record_gym_metrics(NULL, .verify_duration_ms = NEMOLENS_F64(-0.5),
				    .verify_success_rate = NEMOLENS_F64(NAN), .active_servers = NEMOLENS_I64(-1));
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_points, 0, "recorded: %s", names(snap));
	nl_snapshot_free(snap);
}

Test(lens, valid_values_next_to_invalid_ones_are_recorded)
{
	nemolens_record_inference_metrics(NULL, .request_duration_s = NEMOLENS_F64(NAN),
					  .input_tokens = NEMOLENS_I64(7));
	nemolens_record_rl_metrics(NULL, .policy_loss = NEMOLENS_F64(-2.5), .rollout_duration_ms = NEMOLENS_F64(-1));
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, 2, "%s", names(snap));
	cr_assert_eq(must_metric(snap, "rl.policy_loss")->points[0].dvalue, -2.5);   /* gauges may be negative */
	cr_assert_eq(must_metric(snap, "gen_ai.client.token.usage")->points[0].sum, 7);
	nl_snapshot_free(snap);
}

Test(lens, null_arguments)
{
	nemolens_record_inference(NULL, NULL, sizeof(struct nemolens_inference_metrics));
	nemolens_record_rl(NULL, NULL, sizeof(struct nemolens_rl_metrics));
	nemolens_record_gym(NULL, NULL, sizeof(struct nemolens_gym_metrics));
	nemolens_meter_release(NULL);
	struct nemolens_rl_metrics rl = { .reward_mean = NEMOLENS_F64(1) };
	nemolens_record_rl(NULL, &rl, 0);   /* size 0: nothing */
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_points, 0);
	nl_snapshot_free(snap);
	/* NULL meter is the default meter. */
	nemolens_record_rl(NULL, &rl, sizeof rl);
	nemolens_record_rl(nemolens_meter_default(), &(struct nemolens_rl_metrics){ .kl_divergence = NEMOLENS_F64(2) },
			   sizeof rl);
	snap = take();
	cr_assert_eq(snap->n_metrics, 2);
	nl_snapshot_free(snap);
}

/* A caller built against an older, shorter struct: only the fields it knows. */
Test(lens, shorter_struct_from_an_older_caller)
{
	struct nemolens_rl_metrics rl = { .reward_mean = NEMOLENS_F64(1), .kl_divergence = NEMOLENS_F64(2),
					  .rollout_duration_ms = NEMOLENS_F64(3) };
	nemolens_record_rl(NULL, &rl, 2 * sizeof(struct nemolens_opt_f64));
	struct nemolens_inference_metrics inf = { .request_duration_s = NEMOLENS_F64(1), .model = "not-seen" };
	nemolens_record_inference(NULL, &inf, offsetof(struct nemolens_inference_metrics, model));
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, 3, "%s", names(snap));
	cr_assert_not_null(find_metric(snap, "rl.reward.mean"));
	cr_assert_not_null(find_metric(snap, "rl.kl_divergence"));
	const struct nl_point *p = &must_metric(snap, "gen_ai.server.request.duration")->points[0];
	cr_assert_null(attr(p, "gen_ai.request.model"));
	nl_snapshot_free(snap);
}

/* A caller built against a newer, longer struct: the fields this library knows. */
Test(lens, longer_struct_from_a_newer_caller)
{
	struct {
		struct nemolens_gym_metrics known;
		struct nemolens_opt_f64 future;
	} v = { .known = { .verify_success_rate = NEMOLENS_F64(0.5) }, .future = NEMOLENS_F64(9) };
	nemolens_record_gym(NULL, &v.known, sizeof v);
	struct nl_snapshot *snap = take();
	cr_assert_eq(only_point(snap, "gym.verify.success_rate")->dvalue, 0.5);
	nl_snapshot_free(snap);
}

Test(lens, disabled_shim_records_nothing)
{
	cr_assert(nemolens_enabled());
	atomic_store(&nl_recording, false);
	cr_assert_not(nemolens_enabled());
	nemolens_meter *m = nemolens_meter_get("disabled");
	cr_assert_not_null(m);   /* meters still work, recording does nothing */
	nemolens_record_rl_metrics(m, .reward_mean = NEMOLENS_F64(1));
	nemolens_record_gym_metrics(m, .active_servers = NEMOLENS_I64(1));
	nemolens_record_inference_metrics(m, .input_tokens = NEMOLENS_I64(1));
	nemolens_meter_release(m);
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_points, 0);
	nl_snapshot_free(snap);
	atomic_store(&nl_recording, true);
}

/* ---- meters --------------------------------------------------------------- */

Test(lens, same_name_same_meter)
{
	nemolens_meter *a = nemolens_meter_get("x");
	nemolens_meter *b = nemolens_meter_get("x");
	nemolens_meter *c = nemolens_meter_get("y");
	cr_assert_eq(a, b);
	cr_assert_neq(a, c);
	cr_assert_eq(nemolens_meter_get(NULL), nemolens_meter_default());
	cr_assert_eq(nemolens_meter_get(""), nemolens_meter_default());
	cr_assert_eq(nemolens_meter_get("nemo.lens"), nemolens_meter_default());
	cr_assert_str_eq(nemolens_version(), "0.1.0");
}

Test(lens, release_stops_recording_and_export)
{
	nemolens_meter *m = nemolens_meter_get("trainer");
	nemolens_record_rl_metrics(m, .reward_mean = NEMOLENS_F64(0.5), .rollout_duration_ms = NEMOLENS_F64(10));
	nemolens_record_inference_metrics(m, .request_duration_s = NEMOLENS_F64(1), .model = "a");
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, 3);
	nl_snapshot_free(snap);

	nemolens_meter_release(m);
	/* Exported once more (nothing recorded is lost), then no longer. */
	snap = take();
	cr_assert_eq(snap->n_metrics, 3, "%s", names(snap));
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);
	snap = take();
	cr_assert_eq(snap->n_points, 0, "still exported: %s", names(snap));
	nl_snapshot_free(snap);

	/* The handle stays safe to use; recording through it is ignored. */
	nemolens_record_rl_metrics(m, .reward_mean = NEMOLENS_F64(0.9), .rollout_duration_ms = NEMOLENS_F64(10));
	nemolens_meter_release(m);   /* one release too many: ignored */
	snap = take();
	cr_assert_eq(snap->n_points, 0);
	nl_snapshot_free(snap);

	/* Brought back by name: the cumulative histogram continues from its totals
	 * (it was never reset), the gauge shows only what is set anew. */
	nemolens_meter *again = nemolens_meter_get("trainer");
	cr_assert_eq(again, m);
	nemolens_record_rl_metrics(again, .rollout_duration_ms = NEMOLENS_F64(30));
	snap = take();
	cr_assert_eq(snap->n_metrics, 1, "%s", names(snap));
	const struct nl_metric *h = must_metric(snap, "rl.rollout.duration_ms");
	assert_hist(h, &h->points[0], 2, 40, 10, 30);
	nl_snapshot_free(snap);
	nemolens_meter_release(again);
}

Test(lens, release_waits_for_references)
{
	nemolens_meter *a = nemolens_meter_get("shared");
	nemolens_meter *b = nemolens_meter_get("shared");
	nemolens_record_rl_metrics(a, .entropy = NEMOLENS_F64(1));
	nemolens_meter_release(a);
	nemolens_record_rl_metrics(b, .grad_norm = NEMOLENS_F64(2));   /* still live: one reference left */
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, 2);
	nl_snapshot_free(snap);
	nemolens_meter_release(b);
	snap = take();
	cr_assert_eq(snap->n_metrics, 2, "the last export after release");
	nl_snapshot_commit(snap);
	nl_snapshot_free(snap);
	snap = take();
	cr_assert_eq(snap->n_points, 0);
	nl_snapshot_free(snap);
}

Test(lens, series_shared_by_meters_stay_exported_while_one_lives)
{
	nemolens_meter *a = nemolens_meter_get("a");
	nemolens_meter *b = nemolens_meter_get("b");
	nemolens_record_rl_metrics(a, .generation_duration_ms = NEMOLENS_F64(1), .entropy = NEMOLENS_F64(5));
	nemolens_record_rl_metrics(b, .generation_duration_ms = NEMOLENS_F64(2));
	nemolens_meter_release(a);
	struct nl_snapshot *snap = take();
	nl_snapshot_commit(snap);   /* a's last export */
	nl_snapshot_free(snap);
	snap = take();
	/* rl.entropy was a's alone; the histogram is b's too and holds both values. */
	cr_assert_eq(snap->n_metrics, 1, "%s", names(snap));
	const struct nl_metric *h = must_metric(snap, "rl.generation.duration_ms");
	assert_hist(h, &h->points[0], 2, 3, 1, 2);
	nl_snapshot_free(snap);
	nemolens_meter_release(b);
}

Test(lens, default_meter_is_never_released)
{
	nemolens_meter *d = nemolens_meter_default();
	nemolens_meter_release(d);
	nemolens_meter_release(d);
	nemolens_record_rl_metrics(d, .value_loss = NEMOLENS_F64(1));
	nemolens_record_rl_metrics(NULL, .entropy = NEMOLENS_F64(1));
	struct nl_snapshot *snap = take();
	cr_assert_eq(snap->n_metrics, 2);
	nl_snapshot_free(snap);
	/* A reference taken by name is dropped, the library's own stays. */
	cr_assert_eq(nemolens_meter_get("nemo.lens"), d);
	nemolens_meter_release(d);
	nemolens_meter_release(d);
	nemolens_record_rl_metrics(d, .grad_norm = NEMOLENS_F64(1));
	snap = take();
	cr_assert_eq(snap->n_metrics, 3);
	nl_snapshot_free(snap);
}

Test(lens, servers_active_is_not_hidden_on_release)
{
	/* The memory sampler reports gym.servers.active too: one instrument. */
	struct nl_instrument *sampler = nl_instrument_get("gym.servers.active", "", "", NL_GAUGE_INT, NULL, 0);
	nemolens_meter *m = nemolens_meter_get("orchestrator");
	nemolens_record_gym_metrics(m, .active_servers = NEMOLENS_I64(3));
	struct nl_snapshot *snap = take();
	cr_assert_eq(must_metric(snap, "gym.servers.active")->kind, NL_GAUGE_INT);
	cr_assert_eq(only_point(snap, "gym.servers.active")->ivalue, 3);
	nl_snapshot_free(snap);
	nemolens_meter_release(m);
	nl_gauge_set_int(nl_series_get(sampler, NULL, 0), 0);
	snap = take();
	cr_assert_eq(only_point(snap, "gym.servers.active")->ivalue, 0);
	nl_snapshot_free(snap);
}

Test(lens, meter_limit)
{
	char name[32];
	size_t got = 0;
	cr_assert_not_null(nemolens_meter_default());
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof name, "meter-%d", i);
		if (nemolens_meter_get(name))
			got++;
	}
	/* 256 names (the default meter is one of them); NULL records to the default. */
	cr_assert_eq(got, 255);
	nemolens_record_rl_metrics(nemolens_meter_get("one-too-many"), .entropy = NEMOLENS_F64(1));
	struct nl_snapshot *snap = take();
	cr_assert_eq(only_point(snap, "rl.entropy")->dvalue, 1);
	nl_snapshot_free(snap);
}

Test(lens, fork_child_records)
{
	nemolens_meter *m = nemolens_meter_get("parent");
	nemolens_record_rl_metrics(m, .rollout_duration_ms = NEMOLENS_F64(5));
	pid_t pid = fork();
	cr_assert_neq(pid, -1);
	if (pid == 0) {
		/* The child's counters start at zero, and meters keep working. */
		nemolens_meter *c = nemolens_meter_get("child");
		nemolens_record_rl_metrics(c, .rollout_duration_ms = NEMOLENS_F64(7));
		nemolens_record_rl_metrics(m, .rollout_duration_ms = NEMOLENS_F64(7));
		nemolens_meter_release(c);
		nemolens_meter_release(m);
		/* One last export of the child's own values (7 and 7), then none. */
		struct nl_snapshot *snap = nl_snapshot_take(false, false, 1, 2);
		const struct nl_metric *h = find_metric(snap, "rl.rollout.duration_ms");
		int last_ok = h && h->n_points == 1 && h->points[0].count == 2 && h->points[0].sum == 14;
		nl_snapshot_commit(snap);
		snap = nl_snapshot_take(false, false, 1, 2);
		_exit(last_ok && snap->n_points == 0 ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct nl_snapshot *snap = take();
	const struct nl_metric *h = must_metric(snap, "rl.rollout.duration_ms");
	assert_hist(h, &h->points[0], 1, 5, 5, 5);
	nl_snapshot_free(snap);
}

/* ---- threads ------------------------------------------------------------- */

#define THREADS 8
#define ROUNDS 20000

static nemolens_meter *steady;
static pthread_barrier_t barrier;

static void *recorder(void *arg)
{
	long t = (long)arg;
	char model[16];
	snprintf(model, sizeof model, "model-%ld", t % 4);
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < ROUNDS; i++) {
		nemolens_record_rl_metrics(steady, .generation_duration_ms = NEMOLENS_F64(1),
					   .reward_mean = NEMOLENS_F64((double)t));
		nemolens_record_inference_metrics(steady, .request_duration_s = NEMOLENS_F64(0.5), .model = model,
						  .input_tokens = NEMOLENS_I64(2), .output_tokens = NEMOLENS_I64(3));
		nemolens_record_gym_metrics(NULL, .verify_duration_ms = NEMOLENS_F64(0.25));
	}
	return NULL;
}

Test(lens, eight_threads_exact_totals)
{
	steady = nemolens_meter_get("steady");
	pthread_barrier_init(&barrier, NULL, THREADS);
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, recorder, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&barrier);

	struct nl_snapshot *snap = take();
	const struct nl_metric *gen = must_metric(snap, "rl.generation.duration_ms");
	assert_hist(gen, &gen->points[0], THREADS * ROUNDS, THREADS * ROUNDS, 1, 1);
	const struct nl_metric *ver = must_metric(snap, "gym.verify.duration_ms");
	assert_hist(ver, &ver->points[0], THREADS * ROUNDS, THREADS * ROUNDS * 0.25, 0.25, 0.25);
	double reward = must_metric(snap, "rl.reward.mean")->points[0].dvalue;
	cr_assert(reward >= 0 && reward < THREADS && reward == floor(reward));

	const struct nl_metric *dur = must_metric(snap, "gen_ai.server.request.duration");
	const struct nl_metric *tok = must_metric(snap, "gen_ai.client.token.usage");
	cr_assert_eq(dur->n_points, 4);
	cr_assert_eq(tok->n_points, 8);
	const uint64_t per_model = (THREADS / 4) * ROUNDS;
	for (size_t i = 0; i < dur->n_points; i++)
		assert_hist(dur, &dur->points[i], per_model, per_model * 0.5, 0.5, 0.5);
	for (size_t i = 0; i < tok->n_points; i++) {
		const struct nl_point *p = &tok->points[i];
		double v = strcmp(attr(p, "gen_ai.token.type"), "input") == 0 ? 2 : 3;
		assert_hist(tok, p, per_model, per_model * v, v, v);
	}
	nl_snapshot_free(snap);
}

/* Meters obtained and released while other threads record through them and
 * through a steady meter: no crash, and the steady meter's totals are exact. */
static _Atomic bool churning;

static void *churner(void *arg)
{
	(void)arg;
	while (atomic_load(&churning)) {
		nemolens_meter *m = nemolens_meter_get("churn");
		nemolens_record_rl_metrics(m, .entropy = NEMOLENS_F64(1), .rollout_duration_ms = NEMOLENS_F64(1));
		nemolens_record_inference_metrics(m, .input_tokens = NEMOLENS_I64(1), .model = "churn");
		nemolens_meter_release(m);
	}
	return NULL;
}

static void *stale_recorder(void *arg)
{
	nemolens_meter *m = arg;   /* a handle that is released and revived underneath */
	while (atomic_load(&churning))
		nemolens_record_inference_metrics(m, .output_tokens = NEMOLENS_I64(1), .model = "churn");
	return NULL;
}

Test(lens, get_release_churn_while_recording)
{
	steady = nemolens_meter_get("steady");
	nemolens_meter *m = nemolens_meter_get("churn");
	nemolens_meter_release(m);
	atomic_store(&churning, true);
	pthread_barrier_init(&barrier, NULL, 4);
	pthread_t ch[4], st[2], rec[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&ch[i], NULL, churner, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&st[i], NULL, stale_recorder, m);
	for (long t = 0; t < 4; t++)
		pthread_create(&rec[t], NULL, recorder, (void *)t);
	for (int t = 0; t < 4; t++)
		pthread_join(rec[t], NULL);
	atomic_store(&churning, false);
	for (int i = 0; i < 4; i++)
		pthread_join(ch[i], NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(st[i], NULL);
	pthread_barrier_destroy(&barrier);

	struct nl_snapshot *snap = take();
	nl_snapshot_commit(snap);   /* the released meters' last export */
	nl_snapshot_free(snap);
	snap = take();
	const struct nl_metric *gen = must_metric(snap, "rl.generation.duration_ms");
	assert_hist(gen, &gen->points[0], 4 * ROUNDS, 4 * ROUNDS, 1, 1);
	/* Every churn meter was released in the end: its own series are gone. */
	cr_assert_null(find_metric(snap, "rl.entropy"));
	cr_assert_null(find_metric(snap, "rl.rollout.duration_ms"));
	const struct nl_metric *tok = must_metric(snap, "gen_ai.client.token.usage");
	cr_assert_null(point_with(tok, "gen_ai.request.model", "churn"));
	nl_snapshot_free(snap);
}
