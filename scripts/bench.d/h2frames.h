/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 bytes for the bench drivers (calls.c, conns.c), built by hand: the
 * connection's opening (preface, SETTINGS, a WINDOW_UPDATE that covers any
 * run), and the exchanges of a GET and of a unary gRPC call, each header
 * block in two forms as an HPACK encoder that keeps a dynamic table writes
 * them: the first request of a connection adds its headers to the table
 * (literals with incremental indexing), the following ones name them by
 * their dynamic index alone. The same headers in the same order each time
 * keep those indexes fixed. */
#ifndef NL_BENCH_H2FRAMES_H
#define NL_BENCH_H2FRAMES_H

#include <stdint.h>
#include <string.h>

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

enum { H2_DATA = 0, H2_HEADERS = 1, H2_SETTINGS = 4, H2_WINDOW_UPDATE = 8 };
enum { H2_END_STREAM = 1, H2_ACK = 1, H2_END_HEADERS = 4 };

/* A frame at out: its 9-byte head and n bytes of payload. Its size. */
static inline size_t h2_frame(uint8_t *out, unsigned type, unsigned flags, uint32_t id, const void *p, size_t n)
{
	const uint8_t head[9] = { (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n, (uint8_t)type, (uint8_t)flags,
				  (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8), (uint8_t)id };
	memcpy(out, head, 9);
	if (n)
		memcpy(out + 9, p, n);
	return 9 + n;
}

/* The client's opening: preface, empty SETTINGS, the connection's receive
 * window raised to its most (responses never wait on it). */
static inline size_t h2_client_open(uint8_t *out)
{
	static const uint8_t window[4] = { 0x7f, 0xff, 0x00, 0x00 };
	size_t n = sizeof H2_PREFACE - 1;
	memcpy(out, H2_PREFACE, n);
	n += h2_frame(out + n, H2_SETTINGS, 0, 0, NULL, 0);
	return n + h2_frame(out + n, H2_WINDOW_UPDATE, 0, 0, window, sizeof window);
}

/* The server's opening: empty SETTINGS and the ACK of the client's. */
static inline size_t h2_server_open(uint8_t *out)
{
	size_t n = h2_frame(out, H2_SETTINGS, 0, 0, NULL, 0);
	return n + h2_frame(out + n, H2_SETTINGS, H2_ACK, 0, NULL, 0);
}

/* Header blocks: [0] the connection's first, [1] every one after it.
 * Literals: 0x40|i names static entry i; 0x40 alone a new name. Indexed:
 * 0x80|i, dynamic entries from 62 on, the latest added first. */
/* GET: adds :path, :authority, user-agent, accept, authorization (66..62). */
static const char h2_get_first[] = "\x82\x86"
				   "\x44\x09/v1/items" "\x41\x0e" "127.0.0.1:8080" "\x7a\x09" "bench/1.0"
				   "\x53\x10" "application/json" "\x90" "\x57\x17" "Bearer 0123456789abcdef";
static const char h2_get_next[] = "\x82\x86\xc2\xc1\xc0\xbf\x90\xbe";
/* 200: adds content-type, server, date, content-length (65..62). */
static const char h2_ok_first[] = "\x88" "\x5f\x10" "application/json" "\x76\x05" "bench"
				  "\x61\x1d" "Tue, 01 Dec 2026 10:00:00 GMT" "\x5c\x04" "1024";
static const char h2_ok_next[] = "\x88\xc1\xc0\xbf\xbe";
/* gRPC POST: adds :path, :authority, content-type, te, user-agent (66..62). */
static const char grpc_req_first[] = "\x83\x86"
				     "\x44\x0f/bench.Echo/Say" "\x41\x0e" "127.0.0.1:8080" "\x5f\x10" "application/grpc"
				     "\x40\x02" "te" "\x08" "trailers" "\x7a\x0c" "grpc-c/1.0.0";
static const char grpc_req_next[] = "\x83\x86\xc2\xc1\xc0\xbf\xbe";
/* 200 then trailers: adds content-type, then grpc-status (63, 62). */
static const char grpc_resp_first[] = "\x88" "\x5f\x10" "application/grpc";
static const char grpc_resp_next[] = "\x88\xbf";
static const char grpc_trailers_first[] = "\x40\x0b" "grpc-status" "\x01" "0";
static const char grpc_trailers_next[] = "\xbe";

#define H2_BODY 1024    /* the GET's response body */
#define GRPC_MSG 37     /* a gRPC message: 5 bytes of prefix, 32 of payload */

/* Stream id's request (client's bytes) at out; its size. first: the
 * connection's first request. grpc: a unary call rather than a GET. */
static inline size_t h2_request(uint8_t *out, uint32_t id, int first, int grpc)
{
	if (!grpc) {
		const char *b = first ? h2_get_first : h2_get_next;
		size_t n = first ? sizeof h2_get_first - 1 : sizeof h2_get_next - 1;
		return h2_frame(out, H2_HEADERS, H2_END_HEADERS | H2_END_STREAM, id, b, n);
	}
	const char *b = first ? grpc_req_first : grpc_req_next;
	size_t k = h2_frame(out, H2_HEADERS, H2_END_HEADERS, id, b,
			    first ? sizeof grpc_req_first - 1 : sizeof grpc_req_next - 1);
	uint8_t msg[GRPC_MSG] = { 0, 0, 0, 0, GRPC_MSG - 5 };
	memset(msg + 5, 'q', GRPC_MSG - 5);
	return k + h2_frame(out + k, H2_DATA, H2_END_STREAM, id, msg, sizeof msg);
}

/* Its response (the server's bytes) at out; its size. */
static inline size_t h2_response(uint8_t *out, uint32_t id, int first, int grpc)
{
	if (!grpc) {
		static uint8_t body[H2_BODY];
		memset(body, 'x', sizeof body);
		size_t k = h2_frame(out, H2_HEADERS, H2_END_HEADERS, id, first ? h2_ok_first : h2_ok_next,
				    first ? sizeof h2_ok_first - 1 : sizeof h2_ok_next - 1);
		return k + h2_frame(out + k, H2_DATA, H2_END_STREAM, id, body, sizeof body);
	}
	size_t k = h2_frame(out, H2_HEADERS, H2_END_HEADERS, id, first ? grpc_resp_first : grpc_resp_next,
			    first ? sizeof grpc_resp_first - 1 : sizeof grpc_resp_next - 1);
	uint8_t msg[GRPC_MSG] = { 0, 0, 0, 0, GRPC_MSG - 5 };
	memset(msg + 5, 'r', GRPC_MSG - 5);
	k += h2_frame(out + k, H2_DATA, 0, id, msg, sizeof msg);
	return k + h2_frame(out + k, H2_HEADERS, H2_END_HEADERS | H2_END_STREAM, id,
			    first ? grpc_trailers_first : grpc_trailers_next,
			    first ? sizeof grpc_trailers_first - 1 : sizeof grpc_trailers_next - 1);
}

#endif
