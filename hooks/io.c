/* SPDX-License-Identifier: Apache-2.0 */
#undef _FORTIFY_SOURCE
/* The I/O family. Each call is the original, plus, on a watched fd (see
 * fdtable.h): its outcome settles a pending connection acquisition
 * (acquire.h), and the bytes it moved are fed to the HTTP layer (follow.h).
 * While nothing is watched anywhere (nl_fd_any_watched), a hook is one load
 * and a tail call into libc; everything else is in its *_watched twin, out
 * of line, so the common path sets up no stack frame. */
#include <errno.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <unistd.h>

#include "acquire.h"
#include "export_sym.h"
#include "follow.h"
#include "httpconn.h"
#include "real.h"

static inline void settle(struct nl_fd *e, int fd, ssize_t r)
{
	if (atomic_load_explicit(&e->state, memory_order_relaxed) == NL_FD_CONNECTING)
		nl_acq_after_io(fd, r >= 0);
}

static inline int followed(struct nl_fd *e) { return nl_fd_http_side(e) != 0; }

/* Bytes read into buf (MSG_PEEK data is read again later: not fed twice). */
static inline __attribute__((always_inline)) void after_in(struct nl_fd *e, int fd, const void *buf, ssize_t r, int flags)
{
	settle(e, fd, r);
	if (!followed(e) || (flags & MSG_PEEK))
		return;
	if (r > 0)
		nl_follow_feed_bytes(e, fd, 0, buf, (size_t)r, 0);
	else if (r == 0)
		nl_follow_eof(e, fd);
}

static inline __attribute__((always_inline)) void after_out(struct nl_fd *e, int fd, const void *buf, ssize_t r, uint64_t t0)
{
	settle(e, fd, r);
	if (r > 0 && followed(e))
		nl_follow_feed_bytes(e, fd, 1, buf, (size_t)r, t0);
}

static void after_iov(struct nl_fd *e, int fd, int out, const struct iovec *iov, size_t n, ssize_t r, int flags,
		      uint64_t t0)
{
	settle(e, fd, r);
	if (!followed(e) || (flags & MSG_PEEK))
		return;
	/* One buffer (nginx writes a response's head so) goes the way of write's. */
	if (r > 0 && n == 1 && (size_t)r <= iov[0].iov_len)
		nl_follow_feed_bytes(e, fd, out, iov[0].iov_base, (size_t)r, t0);
	else if (r > 0)
		nl_follow_iov(e, fd, out, iov, n, (size_t)r, t0);
	else if (r == 0 && !out)
		nl_follow_eof(e, fd);
}

static void after_mmsg(struct nl_fd *e, int fd, int out, const struct mmsghdr *vec, int r, int flags, uint64_t t0)
{
	settle(e, fd, r);
	if (!followed(e) || (flags & MSG_PEEK))
		return;
	for (int i = 0; i < r; i++)
		if (vec[i].msg_len)
			nl_follow_iov(e, fd, out, vec[i].msg_hdr.msg_iov, vec[i].msg_hdr.msg_iovlen, vec[i].msg_len, t0);
}

static __attribute__((noinline)) ssize_t read_watched(struct nl_fd *e, int fd, void *buf, size_t n)
{
	ssize_t r = NL_REAL(read)(fd, buf, n);
	after_in(e, fd, buf, r, 0);
	return r;
}

NL_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(read)(fd, buf, n);
	return read_watched(e, fd, buf, n);
}

static __attribute__((noinline)) ssize_t write_watched(struct nl_fd *e, int fd, const void *buf, size_t n)
{
	uint64_t t0 = nl_follow_write_start(e);
	ssize_t r = NL_REAL(write)(fd, buf, n);
	after_out(e, fd, buf, r, t0);
	return r;
}

NL_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(write)(fd, buf, n);
	return write_watched(e, fd, buf, n);
}

static __attribute__((noinline)) ssize_t readv_watched(struct nl_fd *e, int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t r = NL_REAL(readv)(fd, iov, iovcnt);
	after_iov(e, fd, 0, iov, iovcnt > 0 ? (size_t)iovcnt : 0, r, 0, 0);
	return r;
}

NL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(readv)(fd, iov, iovcnt);
	return readv_watched(e, fd, iov, iovcnt);
}

static __attribute__((noinline)) ssize_t writev_watched(struct nl_fd *e, int fd, const struct iovec *iov, int iovcnt)
{
	uint64_t t0 = nl_follow_write_start(e);
	ssize_t r = NL_REAL(writev)(fd, iov, iovcnt);
	after_iov(e, fd, 1, iov, iovcnt > 0 ? (size_t)iovcnt : 0, r, 0, t0);
	return r;
}

NL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(writev)(fd, iov, iovcnt);
	return writev_watched(e, fd, iov, iovcnt);
}

static __attribute__((noinline)) ssize_t send_watched(struct nl_fd *e, int fd, const void *buf, size_t n, int flags)
{
	uint64_t t0 = nl_follow_write_start(e);
	ssize_t r = NL_REAL(send)(fd, buf, n, flags);
	after_out(e, fd, buf, r, t0);
	return r;
}

NL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(send)(fd, buf, n, flags);
	return send_watched(e, fd, buf, n, flags);
}

static __attribute__((noinline)) ssize_t sendto_watched(struct nl_fd *e, int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tolen)
{
	uint64_t t0 = nl_follow_write_start(e);
	ssize_t r = NL_REAL(sendto)(fd, buf, n, flags, to, tolen);
	after_out(e, fd, buf, r, t0);
	return r;
}

