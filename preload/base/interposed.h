/* SPDX-License-Identifier: Apache-2.0 */
/* The one list of the libc functions the shim interposes. From it come the
 * pointers to the real functions (real.h, real.c) and the version script that
 * exports them from libnemolens_preload.so (exports.map.c, preprocessed at
 * build time): a hook missing from either fails the build instead of going
 * quietly unexported.
 *
 * No #include here: the version script is made from this file alone.
 */
#ifndef NL_INTERPOSED_H
#define NL_INTERPOSED_H

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
	X(ssize_t, sendfile, (int a, int b, off_t *c, size_t d), (a, b, c, d))                         \
	X(ssize_t, sendfile64, (int a, int b, off_t *c, size_t d), (a, b, c, d))                       \
	X(ssize_t, splice, (int a, loff_t *b, int c, loff_t *d, size_t e, unsigned f), (a, b, c, d, e, f))  \
	X(int, getaddrinfo, (const char *a, const char *b, const struct addrinfo *c, struct addrinfo **d), \
	  (a, b, c, d))

/* Interposed functions that programs call rarely, and never on the load
 * path: their first-call stubs and resolvers go with the rest of the code,
 * not with the load path (loadpath.h). Same X as NL_REAL_FUNCS. */
#define NL_REAL_FUNCS_COLD(X)                                                                          \
	X(int, sigaction, (int a, const struct sigaction *b, struct sigaction *c), (a, b, c))          \
	X(nl_sighandler, signal, (int a, nl_sighandler b), (a, b))                                     \
	X(int, clone, (nl_clone_body a, void *b, int c, void *d, void *e, void *f, void *g), (a, b, c, d, e, f, g))

/* The OpenSSL (libssl 3) functions the shim interposes: not libc's, so they
 * have a resolver of their own (real_ssl.h), which finds libssl lazily: a
 * program that never loads it pays nothing. They are exported like the libc
 * ones. SSL is libssl's opaque struct ssl_st; the shim never needs its headers.
 * X(return type, name, parameters, arguments, what to return when libssl
 * cannot be found) */
#define NL_SSL_FUNCS(X)                                                                                \
	X(int, SSL_read, (SSL *a, void *b, int c), (a, b, c), -1)                                      \
	X(int, SSL_read_ex, (SSL *a, void *b, size_t c, size_t *d), (a, b, c, d), 0)                   \
	X(int, SSL_peek, (SSL *a, void *b, int c), (a, b, c), -1)                                      \
	X(int, SSL_peek_ex, (SSL *a, void *b, size_t c, size_t *d), (a, b, c, d), 0)                   \
	X(int, SSL_write, (SSL *a, const void *b, int c), (a, b, c), -1)                               \
	X(int, SSL_write_ex, (SSL *a, const void *b, size_t c, size_t *d), (a, b, c, d), 0)            \
	X(ssize_t, SSL_sendfile, (SSL *a, int b, off_t c, size_t d, int e), (a, b, c, d, e), -1)       \
	X(int, SSL_shutdown, (SSL *a), (a), -1)

#define NL_SSL_FUNCS_BY_HAND(X)                  \
	X(void, SSL_free, (SSL *))

/* The ones whose first-call stub cannot be generated (variadic, or void) are
 * written out in real.c. */
#define NL_REAL_FUNCS_BY_HAND(X)                 \
	X(int, fcntl, (int, int, ...))           \
	X(int, fcntl64, (int, int, ...))         \
	X(long, syscall, (long, ...))            \
	X(void, closefrom, (int))

#endif
