/* SPDX-License-Identifier: Apache-2.0 */
/* Writes to stdout and to stderr around real connections, from itself and
 * from forked children, so tests can compare both output streams byte for
 * byte with and without the shim, separately and merged.
 *
 *   quiet_client PORT N FORKS
 *
 * Makes N blocking connects to 127.0.0.1:PORT, writing "out I" to stdout
 * and "err I" to stderr after each. Then forks FORKS children one after the
 * other; each connects once, writes "child out K" and "child err K", and
 * leaves with exit(0), so that its exit handlers run. Both streams are
 * unbuffered: merged output has one order. Exits 0, or 1 when a connect
 * failed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int connect_once(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	setvbuf(stdout, NULL, _IONBF, 0);
	setvbuf(stderr, NULL, _IONBF, 0);
	int port = atoi(argv[1]), n = atoi(argv[2]), forks = atoi(argv[3]);
	int failed = 0;
	for (int i = 1; i <= n; i++) {
		failed |= !connect_once(port);
		printf("out %d\n", i);
		fprintf(stderr, "err %d\n", i);
	}
	for (int k = 1; k <= forks; k++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			int ok = connect_once(port);
			printf("child out %d\n", k);
			fprintf(stderr, "child err %d\n", k);
			exit(ok ? 0 : 1);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	}
	return failed;
}
