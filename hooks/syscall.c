/* SPDX-License-Identifier: Apache-2.0 */
/* syscall(): libuv (Node.js, uvloop) closes its fds with syscall(SYS_close)
 * rather than close(). Those closes, and SYS_close_range, release what close()
 * and close_range() release; every other number passes straight through.
 *
 * libc declares syscall(long, ...); this definition takes seven longs, and
 * <unistd.h>, which has the variadic declaration, stays out of this file. On
 * the ABIs glibc supports, a variadic call passes integer arguments in the
 * same registers and stack slots as a fixed one, and the ones a call does not
 * pass are read and ignored, as libc's own syscall() reads them. Reading them
 * through a va_list would cost every call, futexes included, some thirty
 * instructions more. */
#include <sys/syscall.h>

#include "export_sym.h"
#include "real.h"
#include "socket.h"

/* Out of line: the numbers passed through pay for no saved register. */
static __attribute__((noinline)) long closing(long nr, long a, long b, long c, long d, long e, long f)
{
	if (nr == SYS_close)
		nl_sock_closing((int)a);
	else
		nl_sock_closing_range((unsigned)a, (unsigned)b, (int)c);
	return NL_REAL(syscall)(nr, a, b, c, d, e, f);
}

NL_EXPORT long syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	if (__builtin_expect(nr == SYS_close || nr == SYS_close_range, 0))
		return closing(nr, a, b, c, d, e, f);
	return NL_REAL(syscall)(nr, a, b, c, d, e, f);
}
