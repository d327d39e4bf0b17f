/* SPDX-License-Identifier: Apache-2.0 */
/* Forks while other threads take the locks of the shim's parts, after the
 * parts were first used in a chosen order (test_fork_parts.py).
 *
 *   fork_parts ORDER FORKS
 *
 * ORDER is the first use before any thread starts:
 *   lens      nemolens_meter_get() before anything is recorded
 *   runtime   a NeMo Lens record first (the runtime starts, then the meter)
 *   hooks     a connect() to a listener of its own first (preload only)
 *
 * Then one thread records inference values with a new model name each time
 * (the meter's lock, then the registry's), another connects to the listener
 * again and again (the hooks, the registry), and the main thread forks FORKS
 * times; each child records once, connects once and exits. Prints "forks N",
 * the children reaped, and on stderr any child that did not exit 0; a
 * deadlock shows as a hang. */
#include <nemolens.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_bool stop;
static struct sockaddr_in listener;
static nemolens_meter *meter;

static void connect_once(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return;
	connect(fd, (struct sockaddr *)&listener, sizeof listener);
	close(fd);
}

static void record_once(unsigned i)
{
	char model[32];
	snprintf(model, sizeof model, "model-%u", i);
	nemolens_record_inference_metrics(meter, .request_duration_s = NEMOLENS_F64(0.25), .model = model,
					  .input_tokens = NEMOLENS_I64(3));
}

/* A meter makes a set of attributes for each new model, under its lock,
 * then the set's series in the registry, under the registry's lock: past
 * the meter's limit of sets it makes none, so a new meter every few
 * thousand models keeps both locks in use. */
static void *recorder(void *arg)
{
	(void)arg;
	char name[32];
	for (unsigned i = 0, gen = 0; !atomic_load(&stop); i++) {
		record_once(i);
		if (i % 2048 == 2047) {
			nemolens_meter_release(meter);
			snprintf(name, sizeof name, "fork_parts.%u", ++gen);
			meter = nemolens_meter_get(name);
		}
		if (i % 8 == 0)
			usleep(100);
	}
	return NULL;
}

static void *connector(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		connect_once();
		usleep(200);
	}
	return NULL;
}

static void *acceptor(void *arg)
{
	int lfd = *(int *)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c >= 0)
			close(c);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fork_parts lens|runtime|hooks FORKS\n");
		return 2;
	}
	const char *order = argv[1];
	int forks = atoi(argv[2]);

	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	listener.sin_family = AF_INET;
	listener.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof listener;
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&listener, sizeof listener) != 0 || listen(lfd, 512) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&listener, &len) != 0) {
		perror("listener");
		return 1;
	}

	if (strcmp(order, "lens") == 0) {
		meter = nemolens_meter_get("fork_parts");
	} else if (strcmp(order, "runtime") == 0) {
		nemolens_record_rl_metrics(NULL, .reward_mean = NEMOLENS_F64(0.5));
		meter = nemolens_meter_get("fork_parts");
	} else if (strcmp(order, "hooks") == 0) {
		connect_once();
		meter = nemolens_meter_get("fork_parts");
	} else {
		fprintf(stderr, "fork_parts: unknown order %s\n", order);
		return 2;
	}

	pthread_t acc, rec, con;
	pthread_create(&acc, NULL, acceptor, &lfd);
	pthread_create(&rec, NULL, recorder, NULL);
	pthread_create(&con, NULL, connector, NULL);
	int reaped = 0;
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			break;
		}
		if (pid == 0) {
			record_once(1000000u + (unsigned)i);
			connect_once();
			_exit(0);
		}
		int status;
		pid_t w;
		while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
			;
		if (w < 0)
			fprintf(stderr, "waitpid: %s\n", strerror(errno));
		if (w == pid) {
			reaped++;
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				fprintf(stderr, "fork_parts: child %d: status %#x\n", (int)pid, status);
		}
	}
	atomic_store(&stop, true);
	pthread_join(rec, NULL);
	pthread_join(con, NULL);
	printf("forks %d\n", reaped);
	return 0;
}
