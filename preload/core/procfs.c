/* SPDX-License-Identifier: Apache-2.0 */
#include "procfs.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

/* ---- small scanners ------------------------------------------------------ */

/* Parses an unsigned decimal at *p (below end), skipping leading blanks.
 * Fails on no digits or overflow. */
static int scan_u64(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s >= end || *s < '0' || *s > '9')
		return -1;
	uint64_t v = 0;
	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 0;
}

/* Signed variant for ppid (0 for the idle task's children, -1 never seen). */
static int scan_int(const char **p, const char *end, int *out)
{
	const char *s = *p;
	while (s < end && *s == ' ')
		s++;
	bool neg = false;
	if (s < end && *s == '-') {
		neg = true;
		s++;
	}
	uint64_t v;
	if (scan_u64(&s, end, &v) != 0 || v > 0x7fffffff)
		return -1;
	*p = s;
	*out = neg ? -(int)v : (int)v;
	return 0;
}

/* Skips one space-separated token (after any spaces). */
static int skip_token(const char **p, const char *end)
{
	const char *s = *p;
	while (s < end && *s == ' ')
		s++;
	if (s >= end || *s == '\n')
		return -1;
	while (s < end && *s != ' ' && *s != '\n')
		s++;
	*p = s;
	return 0;
}

/* Finds the line starting with `key` (including its ':'), returns the value
 * in kB converted to bytes. Lines are "Key:   1234 kB". */
static int find_kb_line(const char *buf, size_t len, const char *key, uint64_t *bytes)
{
	size_t klen = strlen(key);
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		if ((size_t)(line_end - p) > klen && memcmp(p, key, klen) == 0) {
			const char *v = p + klen;
			uint64_t kb;
			if (scan_u64(&v, line_end, &kb) != 0)
				return -1;
			while (v < line_end && *v == ' ')
				v++;
			/* The unit must be there: a line cut short could have lost digits. */
			if (line_end - v < 2 || memcmp(v, "kB", 2) != 0)
				return -1;
			if (kb > UINT64_MAX / 1024)
				return -1;
			*bytes = kb * 1024;
			return 0;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	return -1;
}

/* ---- the files ------------------------------------------------------------ */

int nl_parse_stat(const char *buf, size_t len, struct nl_proc_stat *out)
{
	memset(out, 0, sizeof *out);
	if (!buf || len == 0)
		return -1;
	const char *end = buf + len;
	const char *p = buf;
	if (scan_int(&p, end, &out->pid) != 0 || out->pid <= 0)
		return -1;
	if (end - p < 2 || p[0] != ' ' || p[1] != '(')
		return -1;
	const char *comm = p + 2;
	/* comm is whatever the program set (up to 15 bytes, any of them ')' or
	 * ' '): it ends at the last ')' of the line. */
	const char *close = NULL;
	for (const char *q = end; q > comm;) {
		q--;
		if (*q == ')') {
			close = q;
			break;
		}
	}
	if (!close)
		return -1;
	size_t clen = (size_t)(close - comm);
	if (clen >= sizeof out->comm)
		clen = sizeof out->comm - 1;
	memcpy(out->comm, comm, clen);
	out->comm[clen] = 0;
	p = close + 1;
	/* field 3: state */
	if (end - p < 2 || p[0] != ' ' || p[1] == ' ' || p[1] == '\n')
		return -1;
	out->state = p[1];
	p += 2;
	/* field 4: ppid */
	if (scan_int(&p, end, &out->ppid) != 0)
		return -1;
	/* fields 5..21, of which 14, 15 (utime, stime) and 20 (num_threads)
	 * are kept; field 22: starttime */
	for (int f = 5; f <= 21; f++) {
		uint64_t *keep = f == 14 ? &out->utime : f == 15 ? &out->stime : f == 20 ? &out->num_threads : NULL;
		if (keep ? scan_u64(&p, end, keep) != 0 : skip_token(&p, end) != 0)
			return -1;
	}
	if (scan_u64(&p, end, &out->starttime) != 0)
		return -1;
	/* A buffer cut inside field 22 would give a wrong value: the field must end. */
	if (p >= end || (*p != ' ' && *p != '\n'))
		return -1;
	/* Optional: field 23 skipped, 24 (rss); then up to 49 skipped, 50 and
	 * 51. Anything missing or cut short leaves those at 0. */
	const char *q = p;
	uint64_t rss;
	if (skip_token(&q, end) != 0 || scan_u64(&q, end, &rss) != 0 || q >= end || (*q != ' ' && *q != '\n'))
		return 0;
	out->rss_pages = rss;
	out->has_rss = true;
	uint64_t es, ee;
	for (int f = 25; f <= 49; f++)
		if (skip_token(&q, end) != 0)
			return 0;
	if (scan_u64(&q, end, &es) != 0 || scan_u64(&q, end, &ee) != 0 || q >= end || (*q != ' ' && *q != '\n'))
		return 0;
	out->env_start = es;
	out->env_end = ee;
	return 0;
}

/* Finds the line starting with `key` (including its ':') and returns its
 * number, which the line's end must follow: a line cut short could have
 * lost digits. */
static int find_count_line(const char *buf, size_t len, const char *key, uint64_t *v)
{
	size_t klen = strlen(key);
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return -1;
		if ((size_t)(nl - p) > klen && memcmp(p, key, klen) == 0) {
			const char *s = p + klen;
			if (scan_u64(&s, nl, v) != 0 || s != nl)
				return -1;
			return 0;
		}
		p = nl + 1;
	}
	return -1;
}

