/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up figures of server processes (startup.h).
 *
 * The start of a process. An exec'd process starts, for these figures, when
 * the shim's constructor runs: before main, after only the dynamic loader's
 * work, and it costs two reads of the vDSO clocks at load. A fork child runs
 * no constructor; its start is its fork, which the kernel keeps as field 22
 * (starttime, clock ticks since boot) of /proc/self/stat. That file is read
 * only by a fork child, once, at its first response, so an exec'd process
 * never opens it; and /proc alone would not do for exec'd processes, since
 * starttime is the fork that preceded the exec (a launch shell's fork, long
 * before its venv set-up), not the exec. The child is told from the image
 * that loaded the shim by its pid: the pid taken at load is copied into
 * every fork child, where getpid() differs.
 *
 * The ready duration is measured on CLOCK_BOOTTIME, the clock starttime
 * counts on, so both kinds of start compare with the same now. Gym's stamps
 * are wall-clock times (time.time_ns()), so its stages use the wall clock
 * taken at load. A fork child records no stage: its interpreter started in
 * the image that loaded the shim, and Gym's stages are those of the server's
 * launch, recorded by the process that was launched. */
#include "startup.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "env.h"
#include "instruments.h"
#include "loadpath.h"
#include "procfs.h"
#include "real.h"
#include "registry.h"
#include "state.h"

atomic_bool nl_startup_pending = true;

NL_LOAD_STATE static pid_t load_pid;
NL_LOAD_STATE static int64_t load_boot_ns;
NL_LOAD_STATE static struct nl_startup_stages stages = { -1, -1 };
static const struct nl_config *config;
static struct nl_instrument *i_ready, *i_stage;
/* The series, made by the first response that needs each and kept across
 * fork, where the registry keeps them with their values zeroed: a fork
 * child's child finds its worker series there rather than make a second
 * one with the same attributes. Index: worker. */
static struct nl_series *s_ready[2], *s_venv, *s_interpreter;

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) != 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int64_t nl_startup_stamp(const char *v)
{
	if (!v)
		return 0;
	while (blank(*v))
		v++;
	bool negative = false;
	if (*v == '+' || *v == '-')
		negative = *v++ == '-';
	if (*v < '0' || *v > '9')
		return 0;
	int64_t n = 0;
	for (;;) {
		if (*v >= '0' && *v <= '9') {
			int d = *v++ - '0';
			if (n > (INT64_MAX - d) / 10)
				return 0;   /* past any time this century: not a stamp */
			n = n * 10 + d;
		} else if (*v == '_' && v[1] >= '0' && v[1] <= '9') {
			v++;        /* one underscore between digits, as int() allows */
		} else {
			break;
		}
	}
	while (blank(*v))
		v++;
	if (*v || negative)
		return 0;   /* trailing bytes; or below zero, which Gym ignores */
	return n;
}

struct nl_startup_stages nl_startup_stages_of(int64_t spawn, int64_t setup_done, int64_t entered)
{
	struct nl_startup_stages s = { -1, -1 };
	if (spawn <= 0 || entered <= 0)
		return s;
	if (setup_done > 0) {
		if (spawn <= setup_done && setup_done <= entered) {
			s.venv_setup_ns = setup_done - spawn;
			s.interpreter_start_ns = entered - setup_done;
		}
	} else if (spawn <= entered) {
		s.interpreter_start_ns = entered - spawn;
	}
	return s;
}

/* Only a process launched with Gym's stamps pays for them: out of the load
 * path's pages. */
static __attribute__((noinline)) void load_stamps(const char *spawn)
{
	stages = nl_startup_stages_of(nl_startup_stamp(spawn),
				      nl_startup_stamp(nl_env_get("NEMO_GYM_STARTUP_SETUP_DONE_NS")),
				      clock_ns(CLOCK_REALTIME));
}

NL_LOAD_PATH void nl_startup_load(const struct nl_config *cfg)
{
	config = cfg;
	load_pid = getpid();
	load_boot_ns = clock_ns(CLOCK_BOOTTIME);
	const char *spawn = nl_env_get("NEMO_GYM_STARTUP_SPAWN_NS");
	if (spawn)
		load_stamps(spawn);
}

void nl_startup_register(void)
{
	i_ready = nl_inst(NL_I_SERVER_READY);
	i_stage = nl_inst(NL_I_GYM_STARTUP_STAGE_MS);
}

void nl_startup_atfork_child(void) { atomic_store_explicit(&nl_startup_pending, true, memory_order_relaxed); }

/* A fork child's start on CLOCK_BOOTTIME, from /proc/self/stat; -1 when it
 * cannot be read. The shim's own fd: the hooks are bypassed around it. */
static int64_t fork_start_ns(void)
{
	unsigned long hz = getauxval(AT_CLKTCK);
	if (!hz)
		return -1;
	char buf[2048];
	int bypass = nl_hooks_bypass;
	nl_hooks_bypass = 1;
	ssize_t n = -1;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		do
			n = read(fd, buf, sizeof buf);
		while (n < 0 && errno == EINTR);
		close(fd);
	}
	nl_hooks_bypass = bypass;
	struct nl_proc_stat st;
	if (n <= 0 || nl_parse_stat(buf, (size_t)n, &st) != 0)
		return -1;
	return (int64_t)(st.starttime / hz) * 1000000000 + (int64_t)(st.starttime % hz * 1000000000 / hz);
}

static void record_stage(struct nl_series **s, const char *stage, int64_t ns, struct nl_attr *a, size_t n)
{
	if (ns < 0)
		return;
	a[0] = NL_ATTR_S("nemo.gym.startup.stage", stage);
	if (!*s)
		*s = nl_series_add_static(i_stage, a, n);
	nl_hist_record(i_stage, *s, (double)ns / 1e6);
}

void nl_startup_first_response(void)
{
	if (!atomic_exchange_explicit(&nl_startup_pending, false, memory_order_relaxed) || !i_ready || !i_stage ||
	    !config)
		return;
	NL_KEEP_ERRNO;
	int64_t now = clock_ns(CLOCK_BOOTTIME);
	bool child = getpid() != load_pid;
	int64_t start = child ? fork_start_ns() : load_boot_ns;
	/* Slot 0 is the stage's, for the stage series. */
	struct nl_attr a[4];
	size_t n = 1;
	a[n++] = NL_ATTR_S("nemo.gym.server.name", config->server_name ? config->server_name : "unknown");
	a[n++] = NL_ATTR_B("nemo.gym.server.worker", child);
	if (config->server_type_known && config->server_type)
		a[n++] = NL_ATTR_S("nemo.gym.server.type", config->server_type);
	if (start >= 0 && now >= start) {
		if (!s_ready[child])
			s_ready[child] = nl_series_add_static(i_ready, a + 1, n - 1);
		nl_hist_record(i_ready, s_ready[child], (double)(now - start) / 1e9);
	}
	if (child)
		return;
	record_stage(&s_venv, "venv_setup", stages.venv_setup_ns, a, n);
	record_stage(&s_interpreter, "interpreter_start", stages.interpreter_start_ns, a, n);
}
