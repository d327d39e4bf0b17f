/* SPDX-License-Identifier: Apache-2.0 */
#include "unwind.h"

#include <string.h>

#include "lazylib.h"

/* Local unwinding only: the names below are the macros of <libunwind.h>
 * for this process's own address space (_ULx86_64_... on x86-64). Only the
 * types and those names are taken from the header; the functions are found
 * with dlsym, since the library is not linked. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#define NAME_OF(sym) NAME_OF_(sym)
#define NAME_OF_(sym) #sym

static struct nl_lazylib lib;

static struct {
	int (*backtrace)(void **, int);
	int (*getcontext)(unw_context_t *);
	int (*init_local)(unw_cursor_t *, unw_context_t *);
	int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*set_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t);
	int (*get_proc_name)(unw_cursor_t *, char *, size_t, unw_word_t *);
} api;

static bool load(unsigned wait_ms)
{
	static const char names[] = "unw_backtrace\0" NAME_OF(unw_tdep_getcontext) "\0" NAME_OF(
		unw_init_local) "\0" NAME_OF(unw_init_local2) "\0" NAME_OF(unw_step) "\0" NAME_OF(unw_get_reg) "\0" NAME_OF(unw_set_reg) "\0" NAME_OF(unw_get_proc_name);
	/* RTLD_LOCAL (lazylib.h): libunwind's `backtrace` and `_Unwind_*`
	 * stay out of the global scope, where they would shadow glibc's and
	 * libgcc's. */
	return nl_lazylib_open(&lib, "libunwind.so.8", names, &api, sizeof api / sizeof(void *), wait_ms);
}

bool nl_unwind_load(void) { return load(0); }

bool nl_unwind_load_wait(unsigned ms) { return load(ms); }

bool nl_unwind_loaded(void) { return nl_lazylib_ready(&lib); }

#ifdef NL_UNWIND_STEPS
/* ThreadSanitizer's builds: unw_backtrace keeps a cache per thread whose
 * destructor locks a mutex as the thread ends, after ThreadSanitizer has
 * let go of the thread, and crashes it. Stepping a cursor keeps no such
 * cache; it costs more per frame, which only those builds pay. */
int nl_unwind_backtrace(void **ips, int max)
{
	if (!nl_unwind_loaded() || max <= 0)
		return 0;
	unw_context_t uc;
	unw_cursor_t c;
	if (api.getcontext(&uc) < 0 || api.init_local(&c, &uc) < 0)
		return 0;
	int n = 0;
	while (n < max && api.step(&c) > 0) {   /* the first step leaves this function */
		unw_word_t ip;
		if (api.get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		ips[n++] = (void *)ip;
	}
	return n;
}
#else
int nl_unwind_backtrace(void **ips, int max)
{
	if (!nl_unwind_loaded() || max <= 0)
		return 0;
	/* unw_backtrace names its own caller first: this function, which the
	 * caller did not ask for. */
	void *buf[max + 1];
	int n = api.backtrace(buf, max + 1);
	if (n <= 1)
		return 0;
	memcpy(ips, buf + 1, (size_t)(n - 1) * sizeof *ips);
	return n - 1;
}
#endif

int nl_unwind_backtrace_signal(void *ucontext, void **ips, int max)
{
	if (!nl_unwind_loaded() || !ucontext || max <= 0)
		return 0;
	unw_cursor_t c;
	if (api.init_local2(&c, (unw_context_t *)ucontext, UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	int n = 0;
	do {
		unw_word_t ip;
		if (api.get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		ips[n++] = (void *)ip;
	} while (n < max && api.step(&c) > 0);
	return n;
}

bool nl_unwind_symbol(const void *ip, char *name, size_t len, uintptr_t *offset)
{
	if (!nl_unwind_loaded() || !len)
		return false;
	/* A cursor of this frame, moved to ip: libunwind names what the cursor's
	 * instruction pointer is in. */
	unw_context_t uc;
	unw_cursor_t c;
	unw_word_t off = 0;
	if (api.getcontext(&uc) < 0 || api.init_local(&c, &uc) < 0 ||
	    api.set_reg(&c, UNW_REG_IP, (unw_word_t)(uintptr_t)ip) < 0 ||
	    api.get_proc_name(&c, name, len, &off) < 0 || !name[0])
		return false;
	if (offset)
		*offset = (uintptr_t)off;
	return true;
}
