/* SPDX-License-Identifier: Apache-2.0 */
/* Lifecycle: configuration at load, a lazily started exporter thread, fork
 * handling, and a bounded flush at exit; and the delivery of what other
 * processes left (adopt.h), by the same thread.
 *
 * Nothing here runs on a hook's path except the first nl_runtime_kick() of
 * a process (state.h), which names the process's segment (segment.h) and
 * starts the exporter thread.
 *
 * Which processes deliver leftovers: every process whose thread runs, that
 * is every process that recorded something. Each delivers after every
 * export and in its exit flush, so a death is delivered within one export
 * interval while such a process lives. A fork does not start the thread: a
 * shell that records nothing forks without a page or a thread of the shim
 * to pay for (docs/export.md: who delivers a killed child's values then).
 */
#include "runtime.h"

#include <errno.h>
#include <linux/kcmp.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "callsite.h"
#include "config.h"
#include "connmetrics.h"
#include "dest.h"
#include "env.h"
#include "fork.h"
#include "forkpath.h"
#include "adopt.h"
#include "export.h"
#include "httpmetrics.h"
#include "genaimetrics.h"
#include "rpcmetrics.h"
#include "loadpath.h"
#include "log.h"
#include "memsampler.h"
#include "procmetrics.h"
#include "real.h"
#include "registry.h"
#include "resource.h"
#include "segment.h"
#include "startup.h"
#include "state.h"

/* ---- state --------------------------------------------------------------- */

/* What belongs to one process and not to its parent: a fork child starts
 * it afresh, in one step (forget_parent), when its parent's lifecycle had
 * begun at the fork, else at its own first record. Everything here starts
 * zero but pid.
 *
 * With the load path's state (loadpath.h): pid is written at load, and a
 * fork child that forgets its parent writes it all on the page where pid
 * is. */
struct process {
	/* The process this state is of: a fork child finds its parent's pid
	 * here until it forgets the parent's state. */
	pid_t pid;
	/* The exporter thread; its plain flags are read and written under
	 * `lock`. A child has no thread until its own first record. */
	pthread_t thread;
	bool thread_running;            /* the thread was started and has not ended */
	bool stopping;                  /* the exit flush stops the thread */
	bool thread_ready;              /* the thread has set itself up and waits */
	bool busy;                      /* the thread exports, samples or delivers */
	/* The exporter thread's transport, then the exit flush's once the
	 * thread stopped. A child never uses its parent's: the parent keeps
	 * using its connection. */
	struct nl_transport *transport;
	/* The exit flush's own when the thread would not stop in time: that
	 * thread may still be using `transport`, so the flush never touches it
	 * then. */
	struct nl_transport *exit_transport;
	uint64_t start_unix_ns;         /* start time of every cumulative series; 0 until the first record */
	bool resource_made;             /* `resource` is this process's (make_resource) */
};
NL_LOAD_STATE static struct process proc;
/* The process's flags that other threads read without the lock: beside
 * `proc`, and reset beside it, by atomic stores. */
NL_LOAD_STATE static _Atomic bool thread_ever;  /* this process ran the thread: it delivers leftovers at exit too */
static _Atomic bool abort_send;                 /* makes an in-flight export give up */
static _Atomic bool flushed_at_exit;            /* the exit flush ran, or is running */

/* Outside `proc`, because a fork child keeps them as they are:
 *
 * - what the load read and derived from the configuration (cfg,
 *   dest_configured, can_adopt, run_exporter, delivery_key, exit_quick),
 *   the same for the child, which runs the same image;
 * - `registered`, `kick_taken` and `held_for_fork`, which the fork
 *   handlers and the first record handle themselves (each says why where
 *   it is defined);
 * - `lock`, re-initialised by the child only when the prepare handler did
 *   not hold it, and `wake`, initialised by every first record;
 * - `resource`, remade over itself by the first record (resource_made):
 *   a child that never records writes none of its pages;
 * - collector_failed_ns, which is about the collector, not the process;
 * - the exit flush's settings (exit_wait_ms, exit_wait_from_ns,
 *   final_kept), which the exit flush makes for itself. */

NL_LOAD_STATE static struct nl_config cfg;
/* Destinations were configured by a load: another must clear them. With
 * none configured, their tables are left untouched (no page faults). */
NL_LOAD_STATE static bool dest_configured;
static struct nl_resource resource;
static const char user_agent[] = "nemolens-preload/" NL_VERSION;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;

NL_LOAD_STATE static bool can_adopt;    /* segments are on: leftovers can be delivered from here */
/* nemolens-run's pid (NL_ENV_RUN_EXPORTER), when it exports for its tree
 * and this configuration lets it: this process's segment then names it as
 * its exporter, and the process starts no thread and does no exit flush
 * while that process lives (docs/export.md). */
