/* SPDX-License-Identifier: Apache-2.0 */
/* Diagnostics, at most one line per distinct problem and process.
 *
 * Each call site names its problem with a short stable key ("otlp.http.503",
 * "env.OTEL_METRIC_EXPORT_INTERVAL"); the first report of a key is printed,
 * later ones only at NEMOLENS_LOG_LEVEL=debug. Lines start with "nemolens: ".
 * Writes with write(2) from a stack buffer: no allocation, no stdio locks.
 *
 * Where lines go (NEMOLENS_LOG_PATH, docs/safety.md, "Where warnings go"):
 *   NL_LOG_TO_TERMINAL  the default: stderr, and only in the outermost shim
 *                       process of a process tree while its stderr is a
 *                       terminal; every other process writes nothing
 *   NL_LOG_TO_STDERR    stderr, in every process ("stderr")
 *   NL_LOG_TO_FILE      one file shared by the whole tree (an absolute path),
 *                       each line prefixed with time, program name and pid,
 *                       appended with one write(2); the file is opened per
 *                       line with O_NOFOLLOW (a symlink is refused and the
 *                       line goes nowhere) and created with mode 0600
 * Stderr is written only while fd 2 is still the program's stderr.
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

/* Set from the constructor, before any thread of the shim runs. path (for
 * NL_LOG_TO_FILE) is copied; returns -1, changing nothing, when it is not an
 * absolute path shorter than PATH_MAX. */
enum nl_log_output { NL_LOG_TO_TERMINAL, NL_LOG_TO_STDERR, NL_LOG_TO_FILE };
int nl_log_set_output(enum nl_log_output out, const char *path);
enum nl_log_output nl_log_get_output(void);
/* Whether this process is the outermost shim process of its tree (the
 * default until told otherwise); only that one writes to a terminal. A
 * forked child is another process of the tree: never the outermost. */
void nl_log_set_outermost(int outermost);

void nl_log_set_level(enum nl_log_level level);
enum nl_log_level nl_log_get_level(void);

/* Writes "nemolens: <message>" once per key (key may be NULL: always). */
void nl_log(enum nl_log_level level, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define nl_warn_once(key, ...) nl_log(NL_LOG_WARN, (key), __VA_ARGS__)
#define nl_debug(...) nl_log(NL_LOG_DEBUG, NULL, __VA_ARGS__)

#endif
