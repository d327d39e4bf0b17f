/* SPDX-License-Identifier: Apache-2.0 */
#include "callsite.h"

#include <dlfcn.h>
#include <sched.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "dest.h"
#include "elfsym.h"
#include "fork.h"
#include "instruments.h"
#include "loadpath.h"
#include "registry.h"
#include "state.h"
#include "table.h"
#include "unwind.h"

#define ATTR_DEST "nemo.gym.http.destination.server.name"

/* Room for the limit's largest value; the limit itself is a setting. */
#define SITES_MAX 256
/* Frames looked at from connect() outward: a libcurl transfer is some
 * twenty frames deep at its connect(). */
#define FRAMES 40
/* Return addresses classified so far: frames of plumbing and call sites. */
#define IP_SLOTS 4096

/* The site every stack that cannot be read counts under. */
#define SITE_UNKNOWN 0
/* nl_callsite_named's answer past the limit, and the classification of a
 * frame the limit left without a site of its own. */
#define SITE_OVER (-1)

struct site {
	long line;           /* 0: not known */
	char function[160];
	char file[256];      /* "": not known (native frames) */
	char object[96];     /* the shared object of a native frame, else "" */
};

NL_LOAD_STATE static bool on;
NL_LOAD_STATE static long limit = 64;
NL_LOAD_STATE static const char *skip;   /* NEMOLENS_CALL_SITES_SKIP: prefixes separated by commas; NULL: default_skip */
/* Set last by nl_callsite_register: counting starts once it is there. */
static struct nl_instrument *_Atomic inst;
static struct site sites[SITES_MAX];
static _Atomic int n_sites;
/* Taken to add a site, on the slow path only: a site is named once. */
static atomic_flag adding = ATOMIC_FLAG_INIT;
/* Each (site, destination)'s series, made by the first count (table.h),
 * by site * NL_DEST_SLOTS + destination: a number that is its own hash, as
 * sites and destinations are numbered from 0 up. Room for four times the
 * series the registry makes for an instrument by default; a pair past it
 * counts in the overflow series, as a series past the registry's limit. */
#define SERIES_SLOTS 8192
struct site_series {
	struct nl_slot head;
	uint32_t key;
	struct nl_series *s;
};
NL_TABLE_SLOTS(struct site_series, series, SERIES_SLOTS);
#define SERIES_TABLE { series, sizeof series[0], SERIES_SLOTS, 64, 0, NULL, 0 }
/* Return address << 16 | what it is (PLUMBING, or site + FIRST_SITE). */
static _Atomic uint64_t ips[IP_SLOTS];
enum { PLUMBING = 1, OVER = 2, FIRST_SITE = 3 };
/* The shim's own code, never a call site: from connect() outward, the
 * first frames are always the hook's. */
static uintptr_t shim_lo, shim_hi;
static pid_t self_pid;
static char exe_name[96];   /* the program's file name, for its frames */

/* Set by the adapter for its thread's next connect(): site + 1. */
static __thread int python_next __attribute__((tls_model("initial-exec")));
/* This thread is inside the slow path (a signal handler's connect() while
 * it runs counts as unknown, it does not re-enter). */
static __thread int busy __attribute__((tls_model("initial-exec")));

static const char default_skip[] = "libcurl,libuv,libssl,libcrypto,libgnutls,libnghttp2,libngtcp2,"
				   "libevent,libev.,libresolv,libnss_,libgrpc,libzmq,libcares,"
				   "libsoup,libgio,libpq,libmysqlclient,libmariadb,libhiredis";

/* At load: two values and a pointer (the configuration outlives the
 * process's recording); the list is read at a first look only. */
