/* SPDX-License-Identifier: Apache-2.0 */
/* Callgrind driver for scripts/bench: N calls of one libc function in a loop.
 *
 *   calls OP N
 *
 * Every measured call goes through a noinline op_* function; scripts/bench runs
 * this under `valgrind --tool=callgrind --toggle-collect=op_*`, so only the
 * instructions executed inside those functions (the libc call, plus the shim's
 * hook when it is preloaded) are counted, not startup, set-up or the loop's
 * other calls. The same binary runs with and without LD_PRELOAD; the difference
 * divided by N is what the shim adds per call.
 *
 * OPs (tracked = a TCP socket the shim tracks; untracked = an fd it does not):
 *   connect        blocking connect to a loopback listener (done inside the call)
 *   connect_nb     non-blocking connect (EINPROGRESS) + poll + getsockopt(SO_ERROR):
 *                  the whole pending-acquisition path, settle included
 *   close_tcp      close of a connected TCP socket
 *   close_untracked close of an fd opened on /dev/null
 *   send_tcp recv_tcp read_tcp write_tcp        on a connected loopback TCP pair
 *   send_untracked recv_untracked               on an AF_UNIX socketpair
 *   read_untracked write_untracked              on a pipe
 *   syscall        syscall(SYS_getppid): the syscall() hook on a number it
 *                  passes through (it looks only at close and close_range)
 *   http_server    a keep-alive GET with six headers answered by a 200 with a
 *                  1 KiB Content-Length body: the server's read and write
 *                  (run with NEMOLENS_HTTP=server: the client is not followed)
 *   http_client    the same exchange, the client's write and reads
 *                  (NEMOLENS_HTTP=client)
 *   h2_server h2_client     the same GET and 200 over HTTP/2 (h2frames.h), one
 *                  stream after another on one connection, HPACK's dynamic
 *                  table in use; the connection's opening and first request
 *                  are not measured
 *   grpc_server grpc_client a unary gRPC call the same way: HEADERS and DATA,
 *                  answered by HEADERS, DATA and trailers
 *
 * BENCH_THREAD=1 starts an idle thread first. A process with a second thread
 * takes glibc's cancellation-point path in close, accept, connect, send and
 * recv; the shim's exporter thread puts a program on that path, and the bench
 * compares against the program with a thread of its own to tell the two apart.
 *   connect_site   a blocking connect from a call site already known to the
 *                  shim (one connect before the first counted call)
 *   conn_life      one connection's whole life: socket, connect, accept and the
 *                  two closes, each an op_* call (run without a destination rule)
 *   read_untracked_http send_tcp_http
 *                  read on a pipe / send on a TCP socket found not to carry
 *                  HTTP, while an HTTP connection is open and followed
 * The listener's port is the one NEMOLENS_DESTINATIONS names: BENCH_PORT env.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "h2frames.h"

#define OP __attribute__((noinline, noclone, used))

OP int op_connect(int fd, const struct sockaddr_in *a) { return connect(fd, (const struct sockaddr *)a, sizeof *a); }
OP int op_connect_nb(int fd, const struct sockaddr_in *a)
{
	int r = connect(fd, (const struct sockaddr *)a, sizeof *a);
	if (r != 0 && errno != EINPROGRESS)
		return -1;
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	poll(&p, 1, 1000);
	int err = 0;
	socklen_t len = sizeof err;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err ? -1 : 0;
}
/* The call site of connect_site: a frame of its own below op_connect_site,
 * so that one connect outside op_* (not counted) makes it known first. */
__attribute__((noinline)) static int site_connect(int fd, const struct sockaddr_in *a)
{
	int r = connect(fd, (const struct sockaddr *)a, sizeof *a);
	__asm__ volatile("" ::: "memory");
	return r;
}
OP int op_connect_site(int fd, const struct sockaddr_in *a) { return site_connect(fd, a); }
OP int op_close(int fd) { return close(fd); }
OP long op_syscall(void) { return syscall(SYS_getppid); }
OP int op_socket(void) { return socket(AF_INET, SOCK_STREAM, 0); }
OP int op_accept(int l) { return accept(l, 0, 0); }
OP ssize_t op_send(int fd, const void *b, size_t n) { return send(fd, b, n, 0); }
OP ssize_t op_recv(int fd, void *b, size_t n) { return recv(fd, b, n, 0); }
OP ssize_t op_read(int fd, void *b, size_t n) { return read(fd, b, n); }
OP ssize_t op_write(int fd, const void *b, size_t n) { return write(fd, b, n); }

static const char http_request[] = "GET /v1/items HTTP/1.1\r\n"
				   "Host: 127.0.0.1:8080\r\n"
				   "User-Agent: bench/1.0\r\n"
				   "Accept: application/json\r\n"
				   "Accept-Encoding: gzip, deflate\r\n"
				   "Connection: keep-alive\r\n"
				   "Authorization: Bearer 0123456789abcdef\r\n"
				   "\r\n";
static char http_response[2048];
static size_t http_response_len;

