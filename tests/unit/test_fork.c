/* SPDX-License-Identifier: Apache-2.0 */
/* The fork protocol (preload/base/fork.h): handlers run in the parts' lock
 * order whatever the order in which the parts were first registered. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fork.h"

static char trail[64];   /* one letter per handler run: P prepare, A parent, C child */

static void note(char what, int part)
{
	size_t n = strlen(trail);
	if (n + 2 < sizeof trail) {
		trail[n] = what;
		trail[n + 1] = (char)('0' + part);
		trail[n + 2] = 0;
	}
}

#define PART(i)                                                                  \
	static void prepare##i(void) { note('P', i); }                           \
	static void parent##i(void) { note('A', i); }                            \
	static void child##i(void) { note('C', i); }                             \
	static const struct nl_fork_handlers h##i = { prepare##i, parent##i, child##i };
PART(0)
PART(1)
PART(2)
PART(3)
PART(4)
PART(5)
PART(6)

static const struct nl_fork_handlers *const handlers[NL_FORK_PARTS] = { &h0, &h1, &h2, &h3, &h4, &h5, &h6 };

/* Forks once; the child writes its trail to a pipe. */
static void fork_and_collect(char *child_trail, size_t size)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	trail[0] = 0;
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ssize_t w = write(p[1], trail, strlen(trail) + 1);
		_exit(w > 0 ? 0 : 1);
	}
	close(p[1]);
	ssize_t n = read(p[0], child_trail, size - 1);
	close(p[0]);
	child_trail[n > 0 ? n : 0] = 0;
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(fork, handlers_run_in_lock_order_whatever_the_registration_order)
{
	cr_assert_eq(NL_FORK_PARTS, 7, "a new part needs its place in this test");
	/* Last part first: registration order must not matter. */
	for (int i = NL_FORK_PARTS - 1; i >= 0; i--)
		nl_fork_register((enum nl_fork_part)i, handlers[i]);
	char child[64];
	fork_and_collect(child, sizeof child);
	cr_assert_str_eq(trail, "P0P1P2P3P4P5P6A6A5A4A3A2A1A0");
	cr_assert_str_eq(child, "P0P1P2P3P4P5P6C6C5C4C3C2C1C0");
}

Test(fork, interleaved_registration_and_unregistered_parts)
{
	nl_fork_register(NL_FORK_ROUTES, &h3);
	nl_fork_register(NL_FORK_LENS, &h0);
	nl_fork_register(NL_FORK_REGISTRY, &h2);
	char child[64];
	fork_and_collect(child, sizeof child);
	cr_assert_str_eq(trail, "P0P2P3A3A2A0");
	cr_assert_str_eq(child, "P0P2P3C3C2C0");
	/* A second registration of a part changes nothing. */
	nl_fork_register(NL_FORK_LENS, &h1);
	nl_fork_register(NL_FORK_RUNTIME, &h1);
	fork_and_collect(child, sizeof child);
	cr_assert_str_eq(trail, "P0P1P2P3A3A2A1A0");
}

static const struct nl_fork_handlers child_only = { .child = child4 };

Test(fork, handlers_may_be_missing)
{
	nl_fork_register(NL_FORK_FDS, &child_only);
	nl_fork_register(NL_FORK_LENS, &h0);
	char child[64];
	fork_and_collect(child, sizeof child);
	cr_assert_str_eq(trail, "P0A0");
	cr_assert_str_eq(child, "P0C4C0");
}


/* A part first registered by another thread while a fork is under way, its
 * prepare handlers past the part's place: the registration must not return
 * (so its caller cannot change the part's state) until the child is made.
 * Part 3's prepare handler starts that thread and gives it time to return
 * if it would; part 3's parent handler, the first to run after the fork,
 * looks whether it did. */
static atomic_bool late_returned, late_started;
static bool returned_before_fork_ended;
static pthread_t late;

static void *register_late(void *arg)
{
	(void)arg;
	atomic_store(&late_started, true);
	nl_fork_register(NL_FORK_RUNTIME, &h1);
	atomic_store(&late_returned, true);
	return NULL;
}

static void prepare_late(void)
{
	note('P', 3);
	cr_assert_eq(pthread_create(&late, NULL, register_late, NULL), 0);
	while (!atomic_load(&late_started))
		sched_yield();
	usleep(50 * 1000);
}

static void parent_late(void)
{
	note('A', 3);
	returned_before_fork_ended = atomic_load(&late_returned);
}

static const struct nl_fork_handlers late_starter = { prepare_late, parent_late, child3 };

Test(fork, registration_waits_for_a_fork_that_missed_it)
{
	nl_fork_register(NL_FORK_ROUTES, &late_starter);
	char child[64];
	fork_and_collect(child, sizeof child);
	cr_assert_not(returned_before_fork_ended, "returned while the fork that missed it was under way");
	cr_assert_eq(pthread_join(late, NULL), 0);
	cr_assert(atomic_load(&late_returned));
	/* The fork missed part 1's prepare handler; its parent and child
	 * handlers may run (fork.h). */
	cr_assert(!strcmp(trail, "P3A3") || !strcmp(trail, "P3A3A1"), "parent ran %s", trail);
	cr_assert(!strcmp(child, "P3C3") || !strcmp(child, "P3C3C1"), "child ran %s", child);
	/* The next fork has it all. */
	fork_and_collect(child, sizeof child);
	cr_assert_str_eq(trail, "P1P3A3A1");
	cr_assert_str_eq(child, "P1P3C3C1");
}
