/* SPDX-License-Identifier: Apache-2.0 */
/* Connection acquisitions (preload/follow/acquire.c): every rule of the table in
 * acquire.h, walked through the interposed connect(), getsockopt(), close(),
 * dup2(), close_range(), socket() and I/O hooks, with scripted libc results
 * and no real sockets.
 *
 * How: the hooks reach libc through the nl_real_<name>_ptr pointers (real.h).
 * Setup resolves them (so the saved values are libc's, not the first-call
 * stubs, which would overwrite a fake when called), saves them and points them
 * at the fakes below. The fakes answer for the fds FD_LO..FD_HI-1 (never open)
 * from a per-fd script and hand every other fd, Criterion's own, to libc.
 * acquire.c calls getpeername() directly: this file defines it, and the
 * executable's definition wins for the statically linked project code.
 *
 * Outcomes are read from a registry snapshot as deltas from a baseline taken
 * in setup, so the checks hold whether or not each test starts in a fresh
 * process. Every expected count is written by hand from the rules. Each call
 * into a hook starts with errno = SENTINEL: a call that succeeds must leave
 * it, a call that fails must leave exactly the fake's errno, whatever the
 * shim did meanwhile (its probes fail with ENOTCONN or ENOTSOCK on purpose).
 */
#undef _FORTIFY_SOURCE   /* read()/recv() must reach the hooks the fakes sit behind, not __read_chk */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "acquire.h"
#include "clock.h"
#include "connmetrics.h"
#include "dest.h"
#include "fdtable.h"
#include "helpers.h"
#include "httpmetrics.h"
#include "log.h"
#include "real.h"
#include "registry.h"
#include "state.h"

/* The hooks come from a static archive, whose objects are linked only for
 * symbols still undefined when it is scanned. Under gcc's ASan, libasan.so
 * (linked first) already defines read, send, recv, ..., so nothing would pull
 * in hooks/io.c and this file's read() would be libasan's, not the hook.
 * __recv_chk, which no sanitizer runtime defines, pulls it in. */
extern ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
__attribute__((used)) static ssize_t (*const link_io_hooks)(int, void *, size_t, size_t, int) = __recv_chk;

#define CONNECT_TOTAL "gym.http.connection_pool.connect_total"
#define QUEUE_DURATION "gym.http.connection_pool.queue_duration_ms"
#define ATTR_DEST "nemo.gym.http.destination.server.name"
#define ATTR_OUTCOME "nemo.gym.http.connection_pool.queue_outcome"

#define SENTINEL EDOM   /* errno before every hook call */

/* The fake fds: numbers no test process has open. */
#define FD_LO 100
#define FD_HI 200
enum { FD = 100, FD2 = 101, FD3 = 102 };

/* ---- the fake libc -------------------------------------------------------- */

#define MAX_STEPS 8

struct result {
	long ret;
	int err;   /* errno when ret < 0 */
};

struct fake_fd {
	int not_socket;                 /* nonzero: the number names no socket, calls fail with it */
	int so_type;                    /* what SO_TYPE says */
	int so_error;                   /* pending SO_ERROR; reading clears it, as in the kernel */
	bool peer;                      /* getpeername() succeeds */
	struct result connects[MAX_STEPS];
	size_t n_connects, next_connect;
	struct result ios[MAX_STEPS];   /* the first I/O calls; later ones succeed */
	size_t n_ios, next_io;
	_Atomic int so_type_asked;
	int closes;
	long connect_ms;                /* how long connect() takes */
};

static struct fake_fd fakes[FD_HI - FD_LO];
static void sleep_ms(long ms);
static int next_socket = -1;    /* what the fake socket() returns once */

static struct {
	nl_socket_fn socket;
	nl_connect_fn connect;
	nl_getsockopt_fn getsockopt;
	nl_close_fn close;
	nl_close_range_fn close_range;
	nl_dup2_fn dup2;
	nl_fcntl_fn fcntl;
	nl_read_fn read;
	nl_write_fn write;
	nl_send_fn send;
	nl_recv_fn recv;
} orig;

static bool scripted(int fd)
{
	return fd >= FD_LO && fd < FD_HI;
}

static struct fake_fd *fake(int fd)
{
	cr_assert(scripted(fd), "fd %d is not a fake fd", fd);
	return &fakes[fd - FD_LO];
}

static void reset_fake(int fd)
{
	struct fake_fd *f = fake(fd);
	memset(f, 0, sizeof *f);
	f->so_type = SOCK_STREAM;
}

static long answer(struct result r)
{
	if (r.ret < 0)
		errno = r.err;
	return r.ret;
}

static int fake_socket(int domain, int type, int protocol)
{
	if (next_socket < 0)
		return orig.socket(domain, type, protocol);
	int fd = next_socket;
	next_socket = -1;
	return fd;
}

static int fake_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (!scripted(fd))
		return orig.connect(fd, addr, len);
	struct fake_fd *f = fake(fd);
	cr_assert_lt(f->next_connect, f->n_connects, "connect() on fd %d that the test did not script", fd);
	if (f->connect_ms)
		sleep_ms(f->connect_ms);
	return (int)answer(f->connects[f->next_connect++]);
}

