/* SPDX-License-Identifier: Apache-2.0 */
#include "real_ssl.h"

#include <dlfcn.h>
#include <errno.h>

/* What a call resolves to when libssl cannot be found (real_ssl.h, 3.): the
 * function's failure value and ENOSYS. As in real.c, one function stands for
 * every signature: the value is returned in the register every caller reads. */
static long missing_minus_one(void)
{
	errno = ENOSYS;
	return -1;
}

static long missing_zero(void)
{
	errno = ENOSYS;
	return 0;
}

static void *resolve(const char *name, long fail)
{
	int saved = errno;
	void *p = dlsym(RTLD_NEXT, name);
	if (!p) {
		/* Loaded RTLD_LOCAL: not in the global scope, but loaded. The handle
		 * is kept (never dlclose'd): libssl stays as long as the process. */
		void *h = dlopen("libssl.so.3", RTLD_NOW | RTLD_NOLOAD);
		if (h)
			p = dlsym(h, name);
	}
	errno = saved;
	return p ? p : fail == 0 ? (void *)missing_zero : (void *)missing_minus_one;
}

#define NL_SSL_RESOLVER(ret, name, fail)                                                \
	static nl_##name##_fn resolve_##name(void)                                      \
	{                                                                               \
		nl_##name##_fn f = (nl_##name##_fn)resolve(#name, fail);                \
		__atomic_store_n(&nl_real_##name##_ptr, f, __ATOMIC_RELEASE);           \
		return f;                                                               \
	}

#define NL_SSL_DEFINE(ret, name, params, args, fail)                                    \
	NL_SSL_RESOLVER(ret, name, fail)                                                \
	static ret first_##name params { return resolve_##name() args; }                \
	nl_##name##_fn nl_real_##name##_ptr = first_##name;
NL_SSL_FUNCS(NL_SSL_DEFINE)
NL_SSL_HELPERS(NL_SSL_DEFINE)
#undef NL_SSL_DEFINE

NL_SSL_RESOLVER(void, SSL_free, 0)
static void first_SSL_free(SSL *s) { resolve_SSL_free()(s); }
nl_SSL_free_fn nl_real_SSL_free_ptr = first_SSL_free;
