/* SPDX-License-Identifier: Apache-2.0 */
#include "callsite.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "dest.h"
#include "instruments.h"
#include "loadpath.h"
#include "registry.h"
#include "unwind.h"

#define ATTR_DEST "nemo.gym.http.destination.server.name"
#define ATTR_FUNCTION "code.function.name"
#define ATTR_FILE "code.file.path"
#define ATTR_LINE "code.line.number"
#define ATTR_OBJECT "nemo.lens.code.shared_object"

#define MAX_FRAMES 48
/* Open-addressed tables, twice the entries they hold at most. */
#define SITE_HASH (2 * NL_CALLSITE_LIMIT_MAX)
#define PC_HASH 2048
#define PROBES 32
/* How long a thread waits for another to finish naming a call site or
 * making a series before it counts the connection elsewhere. */
#define WAIT_NS (100ull * 1000 * 1000)

/* Values of the caches below. */
enum { V_NONE = 0, V_PLUMBING = -2, V_OVERFLOW = -1 };   /* else site index + 1 */
#define UNKNOWN_SITE NL_CALLSITE_LIMIT_MAX

struct site {
	char function[NL_UNWIND_FUNCTION_MAX];
	char path[NL_UNWIND_OBJECT_MAX];   /* the module's file, or the Python source file */
	int line;                          /* Python: the line; 0 none */
	bool python;
	/* NULL: none yet; CREATING: a thread makes it. */
	struct nl_series *_Atomic series[NL_DEST_SLOTS];
};
#define CREATING ((struct nl_series *)1)

/* Written at load (loadpath.h). */
NL_LOAD_STATE static bool on;
NL_LOAD_STATE static int limit = NL_CALLSITE_LIMIT_DEFAULT;
static struct nl_instrument *_Atomic inst;
static struct site sites[NL_CALLSITE_LIMIT_MAX + 1];   /* the last: unknown */
static _Atomic int n_sites;
/* Call site key (a native function's address; a Python site's hash with
 * the top bit set) -> site index + 1, V_OVERFLOW, or V_NONE while the
 * thread that claimed the key names the site. */
static _Atomic uint64_t site_keys[SITE_HASH];
static _Atomic int site_vals[SITE_HASH];
/* Return address -> the same, or V_PLUMBING. */
static _Atomic uintptr_t pc_keys[PC_HASH];
static _Atomic int pc_vals[PC_HASH];

/* One thread is here at most once: a signal handler that connects while
 * its thread is here counts its connection as unknown. */
static __thread int busy __attribute__((tls_model("initial-exec")));
/* What the Python adapter named for this thread's next connect(). */
static __thread struct {
	int fd;
	int site;   /* index + 1, V_OVERFLOW; 0: none */
} py_pending __attribute__((tls_model("initial-exec")));

NL_LOAD_PATH void nl_callsite_configure(const struct nl_config *cfg)
{
	on = cfg->call_sites;
	limit = cfg->call_site_limit >= 1 && cfg->call_site_limit <= NL_CALLSITE_LIMIT_MAX ? (int)cfg->call_site_limit
											     : NL_CALLSITE_LIMIT_DEFAULT;
	nl_unwind_set_skip(cfg->call_site_skip);
}

bool nl_callsite_on(void) { return on && atomic_load_explicit(&inst, memory_order_relaxed); }

void nl_callsite_register(void)
{
	if (!on)
		return;
	/* Series are made by hooks as call sites and destinations show up. */
	nl_registry_reserve_static((size_t)limit * 4 + 16);
	strcpy(sites[UNKNOWN_SITE].function, "unknown");
	nl_unwind_init();
	atomic_store(&inst, nl_inst(NL_I_CALL_SITE_ATTEMPTS));
}

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

/* Waits for *v to stop being V_NONE; false after WAIT_NS. */
static bool wait_value(_Atomic int *v, int *out)
{
	uint64_t until = 0;
	for (;;) {
		int x = atomic_load_explicit(v, memory_order_acquire);
		if (x != V_NONE) {
			*out = x;
			return true;
		}
		uint64_t now = nl_monotonic_ns();
		if (!until)
			until = now + WAIT_NS;
		else if (now > until)
			return false;
		sched_yield();
	}
}

/* The site of key: found, or claimed and named by fill(arg) into the next
 * free index. Returns index + 1, V_OVERFLOW, or V_NONE when the site cannot
 * be told now (it counts as unknown). */
