/* SPDX-License-Identifier: Apache-2.0 */
#include "rpcmetrics.h"

#include <string.h>

#include "httpmetrics.h"
#include "instruments.h"
#include "registry.h"
#include "state.h"
#include "table.h"

/* ---- method names ------------------------------------------------------------ */

/* Interned up to the cap (table.h). */
#define METHOD_SLOTS 256                /* twice the cap: probes stay short */
#define METHOD_LEN 96
NL_TABLE_SLOTS(NL_INTERN_SLOT(METHOD_LEN - 1), method_slots, METHOD_SLOTS);
static const char *method_text[NL_RPC_METHODS_MAX];
static _Atomic unsigned n_methods;

/* "/package.Service/Method": a slash, a service, a slash, a method; the
 * service and method non-empty visible ASCII without further slashes. */
static bool grpc_path(const char *p, size_t n)
{
	if (n < 4 || p[0] != '/')
		return false;
	size_t slash = 0;
	for (size_t i = 1; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c <= 0x20 || c >= 0x7f)
			return false;
		if (c == '/') {
			if (slash)
				return false;
			slash = i;
		}
	}
	return slash > 1 && slash + 1 < n;
}

int nl_rpc_method(const char *path, size_t n, bool truncated)
{
	if (truncated || !grpc_path(path, n) || n > METHOD_LEN)
		return NL_RPC_METHOD_OTHER;
	const char *name = path + 1;    /* rpc.method has no leading slash */
	size_t len = n - 1;
	/* No wait for a slot being written: it may be this very name, but
	 * rather than wait (the writer may be what a signal handler
	 * interrupted), _OTHER. Made here, not a static: no relocation for the
	 * loader to write. */
	const struct nl_intern t = { { method_slots, sizeof method_slots[0], METHOD_SLOTS, METHOD_SLOTS, 0, &n_methods,
				       NL_RPC_METHODS_MAX },
				     METHOD_LEN - 1, method_text };
	int id = nl_intern(&t, name, len);
	return id == NL_INTERN_OVERFLOW ? NL_RPC_METHOD_OTHER : id;
}

/* ---- statuses ------------------------------------------------------------------ */

static const char *const status_name[NL_GRPC_CODES] = {
	"OK",		   "CANCELLED",		"UNKNOWN",	  "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND",	   "ALREADY_EXISTS",	"PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED",	   "OUT_OF_RANGE",	"UNIMPLEMENTED",  "INTERNAL",	      "UNAVAILABLE",
	"DATA_LOSS",	   "UNAUTHENTICATED",
};

unsigned nl_grpc_status_of_http(unsigned s)
{
	switch (s) {
	case 400: return 13;    /* INTERNAL */
	case 401: return 16;    /* UNAUTHENTICATED */
	case 403: return 7;     /* PERMISSION_DENIED */
	case 404: return 12;    /* UNIMPLEMENTED */
	case 429:
	case 502:
	case 503:
	case 504: return 14;    /* UNAVAILABLE */
	default: return 2;      /* UNKNOWN */
	}
}

/* ---- series ---------------------------------------------------------------- */

/* A call's attributes packed in 64 bits, and their series (table.h). No
 * wait for a cell being made: the maker may be what a signal handler
 * interrupted; the sample goes to the overflow series. */
#define CELLS 1024
struct cell {
	struct nl_slot head;
	uint64_t key;
	struct nl_series *s;
};
NL_TABLE_SLOTS(struct cell, cells, CELLS);
#define CELL_TABLE { cells, sizeof cells[0], CELLS, 64, 0, NULL, 0 }
static struct nl_instrument *i_server, *i_client;

static uint64_t pack(const struct nl_rpc_call *c)
{
	return 1u | (uint64_t)c->client << 1 | (uint64_t)(c->status & 0x1f) << 2 |
	       (uint64_t)((unsigned)(c->method + 1) & 0xff) << 7 | (uint64_t)((unsigned)(c->host + 1) & 0x1ff) << 15 |
	       (uint64_t)c->port << 24;
}

struct making {
	uint64_t key;
	struct nl_instrument *inst;
	const struct nl_rpc_call *c;
};

