/* SPDX-License-Identifier: Apache-2.0 */
/* Makes N blocking connects to 127.0.0.1:PORT, then ends the way HOW says,
 * so tests can check that what a process recorded survives every way a
 * process ends.
 *
 *   ending PORT N HOW [PROGRAM ARGS...]
 *
 * HOW: exit (exit(0)), _exit, _Exit, abort, segv (a real invalid access),
 * kill (raise SIGKILL), term (raise SIGTERM), wait (prints "ready", then
 * waits to be killed), exec (execv PROGRAM ARGS...).
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int n = atoi(argv[2]);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
			return 4;
		close(fd);
	}
	const char *how = argv[3];
	struct rlimit none = { 0, 0 };
	setrlimit(RLIMIT_CORE, &none);   /* the crashes below dump no core */
	if (strcmp(how, "exit") == 0)
		exit(0);
	if (strcmp(how, "_exit") == 0)
		_exit(0);
	if (strcmp(how, "_Exit") == 0)
		_Exit(0);
	if (strcmp(how, "abort") == 0)
		abort();
	if (strcmp(how, "segv") == 0) {
		volatile int *p = (volatile int *)(uintptr_t)argc;   /* an address nothing is mapped at */
		*p = 1;
	}
	if (strcmp(how, "kill") == 0)
		raise(SIGKILL);
	if (strcmp(how, "term") == 0)
		raise(SIGTERM);
	if (strcmp(how, "wait") == 0) {
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (strcmp(how, "exec") == 0 && argc > 4) {
		execv(argv[4], argv + 4);
		return 5;
	}
	return 2;
}
