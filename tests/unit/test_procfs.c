/* SPDX-License-Identifier: Apache-2.0 */
/* The /proc parsers of the memory sampler, on files recorded from a real
 * kernel (6.x) and on hand-made truncated and malformed ones
 * (tests/unit/fixtures/proc/, see README there). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "log.h"
#include "procfs.h"

static char buf[65536];
static size_t len;

/* Loads fixtures/proc/<name> (next to this source file) into buf. */
static void load(const char *name)
{
	char path[4096];
	fixture_path(path, sizeof path, "proc", name);
	int fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "fixture %s: %s", path, strerror(errno));
	ssize_t n = read(fd, buf, sizeof buf);
	close(fd);
	cr_assert(n >= 0);
	len = (size_t)n;
}

static void quiet(void)
{
	nl_log_set_level(NL_LOG_NONE);
}

TestSuite(procfs, .init = quiet);

/* ---- stat ------------------------------------------------------------------ */

Test(procfs, stat_real)
{
	struct nl_proc_stat st;
	load("stat_self");
	cr_assert_eq(nl_parse_stat(buf, len, &st), 0);
	cr_assert_eq(st.pid, 12441);
	cr_assert_str_eq(st.comm, "cat");
	cr_assert_eq(st.state, 'R');
	cr_assert_eq(st.ppid, 12438);
	cr_assert_eq(st.starttime, 257300);
	cr_assert_eq(st.env_start, 140722403408507ull);
	cr_assert_eq(st.env_end, 140722403409899ull);
}

Test(procfs, stat_comm_with_spaces_and_parentheses)
{
	struct nl_proc_stat st;
	load("stat_weird_comm");
	cr_assert_eq(nl_parse_stat(buf, len, &st), 0);
	cr_assert_eq(st.pid, 12478);
	cr_assert_str_eq(st.comm, "x) (y z");
	cr_assert_eq(st.state, 'S');
	cr_assert_eq(st.ppid, 12477);
	cr_assert_eq(st.starttime, 257318);
}

Test(procfs, stat_comm_made_of_parentheses)
{
	static const char s[] = "7 ()) ) (() Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 99 20\n";
	struct nl_proc_stat st;
	cr_assert_eq(nl_parse_stat(s, sizeof s - 1, &st), 0);
	cr_assert_str_eq(st.comm, ")) ) ((");
	cr_assert_eq(st.state, 'Z');
	cr_assert_eq(st.ppid, 1);
	cr_assert_eq(st.starttime, 99);
	cr_assert_eq(st.env_start, 0);   /* no such fields: 0 */
}

Test(procfs, stat_kernel_thread_and_zombie)
{
	struct nl_proc_stat st;
	load("stat_kthread");
	cr_assert_eq(nl_parse_stat(buf, len, &st), 0);
	cr_assert_str_eq(st.comm, "kthreadd");
	cr_assert_eq(st.ppid, 0);
	cr_assert_eq(st.starttime, 25);
	cr_assert_eq(st.env_start, 0);
	load("stat_zombie");
	cr_assert_eq(nl_parse_stat(buf, len, &st), 0);
	cr_assert_eq(st.state, 'Z');
	cr_assert_eq(st.ppid, 12551);
	cr_assert_eq(st.starttime, 257341);
}

Test(procfs, stat_old_kernel_without_env_fields)
{
	struct nl_proc_stat st;
	load("stat_old_kernel");
	cr_assert_eq(nl_parse_stat(buf, len, &st), 0);
	cr_assert_eq(st.starttime, 257300);
	cr_assert_eq(st.env_start, 0);
	cr_assert_eq(st.env_end, 0);
}

