/* SPDX-License-Identifier: Apache-2.0 */
/* Makes N blocking connects to 127.0.0.1:PORT, sleeps MS milliseconds, prints
 * a line and exits with status 3 (a distinctive code the tests compare).
 *
 *   short_lived PORT N MS
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int n = atoi(argv[2]), ok = 0;
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			ok++;
		close(fd);
	}
	long ms = atol(argv[3]);
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	printf("connected %d of %d\n", ok, n);
	return 3;
}