static void make_response(void)
{
	int n = snprintf(http_response, sizeof http_response,
			 "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\nServer: bench\r\n"
			 "Content-Type: application/json\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\r\n");
	memset(http_response + n, 'x', 1024);
	http_response_len = (size_t)n + 1024;
}

/* Reads exactly n bytes (a response may arrive in pieces). */
static ssize_t read_all(int fd, char *b, size_t n, ssize_t (*rd)(int, void *, size_t))
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = rd(fd, b + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

OP ssize_t op_http_server(int s, char *b)
{
	if (read_all(s, b, sizeof http_request - 1, read) < 0)
		return -1;
	return write(s, http_response, http_response_len);
}
OP ssize_t op_http_client_write(int c) { return write(c, http_request, sizeof http_request - 1); }
OP ssize_t op_http_client_read(int c, char *b) { return read_all(c, b, http_response_len, read); }

/* HTTP/2: the server reads a request and writes its response; the client
 * writes a request, and reads the response. */
OP ssize_t op_h2_server(int s, uint8_t *b, size_t req, const uint8_t *resp, size_t n)
{
	if (read_all(s, (char *)b, req, read) < 0)
		return -1;
	return write(s, resp, n);
}
OP ssize_t op_h2_client_write(int c, const uint8_t *req, size_t n) { return write(c, req, n); }
OP ssize_t op_h2_client_read(int c, uint8_t *b, size_t n) { return read_all(c, (char *)b, n, read); }

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int listener(struct sockaddr_in *a)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(a, 0, sizeof *a);
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	const char *p = getenv("BENCH_PORT");
	a->sin_port = htons(p ? atoi(p) : 0);
	if (bind(l, (struct sockaddr *)a, sizeof *a) || listen(l, 4096))
		die("listen");
	socklen_t len = sizeof *a;
	getsockname(l, (struct sockaddr *)a, &len);
	return l;
}

/* Closing with an RST leaves no TIME_WAIT behind, so ports never run out. */
static void rst_close(int fd)
{
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
}

