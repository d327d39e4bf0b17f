/* SPDX-License-Identifier: Apache-2.0 */
/* The NeMo Lens instrument functions (nemolens.h): meters, and the
 * inference / RL / Gym record functions on top of the registry.
 *
 * A meter caches, per instrument, the registry series it records to: one
 * series per attribute-less instrument (rl.*, gym.*), and for inference one
 * entry per attribute set (operation, provider, model) holding its three
 * series (duration, input tokens, output tokens). The caches are published
 * with release stores and read without locks; only filling them (the first
 * use of a metric or attribute set) takes `lock` and allocates.
 *
 * Releasing a meter: record calls bracket their work with the meter's
 * `active` counter and check `live` after incrementing it; release clears
 * `live` and waits (without holding `lock`) until `active` drains, so nobody
 * can still be reading the caches when they are freed. Meter structs are never
 * freed, so a stale handle is harmless. Series refcounts across meters decide
 * when a series retires: exported once more, then left out.
 */
#include "nemolens.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fork.h"
#include "instruments.h"
#include "loadpath.h"
#include "registry.h"
#include "state.h"

#define API __attribute__((visibility("default")))

#ifndef NL_VERSION
#define NL_VERSION "0"
#endif

#define MAX_METERS 256
#define MAX_NAME 255       /* significant bytes of a meter name */
#define MAX_STR 255        /* significant bytes of an attribute value */
#define MAX_SETS 4096      /* inference attribute sets per meter */
#define N_BUCKETS 64       /* hash buckets of a meter's attribute sets */
#define N_REF_BUCKETS 256

#define DEFAULT_METER "nemo.lens"
#define DEFAULT_OPERATION "text_completion"
#define DEFAULT_PROVIDER "nemo"

/* ---- meters --------------------------------------------------------------- */

enum { S_DURATION, S_INPUT, S_OUTPUT, N_SET_SERIES };

/* One inference attribute set of one meter. Immutable once published, except
 * for its series pointers, which go from NULL to a series once. */
struct attrset {
	struct attrset *next;
	uint64_t hash;
	char *op, *provider, *model;    /* keys, cut at MAX_STR; model may be NULL */
	char *a_op, *a_provider, *a_model;   /* the same, valid UTF-8, for attributes */
	_Atomic(struct nl_series *) series[N_SET_SERIES];
};