NL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to, socklen_t tolen)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(sendto)(fd, buf, n, flags, to, tolen);
	return sendto_watched(e, fd, buf, n, flags, to, tolen);
}

static __attribute__((noinline)) ssize_t sendmsg_watched(struct nl_fd *e, int fd, const struct msghdr *msg, int flags)
{
	uint64_t t0 = nl_follow_write_start(e);
	ssize_t r = NL_REAL(sendmsg)(fd, msg, flags);
	after_iov(e, fd, 1, msg->msg_iov, msg->msg_iovlen, r, 0, t0);
	return r;
}

NL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(sendmsg)(fd, msg, flags);
	return sendmsg_watched(e, fd, msg, flags);
}

static __attribute__((noinline)) int sendmmsg_watched(struct nl_fd *e, int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	uint64_t t0 = nl_follow_write_start(e);
	int r = NL_REAL(sendmmsg)(fd, vec, vlen, flags);
	after_mmsg(e, fd, 1, vec, r, 0, t0);
	return r;
}

NL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(sendmmsg)(fd, vec, vlen, flags);
	return sendmmsg_watched(e, fd, vec, vlen, flags);
}

static __attribute__((noinline)) ssize_t recv_watched(struct nl_fd *e, int fd, void *buf, size_t n, int flags)
{
	ssize_t r = NL_REAL(recv)(fd, buf, n, flags);
	after_in(e, fd, buf, r, flags);
	return r;
}

NL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(recv)(fd, buf, n, flags);
	return recv_watched(e, fd, buf, n, flags);
}

static __attribute__((noinline)) ssize_t recvfrom_watched(struct nl_fd *e, int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	ssize_t r = NL_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	after_in(e, fd, buf, r, flags);
	return r;
}

NL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *fromlen)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	return recvfrom_watched(e, fd, buf, n, flags, from, fromlen);
}

static __attribute__((noinline)) ssize_t recvmsg_watched(struct nl_fd *e, int fd, struct msghdr *msg, int flags)
{
	ssize_t r = NL_REAL(recvmsg)(fd, msg, flags);
	after_iov(e, fd, 0, msg->msg_iov, msg->msg_iovlen, r, flags, 0);
	return r;
}

NL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(recvmsg)(fd, msg, flags);
	return recvmsg_watched(e, fd, msg, flags);
}

static __attribute__((noinline)) int recvmmsg_watched(struct nl_fd *e, int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
	int r = NL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	after_mmsg(e, fd, 0, vec, r, flags, 0);
	return r;
}

NL_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *timeout)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	return recvmmsg_watched(e, fd, vec, vlen, flags, timeout);
}

/* glibc's _FORTIFY_SOURCE entry points: programs built with fortification call
 * these instead of read/recv/recvfrom. */
static __attribute__((noinline)) ssize_t __read_chk_watched(struct nl_fd *e, int fd, void *buf, size_t n, size_t buflen)
{
	ssize_t r = NL_REAL(__read_chk)(fd, buf, n, buflen);
	after_in(e, fd, buf, r, 0);
	return r;
}

NL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(__read_chk)(fd, buf, n, buflen);
	return __read_chk_watched(e, fd, buf, n, buflen);
}

static __attribute__((noinline)) ssize_t __recv_chk_watched(struct nl_fd *e, int fd, void *buf, size_t n, size_t buflen, int flags)
{
	ssize_t r = NL_REAL(__recv_chk)(fd, buf, n, buflen, flags);
	after_in(e, fd, buf, r, flags);
	return r;
}

NL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(__recv_chk)(fd, buf, n, buflen, flags);
	return __recv_chk_watched(e, fd, buf, n, buflen, flags);
}

static __attribute__((noinline)) ssize_t __recvfrom_chk_watched(struct nl_fd *e, int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
				 socklen_t *fromlen)
{
	ssize_t r = NL_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, from, fromlen);
	after_in(e, fd, buf, r, flags);
	return r;
}

NL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *from,
				 socklen_t *fromlen)
{
	struct nl_fd *e;
	if (!nl_fd_any_watched() || !(e = nl_fd_watched(fd)))
		return NL_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, from, fromlen);
	return __recvfrom_chk_watched(e, fd, buf, n, buflen, flags, from, fromlen);
}

/* Bodies the kernel copies itself (nginx sends files with sendfile): the
 * bytes are not seen, only counted, and can only be part of a body. The call
 * settles a connecting socket at that end as any read or write does,
 * whatever it returned. */
static __attribute__((noinline)) void after_opaque(int fd, int out, ssize_t r)
{
	struct nl_fd *e = nl_fd_any_watched() ? nl_fd_watched(fd) : NULL;
	if (e) {
		settle(e, fd, r);
		if (r > 0 && followed(e))
			nl_follow_feed_opaque(e, fd, out, (size_t)r);
	}
}

NL_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	ssize_t r = NL_REAL(sendfile)(out_fd, in_fd, offset, count);
	after_opaque(out_fd, 1, r);
	return r;
}

NL_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count)
{
	ssize_t r = NL_REAL(sendfile64)(out_fd, in_fd, offset, count);
	after_opaque(out_fd, 1, r);
	return r;
}

NL_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len, unsigned int flags)
{
	ssize_t r = NL_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
	after_opaque(fd_out, 1, r);
	after_opaque(fd_in, 0, r);
	return r;
}
