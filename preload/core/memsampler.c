/* SPDX-License-Identifier: Apache-2.0 */
/* Memory of server process trees and of the host, sampled from /proc.
 *
 * Roles, decided once in the constructor (memory profiling on only):
 *  - outermost: no live shim ancestor, i.e. NEMOLENS_OUTERMOST_PID is unset
 *    or names a process that is not an ancestor any more. It reports host
 *    memory and gym.servers.active, and passes its pid down.
 *  - server root: no inherited NEMOLENS_PARENT_SERVER_NAME (no shim
 *    ancestor), or a declared server name (NEMOLENS_SERVER_NAME,
 *    NEMO_GYM_CONFIG_PATH, OTEL_SERVICE_NAME, service.name) that differs
 *    from the inherited one. A
 *    name that only comes from the program name never starts a new tree, so
 *    a server's helpers (sh, python -c ...) stay part of it. It passes its
 *    name down and reports its tree.
 *  - anything else samples nothing.
 *
 * Each sample (background thread only) scans /proc/<pid>/stat of every
 * process to get (pid, ppid, start time), then walks the descendants of this
 * process. A descendant is the root of another server when its environment
 * (/proc/<pid>/environ, as it was at exec) says so by the same rules and the
 * shim is really mapped in it (/proc/<pid>/maps: a static binary inherits
 * LD_PRELOAD but never loads it). The tree stops there. /proc/<pid>/environ
 * shows the environment of the last exec, not later setenv calls: a fork
 * that has not exec'd (same environment block address, stat fields 50-51,
 * as its parent) therefore takes its parent's role without looking at it,
 * as nl_memsampler_atfork_child does in the child itself. Processes are
 * identified by (pid, start time): a member is opened as a /proc/<pid>
 * directory, its start time checked again through that directory, and every
 * other file read relative to it, so a pid reused in between never mixes two
 * processes; a process that vanishes mid-read is left out of that sample.
 *
 * RSS: statm resident pages x page size (status VmRSS as a fallback), every
 * sample. PSS: smaps_rollup, which walks the target's page tables under its
 * mmap lock, so it runs under a CPU budget (NEMOLENS_PSS_BUDGET_PERCENT of
 * one core, default 1): a process whose last read cost c is read again only
 * after c / budget has passed (never more often than every sample), and when
 * the wanted reads of all processes together would exceed the budget, every
 * process's period is stretched by the same factor. Reads also draw on a
 * credit earned at the budget's rate (at most 10 s worth): a read predicted
 * to cost more than 1 ms (from its last cost, or for a process never read
 * from its RSS and the cost per byte seen so far) waits while the credit is
 * spent, so that a burst of big new processes (a pool of forks of a big
 * server) is spread out instead of read at once. Between reads the last
 * value of that (pid, start time) is reused. When any member has no PSS
 * value (not readable, no smaps_rollup on this kernel, budget 0), the tree's
 * PSS gauge is left out of that sample. Zombies count for nothing.
 *
 * Under nemolens-run the launcher runs this sampler for the processes whose
 * segments it exports (preload/readers/memtrees.c): the same walk from each
 * root's pid, the same budget, the values recorded into the root's own
 * series.
 *
 * Costs not under the budget: the /proc scan (one stat read per process on
 * the host) and, per member, stat + statm; per descendant that exec'd, its
 * environ (and its maps when the environment says it is another root).
 */
/* The sampler runs on the shim's own thread (hooks bypassed) and uses the
 * plain libc calls: pairing a plain open() with a raw close would hide the
 * close from interceptors such as a sanitizer's, which then take a reused
 * fd number for a race. */
#include "memsampler_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "instruments.h"
#include "loadpath.h"
#include "log.h"
#include "procfs.h"
#include "segment.h"
#include "state.h"
#include "registry.h"

#define ENV_PARENT_NAME "NEMOLENS_PARENT_SERVER_NAME"
#define ENV_OUTERMOST NL_ENV_OUTERMOST   /* config.h */
#define ENV_BUDGET "NEMOLENS_PSS_BUDGET_PERCENT"

#define MAX_PROCS 131072                /* processes scanned per sample */
#define ENVIRON_MAX (1u << 20)          /* bytes of a descendant's environ read */
#define MAX_ANCESTORS 4096

/* One process of the /proc scan. */
struct proc {
	int pid;
	int ppid;
	uint64_t start;
	uint64_t env_start, env_end;
	char state;
	bool visited;
};

