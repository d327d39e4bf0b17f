/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers for the /proc files the memory sampler and the process figures
 * (procmetrics.h) read.
 *
 * Pure functions over a buffer and its length: the buffer need not be
 * NUL-terminated, may be truncated anywhere, and may hold anything. Each
 * parser returns 0 when it found what it looks for, -1 otherwise (leaving its
 * outputs in an unspecified but initialised state). No I/O, no global state;
 * only nl_environ_role allocates (and frees before returning).
 */
#ifndef NL_PROCFS_H
#define NL_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* /proc/<pid>/stat: "pid (comm) state ppid ... starttime(22) ...".
 * comm may hold spaces and parentheses: it ends at the last ')'. */
struct nl_proc_stat {
	int pid;
	char comm[64];          /* NUL-terminated, truncated to 63 bytes */
	char state;             /* 'R', 'S', 'Z', ... */
	int ppid;
	uint64_t utime, stime;  /* fields 14 and 15: CPU time of every thread, live or ended, in clock ticks */
	uint64_t num_threads;   /* field 20 */
	uint64_t starttime;     /* clock ticks after boot (field 22) */
	/* Field 24: resident pages; has_rss false when the line ends before it. */
	uint64_t rss_pages;
	bool has_rss;
	/* Fields 50 and 51: where the environment block of the process lies. A
	 * fork that has not exec'd has its parent's values; 0 when the kernel
	 * hides them (no ptrace access) or is older than 3.5. */
	uint64_t env_start, env_end;
};
int nl_parse_stat(const char *buf, size_t len, struct nl_proc_stat *out);

/* /proc/<pid>/status: the context switches of the process's first thread
 * (voluntary_ctxt_switches, nonvoluntary_ctxt_switches; the kernel keeps
 * them per thread and shows the thread's own in status). Both lines must be
 * there and end. */
struct nl_proc_switches {
	uint64_t voluntary, involuntary;
};
int nl_parse_status_switches(const char *buf, size_t len, struct nl_proc_switches *out);

/* /proc/<pid>/statm: the second field, resident pages. */
int nl_parse_statm(const char *buf, size_t len, uint64_t *resident_pages);

/* /proc/<pid>/status: VmRSS in bytes (absent for kernel threads and zombies). */
int nl_parse_status_vmrss(const char *buf, size_t len, uint64_t *bytes);

/* /proc/<pid>/smaps_rollup: the "Pss:" line, in bytes. */
int nl_parse_smaps_rollup_pss(const char *buf, size_t len, uint64_t *bytes);

/* /proc/meminfo, in bytes. MemTotal is required; without MemAvailable
 * (kernels before 3.14) available is estimated as MemFree + Buffers + Cached
 * and has_available is false. */
struct nl_meminfo {
	uint64_t total;
	uint64_t available;
	bool has_available;
};
int nl_parse_meminfo(const char *buf, size_t len, struct nl_meminfo *out);

/* /proc/<pid>/environ (NUL-separated KEY=VALUE entries; the last may be cut
 * short). Returns the first value of key and its length in *vlen, or NULL.
 * The value is not NUL-terminated when it is the cut-short last entry. */
const char *nl_environ_get(const char *buf, size_t len, const char *key, size_t *vlen);

/* What a process's environment says about its role for the memory sampler. */
struct nl_env_role {
	bool preloaded;         /* LD_PRELOAD names libnemolens_preload */
	bool profiling;         /* the shim there would be enabled with memory profiling on */
	bool has_parent;        /* NEMOLENS_PARENT_SERVER_NAME is set (a shim ancestor) */
	bool declares_name;     /* NEMOLENS_SERVER_NAME, OTEL_SERVICE_NAME or service.name set */
	bool names_differ;      /* the declared name differs from the inherited one */
	bool other_root;        /* preloaded && profiling && (!has_parent || names_differ) */
};
/* Applies the same rules the shim applies to itself at start (see
 * memsampler.c). The caller still has to check that the shim is really
 * loaded there (a static binary inherits LD_PRELOAD but ignores it). */
void nl_environ_role(const char *buf, size_t len, struct nl_env_role *out);

/* Whether a server with declared name `declared` (NULL: none) and inherited
 * parent server name `inherited` (NULL: none) is a root of its own tree. */
bool nl_server_is_root(const char *declared, const char *inherited);

#endif
