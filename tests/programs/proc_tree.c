/* SPDX-License-Identifier: Apache-2.0 */
/* Exercises processes, threads and signals under the shim; every count it
 * makes is known, so the test can compare the export with the truth.
 *
 *   proc_tree fork   PORT N   parent connects N, forks a child that connects 2N and
 *                             exits; then vfork+exec and posix_spawn of `short_lived`
 *                             (path in $SHORT_LIVED) with N connects each
 *   proc_tree threads PORT N  16 threads, N connects each, all at once
 *   proc_tree forkthreads PORT N
 *                             one connect, then a fork child whose 16 threads
 *                             make N connects each, all at once: its first
 *                             records race each other
 *   proc_tree signals PORT N  N connects in the main loop while a timer signal's
 *                             handler does socket/connect/close on every tick
 *   proc_tree exec PORT MS    one connect, MS ms of sleep (exports happen meanwhile),
 *                             then exec of `ls -l /proc/self/fd`: shows which fds
 *                             the new image inherits
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static struct sockaddr_in target;

static int connect_once(void)
{
	int saved = errno;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&target, sizeof target) == 0;
	if (fd >= 0)
		close(fd);
	errno = saved;
	return ok;
}

static int connect_n(int n)
{
	int ok = 0;
	for (int i = 0; i < n; i++)
		ok += connect_once();
	return ok;
}

static int vfork_exec(const char *prog, char **args)
{
	int st;
	pid_t v = vfork();
	if (v == 0) {
		execve(prog, args, environ);
		_exit(127);
	}
	waitpid(v, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 3;
}

static int run_fork(int n, const char *port)
{
	const char *prog = getenv("SHORT_LIVED");
	char count[16];
	snprintf(count, sizeof count, "%d", n);
	char *args[] = { (char *)prog, (char *)port, count, "0", NULL };

	int ok = connect_n(n);
	pid_t child = fork();
	if (child == 0)
		_exit(connect_n(2 * n) == 2 * n ? 0 : 1) ; /* _exit: no flush, see below */
	int st;
	waitpid(child, &st, 0);
	int child_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;

	/* A child that exits normally flushes its own metrics. */
	pid_t child2 = fork();
	if (child2 == 0)
		exit(connect_n(2 * n) == 2 * n ? 0 : 1);
	waitpid(child2, &st, 0);
	child_ok = child_ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;

	int vfork_ok = vfork_exec(prog, args);

	pid_t sp;
	int spawn_ok = posix_spawn(&sp, prog, NULL, NULL, args, environ) == 0 && waitpid(sp, &st, 0) == sp &&
		       WIFEXITED(st) && WEXITSTATUS(st) == 3;
	printf("parent %d child %d vfork %d spawn %d\n", ok, child_ok, vfork_ok, spawn_ok);
	return 0;
}

static int per_thread;
static pthread_barrier_t start_line;
static void *thread_main(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&start_line);   /* all at once: their first records race */
	return (void *)(long)connect_n(per_thread);
}

static int run_threads(int n)
{
	pthread_t t[16];
	per_thread = n;
	pthread_barrier_init(&start_line, NULL, 16);
	for (int i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, thread_main, NULL);
	long ok = 0;
	for (int i = 0; i < 16; i++) {
		void *r;
		pthread_join(t[i], &r);
		ok += (long)r;
	}
	printf("threads %ld\n", ok);
	return 0;
}

static int run_forkthreads(int n)
{
	int parent_ok = connect_once();
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		run_threads(n);
		exit(0);
	}
	int st;
	int child_ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("parent %d child %d\n", parent_ok, child_ok);
	return 0;
}

static volatile sig_atomic_t in_handler_ok, ticks;
static void on_tick(int sig)
{
	(void)sig;
	ticks++;
	in_handler_ok += connect_once();
}

static int run_signals(int n)
{
	struct sigaction sa = { .sa_handler = on_tick };
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 500 }, { 0, 500 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int ok = connect_n(n);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("main %d handler %d ticks %d\n", ok, (int)in_handler_ok, (int)ticks);
	return 0;
}

static int run_exec(int ms)
{
	connect_once();
	usleep((useconds_t)ms * 1000);
	fflush(stdout);
	execl("/bin/ls", "ls", "/proc/self/fd", (char *)NULL);
	return 127;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	target.sin_family = AF_INET;
	target.sin_port = htons((unsigned short)atoi(argv[2]));
	target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int n = atoi(argv[3]);
	if (strcmp(argv[1], "fork") == 0)
		return run_fork(n, argv[2]);
	if (strcmp(argv[1], "threads") == 0)
		return run_threads(n);
	if (strcmp(argv[1], "forkthreads") == 0)
		return run_forkthreads(n);
	if (strcmp(argv[1], "signals") == 0)
		return run_signals(n);
	if (strcmp(argv[1], "exec") == 0)
		return run_exec(n);
	return 2;
}
