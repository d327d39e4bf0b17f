#undef _FORTIFY_SOURCE
/* The I/O family. Each call is the original plus NL_AFTER_IO, which does
 * nothing unless the fd has a pending connection acquisition, in which case
 * the call's outcome settles it (see acquire.h). */
#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "acquire.h"
#include "export_sym.h"
#include "real.h"

NL_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t r = NL_REAL(read)(fd, buf, n);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	ssize_t r = NL_REAL(write)(fd, buf, n);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t r = NL_REAL(readv)(fd, iov, iovcnt);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t r = NL_REAL(writev)(fd, iov, iovcnt);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	ssize_t r = NL_REAL(send)(fd, buf, n, flags);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tolen)
{
	ssize_t r = NL_REAL(sendto)(fd, buf, n, flags, to, tolen);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t r = NL_REAL(sendmsg)(fd, msg, flags);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	int r = NL_REAL(sendmmsg)(fd, vec, vlen, flags);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	ssize_t r = NL_REAL(recv)(fd, buf, n, flags);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	ssize_t r = NL_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t r = NL_REAL(recvmsg)(fd, msg, flags);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
	int r = NL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	NL_AFTER_IO(fd, r);
	return r;
}

/* glibc's _FORTIFY_SOURCE entry points: programs built with fortification call
 * these instead of read/recv/recvfrom. */
NL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	ssize_t r = NL_REAL(__read_chk)(fd, buf, n, buflen);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	ssize_t r = NL_REAL(__recv_chk)(fd, buf, n, buflen, flags);
	NL_AFTER_IO(fd, r);
	return r;
}

NL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
				 socklen_t *fromlen)
{
	ssize_t r = NL_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, from, fromlen);
	NL_AFTER_IO(fd, r);
	return r;
}