NL_LOAD_PATH void nl_callsite_init(const struct nl_config *cfg)
{
	on = cfg->call_sites;
	limit = cfg->call_sites_limit;
	skip = cfg->call_sites_skip;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* A fork child: its own pid (a child that no handler ran in is a vfork
 * child, see slow_path), and what another thread of the parent was making
 * at the fork made again when needed. A site is counted in n_sites only
 * once written whole, so a half-written one is simply written over. */
static void atfork_child(void)
{
	self_pid = getpid();
	atomic_flag_clear(&adding);
	const struct nl_table t = SERIES_TABLE;
	nl_table_forget(&t);
}

void nl_callsite_register(void)
{
	if (!on || atomic_load(&inst))
		return;
	struct site *u = &sites[SITE_UNKNOWN];
	snprintf(u->function, sizeof u->function, "unknown");
	atomic_store(&n_sites, 1);
	struct dl_find_object d;
	if (_dl_find_object((void *)&nl_callsite_count, &d) == 0) {
		shim_lo = (uintptr_t)d.dlfo_map_start;
		shim_hi = (uintptr_t)d.dlfo_map_end;
	}
	self_pid = getpid();
	/* The program's file name, for its frames' nemolens.code.object: read
	 * once here, not by threads that meet their first frames at once. */
	char exe[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	const char *b = n > 0 ? base_name(exe) : program_invocation_short_name;
	size_t k = strnlen(b, sizeof exe_name - 1);
	memcpy(exe_name, b, k);
	exe_name[k] = '\0';
	static const struct nl_fork_handlers fork_handlers = { .child = atfork_child };
	nl_fork_register(NL_FORK_CALLSITES, &fork_handlers);
	nl_registry_reserve_static((size_t)limit + 16);
	atomic_store_explicit(&inst, nl_inst(NL_I_CONN_CALL_SITE), memory_order_release);
}

/* ---- the series ------------------------------------------------------------ */

static bool same_key(const struct nl_slot *e, const void *key)
{
	return ((const struct site_series *)e)->key == *(const uint32_t *)key;
}

static void make_series(struct nl_slot *e, const void *arg)
{
	uint32_t key = *(const uint32_t *)arg;
	const struct site *x = &sites[key / NL_DEST_SLOTS];
	struct nl_attr a[5];
	size_t n = 0;
	a[n++] = NL_ATTR_S(ATTR_DEST, nl_dest_name((int)(key % NL_DEST_SLOTS)));
	a[n++] = NL_ATTR_S("code.function.name", x->function);
	if (x->file[0])
		a[n++] = NL_ATTR_S("code.file.path", x->file);
	if (x->line > 0)
		a[n++] = NL_ATTR_I("code.line.number", x->line);
	if (x->object[0])
		a[n++] = NL_ATTR_S("nemolens.code.object", x->object);
	((struct site_series *)e)->key = key;
	((struct site_series *)e)->s = nl_series_add_static(inst, a, n);
}

/* The series of a pair not found in its first slot: made, or waited for.
 * Another thread making it takes a few hundred instructions, lock-free,
 * but may be descheduled meanwhile: the table answers busy at once, and
 * this thread yields and asks again. The wait is bounded, since that
 * thread may be the one this thread's signal handler interrupted; past
 * it, the overflow series. */
static __attribute__((noinline)) struct nl_series *series_claim(uint32_t key)
{
	const struct nl_table t = SERIES_TABLE;
	for (int i = 0; i < 1000; i++) {
		struct nl_slot *e;
		enum nl_table_answer a = nl_table_get(&t, key, same_key, &key, make_series, &key, &e);
		if (a == NL_TABLE_FOUND)
			return ((struct site_series *)e)->s;
		if (a != NL_TABLE_BUSY)
			break;
		sched_yield();
	}
	return nl_instrument_overflow(inst);
}

static struct nl_series *series_of(int site, int dest)
{
	if (site < 0 || dest < 0 || dest >= NL_DEST_SLOTS)
		return nl_instrument_overflow(inst);
	const struct nl_table t = SERIES_TABLE;
	uint32_t key = (uint32_t)site * NL_DEST_SLOTS + (uint32_t)dest, id;
	struct nl_slot *e = nl_table_first(&t, key, same_key, &key, &id);
	return e ? ((struct site_series *)e)->s : series_claim(key);
}

/* A series is never NULL: made, or the overflow series. */
static void count(int site, int dest) { nl_counter_add(series_of(site, dest), 1); }

/* ---- the sites ------------------------------------------------------------- */

static int find_site(const char *function, const char *file, long line, const char *object)
{
	int n = atomic_load_explicit(&n_sites, memory_order_acquire);
	for (int i = 1; i < n && i < SITES_MAX; i++) {
		const struct site *x = &sites[i];
		if (x->line == line && strcmp(x->function, function) == 0 && strcmp(x->file, file) == 0 &&
		    strcmp(x->object, object) == 0)
			return i;
	}
	return -1;
}

/* The site with these names, made if new: its number, or SITE_OVER past the
 * limit. Sites are only ever added, and a site is written whole before
 * n_sites counts it, so readers need no lock. */
static int site_of(const char *function, const char *file, long line, const char *object)
{
	int i = find_site(function, file, line, object);
	if (i > 0)
		return i;
	while (atomic_flag_test_and_set_explicit(&adding, memory_order_acquire))
		;   /* another thread names a site: a few microseconds */
	i = find_site(function, file, line, object);
	if (i < 0) {
		i = atomic_load_explicit(&n_sites, memory_order_relaxed);
		if (i >= limit + 1 || i >= SITES_MAX) {
			i = SITE_OVER;
		} else {
			struct site *x = &sites[i];
			snprintf(x->function, sizeof x->function, "%s", function);
			snprintf(x->file, sizeof x->file, "%s", file);
			snprintf(x->object, sizeof x->object, "%s", object);
			x->line = line;
			atomic_store_explicit(&n_sites, i + 1, memory_order_release);
		}
	}
	atomic_flag_clear_explicit(&adding, memory_order_release);
	return i;
}

int nl_callsite_named(const char *function, const char *file, long line)
{
	if (!on || !function || !*function)
		return -1;
	NL_KEEP_ERRNO;
	if (!atomic_load_explicit(&inst, memory_order_acquire)) {
		nl_runtime_kick();   /* the instruments, made by the first record */
		if (!atomic_load_explicit(&inst, memory_order_acquire))
			return -1;
	}
	return site_of(function, file ? file : "", line > 0 ? line : 0, "");
}

void nl_callsite_next(int site)
{
	python_next = site >= 0 && site < SITES_MAX ? site + 1 : 0;
}

/* ---- native stacks --------------------------------------------------------- */

static uint64_t *ip_slot(uintptr_t ip, bool *found)
{
	uint64_t h = ((uint64_t)ip * 0x9E3779B97F4A7C15ull) >> 52;
	for (unsigned probe = 0; probe < 16; probe++) {
		_Atomic uint64_t *slot = &ips[(h + probe) & (IP_SLOTS - 1)];
		uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
		if (w >> 16 == ip) {
			*found = true;
			return (uint64_t *)slot;
		}
		if (!w) {
			*found = false;
			return (uint64_t *)slot;
		}
	}
	*found = false;
	return NULL;
}

/* What ip was found to be: 0 when it is not in the cache yet. */
static inline unsigned cached(uintptr_t ip)
{
	bool found;
	uint64_t *slot = ip_slot(ip, &found);
	/* Acquire: the site a classification names was written before it. */
	return found ? (unsigned)(atomic_load_explicit((_Atomic uint64_t *)slot, memory_order_acquire) & 0xffff) : 0;
}

static void remember(uintptr_t ip, unsigned what)
{
	bool found;
	uint64_t *slot = ip_slot(ip, &found);
	if (slot && !found) {
		uint64_t zero = 0;
		atomic_compare_exchange_strong((_Atomic uint64_t *)slot, &zero, (uint64_t)ip << 16 | what);
	}
}

/* Whether name starts with one of the prefixes of list (comma separated). */
static bool prefixed(const char *name, const char *list)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n && strncmp(name, p, n) == 0)
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

/* Whether the object named name (a file name) is plumbing: libc, the loader,
 * or a library of the skip list. */
static bool is_plumbing(const char *name)
{
	/* The sanitizers' runtimes stand between a program and the shim in
	 * their builds: they intercept connect() and call the shim's. */
	return prefixed(name, "libc.so,ld-linux,libpthread,libunwind,libdl.,libasan,libtsan,libubsan,liblsan") ||
	       prefixed(name, skip ? skip : default_skip);
}

/* What the frame of return address ip is, found out (and cached). */
static unsigned classify(uintptr_t ip)
{
	struct dl_find_object d;
	if (_dl_find_object((void *)ip, &d) != 0 || !d.dlfo_link_map)
		return PLUMBING;   /* not in any object: generated code; look further out */
	const char *path = d.dlfo_link_map->l_name;
	bool main_program = !path || !*path;
	if (main_program)
		path = "/proc/self/exe";
	const char *object = main_program ? exe_name : base_name(path);
	if (!main_program && is_plumbing(object))
		return PLUMBING;
	char name[160];
	/* ip - 1: the call instruction, in the caller even when the call is the
	 * last instruction of its function. */
	if (nl_elf_symbol(path, d.dlfo_link_map->l_addr, ip - 1, name, sizeof name))
		name[strcspn(name, ".")] = '\0';   /* the compiler's copies: f.isra.0, f.constprop.1, f.cold */
	else
		snprintf(name, sizeof name, "%s+0x%lx", object, (unsigned long)(ip - (uintptr_t)d.dlfo_link_map->l_addr));
	int site = site_of(name, "", 0, object);
	return site < 0 ? OVER : (unsigned)site + FIRST_SITE;
}

/* Loads libunwind, or waits for the thread that loads it: at most 100 ms,
 * since that thread may be one this thread's signal handler interrupted. */
static bool ready(void)
{
	return nl_unwind_load_wait(100);
}

/* The call site of a stack with a frame not seen before: loads libunwind if
 * need be, classifies the new frames. Once per new return address. */
static __attribute__((noinline)) int slow_path(void)
{
	/* A vfork child shares its parent's memory and must not load or map
	 * anything: its pid is not the one this process image started with. */
	if (busy || getpid() != self_pid)
		return SITE_UNKNOWN;
	/* The hooks stay on: the loader's and the unwinder's reads of files
	 * pass through them at the cost of an untracked fd, and a signal
	 * handler's connect() in the meantime is counted as any other. */
	busy = 1;
	int site = SITE_UNKNOWN;
	void *stack[FRAMES];
	int n = ready() ? nl_unwind_backtrace(stack, FRAMES) : 0;
	for (int i = 0; i < n; i++) {
		uintptr_t ip = (uintptr_t)stack[i];
		if (ip >= shim_lo && ip < shim_hi)
			continue;
		unsigned what = cached(ip);
		if (!what) {
			what = classify(ip);
			remember(ip, what);
		}
		if (what == PLUMBING)
			continue;
		site = what == OVER ? SITE_OVER : (int)what - FIRST_SITE;
		break;
	}
	busy = 0;
	return site;
}

/* The call site of a connect() whose caller (the hook's return address)
 * was not met before: it is classified, without unwinding. */
static __attribute__((noinline)) unsigned first_look(uintptr_t caller)
{
	if (busy || getpid() != self_pid)
		return 0;   /* see slow_path */
	busy = 1;
	unsigned what = classify(caller);
	remember(caller, what);
	busy = 0;
	return what;
}

/* The call site of this thread's stack. */
static int native_site(void)
{
	if (busy)
		return SITE_UNKNOWN;
	void *stack[FRAMES];
	int n = nl_unwind_backtrace(stack, FRAMES);
	if (!n)
		return nl_unwind_loaded() ? SITE_UNKNOWN : slow_path();
	for (int i = 0; i < n; i++) {
		uintptr_t ip = (uintptr_t)stack[i];
		if (ip >= shim_lo && ip < shim_hi)
			continue;
		unsigned what = cached(ip);
		if (what == PLUMBING)
			continue;
		if (!what)
			return slow_path();
		return what == OVER ? SITE_OVER : (int)what - FIRST_SITE;
	}
	return SITE_UNKNOWN;
}

void nl_callsite_count(int dest, const void *caller)
{
	if (!atomic_load_explicit(&inst, memory_order_acquire))
		return;
	int site;
	if (python_next) {
		site = python_next - 1;
	} else {
		/* Most connect() calls come straight from the code that wants the
		 * connection: its return address is the answer, and no stack is
		 * unwound. Only a caller that is plumbing (libcurl, an
		 * interpreter's socket module) needs the frames further out. */
		NL_KEEP_ERRNO;
		unsigned what = cached((uintptr_t)caller);
		if (!what)
			what = first_look((uintptr_t)caller);
		if (what == PLUMBING || !what)
			site = what ? native_site() : SITE_UNKNOWN;
		else
			site = what == OVER ? SITE_OVER : (int)what - FIRST_SITE;
	}
	count(site, dest);
}
