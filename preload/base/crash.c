/* SPDX-License-Identifier: Apache-2.0 */
#include "crash.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "loadpath.h"
#include "log.h"
#include "unwind.h"

/* The four signals of a fault in an instruction. */
#define FAULT_SIGNALS(X) X(SIGSEGV) X(SIGBUS) X(SIGILL) X(SIGFPE)

/* How long the report may take before the signal is sent again to end the
 * process: loading libunwind and reading symbol tables take milliseconds,
 * and a report that waits on a lock the faulting thread holds must not
 * turn a crash into a hang. */
#define REPORT_DEADLINE_S 3

/* The one report of the process: a second fault in the shim, in this
 * thread or another, while or after it is written, dies without one. */
static _Atomic bool reported;

/* The shim's own ELF header, placed by the linker: its program headers say
 * where the shim's code is, read only when a fault happens (no look-up at
 * load, no loader lock in the handler). */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

static bool in_shim(uintptr_t pc, uintptr_t *offset)
{
	const ElfW(Ehdr) *eh = &__ehdr_start;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
	uintptr_t base = 0;
	bool have_base = false;
	for (int i = 0; i < eh->e_phnum; i++) {
		/* The segment that holds the header (file offset 0) gives the
		 * load bias: where the header is, less its link-time address. */
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			base = (uintptr_t)eh - ph[i].p_vaddr;
			have_base = true;
			break;
		}
	}
	if (!have_base)
		return false;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
			continue;
		uintptr_t start = base + ph[i].p_vaddr;
		if (pc >= start && pc - start < ph[i].p_memsz) {
			*offset = pc - base;
			return true;
		}
	}
	return false;
}

/* The interrupted instruction; 0 where the shim does not know how to read
 * it, and such a fault is then never taken for the shim's. */
static uintptr_t interrupted_pc(const void *uc)
{
	const ucontext_t *u = uc;
#if defined(__x86_64__)
	return (uintptr_t)u->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	return (uintptr_t)u->uc_mcontext.pc;
#else
	(void)u;
	return 0;
#endif
}

/* libc's sigaction under the name that the hook of the same name
 * (hooks/signal.c) does not take: called through the dynamic linker's
 * lazy binding, with no stub of the shim's on the load path. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static void put_back_default(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	__sigaction(sig, &dfl, NULL);
}

/* With SIG_DFL back, the process dies as it would have without the shim.
 * A fault of the processor (si_code > 0) happens again when the handler
 * returns, and the kernel then kills the process with the fault's own
 * siginfo, as its core dump records it. A signal that will not happen
 * again (sent by kill, raise or sigqueue; an asynchronous machine-check
 * SIGBUS) is queued again with its own siginfo: it stays pending while the
 * handler runs and is delivered, to the default action, once it returns. */
static void die_of_it(int sig, siginfo_t *si)
{
	put_back_default(sig);
	bool again = si && si->si_code > 0;
#ifdef BUS_MCEERR_AO
	if (sig == SIGBUS && si && si->si_code == BUS_MCEERR_AO)
		again = false;
#endif
	if (again)
		return;
	long pid = getpid(), tid = syscall(SYS_gettid);
	if (!si || syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, si) != 0)
		syscall(SYS_tgkill, pid, tid, sig);
}

/* The report's text, with the read-only data that no process reads
 * before it records (loadpath.h): out of the load path's pages. */
#define COLD_TEXT(name, text) static const char name[] NL_COLD_RODATA = text
COLD_TEXT(fmt_head, "crash: %s (%s) at address %p, in the shim (nemolens-preload %s) at its offset %#lx; "
		    "the process dies of it as it would without the shim");
COLD_TEXT(fmt_named_ours, "crash: #%d %p %s+%#lx (shim+%#lx)");
COLD_TEXT(fmt_named, "crash: #%d %p %s+%#lx");
COLD_TEXT(fmt_ours, "crash: #%d %p (shim+%#lx)");
COLD_TEXT(fmt_bare, "crash: #%d %p");
COLD_TEXT(fmt_end, "crash: end of report, %d frames");
COLD_TEXT(no_unwinder, "crash: no backtrace: libunwind.so.8 could not be loaded");
COLD_TEXT(fmt_code, "si_code %d");
COLD_TEXT(version, NL_VERSION);

struct name {
	int sig, code;
	char text[12];
};
static const struct name names[] NL_COLD_RODATA = {
	{ SIGSEGV, 0, "SIGSEGV" },	     { SIGBUS, 0, "SIGBUS" },		{ SIGILL, 0, "SIGILL" },
	{ SIGFPE, 0, "SIGFPE" },	     { SIGSEGV, SEGV_MAPERR, "SEGV_MAPERR" }, { SIGSEGV, SEGV_ACCERR, "SEGV_ACCERR" },
	{ SIGBUS, BUS_ADRALN, "BUS_ADRALN" }, { SIGBUS, BUS_ADRERR, "BUS_ADRERR" }, { SIGBUS, BUS_OBJERR, "BUS_OBJERR" },
	{ SIGILL, ILL_ILLOPC, "ILL_ILLOPC" }, { SIGILL, ILL_ILLOPN, "ILL_ILLOPN" }, { SIGILL, ILL_PRVOPC, "ILL_PRVOPC" },
	{ SIGFPE, FPE_INTDIV, "FPE_INTDIV" }, { SIGFPE, FPE_INTOVF, "FPE_INTOVF" }, { SIGFPE, FPE_FLTDIV, "FPE_FLTDIV" },
};

