/* SPDX-License-Identifier: Apache-2.0 */
/* The process figures (preload/core/procmetrics.c): a sample of this test's
 * own process, kept in a header's block as the cumulative figures allow,
 * and added to a snapshot with the names, units, kinds and attributes of
 * the OpenTelemetry process conventions. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "procmetrics.h"
#include "registry.h"

static void quiet(void) { nl_log_set_level(NL_LOG_NONE); }

TestSuite(procmetrics, .init = quiet);

static void *parked(void *arg)
{
	int *fds = arg;
	char c;
	(void)!read(fds[0], &c, 1);
	return NULL;
}

/* The Threads: line of /proc/self/status, read with stdio. */
static long threads_listed(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	cr_assert_not_null(f);
	char line[256];
	long n = -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "Threads:", 8) == 0)
			n = strtol(line + 8, NULL, 10);
	fclose(f);
	return n;
}

static long fds_listed(void)
{
	long n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) != -1;
	return n;
}

Test(procmetrics, reads_this_process)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, parked, p), 0);
	int dfd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	long want_fds = fds_listed() - 1;   /* dfd is the reader's */
	long want_threads = threads_listed();
	cr_assert_geq(want_threads, 2);
	struct nl_proc_sample s;
	cr_assert_eq(nl_procmetrics_read(dfd, 0, 2, &s), 0);
	close(dfd);
	cr_assert_eq(s.have, NL_PROC_HAVE_CPU | NL_PROC_HAVE_SWITCHES | NL_PROC_HAVE_RSS | NL_PROC_HAVE_THREADS |
				     NL_PROC_HAVE_FDS);
	cr_assert_eq((long)s.threads, want_threads);
	cr_assert_eq((long)s.fds, want_fds);
	cr_assert_gt(s.rss_bytes, 0);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
	/* Clock ticks against microseconds: within a tick or two. */
	cr_assert_leq(s.cpu_user_ns, user_ns + 20000000u);
	cr_assert_geq(s.cpu_user_ns + 20000000u, user_ns);
	/* Another start time than this process's: another process. */
	dfd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_eq(nl_procmetrics_read(dfd, 1, 0, &s), -1);
	close(dfd);
	(void)!write(p[1], "x", 1);
	pthread_join(t, NULL);
	close(p[0]);
	close(p[1]);
}

Test(procmetrics, cumulative_figures_never_go_back)
{
	struct nl_seg_proc blk;
	memset(&blk, 0, sizeof blk);
	struct nl_proc_sample a = { .have = NL_PROC_HAVE_CPU | NL_PROC_HAVE_THREADS, .cpu_user_ns = 500,
				    .cpu_system_ns = 70, .threads = 9 };
	nl_procmetrics_store(&blk, &a);
	struct nl_proc_sample older = { .have = NL_PROC_HAVE_CPU | NL_PROC_HAVE_THREADS, .cpu_user_ns = 400,
					.cpu_system_ns = 80, .threads = 4 };
	nl_procmetrics_store(&blk, &older);
	cr_assert_eq(blk.cpu_user_ns, 500);
	cr_assert_eq(blk.cpu_system_ns, 80);
	cr_assert_eq(blk.threads, 4, "a gauge-like figure is the newest sample's");
	/* A zombie's sample: counters only; the rest stays as last seen. */
	struct nl_proc_sample zombie = { .have = NL_PROC_HAVE_CPU | NL_PROC_HAVE_SWITCHES, .cpu_user_ns = 900,
					 .switches_voluntary = 3 };
	nl_procmetrics_store(&blk, &zombie);
	cr_assert_eq(blk.cpu_user_ns, 900);
	cr_assert_eq(blk.threads, 4);
	cr_assert_eq(blk.have, NL_PROC_HAVE_CPU | NL_PROC_HAVE_THREADS | NL_PROC_HAVE_SWITCHES);
}

static const struct nl_metric *find(const struct nl_snapshot *s, const char *name)
{
	for (size_t i = 0; i < s->n_metrics; i++)
		if (strcmp(s->metrics[i].name, name) == 0)
			return &s->metrics[i];
	return NULL;
}

Test(procmetrics, snapshot_names_units_attributes)
{
	struct nl_snapshot *snap = calloc(1, sizeof *snap);
	cr_assert_not_null(snap);
	struct nl_seg_proc blk;
	memset(&blk, 0, sizeof blk);
	cr_assert(nl_procmetrics_append(snap, &blk, 10, 20));
	cr_assert_eq(snap->n_metrics, 0, "nothing sampled: nothing added");
	struct nl_proc_sample s = { .have = NL_PROC_HAVE_CPU | NL_PROC_HAVE_SWITCHES | NL_PROC_HAVE_RSS |
					    NL_PROC_HAVE_THREADS | NL_PROC_HAVE_FDS,
				    .cpu_user_ns = 1500000000u, .cpu_system_ns = 250000000u, .switches_voluntary = 7,
				    .switches_involuntary = 11, .rss_bytes = 4096 * 100, .threads = 7, .fds = 106 };
	nl_procmetrics_store(&blk, &s);
	cr_assert(nl_procmetrics_append(snap, &blk, 10, 20));
	cr_assert_eq(snap->n_metrics, 5);
	cr_assert_eq(snap->n_points, 7);
	const struct nl_metric *m = find(snap, "process.cpu.time");
	cr_assert_not_null(m);
	cr_assert_str_eq(m->unit, "s");
	cr_assert_eq(m->kind, NL_COUNTER_F64);
	cr_assert_eq(m->n_points, 2);
	cr_assert_str_eq(m->points[0].attrs[0].key, "cpu.mode");
	cr_assert_str_eq(m->points[0].attrs[0].v.s, "user");
	cr_assert_float_eq(m->points[0].dvalue, 1.5, 1e-9);
	cr_assert_str_eq(m->points[1].attrs[0].v.s, "system");
	cr_assert_float_eq(m->points[1].dvalue, 0.25, 1e-9);
	cr_assert_eq(m->points[0].start_ns, 10);
	cr_assert_eq(m->points[0].time_ns, 20);
	static const struct {
		const char *name, *unit;
		enum nl_kind kind;
		int64_t value;
	} up[] = { { "process.memory.usage", "By", NL_UPDOWN, 409600 },
		   { "process.thread.count", "{thread}", NL_UPDOWN, 7 },
		   { "process.open_file_descriptor.count", "{file_descriptor}", NL_UPDOWN, 106 } };
	for (size_t i = 0; i < sizeof up / sizeof *up; i++) {
		m = find(snap, up[i].name);
		cr_assert_not_null(m, "%s", up[i].name);
		cr_assert_str_eq(m->unit, up[i].unit);
		cr_assert_eq(m->kind, up[i].kind);
		cr_assert_eq(m->n_points, 1);
		cr_assert_eq(m->points[0].n_attrs, 0);
		cr_assert_eq(m->points[0].ivalue, up[i].value, "%s", up[i].name);
	}
	m = find(snap, "process.context_switches");
	cr_assert_not_null(m);
	cr_assert_str_eq(m->unit, "{context_switch}");
	cr_assert_eq(m->kind, NL_COUNTER);
	cr_assert_str_eq(m->points[0].attrs[0].key, "process.context_switch.type");
	cr_assert_str_eq(m->points[0].attrs[0].v.s, "voluntary");
	cr_assert_eq(m->points[0].ivalue, 7);
	cr_assert_str_eq(m->points[1].attrs[0].v.s, "involuntary");
	cr_assert_eq(m->points[1].ivalue, 11);
	nl_snapshot_free(snap);
}
