/* SPDX-License-Identifier: Apache-2.0 */
/* Creating, connecting, copying and releasing sockets.
 *
 * What each call adds to the original:
 *   socket, accept, accept4  the new fd starts fresh (tracked stream socket,
 *                            or ignored), whatever its number carried before
 *   socketpair               both fds start fresh, not counted
 *   socket, socketpair       from the shim's own threads: close-on-exec
 *   connect                  counts the attempt, may start a pending acquisition
 *   getsockopt(SO_ERROR)     may settle a pending acquisition
 *   accept, accept4          a tracked stream socket: its bytes are followed
 *                            by the HTTP layer (server side)
 *   connect                  and a connected TCP socket (client side)
 *   close, close_range, closefrom, dup2, dup3 (over a tracked fd)
 *                            settle what is pending (acquisition, HTTP
 *                            exchanges), forget the fd
 *   dup, dup2, dup3, fcntl(F_DUPFD*)
 *                            the copy is tracked like the original
 */
#undef _FORTIFY_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acquire.h"
#include "check.h"
#include "clock.h"
#include "dest.h"
#include "export_sym.h"
#include "follow.h"
#include "httpmetrics.h"
#include "real.h"
#include "socket.h"
#include "state.h"

static int counting(void)
{
	return atomic_load_explicit(&nl_recording, memory_order_relaxed) && !nl_hooks_bypass;
}

/* Exchanges still followed on a number the program closed behind libc's back. */
static inline void release_http(struct nl_fd *e, int fd)
{
	if (e && nl_fd_http_was_fed(e))
		nl_follow_release(fd);
}

/* A new socket fd: tracked if it can carry a counted connection. */
static void fresh_socket(int fd, int domain, int type)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct nl_fd *e = nl_fd_lookup(fd);
	release_http(e, fd);   /* as for accept: a number reused behind libc's back */
	if (!counting())
		nl_fd_forget(fd);
	else if (base != SOCK_STREAM || (domain != AF_INET && domain != AF_INET6 && domain != AF_UNIX))
		nl_fd_ignore(fd);
	else if (e)
		nl_fd_track_entry(e);
	else
		nl_fd_track(fd);   /* its chunk mapped first */
}

NL_EXPORT int socket(int domain, int type, int protocol)
{
	/* The shim's own sockets (libcurl's) must not leak into an exec'd image. */
	if (nl_hooks_bypass)
		type |= SOCK_CLOEXEC;
	int fd = NL_REAL(socket)(domain, type, protocol);
	if (fd >= 0)
		fresh_socket(fd, domain, type);   /* sets no errno (as accepted) */
	return fd;
}

NL_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	if (nl_hooks_bypass)
		type |= SOCK_CLOEXEC;
	int r = NL_REAL(socketpair)(domain, type, protocol, sv);
	if (r == 0) {
		nl_fd_forget(sv[0]);
		nl_fd_forget(sv[1]);
	}
	return r;
}

/* A connection accepted on a listening socket the shim tracks. */
static void accepted(int listener, int fd)
{
	/* No NL_KEEP_ERRNO: nothing below sets errno (nl_fd_get keeps it around
	 * the one system call it may make). A number the program closed behind
	 * libc's back (libuv closes with a raw system call) still has its old
	 * exchanges: they ended then. */
	struct nl_fd *e = nl_fd_lookup(fd);
	release_http(e, fd);
	if (nl_fd_state(listener) != NL_FD_SOCKET) {
		nl_fd_copy(listener, fd);
		return;
	}
	if (!e && !(e = nl_fd_get(fd)))
		return;
	if (nl_http_server_on && counting())
		nl_fd_track_followed(e, NL_HTTP_SERVER, -1);
	else
		nl_fd_track_entry(e);
}

NL_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int r = NL_REAL(accept)(fd, addr, len);
	if (r >= 0)
		accepted(fd, r);
	return r;
}

NL_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	int r = NL_REAL(accept4)(fd, addr, len, flags);
	if (r >= 0)
		accepted(fd, r);
	return r;
}

NL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (!counting())
		return NL_REAL(connect)(fd, addr, len);
	return nl_acq_connect(fd, addr, len, nl_http_client_on ? NL_HTTP_CLIENT : NL_HTTP_NONE,
			      __builtin_return_address(0));
}

NL_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	/* While no fd is watched none is connecting: the usual case is a tail call. */
	if (level != SOL_SOCKET || name != SO_ERROR || !nl_fd_any_watched())
		return NL_REAL(getsockopt)(fd, level, name, val, len);
	return nl_acq_getsockopt_so_error(fd, val, len);
}

