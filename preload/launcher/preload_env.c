/* SPDX-License-Identifier: Apache-2.0 */
/* The program's preload environment: where the shim is, the program's
 * LD_PRELOAD with it, and nemolens-run out from under the shim when it was
 * started under it.
 *
 * Finding the shim: NEMOLENS_PRELOAD_PATH if set, else next to this
 * executable (the build tree), else NL_RUN_LIB_RELATIVE from it (bin -> lib
 * of an installed prefix, computed by CMake). Its absolute path goes first in
 * the program's LD_PRELOAD, after any sanitizer runtime (which must stay
 * first); other entries are kept in order, and any other entry naming a
 * libnemolens_preload is dropped, so exactly one copy of the shim is loaded.
 *
 * Nested use: when nemolens-run itself starts with the shim in LD_PRELOAD (an
 * instrumented parent started it), the shim is loaded into this process too.
 * It then re-executes itself once, with the environment it was started with
 * (/proc/self/environ: the shim's constructor may already have added its
 * memory-profiling role variables, which must not reach the program) minus
 * the shim in LD_PRELOAD. So the launcher is never a process of its own in
 * the metrics, and the program's role is decided against the real parent.
 */
#include "preload_env.h"

#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher.h"

#define SHIM_STEM "libnemolens_preload"

/* ---- LD_PRELOAD lists --------------------------------------------------- */

/* The file name part of the n bytes at entry. */
static const char *base_of(const char *entry, size_t n, size_t *len)
{
	const char *b = entry;
	for (size_t i = 0; i < n; i++)
		if (entry[i] == '/')
			b = entry + i + 1;
	*len = n - (size_t)(b - entry);
	return b;
}

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
	size_t p = strlen(prefix);
	return n >= p && memcmp(s, prefix, p) == 0;
}

/* Any copy of the shim, however it is named in the list. */
static bool is_shim(const char *entry, size_t n)
{
	size_t len;
	const char *b = base_of(entry, n, &len);
	return has_prefix(b, len, SHIM_STEM);
}

/* Sanitizer runtimes refuse to run unless they come first in the list. */
static bool is_sanitizer_runtime(const char *entry, size_t n)
{
	static const char *const names[] = { "libasan", "libtsan", "libhwasan", "libubsan", "libclang_rt." };
	size_t len;
	const char *b = base_of(entry, n, &len);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (has_prefix(b, len, names[i]))
			return true;
	return false;
}

/* ld.so separates LD_PRELOAD entries by colons and by spaces. */
#define SEPARATORS ": "

static bool list_has_shim(const char *list)
{
	for (const char *p = list; p && *p;) {
		p += strspn(p, SEPARATORS);
		size_t n = strcspn(p, SEPARATORS);
		if (n && is_shim(p, n))
			return true;
		p += n;
	}
	return false;
}

static void append(char *out, const char *s, size_t n)
{
	size_t used = strlen(out);
	if (used)
		out[used++] = ':';
	memcpy(out + used, s, n);
	out[used + n] = 0;
}

/* The new list: sanitizer runtimes of old, then shim (unless NULL), then the
 * rest of old, every copy of the shim in old left out. malloc'd. */
char *preload_list(const char *shim, const char *old)
{
	if (!old)
		old = "";
	char *out = malloc(strlen(old) + (shim ? strlen(shim) : 0) + 2);
	if (!out)
		return NULL;
	out[0] = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1 && shim)
			append(out, shim, strlen(shim));
		for (const char *p = old; *p;) {
			p += strspn(p, SEPARATORS);
			size_t n = strcspn(p, SEPARATORS);
			if (n && !is_shim(p, n) && is_sanitizer_runtime(p, n) == (pass == 0))
				append(out, p, n);
			p += n;
		}
	}
	return out;
}

/* ---- leaving the shim when started under it ----------------------------- */

static int find_shim_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *name = info->dlpi_name;
	return name && *name && is_shim(name, strlen(name));
}