static int fake_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (!scripted(fd))
		return orig.getsockopt(fd, level, name, val, len);
	struct fake_fd *f = fake(fd);
	if (name == SO_TYPE)
		atomic_fetch_add(&f->so_type_asked, 1);
	if (f->not_socket) {
		errno = f->not_socket;
		return -1;
	}
	if (level != SOL_SOCKET || (name != SO_TYPE && name != SO_ERROR)) {
		errno = ENOPROTOOPT;
		return -1;
	}
	if (!val || !len || *len < (socklen_t)sizeof(int)) {
		errno = EINVAL;
		return -1;
	}
	if (name == SO_TYPE) {
		*(int *)val = f->so_type;
	} else {
		*(int *)val = f->so_error;
		f->so_error = 0;
	}
	*len = sizeof(int);
	return 0;
}

/* Called by acquire.c directly, not through a pointer. */
int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	if (!scripted(fd))
		return (int)syscall(SYS_getpeername, fd, addr, len);
	const struct fake_fd *f = &fakes[fd - FD_LO];
	if (f->not_socket || !f->peer) {
		errno = f->not_socket ? f->not_socket : ENOTCONN;
		return -1;
	}
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(8080) };
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	memcpy(addr, &sin, *len < sizeof sin ? *len : sizeof sin);
	*len = sizeof sin;
	return 0;
}

static ssize_t scripted_io(int fd, size_t n)
{
	struct fake_fd *f = fake(fd);
	if (f->next_io < f->n_ios)
		return answer(f->ios[f->next_io++]);
	return (ssize_t)n;
}

static ssize_t fake_read(int fd, void *buf, size_t n)
{
	return scripted(fd) ? scripted_io(fd, n) : orig.read(fd, buf, n);
}

static ssize_t fake_write(int fd, const void *buf, size_t n)
{
	return scripted(fd) ? scripted_io(fd, n) : orig.write(fd, buf, n);
}

static ssize_t fake_send(int fd, const void *buf, size_t n, int flags)
{
	return scripted(fd) ? scripted_io(fd, n) : orig.send(fd, buf, n, flags);
}

static ssize_t fake_recv(int fd, void *buf, size_t n, int flags)
{
	return scripted(fd) ? scripted_io(fd, n) : orig.recv(fd, buf, n, flags);
}

static int fake_close(int fd)
{
	if (!scripted(fd))
		return orig.close(fd);
	fake(fd)->closes++;
	return 0;
}

static int fake_close_range(unsigned first, unsigned last, int flags)
{
	if (first < FD_LO || last >= FD_HI)
		return orig.close_range(first, last, flags);
	for (unsigned fd = first; fd <= last; fd++)
		fake((int)fd)->closes++;
	return 0;
}

static int fake_dup2(int oldfd, int newfd)
{
	if (!scripted(newfd))
		return orig.dup2(oldfd, newfd);
	cr_assert(scripted(oldfd), "dup2(%d, %d) of a real fd over a fake one", oldfd, newfd);
	if (fake(oldfd)->not_socket)
		return (int)answer((struct result){ -1, fake(oldfd)->not_socket });
	fake(newfd)->closes++;   /* dup2 closes newfd silently */
	return newfd;
}

/* F_GETFD tells whether a number is open (dup2 asks it of its old fd). */
static int fake_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	if (!scripted(fd))
		return orig.fcntl(fd, cmd, arg);
	cr_assert_eq(cmd, F_GETFD, "fcntl(%d, %d) of a fake fd", fd, cmd);
	return fake(fd)->not_socket ? (int)answer((struct result){ -1, fake(fd)->not_socket }) : 0;
}

static void install_fakes(void)
{
	nl_real_init();   /* the saved pointers must be libc's, not the first-call stubs */
	orig.socket = nl_real_socket_ptr;
	orig.connect = nl_real_connect_ptr;
	orig.getsockopt = nl_real_getsockopt_ptr;
	orig.close = nl_real_close_ptr;
	orig.close_range = nl_real_close_range_ptr;
	orig.dup2 = nl_real_dup2_ptr;
	orig.fcntl = nl_real_fcntl_ptr;
	orig.read = nl_real_read_ptr;
	orig.write = nl_real_write_ptr;
	orig.send = nl_real_send_ptr;
	orig.recv = nl_real_recv_ptr;
	nl_real_socket_ptr = fake_socket;
	nl_real_connect_ptr = fake_connect;
	nl_real_getsockopt_ptr = fake_getsockopt;
	nl_real_close_ptr = fake_close;
	nl_real_close_range_ptr = fake_close_range;
	nl_real_dup2_ptr = fake_dup2;
	nl_real_fcntl_ptr = fake_fcntl;
	nl_real_read_ptr = fake_read;
	nl_real_write_ptr = fake_write;
	nl_real_send_ptr = fake_send;
	nl_real_recv_ptr = fake_recv;
}

static void restore_libc(void)
{
	nl_real_socket_ptr = orig.socket;
	nl_real_connect_ptr = orig.connect;
	nl_real_getsockopt_ptr = orig.getsockopt;
	nl_real_close_ptr = orig.close;
	nl_real_close_range_ptr = orig.close_range;
	nl_real_dup2_ptr = orig.dup2;
	nl_real_fcntl_ptr = orig.fcntl;
	nl_real_read_ptr = orig.read;
	nl_real_write_ptr = orig.write;
	nl_real_send_ptr = orig.send;
	nl_real_recv_ptr = orig.recv;
}