/* The name of a signal (code 0) or of one of its si_codes; NULL when the
 * table has none. */
static const char *name_of(int sig, int code)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].sig == sig && names[i].code == code)
			return names[i].text;
	return NULL;
}

/* Sends sig to the process after REPORT_DEADLINE_S: a report stuck on a
 * lock ends in the default action all the same (sig is SIG_DFL and
 * unblocked in this thread by then). A timer of the kernel's, not a thread:
 * nothing to allocate. System calls rather than libc's timer and signal
 * functions here: each function the shim imports takes room in the first
 * pages of the library, which every process maps at load (loadpath.h). */
static void arm_deadline(int sig)
{
	struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = sig };
	int timer;
	if (syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer) != 0)
		return;
	struct itimerspec when = { .it_value = { .tv_sec = REPORT_DEADLINE_S } };
	syscall(SYS_timer_settime, timer, 0, &when, NULL);
}

/* The report: a first line with what is known without any help (signal,
 * address, version, the instruction's offset in the shim), written before
 * anything that could fail or wait, then the frames. */
static void report(int sig, const siginfo_t *si, void *uc, uintptr_t pc_offset)
{
	const char *name = si->si_code > 0 ? name_of(sig, si->si_code) : NULL;
	char code[24];
	if (name)
		snprintf(code, sizeof code, "%s", name);
	else
		snprintf(code, sizeof code, fmt_code, si->si_code);
	const char *signame = name_of(sig, 0);
	nl_log(NL_LOG_ERROR, NULL, fmt_head, signame ? signame : "?", code, si->si_addr, version,
	       (unsigned long)pc_offset);

	/* libunwind is loaded here when no call site has loaded it yet: at
	 * load it would cost every process, and a crash report is worth a
	 * dlopen in a process that is about to die. The deadline above bounds
	 * the one risk, a lock held by the faulting thread itself. */
	if (!nl_unwind_load()) {
		nl_log(NL_LOG_ERROR, NULL, "%s", no_unwinder);
		return;
	}
	void *ips[48];
	int n = nl_unwind_backtrace_signal(uc, ips, (int)(sizeof ips / sizeof ips[0]));
	for (int i = 0; i < n; i++) {
		/* A return address (every frame but the first) may be just past
		 * the function's last call: the function is that of the byte
		 * before it. */
		uintptr_t ip = (uintptr_t)ips[i], look = i ? ip - 1 : ip, off = 0;
		char name[128];
		bool named = nl_unwind_symbol((const void *)look, name, sizeof name, &off);
		uintptr_t in = 0;
		bool ours = in_shim(look, &in);
		if (i)
			off++, in++;
		if (named && ours)
			nl_log(NL_LOG_ERROR, NULL, fmt_named_ours, i, ips[i], name, (unsigned long)off,
			       (unsigned long)in);
		else if (named)
			nl_log(NL_LOG_ERROR, NULL, fmt_named, i, ips[i], name, (unsigned long)off);
		else if (ours)
			nl_log(NL_LOG_ERROR, NULL, fmt_ours, i, ips[i], (unsigned long)in);
		else
			nl_log(NL_LOG_ERROR, NULL, fmt_bare, i, ips[i]);
	}
	nl_log(NL_LOG_ERROR, NULL, fmt_end, n);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	uintptr_t offset;
	/* Only a fault of an instruction in the shim (si_code > 0: raised by
	 * the processor, not sent), and only once per process. */
	if (si && si->si_code > 0 && uc && in_shim(interrupted_pc(uc), &offset) &&
	    !atomic_exchange(&reported, true)) {
		/* From here on a second fault of the same signal ends the
		 * process at once, as does the deadline. */
		put_back_default(sig);
		unsigned long unblock = 1UL << (sig - 1);   /* the kernel's sigset */
		syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &unblock, NULL, sizeof unblock);
		arm_deadline(sig);
		report(sig, si, uc, offset);
	}
	die_of_it(sig, si);
	errno = saved;
}

bool nl_crash_is_ours(const void *handler) { return handler == (const void *)on_fault; }

/* The four signals, for the install's loop (read at load: plain .rodata). */
static const unsigned char fault_signals[] = {
#define ITEM(s) s,
	FAULT_SIGNALS(ITEM)
#undef ITEM
};

/* The shim's disposition. SA_ONSTACK: a thread that has an alternate stack
 * (a program's, for its own stack overflows) runs the handler there, as
 * the program's own handler would; the shim sets up none of its own. The
 * mask is empty; the signal being handled is blocked while the handler
 * runs (no SA_NODEFER), so a second fault of it in the report ends the
 * process as the kernel ends a blocked fault: with the default action.
 * Made by the compiler, not at load: with the load's state, on the page
 * the dynamic linker writes anyway (it relocates the handler's address),
 * and the load path's code stays a loop of system calls. */
NL_LOAD_STATE static struct sigaction shim_action = { .sa_sigaction = on_fault,
						     .sa_flags = SA_SIGINFO | SA_ONSTACK };

NL_LOAD_PATH void nl_crash_install(void)
{
	/* One call per signal in the usual case: set, and look at what was
	 * there; a handler found there (not SIG_DFL) is put back at once. A
	 * program's threads do not run yet when preloaded constructors do. */
	for (size_t i = 0; i < sizeof fault_signals; i++) {
		struct sigaction old;
		if (__sigaction(fault_signals[i], &shim_action, &old) == 0 && old.sa_handler != SIG_DFL)
			__sigaction(fault_signals[i], &old, NULL);
	}
}
