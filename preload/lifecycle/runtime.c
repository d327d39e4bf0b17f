/* Lifecycle: configuration at load, a lazily started exporter thread, fork
 * handling, and a bounded flush at exit.
 *
 * Nothing here runs on a hook's path except the first nl_runtime_kick() of
 * a process (state.h), which starts the exporter thread.
 */
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "config.h"
#include "connmetrics.h"
#include "dest.h"
#include "export.h"
#include "httpmetrics.h"
#include "log.h"
#include "memsampler.h"
#include "real.h"
#include "registry.h"
#include "resource.h"
#include "state.h"

static struct nl_config cfg;
static struct nl_resource resource;
static uint64_t start_unix_ns;          /* start time of every cumulative series */
static char user_agent[64];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static pthread_t thread;
static bool thread_running;             /* under lock */
static bool stopping;                   /* under lock */
static _Atomic bool abort_send;         /* makes an in-flight export give up */
static _Atomic bool flushed_at_exit;
static struct nl_transport *transport;  /* the exporter thread's, then the exit flush's once it stopped */
/* The exit flush's own when the thread would not stop in time: that thread
 * may still be using `transport`, so the flush never touches it then. */
static struct nl_transport *exit_transport;

/* ---- one export --------------------------------------------------------- */

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

/* Takes a snapshot and sends it; returns false when data should be resent.
 * No new attempt starts after retry_until_ns: a later export carries fresher
 * cumulative values than a retry of this one would. */
static bool export_once(struct nl_transport **tp, uint64_t deadline_ns, uint64_t retry_until_ns, bool final)
{
	struct nl_snapshot *snap = nl_snapshot_take(cfg.delta_counters, cfg.delta_histograms, start_unix_ns,
						    nl_realtime_ns());
	if (!snap)
		return false;
	bool ok = true;
	if (snap->n_points > 0) {
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
			if (!*tp) {
				struct nl_transport_config tc = {
					.url = cfg.endpoint,
					.headers = cfg.headers,
					.n_headers = cfg.n_headers,
					.gzip = cfg.gzip,
					.timeout_ms = cfg.otlp_timeout_ms,
					.ca_file = cfg.ca_file,
					.client_key = cfg.client_key,
					.client_cert = cfg.client_cert,
					.user_agent = user_agent,
				};
				*tp = nl_transport_new(&tc);
				static _Atomic bool registered;
				if (!atomic_exchange(&registered, true))
					register_exit_flush();
			}
			if (*tp)
				nl_transport_set_final(*tp, final);
			if (*tp && nl_otlp_encode(snap, &body, &len) == 0) {
				enum nl_send_result r =
					nl_transport_send(*tp, body, len, deadline_ns, retry_until_ns, &abort_send);
				free(body);
				/* Cumulative data catches up by itself at the next export; only
				 * delta bases must wait for a success. */
				ok = r == NL_SEND_OK || r == NL_SEND_REJECTED;
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

	pthread_mutex_lock(&lock);
	while (!stopping) {
		uint64_t due = sampling && next_sample < next_export ? next_sample : next_export;
		struct timespec ts = { .tv_sec = (time_t)(due / 1000000000u), .tv_nsec = (long)(due % 1000000000u) };
		int rc = 0;
		while (!stopping && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&wake, &lock, &ts);
		if (stopping)
			break;
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
			export_once(&transport, export_deadline(), now + interval_ns, false);
			next_export = nl_monotonic_ns() + interval_ns;
		}
		pthread_mutex_lock(&lock);
	}
	thread_running = false;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void start_thread(void)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&lock);
	if (!thread_running && !stopping) {
		/* Created with every signal blocked, so none is delivered to it before it
		 * has blocked them itself. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		int saved = nl_hooks_bypass;
		nl_hooks_bypass = 1;   /* the thread's own setup must not count */
		if (pthread_create(&thread, &attr, exporter_main, NULL) == 0)
			thread_running = true;
		else
			nl_warn_once("thread", "cannot start the exporter thread; metrics are exported at exit only");
		nl_hooks_bypass = saved;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&lock);
	pthread_attr_destroy(&attr);
}

/* The first kick of a process: the exporter thread, and the exit flush. */
static void start_on_first_record(void)
{
	bool expected = false;
	if (!atomic_compare_exchange_strong(&nl_runtime_kicked, &expected, true))
		return;
	if (cfg.exporter == NL_EXPORTER_NONE)
		return;
	NL_KEEP_ERRNO;
	register_exit_flush();
	start_thread();
}

