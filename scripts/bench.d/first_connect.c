/* SPDX-License-Identifier: Apache-2.0 */
/* The wall time of a process's first connect() to a loopback listener, in
 * nanoseconds: under the shim, that connect() records the process's first
 * value, and with call sites on it also opens libunwind and reads the
 * symbols of the frames on its stack.
 *
 *   first_connect     prints the nanoseconds the first connect() took
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) static int dial(const struct sockaddr_in *a)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	long long t0 = now_ns();
	int r = connect(c, (const struct sockaddr *)a, sizeof *a);
	long long t1 = now_ns();
	close(c);
	if (r != 0)
		return -1;
	printf("%lld\n", t1 - t0);
	return 0;
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t len = sizeof a;
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 8) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		return 2;
	return dial(&a) ? 1 : 0;
}
