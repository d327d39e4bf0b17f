/* SPDX-License-Identifier: Apache-2.0 */
/* A library linked by fault_handlers: the program's SIGSEGV/SIGFPE handler,
 * installed from this library's constructor (before a preloaded library's
 * constructor runs: dependencies are initialised first) when
 * FAULT_HANDLER_EARLY=1, or from main.
 *
 * The handler says what it caught and what it found installed before it,
 * then puts that back and chains to it: a handler it calls directly, or the
 * default action, by returning to the faulting instruction (a fault) or
 * raising the signal again (a signal that was sent). */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct sigaction previous[65];

static void say(const char *s) { (void)!write(1, s, strlen(s)); }

static void handler(int sig, siginfo_t *si, void *uc)
{
	struct sigaction *old = &previous[sig];
	bool dfl = !(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_DFL;
	char line[160];
	snprintf(line, sizeof line, "handled %s code %d, previous handler: %s\n", sig == SIGSEGV ? "SIGSEGV" : "SIGFPE",
		 si->si_code, dfl ? "default" : "a function");
	say(line);
	sigaction(sig, old, NULL);
	if (old->sa_flags & SA_SIGINFO)
		old->sa_sigaction(sig, si, uc);
	else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN)
		old->sa_handler(sig);
	else if (si->si_code <= 0)
		raise(sig);
}

void early_handler_install(const char *who)
{
	struct sigaction act = { .sa_sigaction = handler, .sa_flags = SA_SIGINFO };
	sigemptyset(&act.sa_mask);
	sigaction(SIGSEGV, &act, &previous[SIGSEGV]);
	sigaction(SIGFPE, &act, &previous[SIGFPE]);
	char line[80];
	snprintf(line, sizeof line, "handler installed in %s\n", who);
	say(line);
}

__attribute__((constructor)) static void early(void)
{
	const char *e = getenv("FAULT_HANDLER_EARLY");
	if (e && strcmp(e, "1") == 0)
		early_handler_install("a library's constructor");
}