/* The last PSS read of one process. */
struct nl_pss_entry {
	int pid;
	uint64_t start;
	uint64_t pss;                   /* bytes */
	bool has_pss;
	uint64_t cost_ns;               /* of the last successful read */
	uint64_t last_ns;               /* monotonic time of the last read attempt */
};

/* A process of this tree, for this sample. */
struct member {
	int pid;
	uint64_t start;
};

/* Zeroed, not initialised: the peaks are set by nl_memsampler_init, so
 * that this stays out of the data page every process writes at load. */
static struct nl_mtree self;
NL_LOAD_STATE static bool active;
static uint64_t page_size = 4096;
static uint64_t interval_ns;
static double pss_budget = 0.01;        /* fraction of one core; 0 = no PSS */
/* CPU time PSS reads may still spend now (negative: spent ahead), earned at
 * pss_budget per second of wall time, at most CREDIT_CAP_S seconds' worth. */
static double pss_credit_ns;
static uint64_t credit_time_ns;
/* Cost of a read per byte of RSS, learned from reads of big processes: it
 * predicts the cost of a process never read yet. Starts at 25 ms per GiB. */
static double pss_ns_per_byte = 25e6 / (1 << 30);
#define CREDIT_CAP_S 10.0
#define CHEAP_READ_NS 1000000u          /* reads predicted below 1 ms ignore the credit */
static bool have_rollup = true;

static pthread_mutex_t servers_lock = PTHREAD_MUTEX_INITIALIZER;
static bool shut_down;                  /* under servers_lock */

/* Background-thread state, grown as needed. */
static struct proc *procs;
static size_t n_procs, cap_procs;
static struct member *members;
static size_t cap_members;
struct frame {
	int pid;
	uint64_t start;
	uint64_t env_start, env_end;
	bool in_tree;
};
static struct frame *stack;
static size_t cap_stack;
static char *envbuf;
static size_t envcap;

/* ---- reading /proc ------------------------------------------------------- */

/* Reads fd into buf[*n, cap) until it is full or the file ends: 1 when
 * full, 0 at the end, or -errno. */
static int fill(int fd, char *buf, size_t cap, size_t *n)
{
	while (*n < cap) {
		ssize_t r = read(fd, buf + *n, cap - *n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return 0;
		*n += (size_t)r;
	}
	return 1;
}

/* Reads name (relative to dirfd) into buf; returns its length, or -errno.
 * Content past cap is cut off (the parsers reject what that breaks). */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t cap)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	int r = fill(fd, buf, cap, &n);
	close(fd);
	return r < 0 ? r : (ssize_t)n;
}

/* Reads a whole file of unknown size into the growable envbuf (at most
 * ENVIRON_MAX bytes); returns its length or -errno. */
static ssize_t read_big_at(int dirfd, const char *name, bool *cut)
{
	*cut = false;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t n = 0;
	int r = 0;
	do {
		if (n == envcap) {
			size_t cap = envcap ? envcap * 2 : 16384;
			char *b = envcap < ENVIRON_MAX ? realloc(envbuf, cap) : NULL;
			if (!b) {
				*cut = true;
				break;
			}
			envbuf = b;
			envcap = cap;
		}
		r = fill(fd, envbuf, envcap, &n);
	} while (r > 0);
	close(fd);
	return r < 0 ? r : (ssize_t)n;
}

