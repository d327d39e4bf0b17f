/* SPDX-License-Identifier: Apache-2.0 */
/* HTTPS: the plaintext of OpenSSL connections, fed to the HTTP/1.x and
 * HTTP/2 glue (follow.h).
 *
 * The interposed SSL_read, SSL_read_ex, SSL_write, SSL_write_ex and
 * SSL_sendfile carry a connection's plaintext to the parser exactly as the
 * socket hooks carry a plain socket's bytes; SSL_shutdown and SSL_free end
 * it. SSL_peek and SSL_peek_ex are passed through: their bytes are read
 * again by SSL_read, which feeds them.
 *
 * Connections are found by their SSL object, not by an fd: asyncio (aiohttp,
 * httpx) runs TLS over memory BIOs, where the SSL object has no socket. A
 * fixed open-addressing table keyed by the SSL pointer holds one entry per
 * connection seen, from its first read or write to SSL_free: claimed with a
 * CAS, its parser state (struct nl_httpconn) in a pool mapped at the first
 * TLS connection, so no hook allocates and a program without TLS pays
 * nothing. An SSL object whose first bytes are not HTTP keeps its entry,
 * marked, so its later calls cost one table load.
 *
 * The OpenSSL hooks: each is the original, plus, on a connection that
 * carries HTTP, its plaintext fed to the HTTP glue (follow.h).
 *
 * The table. SLOTS keys, each an SSL pointer with the entry's state in its
 * two low bits (libssl allocates SSL objects with malloc: 16-byte aligned),
 * and a pool of SLOTS conns beside it. An SSL object lives in one of the
 * WINDOW slots from its home slot (a hash of the pointer) on. Entries are
 * freed at SSL_free by clearing the key, with no tombstone, so a lookup that
 * misses reads the whole window; one that hits usually reads the home slot
 * only. Claiming a slot is a CAS of a free key to (ssl | INIT); the claimer
 * then looks through the window again, and if another thread claimed the
 * same SSL object meanwhile, it gives its slot back and uses the other one
 * (sequentially consistent: of two threads racing, at least one sees the
 * other). The claimer decides once, asking libssl only read-only questions:
 *   side         server when SSL_is_server(), else client
 *   destination  (client) the socket's peer when SSL_get_fd() gives a
 *                socket, matched by the destination rules as connect() is;
 *                else the SNI name (SSL_get_servername()) matched against
 *                the rules' host names, which the Host header of each
 *                request may then refine with its port (follow.c)
 * and publishes (ssl | FOLLOW), or (ssl | IGNORE) when that side is not
 * parsed. A connection found not to carry HTTP (its first bytes, any
 * parse error, an upgrade) becomes IGNORE: its calls then cost the table
 * load and a compare.
 *
 * The fd path. The socket under a TLS connection sees only TLS records,
 * which the parser rejects on their first byte (0x16), so it stops
 * following the socket by itself; the first SSL call of a connection also
 * stops it explicitly (nl_follow_fd_handoff), so the two paths never count
 * the same exchange.
 *
 * The shim's own TLS (libcurl on the exporter thread, and during the exit
 * flush) runs with nl_hooks_bypass set: every hook checks it first.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "chunk.h"
#include "dest.h"
#include "export_sym.h"
#include "fdtable.h"
#include "fork.h"
#include "forkpath.h"
#include "conn.h"
#include "follow.h"
#include "httpmetrics.h"
#include "real_ssl.h"
#include "state.h"

#define SLOT_BITS 14
#define SLOTS (1u << SLOT_BITS)         /* 16384 connections at once: 128 KiB of keys, 4 MiB of pool */
#define WINDOW 32

enum { K_FREE = 0, K_INIT = 1, K_FOLLOW = 2, K_IGNORE = 3 };
#define K_STATE ((uintptr_t)3)

static _Atomic uintptr_t keys[SLOTS];
static _Atomic(void *) pool;   /* SLOTS conns of NL_HTTPCONN_SIZE bytes once mapped (chunk.h) */

