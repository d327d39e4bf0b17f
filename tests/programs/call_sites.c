/* SPDX-License-Identifier: Apache-2.0 */
/* Opens connections from functions the test knows by name, so the call
 * sites the shim reports can be checked against the truth.
 *
 *   call_sites PORT N MODE...
 *
 * Each MODE, in turn, to 127.0.0.1:PORT:
 *   direct   N connects from dial_directly()
 *   curl     N HTTP GETs with libcurl from fetch_with_curl(), each on a new
 *            connection (the server at PORT must answer HTTP)
 *   lib      N connects from call_sites_lib_dial() of libcall_sites_dial.so
 *   many     N connects from each of the 8 functions dial_0() ... dial_7()
 *   signal   N connects from the SIGALRM handler on_alarm(), while the main
 *            thread connects from dial_directly() until they are done
 *   vfork    N vfork children, each connecting from dial_directly()
 *   fork     4 threads connect N times each from thread_dial() while the
 *            main thread forks N children that connect once from
 *            dial_directly() and exit
 * Prints one JSON line: the connects made per function name.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/dial.h"

int call_sites_lib_dial(int port);

static int port;

static inline __attribute__((always_inline)) int dial(void) { return dial_port(port); }

/* Each of these is a call site of its own: never inlined, the connect() is
 * not a tail call (so the function's frame is on the stack), and each
 * stores its own line, so no two are folded into one by the compiler.
 * dial() itself is never a call site: it is inlined into each of them. */
static volatile int last_site;
#define SITE(name)                                  \
	__attribute__((noinline)) static int name(void) \
	{                                               \
		int r = dial();                             \
		last_site = __LINE__;                       \
		return r;                                   \
	}
SITE(dial_directly)
SITE(dial_0)
SITE(dial_1)
SITE(dial_2)
SITE(dial_3)
SITE(dial_4)
SITE(dial_5)
SITE(dial_6)
SITE(dial_7)
static int (*const many[8])(void) = { dial_0, dial_1, dial_2, dial_3, dial_4, dial_5, dial_6, dial_7 };

static size_t discard(char *p, size_t size, size_t n, void *u)
{
	(void)p;
	(void)u;
	return size * n;
}

__attribute__((noinline)) static int fetch_with_curl(void)
{
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
	CURL *c = curl_easy_init();
	if (!c)
		return -1;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	__asm__ volatile("" ::: "memory");
	return rc == CURLE_OK ? 0 : -1;
}

static atomic_int alarms_left;
static atomic_int alarms_done;

static void on_alarm(int sig)
{
	(void)sig;
	if (atomic_load(&alarms_left) <= 0)
		return;
	atomic_fetch_sub(&alarms_left, 1);
	dial();
	atomic_fetch_add(&alarms_done, 1);
}

/* The threads of this process, from /proc/self/status, without allocating
 * (a vfork child may not); 0 if unknown. */
static int threads_now(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *t = strstr(buf, "\nThreads:");
	return t ? atoi(t + 9) : 0;
}

/* A vfork child connects and leaves: in a function of its own, so no
 * variable of main's lives across vfork. It runs in its parent's memory: a
 * thread it started would die with it, whatever that thread held, so the
 * child fails (exit status 10) if it has one. */
__attribute__((noinline)) static int vfork_once(void)
{
	pid_t pid = vfork();
	if (pid == 0) {
		dial_directly();
		_exit(threads_now() == 1 ? 0 : 10);
	}
	int status;
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int thread_rounds;
static void *thread_dial(void *arg)
{
	(void)arg;
	for (int i = 0; i < thread_rounds; i++)
		dial();
	__asm__ volatile("" ::: "memory");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	port = atoi(argv[1]);
	int n = atoi(argv[2]);
	int direct = 0, curl = 0, lib = 0, many_each = 0, alarm_n = 0, vforks = 0, threads = 0, forks = 0;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	for (int m = 3; m < argc; m++) {
		const char *mode = argv[m];
		if (!strcmp(mode, "direct")) {
			for (int i = 0; i < n; i++, direct++)
				dial_directly();
		} else if (!strcmp(mode, "curl")) {
			for (int i = 0; i < n; i++, curl++)
				if (fetch_with_curl() != 0)
					return 3;
		} else if (!strcmp(mode, "lib")) {
			for (int i = 0; i < n; i++, lib++)
				call_sites_lib_dial(port);
		} else if (!strcmp(mode, "many")) {
			for (int i = 0; i < n; i++)
				for (int f = 0; f < 8; f++)
					many[f]();
			many_each = n;
		} else if (!strcmp(mode, "signal")) {
			struct sigaction sa = { .sa_handler = on_alarm };
			sigemptyset(&sa.sa_mask);
			sa.sa_flags = SA_RESTART;
			sigaction(SIGALRM, &sa, NULL);
			/* The first record of a process sets up its metrics: a
			 * connect before the timer keeps that out of the handler. */
			dial_directly();
			direct++;
			atomic_store(&alarms_left, n);
			struct itimerval t = { { 0, 1000 }, { 0, 1000 } };
			setitimer(ITIMER_REAL, &t, NULL);
			while (atomic_load(&alarms_done) < n) {
				dial_directly();
				direct++;
			}
			struct itimerval off = { { 0, 0 }, { 0, 0 } };
			setitimer(ITIMER_REAL, &off, NULL);
			alarm_n = n;
		} else if (!strcmp(mode, "vfork")) {
			for (int i = 0; i < n; i++, vforks++)
				if (vfork_once() != 0)
					return 4;
		} else if (!strcmp(mode, "fork")) {
			pthread_t t[4];
			thread_rounds = n;
			for (int i = 0; i < 4; i++)
				pthread_create(&t[i], NULL, thread_dial, NULL);
			for (int i = 0; i < n; i++, forks++) {
				pid_t pid = fork();
				if (pid == 0) {
					dial_directly();
					_exit(0);
				}
				if (pid < 0 || waitpid(pid, NULL, 0) != pid)
					return 4;
			}
			for (int i = 0; i < 4; i++)
				pthread_join(t[i], NULL);
			threads = 4 * n;
		} else {
			return 2;
		}
	}
	printf("{\"dial_directly\": %d, \"fetch_with_curl\": %d, \"call_sites_lib_dial\": %d, \"many_each\": %d, "
	       "\"on_alarm\": %d, \"vfork_children\": %d, \"thread_dial\": %d, \"fork_children\": %d}\n",
	       direct, curl, lib, many_each, alarm_n, vforks, threads, forks);
	return 0;
}