/* ---- metrics -------------------------------------------------------------- */

struct counts {
	int64_t connects;
	uint64_t ok, abandoned;
	double ok_ms, abandoned_ms;
};

static struct counts base_svc, base_ext;
static unsigned base_connecting;

static struct counts read_counts(const char *dest)
{
	struct counts c = { 0 };
	struct nl_snapshot *snap = nl_snapshot_take(false, false, 1000, 2000);
	cr_assert_not_null(snap);
	for (size_t i = 0; i < snap->n_metrics; i++) {
		const struct nl_metric *m = &snap->metrics[i];
		bool connects = strcmp(m->name, CONNECT_TOTAL) == 0, queue = strcmp(m->name, QUEUE_DURATION) == 0;
		if (!connects && !queue)
			continue;
		cr_assert_eq(m->kind, connects ? NL_COUNTER : NL_HISTOGRAM, "%s has the wrong kind", m->name);
		for (size_t j = 0; j < m->n_points; j++) {
			const struct nl_point *p = &m->points[j];
			const char *d = attr(p, ATTR_DEST), *outcome = attr(p, ATTR_OUTCOME);
			if (!d || strcmp(d, dest) != 0)
				continue;
			if (!outcome)
				outcome = "";
			if (connects) {
				c.connects += p->ivalue;
			} else if (strcmp(outcome, "ok") == 0) {
				c.ok += p->count;
				c.ok_ms += p->sum;
			} else {
				cr_assert_str_eq(outcome, "abandoned", "queue_duration_ms point with outcome '%s'", outcome);
				c.abandoned += p->count;
				c.abandoned_ms += p->sum;
			}
		}
	}
	nl_snapshot_free(snap);
	return c;
}

/* What the registry gained for dest since setup. */
static struct counts since_setup(const char *dest)
{
	struct counts c = read_counts(dest), b = strcmp(dest, "svc") == 0 ? base_svc : base_ext;
	return (struct counts){ c.connects - b.connects, c.ok - b.ok, c.abandoned - b.abandoned,
				c.ok_ms - b.ok_ms, c.abandoned_ms - b.abandoned_ms };
}

static void expect_counts(const char *dest, int64_t connects, uint64_t ok, uint64_t abandoned)
{
	struct counts c = since_setup(dest);
	cr_assert_eq(c.connects, connects, "%s: connect_total +%lld, want +%lld", dest, (long long)c.connects,
		     (long long)connects);
	cr_assert_eq(c.ok, ok, "%s: %llu ok waits, want %llu", dest, (unsigned long long)c.ok,
		     (unsigned long long)ok);
	cr_assert_eq(c.abandoned, abandoned, "%s: %llu abandoned waits, want %llu", dest,
		     (unsigned long long)c.abandoned, (unsigned long long)abandoned);
}

static void expect_state(int fd, uint32_t state)
{
	cr_assert_eq(nl_fd_state(fd), state, "fd %d in state %u, want %u", fd, nl_fd_state(fd), state);
}

/* How many acquisitions are pending, counted by the fd table itself. */
static void expect_pending(unsigned n)
{
	unsigned now = atomic_load(&nl_fd_watching);
	cr_assert_eq(now - base_connecting, n, "%u acquisitions pending, want %u", now - base_connecting, n);
}

/* ---- setup ---------------------------------------------------------------- */

static void setup(void)
{
	nl_log_set_level(NL_LOG_NONE);
	install_fakes();
	nl_dest_reset();
	cr_assert_eq(nl_dest_configure("svc=127.0.0.1:8080"), 1);
	nl_connmetrics_init();
	atomic_store(&nl_recording, true);
	for (int fd = FD_LO; fd < FD_HI; fd++) {
		nl_fd_forget(fd);
		reset_fake(fd);
	}
	next_socket = -1;
	base_connecting = atomic_load(&nl_fd_watching);
	base_svc = read_counts("svc");
	base_ext = read_counts("external");
}

static void teardown(void)
{
	atomic_store(&nl_recording, false);
	for (int fd = FD_LO; fd < FD_HI; fd++)
		nl_fd_forget(fd);
	restore_libc();
	nl_dest_reset();
}

TestSuite(acquire, .init = setup, .fini = teardown);

/* ---- calling the hooks ---------------------------------------------------- */

static const char *SVC_IP = "127.0.0.1";
static const int SVC_PORT = 8080;

/* r and err (errno just after the call) must be exactly the fake's answer. */
static void expect_result(const char *call, int fd, long r, int err, long want, int want_err)
{
	cr_assert_eq(r, want, "%s(%d) returned %ld, want %ld", call, fd, r, want);
	int errno_want = want < 0 ? want_err : SENTINEL;
	cr_assert_eq(err, errno_want, "%s(%d) left errno %d (%s), want %d (%s)", call, fd, err, strerror(err),
		     errno_want, strerror(errno_want));
}

