/* SPDX-License-Identifier: Apache-2.0 */
#include "python.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "env.h"
#include "loadpath.h"
#include "log.h"
#include "real.h"

#define ADAPTER_DIR "nemolens-python"

/* NL_ENV_PYTHON_SAVED holds the program's PYTHONPATH as "u" (unset) or
 * "=" followed by its value (which may be empty). */

/* CPython's short options that take an argument (3.8 to 3.13). */
static bool takes_argument(char c) { return c == 'W' || c == 'X'; }

bool nl_python_argv_isolated(const char *args, size_t len)
{
	const char *end = args + len;
	const char *a = args + strnlen(args, len) + 1;   /* past argv[0] */
	while (a < end) {
		size_t n = strnlen(a, (size_t)(end - a));
		const char *next = a + n + 1;
		if (n < 2 || a[0] != '-')
			return false;   /* the script, or "-" (standard input) */
		if (a[1] == '-') {
			if (n == 2)
				return false;   /* "--": the script follows */
			if (strcmp(a, "--check-hash-based-pycs") == 0)
				next += strnlen(next, next < end ? (size_t)(end - next) : 0) + 1;
			a = next;
			continue;
		}
		for (size_t i = 1; i < n; i++) {
			char c = a[i];
			if (c == 'I' || c == 'E' || c == 'S')
				return true;
			if (c == 'c' || c == 'm')
				return false;   /* the rest is the command, or the module */
			if (takes_argument(c)) {
				if (i + 1 == n && next < end)
					next += strnlen(next, (size_t)(end - next)) + 1;
				break;
			}
		}
		a = next;
	}
	return false;
}

/* The command line, as much of it as fits: options come first. */
static size_t read_cmdline(char *buf, size_t size)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t len = 0;
	while (len < size - 1) {
		ssize_t r = NL_REAL(read)(fd, buf + len, size - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	NL_REAL(close)(fd);
	buf[len] = '\0';
	return len;
}

/* The adapter's directory: NEMOLENS_PYTHON_PATH, else nemolens-python next
 * to this library, wherever it was installed or built. */
static bool adapter_dir(char *out, size_t size)
{
	const char *env = getenv("NEMOLENS_PYTHON_PATH");
	char path[PATH_MAX];
	if (env && *env) {
		if (env[0] != '/' || strlen(env) >= size) {
			nl_warn_once("env.NEMOLENS_PYTHON_PATH", "NEMOLENS_PYTHON_PATH must be an absolute path");
			return false;
		}
		snprintf(out, size, "%s", env);
	} else {
		Dl_info info;
		if (!dladdr((void *)adapter_dir, &info) || !info.dli_fname || !realpath(info.dli_fname, path))
			return false;
		char *slash = strrchr(path, '/');
		if (!slash)
			return false;
		*slash = '\0';
		if (snprintf(out, size, "%s/" ADAPTER_DIR, path) >= (int)size)
			return false;
	}
	/* A PYTHONPATH entry holding a ':' would split in two. */
	if (strchr(out, ':'))
		return false;
	if (snprintf(path, sizeof path, "%s/sitecustomize.py", out) >= (int)sizeof path || access(path, R_OK) != 0) {
		nl_warn_once("python.dir", "no Python adapter in %s: Python processes run without it", out);
		return false;
	}
	return true;
}

/* The PYTHONPATH the shim makes of the program's: the adapter first. */
static char *compose(const char *dir, const char *program)
{
	size_t n = strlen(dir) + (program ? strlen(program) : 0) + 2;
	char *s = malloc(n);
	if (!s)
		return NULL;
	if (program && *program)
		snprintf(s, n, "%s:%s", dir, program);
	else
		snprintf(s, n, "%s", dir);
	return s;
}

/* The program's own PYTHONPATH: the saved one when the current value is
 * the one an ancestor's shim made of it (its hook never ran: Python with
 * -E, or not Python, in between), else the current one. *set tells unset
 * from empty. */
static const char *program_path(const char *dir, bool *set)
{
	const char *cur = getenv("PYTHONPATH");
	const char *saved = getenv(NL_ENV_PYTHON_SAVED);
	*set = cur != NULL;
	if (!saved || (saved[0] != 'u' && saved[0] != '=') || !cur)
		return cur;
	const char *orig = saved[0] == '=' ? saved + 1 : NULL;
	char *made = compose(dir, orig);
	bool ours = made && strcmp(made, cur) == 0;
	free(made);
	if (!ours)
		return cur;
	*set = orig != NULL;
	return orig;
}

static void restore(bool set, const char *value)
{
	if (set)
		setenv("PYTHONPATH", value, 1);
	else
		unsetenv("PYTHONPATH");
	unsetenv(NL_ENV_PYTHON_SAVED);
}

/* Py_BytesMain is exported by every CPython 3.8+ program: python3 and its
 * venv copies and links, and the interpreter of a script run by its #! line
 * (uvicorn, gunicorn), whether libpython is static or shared. A weak
 * reference, which the dynamic linker resolves as it relocates this object,
 * finds it where a dlsym at load would, for a fraction of the cost. */
extern int Py_BytesMain(int argc, char **argv) __attribute__((weak));

/* Out of line: its 8 KiB of buffers would otherwise move the stack of every
 * process's constructor onto a page of its own (a fault) before the check
 * that most processes stop at. */
NL_LOAD_PATH static __attribute__((noinline)) void setup(bool python, bool inherited)
{
	bool on = true;
	const char *v = getenv("NEMOLENS_PYTHON");
	if (v && *v && nl_parse_bool(v, &on) != 0) {
		nl_warn_once("env.NEMOLENS_PYTHON", "NEMOLENS_PYTHON=%s is not on or off: the Python adapter stays on", v);
		on = true;
	}
	char cmdline[4096];
	if (python && on && nl_python_argv_isolated(cmdline, read_cmdline(cmdline, sizeof cmdline)))
		on = false;
	if (!on && !inherited)
		return;

	char dir[PATH_MAX];
	if (!adapter_dir(dir, sizeof dir)) {
		/* Without a directory of ours, an inherited value cannot be told
		 * from the program's own: it is left as it is. */
		return;
	}
	bool set;
	const char *orig = program_path(dir, &set);
	/* Copied: setenv below may free the saved variable's string. */
	char *copy = set ? strdup(orig) : NULL;
	if (set && !copy)
		return;
	if (!python || !on) {
		if (inherited)
			restore(set, copy);
		free(copy);
		return;
	}
	char *path = compose(dir, copy);
	size_t n = (copy ? strlen(copy) : 0) + 2;
	char *saved = malloc(n);
	if (path && saved) {
		snprintf(saved, n, "%s%s", set ? "=" : "u", set ? copy : "");
		/* The environment is the process's own until main runs, and Python
		 * reads it only then. setenv copies both strings. */
		if (setenv(NL_ENV_PYTHON_SAVED, saved, 1) != 0 || setenv("PYTHONPATH", path, 1) != 0)
			restore(set, copy);
	}
	free(saved);
	free(path);
	free(copy);
}

NL_LOAD_PATH void nl_python_setup(void)
{
	bool python = Py_BytesMain != NULL;
	bool inherited = nl_env_get(NL_ENV_PYTHON_SAVED) != NULL;
	if (python || inherited)
		setup(python, inherited);   /* else not Python, nothing to take back: not one change */
}
