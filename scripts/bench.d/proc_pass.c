/* SPDX-License-Identifier: Apache-2.0 */
/* The process figures' cost for scripts/bench: one pass of nemolens-run's
 * sampler (preload/readers/proctree.c) over a tree of N processes.
 *
 *   proc_pass SHIM N ROUNDS
 *
 * Linked against the project's static test library (the launcher's own
 * objects). Starts N children of its own with SHIM preloaded, each naming
 * this process as its exporter (NEMOLENS_RUN_EXPORTER, as nemolens-run
 * does), each making one connect() so that it records and has a segment,
 * then sleeping. Once all N segments are there, times ROUNDS passes, each
 * reading /proc/<pid>/stat, status and fd of every child and writing the
 * figures into its segment, as the launcher does before every export and
 * scrape.
 *
 * Prints one line:  procs N sampled S cpu_us MEDIAN max_cpu_us MAX
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "proctree.h"
#include "segment.h"

/* The library carries the shim's runtime: keep it from recording this program. */
__attribute__((constructor(101))) static void keep_shim_out(void) { setenv("NEMOLENS_ENABLED", "0", 1); }

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *env(const char *name) { return getenv(name); }

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* A child: one refused connect() (counted all the same), a byte to say so,
 * then sleep until killed. */
static int child(int ready)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(1),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	(void)!connect(s, (struct sockaddr *)&a, sizeof a);
	(void)!write(ready, "r", 1);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "child") == 0)
		return child(atoi(argv[2]));
	if (argc != 4) {
		fprintf(stderr, "usage: proc_pass SHIM N ROUNDS\n");
		return 2;
	}
	long n = atol(argv[2]), rounds = atol(argv[3]);
	char dir[] = "/dev/shm/nl-proc-pass-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char pid[24];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	setenv("XDG_RUNTIME_DIR", dir, 1);
	setenv("NEMOLENS_RUN_EXPORTER", pid, 1);
	setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9", 1);
	int p[2];
	if (pipe(p) != 0)
		return 1;
	char fd[16];
	snprintf(fd, sizeof fd, "%d", p[1]);
	pid_t *kids = calloc((size_t)n, sizeof *kids);
	for (long i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			setenv("LD_PRELOAD", argv[1], 1);
			unsetenv("NEMOLENS_ENABLED");
			execl("/proc/self/exe", "proc_pass", "child", fd, (char *)NULL);
			_exit(127);
		}
	}
	close(p[1]);
	char c;
	long ready = 0;
	while (ready < n && read(p[0], &c, 1) == 1)
		ready++;
	unsetenv("NEMOLENS_ENABLED");
	struct nl_config cfg;
	nl_config_load(&cfg, env, "proc_pass");
	setenv("NEMOLENS_ENABLED", "0", 1);
	uint32_t exporters[1] = { (uint32_t)getpid() };
	size_t sampled = 0;
	uint64_t *cost = calloc((size_t)rounds, sizeof *cost);
	if (nl_seg_configure(&cfg) == 0 && ready == n) {
		uint64_t key = nl_seg_delivery_key(&cfg);
		for (long r = 0; r < rounds; r++) {
			uint64_t c0 = cpu_ns();
			sampled = nl_proctree_pass(key, exporters, 1);
			cost[r] = cpu_ns() - c0;
		}
	}
	for (long i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (long i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	(void)!system(cmd);
	if (sampled != (size_t)n) {
		fprintf(stderr, "proc_pass: %zu of %ld processes sampled\n", sampled, n);
		return 1;
	}
	qsort(cost, (size_t)rounds, sizeof *cost, cmp_u64);
	printf("procs %ld sampled %zu cpu_us %llu max_cpu_us %llu\n", n, sampled,
	       (unsigned long long)(cost[rounds / 2] / 1000), (unsigned long long)(cost[rounds - 1] / 1000));
	return 0;
}