int nl_parse_status_switches(const char *buf, size_t len, struct nl_proc_switches *out)
{
	memset(out, 0, sizeof *out);
	if (!buf)
		return -1;
	if (find_count_line(buf, len, "voluntary_ctxt_switches:", &out->voluntary) != 0 ||
	    find_count_line(buf, len, "nonvoluntary_ctxt_switches:", &out->involuntary) != 0) {
		memset(out, 0, sizeof *out);
		return -1;
	}
	return 0;
}

int nl_parse_statm(const char *buf, size_t len, uint64_t *resident_pages)
{
	*resident_pages = 0;
	if (!buf)
		return -1;
	const char *p = buf, *end = buf + len;
	uint64_t size;
	if (scan_u64(&p, end, &size) != 0 || p >= end || *p != ' ')
		return -1;
	if (scan_u64(&p, end, resident_pages) != 0)
		return -1;
	if (p >= end || (*p != ' ' && *p != '\n'))
		return -1;
	return 0;
}

int nl_parse_status_vmrss(const char *buf, size_t len, uint64_t *bytes)
{
	*bytes = 0;
	if (!buf)
		return -1;
	return find_kb_line(buf, len, "VmRSS:", bytes);
}

int nl_parse_smaps_rollup_pss(const char *buf, size_t len, uint64_t *bytes)
{
	*bytes = 0;
	if (!buf)
		return -1;
	return find_kb_line(buf, len, "Pss:", bytes);
}

int nl_parse_meminfo(const char *buf, size_t len, struct nl_meminfo *out)
{
	memset(out, 0, sizeof *out);
	if (!buf)
		return -1;
	if (find_kb_line(buf, len, "MemTotal:", &out->total) != 0)
		return -1;
	if (find_kb_line(buf, len, "MemAvailable:", &out->available) == 0) {
		out->has_available = true;
	} else {
		uint64_t free_b, buffers = 0, cached = 0;
		if (find_kb_line(buf, len, "MemFree:", &free_b) != 0)
			return -1;
		(void)find_kb_line(buf, len, "Buffers:", &buffers);
		(void)find_kb_line(buf, len, "Cached:", &cached);
		out->available = free_b + buffers + cached;
	}
	if (out->available > out->total)
		out->available = out->total;
	return 0;
}

const char *nl_environ_get(const char *buf, size_t len, const char *key, size_t *vlen)
{
	*vlen = 0;
	if (!buf)
		return NULL;
	size_t klen = strlen(key);
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *z = memchr(p, 0, (size_t)(end - p));
		const char *e = z ? z : end;
		if ((size_t)(e - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == '=') {
			*vlen = (size_t)(e - p) - klen - 1;
			return p + klen + 1;
		}
		if (!z)
			break;
		p = z + 1;
	}
	return NULL;
}

/* ---- roles ----------------------------------------------------------------- */

