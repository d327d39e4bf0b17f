/* SPDX-License-Identifier: Apache-2.0 */
/* The RPC metrics of gRPC calls (rpc.server.call.duration,
 * rpc.client.call.duration) per the OpenTelemetry RPC semantic conventions,
 * recorded by the HTTP/2 glue (preload/follow/) as calls end.
 *
 * Like httpmetrics.h: lock-free, allocation-free, async-signal-safe; series
 * come from the registry's reserved room through a fixed table keyed by the
 * attribute combination; method names are interned in a fixed table.
 */
#ifndef NL_RPCMETRICS_H
#define NL_RPCMETRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NL_RPC_METHODS_MAX 128          /* distinct rpc.method values; past them: _OTHER */
#define NL_RPC_METHOD_OTHER (-1)

/* gRPC status codes (0 OK .. 16 UNAUTHENTICATED). */
#define NL_GRPC_CANCELLED 1
#define NL_GRPC_CODES 17

/* The method id of a gRPC request's :path ("/package.Service/Method"),
 * NL_RPC_METHOD_OTHER when it is not one (or truncated, or past the cap). */
int nl_rpc_method(const char *path, size_t n, bool truncated);

/* The gRPC status of a response without grpc-status, from its HTTP status
 * (gRPC's "HTTP to gRPC status code mapping"). */
unsigned nl_grpc_status_of_http(unsigned http_status);

/* One finished call. */
struct nl_rpc_call {
	uint64_t duration_ns;
	int16_t method;         /* nl_rpc_method */
	uint8_t status;         /* gRPC status code, < NL_GRPC_CODES */
	bool client;
	int16_t host;           /* client: host id (httpmetrics.h), -1 unknown */
	uint16_t port;          /* client: server.port, 0 unknown */
};
void nl_rpc_done(const struct nl_rpc_call *c);

/* An HTTP/2 connection no longer followed, past a bound of the shim's state
 * (nemo.lens.http2.connections_given_up, by reason). */
enum { NL_H2_GIVEN_UP_POOL, NL_H2_GIVEN_UP_TABLE, NL_H2_GIVEN_UP_STREAMS, NL_H2_GIVEN_UP_N };
void nl_http2_given_up(unsigned reason);

/* From the first record (with nl_httpmetrics_register): the instruments. */
void nl_rpcmetrics_register(void);

#endif
