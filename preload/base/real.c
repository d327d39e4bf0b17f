/* SPDX-License-Identifier: Apache-2.0 */
#include "real.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loadpath.h"

/* Calling a function that no later object defines (close_range on an old
 * glibc, say) must behave as if the call failed: ENOSYS. */
static long missing(void)
{
	errno = ENOSYS;
	return -1;
}

NL_LOAD_PATH static void *resolve(const char *name)
{
	int saved = errno;
	void *p = dlsym(RTLD_NEXT, name);
	errno = saved;
	return p ? p : (void *)missing;
}

#define NL_REAL_RESOLVER(ret, name, ...)                                               \
	NL_LOAD_PATH nl_##name##_fn nl_resolve_##name(void)                            \
	{                                                                              \
		nl_##name##_fn f = (nl_##name##_fn)resolve(#name);                     \
		__atomic_store_n(&nl_real_##name##_ptr, f, __ATOMIC_RELEASE);          \
		return f;                                                              \
	}

#define NL_REAL_DEFINE(ret, name, params, args)                                        \
	NL_REAL_RESOLVER(ret, name)                                                    \
	NL_ENTRY_PATH static ret first_##name params { return nl_resolve_##name() args; } \
	nl_##name##_fn nl_real_##name##_ptr = first_##name;
NL_REAL_FUNCS(NL_REAL_DEFINE)
#undef NL_REAL_DEFINE

#define NL_REAL_DEFINE_COLD(ret, name, params, args)                                   \
	nl_##name##_fn nl_resolve_##name(void)                                         \
	{                                                                              \
		nl_##name##_fn f = (nl_##name##_fn)resolve(#name);                     \
		__atomic_store_n(&nl_real_##name##_ptr, f, __ATOMIC_RELEASE);          \
		return f;                                                              \
	}                                                                              \
	static ret first_##name params { return nl_resolve_##name() args; }            \
	nl_##name##_fn nl_real_##name##_ptr = first_##name;
NL_REAL_FUNCS_COLD(NL_REAL_DEFINE_COLD)
#undef NL_REAL_DEFINE_COLD

NL_REAL_FUNCS_BY_HAND(NL_REAL_RESOLVER)

/* fcntl's third argument is an int or a pointer depending on the command;
 * an unsigned long carries either unchanged on the ABIs glibc supports. */
#define NL_FIRST_FCNTL(name)                                          \
	NL_ENTRY_PATH static int first_##name(int fd, int cmd, ...)  \
	{                                                             \
		va_list ap;                                           \
		va_start(ap, cmd);                                    \
		unsigned long arg = va_arg(ap, unsigned long);        \
		va_end(ap);                                           \
		return nl_resolve_##name()(fd, cmd, arg);             \
	}                                                             \
	nl_##name##_fn nl_real_##name##_ptr = first_##name;
NL_FIRST_FCNTL(fcntl)
NL_FIRST_FCNTL(fcntl64)
#undef NL_FIRST_FCNTL

/* syscall's arguments are six longs whatever the number, as libc's own
 * syscall() takes them: the ones a call does not pass are read and ignored. */
NL_ENTRY_PATH static long first_syscall(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	return nl_resolve_syscall()(nr, a, b, c, d, e, f);
}
nl_syscall_fn nl_real_syscall_ptr = first_syscall;

NL_ENTRY_PATH static void first_closefrom(int fd) { nl_resolve_closefrom()(fd); }
nl_closefrom_fn nl_real_closefrom_ptr = first_closefrom;

static bool resolved_all;

void nl_real_init(void)
{
	if (__atomic_load_n(&resolved_all, __ATOMIC_ACQUIRE))
		return;
#define NL_REAL_RESOLVE(ret, name, ...) nl_resolve_##name();
	NL_REAL_FUNCS(NL_REAL_RESOLVE)
	NL_REAL_FUNCS_BY_HAND(NL_REAL_RESOLVE)
#undef NL_REAL_RESOLVE
	__atomic_store_n(&resolved_all, true, __ATOMIC_RELEASE);
}

ssize_t nl_real_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}
