/* SPDX-License-Identifier: Apache-2.0 */
#include "httpmetrics.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#include "dest.h"
#include "fork.h"
#include "h1.h"
#include "instruments.h"
#include "loadpath.h"
#include "log.h"
#include "registry.h"
#include "route.h"
#include "startup.h"
#include "state.h"
#include "table.h"

NL_LOAD_STATE bool nl_http_server_on;
NL_LOAD_STATE bool nl_http_client_on;

NL_LOAD_STATE static bool semconv_dup;
NL_LOAD_STATE static bool gym_attrs; /* active requests carry Gym's attributes too */
NL_LOAD_STATE static bool gym_on;
static int route_rollout = NL_ROUTE_NONE, route_verify = NL_ROUTE_NONE;   /* made with the route tables */

/* ---- methods ---------------------------------------------------------------- */

#define METHOD_LEN 24
NL_LOAD_STATE static char methods[NL_HTTP_METHODS_MAX + 1][METHOD_LEN];
NL_LOAD_STATE static size_t method_len[NL_HTTP_METHODS_MAX + 1];
NL_LOAD_STATE static unsigned n_methods;
static unsigned method_post = NL_HTTP_METHODS_MAX;   /* index of POST, for Gym's endpoints */
unsigned char nl_http_method_get = NL_HTTP_METHODS_MAX, nl_http_method_post = NL_HTTP_METHODS_MAX;

/* A method of up to 8 bytes as one word that, with its length, tells it
 * from every other (its first and last 4 bytes, which overlap below 8; below
 * 4, its first, middle and last), so that finding it is one compare per
 * known method, with loads of fixed sizes. */
NL_LOAD_STATE static uint64_t method_word[NL_HTTP_METHODS_MAX + 1];

NL_LOAD_PATH static uint64_t word_of(const char *m, size_t n)
{
	if (n >= 4) {
		uint32_t lo, hi;
		memcpy(&lo, m, 4);
		memcpy(&hi, m + n - 4, 4);
		return lo | (uint64_t)hi << 32;
	}
	return n ? (unsigned char)m[0] | (unsigned)(unsigned char)m[n / 2] << 8 | (unsigned)(unsigned char)m[n - 1] << 16
		 : 0;
}

/* The known methods of up to 8 bytes by a hash of their word and length
 * (index + 1; 0: none), so that a request's method is found with one
 * compare; a slot two methods want keeps the first, the other is found by
 * the loop. */
#define METHOD_SLOTS 64
NL_LOAD_STATE static uint8_t method_slot[METHOD_SLOTS];

static inline unsigned method_hash(uint64_t w, size_t n)
{
	return (unsigned)(((w + n) * 0x9E3779B97F4A7C15ull) >> 58);
}

NL_LOAD_PATH static void add_method(const char *m, size_t n)
{
	if (n == 0 || n >= METHOD_LEN || n_methods >= NL_HTTP_METHODS_MAX)
		return;
	memcpy(methods[n_methods], m, n);
	method_len[n_methods] = n;
	method_word[n_methods] = word_of(m, n);
	if (n <= 8 && !method_slot[method_hash(method_word[n_methods], n)])
		method_slot[method_hash(method_word[n_methods], n)] = (uint8_t)(n_methods + 1);
	if (n == 4 && memcmp(m, "POST", 4) == 0 && method_post == NL_HTTP_METHODS_MAX)
		method_post = nl_http_method_post = (unsigned char)n_methods;
	if (n == 3 && memcmp(m, "GET", 3) == 0 && nl_http_method_get == NL_HTTP_METHODS_MAX)
		nl_http_method_get = (unsigned char)n_methods;
	n_methods++;
}

/* The semantic conventions' known methods, or OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS
 * (comma-separated, case-sensitive), which replaces them. */
NL_LOAD_PATH static void configure_methods(const char *known)
{
	static const char defaults[] = "CONNECT,DELETE,GET,HEAD,OPTIONS,PATCH,POST,PUT,TRACE,QUERY";
	const char *p = known && *known ? known : defaults;
	while (*p) {
		size_t n = 0;
		while (p[n] && p[n] != ',')   /* (not strcspn: a libc page of its own at load) */
			n++;
		const char *m = p;
		size_t k = n;
		while (k && *m == ' ')
			m++, k--;
		while (k && m[k - 1] == ' ')
			k--;
		add_method(m, k);
		p += n;
		if (*p == ',')
			p++;
	}
	memcpy(methods[NL_HTTP_METHODS_MAX], "_OTHER", 7);
	method_len[NL_HTTP_METHODS_MAX] = 6;
}

