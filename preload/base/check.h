/* SPDX-License-Identifier: Apache-2.0 */
/* Contracts: errno kept across the shim's own work, and debug-build checks
 * of the rules that the compiler cannot see.
 *
 * NL_KEEP_ERRNO;   at the top of a block saves errno and puts it back when
 *                  the block is left, however it is left: the program must
 *                  see the errno of its own call, never one of the shim's.
 *
 * NL_ASSERT(cond)  in debug builds (no NDEBUG) writes the failed condition
 *                  to stderr and aborts; release builds compile it away.
 *
 * NL_HOOK_SCOPE;   marks the rest of a block as running on a hook's path
 *                  (inside a program's libc call). Code that allocates,
 *                  locks or does I/O asserts NL_ASSERT_NOT_IN_HOOK(). Both
 *                  cost nothing in release builds.
 *
 * NL_HOOK_ASIDE;   the rest of the block is not on a hook's path although a
 *                  hook called it: the once-per-process set-up that the
 *                  first record runs with every signal blocked.
 */
#ifndef NL_CHECK_H
#define NL_CHECK_H

#include <errno.h>

static inline void nl_errno_restore(const int *saved) { errno = *saved; }
#define NL_KEEP_ERRNO int nl_errno_saved_ __attribute__((cleanup(nl_errno_restore), unused)) = errno

#ifdef NDEBUG
#define NL_ASSERT(cond) ((void)0)
#define NL_HOOK_SCOPE ((void)0)
#define NL_ASSERT_NOT_IN_HOOK() ((void)0)
#define NL_HOOK_ASIDE ((void)0)
#else
void nl_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn, cold));
#define NL_ASSERT(cond) ((cond) ? (void)0 : nl_assert_fail(#cond, __FILE__, __LINE__))

extern __thread int nl_hook_depth;
static inline void nl_hook_leave(const int *unused) { (void)unused; nl_hook_depth--; }
#define NL_HOOK_SCOPE int nl_hook_scope_ __attribute__((cleanup(nl_hook_leave), unused)) = nl_hook_depth++
#define NL_ASSERT_NOT_IN_HOOK() NL_ASSERT(nl_hook_depth == 0)
static inline void nl_hook_return(const int *depth) { nl_hook_depth = *depth; }
#define NL_HOOK_ASIDE int nl_hook_aside_ __attribute__((cleanup(nl_hook_return), unused)) = nl_hook_depth; nl_hook_depth = 0
#endif

#endif