NL_LOAD_STATE static uint32_t run_exporter;
NL_LOAD_STATE static uint64_t delivery_key; /* of this configuration (nl_seg_delivery_key) */
/* CLOCK_MONOTONIC of the last failed send to the collector (0: none since
 * the last success). Leftovers wait while it fails: trying them would only
 * add the same failure, and its warning, to every process of the user. */
static _Atomic uint64_t collector_failed_ns;

/* A deadline ms from now, for pthread_cond_timedwait on `wake` (CLOCK_MONOTONIC). */
static struct timespec monotonic_in_ms(long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* ---- one export --------------------------------------------------------- */

/* The resource (host name, executable, a fresh instance id) is made by the
 * first record, not at load: a process that never records never reads it.
 * Made again by a fork child's first record. */
static void make_resource(void)
{
	if (!proc.resource_made) {
		nl_resource_build(&resource, &cfg);
		proc.resource_made = true;
	}
}

static void write_console(const char *line, size_t len)
{
	int fd = STDERR_FILENO;
	if (!cfg.console_path && !nl_log_stderr_ok())
		return;   /* fd 2 is no longer the program's stderr */
	if (cfg.console_path) {
		fd = open(cfg.console_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0) {
			nl_warn_once("console.open", "cannot open NEMOLENS_CONSOLE_PATH %s: %s", cfg.console_path,
				     strerror(errno));
			return;
		}
	}
	/* One write per line, so lines from concurrent processes do not interleave. */
	char *buf = malloc(len + 1);
	if (buf) {
		memcpy(buf, line, len);
		buf[len] = '\n';
		ssize_t w = write(fd, buf, len + 1);
		(void)w;
		free(buf);
	}
	if (fd != STDERR_FILENO)
		close(fd);
}

static void flush_at_exit(void);

/* TLS libraries register an atexit cleanup when they are first set up, by
 * the program or by libcurl, and libcurl must not run after it. Handlers run
 * in reverse order of registration, so the exit flush registers itself after
 * each point where such a library may have been set up: at the program's
 * first recorded connection (a program that uses TLS has set its library up
 * by then) and after the shim's own transport was created. Whichever runs
 * first flushes; the destructor is the fallback for everything else. */
static void register_exit_flush(void)
{
	atexit(flush_at_exit);
}

/* Set by the exit flush when its sends may give up early (EXIT_QUICK_MS):
 * applied to the transport when one is needed, so that an exit with nothing
 * to send never loads the export libraries just to set it. */
static _Atomic long exit_wait_ms;
static uint64_t exit_wait_from_ns;   /* the quick wait counts from the flush's start */

static struct nl_transport *ensure_transport(struct nl_transport **tp)
{
	if (!*tp) {
		struct nl_transport_config tc = nl_adopt_transport_config(&cfg, user_agent);
		/* The first transport loads and initialises libcurl and its TLS
		 * library; a fork meanwhile waits for that (export.h). */
		*tp = nl_transport_new(&tc);
		static _Atomic bool registered;
		if (!atomic_exchange(&registered, true))
			register_exit_flush();
	}
	long wait = atomic_load(&exit_wait_ms);
	if (*tp && wait) {
		/* Loading the export libraries above came out of the wait. */
		long spent = (long)((nl_monotonic_ns() - exit_wait_from_ns) / 1000000u);
		nl_transport_set_wait(*tp, spent + 1 < wait ? wait - spent : 1);
	}
	return *tp;
}

/* Takes a snapshot and sends it; returns false when data should be resent.
 * No new attempt starts after retry_until_ns: a later export carries fresher
 * cumulative values than a retry of this one would. */
/* The exit flush's send fails, the segment stays for another process
 * (nl_seg_keepable): set by export_quietly for export_once's messages. */
static bool final_kept;

static bool export_once(struct nl_transport **tp, uint64_t deadline_ns, uint64_t retry_until_ns, bool final)
{
	uint64_t now = nl_realtime_ns();
	struct nl_snapshot *snap = nl_snapshot_take(cfg.delta_counters, cfg.delta_histograms, proc.start_unix_ns, now);
	if (!snap)
		return false;
	/* This process's figures from /proc, sampled by its own thread before
	 * its exports (never by the exit flush, which runs in the program's
	 * thread: it sends the last sample). */
	if (cfg.process_metrics && nl_seg_base && !nl_seg_inherited() && snap->n_points > 0 &&
	    !nl_procmetrics_append(snap, &nl_seg_header()->proc, proc.start_unix_ns, now)) {
		nl_snapshot_free(snap);
		return false;
	}
	bool ok = true;
	if (snap->n_points > 0) {
		make_resource();   /* points come after a first record, which made it */
		snap->resource = resource.attrs;
		snap->n_resource = resource.n;
		snap->scope_name = "nemo.lens";
		snap->scope_version = NL_VERSION;
		if (cfg.exporter == NL_EXPORTER_CONSOLE) {
			char *line;
			size_t len;
			if (nl_json_encode(snap, &line, &len) == 0) {
				write_console(line, len);
				free(line);
			}
		} else if (cfg.exporter == NL_EXPORTER_OTLP) {
			uint8_t *body;
			size_t len;
			ensure_transport(tp);
			if (*tp)
				nl_transport_set_final(*tp, final, final_kept);
			/* From now on a collector may have seen this identity: the
			 * segment is never folded into another process's series. */
			nl_seg_mark_exported();
			if (*tp && nl_otlp_encode(snap, &body, &len) == 0) {
				enum nl_send_result r =
					nl_transport_send(*tp, body, len, deadline_ns, retry_until_ns, &abort_send);
				free(body);
				/* Cumulative data catches up by itself at the next export; only
				 * delta bases must wait for a success. */
				ok = r == NL_SEND_OK || r == NL_SEND_REJECTED;
				if (r != NL_SEND_ABORTED)
					atomic_store(&collector_failed_ns, ok ? 0 : nl_monotonic_ns());
			} else {
				ok = false;
			}
		}
		if (ok)
			nl_snapshot_commit(snap);
	}
	nl_snapshot_free(snap);
	return ok;
}

static uint64_t export_deadline(void)
{
	long ms = cfg.otlp_timeout_ms < cfg.export_timeout_ms ? cfg.otlp_timeout_ms : cfg.export_timeout_ms;
	return nl_monotonic_ns() + (uint64_t)ms * 1000000u;
}

/* ---- this process's segment, and the others' ---------------------------- */

/* Names this process's segment, with its identity: from the first record
 * on, whatever recorded survives the process's death. */
static void publish_segment(void)
{
	if (!can_adopt || nl_seg_published())
		return;
	struct nl_seg_identity id = {
		.resource = resource.attrs,
		.n_resource = resource.n,
		.instance_id = resource.instance_id,
		.start_unix_ns = proc.start_unix_ns,
		.flags = (cfg.delta_counters ? NL_SEG_DELTA_COUNTERS : 0) |
			 (cfg.delta_histograms ? NL_SEG_DELTA_HISTOGRAMS : 0) | nl_memsampler_roles() |
			 (cfg.process_metrics ? NL_SEG_PROC_METRICS : 0),
		.interval_ms = (uint32_t)cfg.export_interval_ms,
		.delivery_key = delivery_key,
		.exporter = run_exporter && kill((pid_t)run_exporter, 0) == 0 ? run_exporter : 0,
	};
	int saved = nl_hooks_bypass;
	nl_hooks_bypass = 1;   /* the shim's own files */
	nl_seg_publish(&id);
	nl_hooks_bypass = saved;
}

static struct nl_transport *adopter_transport(void *arg) { return ensure_transport(arg); }

static void start_on_first_record(void);

/* Folded values become this process's own: its segment must exist, so
 * that they survive this process too. */
static bool fold_ready(void *arg)
{
	(void)arg;
	start_on_first_record();
	return nl_seg_published();
}

static void adopt_leftovers(struct nl_transport **tp, uint64_t deadline, bool thorough)
{
	uint64_t failed = atomic_load(&collector_failed_ns);
	if (!can_adopt || (failed && nl_monotonic_ns() - failed < 60ull * 1000000000u))
		return;
	struct nl_adopter a = {
		.cfg = &cfg,
		.transport = adopter_transport,
		.fold_ready = fold_ready,
		.arg = tp,
		.abort = &abort_send,
	};
	bool send_failed;
	nl_adopt_run(&a, deadline, thorough, &send_failed);
	if (send_failed && !atomic_load(&abort_send))
		atomic_store(&collector_failed_ns, nl_monotonic_ns());
}

/* The parent delivers leftovers for this tree: it published a segment
 * (it recorded, or forked), so its thread runs, for the same collector.
 * Then this process leaves the work to it, instead of every process of a
 * pool scanning the directory and racing its siblings for the same files.
 * Once the parent is gone (getppid() is then the reaper), this process
 * delivers for itself. */
static bool parent_adopts(void) { return nl_seg_pid_published((int)getppid(), delivery_key); }

/* NEMOLENS_ADOPT=fold: a process that never exported leaves its values to
 * its parent, which folds them into its own series, instead of exporting
 * them under an identity of its own. */
static bool leave_to_parent(void)
{
	return cfg.adopt == NL_ADOPT_FOLD && nl_seg_published() && !nl_seg_exported() && parent_adopts();
}

/* ---- the background thread --------------------------------------------- */

static void *exporter_main(void *arg)
{
	(void)arg;
	nl_hooks_bypass = 1;
	/* The target's signals are the target's: this thread takes none of them. */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);

	uint64_t interval_ns = (uint64_t)cfg.export_interval_ms * 1000000u;
	uint64_t sample_ns = (uint64_t)cfg.memory_interval_ms * 1000000u;
	bool sampling = nl_memsampler_active();
	uint64_t next_export = nl_monotonic_ns() + interval_ns;
	uint64_t next_sample = nl_monotonic_ns();
	/* Leftovers after every export, the first time with the first one: not
	 * at the thread's start, which is when programs tend to fork (right
	 * after their first connection), and a fork while this thread holds a
	 * library's lock (libcurl's initialisation, a sanitizer's allocator)
	 * leaves the child that lock held forever. A thorough look (segments
	 * named after live pids: exec'd into a program without the shim,
	 * zombies) every 30 s. */
	uint64_t next_adopt = next_export, next_thorough = 0;

	pthread_mutex_lock(&lock);
	proc.thread_ready = true;
	pthread_cond_broadcast(&wake);
	while (!proc.stopping) {
		uint64_t due = sampling && next_sample < next_export ? next_sample : next_export;
		if (can_adopt && next_adopt < due)
			due = next_adopt;
		struct timespec ts = { .tv_sec = (time_t)(due / 1000000000u), .tv_nsec = (long)(due % 1000000000u) };
		int rc = 0;
		while (!proc.stopping && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&wake, &lock, &ts);
		if (proc.stopping)
			break;
		proc.busy = true;
		pthread_mutex_unlock(&lock);
		uint64_t now = nl_monotonic_ns();
		if (sampling && now >= next_sample) {
			nl_memsampler_sample();
			/* Fixed steps, but never a burst to catch up after a stall. */
			next_sample += sample_ns;
			if (next_sample <= now)
				next_sample = now + sample_ns;
		}
		if (now >= next_export) {
			/* A process that only delivers for others (it forked, but
			 * recorded nothing) has nothing of its own to take. */
			if (atomic_load(&nl_runtime_kicked)) {
				if (cfg.process_metrics)
					nl_procmetrics_sample_self();
				export_once(&proc.transport, export_deadline(), now + interval_ns, false);
			}
			next_export = nl_monotonic_ns() + interval_ns;
		}
		if (can_adopt && now >= next_adopt) {
			bool thorough = now >= next_thorough;
			if (!parent_adopts()) {
				adopt_leftovers(&proc.transport, export_deadline(), thorough);
				if (thorough)
					next_thorough = now + 30ull * 1000000000u;
			}
			next_adopt = next_export;
		}
		nl_seg_heartbeat();
		pthread_mutex_lock(&lock);
		proc.busy = false;
		pthread_cond_broadcast(&wake);
	}
	proc.thread_running = false;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* A vfork child (or a clone child with CLONE_VM) runs in its parent's
 * memory until it execs or exits. A thread it made would belong to it and
 * die with it, wherever it stood: holding `lock`, it would leave the parent
 * waiting for that lock for ever. kcmp says whether the two share their
 * memory; where it is not available, no vfork child is assumed. */
static bool in_parents_memory(void)
{
	long r = syscall(SYS_kcmp, (long)getpid(), (long)getppid(), (long)KCMP_VM, 0L, 0L);
	return r == 0;
}

static void start_thread(void)
{
	/* A clone child (fork.h) may not allocate: pthread_create does. Its
	 * segment is delivered by another process of the shim. */
	if (nl_fork_in_clone_child())
		return;
	if (in_parents_memory())
		return;   /* the parent's exit flush, registered in its memory, sends */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&lock);
	if (!proc.thread_running && !proc.stopping) {
		/* Created with every signal blocked, so none is delivered to it before it
		 * has blocked them itself. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		int saved = nl_hooks_bypass;
		nl_hooks_bypass = 1;   /* the thread's own setup must not count */
		proc.thread_ready = false;
		if (pthread_create(&proc.thread, &attr, exporter_main, NULL) == 0) {
			proc.thread_running = true;
			atomic_store(&thread_ever, true);
		}
		else
			nl_warn_once("thread", "cannot start the exporter thread; metrics are exported at exit only");
		nl_hooks_bypass = saved;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&lock);
	pthread_attr_destroy(&attr);
}

