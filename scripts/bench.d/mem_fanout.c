/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark helper for scripts/bench_memory.sh: a process tree of N processes
 * (this one and N-1 children, forks touching KB KiB each), alive for SECONDS.
 *   mem_fanout N KB SECONDS */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int n = atoi(argv[1]);
	size_t kb = (size_t)atol(argv[2]);
	unsigned secs = (unsigned)atoi(argv[3]);
	pid_t *kids = calloc((size_t)(n > 1 ? n : 1), sizeof *kids);
	if (!kids)
		return 2;
	for (int i = 1; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			char *p = malloc(kb * 1024 + 1);
			if (p)
				memset(p, 1, kb * 1024);
			sleep(secs + 5);   /* stopped by the parent before that */
			_exit(0);
		}
	}
	sleep(secs);
	for (int i = 1; i < n; i++)
		if (kids[i] > 0)
			kill(kids[i], SIGKILL);
	for (int i = 1; i < n; i++)
		if (kids[i] > 0)
			waitpid(kids[i], NULL, 0);
	free(kids);
	return 0;
}
