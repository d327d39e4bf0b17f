/* SPDX-License-Identifier: Apache-2.0 */
/* The export for the program's tree (tree.h): the thread that exports
 * while the program runs, the keeper process that takes over when
 * nemolens-run ends first, and the last export once the program ended.
 * Also what is delivered after the program when the processes export for
 * themselves: the leftovers of the dead.
 */
#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adopt.h"
#include "clock.h"
#include "config.h"
#include "env.h"
#include "launcher.h"
#include "log.h"
#include "memsampler.h"
#include "memtrees.h"
#include "proctree.h"
#include "segment.h"
#include "summary_collect.h"
#include "treestore.h"

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
void nl_deliver_leftovers(void)
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

/* How long the last export waits for a collector's answer: what it cannot
 * deliver stays in the segments, for the next process to deliver. */
#define TREE_QUICK_MS 60

void tree_setup(struct tree *t)
{
	load_quietly(&t->cfg);   /* the program says what is wrong with the variables */
	/* The tree's key when it is served to Prometheus alone (config.h). */
	if (t->cfg.prometheus)
		t->cfg.prometheus_tree = (unsigned)getpid();
	const struct nl_config *c = &t->cfg;
	t->on = c->enabled && c->metrics_enabled &&
		(c->exporter == NL_EXPORTER_OTLP || (c->exporter == NL_EXPORTER_NONE && c->prometheus)) &&
		c->adopt == NL_ADOPT_OWN && !c->delta_counters && !c->delta_histograms && nl_seg_configure(c) == 0;
	t->sending = t->on && c->exporter == NL_EXPORTER_OTLP;
	t->serving = t->on && c->prometheus;
	if (c->prometheus && !t->on && c->enabled && c->metrics_enabled)
		fprintf(stderr, "%s: no Prometheus endpoint: %s\n", progname, tree_off_reason(c));
	if (t->serving)
		treestore_init(nl_seg_delivery_key(c), (uint32_t)getpid(), (uint64_t)c->leftover_max_age_s * 1000000000u,
			       c->process_metrics);
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
const char *tree_off_reason(const struct nl_config *c)
{
	if (!c->enabled || !c->metrics_enabled)
		return "metrics are disabled";
	if (c->exporter == NL_EXPORTER_CONSOLE)
		return "with OTEL_METRICS_EXPORTER=console each process reports for itself";
	if (c->exporter != NL_EXPORTER_OTLP && !c->prometheus)
		return "with OTEL_METRICS_EXPORTER=none nothing is exported";
	if (c->adopt != NL_ADOPT_OWN)
		return "NEMOLENS_ADOPT makes each process export for itself";
	if (c->delta_counters || c->delta_histograms)
		return "with delta temporality each process exports for itself";
	return "the shim's private segment directory cannot be used";
}

/* Every segment the export reads: kept for --summary, and for the scrape. */
static void tree_seen(const uint8_t *data, size_t len, void *arg)
{
	const struct tree *t = arg;
	if (summary_wanted())
		summary_seen(data, len, NULL);
	if (t->serving)
		treestore_seen(data, len, NULL);
}

/* One export of the tree: the dead first (their last values), then the
 * live. Returns how many live segments were read. Served to Prometheus
 * alone, nothing is sent: the dead's last values go to the scrape's store
 * and their segments are removed. */
static size_t tree_export(struct tree *t, bool thorough, uint64_t deadline_ns, uint32_t quick_ms)
{
	struct nl_adopter a = { .cfg = &t->cfg, .transport = delivery_transport, .arg = &t->d, .abort = &t->abort,
				.quick_ms = quick_ms, .seen = summary_wanted() || t->serving ? tree_seen : NULL,
				.seen_arg = t, .no_send = !t->sending };
	if (t->sampling)
		nl_memsampler_ended();   /* before their last values go */
	/* The live processes' figures from /proc, zombies' final CPU time
	 * among them, before anything is read. */
	if (t->cfg.process_metrics)
		nl_proctree_sample(nl_seg_delivery_key(&t->cfg), t->exporters, t->n_exporters, 0);
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

void tree_start(struct tree *t)
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
	t->serving = false;   /* the scrape is the launcher's, and ends with it */
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

void keeper_start(struct tree *t, const sigset_t *mask)
{
	int sv[2];
	t->keeper_fd = -1;
	/* Served to Prometheus alone, the tree has nobody to send to once this
	 * process is gone. */
	if (!t->on || !t->sending || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
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
void tree_watch(struct tree *t)
{
	uint64_t now = nl_monotonic_ns();
	t->watching = false;
	t->first_export = now + t->interval_ns;
	/* Memory profiling and the scrape start both at once. */
	if (!t->on || t->sampling || t->serving)
		return;
	t->watching = stat(nl_seg_dir(), &t->dir_seen) == 0;
	t->next_look = now + TREE_LOOK_MS * 1000000u;
}

static bool same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

/* Whether something was created in the directory since the watch began (or
 * it cannot be told: the directory is gone). */
bool tree_watch_saw(const struct tree *t)
{
	struct stat now;
	const struct stat *was = &t->dir_seen;
	return stat(nl_seg_dir(), &now) != 0 || now.st_ino != was->st_ino || now.st_size != was->st_size ||
	       !same_time(now.st_mtim, was->st_mtim) || !same_time(now.st_ctim, was->st_ctim);
}

void tree_unwatch(struct tree *t) { t->watching = false; }

void tree_ended(struct tree *t, int pid)
{
	if (t->on && t->cfg.process_metrics)
		nl_proctree_sample(nl_seg_delivery_key(&t->cfg), t->exporters, t->n_exporters, pid);
}

/* After the program ended: the program's last values and its descendants'
 * as they stand; the keeper takes over those that live on. */
void tree_finish(struct tree *t, bool started)
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