/* The first kick of a process (again after fork): its segment, then the
 * exporter thread and the exit flush. Every path that records kicks before
 * it writes anything (state.h), and nl_runtime_kicked becomes true only
 * once the segment is made: until then the arena is private memory that
 * publish_segment copies into the file, so no thread may write into it
 * meanwhile. Threads that kick meanwhile wait (a few hundred microseconds,
 * once per process). Signals are held while this thread makes it: a handler
 * that recorded would wait for itself.
 *
 * Not in `proc`: forget_parent also runs under a kick its caller has taken
 * (a child's first record), which must stay taken; the child's fork
 * handler clears it itself. */
static _Atomic bool kick_taken;

static void forget_parent(bool recorded);

/* Instruments made by the first record: the hooks' own (a fork child has
 * its parent's, when the parent made them: outside `proc`), in the arena
 * the registry makes for them. */
NL_LOAD_STATE static bool registered;

/* What a process that never records never needs, made by its first record
 * instead of at load (every exec pays for what load does: a page fault
 * costs more than the instructions around it): the instruments, the
 * start time of the cumulative series, the exporter thread's condition. */
static void prepare_recording(void)
{
	if (!registered) {
		NL_HOOK_ASIDE;
		int saved = nl_hooks_bypass;
		nl_hooks_bypass = 1;   /* the shim's own memory */
		nl_connmetrics_init();
		nl_httpmetrics_register();
		nl_genaimetrics_register();
		nl_rpcmetrics_register();
		nl_callsite_register();
		nl_hooks_bypass = saved;
		registered = true;
	}
	if (!proc.start_unix_ns)
		proc.start_unix_ns = nl_realtime_ns();
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
}

