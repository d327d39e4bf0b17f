/* SPDX-License-Identifier: Apache-2.0 */
/* A client that makes an exact, known set of connection attempts, so tests
 * can compare what the shim reports with what really happened.
 *
 *   connect_client OK_PORT REFUSED_PORT FULL_PORT N
 *
 * For each of N rounds, to 127.0.0.1:
 *   1 blocking connect to OK_PORT                      (counted, completes in the call)
 *   1 non-blocking connect to OK_PORT, poll, SO_ERROR  (counted, queued, ok)
 *   1 non-blocking connect to OK_PORT, first write     (counted, queued, ok)
 *   1 non-blocking connect to REFUSED_PORT, SO_ERROR   (counted, queued, abandoned)
 *   1 blocking connect to REFUSED_PORT                 (counted, fails in the call)
 *   1 non-blocking connect to FULL_PORT, then close    (counted, queued, abandoned)
 *   1 UDP connect and 1 AF_UNSPEC disconnect           (not counted)
 * FULL_PORT must be a listener whose accept queue is full, so its SYNs go
 * unanswered. Prints what it did as one JSON line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in addr_of(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int tcp(int nonblocking)
{
	int fd = socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0) {
		perror("socket");
		exit(2);
	}
	return fd;
}

static void wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	if (poll(&p, 1, 5000) != 1) {
		fprintf(stderr, "poll timed out\n");
		exit(2);
	}
}

static int so_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof err;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s OK_PORT REFUSED_PORT FULL_PORT N\n", argv[0]);
		return 2;
	}
	struct sockaddr_in ok = addr_of(atoi(argv[1]));
	struct sockaddr_in refused = addr_of(atoi(argv[2]));
	struct sockaddr_in full = addr_of(atoi(argv[3]));
	int n = atoi(argv[4]);
	int connects_ok = 0, connects_refused = 0, connects_full = 0;
	int queued_ok = 0, queued_abandoned_refused = 0, queued_abandoned_full = 0;

	for (int i = 0; i < n; i++) {
		int fd = tcp(0);
		if (connect(fd, (struct sockaddr *)&ok, sizeof ok) != 0) {
			perror("blocking connect");
			return 2;
		}
		connects_ok++;
		close(fd);

		fd = tcp(1);
		if (connect(fd, (struct sockaddr *)&ok, sizeof ok) == 0 || errno != EINPROGRESS) {
			perror("non-blocking connect");
			return 2;
		}
		connects_ok++;
		wait_writable(fd);
		if (so_error(fd) != 0)
			return 2;
		queued_ok++;
		close(fd);

		fd = tcp(1);
		if (connect(fd, (struct sockaddr *)&ok, sizeof ok) == 0 || errno != EINPROGRESS)
			return 2;
		connects_ok++;
		wait_writable(fd);
		if (write(fd, "x", 1) != 1)
			return 2;
		queued_ok++;
		close(fd);

		fd = tcp(1);
		if (connect(fd, (struct sockaddr *)&refused, sizeof refused) == 0 || errno != EINPROGRESS)
			return 2;
		connects_refused++;
		wait_writable(fd);
		if (so_error(fd) != ECONNREFUSED)
			return 2;
		queued_abandoned_refused++;
		close(fd);

		fd = tcp(0);
		if (connect(fd, (struct sockaddr *)&refused, sizeof refused) == 0 || errno != ECONNREFUSED)
			return 2;
		connects_refused++;
		close(fd);

		fd = tcp(1);
		if (connect(fd, (struct sockaddr *)&full, sizeof full) == 0 || errno != EINPROGRESS)
			return 2;
		connects_full++;
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, 20) != 0) {
			fprintf(stderr, "connect to the full listener completed\n");
			return 2;
		}
		close(fd);
		queued_abandoned_full++;

		int u = socket(AF_INET, SOCK_DGRAM, 0);
		connect(u, (struct sockaddr *)&ok, sizeof ok);
		struct sockaddr unspec = { .sa_family = AF_UNSPEC };
		connect(u, &unspec, sizeof unspec);
		close(u);
	}
	printf("{\"connects\": {\"ok\": %d, \"refused\": %d, \"full\": %d}, "
	       "\"queued\": {\"ok\": %d, \"abandoned_refused\": %d, \"abandoned_full\": %d}}\n",
	       connects_ok, connects_refused, connects_full, queued_ok, queued_abandoned_refused,
	       queued_abandoned_full);
	return 0;
}
