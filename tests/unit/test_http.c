/* SPDX-License-Identifier: Apache-2.0 */
/* nl_transport_*: against a scripted HTTP/1.1 server running in a thread.
 *
 * Each request the server reads is answered by the next step of its script
 * (the last step repeats). A step with status 0 is a blackhole: the request is
 * read and never answered. Requests are recorded for inspection after
 * server_stop(), whose join orders them before the test's reads. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "clock.h"
#include "export.h"
#include "helpers.h"
#include "log.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

#define MAX_STEPS 8
#define MAX_REQS 8

struct step {
	int status;                     /* 0: blackhole */
	const char *headers;            /* extra response header lines, each ending in \r\n */
	const void *body;
	size_t body_len;
};

struct request {
	char head[8192];                /* request line and headers, NUL-terminated */
	uint8_t *body;
	size_t body_len;
};

struct server {
	int lfd;
	int wake[2];                    /* written by server_stop */
	unsigned short port;
	char url[64];
	pthread_t thread;
	struct step steps[MAX_STEPS];
	size_t n_steps;
	_Atomic int n_requests;
	_Atomic int n_connections;
	struct request reqs[MAX_REQS];
};

/* Waits until fd is readable; false if the server is being stopped. */
static bool wait_readable(struct server *s, int fd)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = s->wake[0], .events = POLLIN } };
	while (poll(p, 2, -1) < 0)
		;
	return !(p[1].revents & POLLIN);
}

/* Reads one request into r; false on EOF, error or stop. */
static bool read_request(struct server *s, int fd, struct request *r)
{
	char buf[65536];
	size_t len = 0;
	char *end = NULL;
	while (!end) {
		if (len == sizeof buf - 1 || !wait_readable(s, fd))
			return false;
		ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
		if (n <= 0)
			return false;
		len += (size_t)n;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	size_t head_len = (size_t)(end - buf) + 2;
	snprintf(r->head, sizeof r->head, "%.*s", (int)head_len, buf);
	const char *cl = strcasestr(r->head, "\r\nContent-Length:");
	size_t body_len = cl ? strtoul(cl + 17, NULL, 10) : 0;
	r->body = malloc(body_len + 1);
	r->body_len = 0;
	size_t have = len - (head_len + 2);
	memcpy(r->body, end + 4, have < body_len ? have : body_len);
	r->body_len = have < body_len ? have : body_len;
	while (r->body_len < body_len) {
		if (!wait_readable(s, fd))
			return false;
		ssize_t n = recv(fd, r->body + r->body_len, body_len - r->body_len, 0);
		if (n <= 0)
			return false;
		r->body_len += (size_t)n;
	}
	return true;
}

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void respond(int fd, const struct step *st)
{
	char head[1024];
	size_t body_len = st->body ? (st->body_len ? st->body_len : strlen(st->body)) : 0;
	int n = snprintf(head, sizeof head, "HTTP/1.1 %d Scripted\r\nContent-Length: %zu\r\n%s\r\n", st->status,
			 body_len, st->headers ? st->headers : "");
	write_all(fd, head, (size_t)n);
	if (body_len)
		write_all(fd, st->body, body_len);
}

static void serve_connection(struct server *s, int fd)
{
	for (;;) {
		struct request scratch = { 0 };
		int idx = atomic_load(&s->n_requests);
		struct request *r = idx < MAX_REQS ? &s->reqs[idx] : &scratch;
		if (!read_request(s, fd, r)) {
			free(scratch.body);
			return;
		}
		free(scratch.body);
		atomic_fetch_add(&s->n_requests, 1);
		const struct step *st = &s->steps[(size_t)idx < s->n_steps ? (size_t)idx : s->n_steps - 1];
		if (st->status == 0) {
			/* Blackhole: hold the connection until the client leaves. */
			char sink[4096];
			while (wait_readable(s, fd) && recv(fd, sink, sizeof sink, 0) > 0)
				;
			return;
		}
		respond(fd, st);
	}
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	while (wait_readable(s, s->lfd)) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		atomic_fetch_add(&s->n_connections, 1);
		serve_connection(s, fd);
		close(fd);
	}
	return NULL;
}

