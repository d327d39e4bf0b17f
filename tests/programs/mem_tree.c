/* SPDX-License-Identifier: Apache-2.0 */
/* A process tree with known memory, for the memory sampler's integration test.
 *
 *   mem_tree root MB_ROOT MB_FORKED MB_STATIC MB_OTHER
 *       touches MB_ROOT MiB, sleeps 600 ms (samples with no other server
 *       below), then starts:
 *         early   a fork that exits at once (reaped before the pids line)
 *         forked  a fork (same server) touching MB_FORKED MiB
 *         static  $MEM_STATIC (a static binary, out of the shim's reach) run
 *                 with NEMOLENS_SERVER_NAME=notloaded, touching MB_STATIC MiB
 *         other   this program again with NEMOLENS_SERVER_NAME=other,
 *                 touching MB_OTHER MiB: the root of another server
 *       waits until each has touched its memory, prints
 *       "pids root=R forked=F static=S other=O early=E", then waits for
 *       stdin to close, stops the children (SIGTERM), reaps them and exits 0.
 *   mem_tree other MB FD   touch MB MiB, write one byte to FD, wait for SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *touch(long mb)
{
	size_t n = (size_t)mb << 20;
	char *p = malloc(n ? n : 1);
	if (!p) {
		perror("malloc");
		exit(2);
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = (char)(i / 4096 + 1);
	return p;
}

static void wait_term(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	int sig;
	sigwait(&set, &sig);
}

static void block_term(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

static void ready(int fd)
{
	char c = 'r';
	if (write(fd, &c, 1) != 1)
		_exit(3);
	close(fd);
}

static pid_t spawn(char *const argv[], const char *name)
{
	pid_t p = fork();
	if (p == 0) {
		setenv("NEMOLENS_SERVER_NAME", name, 1);
		execv(argv[0], argv);
		perror("execv");
		_exit(127);
	}
	return p;
}

int main(int argc, char **argv)
{
	block_term();   /* inherited through fork and exec; each child sigwaits */
	if (argc == 4 && strcmp(argv[1], "other") == 0) {
		char *mem = touch(atol(argv[2]));
		ready(atoi(argv[3]));
		wait_term();
		free(mem);
		return 0;
	}
	if (argc != 6 || strcmp(argv[1], "root") != 0) {
		fprintf(stderr, "usage: mem_tree root MB_ROOT MB_FORKED MB_STATIC MB_OTHER\n");
		return 2;
	}
	char *mem = touch(atol(argv[2]));
	usleep(600 * 1000);

	int fds[2];
	if (pipe(fds) != 0)
		return 2;
	char fdarg[16];
	snprintf(fdarg, sizeof fdarg, "%d", fds[1]);

	pid_t early = fork();
	if (early == 0)
		_exit(0);
	waitpid(early, NULL, 0);

	pid_t forked = fork();
	if (forked == 0) {
		close(fds[0]);
		char *m = touch(atol(argv[3]));
		ready(fds[1]);
		wait_term();
		free(m);
		exit(0);
	}

	const char *static_prog = getenv("MEM_STATIC");
	char *sargv[] = { (char *)static_prog, argv[4], fdarg, NULL };
	pid_t stat_pid = static_prog ? spawn(sargv, "notloaded") : -1;

	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 2;
	self[n] = 0;
	char *oargv[] = { self, "other", argv[5], fdarg, NULL };
	pid_t other = spawn(oargv, "other");

	close(fds[1]);
	int want = static_prog ? 3 : 2;
	for (int got = 0; got < want;) {
		char c;
		if (read(fds[0], &c, 1) != 1) {
			fprintf(stderr, "a child died before it was ready\n");
			return 2;
		}
		got++;
	}
	printf("pids root=%d forked=%d static=%d other=%d early=%d\n", (int)getpid(), (int)forked, (int)stat_pid,
	       (int)other, (int)early);
	fflush(stdout);

	char line[64];
	while (fgets(line, sizeof line, stdin))
		;
	pid_t kids[] = { forked, stat_pid, other };
	for (size_t i = 0; i < 3; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGTERM);
	int rc = 0;
	for (size_t i = 0; i < 3; i++) {
		int st;
		if (kids[i] > 0 && (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
			rc = 1;
	}
	free(mem);
	return rc;
}