/* A NUL-terminated copy of the value of key, NULL when unset or empty (an
 * empty variable is unset, as in config.c). */
static char *env_dup(const char *buf, size_t len, const char *key)
{
	size_t n;
	const char *v = nl_environ_get(buf, len, key, &n);
	if (!v || n == 0)
		return NULL;
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, v, n);
		s[n] = 0;
	}
	return s;
}

/* The first of names that holds a valid boolean, as config.c reads it
 * (OTEL_* accept only true/false); dflt when none does. */
static bool env_flag(const char *buf, size_t len, const char *const *names, bool dflt)
{
	for (; *names; names++) {
		char *v = env_dup(buf, len, *names);
		if (!v)
			continue;
		bool b;
		bool ok = nl_parse_flag(*names, v, &b) == 0;
		free(v);
		if (ok)
			return b;
	}
	return dflt;
}

/* The declared server name, as config.c computes it, or NULL (sanitized the
 * same way, so that it compares equal to what the shim there computed). */
static char *declared_name(const char *buf, size_t len)
{
	char *v = env_dup(buf, len, "NEMOLENS_SERVER_NAME");
	if (!v && (v = env_dup(buf, len, "NEMO_GYM_CONFIG_PATH"))) {
		/* A server NeMo Gym's orchestrator started: its name, when it is
		 * one (config.c's rule: under 256 bytes, no control character). */
		size_t n = strnlen(v, 256);
		for (size_t i = 0; i < n; i++) {
			if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) {
				n = 256;
				break;
			}
		}
		if (n >= 256) {
			free(v);
			v = NULL;
		}
	}
	if (!v)
		v = env_dup(buf, len, "OTEL_SERVICE_NAME");
	if (!v) {
		char *attrs = env_dup(buf, len, "OTEL_RESOURCE_ATTRIBUTES");
		if (attrs) {
			struct nl_header kv[NL_MAX_RESOURCE_ATTRS];
			int n = nl_parse_kv_list(attrs, kv, NL_MAX_RESOURCE_ATTRS);
			for (int i = 0; i < n && !v; i++)
				if (strcmp(kv[i].name, "service.name") == 0 && kv[i].value[0])
					v = strdup(kv[i].value);
			if (n > 0)
				nl_free_kv_list(kv, (size_t)n);
			free(attrs);
		}
	}
	if (!v)
		return NULL;
	char *s = nl_utf8_sanitized_dup(v);
	free(v);
	return s;
}

bool nl_server_is_root(const char *declared, const char *inherited)
{
	return !inherited || !*inherited || (declared && strcmp(declared, inherited) != 0);
}

void nl_environ_role(const char *buf, size_t len, struct nl_env_role *out)
{
	static const char *const sdk_disabled[] = { "OTEL_SDK_DISABLED", NULL };
	static const char *const enabled[] = { "NEMOLENS_ENABLED", "NEMO_GYM_OTEL_ENABLED", NULL };
	static const char *const metrics[] = { "NEMOLENS_METRICS_ENABLED", "NEMO_GYM_OTEL_METRICS_ENABLED", NULL };
	static const char *const memory[] = { "NEMOLENS_MEMORY_PROFILING", "NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED",
					      NULL };
	memset(out, 0, sizeof *out);
	size_t n;
	const char *pre = nl_environ_get(buf, len, "LD_PRELOAD", &n);
	static const char needle[] = "libnemolens_preload";
	if (pre && n >= sizeof needle - 1)
		for (size_t i = 0; i + sizeof needle - 1 <= n && !out->preloaded; i++)
			out->preloaded = memcmp(pre + i, needle, sizeof needle - 1) == 0;
	out->profiling = !env_flag(buf, len, sdk_disabled, false) && env_flag(buf, len, enabled, true) &&
			 env_flag(buf, len, metrics, true) && env_flag(buf, len, memory, false);
	char *inherited = env_dup(buf, len, "NEMOLENS_PARENT_SERVER_NAME");
	char *declared = declared_name(buf, len);
	out->has_parent = inherited != NULL;
	out->declares_name = declared != NULL;
	out->names_differ = inherited && declared && strcmp(inherited, declared) != 0;
	out->other_root = out->preloaded && out->profiling && nl_server_is_root(declared, inherited);
	free(inherited);
	free(declared);
}