static struct server *server_start(const struct step *steps, size_t n)
{
	struct server *s = calloc(1, sizeof *s);
	cr_assert_not_null(s);
	cr_assert(n >= 1 && n <= MAX_STEPS);
	memcpy(s->steps, steps, n * sizeof *steps);
	s->n_steps = n;
	cr_assert_eq(pipe(s->wake), 0);
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	cr_assert_eq(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(listen(s->lfd, 16), 0);
	cr_assert_eq(getsockname(s->lfd, (struct sockaddr *)&a, &alen), 0);
	s->port = ntohs(a.sin_port);
	snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u/v1/metrics", s->port);
	cr_assert_eq(pthread_create(&s->thread, NULL, server_main, s), 0);
	return s;
}

static void server_stop(struct server *s)
{
	cr_assert_eq(write(s->wake[1], "x", 1), 1);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	close(s->wake[0]);
	close(s->wake[1]);
}

static void server_free(struct server *s)
{
	for (size_t i = 0; i < MAX_REQS; i++)
		free(s->reqs[i].body);
	free(s);
}

/* The value of header name in r (case-insensitive name), or NULL. */
static const char *header(const struct request *r, const char *name, char *out, size_t out_size)
{
	char pat[128];
	snprintf(pat, sizeof pat, "\r\n%s:", name);
	const char *h = strcasestr(r->head, pat);
	if (!h)
		return NULL;
	h += strlen(pat);
	h += strspn(h, " ");
	snprintf(out, out_size, "%.*s", (int)strcspn(h, "\r"), h);
	return out;
}

static uint64_t deadline_in_ms(long ms) { return nl_monotonic_ns() + (uint64_t)ms * 1000000u; }

static long ms_since(uint64_t start) { return (long)((nl_monotonic_ns() - start) / 1000000u); }

static const uint8_t BODY[] = "\x0a\x03" "abc";  /* any bytes; the server does not decode them */

static struct nl_transport *transport_for(const char *url)
{
	struct nl_transport_config cfg = { .url = url, .timeout_ms = 10000 };
	struct nl_transport *t = nl_transport_new(&cfg);
	cr_assert_not_null(t);
	return t;
}

/* One send against a scripted server; returns the result and fills elapsed. */
static enum nl_send_result send_once(struct server *s, long deadline_ms, long *elapsed_ms)
{
	struct nl_transport *t = transport_for(s->url);
	uint64_t start = nl_monotonic_ns();
	enum nl_send_result r = nl_transport_send(t, BODY, sizeof BODY - 1, deadline_in_ms(deadline_ms), deadline_in_ms(deadline_ms), NULL);
	*elapsed_ms = ms_since(start);
	nl_transport_free(t);
	return r;
}

Test(http, ok_with_empty_body)
{
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	long ms;
	cr_assert_eq(send_once(s, 2000, &ms), NL_SEND_OK);
	server_stop(s);
	cr_assert_eq(s->n_requests, 1);
	cr_assert_eq(s->reqs[0].body_len, sizeof BODY - 1);
	cr_assert_eq(memcmp(s->reqs[0].body, BODY, sizeof BODY - 1), 0);
	cr_assert(strncmp(s->reqs[0].head, "POST /v1/metrics HTTP/1.1\r\n", 27) == 0, "%s", s->reqs[0].head);
	server_free(s);
}

Test(http, any_2xx_is_success)
{
	struct step steps[] = { { .status = 202, .body = "accepted, thanks" } };
	struct server *s = server_start(steps, 1);
	long ms;
	cr_assert_eq(send_once(s, 2000, &ms), NL_SEND_OK);
	server_stop(s);
	cr_assert_eq(s->n_requests, 1);
	server_free(s);
}

Test(http, retries_503_then_succeeds)
{
	struct step steps[] = { { .status = 503 }, { .status = 200 } };
	struct server *s = server_start(steps, 2);
	long ms;
	cr_assert_eq(send_once(s, 3000, &ms), NL_SEND_OK);
	server_stop(s);
	cr_assert_eq(s->n_requests, 2);
	cr_assert_geq(ms, 50, "the first backoff is at least half of 100 ms, took %ld ms", ms);
	cr_assert_lt(ms, 1000, "took %ld ms", ms);
	server_free(s);
}

Test(http, retries_429_502_504)
{
	struct step steps[] = { { .status = 429 }, { .status = 502 }, { .status = 504 }, { .status = 204 } };
	struct server *s = server_start(steps, 4);
	long ms;
	cr_assert_eq(send_once(s, 5000, &ms), NL_SEND_OK);
	server_stop(s);
	cr_assert_eq(s->n_requests, 4);
	/* backoffs of 100, 200 and 400 ms, each jittered down to no less than half */
	cr_assert_geq(ms, 350, "took %ld ms", ms);
	server_free(s);
}

Test(http, honours_retry_after)
{
	struct step steps[] = { { .status = 429, .headers = "Retry-After: 1\r\n" }, { .status = 200 } };
	struct server *s = server_start(steps, 2);
	long ms;
	cr_assert_eq(send_once(s, 5000, &ms), NL_SEND_OK);
	server_stop(s);
	cr_assert_eq(s->n_requests, 2);
	cr_assert_geq(ms, 990, "Retry-After: 1 must delay the retry by a second, took %ld ms", ms);
	cr_assert_lt(ms, 1800, "took %ld ms", ms);
	server_free(s);
}

Test(http, retry_after_past_the_deadline_gives_up_at_once)
{
	struct step steps[] = { { .status = 503, .headers = "Retry-After: 30\r\n" }, { .status = 200 } };
	struct server *s = server_start(steps, 2);
	long ms;
	cr_assert_eq(send_once(s, 1000, &ms), NL_SEND_RETRYABLE_FAILED);
	server_stop(s);
	cr_assert_eq(s->n_requests, 1);
	cr_assert_lt(ms, 500, "took %ld ms", ms);
	server_free(s);
}

Test(http, status_400_is_rejected_without_retry)
{
	struct step steps[] = { { .status = 400, .body = "bad metric name" }, { .status = 200 } };
	struct server *s = server_start(steps, 2);
	long ms;
	cr_assert_eq(send_once(s, 3000, &ms), NL_SEND_REJECTED);
	server_stop(s);
	cr_assert_eq(s->n_requests, 1);
	server_free(s);
}

Test(http, other_5xx_and_4xx_are_rejected_without_retry)
{
	static const int codes[] = { 500, 501, 401, 403, 404, 413 };
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		struct step steps[] = { { .status = codes[i] }, { .status = 200 } };
		struct server *s = server_start(steps, 2);
		long ms;
		cr_assert_eq(send_once(s, 3000, &ms), NL_SEND_REJECTED, "status %d", codes[i]);
		server_stop(s);
		cr_assert_eq(s->n_requests, 1, "status %d", codes[i]);
		server_free(s);
	}
}