/* connect() to ip:port, the fake answering ret/err. */
static void connect_to(int fd, const char *ip, int port, int ret, int err)
{
	struct fake_fd *f = fake(fd);
	cr_assert_lt(f->n_connects, MAX_STEPS);
	f->connects[f->n_connects++] = (struct result){ ret, err };
	struct sockaddr_in sin = addr4(ip, port);
	errno = SENTINEL;
	int r = connect(fd, (const struct sockaddr *)&sin, sizeof sin);
	int e = errno;
	expect_result("connect", fd, r, e, ret, err);
	cr_assert_eq(f->next_connect, f->n_connects, "connect(%d) did not reach libc", fd);
}

static void connect_svc(int fd, int ret, int err)
{
	connect_to(fd, SVC_IP, SVC_PORT, ret, err);
}

/* A fresh stream socket (as the socket() hook leaves it) whose connect to svc
 * is in progress. */
static void start_pending(int fd)
{
	nl_fd_track(fd);
	connect_svc(fd, -1, EINPROGRESS);
	expect_state(fd, NL_FD_CONNECTING);
}

/* getsockopt(SO_ERROR) by the program: the socket reports so_error; peer is
 * whether it has a peer by now. */
static void check_so_error(int fd, int so_error, bool peer)
{
	fake(fd)->so_error = so_error;
	fake(fd)->peer = peer;
	int v = -1;
	socklen_t len = sizeof v;
	errno = SENTINEL;
	int r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len);
	int e = errno;
	expect_result("getsockopt", fd, r, e, 0, 0);
	cr_assert_eq(v, so_error, "getsockopt(SO_ERROR) gave %d, want %d", v, so_error);
	cr_assert_eq(len, sizeof(int));
}

enum io_call { IO_READ, IO_WRITE, IO_SEND, IO_RECV };
static const char *const io_names[] = { "read", "write", "send", "recv" };

/* One I/O call; ret < 0 scripts a failure with err, else the call moves ret bytes. */
static void io(int fd, enum io_call call, long ret, int err)
{
	struct fake_fd *f = fake(fd);
	cr_assert_lt(f->n_ios, MAX_STEPS);
	f->ios[f->n_ios++] = (struct result){ ret, err };
	char buf[64] = { 0 };
	size_t n = ret > 0 ? (size_t)ret : sizeof buf;
	errno = SENTINEL;
	ssize_t r = 0;
	switch (call) {
	case IO_READ: r = read(fd, buf, n); break;
	case IO_WRITE: r = write(fd, buf, n); break;
	case IO_SEND: r = send(fd, buf, n, 0); break;
	case IO_RECV: r = recv(fd, buf, n, 0); break;
	}
	int e = errno;
	expect_result(io_names[call], fd, r, e, ret, err);
}

/* close() by the program: reaches the fake close once, returns its 0. */
static void close_fd(int fd)
{
	int before = fake(fd)->closes;
	errno = SENTINEL;
	int r = close(fd);
	int e = errno;
	expect_result("close", fd, r, e, 0, 0);
	cr_assert_eq(fake(fd)->closes, before + 1, "close(%d) did not reach libc", fd);
	expect_state(fd, NL_FD_UNTRACKED);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- connect() finishing inside the call ---------------------------------- */

Test(acquire, blocking_connect_success_is_counted_without_a_wait)
{
	nl_fd_track(FD);
	connect_svc(FD, 0, 0);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, connect_refused_at_once_is_counted_without_a_wait)
{
	nl_fd_track(FD);
	connect_svc(FD, -1, ECONNREFUSED);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, every_connect_call_to_a_destination_is_counted)
{
	nl_fd_track(FD);
	nl_fd_track(FD2);
	connect_svc(FD, -1, ECONNREFUSED);
	connect_svc(FD, 0, 0);
	connect_svc(FD2, -1, ETIMEDOUT);
	expect_counts("svc", 3, 0, 0);
}

/* ---- getsockopt(SO_ERROR) ------------------------------------------------- */

Test(acquire, einprogress_then_so_error_zero_with_a_peer_is_ok)
{
	start_pending(FD);
	expect_counts("svc", 1, 0, 0);   /* counted on entry, the wait not yet recorded */
	expect_pending(1);
	check_so_error(FD, 0, true);
	expect_counts("svc", 1, 1, 0);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, so_error_zero_without_a_peer_keeps_waiting)
{
	start_pending(FD);
	check_so_error(FD, 0, false);   /* the shim's getpeername fails with ENOTCONN: errno kept */
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_CONNECTING);
	check_so_error(FD, 0, true);
	expect_counts("svc", 1, 1, 0);
}

Test(acquire, einprogress_then_so_error_refused_is_abandoned)
{
	start_pending(FD);
	check_so_error(FD, ECONNREFUSED, false);
	expect_counts("svc", 1, 0, 1);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, einprogress_then_so_error_timed_out_is_abandoned)
{
	start_pending(FD);
	check_so_error(FD, ETIMEDOUT, true);   /* an error wins even if a peer is reported */
	expect_counts("svc", 1, 0, 1);
}

