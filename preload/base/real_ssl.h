/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenSSL functions the hooks wrap or ask, found the first time each is
 * called.
 *
 * NL_REAL_SSL(SSL_read)(ssl, buf, n) calls libssl's SSL_read. As in real.h,
 * each pointer starts at a stub that resolves the real function and calls it;
 * the pointer is then replaced, so every later call is one load and an
 * indirect jump. Nothing is resolved at load: a program that never loads
 * libssl never runs any of this.
 *
 * Where the real function is found:
 *  1. dlsym(RTLD_NEXT): libssl is in the global scope (linked by the program
 *     or by a library it links: curl, nginx).
 *  2. dlopen("libssl.so.3", RTLD_NOW | RTLD_NOLOAD) and dlsym on that handle:
 *     libssl was loaded with RTLD_LOCAL by a dlopen'ed object (Python's _ssl
 *     extension, the shim's own libcurl), so step 1 cannot see it. NOLOAD
 *     never loads anything: the caller of an SSL function has libssl loaded.
 *  3. Neither (cannot happen when a caller exists): an interposed function
 *     returns its failure value (-1 for SSL_read, SSL_write, SSL_peek,
 *     SSL_sendfile, SSL_shutdown; 0 for the _ex forms; SSL_free does nothing)
 *     with errno ENOSYS; a helper returns -1, 0 or NULL, which makes the
 *     hooks leave the connection alone.
 * Racing resolutions store the same value; errno is kept.
 *
 * The prototypes are declared here with libssl's opaque SSL type: the shim
 * neither includes OpenSSL's headers nor links libssl.
 */
#ifndef NL_REAL_SSL_H
#define NL_REAL_SSL_H

#include <stddef.h>
#include <sys/types.h>

#include "interposed.h"

typedef struct ssl_st SSL;

/* Read-only questions the hooks ask of an SSL object, at most once per
 * connection. X(return type, name, parameters, arguments, value when missing) */
#define NL_SSL_HELPERS(X)                                                             \
	X(int, SSL_is_server, (const SSL *a), (a), -1)                                \
	X(int, SSL_get_fd, (const SSL *a), (a), -1)                                   \
	X(const char *, SSL_get_servername, (const SSL *a, const int b), (a, b), 0)   \
	X(int, SSL_get_shutdown, (const SSL *a), (a), 0)

#define NL_SSL_TLSEXT_NAMETYPE_host_name 0      /* TLSEXT_NAMETYPE_host_name */
#define NL_SSL_SENT_SHUTDOWN 1                  /* SSL_get_shutdown() bits */
#define NL_SSL_RECEIVED_SHUTDOWN 2

#define NL_REAL_SSL_DECLARE(ret, name, params, ...)         \
	typedef ret(*nl_##name##_fn) params;                \
	extern nl_##name##_fn nl_real_##name##_ptr;
NL_SSL_FUNCS(NL_REAL_SSL_DECLARE)
NL_SSL_FUNCS_BY_HAND(NL_REAL_SSL_DECLARE)
NL_SSL_HELPERS(NL_REAL_SSL_DECLARE)
#undef NL_REAL_SSL_DECLARE

/* An atomic load: the pointer may be resolved by another thread meanwhile. */
#define NL_REAL_SSL(name) (__atomic_load_n(&nl_real_##name##_ptr, __ATOMIC_RELAXED))

#endif