/* ---- exit ---------------------------------------------------------------- */

/* The exit flush runs on the program's own thread, with the program's signal
 * mask: a write to a collector connection the peer has closed must not raise
 * a SIGPIPE there. It is blocked for the export, and one that the export
 * raised is taken off again before the mask is restored. */
static void export_quietly(struct nl_transport **tp, uint64_t deadline)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE);
	export_once(tp, deadline, 0, true);   /* the last chance: what fails is lost */
	if (!was_pending) {
		struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) == SIGPIPE)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void flush_at_exit(void)
{
	bool expected = false;
	if (!atomic_load(&nl_recording) || !atomic_compare_exchange_strong(&flushed_at_exit, &expected, true))
		return;
	NL_KEEP_ERRNO;
	nl_hooks_bypass = 1;
	uint64_t deadline = nl_monotonic_ns() + (uint64_t)cfg.exit_timeout_ms * 1000000u;

	/* Stop the thread: an export it has in flight gives up at once. */
	pthread_mutex_lock(&lock);
	stopping = true;
	bool joinable = thread_running;
	if (thread_running) {
		atomic_store(&abort_send, true);
		pthread_cond_broadcast(&wake);
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (thread_running && pthread_cond_timedwait(&wake, &lock, &ts) != ETIMEDOUT)
			;
		joinable = !thread_running;
	} else {
		joinable = true;
	}
	pthread_mutex_unlock(&lock);
	atomic_store(&abort_send, false);

	nl_memsampler_shutdown();
	/* One attempt: retrying a collector that is down would only delay the
	 * exit. A thread that would not stop still owns its transport. */
	if (cfg.exporter != NL_EXPORTER_NONE)
		export_quietly(joinable ? &transport : &exit_transport, deadline);
}

/* ---- fork --------------------------------------------------------------- */

static void atfork_prepare(void)
{
	pthread_mutex_lock(&lock);
	nl_registry_atfork_prepare();
}

static void atfork_parent(void)
{
	nl_registry_atfork_parent();
	pthread_mutex_unlock(&lock);
}

static void atfork_child(void)
{
	/* The child starts as a new process: its own counters, start time and
	 * instance id, no exporter thread (started again on first use), and not the
	 * parent's transport, whose connection the parent keeps using. */
	nl_registry_atfork_child();
	nl_log_atfork_child();   /* another process of the tree: quiet by default */
	pthread_mutex_init(&lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
	thread_running = false;
	stopping = false;
	atomic_store(&nl_runtime_kicked, false);
	atomic_store(&abort_send, false);
	atomic_store(&flushed_at_exit, false);
	transport = NULL;
	exit_transport = NULL;
	nl_memsampler_atfork_child();
	start_unix_ns = nl_realtime_ns();
	nl_resource_build(&resource, &cfg);
}

/* ---- load and unload ---------------------------------------------------- */

/* Tells descendants that a shim ancestor runs (config.h, NL_ENV_OUTERMOST):
 * they are not the outermost process and keep quiet by default. Called from
 * the constructor, before main and before any thread of the shim, where
 * changing the environment is as safe as it gets; after the memory sampler,
 * which reads the inherited value and may replace it. */
static void mark_tree(void)
{
	const char *outer = getenv(NL_ENV_OUTERMOST);
	if (outer && *outer)
		return;
	char pid[24];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	setenv(NL_ENV_OUTERMOST, pid, 1);
}

bool nl_runtime_load(void)
{
	nl_real_init();
	nl_log_init();
	nl_config_load(&cfg, (nl_getenv_fn)getenv, program_invocation_short_name);
	if (!cfg.enabled || !cfg.metrics_enabled)
		return false;
	start_unix_ns = nl_realtime_ns();
	snprintf(user_agent, sizeof user_agent, "nemolens-preload/%s", NL_VERSION);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);

	nl_registry_set_cardinality_limit(cfg.cardinality_limit);
	nl_dest_configure(cfg.destinations);
	nl_connmetrics_init();
	nl_httpmetrics_init(&cfg);
	nl_resource_build(&resource, &cfg);
	nl_memsampler_init(&cfg);
	mark_tree();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	nl_runtime_set_starter(start_on_first_record);
	atomic_store(&nl_recording, true);
	/* Memory profiling is an explicit opt-in and has to run without any
	 * connection to kick it: start the thread now. */
	if (nl_memsampler_active())
		nl_runtime_kick();
	return true;
}

void nl_runtime_unload(void) { flush_at_exit(); }