static inline unsigned home(const SSL *s)
{
	return (unsigned)(((uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ull) >> (64 - SLOT_BITS));
}

static inline struct nl_httpconn *conn_at(unsigned char *base, unsigned i)
{
	return (struct nl_httpconn *)(base + (size_t)i * NL_HTTPCONN_SIZE);
}

static unsigned slot_of(const struct nl_httpconn *c)
{
	unsigned char *base = atomic_load_explicit(&pool, memory_order_relaxed);
	return (unsigned)(((const unsigned char *)c - base) / NL_HTTPCONN_SIZE);
}

static void settle_forks(void);

static unsigned char *pool_get(void)
{
	unsigned char *base = atomic_load_explicit(&pool, memory_order_acquire);
	if (base)
		return base;
	settle_forks();
	return nl_chunk_fill(&pool, (size_t)SLOTS * NL_HTTPCONN_SIZE);
}

/* The slot holding s in any state, other than skip; -1 when none. */
static int scan(const SSL *s, unsigned h, int skip)
{
	for (unsigned n = 0; n < WINDOW; n++) {
		unsigned i = (h + n) & (SLOTS - 1);
		if ((int)i != skip && (atomic_load(&keys[i]) & ~K_STATE) == (uintptr_t)s)
			return (int)i;
	}
	return -1;
}

/* Claims a free slot for s (INIT); -1 when the window is full. */
static int claim_free(const SSL *s, unsigned h)
{
	for (unsigned n = 0; n < WINDOW; n++) {
		unsigned i = (h + n) & (SLOTS - 1);
		uintptr_t expected = K_FREE;
		if (atomic_load_explicit(&keys[i], memory_order_relaxed) == K_FREE &&
		    atomic_compare_exchange_strong(&keys[i], &expected, (uintptr_t)s | K_INIT))
			return (int)i;
	}
	return -1;
}

/* The key of slot i once its claimer has decided (a few loads and stores
 * away); a claimer that takes too long loses: the entry becomes IGNORE. */
static uintptr_t settled(const SSL *s, unsigned i)
{
	uintptr_t init = (uintptr_t)s | K_INIT;
	uintptr_t k = atomic_load_explicit(&keys[i], memory_order_acquire);
	for (unsigned spin = 0; k == init && spin < 100000; spin++) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		k = atomic_load_explicit(&keys[i], memory_order_acquire);
	}
	if (k == init && atomic_compare_exchange_strong(&keys[i], &k, (uintptr_t)s | K_IGNORE))
		return (uintptr_t)s | K_IGNORE;
	return k;
}

/* The destination of a client socket's peer, as connect() would have named it. */
static int peer_dest(int fd)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof peer;
	if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0)
		return NL_DEST_NONE;
	return nl_dest_match((struct sockaddr *)&peer, len);
}

/* Decides, once per connection, whether s is followed, and sets c up. */
static bool setup(SSL *s, struct nl_httpconn *c)
{
	int server = NL_REAL_SSL(SSL_is_server)(s);
	if (server < 0 || !(server ? nl_http_server_on : nl_http_client_on))
		return false;
	int fd = NL_REAL_SSL(SSL_get_fd)(s);
	int dest = fd >= 0 ? nl_follow_fd_handoff(fd) : -1;   /* the plaintext is here now */
	unsigned flags = NL_HTTPCONN_TLS;
	if (server) {
		dest = -1;
	} else if (dest < 0) {
		dest = fd >= 0 ? peer_dest(fd) : NL_DEST_NONE;
		if (dest == NL_DEST_NONE) {
			const char *sni = NL_REAL_SSL(SSL_get_servername)(s, NL_SSL_TLSEXT_NAMETYPE_host_name);
			dest = sni ? nl_dest_match_name(sni, strnlen(sni, 256), -1) : NL_DEST_EXTERNAL;
			flags |= NL_HTTPCONN_DEST_BY_NAME;
		}
	}
	nl_httpconn_init(c, server ? NL_HTTP_SERVER : NL_HTTP_CLIENT, dest, flags);
	return true;
}

/* s's entry when the fast path did not decide: found, or (add) made. */
static __attribute__((noinline, cold)) struct nl_httpconn *find_slow(SSL *s, bool add)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	if (!s || !(nl_http_server_on || nl_http_client_on) || !atomic_load_explicit(&nl_recording, memory_order_relaxed))
		return NULL;
	unsigned char *base = add ? pool_get() : atomic_load_explicit(&pool, memory_order_acquire);
	if (!base)
		return NULL;
	unsigned h = home(s);
	for (int attempt = 0; attempt < 4; attempt++) {
		int at = scan(s, h, -1);
		if (at >= 0) {
			uintptr_t d = settled(s, (unsigned)at) ^ (uintptr_t)s;
			if (d == K_FOLLOW)
				return conn_at(base, (unsigned)at);
			if (d == K_IGNORE)
				return NULL;
			continue;   /* freed meanwhile */
		}
		if (!add)
			return NULL;
		int mine = claim_free(s, h);
		if (mine < 0)
			return NULL;   /* the window is full: not followed */
		if (scan(s, h, mine) >= 0) {
			atomic_store(&keys[mine], K_FREE);   /* another thread's entry stays */
			continue;
		}
		struct nl_httpconn *c = conn_at(base, (unsigned)mine);
		bool follow = setup(s, c);
		uintptr_t expected = (uintptr_t)s | K_INIT;
		if (atomic_compare_exchange_strong(&keys[mine], &expected, (uintptr_t)s | (follow ? K_FOLLOW : K_IGNORE)))
			return follow ? c : NULL;
		return NULL;   /* a waiter gave up on us: IGNORE */
	}
	return NULL;
}

