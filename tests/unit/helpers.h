/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the unit tests (tests/unit/test_*.c), one Criterion
 * executable each: every helper is static inline, so a test that does not
 * use one compiles none of it. A helper that checks its input fails the
 * calling test with cr_assert, naming what it was given.
 *
 *   addr4          an IPv4 socket address from text and a port
 *   fixture_path   the path of a file under tests/unit/fixtures
 *   appendf        printf-style text appended to a test's buffer; put(r, ...)
 *                  appends to r->text at r->len
 *   snapshot       a registry snapshot made of metrics written by hand
 *   find_metric    the metric of a snapshot by name
 *   attr           the value of a point's string attribute by key
 *   capture_begin  stderr, and the shim's log lines, sent to a file ...
 *   capture_end    ... until here, which answers what was written
 */
#ifndef NL_TEST_HELPERS_H
#define NL_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "snapshot.h"

/* ---- addresses and files ------------------------------------------------------ */

/* The IPv4 socket address of ip (dotted quad) and port. */
static inline struct sockaddr_in addr4(const char *ip, int port)
{
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	cr_assert_eq(inet_pton(AF_INET, ip, &sin.sin_addr), 1, "bad test address %s", ip);
	return sin;
}

/* Writes into path (size bytes) the path of fixtures/<dir>/<name>, next to this file. */
static inline void fixture_path(char *path, size_t size, const char *dir, const char *name)
{
	const char *src = __FILE__, *slash = strrchr(src, '/');
	int len = slash ? (int)(slash - src) : 1;
	int n = snprintf(path, size, "%.*s/fixtures/%s/%s", len, slash ? src : ".", dir, name);
	cr_assert(n > 0 && (size_t)n < size, "fixture path too long: %s/%s", dir, name);
}

/* ---- text --------------------------------------------------------------------- */

/* Appends printf-style text to buf (size bytes) at *len, which it advances. */
__attribute__((format(printf, 4, 5))) static inline void appendf(char *buf, size_t size, size_t *len,
								 const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0 && (size_t)n < size - *len, "text too long");
	*len += (size_t)n;
}

/* Appends printf-style text to r->text (an array) at r->len. */
#define put(r, ...) appendf((r)->text, sizeof (r)->text, &(r)->len, __VA_ARGS__)

/* ---- snapshots ---------------------------------------------------------------- */

/* A snapshot of metrics[0..n), as the registry would hand it to an encoder:
 * resource service.name=svc, scope nemolens 9.8.7 (not this build's version),
 * its point count the sum of the metrics'. */
static inline struct nl_snapshot snapshot(struct nl_metric *metrics, size_t n)
{
	static const struct nl_attr resource[] = { NL_ATTR_S("service.name", "svc") };
	size_t points = 0;
	for (size_t i = 0; i < n; i++)
		points += metrics[i].n_points;
	return (struct nl_snapshot){ .resource = resource, .n_resource = 1, .scope_name = "nemolens",
				     .scope_version = "9.8.7", .metrics = metrics, .n_metrics = n,
				     .n_points = points };
}

/* The metric of snap called name, or NULL. */
static inline const struct nl_metric *find_metric(const struct nl_snapshot *snap, const char *name)
{
	for (size_t i = 0; i < snap->n_metrics; i++)
		if (strcmp(snap->metrics[i].name, name) == 0)
			return &snap->metrics[i];
	return NULL;
}

/* The value of p's attribute key, or NULL; fails the test where it is not a string. */
static inline const char *attr(const struct nl_point *p, const char *key)
{
	for (size_t i = 0; i < p->n_attrs; i++)
		if (strcmp(p->attrs[i].key, key) == 0) {
			cr_assert_eq(p->attrs[i].type, NL_ATTR_STR, "attribute %s is not a string", key);
			return p->attrs[i].v.s;
		}
	return NULL;
}

/* ---- what the shim writes to stderr ---------------------------------------------- */

/* Standard error as it was, and what was written to it meanwhile. */
struct capture {
	int fd, saved;
	char text[4096];
};

/* Sends stderr, and the shim's log lines (always, terminal or not), to a
 * fresh file until capture_end(c). */
static inline void capture_begin(struct capture *c)
{
	char path[] = "/tmp/nl_test_stderr_XXXXXX";
	c->fd = mkstemp(path);
	cr_assert_geq(c->fd, 0);
	unlink(path);
	fflush(stderr);
	c->saved = dup(STDERR_FILENO);
	cr_assert_geq(c->saved, 0);
	cr_assert_geq(dup2(c->fd, STDERR_FILENO), 0);
	nl_log_init();   /* the capture file is stderr now (see log.h) */
	/* Not a terminal: by default nothing would be written to it. */
	nl_log_set_output(NL_LOG_TO_STDERR, NULL);
}

/* Puts stderr back and answers what was written to it since capture_begin(c),
 * as a string in c; fails the test where it does not fit there. */
static inline const char *capture_end(struct capture *c)
{
	fflush(stderr);
	dup2(c->saved, STDERR_FILENO);
	nl_log_init();
	close(c->saved);
	struct stat st;
	cr_assert_eq(fstat(c->fd, &st), 0);
	cr_assert_lt((size_t)st.st_size, sizeof c->text, "%lld bytes written to stderr", (long long)st.st_size);
	ssize_t n = pread(c->fd, c->text, sizeof c->text - 1, 0);
	c->text[n > 0 ? n : 0] = '\0';
	close(c->fd);
	return c->text;
}

#endif