Test(acquire, other_getsockopt_calls_settle_nothing)
{
	start_pending(FD);
	int type = -1;
	socklen_t len = sizeof type;
	errno = SENTINEL;
	int r = getsockopt(FD, SOL_SOCKET, SO_TYPE, &type, &len);
	int e = errno;
	expect_result("getsockopt", FD, r, e, 0, 0);
	cr_assert_eq(type, SOCK_STREAM);
	/* SO_ERROR into a too short buffer: the fake fails with EINVAL, nothing read. */
	char small = 0;
	socklen_t slen = sizeof small;
	errno = SENTINEL;
	r = getsockopt(FD, SOL_SOCKET, SO_ERROR, &small, &slen);
	e = errno;
	expect_result("getsockopt", FD, r, e, -1, EINVAL);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_CONNECTING);
}

/* ---- connect() again ------------------------------------------------------ */

Test(acquire, connect_again_ealready_keeps_waiting_then_eisconn_is_ok)
{
	start_pending(FD);
	connect_svc(FD, -1, EALREADY);
	expect_counts("svc", 1, 0, 0);   /* a recheck is no new attempt */
	expect_state(FD, NL_FD_CONNECTING);
	connect_svc(FD, -1, EISCONN);
	expect_counts("svc", 1, 1, 0);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, connect_again_once_settled_is_no_new_attempt)
{
	start_pending(FD);
	connect_svc(FD, 0, 0);            /* the outcome: connected */
	connect_svc(FD, -1, EISCONN);     /* and asked again */
	connect_svc(FD, -1, EALREADY);
	expect_counts("svc", 1, 1, 0);
	expect_state(FD, NL_FD_SOCKET);
	nl_fd_track(FD2);
	connect_svc(FD2, 0, 0);           /* a blocking connect, then a late recheck */
	connect_svc(FD2, -1, EISCONN);
	expect_counts("svc", 2, 1, 0);
}

Test(acquire, af_unspec_on_a_pending_fd_abandons_it)
{
	start_pending(FD);
	fake(FD)->connects[fake(FD)->n_connects++] = (struct result){ 0, 0 };
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	errno = SENTINEL;
	int r = connect(FD, &unspec, sizeof unspec);
	int e = errno;
	expect_result("connect", FD, r, e, 0, 0);
	expect_counts("svc", 1, 0, 1);   /* dissolved before it connected: given up */
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, connect_again_einprogress_or_eintr_keeps_waiting)
{
	start_pending(FD);
	connect_svc(FD, -1, EINPROGRESS);
	connect_svc(FD, -1, EINTR);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_CONNECTING);
	expect_pending(1);
}

Test(acquire, connect_again_returning_0_is_ok)
{
	start_pending(FD);
	connect_svc(FD, 0, 0);
	expect_counts("svc", 1, 1, 0);
	expect_state(FD, NL_FD_SOCKET);
}

Test(acquire, connect_again_refused_is_abandoned)
{
	start_pending(FD);
	connect_svc(FD, -1, ECONNREFUSED);
	expect_counts("svc", 1, 0, 1);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, eintr_on_a_blocking_connect_is_pending_like_einprogress)
{
	nl_fd_track(FD);
	connect_svc(FD, -1, EINTR);
	expect_state(FD, NL_FD_CONNECTING);
	expect_counts("svc", 1, 0, 0);
	connect_svc(FD, -1, EALREADY);
	expect_counts("svc", 1, 0, 0);
	check_so_error(FD, 0, true);
	expect_counts("svc", 1, 1, 0);
}

/* ---- the first I/O -------------------------------------------------------- */

Test(acquire, first_io_success_is_ok)
{
	start_pending(FD);
	io(FD, IO_SEND, 17, 0);
	expect_counts("svc", 1, 1, 0);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, first_io_eagain_or_eintr_keeps_waiting_then_success_is_ok)
{
	start_pending(FD);
	io(FD, IO_READ, -1, EAGAIN);
	io(FD, IO_RECV, -1, EINTR);
	io(FD, IO_SEND, -1, EWOULDBLOCK);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_CONNECTING);
	io(FD, IO_WRITE, 5, 0);
	expect_counts("svc", 1, 1, 0);
	expect_state(FD, NL_FD_SOCKET);
}

Test(acquire, first_io_eof_is_ok)
{
	start_pending(FD);
	io(FD, IO_READ, 0, 0);   /* 0 bytes is a success: the connection was up */
	expect_counts("svc", 1, 1, 0);
}

Test(acquire, first_io_econnreset_is_abandoned)
{
	start_pending(FD);
	io(FD, IO_RECV, -1, ECONNRESET);
	expect_counts("svc", 1, 0, 1);
	expect_state(FD, NL_FD_SOCKET);
	expect_pending(0);
}

Test(acquire, first_io_enotconn_is_abandoned)
{
	start_pending(FD);
	io(FD, IO_WRITE, -1, ENOTCONN);
	expect_counts("svc", 1, 0, 1);
}

Test(acquire, io_on_a_number_that_is_no_longer_a_socket_drops_the_wait)
{
	start_pending(FD);
	start_pending(FD2);
	fake(FD)->not_socket = ENOTSOCK;   /* closed behind libc's back, reused by a pipe */
	io(FD, IO_READ, 3, 0);
	fake(FD2)->not_socket = ENOTSOCK;
	io(FD2, IO_WRITE, -1, EPIPE);
	expect_counts("svc", 2, 0, 0);
	expect_state(FD, NL_FD_UNTRACKED);
	expect_state(FD2, NL_FD_UNTRACKED);
	expect_pending(0);
}

