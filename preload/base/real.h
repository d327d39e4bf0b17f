/* The libc functions the hooks wrap, found with dlsym(RTLD_NEXT).
 *
 * NL_REAL(connect)(fd, addr, len) calls libc's connect. Each pointer starts
 * out at a small stub that resolves the real function on its first call and
 * then calls it, so a call that arrives before the constructor (from another
 * library's constructor) works, and a hook never needs a NULL check or a stack
 * frame to make one: after nl_real_init() every call is one indirect jump.
 * Pointers are written with the same value by whoever resolves them, so
 * racing resolutions are harmless.
 */
#ifndef NL_REAL_H
#define NL_REAL_H

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "interposed.h"

#define NL_REAL_DECLARE(ret, name, params, ...)             \
	typedef ret(*nl_##name##_fn) params;                \
	extern nl_##name##_fn nl_real_##name##_ptr;         \
	nl_##name##_fn nl_resolve_##name(void);
NL_REAL_FUNCS(NL_REAL_DECLARE)
NL_REAL_FUNCS_BY_HAND(NL_REAL_DECLARE)
#undef NL_REAL_DECLARE

#define NL_REAL(name) (nl_real_##name##_ptr)

/* Resolves every function now (from the constructor). */
void nl_real_init(void);

/* write(2) that bypasses the hooks; for the shim's own diagnostics. */
ssize_t nl_real_write(int fd, const void *buf, size_t len);

#endif
