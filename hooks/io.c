#undef _FORTIFY_SOURCE
/* The I/O family. Each call is the original, plus: when the fd has a pending
 * connection acquisition, the call's outcome settles it (see acquire.h).
 * nl_fd_watched() is one load while no acquisition is pending anywhere, so the
 * common path is a tail call into libc. */
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "acquire.h"
#include "export_sym.h"
#include "real.h"

NL_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(read)(fd, buf, n);
	ssize_t r = NL_REAL(read)(fd, buf, n);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(write)(fd, buf, n);
	ssize_t r = NL_REAL(write)(fd, buf, n);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(readv)(fd, iov, iovcnt);
	ssize_t r = NL_REAL(readv)(fd, iov, iovcnt);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(writev)(fd, iov, iovcnt);
	ssize_t r = NL_REAL(writev)(fd, iov, iovcnt);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(send)(fd, buf, n, flags);
	ssize_t r = NL_REAL(send)(fd, buf, n, flags);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tolen)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(sendto)(fd, buf, n, flags, to, tolen);
	ssize_t r = NL_REAL(sendto)(fd, buf, n, flags, to, tolen);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(sendmsg)(fd, msg, flags);
	ssize_t r = NL_REAL(sendmsg)(fd, msg, flags);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(sendmmsg)(fd, vec, vlen, flags);
	int r = NL_REAL(sendmmsg)(fd, vec, vlen, flags);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(recv)(fd, buf, n, flags);
	ssize_t r = NL_REAL(recv)(fd, buf, n, flags);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	ssize_t r = NL_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(recvmsg)(fd, msg, flags);
	ssize_t r = NL_REAL(recvmsg)(fd, msg, flags);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	int r = NL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

/* glibc's _FORTIFY_SOURCE entry points: programs built with fortification call
 * these instead of read/recv/recvfrom. */
NL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(__read_chk)(fd, buf, n, buflen);
	ssize_t r = NL_REAL(__read_chk)(fd, buf, n, buflen);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(__recv_chk)(fd, buf, n, buflen, flags);
	ssize_t r = NL_REAL(__recv_chk)(fd, buf, n, buflen, flags);
	nl_acq_after_io(fd, r >= 0);
	return r;
}

NL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
				 socklen_t *fromlen)
{
	if (!nl_fd_watched(fd))
		return NL_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, from, fromlen);
	ssize_t r = NL_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, from, fromlen);
	nl_acq_after_io(fd, r >= 0);
	return r;
}
