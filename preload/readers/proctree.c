/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run's process pressure (proctree.h): the live processes it
 * exports, sampled from /proc into their segments' headers.
 */
#include "proctree.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "procmetrics.h"
#include "segment.h"
#include "segread.h"

static pthread_mutex_t pass_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_pass_ns;           /* monotonic; under pass_lock */

struct pass {
	int pid;
	size_t sampled;
};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One segment: its owner read through its /proc directory, checked against
 * the start time the segment names, the figures written into the header of
 * the file (mapped: the owner's own mapping and every reader see them). */
static void sample_one(int fd, const struct nl_seg_header *h, const struct stat *st, void *arg)
{
	(void)st;
	struct pass *p = arg;
	if (h->pid <= 0 || h->pid > INT32_MAX || (p->pid && h->pid != p->pid))
		return;
	char path[32];
	snprintf(path, sizeof path, "/proc/%d", (int)h->pid);
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;   /* gone: its segment keeps the last sample */
	struct nl_proc_sample s;
	int r = nl_procmetrics_read(dfd, h->proc_start, 0, &s);
	close(dfd);
	if (r != 0)
		return;
	struct nl_seg_header *w = mmap(NULL, NL_SEG_DATA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w == MAP_FAILED)
		return;
	nl_procmetrics_store(&w->proc, &s);
	munmap(w, NL_SEG_DATA);
	p->sampled++;
}

size_t nl_proctree_sample(uint64_t key, const uint32_t *exporters, size_t n, int pid)
{
	pthread_mutex_lock(&pass_lock);
	uint64_t now = nl_monotonic_ns();
	struct pass p = { .pid = pid };
	if (pid || now >= next_pass_ns) {
		uint64_t c0 = thread_cpu_ns();
		nl_seg_each_exported(key, exporters, n, NL_SEG_PROC_METRICS, sample_one, &p);
		uint64_t cost = thread_cpu_ns() - c0;
		if (!pid)
			next_pass_ns = now + (uint64_t)((double)cost / NL_PROCTREE_BUDGET);
	}
	pthread_mutex_unlock(&pass_lock);
	return p.sampled;
}

size_t nl_proctree_pass(uint64_t key, const uint32_t *exporters, size_t n)
{
	struct pass p = { .pid = 0 };
	pthread_mutex_lock(&pass_lock);
	nl_seg_each_exported(key, exporters, n, NL_SEG_PROC_METRICS, sample_one, &p);
	pthread_mutex_unlock(&pass_lock);
	return p.sampled;
}