unsigned nl_http_method(const char *m, size_t n)
{
	if (n <= 8) {
		uint64_t w = word_of(m, n);
		unsigned k = method_slot[method_hash(w, n)];
		if (k && method_word[k - 1] == w && method_len[k - 1] == n)
			return k - 1;
		for (unsigned i = 0; i < n_methods; i++)
			if (method_word[i] == w && method_len[i] == n)
				return i;
		return NL_HTTP_METHODS_MAX;
	}
	for (unsigned i = 0; i < n_methods; i++)
		if (method_len[i] == n && memcmp(methods[i], m, n) == 0)
			return i;
	return NL_HTTP_METHODS_MAX;
}

/* Routes seen before, by a 64-bit hash of the target's path: a server sees
 * few distinct paths, and the lookup (templating an unmatched path) costs
 * several times the hash. An entry is the hash's upper bits and id + 2 in
 * its lower 16, written and read as one word. */
#define ROUTE_CACHE 1024
static _Atomic uint64_t route_cache[ROUTE_CACHE];

/* Whether a word has a '?' byte: the classic test for a zero byte, on the
 * word xor '?' in every byte. It never says yes for a word without one. */
static inline uint64_t has_query(uint64_t w)
{
	uint64_t x = w ^ 0x3f3f3f3f3f3f3f3full;
	return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

/* The hash of the target's path (up to its '?'): 8 bytes a step, a byte a
 * step only in the word that holds the '?' or the last few bytes. The same
 * path gives the same hash whatever query follows it. */
static uint64_t path_hash(const char *t, size_t n, bool truncated)
{
	uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)truncated;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, t + i, 8);
		if (has_query(w))
			break;
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	uint64_t tail = 0;
	unsigned k = 0;   /* fewer than 8: the loop left a partial word or one with '?' */
	for (; i < n && t[i] != '?'; i++, k++)
		tail |= (uint64_t)(unsigned char)t[i] << (8 * k);
	h = (h ^ tail ^ (uint64_t)k << 61) * 0xc4ceb9fe1a85ec53ull;
	return h ^ h >> 29;
}

/* ---- route tables, made at the first request --------------------------------- */

/* The tables cost every process tens of thousands of instructions and a
 * dozen pages at load, recording or not: the first request makes them
 * instead. Made once; a thread that finds them being made waits, with
 * its signals blocked while it makes them itself, so that a handler that
 * interrupts it cannot wait for its own thread. */
enum { ROUTES_NONE, ROUTES_MAKING, ROUTES_READY };
NL_LOAD_STATE static _Atomic int routes_state;
NL_LOAD_STATE static const struct nl_config *route_cfg; /* the runtime's, which lives as long as the process */

static void route_warning(const char *pattern, const char *why)
{
	nl_warn_once("env.NEMOLENS_HTTP_ROUTES", "NEMOLENS_HTTP_ROUTES: %s: %s; skipped", pattern, why);
}

/* Another thread was making the tables at the fork: it does not exist in
 * the child, which makes them anew at its first request. */
static void routes_atfork_child(void)
{
	if (atomic_load(&routes_state) == ROUTES_MAKING)   /* a failed CAS writes the page too */
		atomic_store(&routes_state, ROUTES_NONE);
}

