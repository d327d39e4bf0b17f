/* SPDX-License-Identifier: Apache-2.0 */
/* Reading an OTLP/gRPC answer (response.h): the RetryInfo in
 * grpc-status-details-bin, its base64, grpc-message's percent-encoding and
 * the gRPC message framing. The bytes are written out from the protobuf
 * encoding rules and the protos' field numbers (google.rpc.Status: code 1,
 * message 2, details 3; Any: type_url 1, value 2; RetryInfo: retry_delay 1;
 * Duration: seconds 1, nanos 2), not produced by the code under test. */
#include <criterion/criterion.h>
#include <string.h>

#include "response.h"

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

/* Status{code 8, details [Any{RetryInfo{retry_delay {seconds 2, nanos 500000000}}}]} */
static const uint8_t retry_2_5s[] = {
	0x08, 0x08,                                     /* code = 8 */
	0x1a, 2 + 40 + 2 + 10,                          /* details, Any */
	0x0a, 40, 't', 'y', 'p', 'e', '.', 'g', 'o', 'o', 'g', 'l', 'e', 'a', 'p', 'i', 's', '.', 'c', 'o', 'm',
	'/', 'g', 'o', 'o', 'g', 'l', 'e', '.', 'r', 'p', 'c', '.', 'R', 'e', 't', 'r', 'y', 'I', 'n', 'f', 'o',
	0x12, 10,                                       /* Any.value: RetryInfo */
	0x0a, 8,                                        /* retry_delay: Duration */
	0x08, 0x02,                                     /* seconds = 2 */
	0x10, 0x80, 0xca, 0xb5, 0xee, 0x01,             /* nanos = 500000000 */
};

Test(grpc_answer, retry_info_delay_in_milliseconds)
{
	cr_assert_eq(sizeof RETRY_INFO_URL - 1, 40);
	cr_assert_eq(nl_grpc_retry_delay_ms(retry_2_5s, sizeof retry_2_5s), 2500);
}

Test(grpc_answer, retry_info_among_other_details)
{
	/* Status{message "x", details [Any{ErrorInfo{}}, Any{RetryInfo{seconds 1}}]} */
	static const uint8_t b[] = {
		0x12, 1, 'x',
		0x1a, 2 + 40, 0x0a, 40, 't', 'y', 'p', 'e', '.', 'g', 'o', 'o', 'g', 'l', 'e', 'a', 'p', 'i', 's', '.',
		'c', 'o', 'm', '/', 'g', 'o', 'o', 'g', 'l', 'e', '.', 'r', 'p', 'c', '.', 'E', 'r', 'r', 'o', 'r',
		'I', 'n', 'f', 'o',
		0x1a, 2 + 40 + 2 + 4, 0x0a, 40, 't', 'y', 'p', 'e', '.', 'g', 'o', 'o', 'g', 'l', 'e', 'a', 'p', 'i',
		's', '.', 'c', 'o', 'm', '/', 'g', 'o', 'o', 'g', 'l', 'e', '.', 'r', 'p', 'c', '.', 'R', 'e', 't',
		'r', 'y', 'I', 'n', 'f', 'o', 0x12, 4, 0x0a, 2, 0x08, 0x01,
	};
	cr_assert_eq(nl_grpc_retry_delay_ms(b, sizeof b), 1000);
}

Test(grpc_answer, no_retry_info)
{
	static const uint8_t status_only[] = { 0x08, 0x0e, 0x12, 4, 'b', 'u', 's', 'y' };
	cr_assert_eq(nl_grpc_retry_delay_ms(status_only, sizeof status_only), -1);
	cr_assert_eq(nl_grpc_retry_delay_ms(NULL, 0), -1);
}

Test(grpc_answer, malformed_status_has_no_delay)
{
	/* A details field longer than what follows, then a truncated varint. */
	static const uint8_t too_long[] = { 0x1a, 50, 0x0a, 1, 'x' };
	static const uint8_t cut[] = { 0x08, 0x80 };
	cr_assert_eq(nl_grpc_retry_delay_ms(too_long, sizeof too_long), -1);
	cr_assert_eq(nl_grpc_retry_delay_ms(cut, sizeof cut), -1);
}

Test(grpc_answer, base64_padded_unpadded_and_url_safe)
{
	static const struct {
		const char *in;
		const char *out;
		size_t len;
	} rows[] = {
		{ "", "", 0 },
		{ "Zg==", "f", 1 },
		{ "Zg", "f", 1 },
		{ "Zm8=", "fo", 2 },
		{ "Zm8", "fo", 2 },
		{ "Zm9v", "foo", 3 },
		{ "+/8=", "\xfb\xff", 2 },
		{ "-_8", "\xfb\xff", 2 },
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		uint8_t out[8];
		size_t n = 99;
		cr_assert(nl_base64_decode(rows[i].in, strlen(rows[i].in), out, sizeof out, &n), "row %zu", i);
		cr_assert_eq(n, rows[i].len, "row %zu", i);
		cr_assert_arr_eq(out, rows[i].out, n, "row %zu", i);
	}
}

Test(grpc_answer, base64_refuses_what_is_not)
{
	uint8_t out[4];
	size_t n;
	cr_assert_not(nl_base64_decode("Zm9v!", 5, out, sizeof out, &n));
	cr_assert_not(nl_base64_decode("Z", 1, out, sizeof out, &n));       /* 6 bits are no byte */
	cr_assert_not(nl_base64_decode("Zm9vYmFy", 8, out, sizeof out, &n)); /* 6 bytes in 4 */
}

Test(grpc_answer, message_is_percent_decoded_and_printable)
{
	char out[64];
	nl_grpc_message("queue%20full%3A 50%25", 21, out, sizeof out);
	cr_assert_str_eq(out, "queue full: 50%");
	nl_grpc_message("bad%0Aline%zz%4", 15, out, sizeof out);
	cr_assert_str_eq(out, "bad line%zz%4");
}

Test(grpc_answer, framing)
{
	static const uint8_t framed[] = { 0, 0, 0, 0, 3, 0x0a, 0x01, 0x02, 0xff };
	const uint8_t *msg;
	size_t len;
	bool compressed = true;
	cr_assert(nl_grpc_unframe(framed, sizeof framed, &compressed, &msg, &len));
	cr_assert_not(compressed);
	cr_assert_eq(len, 3);
	cr_assert_eq(msg, framed + 5);
	static const uint8_t empty[] = { 1, 0, 0, 0, 0 };
	cr_assert(nl_grpc_unframe(empty, sizeof empty, &compressed, &msg, &len));
	cr_assert(compressed);
	cr_assert_eq(len, 0);
	cr_assert_not(nl_grpc_unframe(framed, 4, &compressed, &msg, &len));          /* no whole prefix */
	cr_assert_not(nl_grpc_unframe(framed, 7, &compressed, &msg, &len));          /* a cut message */
	static const uint8_t bad_flag[] = { 2, 0, 0, 0, 0 };
	cr_assert_not(nl_grpc_unframe(bad_flag, sizeof bad_flag, &compressed, &msg, &len));
}