static void make_cell(struct nl_slot *e, const void *arg)
{
	const struct making *m = arg;
	const struct nl_rpc_call *c = m->c;
	struct nl_attr a[NL_MAX_ATTRS];
	size_t n = 0;
	a[n++] = NL_ATTR_S("rpc.system.name", "grpc");
	a[n++] = NL_ATTR_S("rpc.method", c->method >= 0 ? method_text[c->method] : "_OTHER");
	a[n++] = NL_ATTR_S("rpc.response.status_code", status_name[c->status]);
	if (c->client && c->host >= 0)
		a[n++] = NL_ATTR_S("server.address", nl_http_host_name(c->host));
	if (c->client && c->port)
		a[n++] = NL_ATTR_I("server.port", c->port);
	if (c->status)
		a[n++] = NL_ATTR_S("error.type", status_name[c->status]);
	((struct cell *)e)->key = m->key;
	((struct cell *)e)->s = nl_series_add_static(m->inst, a, n);
}

static bool same_key(const struct nl_slot *e, const void *key)
{
	return ((const struct cell *)e)->key == *(const uint64_t *)key;
}

/* The series of a combination not in its first slot, or not made yet. */
static __attribute__((noinline)) struct nl_series *series_claim(struct nl_instrument *inst, uint64_t key, uint32_t h,
								 const struct nl_rpc_call *c)
{
	const struct nl_table t = CELL_TABLE;
	const struct making m = { key, inst, c };
	struct nl_slot *e;
	if (nl_table_get(&t, h, same_key, &key, make_cell, &m, &e) != NL_TABLE_FOUND)
		return nl_instrument_overflow(inst);
	return ((struct cell *)e)->s;
}

static struct nl_series *series_for(struct nl_instrument *inst, const struct nl_rpc_call *c)
{
	const struct nl_table t = CELL_TABLE;
	uint64_t key = pack(c);
	uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 54), id;
	struct nl_slot *e = nl_table_first(&t, h, same_key, &key, &id);
	return e ? ((struct cell *)e)->s : series_claim(inst, key, h, c);
}

void nl_rpc_done(const struct nl_rpc_call *c)
{
	struct nl_instrument *inst = c->client ? i_client : i_server;
	if (!inst || c->status >= NL_GRPC_CODES)
		return;
	nl_hist_record(inst, series_for(inst, c), (double)(int64_t)c->duration_ns / 1e9);
}

/* ---- HTTP/2 connections given up -------------------------------------------- */

/* By reason, made on first use, at its index in a table (table.h): a
 * process that never gives one up exports nothing of it. */
static struct nl_instrument *i_given_up;
struct given_up {
	struct nl_slot head;
	struct nl_series *s;
};
#define GIVEN_UP_SLOTS 4        /* a power of two of at least NL_H2_GIVEN_UP_N */
_Static_assert(NL_H2_GIVEN_UP_N <= GIVEN_UP_SLOTS, "a reason's index");
NL_TABLE_SLOTS(struct given_up, given_up, GIVEN_UP_SLOTS);
static const char *const reasons[NL_H2_GIVEN_UP_N] = { "pool", "table_cap", "streams" };

static void make_given_up(struct nl_slot *e, const void *arg)
{
	struct nl_attr a[1] = { NL_ATTR_S("reason", reasons[*(const unsigned *)arg]) };
	((struct given_up *)e)->s = nl_series_add_static(i_given_up, a, 1);
}

void nl_http2_given_up(unsigned reason)
{
	nl_runtime_kick();
	if (!i_given_up || reason >= NL_H2_GIVEN_UP_N)
		return;
	const struct nl_table t = { given_up, sizeof given_up[0], GIVEN_UP_SLOTS, 1, 0, NULL, 0 };
	struct nl_slot *e;
	/* Another thread making it: this one is not counted. */
	if (nl_table_get(&t, reason, nl_table_by_index, NULL, make_given_up, &reason, &e) == NL_TABLE_FOUND)
		nl_counter_add(((struct given_up *)e)->s, 1);
}

void nl_rpcmetrics_register(void)
{
	if (!nl_http_server_on && !nl_http_client_on)
		return;
	i_server = nl_inst(NL_I_RPC_SERVER_DURATION);
	i_client = nl_inst(NL_I_RPC_CLIENT_DURATION);
	i_given_up = nl_inst(NL_I_HTTP2_GIVEN_UP);
}