Test(http, connection_refused_fails_within_deadline)
{
	/* A bound socket that never listens: connecting to it is refused, and
	 * keeping it bound stops anyone else from taking the port meanwhile. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/metrics", ntohs(a.sin_port));
	struct nl_transport *t = transport_for(url);
	uint64_t start = nl_monotonic_ns();
	enum nl_send_result r = nl_transport_send(t, BODY, sizeof BODY - 1, deadline_in_ms(1000), deadline_in_ms(1000), NULL);
	long ms = ms_since(start);
	nl_transport_free(t);
	close(fd);
	cr_assert_eq(r, NL_SEND_RETRYABLE_FAILED);
	cr_assert_lt(ms, 1200, "took %ld ms", ms);
	cr_assert_geq(ms, 150, "it should have retried with backoff, took %ld ms", ms);
}

Test(http, blackhole_respects_deadline)
{
	struct step steps[] = { { .status = 0 } };
	struct server *s = server_start(steps, 1);
	long ms;
	cr_assert_eq(send_once(s, 300, &ms), NL_SEND_RETRYABLE_FAILED);
	server_stop(s);
	cr_assert_geq(s->n_requests, 1);
	cr_assert_geq(ms, 250, "took %ld ms", ms);
	cr_assert_lt(ms, 500, "took %ld ms", ms);
	server_free(s);
}

Test(http, config_timeout_bounds_a_later_deadline)
{
	struct step steps[] = { { .status = 0 } };
	struct server *s = server_start(steps, 1);
	struct nl_transport_config cfg = { .url = s->url, .timeout_ms = 300 };
	struct nl_transport *t = nl_transport_new(&cfg);
	cr_assert_not_null(t);
	uint64_t start = nl_monotonic_ns();
	cr_assert_eq(nl_transport_send(t, BODY, 3, deadline_in_ms(5000), deadline_in_ms(5000), NULL), NL_SEND_RETRYABLE_FAILED);
	long ms = ms_since(start);
	nl_transport_free(t);
	server_stop(s);
	cr_assert_lt(ms, 500, "took %ld ms", ms);
	server_free(s);
}

Test(http, deadline_already_past_sends_nothing)
{
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	struct nl_transport *t = transport_for(s->url);
	cr_assert_eq(nl_transport_send(t, BODY, 3, nl_monotonic_ns() - 1, nl_monotonic_ns() - 1, NULL), NL_SEND_RETRYABLE_FAILED);
	nl_transport_free(t);
	server_stop(s);
	cr_assert_eq(s->n_requests, 0);
	cr_assert_eq(s->n_connections, 0);
	server_free(s);
}

struct aborter {
	_Atomic bool flag;
	long after_ms;
};

static void *abort_later(void *arg)
{
	struct aborter *a = arg;
	usleep((useconds_t)a->after_ms * 1000);
	atomic_store(&a->flag, true);
	return NULL;
}

static enum nl_send_result send_with_abort(struct server *s, long abort_after_ms, long *elapsed_ms)
{
	struct aborter a = { .after_ms = abort_after_ms };
	struct nl_transport *t = transport_for(s->url);
	pthread_t th;
	uint64_t start = nl_monotonic_ns();
	cr_assert_eq(pthread_create(&th, NULL, abort_later, &a), 0);
	enum nl_send_result r = nl_transport_send(t, BODY, 3, deadline_in_ms(5000), deadline_in_ms(5000), &a.flag);
	*elapsed_ms = ms_since(start);
	pthread_join(th, NULL);
	nl_transport_free(t);
	return r;
}

Test(http, abort_during_transfer)
{
	struct step steps[] = { { .status = 0 } };
	struct server *s = server_start(steps, 1);
	long ms;
	cr_assert_eq(send_with_abort(s, 200, &ms), NL_SEND_ABORTED);
	server_stop(s);
	cr_assert_eq(s->n_requests, 1, "the request was in flight");
	cr_assert_geq(ms, 190, "took %ld ms", ms);
	cr_assert_lt(ms, 400, "abort must be prompt, took %ld ms", ms);
	server_free(s);
}

Test(http, abort_during_backoff)
{
	struct step steps[] = { { .status = 503, .headers = "Retry-After: 3\r\n" }, { .status = 200 } };
	struct server *s = server_start(steps, 2);
	long ms;
	cr_assert_eq(send_with_abort(s, 200, &ms), NL_SEND_ABORTED);
	server_stop(s);
	cr_assert_eq(s->n_requests, 1);
	cr_assert_lt(ms, 400, "abort must be prompt, took %ld ms", ms);
	server_free(s);
}

Test(http, abort_already_set_sends_nothing)
{
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	struct nl_transport *t = transport_for(s->url);
	_Atomic bool flag = true;
	cr_assert_eq(nl_transport_send(t, BODY, 3, deadline_in_ms(2000), deadline_in_ms(2000), &flag), NL_SEND_ABORTED);
	nl_transport_free(t);
	server_stop(s);
	cr_assert_eq(s->n_requests, 0);
	server_free(s);
}

Test(http, gzip_body_and_header)
{
	uint8_t body[20000];
	for (size_t i = 0; i < sizeof body; i++)
		body[i] = (uint8_t)(i % 97 == 0 ? i / 97 : 'm');  /* compressible but not trivial */
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	struct nl_transport_config cfg = { .url = s->url, .gzip = true, .timeout_ms = 5000 };
	struct nl_transport *t = nl_transport_new(&cfg);
	cr_assert_not_null(t);
	cr_assert_eq(nl_transport_send(t, body, sizeof body, deadline_in_ms(3000), deadline_in_ms(3000), NULL), NL_SEND_OK);
	nl_transport_free(t);
	server_stop(s);

	const struct request *r = &s->reqs[0];
	char v[256];
	cr_assert_not_null(header(r, "Content-Encoding", v, sizeof v), "%s", r->head);
	cr_assert_str_eq(v, "gzip");
	cr_assert_str_eq(header(r, "Content-Type", v, sizeof v), "application/x-protobuf");
	cr_assert_lt(r->body_len, sizeof body, "the body should shrink");

	uint8_t out[sizeof body + 16];
	z_stream zs = { 0 };
	cr_assert_eq(inflateInit2(&zs, 16 + MAX_WBITS), Z_OK);
	zs.next_in = r->body;
	zs.avail_in = (uInt)r->body_len;
	zs.next_out = out;
	zs.avail_out = sizeof out;
	cr_assert_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
	cr_assert_eq(zs.total_out, sizeof body);
	inflateEnd(&zs);
	cr_assert_eq(memcmp(out, body, sizeof body), 0);
	server_free(s);
}

