#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "real.h"

static _Atomic int log_level = NL_LOG_WARN;

/* Keys already reported: a small fixed table of hashes. When it is full, new
 * keys are still reported once... at the price of being reported again. */
#define SEEN_MAX 128
static _Atomic unsigned long seen[SEEN_MAX];

static dev_t stderr_dev;
static ino_t stderr_ino;
static int stderr_known;

void nl_log_init(void)
{
	struct stat st;
	int saved = errno;
	if (fstat(STDERR_FILENO, &st) == 0) {
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

void nl_log_set_level(enum nl_log_level level) { atomic_store(&log_level, level); }
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

void nl_log(enum nl_log_level level, const char *key, const char *fmt, ...)
{
	int current = atomic_load(&log_level);
	if ((int)level > current)
		return;
	if (key && !first_report(key) && current < NL_LOG_DEBUG)
		return;

	if (!nl_log_stderr_ok())
		return;
	int saved = errno;
	char line[512];
	int n = snprintf(line, sizeof line - 1, "nemolens: ");
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof line - 2)
		len = sizeof line - 2;
	line[len++] = '\n';
	ssize_t w = nl_real_write(STDERR_FILENO, line, len);
	(void)w;
	errno = saved;
}
