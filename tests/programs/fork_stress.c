/* SPDX-License-Identifier: Apache-2.0 */
/* Forks children while threads connect: every connect of every process must
 * reach the collector (test_fork_stress.py).
 *
 *   fork_stress ROUNDS CHILDREN MAKE LEAVE PORT...
 *
 * Four threads connect ROUNDS times each, to the ports in turn (each thread
 * starting at another one), so that their first connects make new series
 * while the main thread forks. The main thread makes CHILDREN children at
 * once, one after another, with fork() or, MAKE being clone, with clone()
 * without CLONE_VM (libc runs no fork handlers then); child i connects
 * twice to port number i modulo the ports' count and leaves by LEAVE:
 *   _exit   _exit(0)
 *   exit    exit(0)
 *   kill    raise(SIGKILL)
 *   exec    execl("/bin/true")
 * Prints one JSON line: the connects made per port, and the children that
 * ended as they should. */
#include <arpa/inet.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/dial.h"

#define THREADS 4
#define MAX_PORTS 16

static int port[MAX_PORTS], ports, rounds;

static void *thread_main(void *arg)
{
	int t = (int)(long)arg;
	for (int r = 0; r < rounds; r++)
		dial_port(port[(t + r) % ports]);
	return NULL;
}

/* In the child: never returns. */
static void child(int i, const char *how)
{
	dial_port(port[i % ports]);
	dial_port(port[i % ports]);
	if (!strcmp(how, "exit"))
		exit(0);
	if (!strcmp(how, "kill"))
		raise(SIGKILL);
	if (!strcmp(how, "exec"))
		execl("/bin/true", "true", (char *)NULL);
	_exit(0);
}

static const char *leave;
static char clone_stack[1 << 16] __attribute__((aligned(16)));

static int clone_main(void *i)
{
	child((int)(long)i, leave);
	return 0;
}

static pid_t make_child(int i, const char *make)
{
	if (!strcmp(make, "clone"))
		return clone(clone_main, clone_stack + sizeof clone_stack, SIGCHLD, (void *)(long)i);
	pid_t pid = fork();
	if (pid == 0)
		child(i, leave);
	return pid;
}

/* How the child ended is how LEAVE says. */
static int ended_as_told(int status)
{
	if (!strcmp(leave, "kill"))
		return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
	ports = argc - 5;
	if (ports < 1 || ports > MAX_PORTS)
		return 2;
	rounds = atoi(argv[1]);
	int children = atoi(argv[2]);
	const char *make = argv[3];
	leave = argv[4];
	for (int p = 0; p < ports; p++)
		port[p] = atoi(argv[5 + p]);
	long made[MAX_PORTS] = { 0 };
	pthread_t t[THREADS];
	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, thread_main, (void *)i) != 0)
			return 3;
	int good = 0;
	for (int i = 0; i < children; i++) {
		pid_t pid = make_child(i, make);
		int status;
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			return 4;
		good += ended_as_told(status);
		made[i % ports] += 2;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < THREADS; i++)
		for (int r = 0; r < rounds; r++)
			made[(i + r) % ports]++;
	printf("{\"children_ended_as_told\": %d, \"connects\": {", good);
	for (int p = 0; p < ports; p++)
		printf("%s\"%d\": %ld", p ? ", " : "", port[p], made[p]);
	printf("}}\n");
	return 0;
}