Test(http, request_headers)
{
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	struct nl_header extra[] = { { .name = "X-Tenant", .value = "acme" },
				     { .name = "Authorization", .value = "Bearer s3cret" },
				     { .name = "X-Empty", .value = "" },
				     { .name = "Content-Type", .value = "text/plain" },
				     { .name = "Bad Name", .value = "x" },
				     { .name = "X-Injected", .value = "a\r\nX-Evil: 1" } };
	struct nl_transport_config cfg = { .url = s->url, .headers = extra, .n_headers = 6, .timeout_ms = 5000 };
	struct nl_transport *t = nl_transport_new(&cfg);
	cr_assert_not_null(t);
	/* Large enough (over 1 MiB) that curl would otherwise send Expect: 100-continue
	 * and wait a second for an answer this server never gives. */
	size_t big_len = 2u << 20;
	uint8_t *big = calloc(1, big_len);
	uint64_t start = nl_monotonic_ns();
	cr_assert_eq(nl_transport_send(t, big, big_len, deadline_in_ms(3000), deadline_in_ms(3000), NULL), NL_SEND_OK);
	free(big);
	long ms = ms_since(start);
	nl_transport_free(t);
	server_stop(s);

	const struct request *r = &s->reqs[0];
	char v[256];
	cr_assert_str_eq(header(r, "Content-Type", v, sizeof v), "application/x-protobuf", "%s", r->head);
	cr_assert_null(strstr(r->head, "text/plain"), "the user may not override Content-Type: %s", r->head);
	cr_assert_not_null(header(r, "User-Agent", v, sizeof v), "%s", r->head);
	cr_assert(strncmp(v, "nemolens-preload/", 17) == 0 && v[17] != '\0', "User-Agent: %s", v);
	cr_assert_str_eq(header(r, "X-Tenant", v, sizeof v), "acme");
	cr_assert_str_eq(header(r, "Authorization", v, sizeof v), "Bearer s3cret");
	cr_assert_str_eq(header(r, "X-Empty", v, sizeof v), "");
	cr_assert_null(header(r, "X-Evil", v, sizeof v), "%s", r->head);
	cr_assert_null(header(r, "X-Injected", v, sizeof v), "%s", r->head);
	cr_assert_null(header(r, "Expect", v, sizeof v), "%s", r->head);
	cr_assert_null(header(r, "Content-Encoding", v, sizeof v), "%s", r->head);
	cr_assert_eq(r->body_len, big_len);
	cr_assert_lt(ms, 500, "no 100-continue wait, took %ld ms", ms);
	server_free(s);
}

