/* SPDX-License-Identifier: Apache-2.0 */
/* Built static (out of LD_PRELOAD's reach): touches MB MiB, writes one byte
 * to FD, and waits for SIGTERM.   mem_static MB FD */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	size_t n = (size_t)atol(argv[1]) << 20;
	char *p = malloc(n ? n : 1);
	if (!p)
		return 2;
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	int fd = atoi(argv[2]);
	char c = 'r';
	if (write(fd, &c, 1) != 1)
		return 3;
	close(fd);
	int sig;
	sigwait(&set, &sig);
	free(p);
	return 0;
}
