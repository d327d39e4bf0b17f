/* The libc functions the hooks wrap, resolved with dlsym(RTLD_NEXT).
 *
 * All of them are resolved once by nl_real_init() from the constructor. A call
 * that arrives earlier (from another library's constructor) resolves its own
 * function on the spot. Each pointer is written at most once with the same
 * value, so racing resolutions are harmless.
 */
#ifndef NL_REAL_H
#define NL_REAL_H

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NL_REAL_FUNCS(X)                                                                      \
	X(int, socket, (int, int, int))                                                       \
	X(int, socketpair, (int, int, int, int *))                                            \
	X(int, connect, (int, const struct sockaddr *, socklen_t))                            \
	X(int, accept, (int, struct sockaddr *, socklen_t *))                                 \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                           \
	X(int, close, (int))                                                                  \
	X(int, close_range, (unsigned, unsigned, int))                                        \
	X(void, closefrom, (int))                                                             \
	X(int, dup, (int))                                                                    \
	X(int, dup2, (int, int))                                                              \
	X(int, dup3, (int, int, int))                                                         \
	X(int, fcntl, (int, int, ...))                                                        \
	X(int, fcntl64, (int, int, ...))                                                      \
	X(int, getsockopt, (int, int, int, void *, socklen_t *))                              \
	X(ssize_t, read, (int, void *, size_t))                                               \
	X(ssize_t, write, (int, const void *, size_t))                                        \
	X(ssize_t, readv, (int, const struct iovec *, int))                                   \
	X(ssize_t, writev, (int, const struct iovec *, int))                                  \
	X(ssize_t, send, (int, const void *, size_t, int))                                    \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, socklen_t)) \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                                \
	X(int, sendmmsg, (int, struct mmsghdr *, unsigned int, int))                          \
	X(ssize_t, recv, (int, void *, size_t, int))                                          \
	X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *))      \
	X(ssize_t, recvmsg, (int, struct msghdr *, int))                                      \
	X(int, recvmmsg, (int, struct mmsghdr *, unsigned int, int, struct timespec *))       \
	X(ssize_t, __read_chk, (int, void *, size_t, size_t))                                 \
	X(ssize_t, __recv_chk, (int, void *, size_t, size_t, int))                            \
	X(ssize_t, __recvfrom_chk, (int, void *, size_t, size_t, int, struct sockaddr *, socklen_t *)) \
	X(int, getaddrinfo, (const char *, const char *, const struct addrinfo *, struct addrinfo **))

#define NL_REAL_DECLARE(ret, name, args)                    \
	typedef ret(*nl_##name##_fn) args;                  \
	extern nl_##name##_fn nl_real_##name##_ptr;         \
	nl_##name##_fn nl_resolve_##name(void);
NL_REAL_FUNCS(NL_REAL_DECLARE)
#undef NL_REAL_DECLARE

/* NL_REAL(connect)(fd, addr, len) calls libc's connect. */
#define NL_REAL(name) (__builtin_expect(nl_real_##name##_ptr != 0, 1) ? nl_real_##name##_ptr : nl_resolve_##name())

void nl_real_init(void);

/* write(2) that bypasses the hooks; for the shim's own diagnostics. */
ssize_t nl_real_write(int fd, const void *buf, size_t len);

#endif
