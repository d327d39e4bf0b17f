/* SPDX-License-Identifier: Apache-2.0 */
/* Connects to 127.0.0.1:PORT every INTERVAL_MS for DURATION_MS, then prints
 * how many connects it made and exits 0.
 *
 *   steady_client PORT INTERVAL_MS DURATION_MS
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	long interval = atol(argv[2]);
	double end = now() + atof(argv[3]);
	int n = 0;
	while (now() < end) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		connect(fd, (struct sockaddr *)&a, sizeof a);
		close(fd);
		n++;
		struct timespec ts = { interval / 1000, (interval % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
	printf("%d\n", n);
	return 0;
}
