/* SPDX-License-Identifier: Apache-2.0 */
/* Libraries opened with dlopen at their first use (lazylib.h). */
#include "lazylib.h"

#include <dlfcn.h>
#include <string.h>
#include <time.h>

/* The one load, by the thread that moved the state to loading. */
static bool load(struct nl_lazylib *l, const char *path, const char *names, void *fns, size_t n)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	bool ok = h != NULL;
	for (size_t i = 0; ok && i < n; i++, names += strlen(names) + 1) {
		void *f = dlsym(h, names);
		memcpy((char *)fns + i * sizeof f, &f, sizeof f);
		ok = f != NULL;
	}
	/* Release: the functions are written before any thread can see ready. */
	atomic_store_explicit(&l->state, ok ? NL_LAZYLIB_READY : NL_LAZYLIB_FAILED, memory_order_release);
	return ok;
}

bool nl_lazylib_open(struct nl_lazylib *l, const char *path, const char *names, void *fns, size_t n,
		     unsigned wait_ms)
{
	unsigned steps = wait_ms * 10, slept = 0;
	for (;;) {
		int s = atomic_load_explicit(&l->state, memory_order_acquire);
		if (s == NL_LAZYLIB_READY)
			return true;
		if (s == NL_LAZYLIB_FAILED)
			return false;
		/* One thread wins the move to loading. A thread that loses it
		 * looks again at what the state is now: never untried, so this
		 * goes round once at most. */
		if (s == NL_LAZYLIB_UNTRIED) {
			if (atomic_compare_exchange_strong_explicit(&l->state, &s, NL_LAZYLIB_LOADING,
								    memory_order_acq_rel, memory_order_acquire))
				return load(l, path, names, fns, n);
			continue;
		}
		if (slept++ == steps)
			return false;
		struct timespec t = { 0, 100000 };
		nanosleep(&t, NULL);
	}
}
