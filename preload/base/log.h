/* Diagnostics on stderr, at most one line per distinct problem.
 *
 * Each call site names its problem with a short stable key ("otlp.http.503",
 * "env.OTEL_METRIC_EXPORT_INTERVAL"); the first report of a key is printed,
 * later ones only at NEMOLENS_LOG_LEVEL=debug. Lines start with "nemolens: ".
 * Writes with write(2) from a stack buffer: no allocation, no stdio locks.
 */
#ifndef NL_LOG_H
#define NL_LOG_H

enum nl_log_level { NL_LOG_NONE, NL_LOG_ERROR, NL_LOG_WARN, NL_LOG_INFO, NL_LOG_DEBUG };

/* Remembers what fd 2 is now (from the constructor). Programs may close
 * stderr and reuse fd 2 for a socket or a file; the shim then never writes
 * there, since its lines would corrupt the program's own data. */
void nl_log_init(void);
/* True when fd 2 is still the stderr the program started with. */
int nl_log_stderr_ok(void);

void nl_log_set_level(enum nl_log_level level);
enum nl_log_level nl_log_get_level(void);

/* Prints "nemolens: <message>" once per key (key may be NULL: always print). */
void nl_log(enum nl_log_level level, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define nl_warn_once(key, ...) nl_log(NL_LOG_WARN, (key), __VA_ARGS__)
#define nl_debug(...) nl_log(NL_LOG_DEBUG, NULL, __VA_ARGS__)

#endif