Test(http, custom_user_agent)
{
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	struct nl_transport_config cfg = { .url = s->url, .user_agent = "my-agent/2.0", .timeout_ms = 5000 };
	struct nl_transport *t = nl_transport_new(&cfg);
	cr_assert_not_null(t);
	cr_assert_eq(nl_transport_send(t, BODY, 3, deadline_in_ms(3000), deadline_in_ms(3000), NULL), NL_SEND_OK);
	nl_transport_free(t);
	server_stop(s);
	char v[256];
	cr_assert_str_eq(header(&s->reqs[0], "User-Agent", v, sizeof v), "my-agent/2.0");
	server_free(s);
}

Test(http, connection_is_kept_alive)
{
	struct step steps[] = { { .status = 200 } };
	struct server *s = server_start(steps, 1);
	struct nl_transport *t = transport_for(s->url);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(nl_transport_send(t, BODY, 3, deadline_in_ms(2000), deadline_in_ms(2000), NULL), NL_SEND_OK);
	nl_transport_free(t);
	server_stop(s);
	cr_assert_eq(s->n_requests, 3);
	cr_assert_eq(s->n_connections, 1);
	server_free(s);
}

/* One send with stderr captured into c. */
static enum nl_send_result send_captured(struct server *s, struct capture *c, const char **err)
{
	long ms;
	capture_begin(c);
	enum nl_send_result r = send_once(s, 2000, &ms);
	*err = capture_end(c);
	return r;
}