struct nemolens_meter {
	struct nemolens_meter *next;    /* all meters ever created; immutable */
	char name[MAX_NAME + 1];
	unsigned refs;                  /* under lock */
	bool pinned;                    /* the default meter: one reference is the library's */
	unsigned gen;                   /* under lock: bumped at each release */
	_Atomic bool live;
	_Atomic unsigned active;        /* record calls in progress */
	_Atomic(struct nl_series *) plain[NL_N_INST];
	_Atomic(struct attrset *) sets[N_BUCKETS];
	size_t n_sets;                  /* under lock */
	struct attrset *overflow;       /* under lock: past MAX_SETS */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nemolens_meter *meters;   /* under lock */
static size_t n_meters;
static _Atomic(struct nemolens_meter *) default_meter;

/* ---- series refcounts: a series recorded by no live meter is not exported -- */

struct sref {
	struct sref *next;
	struct nl_series *s;
	unsigned n;
};
static struct sref *srefs[N_REF_BUCKETS];  /* under lock */

static size_t sref_bucket(const struct nl_series *s)
{
	return ((uintptr_t)s >> 4) % N_REF_BUCKETS;
}

static bool series_ref(struct nl_series *s)
{
	struct sref **b = &srefs[sref_bucket(s)];
	nl_series_unretire(s);
	for (struct sref *r = *b; r; r = r->next)
		if (r->s == s) {
			r->n++;
			return true;
		}
	struct sref *r = malloc(sizeof *r);
	if (!r)
		return false;
	r->s = s;
	r->n = 1;
	r->next = *b;
	*b = r;
	return true;
}

static void series_unref(struct nl_series *s, enum nl_inst_id id)
{
	for (struct sref **p = &srefs[sref_bucket(s)]; *p; p = &(*p)->next) {
		struct sref *r = *p;
		if (r->s != s)
			continue;
		if (--r->n == 0) {
			*p = r->next;
			free(r);
			if (!nl_inst_defs[id].shared)
				nl_series_retire(s);
		}
		return;
	}
}

/* ---- fork --------------------------------------------------------------- */

static bool held_for_fork;   /* atfork_prepare took `lock` */

static void atfork_prepare(void)
{
	pthread_mutex_lock(&lock);
	held_for_fork = true;
}

static void atfork_parent(void)
{
	if (!held_for_fork)
		return;
	held_for_fork = false;
	pthread_mutex_unlock(&lock);
}

static void atfork_child(void)
{
	if (held_for_fork) {
		held_for_fork = false;
		pthread_mutex_unlock(&lock);
	} else {
		/* Registered while this fork was under way: a thread this child
		 * does not have may have held it. */
		pthread_mutex_init(&lock, NULL);
	}
	/* Record calls of threads that do not exist in the child never finish. */
	for (struct nemolens_meter *m = meters; m; m = m->next)
		atomic_store(&m->active, 0);
}

/* `lock` is held while series are made in the registry: it comes before the
 * registry's lock in the fork order (fork.h). */
static const struct nl_fork_handlers fork_handlers = { atfork_prepare, atfork_parent, atfork_child };

static void lock_lens(void)
{
	nl_fork_register(NL_FORK_LENS, &fork_handlers);
	pthread_mutex_lock(&lock);
}

static void unlock_lens(void) { pthread_mutex_unlock(&lock); }

/* ---- meter lifecycle --------------------------------------------------------- */

/* Under lock. */
static struct nemolens_meter *meter_find_or_create(const char *name)
{
	for (struct nemolens_meter *m = meters; m; m = m->next)
		if (strncmp(m->name, name, MAX_NAME) == 0)
			return m;
	if (n_meters >= MAX_METERS)
		return NULL;
	struct nemolens_meter *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	strncpy(m->name, name, MAX_NAME);
	m->name[MAX_NAME] = 0;
	m->next = meters;
	meters = m;
	n_meters++;
	return m;
}

/* Under lock: one more reference, bringing a released meter back. */
static void meter_ref(struct nemolens_meter *m)
{
	m->refs++;
	atomic_store(&m->live, true);
}

static struct nemolens_meter *get_default(void)
{
	struct nemolens_meter *m = atomic_load_explicit(&default_meter, memory_order_acquire);
	if (m)
		return m;
	lock_lens();
	m = atomic_load(&default_meter);
	if (!m && (m = meter_find_or_create(DEFAULT_METER))) {
		m->pinned = true;
		meter_ref(m);
		atomic_store_explicit(&default_meter, m, memory_order_release);
	}
	unlock_lens();
	return m;
}

API nemolens_meter *nemolens_meter_default(void) { return get_default(); }

API nemolens_meter *nemolens_meter_get(const char *name)
{
	if (!name || !*name || strncmp(name, DEFAULT_METER, MAX_NAME) == 0) {
		struct nemolens_meter *d = get_default();
		if (d) {
			lock_lens();
			meter_ref(d);
			unlock_lens();
		}
		return d;
	}
	lock_lens();
	struct nemolens_meter *m = meter_find_or_create(name);
	if (m)
		meter_ref(m);
	unlock_lens();
	return m;
}

/* This object's nemolens_meter_get under a name no other object has: the
 * constructor compares it with what the exported name resolves to (load.c). */
extern __typeof__(nemolens_meter_get) nl_lens_meter_get_here
	__attribute__((alias("nemolens_meter_get"), visibility("hidden")));

static void free_attrset(struct attrset *e)
{
	for (int k = 0; k < N_SET_SERIES; k++) {
		struct nl_series *s = atomic_load(&e->series[k]);
		if (s)
			series_unref(s, k == S_DURATION ? NL_I_REQUEST_DURATION : NL_I_TOKEN_USAGE);
	}
	free(e->op);
	free(e->provider);
	free(e->model);
	free(e->a_op);
	free(e->a_provider);
	free(e->a_model);
	free(e);
}

/* Under lock, with no record call inside the meter. */
static void meter_free_caches(struct nemolens_meter *m)
{
	for (int i = 0; i < NL_N_INST; i++) {
		struct nl_series *s = atomic_exchange(&m->plain[i], NULL);
		if (s)
			series_unref(s, (enum nl_inst_id)i);
	}
	for (int b = 0; b < N_BUCKETS; b++) {
		struct attrset *e = atomic_exchange(&m->sets[b], NULL);
		while (e) {
			struct attrset *next = e->next;
			free_attrset(e);
			e = next;
		}
	}
	if (m->overflow) {
		free_attrset(m->overflow);
		m->overflow = NULL;
	}
	m->n_sets = 0;
}

API void nemolens_meter_release(nemolens_meter *m)
{
	if (!m)
		return;
	lock_lens();
	if (m->refs <= (m->pinned ? 1u : 0u)) {
		unlock_lens();
		return;
	}
	if (--m->refs > 0) {
		unlock_lens();
		return;
	}
	atomic_store(&m->live, false);
	unsigned gen = ++m->gen;
	unlock_lens();
	/* Record calls that saw the meter live finish without blocking (a slow
	 * path among them takes `lock`, which we do not hold, and then sees the
	 * meter released). */
	while (atomic_load(&m->active) != 0)
		sched_yield();
	lock_lens();
	/* Brought back meanwhile (and maybe released again by someone else, who
	 * then owns the cleanup): leave the caches alone. */
	if (!atomic_load(&m->live) && m->gen == gen)
		meter_free_caches(m);
	unlock_lens();
}

API bool nemolens_enabled(void) { return atomic_load_explicit(&nl_recording, memory_order_relaxed); }

API const char *nemolens_version(void) { return NL_VERSION; }

/* ---- recording ------------------------------------------------------------- */

/* Enters a record call; NULL when the meter is released or unavailable. */
static struct nemolens_meter *enter(struct nemolens_meter *m)
{
	if (!m && !(m = get_default()))
		return NULL;
	atomic_fetch_add(&m->active, 1);
	if (!atomic_load(&m->live)) {
		atomic_fetch_sub(&m->active, 1);
		return NULL;
	}
	return m;
}

static void leave(struct nemolens_meter *m) { atomic_fetch_sub_explicit(&m->active, 1, memory_order_release); }

/* A record call's values, copied into v (vsize bytes): as many as the
 * caller's struct has (size), the fields it does not know zero. Returns
 * how many bytes it had, 0 when there is nothing to record. */
static size_t take_values(void *v, size_t vsize, const void *values, size_t size)
{
	if (!atomic_load_explicit(&nl_recording, memory_order_relaxed) || !values || size == 0)
		return 0;
	size_t n = size < vsize ? size : vsize;
	memset(v, 0, vsize);
	memcpy(v, values, n);
	return n;
}

/* take_values, then the meter entered: NULL when there is nothing to
 * record. The caller leaves the meter. */
static struct nemolens_meter *begin_record(struct nemolens_meter *meter, void *v, size_t vsize, const void *values,
					    size_t size, size_t *n)
{
	*n = take_values(v, vsize, values, size);
	if (!*n)
		return NULL;
	/* Before anything is written: the first record makes the segment (state.h). */
	nl_runtime_kick();
	return enter(meter);
}

/* Under lock: the series for attrs, counted as used by one more meter. */
static struct nl_series *series_for(enum nl_inst_id id, const struct nl_attr *attrs, size_t n)
{
	struct nl_instrument *inst = nl_inst(id);
	if (!inst)
		return NULL;
	struct nl_series *s = nl_series_get(inst, attrs, n);
	if (!s || !series_ref(s))
		return NULL;
	return s;
}

static struct nl_series *plain_series(struct nemolens_meter *m, enum nl_inst_id id)
{
	struct nl_series *s = atomic_load_explicit(&m->plain[id], memory_order_acquire);
	if (s)
		return s;
	lock_lens();
	/* Checked under the lock: release clears `live` under it. */
	if (atomic_load(&m->live) && !(s = atomic_load(&m->plain[id])) && (s = series_for(id, NULL, 0)))
		atomic_store_explicit(&m->plain[id], s, memory_order_release);
	unlock_lens();
	return s;
}

static void apply(enum nl_inst_id id, struct nl_series *s, double v, int64_t iv)
{
	switch (nl_inst_defs[id].kind) {
	case NL_HISTOGRAM:
		nl_hist_record(nl_inst(id), s, v);
		break;
	case NL_GAUGE:
		nl_gauge_set(s, v);
		break;
	case NL_GAUGE_INT:
		nl_gauge_set_int(s, iv);
		break;
	case NL_COUNTER:
	case NL_UPDOWN:
	case NL_COUNTER_F64:
		break;   /* the C API records no sums */
	}
}

static bool is_set(const void *flag) { return *(const unsigned char *)flag != 0; }

/* Values a duration or size histogram takes: finite and not negative. */
static bool valid_nonneg(double v) { return isfinite(v) && v >= 0; }

#define HAS(T, f, n) (offsetof(T, f) + sizeof(((T *)0)->f) <= (n))

/* Records an optional double to an attribute-less instrument. */
static void record_f64(struct nemolens_meter *m, enum nl_inst_id id, const struct nemolens_opt_f64 *o, bool nonneg)
{
	if (!is_set(&o->set))
		return;
	double v = o->value;
	if (nonneg ? !valid_nonneg(v) : !isfinite(v))
		return;
	struct nl_series *s = plain_series(m, id);
	if (!s)
		return;
	apply(id, s, v, 0);
}

API void nemolens_record_rl(nemolens_meter *meter, const struct nemolens_rl_metrics *values, size_t size)
{
	struct nemolens_rl_metrics v;
	size_t n;
	struct nemolens_meter *m = begin_record(meter, &v, sizeof v, values, size, &n);
	if (!m)
		return;
	typedef struct nemolens_rl_metrics T;
#define F(field, id, nonneg)                                        \
	if (HAS(T, field, n))                                       \
		record_f64(m, id, &v.field, nonneg);
	F(reward_mean, NL_I_RL_REWARD_MEAN, false)
	F(kl_divergence, NL_I_RL_KL, false)
	F(policy_loss, NL_I_RL_POLICY_LOSS, false)
	F(value_loss, NL_I_RL_VALUE_LOSS, false)
	F(entropy, NL_I_RL_ENTROPY, false)
	F(response_length_mean, NL_I_RL_RESPONSE_LENGTH, false)
	F(grad_norm, NL_I_RL_GRAD_NORM, false)
	F(learning_rate, NL_I_RL_LEARNING_RATE, false)
	F(throughput_tokens_per_sec, NL_I_RL_THROUGHPUT, false)
	F(generation_duration_ms, NL_I_RL_GENERATION_MS, true)
	F(rollout_duration_ms, NL_I_RL_ROLLOUT_MS, true)
#undef F
	leave(m);
}

API void nemolens_record_gym(nemolens_meter *meter, const struct nemolens_gym_metrics *values, size_t size)
{
	struct nemolens_gym_metrics v;
	size_t n;
	struct nemolens_meter *m = begin_record(meter, &v, sizeof v, values, size, &n);
	if (!m)
		return;
	typedef struct nemolens_gym_metrics T;
	if (HAS(T, server_request_duration_ms, n))
		record_f64(m, NL_I_GYM_REQUEST_MS, &v.server_request_duration_ms, true);
	if (HAS(T, rollout_duration_ms, n))
		record_f64(m, NL_I_GYM_ROLLOUT_MS, &v.rollout_duration_ms, true);
	if (HAS(T, verify_duration_ms, n))
		record_f64(m, NL_I_GYM_VERIFY_MS, &v.verify_duration_ms, true);
	if (HAS(T, verify_success_rate, n))
		record_f64(m, NL_I_GYM_SUCCESS_RATE, &v.verify_success_rate, false);
	if (HAS(T, active_servers, n) && is_set(&v.active_servers.set) && v.active_servers.value >= 0) {
		struct nl_series *s = plain_series(m, NL_I_GYM_SERVERS_ACTIVE);
		if (s)
			apply(NL_I_GYM_SERVERS_ACTIVE, s, 0, v.active_servers.value);
	}
	leave(m);
}

/* ---- inference ---------------------------------------------------------------- */

/* FNV-1a over at most MAX_STR bytes of s (NULL hashes differently from ""). */
static uint64_t hash_str(uint64_t h, const char *s)
{
	if (!s)
		return (h ^ 0xff) * 0x100000001b3ull;
	for (size_t i = 0; i < MAX_STR && s[i]; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return (h ^ 0) * 0x100000001b3ull;
}

static bool key_eq(const char *key, const char *s)
{
	if (!key || !s)
		return key == s;
	return strncmp(key, s, MAX_STR) == 0;
}

static struct attrset *find_set(struct nemolens_meter *m, uint64_t h, const char *op, const char *provider,
				const char *model)
{
	for (struct attrset *e = atomic_load_explicit(&m->sets[h % N_BUCKETS], memory_order_acquire); e;
	     e = e->next)
		if (e->hash == h && key_eq(e->op, op) && key_eq(e->provider, provider) && key_eq(e->model, model))
			return e;
	return NULL;
}

static char *key_dup(const char *s) { return s ? strndup(s, MAX_STR) : NULL; }

static struct attrset *new_set(uint64_t h, const char *op, const char *provider, const char *model)
{
	struct attrset *e = calloc(1, sizeof *e);
	if (!e)
		return NULL;
	e->hash = h;
	e->op = key_dup(op);
	e->provider = key_dup(provider);
	e->model = key_dup(model);
	if (e->op && e->provider && (!model || e->model)) {
		e->a_op = nl_utf8_sanitized_dup(e->op);
		e->a_provider = nl_utf8_sanitized_dup(e->provider);
		e->a_model = model ? nl_utf8_sanitized_dup(e->model) : NULL;
		if (e->a_op && e->a_provider && (!model || e->a_model))
			return e;
	}
	free_attrset(e);
	return NULL;
}

/* The meter's entry for this attribute set, created on first use. */
static struct attrset *attr_set(struct nemolens_meter *m, const char *op, const char *provider, const char *model)
{
	uint64_t h = hash_str(hash_str(hash_str(0xcbf29ce484222325ull, op), provider), model);
	struct attrset *e = find_set(m, h, op, provider, model);
	if (e)
		return e;
	lock_lens();
	if (atomic_load(&m->live) && !(e = find_set(m, h, op, provider, model))) {
		if (m->n_sets < MAX_SETS) {
			if ((e = new_set(h, op, provider, model))) {
				e->next = atomic_load(&m->sets[h % N_BUCKETS]);
				atomic_store_explicit(&m->sets[h % N_BUCKETS], e, memory_order_release);
				m->n_sets++;
			}
		} else {
			/* Too many attribute sets: everything new shares the overflow series. */
			if (!m->overflow && (m->overflow = calloc(1, sizeof *m->overflow))) {
				for (int k = 0; k < N_SET_SERIES; k++) {
					enum nl_inst_id id = k == S_DURATION ? NL_I_REQUEST_DURATION : NL_I_TOKEN_USAGE;
					struct nl_instrument *inst = nl_inst(id);
					if (inst && series_ref(nl_instrument_overflow(inst)))
						atomic_store(&m->overflow->series[k], nl_instrument_overflow(inst));
				}
			}
			e = m->overflow;
		}
	}
	unlock_lens();
	return e;
}

static struct nl_series *set_series(struct nemolens_meter *m, struct attrset *e, int k)
{
	struct nl_series *s = atomic_load_explicit(&e->series[k], memory_order_acquire);
	if (s)
		return s;
	lock_lens();
	if (atomic_load(&m->live) && !(s = atomic_load(&e->series[k]))) {
		struct nl_attr a[4];
		size_t n = 0;
		a[n++] = NL_ATTR_S("gen_ai.operation.name", e->a_op);
		a[n++] = NL_ATTR_S("gen_ai.provider.name", e->a_provider);
		if (e->a_model)
			a[n++] = NL_ATTR_S("gen_ai.request.model", e->a_model);
		if (k != S_DURATION)
			a[n++] = NL_ATTR_S("gen_ai.token.type", k == S_INPUT ? "input" : "output");
		s = series_for(k == S_DURATION ? NL_I_REQUEST_DURATION : NL_I_TOKEN_USAGE, a, n);
		if (s)
			atomic_store_explicit(&e->series[k], s, memory_order_release);
	}
	unlock_lens();
	return s;
}

static void record_in_set(struct nemolens_meter *m, struct attrset *e, int k, double v)
{
	struct nl_series *s = set_series(m, e, k);
	if (!s)
		return;
	apply(k == S_DURATION ? NL_I_REQUEST_DURATION : NL_I_TOKEN_USAGE, s, v, 0);
}

static const char *or_default(const char *s, const char *dflt) { return s && *s ? s : dflt; }

API void nemolens_record_inference(nemolens_meter *meter, const struct nemolens_inference_metrics *values,
				   size_t size)
{
	struct nemolens_inference_metrics v;
	size_t n = take_values(&v, sizeof v, values, size);
	if (!n)
		return;
	typedef struct nemolens_inference_metrics T;
	bool dur = HAS(T, request_duration_s, n) && is_set(&v.request_duration_s.set) &&
		   valid_nonneg(v.request_duration_s.value);
	bool in = HAS(T, input_tokens, n) && is_set(&v.input_tokens.set) && v.input_tokens.value >= 0;
	bool out = HAS(T, output_tokens, n) && is_set(&v.output_tokens.set) && v.output_tokens.value >= 0;
	if (!dur && !in && !out)
		return;
	const char *model = HAS(T, model, n) && v.model && *v.model ? v.model : NULL;
	const char *op = or_default(HAS(T, operation_name, n) ? v.operation_name : NULL, DEFAULT_OPERATION);
	const char *provider = or_default(HAS(T, provider_name, n) ? v.provider_name : NULL, DEFAULT_PROVIDER);

	/* Before anything is written: the first record makes the segment (state.h). */
	nl_runtime_kick();
	struct nemolens_meter *m = enter(meter);
	if (!m)
		return;
	struct attrset *e = attr_set(m, op, provider, model);
	if (e) {
		if (dur)
			record_in_set(m, e, S_DURATION, v.request_duration_s.value);
		if (in)
			record_in_set(m, e, S_INPUT, (double)v.input_tokens.value);
		if (out)
			record_in_set(m, e, S_OUTPUT, (double)v.output_tokens.value);
	}
	leave(m);
}
