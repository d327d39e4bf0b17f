/* SPDX-License-Identifier: Apache-2.0 */
/* The libc functions the hooks wrap, found with dlsym(RTLD_NEXT).
 *
 * NL_REAL(connect)(fd, addr, len) calls libc's connect. Each pointer starts
 * out at a small stub that resolves the real function on its first call and
 * then calls it, so a call that arrives before the constructor (from another
 * library's constructor) works, and a hook never needs a NULL check or a stack
 * frame to make one: after its first call every call is one indirect jump.
 * Pointers are written with the same value by whoever resolves them, so
 * racing resolutions are harmless.
 *
 * Nothing is resolved at load: a dlsym costs about a thousand instructions,
 * and most short processes (a shell's /bin/true) call none of these
 * functions. A process that records resolves them all before its first
 * fork instead (nl_real_init from the fork handler), so that fork children,
 * often many and short-lived, inherit the resolved pointers rather than
 * each paying for the lookups again.
 */
#ifndef NL_REAL_H
#define NL_REAL_H

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "interposed.h"

/* sigaction's and signal's types, without <signal.h>, which would declare
 * syscall() for the file that defines its own (hooks/syscall.c). */
struct sigaction;
typedef void (*nl_sighandler)(int);
/* clone()'s function, and its arguments as seven fixed ones: libc's clone
 * reads the three optional ones from their registers whatever the call
 * passed (hooks/process.c). */
typedef int (*nl_clone_body)(void *);

#define NL_REAL_DECLARE(ret, name, params, ...)             \
	typedef ret(*nl_##name##_fn) params;                \
	extern nl_##name##_fn nl_real_##name##_ptr;         \
	nl_##name##_fn nl_resolve_##name(void);
NL_REAL_FUNCS(NL_REAL_DECLARE)
NL_REAL_FUNCS_COLD(NL_REAL_DECLARE)
NL_REAL_FUNCS_BY_HAND(NL_REAL_DECLARE)
#undef NL_REAL_DECLARE

/* A relaxed load: the pointer is written once, from another thread perhaps
 * (its first call), and any value ever stored in it calls the right code. */
#define NL_REAL(name) (__atomic_load_n(&nl_real_##name##_ptr, __ATOMIC_RELAXED))

/* Resolves every function now; once per process (later calls return at
 * once). */
void nl_real_init(void);

/* write(2) that bypasses the hooks; for the shim's own diagnostics. */
ssize_t nl_real_write(int fd, const void *buf, size_t len);

#endif