static int site_for(uint64_t key, void (*fill)(struct site *, const void *), const void *arg,
		    bool (*same)(const struct site *, const void *))
{
	size_t h = (size_t)mix(key);
	for (int probe = 0; probe < PROBES; probe++) {
		size_t i = (h + (size_t)probe) % SITE_HASH;
		uint64_t k = atomic_load_explicit(&site_keys[i], memory_order_acquire);
		if (k == 0) {
			if (!atomic_compare_exchange_strong(&site_keys[i], &k, key)) {
				probe--;   /* taken a moment ago: look again */
				continue;
			}
			int idx = atomic_fetch_add(&n_sites, 1);
			int v = V_OVERFLOW;
			if (idx < limit) {
				fill(&sites[idx], arg);
				v = idx + 1;
			}
			atomic_store_explicit(&site_vals[i], v, memory_order_release);
			return v;
		}
		if (k != key)
			continue;
		int v;
		if (!wait_value(&site_vals[i], &v))
			return V_NONE;
		if (v > 0 && same && !same(&sites[v - 1], arg))
			continue;   /* two Python sites with one hash */
		return v;
	}
	return V_OVERFLOW;   /* the table is full: past the limit anyway */
}

/* ---- native call sites ------------------------------------------------- */

static void fill_native(struct site *s, const void *arg)
{
	const struct nl_frame_name *f = arg;
	memcpy(s->function, f->function, sizeof s->function);
	memcpy(s->path, f->object, sizeof s->path);
}

static int pc_get(uintptr_t pc)
{
	size_t h = (size_t)mix(pc);
	for (int probe = 0; probe < 4; probe++) {
		size_t i = (h + (size_t)probe) % PC_HASH;
		uintptr_t k = atomic_load_explicit(&pc_keys[i], memory_order_acquire);
		if (k == pc)
			return atomic_load_explicit(&pc_vals[i], memory_order_acquire);
		if (k == 0)
			return V_NONE;
	}
	return V_NONE;
}

static void pc_put(uintptr_t pc, int v)
{
	size_t h = (size_t)mix(pc);
	for (int probe = 0; probe < 4; probe++) {
		size_t i = (h + (size_t)probe) % PC_HASH;
		uintptr_t k = 0;
		if (atomic_compare_exchange_strong(&pc_keys[i], &k, pc) || k == pc) {
			atomic_store_explicit(&pc_vals[i], v, memory_order_release);
			return;
		}
	}
	/* Full around pc: it is looked up from scratch each time (correct, slower). */
}

/* The call site of the stack above this call: index + 1, V_OVERFLOW, or
 * V_NONE (unknown). */
static int native_site(void)
{
	uintptr_t pcs[MAX_FRAMES];
	int n = nl_unwind_stack(pcs, MAX_FRAMES);
	for (int i = 0; i < n; i++) {
		uintptr_t pc = pcs[i];
		int v = pc_get(pc);
		if (v == V_PLUMBING)
			continue;
		if (v != V_NONE)
			return v;
		enum nl_frame_kind kind = nl_unwind_classify(pc);
		if (kind == NL_FRAME_PLUMBING) {
			pc_put(pc, V_PLUMBING);
			continue;
		}
		struct nl_frame_name name;
		if (kind == NL_FRAME_UNKNOWN || !nl_unwind_name(pc, &name))
			return V_NONE;
		v = site_for((uint64_t)name.key, fill_native, &name, NULL);
		if (v != V_NONE)
			pc_put(pc, v);
		return v;
	}
	return V_NONE;
}

/* ---- Python call sites ---------------------------------------------------- */

struct py_site {
	const char *function, *file;
	int line;
};

static void fill_python(struct site *s, const void *arg)
{
	const struct py_site *p = arg;
	size_t n = strnlen(p->function, sizeof s->function - 1);
	memcpy(s->function, p->function, n);
	s->function[n] = 0;
	n = strnlen(p->file, sizeof s->path - 1);
	memcpy(s->path, p->file, n);
	s->path[n] = 0;
	s->line = p->line;
	s->python = true;
}

static bool same_python(const struct site *s, const void *arg)
{
	const struct py_site *p = arg;
	return s->python && s->line == p->line && strncmp(s->function, p->function, sizeof s->function - 1) == 0 &&
	       strncmp(s->path, p->file, sizeof s->path - 1) == 0;
}