Test(procfs, stat_truncated_and_malformed)
{
	struct nl_proc_stat st;
	load("stat_truncated");   /* cut after field 25: what is there is enough */
	cr_assert_eq(nl_parse_stat(buf, len, &st), 0);
	cr_assert_eq(st.starttime, 257300);
	cr_assert_eq(st.env_start, 0);
	load("stat_cut_starttime");   /* cut inside field 22 */
	cr_assert_eq(nl_parse_stat(buf, len, &st), -1);
	load("stat_malformed");
	cr_assert_eq(nl_parse_stat(buf, len, &st), -1);
	/* every prefix of a real line either fails or gives the right start time */
	load("stat_self");
	for (size_t n = 0; n < len; n++)
		if (nl_parse_stat(buf, n, &st) == 0)
			cr_assert_eq(st.starttime, 257300, "prefix %zu", n);
	static const char *const bad[] = { "", "(", "12", "12 (x)", "12 (x) ", "x (a) S 1", "0 (a) S 1 2",
					   "12 (a) S x 1", "12 (a) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -5 ",
					   "99999999999 (a) S 1" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(nl_parse_stat(bad[i], strlen(bad[i]), &st), -1, "%s", bad[i]);
	cr_assert_eq(nl_parse_stat(NULL, 0, &st), -1);
}

/* The fields the process figures take, on lines written from proc(5): each
 * field holds a value of its own, so that a field taken for its neighbour
 * shows. */
Test(procfs, stat_cpu_threads_rss)
{
	/* pid comm state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime(14) stime(15) cutime cstime priority nice
	 * num_threads(20) itrealvalue starttime(22) vsize rss(24) rsslim ... */
	static const char s[] = "4242 (my worker) S 1 4242 4242 0 -1 4194560 1000 11 12 13 1234 567 89 90 20 0 7 0 "
				"99887 12345678 3072 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 "
				"0 0 0 0\n";
	struct nl_proc_stat st;
	cr_assert_eq(nl_parse_stat(s, sizeof s - 1, &st), 0);
	cr_assert_eq(st.utime, 1234);
	cr_assert_eq(st.stime, 567);
	cr_assert_eq(st.num_threads, 7);
	cr_assert_eq(st.starttime, 99887);
	cr_assert(st.has_rss);
	cr_assert_eq(st.rss_pages, 3072);
	/* A zombie (proc(5): the fields stay, its memory is gone). */
	static const char z[] = "77 (gone) Z 1 77 77 0 -1 4227148 67 0 0 0 250 30 0 0 20 0 1 0 500 0 0 "
				"18446744073709551615 0 0\n";
	cr_assert_eq(nl_parse_stat(z, sizeof z - 1, &st), 0);
	cr_assert_eq(st.state, 'Z');
	cr_assert_eq(st.utime, 250);
	cr_assert_eq(st.stime, 30);
	cr_assert(st.has_rss);
	cr_assert_eq(st.rss_pages, 0);
}

Test(procfs, stat_rss_missing_or_cut)
{
	struct nl_proc_stat st;
	/* The line ends after starttime: CPU and threads, no RSS. */
	static const char a[] = "5 (a) R 1 5 5 0 -1 0 0 0 0 0 40 2 0 0 20 0 3 0 900\n";
	cr_assert_eq(nl_parse_stat(a, sizeof a - 1, &st), 0);
	cr_assert_eq(st.utime, 40);
	cr_assert_eq(st.num_threads, 3);
	cr_assert_not(st.has_rss);
	/* Cut inside rss: a value that may have lost digits is not taken. */
	static const char b[] = "5 (a) R 1 5 5 0 -1 0 0 0 0 0 40 2 0 0 20 0 3 0 900 8192 30";
	cr_assert_eq(nl_parse_stat(b, sizeof b - 1, &st), 0);
	cr_assert_not(st.has_rss);
	cr_assert_eq(st.rss_pages, 0);
	/* utime, stime or num_threads that are not numbers: not a stat line. */
	static const char *const bad[] = {
		"5 (a) R 1 5 5 0 -1 0 0 0 0 0 x 2 0 0 20 0 3 0 900\n",
		"5 (a) R 1 5 5 0 -1 0 0 0 0 0 40 -2 0 0 20 0 3 0 900\n",
		"5 (a) R 1 5 5 0 -1 0 0 0 0 0 40 2 0 0 20 0 many 0 900\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(nl_parse_stat(bad[i], strlen(bad[i]), &st), -1, "%s", bad[i]);
	/* every prefix of a whole line either fails or gives the right values */
	static const char s[] = "4242 (w) S 1 4242 4242 0 -1 4194560 1000 11 12 13 1234 567 89 90 20 0 7 0 99887 "
				"12345678 3072 18446744073709551615\n";
	for (size_t n = 0; n < sizeof s - 1; n++)
		if (nl_parse_stat(s, n, &st) == 0) {
			cr_assert_eq(st.utime, 1234, "prefix %zu", n);
			cr_assert_eq(st.stime, 567, "prefix %zu", n);
			cr_assert_eq(st.num_threads, 7, "prefix %zu", n);
			cr_assert(!st.has_rss || st.rss_pages == 3072, "prefix %zu", n);
		}
}

Test(procfs, status_switches)
{
	/* The end of a status file as proc(5) describes it. */
	static const char s[] = "Name:\tworker\nState:\tS (sleeping)\nThreads:\t7\nVmRSS:\t    9000 kB\n"
				"Cpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t150\n"
				"nonvoluntary_ctxt_switches:\t545\n";
	struct nl_proc_switches sw;
	cr_assert_eq(nl_parse_status_switches(s, sizeof s - 1, &sw), 0);
	cr_assert_eq(sw.voluntary, 150);
	cr_assert_eq(sw.involuntary, 545);
	/* Either order; the involuntary line is never taken for the voluntary one. */
	static const char r[] = "nonvoluntary_ctxt_switches:\t9\nvoluntary_ctxt_switches:\t4\n";
	cr_assert_eq(nl_parse_status_switches(r, sizeof r - 1, &sw), 0);
	cr_assert_eq(sw.voluntary, 4);
	cr_assert_eq(sw.involuntary, 9);
	/* Cut inside the last number, before its newline: not taken. */
	static const char cut[] = "voluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t54";
	cr_assert_eq(nl_parse_status_switches(cut, sizeof cut - 1, &sw), -1);
	static const char *const bad[] = { "", "voluntary_ctxt_switches:\t150\n",
					   "voluntary_ctxt_switches:\t\nnonvoluntary_ctxt_switches:\t1\n",
					   "voluntary_ctxt_switches:\t1x\nnonvoluntary_ctxt_switches:\t1\n" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		cr_assert_eq(nl_parse_status_switches(bad[i], strlen(bad[i]), &sw), -1, "%s", bad[i]);
	cr_assert_eq(nl_parse_status_switches(NULL, 0, &sw), -1);
	/* Recorded files: a process and a kernel thread have both lines. */
	load("status_self");
	cr_assert_eq(nl_parse_status_switches(buf, len, &sw), 0);
	cr_assert_eq(sw.voluntary, 0);
	cr_assert_eq(sw.involuntary, 1);
	load("status_kthread");
	cr_assert_eq(nl_parse_status_switches(buf, len, &sw), 0);
	cr_assert_eq(sw.voluntary, 67);
}

/* ---- statm, status ------------------------------------------------------ */

Test(procfs, statm)
{
	uint64_t pages;
	load("statm_self");
	cr_assert_eq(nl_parse_statm(buf, len, &pages), 0);
	cr_assert_eq(pages, 404);
	load("statm_zombie");
	cr_assert_eq(nl_parse_statm(buf, len, &pages), 0);
	cr_assert_eq(pages, 0);
	load("statm_kthread");
	cr_assert_eq(nl_parse_statm(buf, len, &pages), 0);
	cr_assert_eq(pages, 0);
	load("statm_truncated");
	cr_assert_eq(nl_parse_statm(buf, len, &pages), -1);
	load("statm_malformed");
	cr_assert_eq(nl_parse_statm(buf, len, &pages), -1);
	cr_assert_eq(nl_parse_statm("765 40", 6, &pages), -1);   /* cut inside the field */
	cr_assert_eq(nl_parse_statm("765 404\n", 8, &pages), 0);
	cr_assert_eq(nl_parse_statm("1 99999999999999999999 0", 24, &pages), -1);
}

Test(procfs, status_vmrss)
{
	uint64_t b;
	load("status_self");
	cr_assert_eq(nl_parse_status_vmrss(buf, len, &b), 0);
	cr_assert_eq(b, 1672ull * 1024);
	load("status_kthread");
	cr_assert_eq(nl_parse_status_vmrss(buf, len, &b), -1);
	cr_assert_eq(nl_parse_status_vmrss("VmRSS:\t  12", 11, &b), -1);   /* unit cut off */
	cr_assert_eq(nl_parse_status_vmrss("VmRSS:\t  12 kB", 14, &b), 0);
	cr_assert_eq(b, 12 * 1024);
}

/* ---- smaps_rollup ------------------------------------------------------- */

Test(procfs, smaps_rollup)
{
	uint64_t b;
	load("smaps_rollup_self");
	cr_assert_eq(nl_parse_smaps_rollup_pss(buf, len, &b), 0);
	cr_assert_eq(b, 249ull * 1024);   /* "Pss:", not "Pss_Dirty:" or "SwapPss:" */
	load("smaps_rollup_no_pss");
	cr_assert_eq(nl_parse_smaps_rollup_pss(buf, len, &b), -1);
	load("smaps_rollup_truncated");
	cr_assert_eq(nl_parse_smaps_rollup_pss(buf, len, &b), -1);
	load("smaps_rollup_kthread_empty");   /* no address space: empty file */
	cr_assert_eq(nl_parse_smaps_rollup_pss(buf, len, &b), -1);
	/* A kernel without smaps_rollup has no file at all: nothing to parse. */
	cr_assert_eq(nl_parse_smaps_rollup_pss(NULL, 0, &b), -1);
	static const char swap_only[] = "SwapPss:  5 kB\nPss_Anon:   7 kB\n";
	cr_assert_eq(nl_parse_smaps_rollup_pss(swap_only, sizeof swap_only - 1, &b), -1);
}

/* ---- meminfo ------------------------------------------------------------- */

Test(procfs, meminfo)
{
	struct nl_meminfo mi;
	load("meminfo");
	cr_assert_eq(nl_parse_meminfo(buf, len, &mi), 0);
	cr_assert_eq(mi.total, 24684084ull * 1024);
	cr_assert_eq(mi.available, 24117360ull * 1024);
	cr_assert(mi.has_available);
}

Test(procfs, meminfo_old_kernel_and_broken)
{
	struct nl_meminfo mi;
	load("meminfo_old_kernel");
	cr_assert_eq(nl_parse_meminfo(buf, len, &mi), 0);
	cr_assert_not(mi.has_available);
	cr_assert_eq(mi.available, (23315544ull + 10912 + 891940) * 1024);
	load("meminfo_truncated");
	cr_assert_eq(nl_parse_meminfo(buf, len, &mi), -1);
	load("meminfo_overflow");
	cr_assert_eq(nl_parse_meminfo(buf, len, &mi), -1);
	static const char more[] = "MemTotal: 10 kB\nMemAvailable: 20 kB\n";   /* never above total */
	cr_assert_eq(nl_parse_meminfo(more, sizeof more - 1, &mi), 0);
	cr_assert_eq(mi.available, 10 * 1024);
}

/* ---- environ ------------------------------------------------------------- */

Test(procfs, environ_get)
{
	size_t n;
	load("environ_other_root");
	const char *v = nl_environ_get(buf, len, "NEMOLENS_SERVER_NAME", &n);
	cr_assert(v);
	cr_assert_eq(n, 5);
	cr_assert_eq(memcmp(v, "judge", 5), 0);
	cr_assert_not(nl_environ_get(buf, len, "NEMOLENS_SERVER", &n));   /* a prefix is not a key */
	cr_assert_not(nl_environ_get(buf, len, "NAME", &n));
	v = nl_environ_get(buf, len, "EMPTY", &n);
	cr_assert(v);
	cr_assert_eq(n, 0);
	cr_assert_not(nl_environ_get(NULL, 0, "PATH", &n));
	/* cut right after "NEMOLENS_SERVER_NAME=": an empty value, as far as it goes */
	load("environ_truncated");
	v = nl_environ_get(buf, len, "NEMOLENS_PARENT_SERVER_NAME", &n);
	cr_assert(v && n == 3 && memcmp(v, "gym", 3) == 0);
	v = nl_environ_get(buf, len, "NEMOLENS_SERVER_NAME", &n);
	cr_assert(v && n == 0);
	/* first of duplicates; a value cut short is returned as far as it goes */
	static const char dup[] = "A=1\0A=2\0=x\0B\0C=xy";
	v = nl_environ_get(dup, sizeof dup - 1, "A", &n);
	cr_assert(v && n == 1 && *v == '1');
	cr_assert_not(nl_environ_get(dup, sizeof dup - 1, "B", &n));
	v = nl_environ_get(dup, sizeof dup - 1, "C", &n);
	cr_assert(v && n == 2 && memcmp(v, "xy", 2) == 0);
}

static struct nl_env_role role_of(const char *fixture)
{
	struct nl_env_role r;
	load(fixture);
	nl_environ_role(buf, len, &r);
	return r;
}

Test(procfs, environ_roles)
{
	struct nl_env_role r = role_of("environ_other_root");
	cr_assert(r.preloaded && r.profiling && r.has_parent && r.declares_name && r.names_differ && r.other_root);

	r = role_of("environ_same_name");   /* OTEL_SERVICE_NAME equal to the inherited name */
	cr_assert(r.preloaded && r.profiling && r.declares_name);
	cr_assert_not(r.names_differ);
	cr_assert_not(r.other_root);

	r = role_of("environ_resource_name");   /* service.name=my%20judge, NeMo Gym's switch "1" */
	cr_assert(r.preloaded && r.profiling && r.names_differ && r.other_root);

	r = role_of("environ_no_parent");   /* no shim above: a root of its own */
	cr_assert(r.other_root);
	cr_assert_not(r.has_parent);

	r = role_of("environ_sdk_disabled");
	cr_assert_not(r.profiling);
	cr_assert_not(r.other_root);

	r = role_of("environ_no_preload");
	cr_assert_not(r.preloaded);
	cr_assert_not(r.other_root);

	r = role_of("environ_truncated");   /* the declaration was cut off */
	cr_assert_not(r.declares_name);
	cr_assert_not(r.other_root);

	nl_environ_role(NULL, 0, &r);
	cr_assert_not(r.other_root);
}

Test(procfs, environ_flags_follow_config_rules)
{
	struct nl_env_role r;
	static const char pre[] = "LD_PRELOAD=libnemolens_preload.so\0NEMOLENS_PARENT_SERVER_NAME=a\0"
				  "NEMOLENS_SERVER_NAME=b\0";
	char env[512];
	/* first valid of the aliases wins; OTEL_* take only true/false */
#define CASE(text, on) { text, sizeof text - 1, on }
	static const struct {
		const char *extra;
		size_t len;
		bool profiling;
	} cases[] = {
		CASE("", false),
		CASE("NEMOLENS_MEMORY_PROFILING=on", true),
		CASE("NEMOLENS_MEMORY_PROFILING=bogus\0NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED=true", true),
		CASE("NEMOLENS_MEMORY_PROFILING=false\0NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED=true", false),
		CASE("NEMOLENS_MEMORY_PROFILING=\0NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED=yes", true),
		CASE("NEMOLENS_MEMORY_PROFILING=1\0OTEL_SDK_DISABLED=1", true),   /* "1" is not valid for OTEL_ */
		CASE("NEMOLENS_MEMORY_PROFILING=1\0OTEL_SDK_DISABLED=TRUE", false),
		CASE("NEMOLENS_MEMORY_PROFILING=1\0NEMOLENS_ENABLED=0", false),
		CASE("NEMOLENS_MEMORY_PROFILING=1\0NEMO_GYM_OTEL_METRICS_ENABLED=off", false),
	};
#undef CASE
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		memcpy(env, pre, sizeof pre - 1);
		memcpy(env + sizeof pre - 1, cases[i].extra, cases[i].len);
		nl_environ_role(env, sizeof pre - 1 + cases[i].len, &r);
		cr_assert_eq(r.profiling, cases[i].profiling, "case %zu", i);
		cr_assert_eq(r.other_root, cases[i].profiling, "case %zu", i);
	}
}

Test(procfs, server_is_root)
{
	cr_assert(nl_server_is_root(NULL, NULL));
	cr_assert(nl_server_is_root("a", NULL));
	cr_assert(nl_server_is_root(NULL, ""));
	cr_assert_not(nl_server_is_root(NULL, "a"));   /* a program name never starts a tree */
	cr_assert_not(nl_server_is_root("a", "a"));
	cr_assert(nl_server_is_root("b", "a"));
}
