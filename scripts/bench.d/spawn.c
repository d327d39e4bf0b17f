/* SPDX-License-Identifier: Apache-2.0 */
/* The cost of starting a process under each mode, measured one process at a
 * time with the modes interleaved: round after round, each mode spawns and
 * reaps one child, in an order that turns by one every round. A machine
 * whose speed drifts by tens of percent over seconds (a shared virtual
 * machine) then slows every mode alike, and the median of the rounds'
 * ratios holds still where runs of one mode after another do not.
 *
 *     spawn ROUNDS PROGRAM MODE...
 *
 * A MODE is "name" or "name:VAR=value,VAR=value": the variables set for the
 * child on top of this program's environment. For each mode, one line:
 *     name  cpu_us  wall_us  faults  cpu_ratio  q1  q3
 * the medians of the CPU time to spawn and reap the child (this program's
 * own, fork to reap, and the child's from wait4: user and system, exec and
 * exit included), of the wall time from fork to reap, of the child's page
 * faults, and the median and quartiles of the per-round ratios of the CPU
 * time to the first mode's.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MODES_MAX 8

struct mode {
	const char *name;
	char **env;
	double *cpu, *wall, *faults;
};

static char **mode_env(char *spec)
{
	size_t n = 0, extra = 0;
	while (environ[n])
		n++;
	for (const char *p = spec; p && *p; p++)
		extra += *p == ',';
	char **env = calloc(n + extra + 2, sizeof *env);
	if (!env)
		exit(2);
	size_t k = 0;
	/* The mode's variables first: the first of duplicates wins in getenv. */
	for (char *save, *tok = spec ? strtok_r(spec, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save))
		env[k++] = tok;
	for (size_t i = 0; i < n; i++)
		env[k++] = environ[i];
	return env;
}

static double now_us(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void spawn_one(const char *program, struct mode *m, int round)
{
	double t0 = now_us(CLOCK_MONOTONIC), c0 = now_us(CLOCK_PROCESS_CPUTIME_ID);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		char *argv[] = { (char *)program, NULL };
		execve(program, argv, m->env);
		_exit(127);
	}
	int status;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "spawn: %s failed in mode %s\n", program, m->name);
		exit(2);
	}
	m->wall[round] = now_us(CLOCK_MONOTONIC) - t0;
	m->cpu[round] = now_us(CLOCK_PROCESS_CPUTIME_ID) - c0 + (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	m->faults[round] = (double)ru.ru_minflt;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The q-th quantile (0..1) of v[0..n), sorted in scratch (v keeps its
 * order: the rounds pair by index). */
static double quantile(const double *v, int n, double q, double *scratch)
{
	memcpy(scratch, v, (size_t)n * sizeof *v);
	qsort(scratch, (size_t)n, sizeof *scratch, cmp);
	double at = q * (n - 1);
	int i = (int)at;
	return i + 1 < n ? scratch[i] + (at - i) * (scratch[i + 1] - scratch[i]) : scratch[i];
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc - 3 > MODES_MAX) {
		fprintf(stderr, "usage: spawn ROUNDS PROGRAM MODE...\n");
		return 2;
	}
	int rounds = atoi(argv[1]), nm = argc - 3;
	const char *program = argv[2];
	if (rounds < 1)
		return 2;
	struct mode modes[MODES_MAX];
	for (int i = 0; i < nm; i++) {
		char *spec = argv[3 + i], *colon = strchr(spec, ':');
		if (colon)
			*colon = 0;
		modes[i].name = spec;
		modes[i].env = mode_env(colon ? colon + 1 : NULL);
		modes[i].cpu = calloc((size_t)rounds, sizeof(double));
		modes[i].wall = calloc((size_t)rounds, sizeof(double));
		modes[i].faults = calloc((size_t)rounds, sizeof(double));
		if (!modes[i].cpu || !modes[i].wall || !modes[i].faults)
			return 2;
	}
	for (int r = 0; r < rounds; r++)
		for (int j = 0; j < nm; j++)
			spawn_one(program, &modes[(r + j) % nm], r);

	double *ratio = calloc((size_t)rounds, sizeof(double)), *tmp = calloc((size_t)rounds, sizeof(double));
	if (!ratio || !tmp)
		return 2;
	for (int i = 0; i < nm; i++) {
		for (int r = 0; r < rounds; r++)
			ratio[r] = modes[0].cpu[r] > 0 ? modes[i].cpu[r] / modes[0].cpu[r] : 1.0;
		printf("%s\t%.1f\t%.1f\t%.1f\t%.4f\t%.4f\t%.4f\n", modes[i].name,
		       quantile(modes[i].cpu, rounds, 0.5, tmp), quantile(modes[i].wall, rounds, 0.5, tmp),
		       quantile(modes[i].faults, rounds, 0.5, tmp), quantile(ratio, rounds, 0.5, tmp),
		       quantile(ratio, rounds, 0.25, tmp), quantile(ratio, rounds, 0.75, tmp));
	}
	return 0;
}
