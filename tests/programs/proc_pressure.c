/* SPDX-License-Identifier: Apache-2.0 */
/* A process with known pressure, for the process figures' integration test.
 *
 *   proc_pressure
 *       connects to a listener of its own (so that the shim records, and
 *       the process is exported), forks a child, then
 *         parent  burns 1.5 s of user CPU, runs 7 threads in all and holds
 *                 100 more descriptors (/dev/null);
 *         child   burns 0.3 s of user CPU, runs 3 threads and holds 20 more;
 *       each prints, once in that state, its own view of itself:
 *       "view who=parent|child pid=P user_ms=U threads=T fds=F" (user CPU from
 *       getrusage, threads from /proc/self/status, descriptors listed in
 *       /proc/self/fd, the listing's own left out), and stays in that state
 *       until stdin closes; the parent then waits for the child and exits 0.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static double user_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
}

static volatile unsigned long sink;

static void burn(double seconds)
{
	while (user_s() < seconds)
		for (int i = 0; i < 1000000; i++)
			sink += (unsigned long)i * 2654435761u;
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static long threads_now(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		die("status");
	char line[256];
	long n = -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "Threads:", 8) == 0)
			n = strtol(line + 8, NULL, 10);
	fclose(f);
	return n;
}

static long fds_now(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		die("opendir");
	long n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	closedir(d);
	return n - 1;   /* the listing's own descriptor */
}

/* Takes the state, prints the view, holds it until stdin closes. */
static void hold(const char *who, double cpu, int threads, int files)
{
	for (int i = 0; i < files; i++)
		if (open("/dev/null", O_RDONLY) < 0)
			die("open");
	for (int i = 1; i < threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, idle, NULL) != 0)
			die("pthread_create");
	}
	burn(cpu);
	printf("view who=%s pid=%d user_ms=%.0f threads=%ld fds=%ld\n", who, (int)getpid(), user_s() * 1000,
	       threads_now(), fds_now());
	fflush(stdout);
	char c;
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
}

int main(void)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) != 0)
		die("listen");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0)
		die("connect");
	close(c);
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		/* A connection of its own: the child records, so it is a process
		 * of its own for the shim, with its own resource. */
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0)
			die("connect");
		close(c);
		hold("child", 0.3, 3, 20);
		exit(0);
	}
	hold("parent", 1.5, 7, 100);
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 1;
	return 0;
}