Test(acquire, io_on_an_fd_that_is_not_pending_settles_nothing)
{
	nl_fd_track(FD);
	connect_svc(FD, 0, 0);
	io(FD, IO_RECV, -1, ECONNRESET);
	io(FD, IO_SEND, 4, 0);
	expect_counts("svc", 1, 0, 0);
}

/* ---- close(), dup2(), close_range() before establishment ------------------ */

Test(acquire, close_while_not_connected_is_abandoned)
{
	start_pending(FD);
	fake(FD)->peer = false;   /* SO_ERROR 0, no peer yet: still in the handshake */
	close_fd(FD);
	expect_counts("svc", 1, 0, 1);
	expect_pending(0);
}

Test(acquire, close_after_a_refusal_is_abandoned)
{
	start_pending(FD);
	fake(FD)->so_error = ECONNREFUSED;   /* no peer, as the kernel has it */
	close_fd(FD);
	cr_assert_eq(fake(FD)->so_error, ECONNREFUSED, "the close took the socket's error");
	expect_counts("svc", 1, 0, 1);
}

Test(acquire, close_once_connected_is_ok)
{
	start_pending(FD);
	fake(FD)->peer = true;
	close_fd(FD);
	expect_counts("svc", 1, 1, 0);
	expect_pending(0);
}

Test(acquire, close_of_an_idle_socket_records_nothing)
{
	nl_fd_track(FD);
	connect_svc(FD, 0, 0);
	close_fd(FD);
	expect_counts("svc", 1, 0, 0);
}

Test(acquire, dup2_over_a_pending_fd_settles_it_like_close)
{
	nl_fd_track(FD3);   /* the fd copied over the pending ones: an idle socket */
	start_pending(FD);
	fake(FD)->peer = true;
	start_pending(FD2);
	errno = SENTINEL;
	int r = dup2(FD3, FD);
	int e = errno;
	expect_result("dup2", FD, r, e, FD, 0);
	expect_counts("svc", 2, 1, 0);
	expect_state(FD, NL_FD_SOCKET);   /* now a copy of FD3 */
	errno = SENTINEL;
	r = dup2(FD3, FD2);
	e = errno;
	expect_result("dup2", FD2, r, e, FD2, 0);
	expect_counts("svc", 2, 1, 1);
	expect_state(FD2, NL_FD_SOCKET);
	expect_pending(0);
	cr_assert_eq(fake(FD)->closes + fake(FD2)->closes, 2);
}

Test(acquire, dup2_that_fails_leaves_the_pending_fd)
{
	start_pending(FD);
	fake(FD3)->not_socket = EBADF;   /* not open */
	errno = SENTINEL;
	int r = dup2(FD3, FD);
	int e = errno;
	expect_result("dup2", FD, r, e, -1, EBADF);
	expect_state(FD, NL_FD_CONNECTING);
	expect_pending(1);
	cr_assert_eq(fake(FD)->closes, 0);
	fake(FD)->peer = true;
	close_fd(FD);
	expect_counts("svc", 1, 1, 0);
}

Test(acquire, dup2_of_a_pending_fd_onto_itself_keeps_waiting)
{
	start_pending(FD);
	errno = SENTINEL;
	int r = dup2(FD, FD);
	int e = errno;
	expect_result("dup2", FD, r, e, FD, 0);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_CONNECTING);
}

Test(acquire, close_range_settles_every_pending_fd_in_it)
{
	start_pending(FD);
	fake(FD)->peer = true;
	start_pending(FD2);
	nl_fd_track(FD3);
	errno = SENTINEL;
	int r = close_range(FD, FD3, 0);
	int e = errno;
	expect_result("close_range", FD, r, e, 0, 0);
	expect_counts("svc", 2, 1, 1);
	expect_state(FD, NL_FD_UNTRACKED);
	expect_state(FD2, NL_FD_UNTRACKED);
	expect_state(FD3, NL_FD_UNTRACKED);
	expect_pending(0);
}

Test(acquire, close_range_cloexec_leaves_pending_fds_alone)
{
	start_pending(FD);
	errno = SENTINEL;
	int r = close_range(FD, FD, CLOSE_RANGE_CLOEXEC);
	int e = errno;
	expect_result("close_range", FD, r, e, 0, 0);
	expect_counts("svc", 1, 0, 0);
	expect_state(FD, NL_FD_CONNECTING);
}

Test(acquire, pending_fd_no_longer_a_stream_socket_at_close_is_dropped)
{
	start_pending(FD);
	start_pending(FD2);
	fake(FD)->not_socket = ENOTSOCK;   /* reused by open() */
	fake(FD2)->so_type = SOCK_DGRAM;   /* reused by a datagram socket */
	fake(FD2)->peer = true;
	close_fd(FD);
	close_fd(FD2);
	expect_counts("svc", 2, 0, 0);
	expect_pending(0);
}