static void register_fork_handlers(void);

static void start_on_first_record(void)
{
	if (atomic_load(&nl_runtime_kicked))
		return;
	NL_KEEP_ERRNO;
	/* Held before the kick is taken: a signal between the two would run a
	 * handler that waits for a kick its own thread can no longer finish. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	/* Before the kick is taken: from then on a fork child has state of
	 * its parent's to forget. */
	register_fork_handlers();
	bool expected = false;
	if (!atomic_compare_exchange_strong(&kick_taken, &expected, true)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		while (!atomic_load(&nl_runtime_kicked))
			sched_yield();
		return;
	}
	/* A fork child of a parent that had recorded nothing: until now it
	 * kept the parent's state, as it stood at load. */
	if (proc.pid != getpid())
		forget_parent(false);
	prepare_recording();
	make_resource();
	if (cfg.exporter != NL_EXPORTER_NONE || cfg.prometheus_tree)
		publish_segment();
	atomic_store(&nl_runtime_kicked, true);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (cfg.exporter == NL_EXPORTER_NONE)
		return;
	/* nemolens-run exports this segment: nothing more runs here. */
	if (nl_seg_exporter())
		return;
	register_exit_flush();
	start_thread();
}

/* The exporter named in the segment is gone (nemolens-run was killed, or
 * this process outlived its tree's keeper): from now on this process
 * exports for itself. Whatever the exporter read last went out already;
 * values are cumulative, so what it did not read goes with the next export. */
