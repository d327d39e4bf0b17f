/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run: starts a program with libnemolens_preload.so preloaded.
 *
 *   nemolens-run [options] [--] program [args...]
 *
 * The options only set the environment variables the shim reads
 * (docs/configuration.md). The shim records inside the program and its descendants;
 * this program exports for all of them (the tree's export, below), unless
 * the configuration is one only the processes can export (then each exports
 * for itself, as under plain LD_PRELOAD). It interposes nothing and links of
 * the shim's code the configuration parser, the segment reader and the
 * exporter, never the hooks.
 *
 * Where the shim is found, the program's LD_PRELOAD, and nemolens-run
 * started under the shim: preload_env.c.
 *
 * Signals: the program stays in nemolens-run's process group, so a terminal
 * keeps treating the pair as one job (Ctrl-Z stops both, the program can read
 * the terminal). INT, TERM, HUP, QUIT, USR1, USR2 and WINCH are blocked and
 * taken with sigwaitinfo, together with SIGCHLD, so nothing runs in a handler
 * and no exit status is lost. A signal sent by a process (si_code other than
 * SI_KERNEL) is forwarded to the program's pid. One sent by the kernel to the
 * terminal's foreground group (Ctrl-C, Ctrl-\, resize, hangup) has reached
 * the program already and is not forwarded again, unless the program has
 * left the group. A process that signals the whole group with kill(-pgid)
 * reaches the program directly and again through nemolens-run: signal
 * nemolens-run's pid to signal the program once.
 *
 * --summary[=FILE]: once the program ended, the tables of what its tree
 * recorded (summary.h), made of the snapshots the tree's export read, on
 * stderr or into FILE; never a change to the exit status.
 *
 * Exit status, as a shell's: the program's exit code, or 128 + the signal
 * that killed it; 126 when the program cannot be executed, 127 when it is
 * not found; 125 when nemolens-run fails itself (no shim, no fork), as env(1)
 * and timeout(1) do; 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "adopt.h"
#include "clock.h"
#include "config.h"
#include "env.h"
#include "foreign.h"
#include "launcher.h"
#include "log.h"
#include "memsampler.h"
#include "memtrees.h"
#include "preload_env.h"
#include "printconfig.h"
#include "registry.h"
#include "segment.h"
#include "summary_collect.h"

#ifndef NL_VERSION
#define NL_VERSION "unknown"
#endif

#define EXIT_USAGE 2
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND 127

const char *const progname = "nemolens-run";

/* The configuration as the shim in the program reads it, with no warnings,
 * through the same window on the environment (env.h): one walk of the
 * environment instead of one getenv per name, some seventy of them. */
static void load_quietly(struct nl_config *cfg)
{
	enum nl_log_level level = nl_log_get_level();
	nl_log_set_level(NL_LOG_NONE);
	struct nl_env_window w;
	nl_env_open(&w);
	nl_config_load(cfg, nl_env_get, "nemolens-run");
	nl_env_close();
	nl_log_set_level(level);
}

/* ---- after the program ended -------------------------------------------- */

struct delivery {
	const struct nl_config *cfg;
	struct nl_transport *transport;
	char user_agent[64];
};

static struct nl_transport *delivery_transport(void *arg)
{
	struct delivery *d = arg;
	if (!d->transport) {
		struct nl_transport_config tc = nl_adopt_transport_config(d->cfg, d->user_agent);
		d->transport = nl_transport_new(&tc);
	}
	return d->transport;
}

/* Delivers what the program and its descendants left behind: the segments
 * (segment.h) of processes that ended without delivering everything, the
 * program itself when it was killed (SIGKILL included), under their own
 * resources. Also those of other dead processes of this user that were
 * configured for the same collector. Within NEMOLENS_EXIT_TIMEOUT_MS: the
 * launcher's exit waits for nothing longer. */
static void nl_deliver_leftovers(void)
{
	struct nl_config cfg;
	load_quietly(&cfg);   /* the program has said what is wrong with the variables already */
	if (cfg.enabled && cfg.metrics_enabled && cfg.exporter == NL_EXPORTER_OTLP && cfg.adopt != NL_ADOPT_OFF &&
	    nl_seg_configure(&cfg) == 0) {
		struct delivery d = { .cfg = &cfg };
		snprintf(d.user_agent, sizeof d.user_agent, "nemolens-preload/%s", NL_VERSION);
		struct nl_adopter a = { .cfg = &cfg, .transport = delivery_transport, .arg = &d };
		/* A process that ended a moment ago has let go of its segment: the
		 * kernel releases its lock before its parent learns of its end. */
		nl_adopt_run(&a, nl_monotonic_ns() + (uint64_t)cfg.exit_timeout_ms * 1000000u, true, NULL);
		nl_transport_free(d.transport);
	}
	nl_config_free(&cfg);
}

/* ---- the tree's export -------------------------------------------------- */

/* While the program runs, this process exports for its whole tree: every
 * export interval it reads the segments of the processes that name it as
 * their exporter (NL_ENV_RUN_EXPORTER), live ones as they stand, and
 * delivers those whose owner ended; each under its owner's resource and
 * start time. The processes themselves start no thread, load no export
 * library and open no socket of the shim's. A thread of this process does
 * it, so that a collector that does not answer never delays the signals
 * this process passes on, nor its exit. */
struct tree {
	struct nl_config cfg;
	struct delivery d;
	bool on;
	uint32_t exporters[2];          /* this process, and the one it took over from */
	size_t n_exporters;
	uint64_t interval_ns;
	bool sampling;                  /* memory profiling: the processes' sampler runs here */
	uint64_t sample_ns;
	uint64_t next_sample;           /* CLOCK_MONOTONIC */
	unsigned rounds;
	uint64_t first_export;          /* CLOCK_MONOTONIC: an interval after the program's start */
	bool watching;                  /* the segments' directory is looked at, below */
	struct stat dir_seen;           /* as it was when the watch began */
	uint64_t next_look;             /* CLOCK_MONOTONIC */
	pthread_t thread;
	bool running;
	int keeper_fd;                  /* the keeper's socket (-1: none) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;                      /* under mu */
	_Atomic bool abort;             /* an in-flight send gives up */
};

/* How long the last export waits for a collector's answer: what it cannot
 * deliver stays in the segments, for the next process to deliver. */
#define TREE_QUICK_MS 60

static void tree_setup(struct tree *t)
{
	load_quietly(&t->cfg);   /* the program says what is wrong with the variables */
	const struct nl_config *c = &t->cfg;
	t->on = c->enabled && c->metrics_enabled && c->exporter == NL_EXPORTER_OTLP && c->adopt == NL_ADOPT_OWN &&
		!c->delta_counters && !c->delta_histograms && nl_seg_configure(c) == 0;
	t->sampling = t->on && c->memory_profiling;
	if (t->sampling)
		nl_memsampler_configure(c);
	t->sample_ns = (uint64_t)(c->memory_interval_ms > 0 ? c->memory_interval_ms : 1000) * 1000000u;
	t->d.cfg = c;
	snprintf(t->d.user_agent, sizeof t->d.user_agent, "nemolens-preload/%s", NL_VERSION);
	t->exporters[0] = (uint32_t)getpid();
	t->n_exporters = 1;
	summary_set_exporter(t->exporters[0]);
	t->interval_ns = (uint64_t)c->export_interval_ms * 1000000u;
	if (t->on) {
		char pid[24];
		snprintf(pid, sizeof pid, "%u", t->exporters[0]);
		setenv(NL_ENV_RUN_EXPORTER, pid, 1);
	}
}

/* Why this process does not export for its tree (tree_setup), for
 * --summary, which shows what that export reads. */
static const char *tree_off_reason(const struct nl_config *c)
{
	if (!c->enabled || !c->metrics_enabled)
		return "metrics are disabled";
	if (c->exporter != NL_EXPORTER_OTLP)
		return "with OTEL_METRICS_EXPORTER other than otlp each process reports for itself";
	if (c->adopt != NL_ADOPT_OWN)
		return "NEMOLENS_ADOPT makes each process export for itself";
	if (c->delta_counters || c->delta_histograms)
		return "with delta temporality each process exports for itself";
	return "the shim's private segment directory cannot be used";
}

/* One export of the tree: the dead first (their last values), then the
 * live. Returns how many live segments were read. */
static size_t tree_export(struct tree *t, bool thorough, uint64_t deadline_ns, uint32_t quick_ms)
{
	struct nl_adopter a = { .cfg = &t->cfg, .transport = delivery_transport, .arg = &t->d, .abort = &t->abort,
				.quick_ms = quick_ms, .seen = summary_wanted() ? summary_seen : NULL };
	if (t->sampling)
		nl_memsampler_ended();   /* before their last values go */
	nl_adopt_run(&a, deadline_ns, thorough, NULL);
	size_t points = 0;
	size_t n = nl_adopt_live(&a, t->exporters, t->n_exporters, deadline_ns, &points, NULL);
	nl_debug("tree export: %zu live segments, %zu points", n, points);
	t->rounds++;
	return n;
}

static struct timespec monotonic_at(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
}

/* When the next sample or export is due. */
static uint64_t tree_due(const struct tree *t, uint64_t next_export)
{
	return t->sampling && t->next_sample < next_export ? t->next_sample : next_export;
}

/* What is due at now: a sample of the trees' memory, an export (returns
 * whether one ran, and how many live segments it read). */
static bool tree_work(struct tree *t, uint64_t *next_export, size_t *live)
{
	uint64_t now = nl_monotonic_ns();
	if (t->sampling && now >= t->next_sample) {
		nl_memsampler_sample_exported(nl_seg_delivery_key(&t->cfg), t->exporters, t->n_exporters);
		/* Fixed steps, but never a burst to catch up after a stall. */
		t->next_sample += t->sample_ns;
		if (t->next_sample <= now)
			t->next_sample = now + t->sample_ns;
	}
	if (now < *next_export)
		return false;
	/* Zombies and exec'd images (segments named after live pids) every
	 * tenth time. */
	*live = tree_export(t, t->rounds % 10 == 9, nl_monotonic_ns() + t->interval_ns, 0);
	*next_export = nl_monotonic_ns() + t->interval_ns;
	return true;
}

static void *tree_main(void *arg)
{
	struct tree *t = arg;
	pthread_mutex_lock(&t->mu);
	uint64_t next = t->first_export;
	t->next_sample = nl_monotonic_ns();
	while (!t->stop) {
		struct timespec ts = monotonic_at(tree_due(t, next));
		if (pthread_cond_timedwait(&t->cv, &t->mu, &ts) != ETIMEDOUT || t->stop)
			continue;
		pthread_mutex_unlock(&t->mu);
		size_t live;
		tree_work(t, &next, &live);
		pthread_mutex_lock(&t->mu);
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

static void tree_start(struct tree *t)
{
	if (!t->on)
		return;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&t->mu, NULL);
	t->running = pthread_create(&t->thread, NULL, tree_main, t) == 0;
}

static void tree_stop(struct tree *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	atomic_store(&t->abort, true);
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	atomic_store(&t->abort, false);
	t->running = false;
}

/* The keeper: a process of its own, forked (while this one has no other
 * thread) once the tree has something to export (tree_watch), detached from the terminal and its job,
 * that waits on a socket only this process holds the other end of. When
 * this process ends, normally or not (SIGKILL included), the kernel closes
 * that end and the keeper takes over the export at once: it names itself in
 * the segments (under their lock: an owner that took its export back in
 * the meantime keeps it, segment.h) and exports every interval until the
 * last process of the tree ended. Processes that outlive the program
 * (daemons) are exported to their end so, and nemolens-run still exits with
 * its program; they run on without a thread of their own meanwhile. When
 * nothing of the tree is left, this process tells the keeper to go ("q")
 * instead. */
static void keeper_main(struct tree *t, int fd, const sigset_t *mask)
{
	/* The summary is the launcher's, of the program's run. */
	summary_forget();
	setsid();
	sigprocmask(SIG_SETMASK, mask, NULL);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			close(null);
	}
	char c = 0;
	ssize_t r;
	while ((r = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	if (r == 1 && c == 'q')
		_exit(0);
	t->exporters[1] = t->exporters[0];
	t->exporters[0] = (uint32_t)getpid();
	t->n_exporters = 2;
	/* At once: the segments name this process from now on, before the
	 * processes find the launcher gone and export for themselves. */
	uint64_t next = nl_monotonic_ns();
	t->next_sample = next;
	size_t live = 1;
	for (;;) {
		if (tree_work(t, &next, &live) && live == 0)
			break;
		struct timespec ts = monotonic_at(tree_due(t, next));
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	/* The last one ended a moment ago: it has let go of its segment. */
	tree_export(t, true, nl_monotonic_ns() + (uint64_t)t->cfg.exit_timeout_ms * 1000000u, 0);
	nl_transport_free(t->d.transport);
	_exit(0);
}

static void keeper_start(struct tree *t, const sigset_t *mask)
{
	int sv[2];
	t->keeper_fd = -1;
	if (!t->on || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	pid_t k = fork();
	if (k == 0) {
		close(sv[0]);
		keeper_main(t, sv[1], mask);
	}
	close(sv[1]);
	if (k < 0)
		close(sv[0]);   /* no keeper: each process exports itself once this one is gone */
	else
		t->keeper_fd = sv[0];
}

/* Neither the keeper nor the thread starts before there is something of
 * the tree to export: a program that ends within its first interval and
 * whose tree recorded nothing needs neither. A process's segment is a file
 * in the segments' directory, created when it first records, so until the
 * first interval ends the launcher looks at the directory every
 * TREE_LOOK_MS: the first change to its times or size (a file created or
 * renamed into it) starts both, as does the interval's end. The first look
 * is taken before the program starts, so no segment of the tree is created
 * unseen; a change the times miss (a coarse clock's tick, on a kernel
 * without fine-grained timestamps) still moves a tmpfs directory's size,
 * and a miss only waits for the interval's end.
 *
 * Looked at rather than watched with inotify: closing an inotify instance
 * that had a watch waits for the kernel to retire it (a grace period, 5 to
 * 20 ms on a 6.x kernel, at the close or at the exit), and that came on
 * top of every short program's run. Until the start, nothing names this
 * process in a segment, and if it is killed meanwhile no process of the
 * tree is left waiting on it. Memory profiling starts both at once: its
 * first sample is taken at the start. */
#define TREE_LOOK_MS 20

static void tree_watch(struct tree *t)
{
	uint64_t now = nl_monotonic_ns();
	t->watching = false;
	t->first_export = now + t->interval_ns;
	if (!t->on || t->sampling)
		return;
	t->watching = stat(nl_seg_dir(), &t->dir_seen) == 0;
	t->next_look = now + TREE_LOOK_MS * 1000000u;
}

static bool same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

/* Whether something was created in the directory since the watch began (or
 * it cannot be told: the directory is gone). */
static bool tree_watch_saw(const struct tree *t)
{
	struct stat now;
	const struct stat *was = &t->dir_seen;
	return stat(nl_seg_dir(), &now) != 0 || now.st_ino != was->st_ino || now.st_size != was->st_size ||
	       !same_time(now.st_mtim, was->st_mtim) || !same_time(now.st_ctim, was->st_ctim);
}

static void tree_unwatch(struct tree *t) { t->watching = false; }

/* After the program ended: the program's last values and its descendants'
 * as they stand; the keeper takes over those that live on. */
static void tree_finish(struct tree *t, bool started)
{
	if (!started) {
		bool saw = tree_watch_saw(t);
		tree_unwatch(t);
		if (!saw) {
			/* Nothing of the tree was ever created: no segment of it to
			 * export. What other processes left for this collector is
			 * looked for as at every interval (by name: no file of
			 * another collector or a live process is opened). */
			struct nl_adopter a = { .cfg = &t->cfg, .transport = delivery_transport, .arg = &t->d,
						.quick_ms = getenv("NEMOLENS_EXIT_TIMEOUT_MS") ? 0 : TREE_QUICK_MS };
			nl_adopt_run(&a, nl_monotonic_ns() + (uint64_t)t->cfg.exit_timeout_ms * 1000000u, false, NULL);
			nl_transport_free(t->d.transport);
			t->d.transport = NULL;
			return;
		}
	}
	tree_stop(t);
	uint64_t deadline = nl_monotonic_ns() + (uint64_t)t->cfg.exit_timeout_ms * 1000000u;
	/* A collector that does not answer costs the exit little: nothing is
	 * lost, the segments stay. NEMOLENS_EXIT_TIMEOUT_MS, when set, is the
	 * wait (as in the shim's exit flush). Nothing to send loads nothing. */
	uint32_t quick = getenv("NEMOLENS_EXIT_TIMEOUT_MS") ? 0 : TREE_QUICK_MS;
	bool live = tree_export(t, true, deadline, quick) > 0;
	nl_transport_free(t->d.transport);
	t->d.transport = NULL;
	if (t->keeper_fd >= 0) {
		if (!live)
			send(t->keeper_fd, "q", 1, MSG_NOSIGNAL);
		close(t->keeper_fd);   /* else the keeper takes over */
		t->keeper_fd = -1;
	}
}

static void usage(void)
{
	printf(
		"usage: %s [options] [--] program [args...]\n"
		"Runs program with " SHIM_FILE " preloaded: connection (and optionally memory)\n"
		"metrics of the program and its children are exported as OpenTelemetry metrics.\n"
		"\n"
		"options (each sets an environment variable for the program; --opt=value works too):\n"
		"  --endpoint URL        OTEL_EXPORTER_OTLP_ENDPOINT, the collector's base URL\n"
		"                        (/v1/metrics is appended); OTEL_EXPORTER_OTLP_METRICS_ENDPOINT\n"
		"                        is removed so that this one is used\n"
		"  --service-name NAME   OTEL_SERVICE_NAME\n"
		"  --destinations RULES  NEMOLENS_DESTINATIONS, e.g. 'policy=host:8000,judge=10.0.3.0/24'\n"
		"  --memory              NEMOLENS_MEMORY_PROFILING=true\n"
		"  --console             OTEL_METRICS_EXPORTER=console (OTLP JSON lines on stderr,\n"
		"                        or in NEMOLENS_CONSOLE_PATH)\n"
		"  --print-config        print the configuration as the shim will read it, and its\n"
		"                        warnings, then exit 0 without running anything\n"
		"  --summary[=FILE]      when the program has ended, print what its tree recorded as\n"
		"                        tables, one per instrument, on stderr or into FILE\n"
		"  -h, --help            this text\n"
		"  --version             the version\n"
		"Every other setting is an environment variable: see nemolens(7).\n"
		"\n"
		"The shim is NEMOLENS_PRELOAD_PATH if set, else " SHIM_FILE " next to this\n"
		"program, else in " NL_RUN_LIB_RELATIVE "/ relative to it. It is put first in the program's\n"
		"LD_PRELOAD (after sanitizer runtimes); the other entries are kept.\n"
		"\n"
		"Signals INT, TERM, HUP, QUIT, USR1, USR2 and WINCH sent to %s are passed\n"
		"to the program, except those the terminal sent to the whole foreground job,\n"
		"which the program has received already.\n"
		"\n"
		"exit status: the program's exit code, or 128 + the number of the signal that\n"
		"killed it; 126 program not executable, 127 program not found, 125 %s\n"
		"itself failed (shim not found, cannot fork), 2 usage error.\n",
		progname, progname, progname);
}

__attribute__((noreturn)) static void die_usage(const char *why)
{
	if (why)
		fprintf(stderr, "%s: %s\n", progname, why);
	fprintf(stderr, "usage: %s [options] [--] program [args...]\n(%s --help lists the options)\n",
		progname, progname);
	exit(EXIT_USAGE);
}

/* ---- running the program ------------------------------------------------ */

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };

/* Reaps every child that has ended (orphans too, when this is pid 1 or a
 * subreaper); true once the program's status is in *status. */
static bool reap(pid_t child, int *status)
{
	bool done = false;
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0)
		if (w == child) {
			*status = st;
			done = true;
		}
	if (w < 0 && errno == ECHILD && !done) {
		/* Cannot happen with SIGCHLD at its default; never hang on it. */
		fprintf(stderr, "%s: lost track of the program\n", progname);
		*status = EXIT_LAUNCHER << 8;
		done = true;
	}
	return done;
}

/* True when the terminal has delivered this signal to the program already:
 * the kernel sent it to the foreground group, which the program is still in. */
static bool program_has_it(const siginfo_t *si, pid_t child)
{
	return si->si_code == SI_KERNEL && getpgid(child) == getpgrp();
}

static int exec_failure_status(int err)
{
	return err == ENOENT || err == ENOTDIR ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}

/* Starts the program with the signal mask and the SIGCHLD disposition
 * nemolens-run was given (mask, chld). Returns its pid; or -1 with *err
 * the reason the program could not be executed, or with *err 0 and errno
 * set when no process could be made.
 *
 * posix_spawn first: glibc's shares this process's memory with the new one
 * until its exec (clone with CLONE_VM | CLONE_VFORK), so no page table is
 * copied and no page is faulted in for a process about to exec, which is
 * most of what fork costs a launcher. fork and execvp remain for the two
 * things posix_spawnp does not do as execvp does: an inherited SIG_IGN for
 * SIGCHLD, which the program must inherit while this process runs with
 * SIG_DFL (the two would share it until the exec), and a file without #!
 * (ENOEXEC), which execvp runs with /bin/sh. */
static pid_t start_program(char **argv, const sigset_t *mask, const struct sigaction *chld, int *err)
{
	extern char **environ;
	pid_t pid;
	*err = 0;
	if (chld->sa_handler != SIG_IGN) {
		posix_spawnattr_t attr;
		int r = posix_spawnattr_init(&attr);
		if (r == 0) {
			r = posix_spawnattr_setsigmask(&attr, mask);
			if (r == 0)
				r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
			if (r == 0)
				r = posix_spawnp(&pid, argv[0], NULL, &attr, argv, environ);
			posix_spawnattr_destroy(&attr);
		}
		if (r == 0)
			return pid;
		if (r != ENOEXEC && r != ENOMEM && r != EAGAIN && r != ENOSYS && r != EINVAL) {
			*err = r;
			return -1;
		}
	}
	pid = fork();
	if (pid != 0)
		return pid;
	/* The program gets what nemolens-run was given. */
	sigaction(SIGCHLD, chld, NULL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvp(argv[0], argv);
	int e = errno;
	fprintf(stderr, "%s: %s: %s\n", progname, argv[0], strerror(e));
	_exit(exec_failure_status(e));
}

static int run(char **argv)
{
	sigset_t waited, saved_mask;
	sigemptyset(&waited);
	for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
		sigaddset(&waited, forwarded[i]);
	sigaddset(&waited, SIGCHLD);

	/* An inherited SIG_IGN (or SA_NOCLDWAIT) for SIGCHLD would let the
	 * kernel reap the program and take its status with it. */
	struct sigaction dfl = { .sa_handler = SIG_DFL }, saved_chld;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGCHLD, &dfl, &saved_chld);
	/* Blocked before the fork, so none arriving from now on is missed. */
	sigprocmask(SIG_BLOCK, &waited, &saved_mask);
	static struct tree tree;
	tree_setup(&tree);
	tree_watch(&tree);

	int status = 0, err = 0;
	pid_t child = start_program(argv, &saved_mask, &saved_chld, &err);
	if (child < 0 && err == 0) {
		fprintf(stderr, "%s: fork: %s\n", progname, strerror(errno));
		return EXIT_LAUNCHER;
	}
	bool started = false;
	if (child < 0) {
		/* Nothing was started: what others left is still delivered. */
		fprintf(stderr, "%s: %s: %s\n", progname, argv[0], strerror(err));
		status = W_EXITCODE(exec_failure_status(err), 0);
		goto ended;
	}

	/* After the program started: neither it nor the keeper is a copy of a
	 * process with threads. */
	started = !tree.watching;
	if (started) {
		keeper_start(&tree, &saved_mask);
		tree_start(&tree);
	}
	for (;;) {
		siginfo_t si;
		int sig;
		if (started) {
			sig = sigwaitinfo(&waited, &si);
		} else {
			uint64_t now = nl_monotonic_ns();
			uint64_t due = tree.next_look < tree.first_export ? tree.next_look : tree.first_export;
			uint64_t left = due > now ? due - now : 0;
			struct timespec ts = { .tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u) };
			sig = sigtimedwait(&waited, &si, &ts);
		}
		if (!started && sig < 0 && errno == EAGAIN) {
			uint64_t now = nl_monotonic_ns();
			if (now < tree.first_export && !tree_watch_saw(&tree)) {
				tree.next_look = now + TREE_LOOK_MS * 1000000u;
				continue;
			}
			/* A file in the directory, or the first interval's end. */
			tree_unwatch(&tree);
			started = true;
			keeper_start(&tree, &saved_mask);
			tree_start(&tree);
			continue;
		}
		if (sig < 0) {
			if (errno == EINTR)
				continue;
			/* Not expected; fall back to waiting without forwarding. */
			while (waitpid(child, &status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		if (sig == SIGCHLD) {
			if (reap(child, &status))
				break;
			continue;
		}
		if (!program_has_it(&si, child))
			kill(child, sig);
	}

ended:
	if (tree.on) {
		tree_finish(&tree, started);
	} else {
		nl_deliver_leftovers();
	}
	if (summary_wanted())
		summary_print(tree.on ? NULL : tree_off_reason(&tree.cfg));
	nl_config_free(&tree.cfg);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_LAUNCHER;
}

/* ---- options ------------------------------------------------------------ */

enum { OPT_ENDPOINT = 256, OPT_SERVICE, OPT_DEST, OPT_MEMORY, OPT_CONSOLE, OPT_PRINT, OPT_VERSION, OPT_SUMMARY };

static void set_env(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		fprintf(stderr, "%s: setenv %s: %s\n", progname, name, strerror(errno));
		exit(EXIT_LAUNCHER);
	}
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "endpoint", required_argument, NULL, OPT_ENDPOINT },
		{ "service-name", required_argument, NULL, OPT_SERVICE },
		{ "destinations", required_argument, NULL, OPT_DEST },
		{ "memory", no_argument, NULL, OPT_MEMORY },
		{ "console", no_argument, NULL, OPT_CONSOLE },
		{ "print-config", no_argument, NULL, OPT_PRINT },
		{ "summary", optional_argument, NULL, OPT_SUMMARY },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	leave_the_shim(argv);

	bool print = false;
	int c;
	/* "+": options end at the program's name, whose own options follow. */
	while ((c = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
		switch (c) {
		case OPT_ENDPOINT:
			set_env("OTEL_EXPORTER_OTLP_ENDPOINT", optarg);
			/* It would win over the option otherwise. */
			unsetenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
			break;
		case OPT_SERVICE:
			set_env("OTEL_SERVICE_NAME", optarg);
			break;
		case OPT_DEST:
			set_env("NEMOLENS_DESTINATIONS", optarg);
			break;
		case OPT_MEMORY:
			set_env("NEMOLENS_MEMORY_PROFILING", "true");
			break;
		case OPT_CONSOLE:
			set_env("OTEL_METRICS_EXPORTER", "console");
			break;
		case OPT_PRINT:
			print = true;
			break;
		case OPT_SUMMARY:
			want_summary(optarg);
			break;
		case 'h':
			usage();
			return 0;
		case OPT_VERSION:
			printf("nemolens-run %s\n", NL_VERSION);
			return 0;
		default:                /* getopt has said what is wrong */
			die_usage(NULL);
		}
	}
	char **program = argv + optind;
	if (print)
		return print_config(*program);
	if (!*program)
		die_usage("no program given");

	char why[WHY_MAX];
	char *shim = find_shim(why, sizeof why);
	if (!shim) {
		fprintf(stderr, "%s: %s\n", progname, why);
		return EXIT_LAUNCHER;
	}
	char *list = preload_list(shim, getenv("LD_PRELOAD"));
	if (!list) {
		fprintf(stderr, "%s: out of memory\n", progname);
		return EXIT_LAUNCHER;
	}
	set_env("LD_PRELOAD", list);
	free(list);
	free(shim);
	return run(program);
}