/* The conn of s when its plaintext is followed, else NULL; add: make the
 * entry if s has none. The common cases are one load and a compare. */
static inline struct nl_httpconn *followed(SSL *s, bool add)
{
	if (nl_hooks_bypass)
		return NULL;
	unsigned i = home(s);
	uintptr_t d = atomic_load_explicit(&keys[i], memory_order_acquire) ^ (uintptr_t)s;
	if (__builtin_expect(d == K_IGNORE, 1))
		return NULL;
	if (d == K_FOLLOW)
		return conn_at(atomic_load_explicit(&pool, memory_order_relaxed), i);
	return find_slow(s, add);
}

/* Not HTTP (any more): later calls pass straight through. */
static void stop(struct nl_httpconn *c)
{
	unsigned i = slot_of(c);
	uintptr_t k = atomic_load(&keys[i]);
	if ((k & K_STATE) == K_FOLLOW)
		atomic_compare_exchange_strong(&keys[i], &k, (k & ~K_STATE) | K_IGNORE);
}

static void fed(struct nl_httpconn *c, int out, const void *buf, size_t n, uint64_t t0)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	if (!nl_httpconn_bytes(c, out, buf, n, t0))
		stop(c);
}

/* The connection ended: its exchanges are settled, nothing more is fed
 * (unless another thread is feeding it: then SSL_free settles it). */
static void end(struct nl_httpconn *c)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	if (nl_httpconn_end(c))
		stop(c);
}

/* A read failed: the end of the stream when the peer's close_notify came (or
 * the connection is shut down); a retry (WANT_READ...) changes nothing. */
static __attribute__((cold)) void read_failed(SSL *s, struct nl_httpconn *c)
{
	NL_KEEP_ERRNO;
	if (NL_REAL_SSL(SSL_get_shutdown)(s) & (NL_SSL_RECEIVED_SHUTDOWN | NL_SSL_SENT_SHUTDOWN))
		end(c);
}

/* ---- the hooks ----------------------------------------------------------------
 * Each hook is a test and a tail call when its connection is known not to be
 * followed (the shim's own TLS, or not HTTP): no stack frame. Anything else
 * goes through a function of its own. */

static inline bool passed_through(const SSL *s)
{
	return nl_hooks_bypass ||
	       (atomic_load_explicit(&keys[home(s)], memory_order_acquire) ^ (uintptr_t)s) == K_IGNORE;
}

#define SLOW static __attribute__((noinline))

SLOW int read_watched(SSL *s, void *buf, int num)
{
	struct nl_httpconn *c = followed(s, true);
	if (!c)
		return NL_REAL_SSL(SSL_read)(s, buf, num);
	int r = NL_REAL_SSL(SSL_read)(s, buf, num);
	if (r > 0)
		fed(c, 0, buf, (size_t)r, 0);
	else
		read_failed(s, c);
	return r;
}

NL_EXPORT int SSL_read(SSL *s, void *buf, int num)
{
	if (passed_through(s))
		return NL_REAL_SSL(SSL_read)(s, buf, num);
	return read_watched(s, buf, num);
}

SLOW int read_ex_watched(SSL *s, void *buf, size_t num, size_t *readbytes)
{
	struct nl_httpconn *c = followed(s, true);
	if (!c)
		return NL_REAL_SSL(SSL_read_ex)(s, buf, num, readbytes);
	int r = NL_REAL_SSL(SSL_read_ex)(s, buf, num, readbytes);
	if (r == 1 && readbytes && *readbytes)
		fed(c, 0, buf, *readbytes, 0);
	else if (r != 1)
		read_failed(s, c);
	return r;
}

NL_EXPORT int SSL_read_ex(SSL *s, void *buf, size_t num, size_t *readbytes)
{
	if (passed_through(s))
		return NL_REAL_SSL(SSL_read_ex)(s, buf, num, readbytes);
	return read_ex_watched(s, buf, num, readbytes);
}

