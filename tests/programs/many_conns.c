/* SPDX-License-Identifier: Apache-2.0 */
/* A threaded client holding many connections open at once.
 *
 *   many_conns PORT THREADS PER_THREAD
 *
 * Each thread opens PER_THREAD non-blocking connections, waits until all are
 * established (poll + SO_ERROR), holds them, then closes them. Prints the
 * number of established connections. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in target;
static int per_thread;
static pthread_barrier_t all_open;

static void *worker(void *arg)
{
	(void)arg;
	int *fds = calloc((size_t)per_thread, sizeof *fds);
	struct pollfd *p = calloc((size_t)per_thread, sizeof *p);
	long ok = 0;
	for (int i = 0; i < per_thread; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (connect(fds[i], (struct sockaddr *)&target, sizeof target) != 0 && errno != EINPROGRESS)
			fds[i] = -1;
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLOUT };
	}
	int pending = per_thread;
	while (pending > 0 && poll(p, (nfds_t)per_thread, 5000) > 0) {
		for (int i = 0; i < per_thread; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			int err = 0;
			socklen_t len = sizeof err;
			getsockopt(p[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
			ok += err == 0;
			p[i].fd = -1;
			pending--;
		}
	}
	pthread_barrier_wait(&all_open);
	for (int i = 0; i < per_thread; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	free(p);
	return (void *)ok;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	target.sin_family = AF_INET;
	target.sin_port = htons((unsigned short)atoi(argv[1]));
	target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int threads = atoi(argv[2]);
	per_thread = atoi(argv[3]);
	pthread_barrier_init(&all_open, NULL, (unsigned)threads);
	pthread_t *t = calloc((size_t)threads, sizeof *t);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	long total = 0;
	for (int i = 0; i < threads; i++) {
		void *r;
		pthread_join(t[i], &r);
		total += (long)r;
	}
	printf("established %ld\n", total);
	return 0;
}
