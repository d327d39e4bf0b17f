/* SPDX-License-Identifier: Apache-2.0 */
/* Unusual file descriptor use; prints what it saw so a test can compare runs
 * with and without the shim.
 *
 *   odd_fds reuse FULL_PORT  a connect that stays pending is closed behind libc's
 *                            back (the system call instruction itself, as a Go
 *                            program does); the number is reused by a file, which
 *                            is then read and closed
 *   odd_fds uvclose FULL_PORT  two connects that stay pending, closed as libuv
 *                            closes (syscall(SYS_close), syscall(SYS_close_range))
 *   odd_fds high OK_PORT     a socket moved to fd 5000 (dup2) connects there
 *   odd_fds bad OK_PORT      calls on invalid fds and arguments: prints every
 *                            return value and errno
 *   odd_fds stderr PORT      closes stderr, and fd 2 becomes a socket connected to
 *                            PORT; the shim's warnings must not go into it
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static struct sockaddr_in target;

#define SHOW(expr)                                                          \
	do {                                                                \
		errno = 0;                                                  \
		long r_ = (long)(expr);                                     \
		printf("%-60s = %ld errno %d\n", #expr, r_, r_ < 0 ? errno : 0); \
	} while (0)

/* close(2) without libc: unseen by any LD_PRELOAD library. */
static long raw_close(int fd)
{
#if defined(__x86_64__)
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_close), "D"((long)fd) : "rcx", "r11", "memory");
	return r;
#elif defined(__aarch64__)
	register long nr __asm__("x8") = SYS_close;
	register long r __asm__("x0") = fd;
	__asm__ volatile("svc 0" : "+r"(r) : "r"(nr) : "memory");
	return r;
#else
#error "raw_close: this architecture's system call instruction is missing"
#endif
}

static int pending_connect(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (connect(fd, (struct sockaddr *)&target, sizeof target) == 0 || errno != EINPROGRESS)
		return -1;
	return fd;
}

static int reuse(void)
{
	int fd = pending_connect();
	if (fd < 0 || raw_close(fd) != 0)
		return 2;
	int f = open("/dev/zero", O_RDONLY);
	char buf[16];
	ssize_t n = read(f, buf, sizeof buf);
	close(f);
	printf("reused %d read %zd\n", f == fd, n);
	return 0;
}

static int uvclose(void)
{
	int a = pending_connect(), b = pending_connect();
	if (a < 0 || b < 0)
		return 2;
	long ra = syscall(SYS_close, a), rb = syscall(SYS_close_range, b, b, 0);
	printf("closed %ld %ld\n", ra, rb);
	return 0;
}

static int high(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int fd = dup2(s, 5000);
	close(s);
	if (fd != 5000 || (connect(fd, (struct sockaddr *)&target, sizeof target) != 0 && errno != EINPROGRESS))
		return 2;
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	poll(&p, 1, 5000);
	int err = -1;
	socklen_t len = sizeof err;
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	close(fd);
	printf("high fd %d so_error %d\n", fd, err);
	return 0;
}

static int bad(void)
{
	char buf[8] = { 0 };
	struct iovec iov = { buf, sizeof buf };
	int v;
	socklen_t len = sizeof v;
	SHOW(connect(-1, (struct sockaddr *)&target, sizeof target));
	SHOW(connect(987654, (struct sockaddr *)&target, sizeof target));
	SHOW(connect(0, (struct sockaddr *)&target, sizeof target));
	SHOW(connect(3, NULL, 0));
	SHOW(close(-1));
	SHOW(close(987654));
	SHOW(read(-1, buf, 1));
	SHOW(read(2000000, buf, 1));
	SHOW(write(-7, buf, 1));
	SHOW(readv(-1, &iov, 1));
	SHOW(send(-1, buf, 1, 0));
	SHOW(recv(-1, buf, 1, 0));
	SHOW(getsockopt(-1, SOL_SOCKET, SO_ERROR, &v, &len));
	SHOW(getsockopt(0, SOL_SOCKET, SO_ERROR, &v, &len));
	SHOW(getsockopt(3, SOL_SOCKET, SO_ERROR, NULL, NULL));
	SHOW(dup(-1));
	SHOW(dup2(-1, 3));
	SHOW(dup2(1, -1));
	SHOW(dup3(1, 1, 0));
	SHOW(fcntl(-1, F_DUPFD, 0));
	SHOW(fcntl(1, F_GETFD));
	SHOW(socket(AF_INET, 12345, 0));
	SHOW(socket(-1, SOCK_STREAM, 0));
	SHOW(accept(-1, NULL, NULL));
	SHOW(close_range(5, 2, 0));
	SHOW(syscall(SYS_close, -1));
	SHOW(syscall(SYS_close, 987654));
	SHOW(syscall(SYS_close_range, 5, 2, 0));
	SHOW(syscall(SYS_getppid) == getppid());
	SHOW(syscall(SYS_pread64, -1, buf, sizeof buf, 0));
	int exe = open("/proc/self/exe", O_RDONLY);   /* a regular file: pread's fifth argument matters */
	SHOW(syscall(SYS_pread64, exe, buf, sizeof buf, -1L));
	SHOW(syscall(SYS_pread64, exe, buf, 3, 1L) == 3 && memcmp(buf, "ELF", 3) == 0);
	/* mmap's sixth argument, the offset: unaligned, then aligned */
	SHOW(syscall(SYS_mmap, 0L, 4096L, (long)PROT_READ, (long)MAP_PRIVATE, (long)exe, 1L));
	SHOW(syscall(SYS_mmap, 0L, 4096L, (long)PROT_READ, (long)MAP_PRIVATE, (long)exe, 4096L) != -1);
	close(exe);
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	SHOW(connect(s, &unspec, sizeof unspec));
	SHOW(connect(s, (struct sockaddr *)&target, 2));
	SHOW(close(s));
	SHOW(close(s));
	return 0;
}

static int stderr_reused(void)
{
	close(STDERR_FILENO);
	int fd = socket(AF_INET, SOCK_STREAM, 0);   /* takes the number 2 */
	if (fd != STDERR_FILENO || connect(fd, (struct sockaddr *)&target, sizeof target) != 0)
		return 2;
	if (write(fd, "hello\n", 6) != 6)
		return 2;
	usleep(100 * 1000);
	printf("stderr is a socket\n");
	return 0;   /* exit: the shim's exit flush fails and would warn on fd 2 */
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	target.sin_family = AF_INET;
	target.sin_port = htons((unsigned short)atoi(argv[2]));
	target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (strcmp(argv[1], "reuse") == 0)
		return reuse();
	if (strcmp(argv[1], "uvclose") == 0)
		return uvclose();
	if (strcmp(argv[1], "high") == 0)
		return high();
	if (strcmp(argv[1], "bad") == 0)
		return bad();
	if (strcmp(argv[1], "stderr") == 0)
		return stderr_reused();
	return 2;
}
