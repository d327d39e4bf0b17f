/* SPDX-License-Identifier: Apache-2.0 */
/* Wall-clock tight loops for scripts/bench.
 *
 *   loops connect N    N x (socket, connect to a loopback listener, accept, close, close)
 *   loops sockpair N   N one-byte round trips over an AF_UNIX socketpair (echo thread)
 *   loops tcppp N      N one-byte round trips over a loopback TCP connection (echo thread)
 *
 * Prints the loop's wall time in nanoseconds (CLOCK_MONOTONIC). The listener's
 * port is BENCH_PORT when set, so a NEMOLENS_DESTINATIONS rule can name it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void *echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char b;
	while (read(fd, &b, 1) == 1)
		if (write(fd, &b, 1) != 1)
			break;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: loops connect|sockpair|tcppp N\n");
		return 2;
	}
	long n = atol(argv[2]);
	int one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	const char *p = getenv("BENCH_PORT");
	a.sin_port = htons(p ? atoi(p) : 0);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096))
		die("listen");
	socklen_t alen = sizeof a;
	getsockname(l, (struct sockaddr *)&a, &alen);
	uint64_t t0 = 0, t1 = 0;

	if (!strcmp(argv[1], "connect")) {
		struct linger lg = { 1, 0 };
		t0 = now_ns();
		for (long i = 0; i < n; i++) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a))
				die("connect");
			int s = accept(l, 0, 0);
			if (s < 0)
				die("accept");
			setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);   /* RST: no TIME_WAIT */
			close(c);
			close(s);
		}
		t1 = now_ns();
	} else {
		int c, s;
		if (!strcmp(argv[1], "sockpair")) {
			int sv[2];
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
				die("socketpair");
			c = sv[0], s = sv[1];
		} else {
			c = socket(AF_INET, SOCK_STREAM, 0);
			if (connect(c, (struct sockaddr *)&a, sizeof a))
				die("connect");
			s = accept(l, 0, 0);
			setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		}
		pthread_t th;
		pthread_create(&th, NULL, echo, (void *)(intptr_t)s);
		char b = 'x';
		t0 = now_ns();
		for (long i = 0; i < n; i++)
			if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1)
				die("ping-pong");
		t1 = now_ns();
		shutdown(c, SHUT_WR);
		pthread_join(th, NULL);
	}
	printf("%llu\n", (unsigned long long)(t1 - t0));
	return 0;
}