static void take_over_export(void)
{
	/* Served to Prometheus alone: without its launcher nobody serves it. */
	if (cfg.exporter == NL_EXPORTER_NONE)
		return;
	if (!nl_seg_exporter() || !nl_seg_take_export())
		return;
	register_exit_flush();
	start_thread();
}

/* ---- exit ---------------------------------------------------------------- */

/* How long the exit flush waits for a collector's answer when the segment
 * can stay for another process to deliver: nothing is lost by giving up
 * then, so a collector that does not answer costs the exit no more than
 * this (after the export libraries were loaded, a CPU cost of their own).
 * Otherwise the flush is the values' last chance, and gets all of
 * NEMOLENS_EXIT_TIMEOUT_MS; so does every flush when that variable is set
 * (exit_quick false). An answering collector on the same network takes a
 * few milliseconds. */
#define EXIT_QUICK_MS 60
NL_LOAD_STATE static bool exit_quick;

/* The exit flush runs on the program's own thread, with the program's signal
 * mask: a write to a collector connection the peer has closed must not raise
 * a SIGPIPE there. It is blocked for the export, and one that the export
 * raised is taken off again before the mask is restored. */
static void export_quietly(struct nl_transport **tp, uint64_t deadline)
{
	if (exit_quick && cfg.exporter == NL_EXPORTER_OTLP && nl_seg_keepable()) {
		exit_wait_from_ns = nl_monotonic_ns();
		atomic_store(&exit_wait_ms, EXIT_QUICK_MS);
		if (*tp)
			nl_transport_set_wait(*tp, EXIT_QUICK_MS);
	}
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE);
	/* A process that delivers leftovers does so at exit too, within the
	 * same deadline: folded ones first, since they become part of this
	 * process's own last export; others after it. */
	/* An image that found its predecessor's segment (before an exec)
	 * delivers it here at the latest; its thread, when it records, and any
	 * other process that delivers leftovers, do sooner. It starts no thread
	 * of its own for it: a program that records nothing sees no thread, no
	 * descriptor and no connection of the shim while it runs. */
	bool adopter = can_adopt && (atomic_load(&thread_ever) || nl_seg_predecessor_found()) && !parent_adopts();
	bool fold = cfg.adopt == NL_ADOPT_FOLD;
	if (adopter && fold)
		adopt_leftovers(tp, deadline, false);
	/* A fork child that never recorded still reads its parent's values:
	 * nothing of its own to export. */
	if (!leave_to_parent() && !nl_seg_inherited()) {
		/* The last chance: what fails stays in the segment for another
		 * process to deliver, when it can; else it is lost. */
		final_kept = nl_seg_keepable();
		if (export_once(tp, deadline, 0, true) || !final_kept)
			nl_seg_remove();
	}
	if (adopter && !fold)
		adopt_leftovers(tp, deadline, false);
	if (!was_pending) {
		struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}