/* ---- what is not counted -------------------------------------------------- */

Test(acquire, datagram_socket_connect_is_not_counted)
{
	next_socket = FD;
	errno = SENTINEL;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	cr_assert_eq(fd, FD);
	cr_assert_eq(errno, SENTINEL);
	expect_state(FD, NL_FD_IGNORED);
	fake(FD)->so_type = SOCK_DGRAM;
	connect_svc(FD, -1, EINPROGRESS);   /* even a result that would start a wait */
	connect_svc(FD, 0, 0);
	expect_counts("svc", 0, 0, 0);
	expect_state(FD, NL_FD_IGNORED);
	expect_pending(0);
}

Test(acquire, stream_socket_from_the_socket_hook_is_tracked)
{
	next_socket = FD;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	cr_assert_eq(fd, FD);
	expect_state(FD, NL_FD_SOCKET);
	connect_svc(FD, -1, EINPROGRESS);
	check_so_error(FD, 0, true);
	expect_counts("svc", 1, 1, 0);
	cr_assert_eq(atomic_load(&fake(FD)->so_type_asked), 0, "a tracked socket's type was asked again");
}

Test(acquire, untracked_fd_is_asked_its_type_once)
{
	/* Sockets the shim did not see created (inherited): SO_TYPE decides. */
	fake(FD2)->so_type = SOCK_DGRAM;
	connect_svc(FD2, 0, 0);
	connect_svc(FD2, 0, 0);
	expect_state(FD2, NL_FD_IGNORED);
	cr_assert_eq(atomic_load(&fake(FD2)->so_type_asked), 1);
	expect_counts("svc", 0, 0, 0);

	connect_svc(FD, -1, EINPROGRESS);
	expect_state(FD, NL_FD_CONNECTING);
	cr_assert_eq(atomic_load(&fake(FD)->so_type_asked), 1);
	expect_counts("svc", 1, 0, 0);
	check_so_error(FD, 0, true);
	expect_counts("svc", 1, 1, 0);
}

Test(acquire, untracked_fd_that_is_no_socket_is_not_counted)
{
	fake(FD)->not_socket = ENOTSOCK;
	connect_svc(FD, -1, ENOTSOCK);
	expect_counts("svc", 0, 0, 0);
	expect_state(FD, NL_FD_IGNORED);
}

Test(acquire, af_unspec_connect_is_not_counted)
{
	nl_fd_track(FD);
	fake(FD)->connects[fake(FD)->n_connects++] = (struct result){ 0, 0 };
	struct sockaddr sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_family = AF_UNSPEC;
	errno = SENTINEL;
	int r = connect(FD, &sa, sizeof sa);
	int e = errno;
	expect_result("connect", FD, r, e, 0, 0);
	expect_counts("svc", 0, 0, 0);
	expect_counts("external", 0, 0, 0);
	expect_state(FD, NL_FD_SOCKET);
}

Test(acquire, nothing_is_counted_while_not_recording)
{
	atomic_store(&nl_recording, false);
	nl_fd_track(FD);
	connect_svc(FD, -1, EINPROGRESS);
	expect_state(FD, NL_FD_SOCKET);
	expect_counts("svc", 0, 0, 0);
	expect_pending(0);
}

Test(acquire, destination_no_rule_names_is_external)
{
	cr_assert_str_eq(nl_dest_name(NL_DEST_EXTERNAL), "external");
	nl_fd_track(FD);
	connect_to(FD, "10.1.2.3", 443, -1, EINPROGRESS);
	nl_fd_track(FD2);
	connect_to(FD2, SVC_IP, SVC_PORT + 1, 0, 0);   /* the rule names a port: another port is external */
	expect_counts("external", 2, 0, 0);
	expect_counts("svc", 0, 0, 0);
	check_so_error(FD, ECONNREFUSED, false);
	expect_counts("external", 2, 0, 1);
	expect_counts("svc", 0, 0, 0);
}

Test(acquire, classify_names_what_each_connect_is)
{
	struct sockaddr_in svc = addr4(SVC_IP, SVC_PORT), other = addr4("10.1.2.3", 443);
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	struct nl_fd *e = NULL;
	nl_fd_track(FD);
	cr_assert_eq(nl_acq_classify(FD, (struct sockaddr *)&svc, sizeof svc, &e), 1);
	cr_assert_eq(e, nl_fd_lookup(FD));
	cr_assert_eq(nl_acq_classify(FD, (struct sockaddr *)&other, sizeof other, &e), NL_DEST_EXTERNAL);
	cr_assert_eq(nl_acq_classify(FD, &unspec, sizeof unspec, &e), NL_DEST_NONE);
	cr_assert_eq(nl_acq_classify(FD, NULL, 0, &e), NL_DEST_NONE);
	cr_assert_eq(nl_acq_classify(FD, (struct sockaddr *)&svc, 1, &e), NL_DEST_NONE);
	nl_fd_ignore(FD2);
	cr_assert_eq(nl_acq_classify(FD2, (struct sockaddr *)&svc, sizeof svc, &e), NL_DEST_NONE);
	start_pending(FD3);
	cr_assert_eq(nl_acq_classify(FD3, &unspec, sizeof unspec, &e), NL_ACQ_RECHECK);
	cr_assert_eq(nl_acq_classify(FD3, (struct sockaddr *)&svc, sizeof svc, &e), NL_ACQ_RECHECK);
	expect_counts("svc", 1, 0, 0);   /* classifying counts nothing */
}