/* Peeked bytes are read again by SSL_read (or SSL_read_ex), which feeds them. */
NL_EXPORT int SSL_peek(SSL *s, void *buf, int num) { return NL_REAL_SSL(SSL_peek)(s, buf, num); }

NL_EXPORT int SSL_peek_ex(SSL *s, void *buf, size_t num, size_t *readbytes)
{
	return NL_REAL_SSL(SSL_peek_ex)(s, buf, num, readbytes);
}

SLOW int write_watched(SSL *s, const void *buf, int num)
{
	struct nl_httpconn *c = followed(s, true);
	if (!c)
		return NL_REAL_SSL(SSL_write)(s, buf, num);
	uint64_t t0 = nl_httpconn_write_start(c);
	int r = NL_REAL_SSL(SSL_write)(s, buf, num);
	if (r > 0)
		fed(c, 1, buf, (size_t)r, t0);
	return r;
}

NL_EXPORT int SSL_write(SSL *s, const void *buf, int num)
{
	if (passed_through(s))
		return NL_REAL_SSL(SSL_write)(s, buf, num);
	return write_watched(s, buf, num);
}

SLOW int write_ex_watched(SSL *s, const void *buf, size_t num, size_t *written)
{
	struct nl_httpconn *c = followed(s, true);
	if (!c)
		return NL_REAL_SSL(SSL_write_ex)(s, buf, num, written);
	uint64_t t0 = nl_httpconn_write_start(c);
	int r = NL_REAL_SSL(SSL_write_ex)(s, buf, num, written);
	if (r == 1 && written && *written)
		fed(c, 1, buf, *written, t0);
	return r;
}

NL_EXPORT int SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *written)
{
	if (passed_through(s))
		return NL_REAL_SSL(SSL_write_ex)(s, buf, num, written);
	return write_ex_watched(s, buf, num, written);
}

/* Kernel TLS sends a file's bytes unseen: they can only be a body. */
SLOW ssize_t sendfile_watched(SSL *s, int fd, off_t offset, size_t size, int flags)
{
	struct nl_httpconn *c = followed(s, true);
	if (!c)
		return NL_REAL_SSL(SSL_sendfile)(s, fd, offset, size, flags);
	ssize_t r = NL_REAL_SSL(SSL_sendfile)(s, fd, offset, size, flags);
	if (r > 0) {
		NL_HOOK_SCOPE;
		NL_KEEP_ERRNO;
		if (!nl_httpconn_opaque(c, 1, (size_t)r))
			stop(c);
	}
	return r;
}

NL_EXPORT ssize_t SSL_sendfile(SSL *s, int fd, off_t offset, size_t size, int flags)
{
	if (passed_through(s))
		return NL_REAL_SSL(SSL_sendfile)(s, fd, offset, size, flags);
	return sendfile_watched(s, fd, offset, size, flags);
}

NL_EXPORT int SSL_shutdown(SSL *s)
{
	struct nl_httpconn *c = passed_through(s) ? NULL : followed(s, false);
	if (c)
		end(c);
	return NL_REAL_SSL(SSL_shutdown)(s);
}

static __attribute__((cold)) void forget(SSL *s)
{
	NL_HOOK_SCOPE;
	NL_KEEP_ERRNO;
	unsigned char *base = atomic_load_explicit(&pool, memory_order_acquire);
	int at = scan(s, home(s), -1);
	if (at < 0)
		return;
	uintptr_t k = atomic_load(&keys[at]);
	if ((k ^ (uintptr_t)s) == K_FOLLOW)
		nl_httpconn_end(conn_at(base, (unsigned)at));
	atomic_store(&keys[at], K_FREE);
}

NL_EXPORT void SSL_free(SSL *s)
{
	if (s && !nl_hooks_bypass && atomic_load_explicit(&pool, memory_order_relaxed))
		forget(s);
	NL_REAL_SSL(SSL_free)(s);
}

/* Fork child: the parent's TLS exchanges are the parent's (as for sockets,
 * fdtable.h). */
NL_FORK_PATH static void atfork_child(void)
{
	if (!atomic_load(&pool))
		return;
	for (unsigned i = 0; i < SLOTS; i++) {
		uintptr_t k = atomic_load_explicit(&keys[i], memory_order_relaxed);
		if (k != K_FREE && (k & K_STATE) != K_IGNORE)
			atomic_store(&keys[i], (k & ~K_STATE) | K_IGNORE);
	}
}

/* Registered with the pool, at the first TLS connection (fork.h). */
static void settle_forks(void)
{
	static const struct nl_fork_handlers handlers = { .child = atfork_child };
	nl_fork_register(NL_FORK_TLS, &handlers);
}
