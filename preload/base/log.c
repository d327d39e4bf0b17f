/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loadpath.h"
#include "real.h"

static _Atomic int log_level = NL_LOG_WARN;
static _Atomic int log_output = NL_LOG_TO_TERMINAL;
/* The pid of the outermost process, -1 until the configuration says (the
 * default: outermost). A pid rather than a flag: a fork child is never the
 * outermost, and knows it without a fork handler that would write a page
 * of every child. */
static _Atomic int outermost_pid = -1;
static char log_path[PATH_MAX];         /* written before log_output says FILE */

/* Keys already reported: a small fixed table of hashes. When it is full, new
 * keys are still reported once... at the price of being reported again. */
#define SEEN_MAX 128
static _Atomic unsigned long seen[SEEN_MAX];

/* The empty path fstatat is given: the kernel reads it, and a literal ""
 * would sit on whichever page of read-only data the linker merged it into,
 * one that nothing else at load may touch. This one is on the page of
 * .data that the loader has written already. */
NL_LOAD_STATE static char no_path[1];
NL_LOAD_STATE static dev_t stderr_dev;
NL_LOAD_STATE static ino_t stderr_ino;
NL_LOAD_STATE static int stderr_known;

NL_LOAD_PATH void nl_log_init(void)
{
	struct stat st;
	int saved = errno;
	/* fstat() passes fstatat a "" of libc's own, on a page the kernel then
	 * faults in to read it; no_path is on a page the load writes anyway. */
	if (fstatat(STDERR_FILENO, no_path, &st, AT_EMPTY_PATH) == 0) {
		stderr_dev = st.st_dev;
		stderr_ino = st.st_ino;
		stderr_known = 1;
	}
	errno = saved;
}

int nl_log_stderr_ok(void)
{
	struct stat st;
	int saved = errno;
	int ok = stderr_known && fstat(STDERR_FILENO, &st) == 0 && st.st_dev == stderr_dev &&
		 st.st_ino == stderr_ino;
	errno = saved;
	return ok;
}

NL_LOAD_PATH int nl_log_set_output(enum nl_log_output out, const char *path)
{
	if (out == NL_LOG_TO_FILE) {
		if (!path || path[0] != '/' || strlen(path) >= sizeof log_path)
			return -1;
		memcpy(log_path, path, strlen(path) + 1);
	}
	atomic_store(&log_output, (int)out);
	return 0;
}

enum nl_log_output nl_log_get_output(void) { return (enum nl_log_output)atomic_load(&log_output); }
NL_LOAD_PATH void nl_log_set_outermost(int yes) { atomic_store(&outermost_pid, yes ? (int)getpid() : 0); }

NL_LOAD_PATH void nl_log_set_level(enum nl_log_level level) { atomic_store(&log_level, level); }
enum nl_log_level nl_log_get_level(void) { return atomic_load(&log_level); }

static unsigned long hash_key(const char *key)
{
	unsigned long h = 5381;
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = h * 33 + *p;
	return h ? h : 1;
}

/* True the first time key is seen. */
static int first_report(const char *key)
{
	unsigned long h = hash_key(key);
	for (int i = 0; i < SEEN_MAX; i++) {
		unsigned long cur = atomic_load(&seen[i]);
		if (cur == h)
			return 0;
		if (cur == 0) {
			unsigned long expected = 0;
			if (atomic_compare_exchange_strong(&seen[i], &expected, h))
				return 1;
			if (expected == h)
				return 0;
		}
	}
	return 1;
}

/* "2026-01-31T23:59:59.123Z" for a CLOCK_REALTIME time, computed here
 * rather than with gmtime_r, which takes libc's time zone lock. */
static void format_utc(char *out, size_t size, const struct timespec *ts)
{
	long long days = (long long)ts->tv_sec / 86400, rem = (long long)ts->tv_sec % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	/* Days since 1970-01-01 to a proleptic Gregorian date, in 400-year eras
	 * that start on March 1st. */
	long long z = days + 719468;
	long long era = (z >= 0 ? z : z - 146096) / 146097;
	long long doe = z - era * 146097;
	long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	long long mp = (5 * doy + 2) / 153;
	long long day = doy - (153 * mp + 2) / 5 + 1;
	long long month = mp < 10 ? mp + 3 : mp - 9;
	long long year = yoe + era * 400 + (month <= 2);
	snprintf(out, size, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03ldZ", year, month, day, rem / 3600,
		 rem / 60 % 60, rem % 60, ts->tv_nsec / 1000000);
}

/* Appends one line to the log file. O_NOFOLLOW: a symlink planted at the
 * path is refused; O_NONBLOCK: a FIFO there cannot block the program, and
 * anything but a regular file gets nothing. */
static void write_file(const char *line, size_t len)
{
	int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
		      0600);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		ssize_t w = nl_real_write(fd, line, len);
		(void)w;
	}
	close(fd);
}

/* "<time> <program>[<pid>] " for lines in the shared file. */
static int file_prefix(char *out, size_t size)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char when[96];
	format_utc(when, sizeof when, &ts);
	char name[33];
	size_t n = 0;
	for (const char *p = program_invocation_short_name; p && *p && n < sizeof name - 1; p++)
		name[n++] = (*p > ' ' && *p < 0x7f) ? *p : '?';
	name[n] = '\0';
	return snprintf(out, size, "%s %s[%d] ", when, n ? name : "?", (int)getpid());
}

void nl_log(enum nl_log_level level, const char *key, const char *fmt, ...)
{
	int current = atomic_load(&log_level);
	if ((int)level > current)
		return;
	if (key && !first_report(key) && current < NL_LOG_DEBUG)
		return;

	int out = atomic_load(&log_output);
	int outer = atomic_load(&outermost_pid);
	if (out == NL_LOG_TO_TERMINAL && outer != -1 && outer != (int)getpid())
		return;
	if (out != NL_LOG_TO_FILE && !nl_log_stderr_ok())
		return;
	int saved = errno;
	if (out == NL_LOG_TO_TERMINAL && !isatty(STDERR_FILENO)) {
		errno = saved;
		return;
	}
	char line[768];
	int n = out == NL_LOG_TO_FILE ? file_prefix(line, sizeof line - 1) : 0;
	if (n < 0 || (size_t)n >= sizeof line / 2)
		n = 0;
	n += snprintf(line + n, sizeof line - 1 - (size_t)n, "nemolens: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	if (out == NL_LOG_TO_FILE) {
		write_file(line, len);
	} else {
		ssize_t w = nl_real_write(STDERR_FILENO, line, len);
		(void)w;
	}
	errno = saved;
}
