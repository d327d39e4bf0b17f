/* SPDX-License-Identifier: Apache-2.0 */
/* Memory subjects for scripts/bench.
 *
 *   conns idle          prints "ready", then waits for a signal
 *   conns listen N      listens on a free loopback port, prints it, accepts and
 *                       holds up to N connections, waits for a signal
 *   conns hold N PORT   opens N blocking connections to 127.0.0.1:PORT, prints
 *                       "ready", holds them and waits for a signal
 *   conns httpserve N   listens, prints its port, answers one HTTP/1.1 request
 *                       on each of N keep-alive connections, prints "ready",
 *                       holds them idle and waits for a signal
 *   conns httphold N PORT opens N connections, sends one GET on each and reads
 *                       its answer, prints "ready", holds them
 *   conns h2serve N     as httpserve, over HTTP/2: reads each connection's
 *                       preface and SETTINGS, answers with its SETTINGS
 *                       (h2frames.h), no request
 *   conns h2hold N PORT as httphold, sending the preface and SETTINGS and
 *                       reading the server's SETTINGS
 *
 * RLIMIT_NOFILE is raised to its hard limit first. scripts/bench reads VmRSS
 * from /proc/PID/status once "ready" (or the port) is printed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2frames.h"

static void raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* A listener on a, its port printed for the bench to read; -1 on failure. */
static int listen_and_say(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(l, (struct sockaddr *)a, sizeof *a) || listen(l, 4096)) {
		perror("listen");
		return -1;
	}
	socklen_t len = sizeof *a;
	getsockname(l, (struct sockaddr *)a, &len);
	printf("%d\n", ntohs(a->sin_port));
	fflush(stdout);
	return l;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	raise_nofile();
	if (!strcmp(argv[1], "idle")) {
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	long n = argc > 2 ? atol(argv[2]) : 0;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (!strcmp(argv[1], "listen")) {
		int l = listen_and_say(&a);
		if (l < 0)
			return 1;
		for (long i = 0; i < n; i++)
			if (accept(l, 0, 0) < 0)
				perror("accept");
		for (;;)
			pause();
	}
	static const char get1[] = "GET /v1/items HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n";
	static const char ok1[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok";
	/* What the client sends first, what the server answers: HTTP/1.1 or 2. */
	int h2 = !strncmp(argv[1], "h2", 2);
	uint8_t get[128], ok[128];
	size_t nget = h2 ? h2_client_open(get) : sizeof get1 - 1, nok = h2 ? h2_server_open(ok) : sizeof ok1 - 1;
	if (!h2) {
		memcpy(get, get1, nget);
		memcpy(ok, ok1, nok);
	}
	char buf[512];
	if (!strcmp(argv[1], "httpserve") || !strcmp(argv[1], "h2serve")) {
		int l = listen_and_say(&a);
		if (l < 0)
			return 1;
		for (long i = 0; i < n; i++) {
			int c = accept(l, 0, 0);
			/* The request is small: one read has it all on loopback. */
			if (c < 0 || read(c, buf, sizeof buf) <= 0 || write(c, ok, nok) < 0)
				perror("serve");
		}
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if ((!strcmp(argv[1], "httphold") || !strcmp(argv[1], "h2hold")) && argc > 3) {
		a.sin_port = htons(atoi(argv[3]));
		for (long i = 0; i < n; i++) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) || write(c, get, nget) < 0 ||
			    read(c, buf, sizeof buf) <= 0) {
				perror("httphold");
				return 1;
			}
		}
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (!strcmp(argv[1], "hold") && argc > 3) {
		a.sin_port = htons(atoi(argv[3]));
		for (long i = 0; i < n; i++) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a)) {
				perror("connect");
				return 1;
			}
		}
		printf("ready\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	return 2;
}