static __attribute__((noinline)) void routes_prepare(void)
{
	NL_KEEP_ERRNO;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int expected = ROUTES_NONE;
	/* A fork child of a thread making them finds them half made, and
	 * makes them again (routes_atfork_child). */
	static const struct nl_fork_handlers fork_handlers = { .child = routes_atfork_child };
	if (atomic_load(&routes_state) == ROUTES_NONE)
		nl_fork_register(NL_FORK_ROUTES, &fork_handlers);
	if (!atomic_compare_exchange_strong(&routes_state, &expected, ROUTES_MAKING)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		while (atomic_load(&routes_state) != ROUTES_READY)
			sched_yield();
		return;
	}
	const struct nl_config *cfg = route_cfg;
	int bypass = nl_hooks_bypass;
	nl_hooks_bypass = 1;   /* the tables' own memory is the shim's */
	nl_route_configure(cfg->http_routes, (enum nl_route_unmatched)cfg->http_route_unmatched,
			   (unsigned)cfg->http_route_cap, route_warning);
	/* configure set the default limit on fresh tables: only another one
	 * needs them made again. */
	if ((unsigned)cfg->http_route_segment_limit != NL_ROUTE_SEGMENT_LIMIT_DEFAULT)
		nl_route_set_segment_limit((unsigned)cfg->http_route_segment_limit);
	if (gym_on) {
		route_rollout = nl_route_lookup(cfg->gym_rollout_route, strlen(cfg->gym_rollout_route), false);
		route_verify = nl_route_lookup(cfg->gym_verify_route, strlen(cfg->gym_verify_route), false);
	}
	nl_hooks_bypass = bypass;
	atomic_store(&routes_state, ROUTES_READY);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A path not in the cache: templated, and remembered. */
static __attribute__((noinline)) int route_miss(_Atomic uint64_t *slot, uint64_t h, const char *target, size_t n,
						bool truncated)
{
	int id = nl_route_lookup(target, n, truncated);
	/* Past the cap stays past the cap, but a lookup may say so only for a
	 * while (another thread inserting): not remembered. */
	if (id >= NL_ROUTE_NONE && id < 0xfffd)
		atomic_store_explicit(slot, (h & ~0xffffull) | (uint64_t)(id + 2), memory_order_relaxed);
	return id;
}

int nl_http_route(const char *target, size_t n, bool truncated)
{
	if (__builtin_expect(atomic_load_explicit(&routes_state, memory_order_acquire) != ROUTES_READY, 0))
		routes_prepare();
	uint64_t h = path_hash(target, n, truncated);
	_Atomic uint64_t *slot = &route_cache[h % ROUTE_CACHE];
	uint64_t e = atomic_load_explicit(slot, memory_order_relaxed);
	if (e && (e & ~0xffffull) == (h & ~0xffffull))
		return (int)(e & 0xffff) - 2;
	return route_miss(slot, h, target, n, truncated);
}

/* ---- hosts (client side: server.address) ------------------------------------ */

/* Host names, lowercased (host names are case-insensitive), interned up to
 * HOSTS of them (table.h), never freed. */
#define HOSTS 256
#define HOST_SLOTS 512          /* twice the cap: probes stay short */
#define HOST_MAX 63
NL_TABLE_SLOTS(NL_INTERN_SLOT(HOST_MAX), host_slots, HOST_SLOTS);
static const char *host_text[HOSTS];
static _Atomic unsigned n_hosts;

const char *nl_http_host_name(int id) { return host_text[id]; }

int nl_http_host(const char *host, size_t n, unsigned *port)
{
	*port = 0;
	if (!host)
		return -1;
	/* host[:port], or [v6]:port */
	size_t name_end = n;
	const char *colon = NULL;
	if (n && host[0] == '[') {
		const char *rb = memchr(host, ']', n);
		if (rb && (size_t)(rb - host) + 1 < n && rb[1] == ':')
			colon = rb + 1;
	} else {
		colon = memchr(host, ':', n);
	}
	if (colon) {
		name_end = (size_t)(colon - host);
		unsigned p = 0;
		for (const char *c = colon + 1; c < host + n && *c >= '0' && *c <= '9' && p <= 65535; c++)
			p = p * 10 + (unsigned)(*c - '0');
		*port = p <= 65535 ? p : 0;
	}
	if (name_end == 0 || name_end > HOST_MAX)
		return -1;
	char name[HOST_MAX];
	for (size_t i = 0; i < name_end; i++)
		name[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
	/* Made here, not a static: no relocation for the loader to write. */
	const struct nl_intern t = { { host_slots, sizeof host_slots[0], HOST_SLOTS, HOST_SLOTS, NL_TABLE_SPINS, &n_hosts,
				       HOSTS },
				     HOST_MAX, host_text };
	int id = nl_intern(&t, name, name_end);
	return id == NL_INTERN_OVERFLOW ? -1 : id;
}

/* ---- server names (server side: http.server_name) ---------------------------- */

/* The Host values requests arrived with, as sent (host and port, case kept),
 * interned up to name_limit of them (table.h), never freed. */
#define NAME_SLOTS 512          /* >= 2 * NL_HTTP_SERVER_NAMES_MAX */
NL_TABLE_SLOTS(NL_INTERN_SLOT(NL_H1_HOST_MAX), name_slots, NAME_SLOTS);
static const char *name_text[NL_HTTP_SERVER_NAMES_MAX];
static _Atomic unsigned n_names;
static unsigned name_limit = 64;

/* Whether the n bytes are all visible ASCII (0x21 to 0x7e), text an
 * attribute can carry as is. Eight at a time: a word has a byte below the
 * range when (w - 0x21..) & ~w has a high bit set, one above it when
 * (w + 0x01..) | w has; neither ever says so of a word without one. */
static bool visible_ascii(const char *s, size_t n)
{
	const uint64_t ones = 0x0101010101010101ull;
	uint64_t w, bad = 0;
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			bad |= (unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f;
		return !bad;
	}
	for (size_t i = 0;; i += 8) {
		memcpy(&w, s + (i + 8 < n ? i : n - 8), 8);   /* the last word overlaps */
		bad |= ((w - 0x21 * ones) & ~w) | ((w + ones) | w);
		if (i + 8 >= n)
			break;
	}
	return !(bad & 0x80 * ones);
}

int nl_http_server_name(const char *host, size_t n)
{
	if (!gym_attrs || !host || n == 0 || n > NL_H1_HOST_MAX)
		return NL_HTTP_NAME_NONE;       /* (OTEL_SEMCONV_STABILITY_OPT_IN=http: no names) */
	if (!visible_ascii(host, n))
		return NL_HTTP_NAME_NONE;
	/* Made here, not a static: no relocation for the loader to write. */
	const struct nl_intern t = { { name_slots, sizeof name_slots[0], NAME_SLOTS, NAME_SLOTS, NL_TABLE_SPINS, &n_names,
				       name_limit },
				     NL_H1_HOST_MAX, name_text };
	int id = nl_intern(&t, host, n);
	return id == NL_INTERN_OVERFLOW ? NL_HTTP_NAME_OVERFLOW : id;
}

/* ---- series by attribute combination ---------------------------------------- */

/* A combination packed in 64 bits: side, method, status, version, error
 * kind, route or host, port, destination. Its cell holds every series it
 * records into, made before the cell is published (table.h). */
#define CELLS 4096
enum { S_DURATION, S_REQUEST_BODY, S_RESPONSE_BODY, S_DURATION_OLD, N_CELL_SERIES };
struct cell {
	struct nl_slot head;
	uint64_t key;
	struct nl_series *s[N_CELL_SERIES];
};
NL_TABLE_SLOTS(struct cell, cells, CELLS);
/* No wait for a cell being made: the maker may be what a signal handler
 * interrupted. */
#define CELL_TABLE { cells, sizeof cells[0], CELLS, 64, 0, NULL, 0 }
/* What a sample records into when its combination has no cell (the table
 * full, or the cell still being made): the overflow series, by side. */
static struct cell overflow_cell[2];

static struct nl_instrument *i_server, *i_active, *i_req_body, *i_resp_body, *i_client, *i_server_old;
static struct nl_instrument *i_rollout, *i_verify, *i_success;
/* Active requests' series by TLS, method and server name id, the last
 * index for none, at their index in a table (table.h): made on first use,
 * not at load, which every process pays, recording or not. */
#define ACTIVE_NO_NAME NL_HTTP_SERVER_NAMES_MAX
#define ACTIVE_INDEX(tls, method, name) \
	(((unsigned)(tls) * (NL_HTTP_METHODS_MAX + 1) + (method)) * (NL_HTTP_SERVER_NAMES_MAX + 1) + (unsigned)(name))
#define ACTIVE_SLOTS 8192       /* a power of two of at least ACTIVE_INDEX(1, NL_HTTP_METHODS_MAX, ACTIVE_NO_NAME) + 1 */
_Static_assert(ACTIVE_INDEX(1, NL_HTTP_METHODS_MAX, ACTIVE_NO_NAME) < ACTIVE_SLOTS, "an active series' index");
struct active {
	struct nl_slot head;
	struct nl_series *s;
};
NL_TABLE_SLOTS(struct active, s_active, ACTIVE_SLOTS);
#define ACTIVE_TABLE { s_active, sizeof s_active[0], ACTIVE_SLOTS, 1, NL_TABLE_SPINS, NULL, 0 }
static struct nl_series *s_rollout, *s_verify, *s_success;
static _Atomic uint64_t verify_all, verify_completed;
/* "000" to "999", made by the compiler: read-only pages of the file, which
 * a process that never records an error status never touches. */
#define ST1(a, b) { a, b, '0' }, { a, b, '1' }, { a, b, '2' }, { a, b, '3' }, { a, b, '4' }, \
		  { a, b, '5' }, { a, b, '6' }, { a, b, '7' }, { a, b, '8' }, { a, b, '9' }
#define ST2(a) ST1(a, '0'), ST1(a, '1'), ST1(a, '2'), ST1(a, '3'), ST1(a, '4'), \
	       ST1(a, '5'), ST1(a, '6'), ST1(a, '7'), ST1(a, '8'), ST1(a, '9')
static const char status_text[1000][4] = { ST2('0'), ST2('1'), ST2('2'), ST2('3'), ST2('4'),
					   ST2('5'), ST2('6'), ST2('7'), ST2('8'), ST2('9') };
#undef ST1
#undef ST2

static const char *version_text(unsigned minor) { return minor == 2 ? "2" : minor ? "1.1" : "1.0"; }
static const char *scheme_text(bool tls) { return tls ? "https" : "http"; }

/* Inline, with client a constant: each side's key takes only its own fields
 * (a server's has no port nor destination, a client's no TLS bit). */
static inline __attribute__((always_inline)) uint64_t pack(bool client, const struct nl_http_exchange *x)
{
	/* status: three digits (h1.h), 0 for none; ten bits hold it. */
	uint64_t k = 1u | (uint64_t)client << 1 | (uint64_t)(x->method & 0xf) << 2 | (uint64_t)(x->status & 0x3ff) << 6 |
		     (uint64_t)(x->version_minor & 3) << 59;
	if (client)
		return k | ((uint64_t)(x->host + 1) & 0x1ff) << 17 | (uint64_t)(x->port & 0xffff) << 33 |
		       (uint64_t)((unsigned)x->dest & 0x1ff) << 49;
	return k | ((uint64_t)(x->route + 2) & 0xffff) << 17 | (uint64_t)x->tls << 58;
}

/* The attributes of a server exchange, stable name first, in the order the
 * semantic conventions list them. Strings are the shim's own, never freed. */
static size_t server_attrs(const struct nl_http_exchange *x, struct nl_attr *a)
{
	size_t n = 0;
	a[n++] = NL_ATTR_S("http.request.method", methods[x->method]);
	if (x->status)
		a[n++] = NL_ATTR_I("http.response.status_code", x->status);
	if (x->route >= 0)
		a[n++] = NL_ATTR_S("http.route", nl_route_name(x->route));
	a[n++] = NL_ATTR_S("url.scheme", scheme_text(x->tls));
	a[n++] = NL_ATTR_S("network.protocol.version", version_text(x->version_minor));
	if (!x->status)
		a[n++] = NL_ATTR_S("error.type", "connection_closed");
	else if (x->status >= 500)
		a[n++] = NL_ATTR_S("error.type", status_text[x->status % 1000]);
	return n;
}

static size_t server_attrs_old(const struct nl_http_exchange *x, struct nl_attr *a)
{
	size_t n = 0;
	a[n++] = NL_ATTR_S("http.method", methods[x->method]);
	if (x->status)
		a[n++] = NL_ATTR_I("http.status_code", x->status);
	if (x->route >= 0)
		a[n++] = NL_ATTR_S("http.target", nl_route_name(x->route));
	a[n++] = NL_ATTR_S("http.scheme", scheme_text(x->tls));
	a[n++] = NL_ATTR_S("http.flavor", version_text(x->version_minor));
	return n;
}

static size_t client_attrs(const struct nl_http_exchange *x, struct nl_attr *a)
{
	size_t n = 0;
	a[n++] = NL_ATTR_S("http.request.method", methods[x->method]);
	if (x->host >= 0)
		a[n++] = NL_ATTR_S("server.address", host_text[x->host]);
	if (x->port)
		a[n++] = NL_ATTR_I("server.port", x->port);
	if (x->status)
		a[n++] = NL_ATTR_I("http.response.status_code", x->status);
	a[n++] = NL_ATTR_S("network.protocol.version", version_text(x->version_minor));
	if (!x->status)
		a[n++] = NL_ATTR_S("error.type", "connection_closed");
	else if (x->status >= 500)
		a[n++] = NL_ATTR_S("error.type", status_text[x->status % 1000]);
	a[n++] = NL_ATTR_S("nemo.gym.http.destination.server.name", nl_dest_name(x->dest));
	return n;
}

/* Once per combination: out of line, so that finding a cell again needs no
 * stack frame. */
struct making {
	uint64_t key;
	bool client;
	const struct nl_http_exchange *x;
};

static __attribute__((noinline)) void make_cell(struct nl_slot *e, const void *arg)
{
	const struct making *m = arg;
	const struct nl_http_exchange *x = m->x;
	struct cell *c = (struct cell *)e;
	struct nl_attr a[NL_MAX_ATTRS];
	c->key = m->key;
	if (m->client) {
		size_t n = client_attrs(x, a);
		c->s[S_DURATION] = nl_series_add_static(i_client, a, n);
	} else if (x->route == NL_ROUTE_OVERFLOW) {
		/* Past the route cap everything shares the overflow series. */
		memcpy(c->s, overflow_cell[0].s, sizeof c->s);
	} else {
		size_t n = server_attrs(x, a);
		c->s[S_DURATION] = nl_series_add_static(i_server, a, n);
		c->s[S_REQUEST_BODY] = nl_series_add_static(i_req_body, a, n);
		c->s[S_RESPONSE_BODY] = nl_series_add_static(i_resp_body, a, n);
		if (semconv_dup) {
			n = server_attrs_old(x, a);
			c->s[S_DURATION_OLD] = nl_series_add_static(i_server_old, a, n);
		}
	}
}

static bool same_key(const struct nl_slot *e, const void *key)
{
	return ((const struct cell *)e)->key == *(const uint64_t *)key;
}

/* The cell of a combination, made on first use; the side's overflow cell
 * when the table is full or another thread is still making a cell where
 * this one may be. Out of line: a combination seen before is found by
 * nl_table_first. */
static __attribute__((noinline)) struct cell *cell_claim(uint64_t key, uint32_t h, bool client,
							 const struct nl_http_exchange *x)
{
	const struct nl_table t = CELL_TABLE;
	const struct making m = { key, client, x };
	struct nl_slot *e;
	if (nl_table_get(&t, h, same_key, &key, make_cell, &m, &e) != NL_TABLE_FOUND)
		return &overflow_cell[client];
	return (struct cell *)e;
}

static inline __attribute__((always_inline)) struct cell *cell_for(bool client, const struct nl_http_exchange *x)
{
	const struct nl_table t = CELL_TABLE;
	uint64_t key = pack(client, x);
	uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 52), id;
	struct nl_slot *e = nl_table_first(&t, h, same_key, &key, &id);
	return e ? (struct cell *)e : cell_claim(key, h, client, x);
}

static inline struct nl_series *series_of(const struct cell *c, int which) { return c->s[which]; }

/* ---- recording ------------------------------------------------------------- */

/* The attributes of an active request's series: the stable set, then Gym's
 * (unless OTEL_SEMCONV_STABILITY_OPT_IN=http), then http.scheme for http/dup. */
static size_t active_attrs(unsigned m, bool tls, const char *name, struct nl_attr *a)
{
	size_t n = 0;
	a[n++] = NL_ATTR_S("http.request.method", methods[m]);
	a[n++] = NL_ATTR_S("url.scheme", scheme_text(tls));
	if (gym_attrs) {
		a[n++] = NL_ATTR_S("http.method", methods[m]);
		if (name)
			a[n++] = NL_ATTR_S("http.server_name", name);
	}
	if (semconv_dup)
		a[n++] = NL_ATTR_S("http.scheme", scheme_text(tls));
	return n;
}

static void make_active(struct nl_slot *e, const void *arg)
{
	const unsigned *k = arg;        /* method, TLS, name */
	struct nl_attr a[NL_MAX_ATTRS];
	size_t n = active_attrs(k[0], k[1], k[2] == ACTIVE_NO_NAME ? NULL : name_text[k[2]], a);
	((struct active *)e)->s = nl_series_add_static(i_active, a, n);
}

/* Makes the series of an active request with server name id name
 * (ACTIVE_NO_NAME: none) on its first use; NULL when another thread is
 * still making it after the table's wait (the request is then not counted,
 * neither way). */
static __attribute__((noinline)) struct nl_series *make_active_series(unsigned method, bool tls, int name)
{
	if (!i_active)
		return NULL;
	const struct nl_table t = ACTIVE_TABLE;
	const unsigned k[3] = { method, tls, (unsigned)name };
	struct nl_slot *e;
	if (nl_table_get(&t, ACTIVE_INDEX(tls, method, name), nl_table_by_index, NULL, make_active, k, &e) !=
	    NL_TABLE_FOUND)
		return NULL;
	return ((struct active *)e)->s;
}

/* The series an active request counts in (NULL: see make_active_series). */
static inline __attribute__((always_inline)) struct nl_series *active_series(unsigned method, bool tls, int name)
{
	if (name == NL_HTTP_NAME_OVERFLOW)
		return i_active ? nl_instrument_overflow(i_active) : NULL;
	if (name < 0)
		name = ACTIVE_NO_NAME;
	/* (a name only when gym_attrs: see nl_http_server_name) */
	const struct nl_table t = ACTIVE_TABLE;
	uint32_t id;
	struct nl_slot *e = nl_table_first(&t, ACTIVE_INDEX(tls, method, name), nl_table_by_index, NULL, &id);
	return e ? ((struct active *)e)->s : make_active_series(method, tls, name);
}

static inline __attribute__((always_inline)) bool count_started(unsigned method, bool tls, int name)
{
	struct nl_series *s = active_series(method, tls, name);
	if (!s)
		return false;
	nl_updown_add(s, 1);
	return true;
}

/* A server that never connects has to start the exporter too: until the
 * first kick, out of line, so that the usual start needs no frame. */
static __attribute__((noinline)) bool started_unkicked(unsigned method, bool tls, int name)
{
	nl_runtime_kick();
	return count_started(method, tls, name);
}

bool nl_http_server_started(unsigned method, bool tls, int name)
{
	if (!atomic_load_explicit(&nl_runtime_kicked, memory_order_acquire))
		return started_unkicked(method, tls, name);
	return count_started(method, tls, name);
}

static inline __attribute__((always_inline)) void count_ended(unsigned method, bool tls, int name)
{
	struct nl_series *s = active_series(method, tls, name);
	if (s)
		nl_updown_add(s, -1);
}

void nl_http_server_ended(unsigned method, bool tls, int name) { count_ended(method, tls, name); }

/* The instruments are made by the first record's kick (runtime.c). */
static __attribute__((noinline)) bool made_by_kick(struct nl_instrument *const *i)
{
	nl_runtime_kick();
	return *i != NULL;
}

void nl_http_server_done(const struct nl_http_exchange *x)
{
	if (!i_server && !made_by_kick(&i_server))
		return;
	/* After the first response: this load and a branch. */
	if (__builtin_expect(atomic_load_explicit(&nl_startup_pending, memory_order_relaxed), 0) && x->status)
		nl_startup_first_response();
	struct cell *c = cell_for(false, x);
	double s = (double)(int64_t)x->duration_ns / 1e9;   /* (below 2^63: the glue's durations are 32-bit microseconds) */
	nl_hist_record(i_server, series_of(c, S_DURATION), s);
	if (x->status) {
		nl_hist_record(i_req_body, series_of(c, S_REQUEST_BODY), (double)x->request_body);
		nl_hist_record(i_resp_body, series_of(c, S_RESPONSE_BODY), (double)x->response_body);
	}
	if (semconv_dup)
		nl_hist_record(i_server_old, series_of(c, S_DURATION_OLD), s * 1000);
	if (x->counted)
		count_ended(x->method, x->tls, x->name);
	if (!gym_on || x->method != method_post || x->route < 0)
		return;
	double ms = (double)x->duration_ns / 1e6;
	if (x->route == route_rollout && s_rollout) {
		nl_hist_record(i_rollout, s_rollout, ms);
	} else if (x->route == route_verify && s_verify) {
		nl_hist_record(i_verify, s_verify, ms);
		uint64_t all = atomic_fetch_add(&verify_all, 1) + 1;
		uint64_t done = x->status >= 200 && x->status < 300 ? atomic_fetch_add(&verify_completed, 1) + 1
								      : atomic_load(&verify_completed);
		if (s_success)
			nl_gauge_set(s_success, (double)done / (double)all);
	}
}

void nl_http_client_done(const struct nl_http_exchange *x)
{
	/* Kicked first: the first record makes the instruments. */
	nl_runtime_kick();
	if (!i_client)
		return;
	struct cell *c = cell_for(true, x);
	nl_hist_record(i_client, series_of(c, S_DURATION), (double)(int64_t)x->duration_ns / 1e9);
}

/* ---- setup ------------------------------------------------------------------ */

NL_LOAD_PATH void nl_httpmetrics_init(const struct nl_config *cfg)
{
	if (!cfg->http_server && !cfg->http_client)
		return;
	configure_methods(cfg->http_known_methods);
	semconv_dup = cfg->http_semconv_dup;
	gym_attrs = !cfg->http_semconv_stable;
	name_limit = cfg->http_server_name_limit < 1 ? 1
		     : cfg->http_server_name_limit > NL_HTTP_SERVER_NAMES_MAX ? NL_HTTP_SERVER_NAMES_MAX
									   : (unsigned)cfg->http_server_name_limit;
	/* The route tables are made by the first request (routes_prepare). */
	if (atomic_exchange(&routes_state, ROUTES_NONE) != ROUTES_NONE)
		for (size_t i = 0; i < ROUTE_CACHE; i++)
			atomic_store(&route_cache[i], 0);
	route_cfg = cfg;
	gym_on = cfg->gym_endpoints && cfg->http_server;
	nl_http_server_on = cfg->http_server;
	nl_http_client_on = cfg->http_client;
}

void nl_httpmetrics_register(void)
{
	if (!nl_http_server_on && !nl_http_client_on)
		return;
	/* Room for the series hooks create: every combination, three series
	 * each; and the start-up figures' three (startup.h). */
	nl_registry_reserve_static(CELLS * 3 + 4 * NL_HTTP_SERVER_NAMES_MAX + 2 * (NL_HTTP_METHODS_MAX + 1) + 3);
	i_server = nl_inst(NL_I_HTTP_SERVER_DURATION);
	i_active = nl_inst(NL_I_HTTP_SERVER_ACTIVE);
	i_req_body = nl_inst(NL_I_HTTP_SERVER_REQUEST_BODY);
	i_resp_body = nl_inst(NL_I_HTTP_SERVER_RESPONSE_BODY);
	i_client = nl_inst(NL_I_HTTP_CLIENT_DURATION);
	if (semconv_dup)
		i_server_old = nl_inst(NL_I_HTTP_SERVER_DURATION_OLD);
	if (!i_server || !i_active || !i_req_body || !i_resp_body || !i_client || (semconv_dup && !i_server_old)) {
		i_server = i_client = NULL;
		return;
	}
	if (nl_http_server_on)
		nl_startup_register();
	overflow_cell[0].s[S_DURATION] = nl_instrument_overflow(i_server);
	overflow_cell[0].s[S_REQUEST_BODY] = nl_instrument_overflow(i_req_body);
	overflow_cell[0].s[S_RESPONSE_BODY] = nl_instrument_overflow(i_resp_body);
	if (semconv_dup)
		overflow_cell[0].s[S_DURATION_OLD] = nl_instrument_overflow(i_server_old);
	overflow_cell[1].s[S_DURATION] = nl_instrument_overflow(i_client);
	if (gym_on) {
		i_rollout = nl_inst(NL_I_GYM_ROLLOUT_MS);
		i_verify = nl_inst(NL_I_GYM_VERIFY_MS);
		i_success = nl_inst(NL_I_GYM_SUCCESS_RATE);
		s_rollout = i_rollout ? nl_series_get(i_rollout, NULL, 0) : NULL;
		s_verify = i_verify ? nl_series_get(i_verify, NULL, 0) : NULL;
		s_success = i_success ? nl_series_get(i_success, NULL, 0) : NULL;
	}
}
