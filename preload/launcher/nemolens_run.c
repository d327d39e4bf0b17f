/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run: starts a program with libnemolens_preload.so preloaded.
 *
 *   nemolens-run [options] [--] program [args...]
 *
 * The options only set the environment variables the shim reads
 * (docs/configuration.md). The shim records inside the program and its descendants;
 * this program exports for all of them (the tree's export, tree.c), unless
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
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "launcher.h"
#include "preload_env.h"
#include "printconfig.h"
#include "scrape.h"
#include "summary_collect.h"
#include "tree.h"

#define EXIT_USAGE 2
#define EXIT_CANNOT_EXEC 126
#define EXIT_NOT_FOUND 127

const char *const progname = "nemolens-run";

static void usage(void)
{
	printf(
		"usage: %s [options] [--] program [args...]\n"
		"Runs program with " SHIM_FILE " preloaded: connection (and optionally memory)\n"
		"metrics of the program and its children are exported as OpenTelemetry metrics.\n"
		"\n"
		"options (each sets an environment variable for the program; --opt=value works too):\n"
		"  --endpoint URL        OTEL_EXPORTER_OTLP_ENDPOINT, the collector's base URL\n"
		"                        (/v1/metrics is appended; with grpc, scheme://host:port);\n"
		"                        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is removed so that this\n"
		"                        one is used\n"
		"  --protocol P          OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (default) or grpc\n"
		"                        (port 4317 by default); the METRICS_ variant is removed\n"
		"  --service-name NAME   OTEL_SERVICE_NAME\n"
		"  --destinations RULES  NEMOLENS_DESTINATIONS, e.g. 'policy=host:8000,judge=10.0.3.0/24'\n"
		"  --memory              NEMOLENS_MEMORY_PROFILING=true\n"
		"  --console             OTEL_METRICS_EXPORTER=console (OTLP JSON lines on stderr,\n"
		"                        or in NEMOLENS_CONSOLE_PATH)\n"
		"  --prometheus[=HOST:PORT]\n"
		"                        serve the tree's metrics to Prometheus at\n"
		"                        http://HOST:PORT/metrics (default localhost:9464):\n"
		"                        adds prometheus to OTEL_METRICS_EXPORTER (alone unless it or\n"
		"                        --endpoint names otlp) and sets OTEL_EXPORTER_PROMETHEUS_HOST\n"
		"                        and _PORT; [v6]:PORT, HOST and :PORT work too\n"
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
 * subreaper); true once the program's status is in *status. Each is looked
 * at first while it is still a zombie: its final CPU time is in /proc until
 * it is reaped, and never again after (tree_ended). */
static bool reap(struct tree *t, pid_t child, int *status)
{
	bool done = false;
	int st;
	pid_t w;
	for (;;) {
		siginfo_t si;
		si.si_pid = 0;
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
			if (errno == EINTR)
				continue;
			w = -1;
			break;
		}
		if (si.si_pid == 0) {
			w = 0;
			break;
		}
		tree_ended(t, si.si_pid);
		while ((w = waitpid(si.si_pid, &st, 0)) < 0 && errno == EINTR)
			;
		if (w < 0)
			break;
		if (w == child) {
			*status = st;
			done = true;
		}
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

/* The Prometheus endpoint, once the keeper was forked (it must not hold
 * the port) and the tree's export runs. A port that cannot be bound costs
 * the endpoint, never the program's run. */
static void serve(const struct tree *t)
{
	if (!t->serving)
		return;
	char why[256];
	const char *host = t->cfg.prometheus_host ? t->cfg.prometheus_host : NL_PROMETHEUS_HOST;
	if (scrape_start(host, t->cfg.prometheus_port, why, sizeof why) != 0)
		fprintf(stderr, "%s: no Prometheus endpoint: %s\n", progname, why);
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
		serve(&tree);
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
			serve(&tree);
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
			if (reap(&tree, child, &status))
				break;
			continue;
		}
		if (!program_has_it(&si, child))
			kill(child, sig);
	}

ended:
	if (tree.on) {
		tree_finish(&tree, started);
		scrape_stop();
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

enum {
	OPT_ENDPOINT = 256,
	OPT_PROTOCOL,
	OPT_SERVICE,
	OPT_DEST,
	OPT_MEMORY,
	OPT_CONSOLE,
	OPT_PRINT,
	OPT_VERSION,
	OPT_SUMMARY,
	OPT_PROMETHEUS
};

static void set_env(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		fprintf(stderr, "%s: setenv %s: %s\n", progname, name, strerror(errno));
		exit(EXIT_LAUNCHER);
	}
}

/* --prometheus[=HOST:PORT]: HOST:PORT, [v6]:PORT, HOST or :PORT. */
static void want_prometheus(const char *arg)
{
	if (!arg || !*arg)
		return;
	const char *colon = strrchr(arg, ':');
	if (*arg == '[') {
		const char *end = strchr(arg, ']');
		if (!end || (end[1] && end[1] != ':'))
			die_usage("--prometheus: expected [ADDRESS]:PORT");
		colon = end[1] ? end + 1 : NULL;
		char host[128];
		snprintf(host, sizeof host, "%.*s", (int)(end - arg - 1), arg + 1);
		set_env("OTEL_EXPORTER_PROMETHEUS_HOST", host);
	} else if (colon && strchr(arg, ':') != colon) {
		die_usage("--prometheus: an IPv6 address goes in brackets: [ADDRESS]:PORT");
	} else if (colon != arg) {
		char host[256];
		snprintf(host, sizeof host, "%.*s", (int)(colon ? colon - arg : (long)strlen(arg)), arg);
		set_env("OTEL_EXPORTER_PROMETHEUS_HOST", host);
	}
	if (colon) {
		long port;
		char *end;
		port = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || port < 1 || port > 65535)
			die_usage("--prometheus: the port is a number from 1 to 65535");
		set_env("OTEL_EXPORTER_PROMETHEUS_PORT", colon + 1);
	}
}

/* prometheus added to OTEL_METRICS_EXPORTER: beside what it names, or
 * beside otlp when --endpoint was given, else alone. */
static void add_prometheus(bool endpoint)
{
	const char *now = getenv("OTEL_METRICS_EXPORTER");
	if (now && strcasestr(now, "prometheus"))
		return;
	char list[256];
	if (now && *now)
		snprintf(list, sizeof list, "%s,prometheus", now);
	else
		snprintf(list, sizeof list, "%s", endpoint ? "otlp,prometheus" : "prometheus");
	set_env("OTEL_METRICS_EXPORTER", list);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "endpoint", required_argument, NULL, OPT_ENDPOINT },
		{ "protocol", required_argument, NULL, OPT_PROTOCOL },
		{ "service-name", required_argument, NULL, OPT_SERVICE },
		{ "destinations", required_argument, NULL, OPT_DEST },
		{ "memory", no_argument, NULL, OPT_MEMORY },
		{ "console", no_argument, NULL, OPT_CONSOLE },
		{ "print-config", no_argument, NULL, OPT_PRINT },
		{ "summary", optional_argument, NULL, OPT_SUMMARY },
		{ "prometheus", optional_argument, NULL, OPT_PROMETHEUS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	leave_the_shim(argv);

	bool print = false, prometheus = false, endpoint = false;
	int c;
	/* "+": options end at the program's name, whose own options follow. */
	while ((c = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
		switch (c) {
		case OPT_ENDPOINT:
			set_env("OTEL_EXPORTER_OTLP_ENDPOINT", optarg);
			endpoint = true;
			/* It would win over the option otherwise. */
			unsetenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
			break;
		case OPT_PROTOCOL:
			if (strcmp(optarg, "grpc") != 0 && strcmp(optarg, "http/protobuf") != 0)
				die_usage("--protocol is grpc or http/protobuf");
			set_env("OTEL_EXPORTER_OTLP_PROTOCOL", optarg);
			unsetenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL");
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
		case OPT_PROMETHEUS:
			prometheus = true;
			want_prometheus(optarg);
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
	if (prometheus)
		add_prometheus(endpoint);
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