static void tcp_pair(int l, const struct sockaddr_in *a, int *c, int *s)
{
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (*c < 0 || connect(*c, (const struct sockaddr *)a, sizeof *a))
		die("connect");
	*s = accept(l, 0, 0);
	if (*s < 0)
		die("accept");
	int one = 1;
	setsockopt(*c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void *idle(void *unused)
{
	(void)unused;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: calls OP N\n");
		return 2;
	}
	const char *thread = getenv("BENCH_THREAD");
	pthread_t t;
	if (thread && !strcmp(thread, "1") && pthread_create(&t, NULL, idle, NULL) != 0) {
		fprintf(stderr, "calls: no thread\n");
		return 2;
	}
	const char *op = argv[1];
	long n = atol(argv[2]);
	struct sockaddr_in a;
	int l = listener(&a);
	char buf[64] = { 0 };
	long bad = 0;

	if (!strcmp(op, "connect") || !strcmp(op, "connect_nb")) {
		int nb = !strcmp(op, "connect_nb");
		for (long i = 0; i < n; i++) {
			int c = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);
			if ((nb ? op_connect_nb(c, &a) : op_connect(c, &a)) != 0)
				bad++;
			int s = accept(l, 0, 0);
			rst_close(c);
			close(s);
		}
	} else if (!strcmp(op, "connect_site")) {
		for (long i = 0; i <= n; i++) {
			int c = socket(AF_INET, SOCK_STREAM, 0);
			/* The first round makes the call site known, outside op_*. */
			if ((i ? op_connect_site(c, &a) : site_connect(c, &a)) != 0)
				bad++;
			int s = accept(l, 0, 0);
			rst_close(c);
			close(s);
		}
	} else if (!strcmp(op, "conn_life")) {
		for (long i = 0; i < n; i++) {
			int c = op_socket();
			if (c < 0 || op_connect(c, &a) != 0)
				bad++;
			int s = op_accept(l);
			struct linger lg = { 1, 0 };
			setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			op_close(c);
			op_close(s);
		}
	} else if (!strcmp(op, "close_tcp")) {
		for (long i = 0; i < n; i++) {
			int c, s;
			tcp_pair(l, &a, &c, &s);
			struct linger lg = { 1, 0 };
			setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
			op_close(c);
			close(s);
		}
	} else if (!strcmp(op, "http_server") || !strcmp(op, "http_client")) {
		make_response();
		int c, s;
		tcp_pair(l, &a, &c, &s);
		static char big[4096];
		int server = !strcmp(op, "http_server");
		for (long i = 0; i < n; i++) {
			if (server) {
				if (write(c, http_request, sizeof http_request - 1) < 0 || op_http_server(s, big) < 0 ||
				    read_all(c, big, http_response_len, read) < 0)
					bad++;
			} else {
				if (op_http_client_write(c) < 0 || read_all(s, big, sizeof http_request - 1, read) < 0 ||
				    write(s, http_response, http_response_len) < 0 || op_http_client_read(c, big) < 0)
					bad++;
			}
		}
	} else if (!strcmp(op, "h2_server") || !strcmp(op, "h2_client") || !strcmp(op, "grpc_server") ||
		   !strcmp(op, "grpc_client")) {
		int c, s, grpc = !strncmp(op, "grpc", 4), server = strstr(op, "server") != NULL;
		tcp_pair(l, &a, &c, &s);
		static uint8_t req[4096], resp[4096], in[4096];
		size_t nq = h2_client_open(req), np = h2_server_open(resp);
		if (write(c, req, nq) < 0 || read_all(s, (char *)in, nq, read) < 0 || write(s, resp, np) < 0 ||
		    read_all(c, (char *)in, np, read) < 0)
			die("h2 opening");
		for (long i = 0; i <= n; i++) {
			uint32_t id = (uint32_t)(2 * i + 1);
			nq = h2_request(req, id, i == 0, grpc);
			np = h2_response(resp, id, i == 0, grpc);
			if (i == 0) {   /* fills the dynamic tables, not measured */
				if (write(c, req, nq) < 0 || read_all(s, (char *)in, nq, read) < 0 ||
				    write(s, resp, np) < 0 || read_all(c, (char *)in, np, read) < 0)
					die("h2 first request");
			} else if (server) {
				if (write(c, req, nq) < 0 || op_h2_server(s, in, nq, resp, np) < 0 ||
				    read_all(c, (char *)in, np, read) < 0)
					bad++;
			} else {
				if (op_h2_client_write(c, req, nq) < 0 || read_all(s, (char *)in, nq, read) < 0 ||
				    write(s, resp, np) < 0 || op_h2_client_read(c, in, np) < 0)
					bad++;
			}
		}
	} else if (!strcmp(op, "read_untracked_http") || !strcmp(op, "send_tcp_http")) {
		/* One HTTP exchange first, on a connection that stays open. */
		make_response();
		int hc, hs;
		tcp_pair(l, &a, &hc, &hs);
		static char big[4096];
		if (write(hc, http_request, sizeof http_request - 1) < 0 ||
		    read_all(hs, big, sizeof http_request - 1, read) < 0 ||
		    write(hs, http_response, http_response_len) < 0 || read_all(hc, big, http_response_len, read) < 0)
			die("http exchange");
		int wr, rd;
		if (!strcmp(op, "send_tcp_http")) {
			tcp_pair(l, &a, &wr, &rd);
		} else {
			int p[2];
			if (pipe(p))
				die("pipe");
			wr = p[1], rd = p[0];
		}
		for (long i = 0; i < n; i++) {
			ssize_t w = !strcmp(op, "send_tcp_http") ? op_send(wr, "x", 1) : write(wr, "x", 1);
			ssize_t r = !strcmp(op, "send_tcp_http") ? recv(rd, buf, 1, 0) : op_read(rd, buf, 1);
			if (w != 1 || r != 1)
				bad++;
		}
	} else if (!strcmp(op, "syscall")) {
		for (long i = 0; i < n; i++)
			if (op_syscall() <= 0)
				bad++;
	} else if (!strcmp(op, "close_untracked")) {
		for (long i = 0; i < n; i++) {
			int fd = open("/dev/null", O_RDONLY);
			op_close(fd);
		}
	} else if (!strncmp(op, "send_", 5) || !strncmp(op, "recv_", 5) || !strncmp(op, "read_", 5) ||
		   !strncmp(op, "write_", 6)) {
		int tracked = strstr(op, "_tcp") != NULL;
		int wr, rd;   /* one byte written on wr, read back on rd */
		if (tracked) {
			tcp_pair(l, &a, &wr, &rd);
		} else if (!strncmp(op, "send_", 5) || !strncmp(op, "recv_", 5)) {
			int sv[2];
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
				die("socketpair");
			wr = sv[0], rd = sv[1];
		} else {
			int p[2];
			if (pipe(p))
				die("pipe");
			wr = p[1], rd = p[0];
		}
		int measure_write = !strncmp(op, "send_", 5) || !strncmp(op, "write_", 6);
		int sock_api = !strncmp(op, "send_", 5) || !strncmp(op, "recv_", 5);
		for (long i = 0; i < n; i++) {
			ssize_t w, r;
			if (measure_write)
				w = sock_api ? op_send(wr, "x", 1) : op_write(wr, "x", 1);
			else
				w = sock_api ? send(wr, "x", 1, 0) : write(wr, "x", 1);
			if (!measure_write)
				r = sock_api ? op_recv(rd, buf, 1) : op_read(rd, buf, 1);
			else
				r = sock_api ? recv(rd, buf, 1, 0) : read(rd, buf, 1);
			if (w != 1 || r != 1)
				bad++;
		}
	} else {
		fprintf(stderr, "calls: unknown op %s\n", op);
		return 2;
	}
	if (bad)
		fprintf(stderr, "calls: %ld of %ld iterations failed\n", bad, n);
	printf("ok %s %ld\n", op, n);
	return bad ? 1 : 0;
}