Test(http, partial_success_is_success_and_warns)
{
	Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsPartialSuccess ps =
		OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_PARTIAL_SUCCESS__INIT;
	ps.rejected_data_points = 3;
	ps.error_message = "metric names must be ASCII";
	Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceResponse resp =
		OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_RESPONSE__INIT;
	resp.partial_success = &ps;
	uint8_t buf[256];
	size_t len = opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__pack(&resp, buf);

	struct step steps[] = { { .status = 200, .body = buf, .body_len = len } };
	struct server *s = server_start(steps, 1);
	struct capture c;
	const char *err;
	enum nl_send_result res = send_captured(s, &c, &err);
	cr_assert_eq(res, NL_SEND_OK);
	server_stop(s);
	cr_assert(strstr(err, "3 data points rejected"), "stderr: %s", err);
	cr_assert(strstr(err, "metric names must be ASCII"), "stderr: %s", err);
	server_free(s);
}

Test(http, garbage_2xx_body_is_success_without_warning)
{
	struct step steps[] = { { .status = 200, .body = "\xff\xff\xff garbage" } };
	struct server *s = server_start(steps, 1);
	struct capture c;
	const char *err;
	enum nl_send_result res = send_captured(s, &c, &err);
	cr_assert_eq(res, NL_SEND_OK);
	server_stop(s);
	cr_assert_null(strstr(err, s->url), "stderr: %s", err);
	cr_assert_null(strstr(err, "partial"), "stderr: %s", err);
	server_free(s);
}

Test(http, rejection_warns_once_per_status_with_server_message)
{
	/* A google.rpc.Status{code: 3, message: "invalid metric name"} */
	static const uint8_t status[] = "\x08\x03\x12\x13invalid metric name";
	struct step steps[] = { { .status = 400, .body = status, .body_len = sizeof status - 1 } };
	struct server *s = server_start(steps, 1);
	struct capture c;
	const char *err;
	enum nl_send_result res1 = send_captured(s, &c, &err);
	cr_assert(strstr(err, "HTTP 400: invalid metric name"), "stderr: %s", err);
	cr_assert(strstr(err, s->url), "the endpoint is named: %s", err);
	enum nl_send_result res2 = send_captured(s, &c, &err);
	cr_assert_null(strstr(err, s->url), "a second identical problem stays quiet: %s", err);
	server_stop(s);
	cr_assert_eq(res1, NL_SEND_REJECTED);
	cr_assert_eq(res2, NL_SEND_REJECTED);
	server_free(s);
}

