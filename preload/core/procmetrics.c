/* SPDX-License-Identifier: Apache-2.0 */
/* Process pressure (procmetrics.h): one process's figures read from /proc,
 * kept in its segment's header, added to its snapshots.
 *
 * Sources, per process, three reads and no allocation:
 *  - stat: utime and stime (fields 14 and 15, clock ticks, the whole
 *    process: live threads and the ones that ended), num_threads (20) and
 *    rss (24, pages);
 *  - status: voluntary_ctxt_switches and nonvoluntary_ctxt_switches. The
 *    kernel counts switches per thread, and a process's status shows its
 *    first thread's; adding up every thread's file would cost a read per
 *    thread and still go back when a thread ends (only getrusage of the
 *    process itself has the ended threads' switches), so this is the
 *    first thread's count, which never goes back;
 *  - the entries of fd, listed with getdents64 into a buffer on the stack
 *    (readdir would allocate, and this runs inside the program's process).
 *
 * Runs on the background thread of a process that exports itself, or in
 * nemolens-run; the hooks are bypassed on that thread, so the plain libc
 * calls are the real ones.
 */
#include "procmetrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfs.h"

/* Reads name (relative to dirfd) into buf; its length, or -1. Content past
 * cap is cut off, which the parsers reject. */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t cap)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0)
				n = 0;
			break;
		}
		n += (size_t)r;
	}
	close(fd);
	return (ssize_t)n;
}