static void flush_at_exit(void)
{
	/* Nothing recorded, no thread ran, no predecessor's segment found:
	 * nothing to send and nothing to deliver. Looked at before anything
	 * is written: a fork child that records nothing writes no page, not
	 * even at its exit. */
	if (!atomic_load(&nl_recording) ||
	    (!atomic_load(&nl_runtime_kicked) && !atomic_load(&thread_ever) && !nl_seg_predecessor_found()))
		return;
	/* A clone child (fork.h) may not allocate, which exporting does: its
	 * segment stays for another process of the shim, as a killed one's. */
	if (nl_fork_in_clone_child())
		return;
	bool expected = false;
	if (!atomic_compare_exchange_strong(&flushed_at_exit, &expected, true))
		return;
	/* The exporter delivers the segment, as it stands, within an interval;
	 * and a predecessor's (exec) that this image found, when it recorded
	 * nothing itself. */
	if (nl_seg_exporter() ? !nl_seg_take_export() : run_exporter && kill((pid_t)run_exporter, 0) == 0)
		return;
	/* Served to Prometheus alone and its launcher gone: the segment stays,
	 * as a killed process's would. */
	if (cfg.exporter == NL_EXPORTER_NONE)
		return;
	NL_KEEP_ERRNO;
	nl_hooks_bypass = 1;
	uint64_t deadline = nl_monotonic_ns() + (uint64_t)cfg.exit_timeout_ms * 1000000u;
	/* How long the thread may take to stop: it stops within a poll slice
	 * (10 ms) when it is healthy; a sanitizer build is slower. */
	long ms = exit_quick && cfg.exit_timeout_ms > EXIT_QUICK_MS ? EXIT_QUICK_MS : 200;

	/* Stop the thread: an export it has in flight gives up at once. */
	pthread_mutex_lock(&lock);
	proc.stopping = true;
	bool joinable = proc.thread_running;
	if (proc.thread_running) {
		atomic_store(&abort_send, true);
		pthread_cond_broadcast(&wake);
		struct timespec ts = monotonic_in_ms(ms < 200 ? ms : 200);
		while (proc.thread_running && pthread_cond_timedwait(&wake, &lock, &ts) != ETIMEDOUT)
			;
		joinable = !proc.thread_running;
	} else {
		joinable = true;
	}
	pthread_mutex_unlock(&lock);
	atomic_store(&abort_send, false);

	nl_memsampler_shutdown();
	/* One attempt: retrying a collector that is down would only delay the
	 * exit. A thread that would not stop still owns its transport. */
	if (cfg.exporter != NL_EXPORTER_NONE)
		export_quietly(joinable ? &proc.transport : &proc.exit_transport, deadline);
}

/* ---- fork --------------------------------------------------------------- */

/* ASan's allocator (as of GCC 12) takes no care of fork: a child forked
 * while another thread is inside malloc inherits its lock held. The shim's
 * thread allocates through all of its work, so in such a build a fork waits
 * for that work, bounded; elsewhere it never does (the libraries' own locks
 * are the transport's to wait for, export.h). */
#if defined(__SANITIZE_ADDRESS__)
#define FORK_WAITS_FOR_WORK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORK_WAITS_FOR_WORK 1
#endif
#endif

/* Anything of the lifecycle ran or began in this process: it recorded (or
 * began its first record), ran the thread, or found a predecessor's
 * segment, which its exit flush delivers. Only then can a thread of the
 * shim hold `lock`, and has a fork child state of its parent's to forget at
 * once. Otherwise the fork handlers write no page of the shim, in the
 * parent or in the child: each page written after a fork is a copy, and a
 * fault, in each of them. */
