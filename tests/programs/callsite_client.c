/* SPDX-License-Identifier: Apache-2.0 */
/* Connections from known functions, so tests can compare the call sites the
 * shim names with the code that really connected.
 *
 *   callsite_client PORT N three     N connects from each of: direct_connect
 *                                    (here), callsite_lib_connect (a shared
 *                                    library of the test) called by
 *                                    lib_caller, and curl_caller through
 *                                    libcurl (one HTTP GET, no reuse); with
 *                                    a 4th argument "nocurl", the first two
 *   callsite_client PORT N many K    N connects from each of K functions
 *                                    site_0 .. site_K-1 (K <= 16)
 *   callsite_client PORT N signal    N connects from direct_connect while a
 *                                    100 us timer's SIGALRM handler
 *                                    (signal_connect) connects too, often
 *                                    inside the main thread's connect; then
 *                                    N more from the handler, raised; prints
 *                                    {"handler": connects made by it}
 *   callsite_client PORT N vfork     N vfork children, each connects once
 *                                    from vfork_child before _exit
 *   callsite_client PORT N forks T   T threads (thread_connect) connect N
 *                                    times each while the main thread forks
 *                                    N children, which connect once each
 *                                    from fork_child and exit
 * Exits 0 when every connect succeeded.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

int callsite_lib_connect(int port);

static int port;
static volatile sig_atomic_t failures, handled;

/* The connect in the caller's own body (a helper would be the call site). */
#define CONNECT_HERE(r)                                                                            \
	do {                                                                                       \
		int fd_ = socket(AF_INET, SOCK_STREAM, 0);                                          \
		struct sockaddr_in a_ = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) }; \
		a_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);                                         \
		r = connect(fd_, (struct sockaddr *)&a_, sizeof a_);                                 \
		close(fd_);                                                                          \
	} while (0)

/* Every caller below is its own function, never inlined, and no two have
 * the same body (identical ones may be merged): the call site is the
 * function. */
#define CALLER __attribute__((noinline))

CALLER static int direct_connect(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int r = connect(fd, (struct sockaddr *)&a, sizeof a);
	close(fd);
	return r;
}

CALLER static int lib_caller(void)
{
	int r = callsite_lib_connect(port);
	__asm__ volatile("" ::: "memory");   /* no tail call */
	return r;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

CALLER static int curl_caller(void)
{
	CURL *c = curl_easy_init();
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	/* The listener closes without an answer: connected, then an empty reply. */
	return rc == CURLE_OK || rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR ? 0 : -1;
}

#define SITE(k)                                              \
	CALLER static int site_##k(void)                     \
	{                                                    \
		volatile int tag = k;                        \
		int r;                                       \
		CONNECT_HERE(r);                             \
		return r + tag - k;                          \
	}
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
SITE(8) SITE(9) SITE(10) SITE(11) SITE(12) SITE(13) SITE(14) SITE(15)
static int (*const sites[16])(void) = { site_0, site_1, site_2,	 site_3,  site_4,  site_5,  site_6,  site_7,
					site_8, site_9, site_10, site_11, site_12, site_13, site_14, site_15 };

CALLER static void signal_connect(int sig)
{
	(void)sig;
	int r;
	CONNECT_HERE(r);
	if (r != 0)
		failures++;
	handled++;
}

CALLER static int vfork_child(void)
{
	volatile int tag = 2;   /* not direct_connect's body */
	int r = tag - 2;
	CONNECT_HERE(r);
	return r + tag - 2;
}

CALLER static void *thread_connect(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < n; i++) {
		int r;
		CONNECT_HERE(r);
		if (r != 0)
			failures++;
	}
	return NULL;
}

CALLER static int fork_child(void)
{
	volatile int tag = 1;   /* not vfork_child's body */
	int r = tag - 1;
	CONNECT_HERE(r);
	return r + tag - 1;
}

static void check(int r, const char *what)
{
	if (r != 0) {
		fprintf(stderr, "%s failed\n", what);
		failures++;
	}
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	port = atoi(argv[1]);
	long n = atol(argv[2]);
	const char *mode = argv[3];
	if (strcmp(mode, "three") == 0) {
		int curl = argc < 5 || strcmp(argv[4], "nocurl") != 0;
		if (curl)
			curl_global_init(CURL_GLOBAL_DEFAULT);
		for (long i = 0; i < n; i++) {
			check(direct_connect(), "direct");
			check(lib_caller(), "lib");
			if (curl)
				check(curl_caller(), "curl");
		}
	} else if (strcmp(mode, "many") == 0 && argc > 4) {
		int k = atoi(argv[4]);
		for (long i = 0; i < n; i++)
			for (int s = 0; s < k && s < 16; s++)
				check(sites[s](), "site");
	} else if (strcmp(mode, "signal") == 0) {
		signal(SIGALRM, signal_connect);
		struct itimerval it = { { 0, 100 }, { 0, 100 } }, off = { { 0, 0 }, { 0, 0 } };
		setitimer(ITIMER_REAL, &it, NULL);
		for (long i = 0; i < n; i++)
			check(direct_connect(), "direct");
		setitimer(ITIMER_REAL, &off, NULL);
		for (long i = 0; i < n; i++)
			raise(SIGALRM);
		printf("{\"handler\": %d}\n", (int)handled);
	} else if (strcmp(mode, "vfork") == 0) {
		for (long i = 0; i < n; i++) {
			pid_t p = vfork();
			if (p == 0)
				_exit(vfork_child() == 0 ? 0 : 1);
			int st = 0;
			if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
				failures++;
		}
	} else if (strcmp(mode, "forks") == 0 && argc > 4) {
		int t = atoi(argv[4]);
		pthread_t th[16];
		for (int i = 0; i < t && i < 16; i++)
			pthread_create(&th[i], NULL, thread_connect, (void *)n);
		for (long i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0)
				_exit(fork_child() == 0 ? 0 : 1);
			int st = 0;
			if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
				failures++;
		}
		for (int i = 0; i < t && i < 16; i++)
			pthread_join(th[i], NULL);
	} else {
		return 2;
	}
	return failures ? 1 : 0;
}
