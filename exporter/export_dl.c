/* SPDX-License-Identifier: Apache-2.0 */
/* The exporter as libnemolens_preload.so sees it (export.h): each entry
 * point opens the export module (module.h) the first time one needs it,
 * and calls through its table. Until then the process has loaded nothing of
 * the exporter: no protobuf-c, zlib, libcurl or TLS library, and no page of
 * theirs.
 *
 * nemolens-run links it too (built with NL_EXPORT_MODULE_RELATIVE, where
 * the installed module is from the launcher's directory), so that its own
 * start loads none of those libraries either.
 *
 * Only the exporter thread and the exit flush call these, never a hook; the
 * fork handlers run in every process and do nothing while the module is not
 * loaded.
 */
#include "module.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "forkpath.h"

/* dlopen takes the loader's locks and may take a few milliseconds, once
 * per process: a fork meanwhile waits for it, at most this long. A child
 * forked while it could not wait never opens the module (its values stay
 * in its segment for another process to deliver). */
#define FORK_LOAD_WAIT_MS 50

static pthread_mutex_t loading = PTHREAD_MUTEX_INITIALIZER;
static const struct nl_export_api *_Atomic api;
static bool tried;                             /* under loading: the one attempt was made */
/* Set before `loading` is first taken: until then a fork has nothing of
 * the module to hold or wait for, and its handlers touch no page here. */
static _Atomic bool opening;
static bool unusable;                          /* forked while the module was being opened */
static bool held_for_fork;                     /* nl_transport_fork_prepare got `loading` */
static const struct nl_export_api *forked_api; /* the table the fork handlers saw */

static void host_vlog(enum nl_log_level level, const char *key, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	nl_log(level, key, "%s", line);
}

static const struct nl_export_host host = { .vlog = host_vlog };

/* The directory of the program or library this file is linked into. */
static bool own_directory(char *dir)
{
#ifdef NL_EXPORT_MODULE_RELATIVE
	/* nemolens-run: an executable, which dladdr names by no path. */
	ssize_t n = readlink("/proc/self/exe", dir, PATH_MAX - 1);
	if (n <= 0)
		return false;
	dir[n] = '\0';
#else
	Dl_info info;
	if (!dladdr((void *)own_directory, &info) || !info.dli_fname || !realpath(info.dli_fname, dir))
		return false;
#endif
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	return true;
}

static void *open_in(const char *dir, const char *sub, char *path, size_t size)
{
	snprintf(path, size, "%s/%s%s" NL_EXPORT_MODULE_FILE, dir, sub, *sub ? "/" : "");
	/* RTLD_LOCAL: nothing of the module, protobuf-c or zlib joins the
	 * program's symbol lookup. */
	return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static const struct nl_export_api *open_module(void)
{
	/* Next to the shim itself, wherever it was installed or copied. */
	char dir[PATH_MAX], path[2 * PATH_MAX];
	if (!own_directory(dir)) {
		nl_warn_once("export.module", "cannot find the shim's own directory: metrics are not exported");
		return NULL;
	}
	void *h = open_in(dir, "", path, sizeof path);
#ifdef NL_EXPORT_MODULE_RELATIVE
	/* In the build tree the launcher and the module are side by side (as
	 * it finds the shim); installed, the launcher is in bin and the module
	 * in the library directory. */
	if (!h)
		h = open_in(dir, NL_EXPORT_MODULE_RELATIVE, path, sizeof path);
#endif
	if (!h) {
		nl_warn_once("export.module", "cannot load %s (%s): metrics are not exported", path, dlerror());
		return NULL;
	}
	const struct nl_export_api *a = dlsym(h, NL_EXPORT_MODULE_SYMBOL);
	if (!a || a->size != sizeof *a || strcmp(a->version, NL_VERSION) != 0) {
		nl_warn_once("export.module", "%s is not of this shim's build (%s): metrics are not exported", path,
			     NL_VERSION);
		dlclose(h);
		return NULL;
	}
	a->init(&host);
	return a;
}

static const struct nl_export_api *module(void)
{
	const struct nl_export_api *a = atomic_load_explicit(&api, memory_order_acquire);
	if (a || unusable)
		return a;
	if (!atomic_load(&opening))
		atomic_store(&opening, true);
	pthread_mutex_lock(&loading);
	if (!tried) {
		tried = true;
		atomic_store_explicit(&api, open_module(), memory_order_release);
	}
	a = atomic_load_explicit(&api, memory_order_relaxed);
	pthread_mutex_unlock(&loading);
	return a;
}

int nl_otlp_encode(const struct nl_snapshot *snap, uint8_t **out, size_t *out_len)
{
	const struct nl_export_api *a = module();
	return a ? a->otlp_encode(snap, out, out_len) : -1;
}

int nl_json_encode(const struct nl_snapshot *snap, char **out, size_t *out_len)
{
	const struct nl_export_api *a = module();
	return a ? a->json_encode(snap, out, out_len) : -1;
}

struct nl_transport *nl_transport_new(const struct nl_transport_config *cfg)
{
	const struct nl_export_api *a = module();
	return a ? a->transport_new(cfg) : NULL;
}

/* A transport exists only once the module is loaded: the calls on one
 * need not load it. */
static const struct nl_export_api *loaded(void) { return atomic_load_explicit(&api, memory_order_acquire); }

enum nl_send_result nl_transport_send(struct nl_transport *t, const uint8_t *body, size_t len,
				      uint64_t deadline_ns, uint64_t retry_until_ns, const _Atomic bool *abort)
{
	const struct nl_export_api *a = loaded();
	if (!a || !t)
		return NL_SEND_RETRYABLE_FAILED;
	return a->transport_send(t, body, len, deadline_ns, retry_until_ns, abort);
}

void nl_transport_set_final(struct nl_transport *t, bool final, bool kept)
{
	const struct nl_export_api *a = loaded();
	if (a && t)
		a->transport_set_final(t, final, kept);
}

void nl_transport_set_wait(struct nl_transport *t, long ms)
{
	const struct nl_export_api *a = loaded();
	if (a && t)
		a->transport_set_wait(t, ms);
}

void nl_transport_free(struct nl_transport *t)
{
	const struct nl_export_api *a = loaded();
	if (a && t)
		a->transport_free(t);
}

void nl_transport_fork_prepare(void)
{
	if (!atomic_load(&opening))
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += FORK_LOAD_WAIT_MS * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	held_for_fork = pthread_mutex_timedlock(&loading, &ts) == 0;
	forked_api = held_for_fork ? loaded() : NULL;
	if (forked_api)
		forked_api->fork_prepare();
}

void nl_transport_fork_parent(void)
{
	if (!held_for_fork)
		return;   /* nothing taken (forked_api is set only with the lock) */
	if (forked_api)
		forked_api->fork_parent();
	pthread_mutex_unlock(&loading);
	held_for_fork = false;
	forked_api = NULL;
}

NL_FORK_PATH void nl_transport_fork_child(void)
{
	if (forked_api)
		forked_api->fork_child();
	/* Without the lock, another thread of the parent was opening the
	 * module (it may have begun after the prepare handler looked): the
	 * loader's locks may be held in this child for ever. A module never
	 * opened leaves the child nothing to do, and no page to write. */
	if (held_for_fork)
		pthread_mutex_unlock(&loading);
	else if (atomic_load(&opening))
		unusable = true;
	else
		return;
	held_for_fork = false;
	forked_api = NULL;
}
