/* SPDX-License-Identifier: Apache-2.0 */
/* A library whose constructor starts one thread that sleeps for ever: preloaded
 * into a server, it puts the server on libc's multi-threaded paths as the
 * shim's exporter thread does, and does nothing else. scripts/bench.d/cpu.sh
 * measures the server's CPU per request with it, to tell the thread's share
 * from the shim's. */
#include <pthread.h>
#include <unistd.h>

static void *sleep_for_ever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, sleep_for_ever, NULL) == 0)
		pthread_detach(t);
}