static int open_pid_dir(int pid)
{
	char path[32];
	snprintf(path, sizeof path, "/proc/%d", pid);
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* stat of the process behind dirfd; 0, or -1 (vanished or malformed). */
static int read_stat_at(int dirfd, const char *name, struct nl_proc_stat *st)
{
	char buf[2048];
	ssize_t n = read_at(dirfd, name, buf, sizeof buf);
	if (n < 0)
		return -1;   /* gone: nothing to say */
	if (nl_parse_stat(buf, (size_t)n, st) != 0) {
		if (n > 0)
			nl_warn_once("proc.stat", "memory sampler: unexpected content in /proc/<pid>/stat; process skipped");
		return -1;
	}
	return 0;
}

int nl_memsampler_stat_of(int pid, struct nl_proc_stat *st)
{
	char name[32];
	snprintf(name, sizeof name, "/proc/%d/stat", pid);
	return read_stat_at(AT_FDCWD, name, st);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- roles --------------------------------------------------------------- */

/* Whether pid is an ancestor of this process (walking ppid from the parent). */
static bool is_ancestor(int pid)
{
	int p = getppid();
	for (int steps = 0; p > 0 && steps < MAX_ANCESTORS; steps++) {
		if (p == pid)
			return true;
		if (p == 1)
			break;
		struct nl_proc_stat st;
		if (nl_memsampler_stat_of(p, &st) != 0)
			break;
		p = st.ppid;
	}
	return false;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static void read_budget(void)
{
	const char *v = env_nonempty(ENV_BUDGET);
	if (!v)
		return;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	while (*end == ' ')
		end++;
	if (errno || end == v || *end || !isfinite(d) || d < 0 || d > 100) {
		nl_warn_once("env." ENV_BUDGET, "ignoring %s=\"%.40s\": expected a percentage from 0 to 100", ENV_BUDGET,
			     v);
		return;
	}
	pss_budget = d / 100.0;
}

static void register_instruments(const struct nl_config *cfg)
{
	if (self.is_root) {
		struct nl_instrument *usage =
			nl_instrument_get("gym.server.memory.usage", "By",
					  "Memory of the server's process tree (sum over its processes)", NL_GAUGE_INT,
					  NULL, 0);
		struct nl_instrument *pk =
			nl_instrument_get("gym.server.memory.sampled_peak", "By",
					  "Largest sampled memory of the server's process tree since start", NL_GAUGE_INT,
					  NULL, 0);
		struct nl_instrument *procs_i = nl_instrument_get(
			"gym.server.processes", "{process}", "Processes in the server's process tree", NL_GAUGE_INT, NULL, 0);
		static const char *const types[2] = { "rss", "pss" };
		struct nl_attr a[4] = { NL_ATTR_S("nemo.gym.server.name", cfg->server_name),
					NL_ATTR_S("nemo.gym.server.type", cfg->server_type),
					NL_ATTR_I("process.pid", self.pid), NL_ATTR_S("memory.type", "") };
		for (int t = 0; t < 2; t++) {
			a[3].v.s = types[t];
			self.s_usage[t] = usage ? nl_series_get(usage, a, 4) : NULL;
			self.s_peak[t] = pk ? nl_series_get(pk, a, 4) : NULL;
		}
		self.s_procs = procs_i ? nl_series_get(procs_i, a, 3) : NULL;
	}
	if (self.is_outermost) {
		struct nl_instrument *i;
		i = nl_instrument_get("gym.host.memory.usage", "By", "Host memory in use (MemTotal - MemAvailable)",
				      NL_GAUGE_INT, NULL, 0);
		self.s_host_usage = i ? nl_series_get(i, NULL, 0) : NULL;
		i = nl_instrument_get("gym.host.memory.available", "By", "Host memory available (MemAvailable)",
				      NL_GAUGE_INT, NULL, 0);
		self.s_host_avail = i ? nl_series_get(i, NULL, 0) : NULL;
		i = nl_instrument_get("gym.host.memory.total", "By", "Host memory (MemTotal)", NL_GAUGE_INT, NULL, 0);
		self.s_host_total = i ? nl_series_get(i, NULL, 0) : NULL;
		i = nl_instrument_get("gym.host.memory.sampled_peak", "By",
				      "Largest sampled host memory in use since start", NL_GAUGE_INT, NULL, 0);
		self.s_host_peak = i ? nl_series_get(i, NULL, 0) : NULL;
		i = nl_inst(NL_I_GYM_SERVERS_ACTIVE);
		self.s_servers = i ? nl_series_get(i, NULL, 0) : NULL;
	}
}

void nl_memsampler_configure(const struct nl_config *cfg)
{
	long ps = sysconf(_SC_PAGESIZE);
	if (ps > 0)
		page_size = (uint64_t)ps;
	interval_ns = (uint64_t)(cfg->memory_interval_ms > 0 ? cfg->memory_interval_ms : 1000) * 1000000u;
	read_budget();
	have_rollup = access("/proc/self/smaps_rollup", R_OK) == 0;
}

/* Out of the load path's pages: only a process with memory profiling on
 * runs it (nl_memsampler_init). */
static void init(const struct nl_config *cfg)
{
	self.peak[NL_MEM_RSS] = self.peak[NL_MEM_PSS] = self.host_peak = -1;
	self.pid = getpid();
	nl_memsampler_configure(cfg);
	struct nl_proc_stat st;
	if (nl_memsampler_stat_of(self.pid, &st) == 0) {
		self.start = st.starttime;
		self.env_start = st.env_start;
		self.env_end = st.env_end;
	}
	else
		nl_warn_once("proc.self", "memory sampler: cannot read /proc/self/stat; memory profiling is off");

	const char *outer = env_nonempty(ENV_OUTERMOST);
	char *end = NULL;
	long op = outer ? strtol(outer, &end, 10) : 0;
	self.is_outermost = !outer || *end || op <= 0 || !is_ancestor((int)op);

	const char *inherited = env_nonempty(ENV_PARENT_NAME);
	bool declared = env_nonempty("NEMOLENS_SERVER_NAME") || env_nonempty("NEMO_GYM_CONFIG_PATH") || cfg->service_name;
	self.is_root = nl_server_is_root(declared ? cfg->server_name : NULL, inherited);

	/* The constructor runs before main and before any thread of the shim:
	 * the environment can still be changed safely. */
	if (self.is_root && cfg->server_name)
		setenv(ENV_PARENT_NAME, cfg->server_name, 1);
	if (self.is_outermost) {
		char pid[24];
		snprintf(pid, sizeof pid, "%d", self.pid);
		setenv(ENV_OUTERMOST, pid, 1);
	}
	if (self.start == 0) {
		self.is_root = self.is_outermost = false;
		return;
	}
	if (!have_rollup && self.is_root)
		nl_warn_once("proc.smaps_rollup", "memory sampler: this kernel has no /proc/<pid>/smaps_rollup; "
						  "gym.server.memory.* reports RSS only");
	register_instruments(cfg);
	active = self.is_root || self.is_outermost;
	nl_debug("memsampler: pid %d root=%d outermost=%d name=%s pss budget %.3f%%", self.pid, self.is_root, self.is_outermost,
		 cfg->server_name ? cfg->server_name : "", pss_budget * 100);
}

NL_LOAD_PATH void nl_memsampler_init(const struct nl_config *cfg)
{
	if (cfg->memory_profiling)
		init(cfg);
}

NL_LOAD_PATH bool nl_memsampler_active(void)
{
	return active;
}

/* ---- one sample ------------------------------------------------------------ */

static int digits_only(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

static int by_ppid(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;
	if (x->ppid != y->ppid)
		return x->ppid < y->ppid ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Fills procs[] from /proc/<pid>/stat, sorted by ppid. */
int nl_memsampler_scan(void)
{
	n_procs = 0;
	DIR *d = opendir("/proc");
	if (!d) {
		nl_warn_once("proc.scan", "memory sampler: cannot list /proc: %s", strerror(errno));
		return -1;
	}
	int dfd = dirfd(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!digits_only(de->d_name))
			continue;
		if (n_procs == cap_procs) {
			size_t cap = cap_procs ? cap_procs * 2 : 1024;
			if (cap > MAX_PROCS)
				cap = MAX_PROCS;
			struct proc *p = cap > cap_procs ? realloc(procs, cap * sizeof *p) : NULL;
			if (!p) {
				nl_warn_once("proc.many", "memory sampler: more than %d processes; the rest are not seen",
					     MAX_PROCS);
				break;
			}
			procs = p;
			cap_procs = cap;
		}
		char name[300];
		snprintf(name, sizeof name, "%s/stat", de->d_name);
		struct nl_proc_stat st;
		if (read_stat_at(dfd, name, &st) != 0)
			continue;
		procs[n_procs++] = (struct proc){ .pid = st.pid, .ppid = st.ppid, .start = st.starttime,
						  .env_start = st.env_start, .env_end = st.env_end,
						  .state = st.state };
	}
	closedir(d);
	qsort(procs, n_procs, sizeof *procs, by_ppid);
	return 0;
}

/* First index in procs[] with ppid >= ppid. */
static size_t first_child(int ppid)
{
	size_t lo = 0, hi = n_procs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (procs[mid].ppid < ppid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the shim is mapped in pid (looked for in /proc/<pid>/maps).
 * Unreadable maps: trust the environment. */
static bool shim_mapped(int pid)
{
	char path[40];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT && errno != ESRCH;
	static const char needle[] = "libnemolens_preload";
	enum { K = sizeof needle - 1 };
	char buf[8192 + K];
	size_t keep = 0;
	bool found = false;
	for (;;) {
		ssize_t r = read(fd, buf + keep, sizeof buf - keep);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t n = keep + (size_t)r;
		for (size_t i = 0; i + K <= n && !found; i++)
			found = buf[i] == 'l' && memcmp(buf + i, needle, K) == 0;
		if (found)
			break;
		keep = n < K - 1 ? n : K - 1;
		memmove(buf, buf + n - keep, keep);
	}
	close(fd);
	return found;
}

/* Whether the descendant pid is the root of another server (see the top). */
static bool other_root(int pid)
{
	char name[32];
	snprintf(name, sizeof name, "/proc/%d/environ", pid);
	bool cut;
	ssize_t n = read_big_at(AT_FDCWD, name, &cut);
	if (n < 0) {
		if (n != -ENOENT && n != -ESRCH)
			nl_warn_once("proc.environ", "memory sampler: cannot read /proc/<pid>/environ (%s); such "
						     "descendants are counted in their parent's tree",
				     strerror((int)-n));
		return false;
	}
	if (cut)
		nl_warn_once("proc.environ.big", "memory sampler: a descendant's environment is larger than %u bytes; "
						 "only its start was read",
			     ENVIRON_MAX);
	struct nl_env_role role;
	nl_environ_role(envbuf, (size_t)n, &role);
	return role.other_root && shim_mapped(pid);
}

/* Makes room for n elements of size sz in *arr (capacity *cap). */
bool nl_memsampler_reserve(void **arr, size_t *cap, size_t n, size_t sz)
{
	if (n <= *cap)
		return true;
	size_t c = *cap ? *cap : 64;
	while (c < n)
		c *= 2;
	void *p = realloc(*arr, c * sz);
	if (!p)
		return false;
	*arr = p;
	*cap = c;
	return true;
}

/* Walks the descendants of this process: fills members[] (this tree, this
 * process first) and counts the roots of other servers below (all of them
 * when counting for gym.servers.active, else only those met at the edge of
 * this tree). Returns the number of members. */
static size_t walk(struct nl_mtree *T, size_t *n_roots)
{
	*n_roots = 0;
	for (size_t i = 0; i < n_procs; i++)
		procs[i].visited = false;
	size_t n_members = 0;
	if (!nl_memsampler_reserve((void **)&stack, &cap_stack, n_procs + 1, sizeof *stack) ||
	    !nl_memsampler_reserve((void **)&members, &cap_members, n_procs + 1, sizeof *members)) {
		nl_warn_once("memsampler.oom", "memory sampler: out of memory; sample skipped");
		return 0;
	}
	if (T->is_root)
		members[n_members++] = (struct member){ T->pid, T->start };
	size_t top = 0;
	stack[top++] = (struct frame){ T->pid, T->start, T->env_start, T->env_end, T->is_root };
	while (top > 0) {
		struct frame f = stack[--top];
		for (size_t i = first_child(f.pid); i < n_procs && procs[i].ppid == f.pid; i++) {
			struct proc *c = &procs[i];
			/* A child that started before its parent is a stale edge left by
			 * pid reuse during the scan: ignore it (this also rules out cycles). */
			if (c->visited || c->start < f.start || c->pid == T->pid)
				continue;
			c->visited = true;
			if (c->state == 'Z' || c->state == 'X')
				continue;   /* exited: no memory, no children of its own */
			if (!f.in_tree && !T->is_outermost)
				continue;
			struct frame cf = { c->pid, c->start, c->env_start, c->env_end, f.in_tree };
			/* A fork that has not exec'd shows the environment its parent
			 * was exec'd with (/proc/<pid>/environ does not see setenv):
			 * it has its parent's role, never one of its own. */
			bool fork_copy = c->env_start && c->env_start == f.env_start && c->env_end == f.env_end;
			if (!fork_copy && other_root(c->pid)) {
				(*n_roots)++;
				cf.in_tree = false;
				if (T->is_outermost)
					stack[top++] = cf;
			} else {
				if (f.in_tree)
					members[n_members++] = (struct member){ c->pid, c->start };
				stack[top++] = cf;
			}
		}
	}
	return n_members;
}

static int by_pid(const void *a, const void *b)
{
	const struct nl_pss_entry *x = a, *y = b;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static struct nl_pss_entry *cache_find(const struct nl_mtree *T, int pid, uint64_t start)
{
	struct nl_pss_entry key = { .pid = pid };
	struct nl_pss_entry *e = T->n_cache ? bsearch(&key, T->cache, T->n_cache, sizeof *T->cache, by_pid) : NULL;
	return e && e->start == start ? e : NULL;
}

/* How long a process whose PSS read costs cost_ns waits between reads. */
static uint64_t pss_period(uint64_t cost_ns, double stretch)
{
	double p = (double)cost_ns / pss_budget;
	if (p < (double)interval_ns)
		p = (double)interval_ns;
	p *= stretch;
	return p > 1e18 ? (uint64_t)1e18 : (uint64_t)p;
}

/* The factor by which every period is stretched so that the reads wanted
 * by all processes together stay within the budget. */
static double pss_stretch(const struct nl_mtree *T)
{
	double rate = 0;
	for (size_t i = 0; i < T->n_cache; i++)
		if (T->cache[i].has_pss)
			rate += (double)T->cache[i].cost_ns / (double)pss_period(T->cache[i].cost_ns, 1.0);
	return rate > pss_budget ? rate / pss_budget : 1.0;
}

struct totals {
	uint64_t rss, pss;
	size_t count;
	bool rss_ok, pss_ok;
	unsigned pss_reads;
	uint64_t pss_cost_ns;
};

/* Reads one member's PSS (through its /proc directory) when due, else
 * reuses the last value; stores the result in e. */
static void member_pss(int dfd, uint64_t rss, const struct nl_pss_entry *old, struct nl_pss_entry *e, uint64_t now,
		       double stretch, struct totals *t)
{
	if (old)
		*e = *old;
	bool due = !old || !old->has_pss || now - old->last_ns + interval_ns / 2 >= pss_period(old->cost_ns, stretch);
	if (!due || pss_budget <= 0 || !have_rollup)
		return;
	/* An expensive read (a big process, or a fork of one that was never read)
	 * waits until the budget has earned credit again: bursts of big reads,
	 * such as a pool of forks of a big server, are spread out. */
	double predicted = old && old->has_pss ? (double)old->cost_ns : (double)rss * pss_ns_per_byte;
	if (predicted > CHEAP_READ_NS && pss_credit_ns <= 0)
		return;
	char buf[4096];
	uint64_t c0 = thread_cpu_ns(), w0 = nl_monotonic_ns();
	ssize_t n = read_at(dfd, "smaps_rollup", buf, sizeof buf);
	uint64_t cpu = thread_cpu_ns() - c0, wall = nl_monotonic_ns() - w0;
	/* The wall time is what the target's mmap lock was held for at most; the
	 * CPU time is what it cost us. Budget the larger. */
	uint64_t cost = cpu > wall ? cpu : wall;
	e->last_ns = now;
	uint64_t pss;
	if (n < 0) {
		if (n == -EACCES || n == -EPERM)
			nl_warn_once("proc.smaps_rollup.access", "memory sampler: no permission to read "
								 "/proc/<pid>/smaps_rollup of a process; PSS left out");
		e->has_pss = false;
		return;
	}
	t->pss_reads++;
	t->pss_cost_ns += cost;
	if (nl_parse_smaps_rollup_pss(buf, (size_t)n, &pss) != 0) {
		/* Empty: no address space any more (exiting). Else malformed. */
		if (n > 0)
			nl_warn_once("proc.smaps_rollup.parse", "memory sampler: no Pss line in /proc/<pid>/smaps_rollup; "
								"PSS left out");
		e->has_pss = false;
		return;
	}
	e->pss = pss;
	e->has_pss = true;
	e->cost_ns = cost;
	pss_credit_ns -= (double)cost;
	if (rss >= (64u << 20))
		pss_ns_per_byte = 0.7 * pss_ns_per_byte + 0.3 * ((double)cost / (double)rss);
}

/* Earns the credit of the time since the last sample. */
static void pss_earn(uint64_t now)
{
	if (credit_time_ns) {
		pss_credit_ns += pss_budget * (double)(now - credit_time_ns);
		double cap = pss_budget * CREDIT_CAP_S * 1e9;
		if (pss_credit_ns > cap)
			pss_credit_ns = cap;
	}
	credit_time_ns = now;
}

/* RSS of the process behind dfd, in bytes; -1 when it cannot be read. */
static int member_rss(int dfd, uint64_t *rss)
{
	char buf[512];
	ssize_t n = read_at(dfd, "statm", buf, sizeof buf);
	uint64_t pages;
	if (n > 0 && nl_parse_statm(buf, (size_t)n, &pages) == 0) {
		*rss = pages * page_size;
		return 0;
	}
	if (n > 0)
		nl_warn_once("proc.statm", "memory sampler: unexpected content in /proc/<pid>/statm; using status");
	char sbuf[4096];
	n = read_at(dfd, "status", sbuf, sizeof sbuf);
	if (n > 0 && nl_parse_status_vmrss(sbuf, (size_t)n, rss) == 0)
		return 0;
	return -1;
}

static void sample_tree(struct nl_mtree *T, size_t n_members, uint64_t now, struct totals *t)
{
	memset(t, 0, sizeof *t);
	t->rss_ok = t->pss_ok = true;
	if (!nl_memsampler_reserve((void **)&T->next_cache, &T->cap_next, n_members, sizeof *T->next_cache) ||
	    !nl_memsampler_reserve((void **)&T->cache, &T->cap_cache, n_members, sizeof *T->cache)) {
		nl_warn_once("memsampler.oom", "memory sampler: out of memory; sample skipped");
		t->rss_ok = t->pss_ok = false;
		return;
	}
	double stretch = pss_stretch(T);
	pss_earn(now);
	size_t n_next = 0;
	for (size_t i = 0; i < n_members; i++) {
		const struct member *m = &members[i];
		int dfd = open_pid_dir(m->pid);
		if (dfd < 0)
			continue;   /* gone */
		struct nl_proc_stat st;
		if (read_stat_at(dfd, "stat", &st) != 0 || st.starttime != m->start || st.state == 'Z' ||
		    st.state == 'X') {
			close(dfd);
			continue;   /* gone, or its pid already reused */
		}
		uint64_t rss;
		if (member_rss(dfd, &rss) != 0) {
			/* Vanished between the two reads (the stat above passed): skip it.
			 * Anything else: the tree's RSS is unknown this time. */
			struct nl_proc_stat again;
			if (read_stat_at(dfd, "stat", &again) != 0) {
				close(dfd);
				continue;
			}
			nl_warn_once("proc.rss", "memory sampler: cannot read the RSS of a process; RSS left out");
			t->rss_ok = false;
			rss = 0;
		}
		struct nl_pss_entry *e = &T->next_cache[n_next++];
		*e = (struct nl_pss_entry){ .pid = m->pid, .start = m->start };
		member_pss(dfd, rss, cache_find(T, m->pid, m->start), e, now, stretch, t);
		close(dfd);
		t->count++;
		t->rss += rss;
		if (e->has_pss)
			t->pss += e->pss;
		else
			t->pss_ok = false;
	}
	/* The new cache holds this sample's members only: exited processes go. */
	qsort(T->next_cache, n_next, sizeof *T->next_cache, by_pid);
	struct nl_pss_entry *tmp = T->cache;
	size_t tcap = T->cap_cache;
	T->cache = T->next_cache;
	T->cap_cache = T->cap_next;
	T->next_cache = tmp;
	T->cap_next = tcap;
	T->n_cache = n_next;
	if (t->count == 0)
		t->rss_ok = t->pss_ok = false;
}

/* A gauge that has nothing to say this time is left out of the next export. */
static void gauge_clear(struct nl_series *s)
{
	if (s)
		nl_gauge_clear(s);
}

static void gauge_set(struct nl_series *s, uint64_t v)
{
	if (s)
		nl_gauge_set_int(s, v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

static void record_peak(struct nl_series *s, int64_t *pk, uint64_t v)
{
	int64_t iv = v > INT64_MAX ? INT64_MAX : (int64_t)v;
	if (iv > *pk)
		*pk = iv;
	gauge_set(s, (uint64_t)*pk);
}

static void sample_host(struct nl_mtree *T)
{
	char buf[8192];
	ssize_t n = read_at(AT_FDCWD, "/proc/meminfo", buf, sizeof buf);
	struct nl_meminfo mi;
	if (n < 0 || nl_parse_meminfo(buf, (size_t)n, &mi) != 0) {
		nl_warn_once("proc.meminfo", "memory sampler: cannot read MemTotal/MemAvailable from /proc/meminfo; "
					     "host memory left out");
		gauge_clear(T->s_host_usage);
		gauge_clear(T->s_host_avail);
		gauge_clear(T->s_host_total);
		return;
	}
	uint64_t used = mi.total - mi.available;
	gauge_set(T->s_host_total, mi.total);
	gauge_set(T->s_host_avail, mi.available);
	gauge_set(T->s_host_usage, used);
	record_peak(T->s_host_peak, &T->host_peak, used);
}

/* One sample of T, /proc scanned (nl_memsampler_scan). */
void nl_memsampler_sample_tree(struct nl_mtree *T, uint64_t now)
{
	uint64_t cpu0 = thread_cpu_ns();
	if (T->is_outermost)
		sample_host(T);
	size_t n_roots;
	size_t n_members = walk(T, &n_roots);
	if (T->is_outermost) {
		pthread_mutex_lock(&servers_lock);
		if (!shut_down || T != &self)
			gauge_set(T->s_servers, n_roots);
		pthread_mutex_unlock(&servers_lock);
	}
	if (!T->is_root)
		return;
	struct totals t;
	sample_tree(T, n_members, now, &t);
	if (t.count > 0)
		gauge_set(T->s_procs, t.count);
	if (t.rss_ok) {
		gauge_set(T->s_usage[NL_MEM_RSS], t.rss);
		record_peak(T->s_peak[NL_MEM_RSS], &T->peak[NL_MEM_RSS], t.rss);
	} else {
		gauge_clear(T->s_usage[NL_MEM_RSS]);
	}
	if (t.pss_ok) {
		gauge_set(T->s_usage[NL_MEM_PSS], t.pss);
		record_peak(T->s_peak[NL_MEM_PSS], &T->peak[NL_MEM_PSS], t.pss);
	} else {
		gauge_clear(T->s_usage[NL_MEM_PSS]);
	}
	if (nl_log_get_level() >= NL_LOG_DEBUG)
		nl_debug("memsampler: pid %d sample cpu_us=%llu scanned=%zu members=%zu roots_below=%zu rss=%llu "
			 "pss=%s%llu pss_reads=%u pss_read_cost_us=%llu",
			 T->pid, (unsigned long long)((thread_cpu_ns() - cpu0) / 1000), n_procs, t.count, n_roots,
			 (unsigned long long)t.rss, t.pss_ok ? "" : "-", (unsigned long long)t.pss, t.pss_reads,
			 (unsigned long long)(t.pss_cost_ns / 1000));
}

/* The peak so far, when the series has one: an exporter that sampled
 * before this one (nemolens-run, its keeper) recorded it. */
static void peak_from(struct nl_series *s, int64_t *pk)
{
	int64_t v;
	if (s && nl_gauge_get_int(s, &v) && v > *pk)
		*pk = v;
}

void nl_memsampler_peaks_from_series(struct nl_mtree *T)
{
	for (int t = 0; t < 2; t++)
		peak_from(T->s_peak[t], &T->peak[t]);
	peak_from(T->s_host_peak, &T->host_peak);
}

void nl_memsampler_sample(void)
{
	if (!active)
		return;
	static bool first = true;
	if (first)
		nl_memsampler_peaks_from_series(&self);   /* this process took its export back (runtime.c) */
	first = false;
	if (nl_memsampler_scan() == 0)
		nl_memsampler_sample_tree(&self, nl_monotonic_ns());
}

void nl_memsampler_shutdown(void)
{
	if (!self.is_outermost || !self.s_servers)
		return;
	nl_runtime_kick();   /* before anything is written (state.h) */
	pthread_mutex_lock(&servers_lock);
	shut_down = true;
	nl_gauge_set_int(self.s_servers, 0);
	pthread_mutex_unlock(&servers_lock);
}

unsigned nl_memsampler_roles(void)
{
	if (!active)
		return 0;
	return (self.is_root ? NL_SEG_MEM_ROOT : 0u) | (self.is_outermost ? NL_SEG_MEM_OUTERMOST : 0u);
}

void nl_memsampler_atfork_child(void)
{
	/* A forked child has its parent's server name: it is part of the
	 * parent's tree and samples nothing. The parent's buffers are left alone
	 * (the sampler thread may have been using them at the fork). */
	/* Only a sampler takes the lock: a process without one leaves it alone. */
	if (active || self.s_servers)
		pthread_mutex_init(&servers_lock, NULL);
	active = false;
	self.is_root = false;
	self.is_outermost = false;
	procs = NULL;
	n_procs = cap_procs = 0;
	members = NULL;
	cap_members = 0;
	stack = NULL;
	cap_stack = 0;
	self.cache = self.next_cache = NULL;
	self.n_cache = self.cap_cache = self.cap_next = 0;
	envbuf = NULL;
	envcap = 0;
}
