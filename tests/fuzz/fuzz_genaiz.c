/* SPDX-License-Identifier: Apache-2.0 */
/* The inflating path of model-call bodies (preload/follow/genaiz.c). Two ways:
 * - the input, as a body: whatever it holds (a damaged gzip, zlib or raw
 *   deflate stream, text), fed in pieces, nothing breaks and its stream
 *   goes back to the pool;
 * - the input compressed here as gzip, zlib or raw deflate, fed in pieces:
 *   it reads as the scanner reads the input itself. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "genaiz.h"

#define MAX 8192

static void feed(struct nl_genaiz *b, const uint8_t *p, size_t n, unsigned step)
{
	nl_genaiz_init(b);
	for (size_t at = 0; at < n;) {
		size_t k = step && step < n - at ? step : n - at;
		nl_genaiz_feed(b, p + at, k);
		at += k;
	}
	nl_genaiz_end(b);
	if (nl_genaiz_in_use())
		abort();        /* a stream not given back */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > MAX)
		return 0;
	unsigned mode = data[0] % 4, step = data[1] % 23;
	const uint8_t *in = data + 2;
	size_t n = size - 2;
	static struct nl_genaiz b;
	if (mode == 3) {
		feed(&b, in, n, step);
		return 0;
	}
	static const int wbits[] = { 16 + 15, 15, -15 };
	static uint8_t z[MAX + 256];
	z_stream d = { 0 };
	if (deflateInit2(&d, 6, Z_DEFLATED, wbits[mode], 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	d.next_in = (Bytef *)(uintptr_t)in;
	d.avail_in = (uInt)n;
	d.next_out = z;
	d.avail_out = sizeof z;
	if (deflate(&d, Z_FINISH) != Z_STREAM_END)
		abort();
	size_t zn = sizeof z - d.avail_out;
	deflateEnd(&d);
	/* A raw deflate stream is told by its first bytes: one that reads as
	 * text is text, one that reads as a gzip or zlib header is taken for
	 * that, by design. */
	bool text = z[0] == '{' || z[0] == '[' || z[0] == ':' || (z[0] >= 'a' && z[0] <= 'z') || z[0] == ' ' ||
		    z[0] == '\t' || z[0] == '\r' || z[0] == '\n';
	bool header = (z[0] == 0x1f && z[1] == 0x8b) ||
		      ((z[0] & 0x0f) == 8 && (z[0] >> 4) <= 7 && ((unsigned)z[0] << 8 | z[1]) % 31 == 0 && !(z[1] & 0x20));
	if (mode == 2 && (text || header))
		return 0;
	feed(&b, z, zn, step);
	struct nl_genai_scan t;
	nl_genai_init(&t);
	nl_genai_feed(&t, in, n);
	nl_genai_end(&t);
	const struct nl_genai_result *x = &b.s.r, *y = &t.r;
	if (x->kind != y->kind || x->prompt_tokens != y->prompt_tokens ||
	    x->completion_tokens != y->completion_tokens || x->input_tokens != y->input_tokens ||
	    x->output_tokens != y->output_tokens || x->reasoning_tokens != y->reasoning_tokens ||
	    x->error != y->error || x->done != y->done || x->events != y->events || x->model.len != y->model.len ||
	    memcmp(x->model.text, y->model.text, x->model.len) || x->finish.len != y->finish.len ||
	    memcmp(x->finish.text, y->finish.text, x->finish.len))
		abort();        /* inflating changed what was read */
	return 0;
}