static bool lifecycle_began(void)
{
	return atomic_load(&kick_taken) || atomic_load(&thread_ever) || nl_seg_predecessor_found();
}

static bool held_for_fork;   /* atfork_prepare took `lock` (the fork handlers' own, not in `proc`) */

static void atfork_prepare(void)
{
	nl_real_init();   /* the child inherits them resolved (real.h) */
	if (lifecycle_began()) {
		pthread_mutex_lock(&lock);
		held_for_fork = true;
		/* A thread created a moment ago still setting itself up (its
		 * stack, a sanitizer's allocator): a fork must not cut that in
		 * two, since the child would inherit locks held there for ever.
		 * It takes microseconds and never depends on the collector; the
		 * wait is bounded anyway. */
		if (proc.thread_running && !proc.thread_ready) {
			struct timespec ts = monotonic_in_ms(2000);
			while (proc.thread_running && !proc.thread_ready &&
			       pthread_cond_timedwait(&wake, &lock, &ts) != ETIMEDOUT)
				;
		}
#ifdef FORK_WAITS_FOR_WORK
		if (proc.busy) {
			struct timespec ts = monotonic_in_ms(100);
			while (proc.busy && pthread_cond_timedwait(&wake, &lock, &ts) != ETIMEDOUT)
				;
		}
#endif
	}
	/* Calls into libcurl, the TLS library and zlib: a few hundred
	 * microseconds at most; an export waiting on the collector holds none.
	 * Nothing while the export module was never opened. */
	nl_transport_fork_prepare();
}

static void atfork_parent(void)
{
	nl_transport_fork_parent();
	if (held_for_fork) {
		held_for_fork = false;
		pthread_mutex_unlock(&lock);
	}
	/* A process that records has its thread, which delivers what its
	 * children leave (parent_adopts() tells them so); one that exported
	 * for nemolens-run takes over when that is gone. One that records
	 * nothing starts nothing for a fork: under nemolens-run the launcher
	 * delivers every segment of its tree; under plain LD_PRELOAD another
	 * process of the shim does (docs/export.md). */
	if (can_adopt && atomic_load(&nl_runtime_kicked))
		take_over_export();
}

/* The child starts as a new process: its own counters, start time and
 * instance id, no exporter thread (started again on first use), and not the
 * parent's transport, whose connection the parent keeps using. The registry
 * moves to a segment of the child's own first (its files are the shim's:
 * hooks bypassed). Single-threaded: in the child's fork handler when the
 * parent's lifecycle had begun (recorded tells whether values may have
 * been written), else at the child's first record. */
static void forget_parent(bool recorded)
{
	int bypass = nl_hooks_bypass;
	nl_hooks_bypass = 1;
	if (recorded)
		nl_registry_forget_parent();
	else
		nl_seg_atfork_child();   /* no value was ever written: nothing to zero */
	nl_hooks_bypass = bypass;
	atomic_store(&nl_runtime_kicked, false);
	nl_memsampler_atfork_child();
	nl_startup_atfork_child();
	proc = (struct process){ .pid = getpid() };
	atomic_store(&thread_ever, false);
	atomic_store(&abort_send, false);
	atomic_store(&flushed_at_exit, false);
}

NL_FORK_PATH static void atfork_child(void)
{
	nl_transport_fork_child();
	bool held = held_for_fork;
	if (held) {
		/* Released as in the parent (an init would be a call the parent
		 * never made, whose lazy binding every fork child would pay for). */
		held_for_fork = false;
		pthread_mutex_unlock(&lock);
	}
	if (!lifecycle_began())
		return;   /* nothing of the parent's to forget before a first record */
	/* The lifecycle began after the prepare handler looked: `lock` may be
	 * held by a thread this child does not have. */
	if (!held)
		pthread_mutex_init(&lock, NULL);
	/* The parent's flags are read by this child's hooks and exit flush
	 * before any first record: forgotten now. */
	forget_parent(true);
	atomic_store(&kick_taken, false);
}

static const struct nl_fork_handlers fork_handlers = { atfork_prepare, atfork_parent, atfork_child };

/* Registered when the lifecycle begins, not at load: a process that never
 * records has nothing of the shim's for a fork to take care of (fork.h). */
static void register_fork_handlers(void) { nl_fork_register(NL_FORK_RUNTIME, &fork_handlers); }

/* ---- load and unload ---------------------------------------------------- */

/* Tells descendants that a shim ancestor runs (config.h, NL_ENV_OUTERMOST):
 * they are not the outermost process and keep quiet by default. Called from
 * the constructor, before main and before any thread of the shim, where
 * changing the environment is as safe as it gets; after the memory sampler,
 * which reads the inherited value and may replace it. */
