/* SPDX-License-Identifier: Apache-2.0 */
/* Libraries opened at their first use (preload/base/lazylib.h): zlib
 * opened and resolved once, a missing library or function failing for
 * good, threads that ask at once agreeing, and the bounded wait for a
 * loading thread, the one of a fork child's parent included, which never
 * finishes. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <zlib.h>

#include "lazylib.h"

static struct {
	const char *(*version)(void);
	int (*inflate)(z_streamp, int);
} z;

static bool open_zlib(struct nl_lazylib *l, unsigned wait_ms)
{
	return nl_lazylib_open(l, "libz.so.1", "zlibVersion\0inflate", &z, 2, wait_ms);
}

static uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

Test(lazylib, opens_and_resolves_once)
{
	static struct nl_lazylib l;
	cr_assert(!nl_lazylib_ready(&l));
	cr_assert(!nl_lazylib_failed(&l));
	cr_assert(open_zlib(&l, 0));
	cr_assert(nl_lazylib_ready(&l));
	cr_assert(!nl_lazylib_failed(&l));
	cr_assert_not_null(z.inflate);
	cr_assert_not_null(z.version);
	/* The library this program links: dlopen gave the same object. */
	cr_assert_str_eq(z.version(), zlibVersion());

	/* Ready: nothing is resolved again. */
	z.version = NULL;
	cr_assert(open_zlib(&l, 0));
	cr_assert_null(z.version);
}

Test(lazylib, missing_library_fails_for_good)
{
	static struct nl_lazylib l;
	struct {
		void (*f)(void);
	} fn = { NULL };
	cr_assert(!nl_lazylib_open(&l, "libnemolens-no-such-library.so.0", "f", &fn, 1, 0));
	cr_assert(nl_lazylib_failed(&l));
	cr_assert(!nl_lazylib_ready(&l));

	/* Not tried again, whatever is asked for: a failed state is not
	 * waited on either. */
	uint64_t t0 = now_ms();
	cr_assert(!open_zlib(&l, 10000));
	cr_assert_lt(now_ms() - t0, 5000);
	cr_assert(nl_lazylib_failed(&l));
	cr_assert_null(z.version);
}

Test(lazylib, missing_function_fails)
{
	static struct nl_lazylib l;
	struct {
		const char *(*version)(void);
		void (*missing)(void);
	} fn = { NULL, NULL };
	cr_assert(!nl_lazylib_open(&l, "libz.so.1", "zlibVersion\0nl_no_such_function", &fn, 2, 0));
	cr_assert_null(fn.missing);
	cr_assert(nl_lazylib_failed(&l));
	cr_assert(!open_zlib(&l, 0));
}

#define THREADS 8

static struct nl_lazylib shared;
static pthread_barrier_t start;

struct seen {
	unsigned wait_ms;
	bool ok;
	bool failed;
	const char *(*version)(void);
};

static void *first_call(void *arg)
{
	struct seen *s = arg;
	pthread_barrier_wait(&start);
	s->ok = open_zlib(&shared, s->wait_ms);
	s->failed = nl_lazylib_failed(&shared);
	if (s->ok)
		s->version = z.version;
	return NULL;
}

static void race(struct seen *seen, unsigned wait_ms)
{
	pthread_t t[THREADS];
	pthread_barrier_init(&start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++) {
		seen[i] = (struct seen){ .wait_ms = wait_ms };
		cr_assert_eq(pthread_create(&t[i], NULL, first_call, &seen[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
}

Test(lazylib, threads_that_wait_agree)
{
	struct seen seen[THREADS];
	race(seen, 5000);
	cr_assert(nl_lazylib_ready(&shared));
	for (int i = 0; i < THREADS; i++) {
		cr_assert(seen[i].ok, "thread %d", i);
		cr_assert_not_null(seen[i].version);
		cr_assert_eq((void *)seen[i].version, (void *)seen[0].version, "thread %d", i);
	}
}

Test(lazylib, threads_that_do_not_wait_are_told_not_ready)
{
	/* One of them loads; another that finds it loading is told "not
	 * ready", never "failed", and finds it ready afterwards. */
	struct seen seen[THREADS];
	race(seen, 0);
	cr_assert(nl_lazylib_ready(&shared));
	int ok = 0;
	for (int i = 0; i < THREADS; i++) {
		cr_assert(!seen[i].failed, "thread %d", i);
		if (seen[i].ok) {
			ok++;
			cr_assert_eq((void *)seen[i].version, (void *)z.version, "thread %d", i);
		}
	}
	cr_assert_geq(ok, 1);
	cr_assert(open_zlib(&shared, 0));
}

Test(lazylib, wait_for_a_loader_is_bounded)
{
	/* A fork child of a process one of whose threads was loading: the
	 * state says loading, and no thread of the child will finish. */
	static struct nl_lazylib l = { NL_LAZYLIB_LOADING };
	uint64_t t0 = now_ms();
	cr_assert(!open_zlib(&l, 0));
	cr_assert(!open_zlib(&l, 20));
	cr_assert_geq(now_ms() - t0, 20);
	cr_assert_lt(now_ms() - t0, 5000);
	cr_assert_eq(atomic_load(&l.state), NL_LAZYLIB_LOADING);
	cr_assert_null(z.version);
}

static struct nl_lazylib slow = { NL_LAZYLIB_LOADING };

static void *waiter(void *arg)
{
	bool *ok = arg;
	*ok = open_zlib(&slow, 5000);
	return NULL;
}

Test(lazylib, a_waiter_gets_what_the_loader_got)
{
	bool ok = false;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, waiter, &ok), 0);
	struct timespec pause = { 0, 20 * 1000000 };
	nanosleep(&pause, NULL);
	/* This thread is the loader: it publishes what it found. */
	z.version = zlibVersion;
	atomic_store_explicit(&slow.state, NL_LAZYLIB_READY, memory_order_release);
	pthread_join(t, NULL);
	cr_assert(ok);
	cr_assert_eq((void *)z.version, (void *)zlibVersion);
}
