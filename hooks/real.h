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

/* X(return type, name, parameters, arguments) */
#define NL_REAL_FUNCS(X)                                                                               \
	X(int, socket, (int a, int b, int c), (a, b, c))                                               \
	X(int, socketpair, (int a, int b, int c, int *d), (a, b, c, d))                                \
	X(int, connect, (int a, const struct sockaddr *b, socklen_t c), (a, b, c))                     \
	X(int, accept, (int a, struct sockaddr *b, socklen_t *c), (a, b, c))                           \
	X(int, accept4, (int a, struct sockaddr *b, socklen_t *c, int d), (a, b, c, d))                \
	X(int, close, (int a), (a))                                                                    \
	X(int, close_range, (unsigned a, unsigned b, int c), (a, b, c))                                \
	X(int, dup, (int a), (a))                                                                      \
	X(int, dup2, (int a, int b), (a, b))                                                           \
	X(int, dup3, (int a, int b, int c), (a, b, c))                                                 \
	X(int, getsockopt, (int a, int b, int c, void *d, socklen_t *e), (a, b, c, d, e))              \
	X(ssize_t, read, (int a, void *b, size_t c), (a, b, c))                                        \
	X(ssize_t, write, (int a, const void *b, size_t c), (a, b, c))                                 \
	X(ssize_t, readv, (int a, const struct iovec *b, int c), (a, b, c))                            \
	X(ssize_t, writev, (int a, const struct iovec *b, int c), (a, b, c))                           \
	X(ssize_t, send, (int a, const void *b, size_t c, int d), (a, b, c, d))                        \
	X(ssize_t, sendto, (int a, const void *b, size_t c, int d, const struct sockaddr *e, socklen_t f), \
	  (a, b, c, d, e, f))                                                                          \
	X(ssize_t, sendmsg, (int a, const struct msghdr *b, int c), (a, b, c))                         \
	X(int, sendmmsg, (int a, struct mmsghdr *b, unsigned int c, int d), (a, b, c, d))              \
	X(ssize_t, recv, (int a, void *b, size_t c, int d), (a, b, c, d))                              \
	X(ssize_t, recvfrom, (int a, void *b, size_t c, int d, struct sockaddr *e, socklen_t *f),      \
	  (a, b, c, d, e, f))                                                                          \
	X(ssize_t, recvmsg, (int a, struct msghdr *b, int c), (a, b, c))                               \
	X(int, recvmmsg, (int a, struct mmsghdr *b, unsigned int c, int d, struct timespec *e),        \
	  (a, b, c, d, e))                                                                             \
	X(ssize_t, __read_chk, (int a, void *b, size_t c, size_t d), (a, b, c, d))                     \
	X(ssize_t, __recv_chk, (int a, void *b, size_t c, size_t d, int e), (a, b, c, d, e))           \
	X(ssize_t, __recvfrom_chk, (int a, void *b, size_t c, size_t d, int e, struct sockaddr *f, socklen_t *g), \
	  (a, b, c, d, e, f, g))                                                                       \
	X(int, getaddrinfo, (const char *a, const char *b, const struct addrinfo *c, struct addrinfo **d), \
	  (a, b, c, d))

/* The ones whose first-call stub cannot be generated (variadic, or void) are
 * written out in real.c. */
#define NL_REAL_FUNCS_BY_HAND(X)                 \
	X(int, fcntl, (int, int, ...))           \
	X(int, fcntl64, (int, int, ...))         \
	X(void, closefrom, (int))

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
