#include "real.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Calling a function that no later object defines (close_range on an old
 * glibc, say) must behave as if the symbol were missing: ENOSYS. */
static long missing(void)
{
	errno = ENOSYS;
	return -1;
}

#define NL_REAL_DEFINE(ret, name, args)                                          \
	nl_##name##_fn nl_real_##name##_ptr;                                     \
	nl_##name##_fn nl_resolve_##name(void)                                   \
	{                                                                        \
		int saved = errno;                                               \
		void *p = dlsym(RTLD_NEXT, #name);                               \
		errno = saved;                                                   \
		nl_##name##_fn f = p ? (nl_##name##_fn)p : (nl_##name##_fn)(void (*)(void))missing; \
		__atomic_store_n(&nl_real_##name##_ptr, f, __ATOMIC_RELEASE);    \
		return f;                                                        \
	}
NL_REAL_FUNCS(NL_REAL_DEFINE)
#undef NL_REAL_DEFINE

void nl_real_init(void)
{
#define NL_REAL_RESOLVE(ret, name, args) \
	if (!nl_real_##name##_ptr)       \
		nl_resolve_##name();
	NL_REAL_FUNCS(NL_REAL_RESOLVE)
#undef NL_REAL_RESOLVE
}

ssize_t nl_real_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}