/* The fd goes away: its HTTP exchanges end, then its acquisition. */
static inline __attribute__((always_inline)) void release_entry(struct nl_fd *e, int fd)
{
	/* A candidate that never carried bytes is simply forgotten with the fd. */
	if (nl_fd_http_was_fed(e))
		nl_follow_release(fd);
	if (atomic_load_explicit(&e->state, memory_order_relaxed) == NL_FD_CONNECTING)
		nl_acq_release(fd);
	else
		nl_fd_clear(e);
}

static void release(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (e)
		release_entry(e, fd);
}

static __attribute__((noinline)) int close_tracked(struct nl_fd *e, int fd)
{
	release_entry(e, fd);
	return NL_REAL(close)(fd);
}

void nl_sock_closing(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (e && atomic_load_explicit(&e->state, memory_order_relaxed) != NL_FD_UNTRACKED)
		release_entry(e, fd);
}

NL_EXPORT int close(int fd)
{
	struct nl_fd *e = nl_fd_lookup(fd);
	if (!e || atomic_load_explicit(&e->state, memory_order_relaxed) == NL_FD_UNTRACKED)
		return NL_REAL(close)(fd);
	return close_tracked(e, fd);
}

static void release_range(unsigned first, unsigned last)
{
	for (unsigned c = first >> NL_FD_CHUNK_BITS; c < NL_FD_CHUNKS && c <= last >> NL_FD_CHUNK_BITS; c++) {
		if (!atomic_load(&nl_fd_chunks[c]))
			continue;   /* nothing tracked in this range */
		unsigned lo = c << NL_FD_CHUNK_BITS, hi = lo + NL_FD_CHUNK - 1;
		for (unsigned fd = lo > first ? lo : first; fd <= hi && fd <= last; fd++)
			if (nl_fd_state((int)fd) != NL_FD_UNTRACKED)
				release((int)fd);
	}
}

void nl_sock_closing_range(unsigned first, unsigned last, int flags)
{
	/* CLOSE_RANGE_CLOEXEC only marks the fds; they are closed at exec, when the
	 * shim's state goes away with the image anyway. */
	if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		release_range(first, last);
}

NL_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	nl_sock_closing_range(first, last, flags);
	return NL_REAL(close_range)(first, last, flags);
}

NL_EXPORT void closefrom(int lowfd)
{
	if (lowfd >= 0)
		release_range((unsigned)lowfd, ~0u);
	NL_REAL(closefrom)(lowfd);
}

NL_EXPORT int dup(int oldfd)
{
	int r = NL_REAL(dup)(oldfd);
	if (r >= 0) {
		NL_KEEP_ERRNO;
		nl_fd_copy(oldfd, r);
	}
	return r;
}

/* dup2/dup3 close newfd silently: settle what it had pending first, while
 * its socket is still there to ask. Only when the call will replace it: one
 * that fails (oldfd not open: EBADF; dup3 of an fd onto itself: EINVAL)
 * leaves newfd as it was, and its state with it. Asked of the kernel only
 * for a tracked newfd, which a program rarely dups over. */
static void before_dup_over(int oldfd, int newfd)
{
	if (oldfd != newfd && nl_fd_state(newfd) != NL_FD_UNTRACKED) {
		NL_KEEP_ERRNO;
		if (NL_REAL(fcntl)(oldfd, F_GETFD) != -1)
			release(newfd);
	}
}

static void after_dup(int oldfd, int newfd, int r)
{
	if (r >= 0 && oldfd != newfd) {
		NL_KEEP_ERRNO;
		nl_fd_copy(oldfd, newfd);
	}
}

NL_EXPORT int dup2(int oldfd, int newfd)
{
	before_dup_over(oldfd, newfd);
	int r = NL_REAL(dup2)(oldfd, newfd);
	after_dup(oldfd, newfd, r);
	return r;
}

NL_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	before_dup_over(oldfd, newfd);
	int r = NL_REAL(dup3)(oldfd, newfd, flags);
	after_dup(oldfd, newfd, r);
	return r;
}

/* fcntl's third argument is an int or a pointer depending on cmd; passing it on
 * as an unsigned long carries either unchanged on the ABIs glibc supports. */
static int fcntl_common(nl_fcntl_fn real, int fd, int cmd, unsigned long arg)
{
	int r = real(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) {
		NL_KEEP_ERRNO;
		nl_fd_copy(fd, r);
	}
	return r;
}

NL_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common(NL_REAL(fcntl), fd, cmd, arg);
}

NL_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	return fcntl_common((nl_fcntl_fn)NL_REAL(fcntl64), fd, cmd, arg);
}