NL_LOAD_PATH static void mark_tree(void)
{
	const char *outer = nl_env_get(NL_ENV_OUTERMOST);
	if (outer && *outer)
		return;
	/* Digits by hand: the only formatting a process that never records
	 * would do at load, and it would fault in printf's pages for them. */
	char pid[24], *p = pid + sizeof pid;
	*--p = 0;
	for (unsigned v = (unsigned)getpid(); p == pid + sizeof pid - 1 || v; v /= 10)
		*--p = (char)('0' + v % 10);
	setenv(NL_ENV_OUTERMOST, p, 1);
	/* The run id this process made for its tree (config.h). */
	if (cfg.run_id_made)
		setenv(NL_ENV_RUN_ID, cfg.run_id, 1);
}

NL_LOAD_PATH bool nl_runtime_load(void)
{
	nl_log_init();
	struct nl_env_window env;
	nl_env_open(&env);
	nl_config_load(&cfg, nl_env_get, program_invocation_short_name);
	if (!cfg.enabled || !cfg.metrics_enabled) {
		nl_env_close();
		return false;
	}
	exit_quick = !nl_env_get("NEMOLENS_EXIT_TIMEOUT_MS");
	const char *runner = nl_env_get(NL_ENV_RUN_EXPORTER);
	nl_startup_load(&cfg);
	nl_env_close();   /* before anything sets a variable (the memory sampler) */
	proc.pid = getpid();

	nl_registry_set_cardinality_limit(cfg.cardinality_limit);
	long runner_pid = 0;
	if (runner && nl_parse_pid(runner, &runner_pid) != 0)
		runner_pid = 0;
	/* Prometheus is served by nemolens-run alone, from the segments: a
	 * process under it records into its segment, as for the tree's OTLP
	 * export; one that is not has nobody to serve it. */
	if (cfg.prometheus && runner_pid && cfg.exporter != NL_EXPORTER_CONSOLE)
		cfg.prometheus_tree = (unsigned)runner_pid;
	else if (cfg.prometheus && cfg.exporter == NL_EXPORTER_CONSOLE)
		nl_warn_once("prometheus.console", "OTEL_METRICS_EXPORTER: console and prometheus do not go "
						   "together; this process writes to the console only");
	else if (cfg.prometheus)
		nl_warn_once("prometheus.launcher",
			     "OTEL_METRICS_EXPORTER=prometheus is served by nemolens-run only; %s",
			     cfg.exporter == NL_EXPORTER_OTLP ? "this process exports over OTLP alone"
							       : "nothing of this process is exported");
	/* Before anything is created in the registry: its arena becomes the
	 * segment file. Leftovers can only be delivered over OTLP, or to the
	 * launcher that serves Prometheus. */
	if ((cfg.exporter == NL_EXPORTER_OTLP || cfg.prometheus_tree) && cfg.adopt != NL_ADOPT_OFF) {
		delivery_key = nl_seg_delivery_key(&cfg);
		can_adopt = nl_seg_open(&cfg) == 0;
	}
	if (cfg.destinations || dest_configured)
		nl_dest_configure(cfg.destinations);
	dest_configured = cfg.destinations != NULL;
	registered = false;
	nl_httpmetrics_init(&cfg);
	nl_genaimetrics_init(&cfg);
	nl_callsite_init(&cfg);
	nl_memsampler_init(&cfg);
	/* nemolens-run reads segments as they are (cumulative values) and
	 * samples memory for them (memtrees.h), to its own collector. */
	if (runner_pid && can_adopt && cfg.adopt == NL_ADOPT_OWN && !cfg.delta_counters && !cfg.delta_histograms)
		run_exporter = (uint32_t)runner_pid;
	mark_tree();
	/* A predecessor's segment, which this image's exit delivers: a fork
	 * child must not deliver it too. Most often there is none. */
	if (nl_seg_predecessor_found())
		register_fork_handlers();
	nl_runtime_set_starter(start_on_first_record);
	atomic_store(&nl_recording, true);
	return true;
}

NL_LOAD_PATH bool nl_runtime_crash_report(void) { return cfg.crash_report; }

NL_LOAD_PATH void nl_runtime_start(void)
{
	/* Memory profiling is an explicit opt-in and has to run without any
	 * connection to kick it: start the thread now. */
	if (nl_memsampler_active())
		nl_runtime_kick();
}

/* The destructor, in every process: a look that writes nothing first. */
NL_FORK_PATH void nl_runtime_unload(void)
{
	if (atomic_load(&nl_recording) &&
	    (atomic_load(&nl_runtime_kicked) || atomic_load(&thread_ever) || nl_seg_predecessor_found()))
		flush_at_exit();
}