/* The whole of a /proc file (which stat reports as empty). malloc'd. */
static char *read_proc_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *bigger = realloc(buf, cap * 2 + 1);
		if (!bigger) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = bigger;
		cap *= 2;
	}
	bool failed = ferror(f);
	fclose(f);
	if (!buf || failed) {
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

/* Re-executes this program without the shim if it was loaded into it (see
 * the top of the file). Returns only when there is nothing to do or the
 * re-exec failed; the launcher then simply goes on under the shim. Since the
 * new environment has no shim in LD_PRELOAD, this happens at most once. */
void leave_the_shim(char **argv)
{
	if (!list_has_shim(getenv("LD_PRELOAD")) || !dl_iterate_phdr(find_shim_object, NULL))
		return;
	size_t len;
	char *env = read_proc_file("/proc/self/environ", &len);
	if (!env)
		return;
	size_t count = 0;
	for (size_t i = 0; i < len; i++)
		count += env[i] == 0;
	char **envp = calloc(count + 1, sizeof *envp);
	char *preload = NULL;
	bool seen = false, ok = envp != NULL;
	size_t k = 0;
	for (char *p = env; ok && p < env + len; p += strlen(p) + 1) {
		if (strncmp(p, "LD_PRELOAD=", 11) != 0) {
			envp[k++] = p;
			continue;
		}
		if (seen)               /* a duplicate: getenv saw only the first */
			continue;
		seen = true;
		preload = preload_list(NULL, p + 11);
		if (preload && *preload) {      /* else nothing is left: the variable goes */
			char *entry = malloc(strlen(preload) + 12);
			if (entry)
				envp[k++] = strcat(strcpy(entry, "LD_PRELOAD="), preload);
			free(preload);
			preload = entry;
		}
		ok = preload != NULL;
	}
	if (ok) {
		envp[k] = NULL;
		execve("/proc/self/exe", argv, envp);
	}
	fprintf(stderr, "%s: cannot re-execute without the shim (%s); running under it\n", progname,
		strerror(errno));
	free(preload);
	free(envp);
	free(env);
}

/* ---- finding the shim --------------------------------------------------- */

/* Canonical absolute path of a regular file at path, or NULL (errno set). */
static char *regular_file(const char *path)
{
	char *abs = realpath(path, NULL);
	struct stat st;
	if (!abs)
		return NULL;
	if (stat(abs, &st) != 0) {
		free(abs);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		free(abs);
		errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		return NULL;
	}
	return abs;
}

/* The shim's absolute path, malloc'd, or NULL with the reason in why. */
char *find_shim(char *why, size_t why_len)
{
	const char *forced = getenv("NEMOLENS_PRELOAD_PATH");
	char *found = NULL;
	if (forced && *forced) {
		if (!(found = regular_file(forced))) {
			snprintf(why, why_len, "NEMOLENS_PRELOAD_PATH=%s: %s", forced, strerror(errno));
			return NULL;
		}
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		if (n <= 0) {
			snprintf(why, why_len, "cannot find %s: /proc/self/exe: %s", SHIM_FILE,
				 n < 0 ? strerror(errno) : "empty");
			return NULL;
		}
		exe[n] = 0;
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = 0;
		/* Build tree first: a build directory's launcher must not pick up
		 * an older installed shim. */
		static const char *const rel[] = { ".", NL_RUN_LIB_RELATIVE };
		char path[PATH_MAX + 64];
		for (size_t i = 0; i < sizeof rel / sizeof *rel && !found; i++) {
			snprintf(path, sizeof path, "%s/%s/%s", exe, rel[i], SHIM_FILE);
			found = regular_file(path);
		}
		if (!found) {
			snprintf(why, why_len, "cannot find %s in %s or %s/%s (set NEMOLENS_PRELOAD_PATH)",
				 SHIM_FILE, exe, exe, NL_RUN_LIB_RELATIVE);
			return NULL;
		}
	}
	if (strpbrk(found, SEPARATORS)) {
		snprintf(why, why_len, "%s cannot be preloaded: LD_PRELOAD cannot hold a path with ':' or ' '",
			 found);
		free(found);
		return NULL;
	}
	return found;
}