static uint64_t py_key(const struct py_site *p)
{
	uint64_t h = 14695981039346656037ull;
	for (const char *c = p->function; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (const char *c = p->file; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	h ^= (uint64_t)(unsigned)p->line * 0x9e3779b97f4a7c15ull;
	return h | (1ull << 63);   /* never a native function's address */
}

void nl_callsite_python(int fd, const char *function, const char *file, int line)
{
	NL_KEEP_ERRNO;
	py_pending.site = V_NONE;
	if (!nl_callsite_on() || !function || !*function || fd < 0 || busy)
		return;
	busy = 1;
	struct py_site p = { function, file ? file : "", line > 0 ? line : 0 };
	py_pending.site = site_for(py_key(&p), fill_python, &p, same_python);
	py_pending.fd = fd;
	busy = 0;
}

/* ---- counting --------------------------------------------------------------- */

static struct nl_series *make_series(struct nl_instrument *in, const struct site *s, int dest)
{
	struct nl_attr a[4];
	size_t n = 0;
	a[n++] = NL_ATTR_S(ATTR_DEST, nl_dest_name(dest));
	a[n++] = NL_ATTR_S(ATTR_FUNCTION, s->function);
	if (s->python) {
		if (s->path[0])
			a[n++] = NL_ATTR_S(ATTR_FILE, s->path);
		if (s->line > 0)
			a[n++] = NL_ATTR_I(ATTR_LINE, s->line);
	} else if (s->path[0]) {
		a[n++] = NL_ATTR_S(ATTR_OBJECT, s->path);
	}
	return nl_series_add_static(in, a, n);
}

/* The series of site index idx and destination dest, made by its first
 * connection (one thread makes it, the others wait for it). */
static struct nl_series *series_of(struct nl_instrument *in, int idx, int dest)
{
	struct nl_series *_Atomic *slot = &sites[idx].series[dest];
	struct nl_series *s = atomic_load_explicit(slot, memory_order_acquire);
	if (s && s != CREATING)
		return s;
	struct nl_series *none = NULL;
	if (!s && atomic_compare_exchange_strong(slot, &none, CREATING)) {
		s = make_series(in, &sites[idx], dest);
		atomic_store_explicit(slot, s, memory_order_release);
		return s;
	}
	uint64_t until = nl_monotonic_ns() + WAIT_NS;
	while ((s = atomic_load_explicit(slot, memory_order_acquire)) == CREATING && nl_monotonic_ns() < until)
		sched_yield();
	return s == CREATING ? nl_instrument_overflow(in) : s;
}

void nl_callsite_connect(int fd, int dest)
{
	struct nl_instrument *in = atomic_load_explicit(&inst, memory_order_acquire);
	if (!in || dest < 0 || dest >= NL_DEST_SLOTS)
		return;
	NL_KEEP_ERRNO;
	int v = V_NONE;
	if (py_pending.site != V_NONE && py_pending.fd == fd) {
		v = py_pending.site;
		py_pending.site = V_NONE;
	} else if (!busy) {
		busy = 1;
		v = native_site();
		busy = 0;
	}
	struct nl_series *s;
	if (v == V_OVERFLOW || dest == NL_DEST_OVERFLOW)
		s = nl_instrument_overflow(in);
	else
		s = series_of(in, v > 0 ? v - 1 : UNKNOWN_SITE, dest);
	nl_counter_add(s, 1);
}

void nl_callsite_atfork_child(void)
{
	nl_unwind_atfork_child();
	/* A site or series a thread of the parent was making: taken again. */
	for (int i = 0; i < SITE_HASH; i++)
		if (atomic_load(&site_keys[i]) && atomic_load(&site_vals[i]) == V_NONE)
			atomic_store(&site_keys[i], 0);
	for (int i = 0; i < PC_HASH; i++)
		if (atomic_load(&pc_keys[i]) && atomic_load(&pc_vals[i]) == V_NONE)
			atomic_store(&pc_keys[i], 0);
	int n = atomic_load(&n_sites);
	for (int i = 0; i < (n < limit ? n : limit); i++)
		for (int d = 0; d < NL_DEST_SLOTS; d++)
			if (atomic_load(&sites[i].series[d]) == CREATING)
				atomic_store(&sites[i].series[d], NULL);
	for (int d = 0; d < NL_DEST_SLOTS; d++)
		if (atomic_load(&sites[UNKNOWN_SITE].series[d]) == CREATING)
			atomic_store(&sites[UNKNOWN_SITE].series[d], NULL);
	py_pending.site = V_NONE;
	busy = 0;
}