/* A failure says what becomes of the values: a periodic export's are sent
 * again at the next export; the exit flush's (final) are lost, or kept for
 * another process when the process's segment stays behind. */
Test(http, failure_messages_say_what_becomes_of_the_values)
{
	struct step steps[] = { { .status = 503 }, { .status = 503 }, { .status = 504 } };
	struct server *s = server_start(steps, 3);
	struct nl_transport *t = transport_for(s->url);
	struct capture c;
	capture_begin(&c);
	enum nl_send_result r1 = nl_transport_send(t, BODY, sizeof BODY - 1, deadline_in_ms(2000), 0, NULL);
	nl_transport_set_final(t, true, false);
	enum nl_send_result r2 = nl_transport_send(t, BODY, sizeof BODY - 1, deadline_in_ms(2000), 0, NULL);
	nl_transport_set_final(t, true, true);
	enum nl_send_result r3 = nl_transport_send(t, BODY, sizeof BODY - 1, deadline_in_ms(2000), 0, NULL);
	const char *err = capture_end(&c);
	nl_transport_free(t);
	server_stop(s);
	cr_assert_eq(r1, NL_SEND_RETRYABLE_FAILED);
	cr_assert_eq(r2, NL_SEND_RETRYABLE_FAILED);
	cr_assert_eq(r3, NL_SEND_RETRYABLE_FAILED);
	char want[768];
	snprintf(want, sizeof want, "nemolens: %s answered HTTP 503; the metrics are sent again at the next export\n"
		 "nemolens: exit: could not deliver this process's metrics to %s: HTTP 503; they are lost\n"
		 "nemolens: exit: could not deliver this process's metrics to %s: HTTP 504; they are kept, for the "
		 "next shim process to deliver\n",
		 s->url, s->url, s->url);
	cr_assert_str_eq(err, want);
	server_free(s);

	/* A refused connection, at exit. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t alen = sizeof a;
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/metrics", ntohs(a.sin_port));
	t = transport_for(url);   /* fd stays bound, not listening: refused */
	nl_transport_set_final(t, true, false);
	capture_begin(&c);
	cr_assert_eq(nl_transport_send(t, BODY, sizeof BODY - 1, deadline_in_ms(2000), 0, NULL),
		     NL_SEND_RETRYABLE_FAILED);
	err = capture_end(&c);
	nl_transport_free(t);
	close(fd);
	snprintf(want, sizeof want, "nemolens: exit: could not deliver this process's metrics to %s: ", url);
	cr_assert_eq(strncmp(err, want, strlen(want)), 0, "stderr: %s", err);
	cr_assert(strstr(err, "(curl error 7); they are lost\n"), "stderr: %s", err);
	cr_assert_null(strstr(err, "again"), "stderr: %s", err);
}

Test(http, large_response_body_is_bounded_and_fine)
{
	size_t n = 1u << 20;
	char *big = malloc(n);
	memset(big, 'z', n);
	struct step steps[] = { { .status = 200, .body = big, .body_len = n } };
	struct server *s = server_start(steps, 1);
	long ms;
	cr_assert_eq(send_once(s, 3000, &ms), NL_SEND_OK);
	server_stop(s);
	server_free(s);
	free(big);
}

Test(http, unsupported_scheme_gives_up_at_once)
{
	struct nl_transport *t = transport_for("ftp://127.0.0.1:1/v1/metrics");
	uint64_t start = nl_monotonic_ns();
	cr_assert_eq(nl_transport_send(t, BODY, 3, deadline_in_ms(2000), deadline_in_ms(2000), NULL), NL_SEND_RETRYABLE_FAILED);
	cr_assert_lt(ms_since(start), 200);
	nl_transport_free(t);
}