/* The entries of dirfd's fd directory, or -1 when it cannot be listed. */
static long count_fds(int dirfd)
{
	int fd = openat(dirfd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Aligned for the kernel's records, which hold 64-bit fields. */
	_Alignas(8) char buf[4096];
	long n = 0;
	for (;;) {
		ssize_t r = getdents64(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			n = -1;
			break;
		}
		if (r == 0)
			break;
		for (ssize_t off = 0; off < r;) {
			const struct dirent64 *d = (const struct dirent64 *)(buf + off);
			if (d->d_reclen == 0)
				break;
			if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
				n++;
			off += d->d_reclen;
		}
	}
	close(fd);
	return n;
}

static uint64_t tick_ns(void)
{
	static uint64_t ns;
	if (!ns) {
		long hz = sysconf(_SC_CLK_TCK);
		ns = hz > 0 ? 1000000000u / (uint64_t)hz : 10000000u;
	}
	return ns;
}

static uint64_t page_bytes(void)
{
	static uint64_t b;
	if (!b) {
		long p = sysconf(_SC_PAGESIZE);
		b = p > 0 ? (uint64_t)p : 4096u;
	}
	return b;
}

int nl_procmetrics_read(int dirfd, uint64_t start, unsigned own_fds, struct nl_proc_sample *out)
{
	memset(out, 0, sizeof *out);
	char buf[2048];
	ssize_t n = read_at(dirfd, "stat", buf, sizeof buf);
	struct nl_proc_stat st;
	if (n <= 0 || nl_parse_stat(buf, (size_t)n, &st) != 0 || (start && st.starttime != start) || st.state == 'X')
		return -1;
	out->cpu_user_ns = st.utime * tick_ns();
	out->cpu_system_ns = st.stime * tick_ns();
	out->have = NL_PROC_HAVE_CPU;
	/* A zombie's memory, threads and descriptors are gone: its last live
	 * sample keeps them. Its CPU time and switches are final. */
	bool zombie = st.state == 'Z';
	if (!zombie) {
		out->threads = st.num_threads;
		out->have |= NL_PROC_HAVE_THREADS;
		if (st.has_rss) {
			out->rss_bytes = st.rss_pages * page_bytes();
			out->have |= NL_PROC_HAVE_RSS;
		}
	}
	char sbuf[4096];
	n = read_at(dirfd, "status", sbuf, sizeof sbuf);
	struct nl_proc_switches sw;
	if (n > 0 && nl_parse_status_switches(sbuf, (size_t)n, &sw) == 0) {
		out->switches_voluntary = sw.voluntary;
		out->switches_involuntary = sw.involuntary;
		out->have |= NL_PROC_HAVE_SWITCHES;
	}
	if (!zombie) {
		long fds = count_fds(dirfd);
		if (fds >= (long)own_fds) {
			out->fds = (uint64_t)fds - own_fds;
			out->have |= NL_PROC_HAVE_FDS;
		}
	}
	return 0;
}

/* Raises *v to x; never lowers it. */
static void store_max(_Atomic uint64_t *v, uint64_t x)
{
	uint64_t cur = atomic_load(v);
	while (cur < x && !atomic_compare_exchange_weak(v, &cur, x))
		;
}

void nl_procmetrics_store(struct nl_seg_proc *blk, const struct nl_proc_sample *s)
{
	if (s->have & NL_PROC_HAVE_CPU) {
		store_max(&blk->cpu_user_ns, s->cpu_user_ns);
		store_max(&blk->cpu_system_ns, s->cpu_system_ns);
	}
	if (s->have & NL_PROC_HAVE_SWITCHES) {
		store_max(&blk->switches_voluntary, s->switches_voluntary);
		store_max(&blk->switches_involuntary, s->switches_involuntary);
	}
	if (s->have & NL_PROC_HAVE_RSS)
		atomic_store(&blk->rss_bytes, s->rss_bytes);
	if (s->have & NL_PROC_HAVE_THREADS)
		atomic_store(&blk->threads, s->threads);
	if (s->have & NL_PROC_HAVE_FDS)
		atomic_store(&blk->fds, s->fds);
	/* After the values: a reader that sees the bit sees a value. */
	atomic_fetch_or(&blk->have, s->have);
}

void nl_procmetrics_sample_self(void)
{
	/* No segment yet, or still the parent's (a fork child before its
	 * first record): nothing of this process to keep. */
	if (!nl_seg_base || nl_seg_inherited())
		return;
	int dfd = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	struct nl_proc_sample s;
	/* Listing /proc/self/fd, this process holds the directory above and
	 * the listed one open: neither is the program's. */
	if (nl_procmetrics_read(dfd, 0, 2, &s) == 0)
		nl_procmetrics_store(&nl_seg_header()->proc, &s);
	close(dfd);
}

/* ---- into a snapshot ------------------------------------------------------- */

static const struct nl_attr mode_user = { .key = "cpu.mode", .type = NL_ATTR_STR, .v.s = "user" };
static const struct nl_attr mode_system = { .key = "cpu.mode", .type = NL_ATTR_STR, .v.s = "system" };
static const struct nl_attr switch_voluntary = { .key = "process.context_switch.type", .type = NL_ATTR_STR,
						 .v.s = "voluntary" };
static const struct nl_attr switch_involuntary = { .key = "process.context_switch.type", .type = NL_ATTR_STR,
						   .v.s = "involuntary" };

/* The next metric of snap (room made by the caller), with n points. */
static struct nl_metric *add_metric(struct nl_snapshot *snap, const char *name, const char *unit,
				    const char *description, enum nl_kind kind, size_t n)
{
	struct nl_point *p = calloc(n, sizeof *p);
	if (!p)
		return NULL;
	struct nl_metric *m = &snap->metrics[snap->n_metrics++];
	*m = (struct nl_metric){ .name = name, .unit = unit, .description = description, .kind = kind, .points = p,
				 .n_points = n };
	snap->n_points += n;
	return m;
}

static void set_point(struct nl_point *p, const struct nl_attr *attr, uint64_t start_ns, uint64_t now_ns)
{
	p->attrs = attr;
	p->n_attrs = attr ? 1 : 0;
	p->start_ns = start_ns;
	p->time_ns = now_ns;
}

static int64_t as_i64(uint64_t v) { return v > INT64_MAX ? INT64_MAX : (int64_t)v; }

bool nl_procmetrics_append(struct nl_snapshot *snap, const struct nl_seg_proc *blk, uint64_t start_ns,
			   uint64_t now_ns)
{
	uint64_t have = atomic_load(&blk->have);
	if (!(have & (NL_PROC_HAVE_CPU | NL_PROC_HAVE_SWITCHES | NL_PROC_HAVE_RSS | NL_PROC_HAVE_THREADS |
		      NL_PROC_HAVE_FDS)))
		return true;
	struct nl_metric *grown = realloc(snap->metrics, (snap->n_metrics + 5) * sizeof *grown);
	if (!grown)
		return false;
	snap->metrics = grown;
	struct nl_metric *m;
	if (have & NL_PROC_HAVE_CPU) {
		m = add_metric(snap, "process.cpu.time", "s", "Total CPU seconds broken down by different states.",
			       NL_COUNTER_F64, 2);
		if (!m)
			return false;
		set_point(&m->points[0], &mode_user, start_ns, now_ns);
		m->points[0].dvalue = (double)atomic_load(&blk->cpu_user_ns) / 1e9;
		set_point(&m->points[1], &mode_system, start_ns, now_ns);
		m->points[1].dvalue = (double)atomic_load(&blk->cpu_system_ns) / 1e9;
	}
	/* Up-down counters, as the conventions have them: cumulative values
	 * with the process's start. */
	if (have & NL_PROC_HAVE_RSS) {
		m = add_metric(snap, "process.memory.usage", "By", "The amount of physical memory in use.", NL_UPDOWN,
			       1);
		if (!m)
			return false;
		set_point(&m->points[0], NULL, start_ns, now_ns);
		m->points[0].ivalue = as_i64(atomic_load(&blk->rss_bytes));
	}
	if (have & NL_PROC_HAVE_THREADS) {
		m = add_metric(snap, "process.thread.count", "{thread}", "Process threads count.", NL_UPDOWN, 1);
		if (!m)
			return false;
		set_point(&m->points[0], NULL, start_ns, now_ns);
		m->points[0].ivalue = as_i64(atomic_load(&blk->threads));
	}
	if (have & NL_PROC_HAVE_FDS) {
		m = add_metric(snap, "process.open_file_descriptor.count", "{file_descriptor}",
			       "Number of file descriptors in use by the process.", NL_UPDOWN, 1);
		if (!m)
			return false;
		set_point(&m->points[0], NULL, start_ns, now_ns);
		m->points[0].ivalue = as_i64(atomic_load(&blk->fds));
	}
	if (have & NL_PROC_HAVE_SWITCHES) {
		m = add_metric(snap, "process.context_switches", "{context_switch}",
			       "Number of times the process has been context switched.", NL_COUNTER, 2);
		if (!m)
			return false;
		set_point(&m->points[0], &switch_voluntary, start_ns, now_ns);
		m->points[0].ivalue = as_i64(atomic_load(&blk->switches_voluntary));
		set_point(&m->points[1], &switch_involuntary, start_ns, now_ns);
		m->points[1].ivalue = as_i64(atomic_load(&blk->switches_involuntary));
	}
	return true;
}
