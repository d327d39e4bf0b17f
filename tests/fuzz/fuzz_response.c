/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the parsers of a collector's answers: a google.rpc.Status body, a
 * Retry-After value, the log summary of an arbitrary body, and an OTLP/gRPC
 * answer's trailers (RetryInfo, base64, grpc-message) and framing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "curl_dl.h"
#include "log.h"
#include "response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int loaded = -1;
	if (loaded < 0) {
		nl_log_set_level(NL_LOG_NONE);
		loaded = nl_curl_load();
	}
	const char *msg = NULL;
	size_t len = 0;
	if (nl_rpc_status_message(data, size, &msg, &len) &&
	    (msg < (const char *)data || msg + len > (const char *)data + size))
		abort();   /* the message must lie inside the body */
	char out[128];
	nl_printable_summary((const char *)data, size, out, sizeof out);
	if (strlen(out) >= sizeof out)
		abort();
	long delay = nl_grpc_retry_delay_ms(data, size);
	if (delay < -1 || delay > RETRY_AFTER_MAX_S * 1000L)
		abort();
	uint8_t bin[64];
	size_t bin_len;
	if (nl_base64_decode((const char *)data, size, bin, sizeof bin, &bin_len) && bin_len > sizeof bin)
		abort();
	nl_grpc_message((const char *)data, size, out, sizeof out);
	if (strlen(out) >= sizeof out)
		abort();
	const uint8_t *m;
	size_t m_len;
	bool compressed;
	if (nl_grpc_unframe(data, size, &compressed, &m, &m_len) && (m != data + 5 || m_len > size - 5))
		abort();
	if (loaded == 0) {
		long ms = nl_parse_retry_after((const char *)data, size);
		if (ms < -1 || ms > RETRY_AFTER_MAX_S * 1000L)
			abort();
	}
	return 0;
}