Test(http, tls_files_are_used)
{
	/* A missing CA file can only fail the way it does if it reached curl; it is
	 * a configuration error, so the export gives up at once instead of retrying. */
	struct step steps[] = { { .status = 0 } };
	struct server *s = server_start(steps, 1);
	char url[64];
	snprintf(url, sizeof url, "https://127.0.0.1:%u/v1/metrics", s->port);
	struct nl_transport_config cfg = { .url = url, .ca_file = "/nonexistent/ca.pem", .timeout_ms = 5000 };
	struct nl_transport *t = nl_transport_new(&cfg);
	cr_assert_not_null(t);
	struct capture c;
	capture_begin(&c);
	uint64_t start = nl_monotonic_ns();
	enum nl_send_result r = nl_transport_send(t, BODY, 3, deadline_in_ms(3000), deadline_in_ms(3000), NULL);
	long ms = ms_since(start);
	const char *text = capture_end(&c);
	nl_transport_free(t);
	server_stop(s);
	server_free(s);
	cr_assert_eq(r, NL_SEND_RETRYABLE_FAILED);
	cr_assert_lt(ms, 500, "took %ld ms", ms);
	cr_assert(strstr(text, "curl error 77"), "%s", text);
}

Test(http, credentials_stay_out_of_messages)
{
	struct step steps[] = { { .status = 403 } };
	struct server *s = server_start(steps, 1);
	char url[128];
	snprintf(url, sizeof url, "http://user:hunter2@127.0.0.1:%u/v1/metrics?token=abc", s->port);
	struct nl_transport *t = transport_for(url);
	struct capture c;
	capture_begin(&c);
	enum nl_send_result r = nl_transport_send(t, BODY, 3, deadline_in_ms(2000), deadline_in_ms(2000), NULL);
	const char *text = capture_end(&c);
	nl_transport_free(t);
	server_stop(s);
	cr_assert_eq(r, NL_SEND_REJECTED);
	cr_assert(strstr(text, "HTTP 403"), "%s", text);
	cr_assert_null(strstr(text, "hunter2"), "%s", text);
	cr_assert_null(strstr(text, "token"), "%s", text);
	char v[128];
	cr_assert_str_eq(header(&s->reqs[0], "Authorization", v, sizeof v), "Basic dXNlcjpodW50ZXIy");
	server_free(s);
}

Test(http, new_without_url_fails)
{
	struct nl_transport_config cfg = { .url = NULL };
	cr_assert_null(nl_transport_new(&cfg));
	cfg.url = "";
	cr_assert_null(nl_transport_new(&cfg));
	cr_assert_null(nl_transport_new(NULL));
	nl_transport_free(NULL);
}

struct parallel {
	struct server *s;
	enum nl_send_result res[5];
};

static void *parallel_sender(void *arg)
{
	struct parallel *p = arg;
	struct nl_transport *t = transport_for(p->s->url);
	for (int i = 0; i < 5; i++)
		p->res[i] = nl_transport_send(t, BODY, 3, deadline_in_ms(3000), deadline_in_ms(3000), NULL);
	nl_transport_free(t);
	return NULL;
}

Test(http, transports_in_parallel_threads)
{
	struct step steps[] = { { .status = 200 } };
	struct parallel p[3];
	pthread_t th[3];
	for (int i = 0; i < 3; i++) {
		p[i].s = server_start(steps, 1);
		cr_assert_eq(pthread_create(&th[i], NULL, parallel_sender, &p[i]), 0);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		server_stop(p[i].s);
		for (int j = 0; j < 5; j++)
			cr_assert_eq(p[i].res[j], NL_SEND_OK, "thread %d send %d", i, j);
		cr_assert_eq(p[i].s->n_requests, 5);
		server_free(p[i].s);
	}
}
