/* SPDX-License-Identifier: Apache-2.0 */
/* Faults in its own code, with or without handlers of its own, for the
 * crash report's tests: the outcome must be the same with and without the
 * shim.
 *
 *   fault_handlers HANDLER WHAT
 *     HANDLER  none, or main (installed in main; FAULT_HANDLER_EARLY=1 has
 *              the linked library install it from its constructor instead)
 *     WHAT     segv    reads address 16
 *              fpe     divides by zero
 *              wait    prints "ready" and waits for a signal
 *              status  prints how SIGSEGV, SIGBUS, SIGILL and SIGFPE are
 *                      handled, as sigaction and signal tell it and as the
 *                      kernel has it (/proc/self/status, SigCgt), and exits
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void early_handler_install(const char *who);

static volatile int zero, hundred = 100;
static int *volatile unmapped = (int *)16;

static unsigned long long caught_by_kernel(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long mask = 0;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "SigCgt:", 7) == 0)
			mask = strtoull(line + 7, NULL, 16);
	if (f)
		fclose(f);
	return mask;
}

static void status(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE };
	static const char *const names[] = { "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE" };
	unsigned long long cgt = caught_by_kernel();
	for (int i = 0; i < 4; i++) {
		struct sigaction old;
		sigaction(sigs[i], NULL, &old);
		void (*h)(int) = signal(sigs[i], SIG_DFL);
		signal(sigs[i], h);
		printf("%s: sigaction %s, signal %s, kernel %s\n", names[i],
		       old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO) ? "default" : "handler",
		       h == SIG_DFL ? "default" : "handler", cgt >> (sigs[i] - 1) & 1 ? "handler" : "default");
	}
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	setvbuf(stdout, NULL, _IONBF, 0);
	if (strcmp(argv[1], "main") == 0)
		early_handler_install("main");
	if (strcmp(argv[2], "segv") == 0)
		return *unmapped;
	if (strcmp(argv[2], "fpe") == 0)
		return hundred / zero;
	if (strcmp(argv[2], "wait") == 0) {
		printf("ready\n");
		for (;;)
			pause();
	}
	if (strcmp(argv[2], "status") == 0) {
		status();
		return 0;
	}
	return 2;
}