/* ---- once, and how long --------------------------------------------------- */

Test(acquire, wait_is_recorded_once_when_several_events_settle_it)
{
	start_pending(FD);
	check_so_error(FD, 0, true);
	io(FD, IO_SEND, 8, 0);
	io(FD, IO_RECV, -1, ECONNRESET);
	fake(FD)->peer = false;
	close_fd(FD);
	expect_counts("svc", 1, 1, 0);
}

Test(acquire, abandoned_wait_is_not_recorded_again)
{
	start_pending(FD);
	io(FD, IO_READ, -1, ECONNREFUSED);
	check_so_error(FD, 0, true);
	io(FD, IO_WRITE, 2, 0);
	close_fd(FD);
	expect_counts("svc", 1, 0, 1);
}

Test(acquire, a_new_connect_after_close_starts_a_new_wait)
{
	start_pending(FD);
	close_fd(FD);
	reset_fake(FD);
	start_pending(FD);
	check_so_error(FD, 0, true);
	expect_counts("svc", 2, 1, 1);
}

Test(acquire, wait_covers_the_time_from_connect_to_settle)
{
	start_pending(FD);
	start_pending(FD2);
	sleep_ms(20);
	check_so_error(FD, 0, true);
	close_fd(FD2);
	struct counts c = since_setup("svc");
	cr_assert_eq(c.ok, 1);
	cr_assert_eq(c.abandoned, 1);
	cr_assert_geq(c.ok_ms, 20.0, "ok wait %.3f ms, slept 20 ms", c.ok_ms);
	cr_assert_geq(c.abandoned_ms, 20.0, "abandoned wait %.3f ms, slept 20 ms", c.abandoned_ms);
	cr_assert_lt(c.ok_ms, 10000.0);
	cr_assert_lt(c.abandoned_ms, 10000.0);
}

/* With the client side of HTTP on, a connect in progress is pending and an
 * HTTP candidate at once (one update of its entry); the settle leaves it a
 * candidate, the close neither. A connect done inside the call is only a
 * candidate. */
Test(acquire, pending_connect_is_an_http_candidate_too)
{
	nl_http_client_on = true;
	start_pending(FD);
	struct nl_fd *e = nl_fd_lookup(FD);
	cr_assert_eq(atomic_load(&e->watch), NL_WATCH_CONNECTING | NL_HTTP_CLIENT, "watch %#x",
		     (unsigned)atomic_load(&e->watch));
	cr_assert_eq(e->dest, 1);
	expect_pending(2);   /* the count holds the wait and the following */
	check_so_error(FD, 0, true);
	expect_state(FD, NL_FD_SOCKET);
	cr_assert_eq(atomic_load(&e->watch), NL_HTTP_CLIENT);
	expect_pending(1);
	close_fd(FD);
	cr_assert_eq(atomic_load(&e->watch), 0);
	expect_pending(0);

	nl_fd_track(FD2);
	connect_svc(FD2, 0, 0);
	cr_assert_eq(atomic_load(&nl_fd_lookup(FD2)->watch), NL_HTTP_CLIENT);
	expect_pending(1);
	close_fd(FD2);
	expect_pending(0);
	expect_counts("svc", 2, 1, 0);
}

Test(acquire, wait_starts_at_entry_to_connect)
{
	fake(FD)->connect_ms = 20;   /* the time inside connect() is part of the wait */
	start_pending(FD);
	check_so_error(FD, 0, true);
	struct counts c = since_setup("svc");
	cr_assert_eq(c.ok, 1);
	cr_assert_geq(c.ok_ms, 20.0, "ok wait %.3f ms, connect() took 20 ms", c.ok_ms);
}

/* Several threads settle the same pending fd at once: one records. */
#define RACERS 4
#define ROUNDS 200

static pthread_barrier_t race_start;

static void *racer(void *arg)
{
	long i = (long)arg;
	pthread_barrier_wait(&race_start);
	if (i % 2)
		nl_acq_so_error(nl_fd_lookup(FD), FD, 0);
	else
		nl_acq_after_io(FD, 1);
	return NULL;
}

Test(acquire, racing_settles_record_the_wait_once)
{
	fake(FD)->peer = true;
	nl_fd_track(FD);
	for (int round = 0; round < ROUNDS; round++) {
		struct fake_fd *f = fake(FD);
		f->n_connects = f->next_connect = 0;
		connect_svc(FD, -1, EINPROGRESS);
		cr_assert_eq(pthread_barrier_init(&race_start, NULL, RACERS), 0);
		pthread_t t[RACERS];
		for (long i = 0; i < RACERS; i++)
			cr_assert_eq(pthread_create(&t[i], NULL, racer, (void *)i), 0);
		for (int i = 0; i < RACERS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&race_start);
		expect_state(FD, NL_FD_SOCKET);
	}
	expect_counts("svc", ROUNDS, ROUNDS, 0);
	expect_pending(0);
}
