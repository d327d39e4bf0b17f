/* SPDX-License-Identifier: Apache-2.0 */
/* A 32-bit key of a short run of bytes (a Host value), never 0: eight bytes
 * a step, the last word overlapping the one before. For finding a value
 * seen before again at the cost of a few multiplies; equal keys are taken
 * as equal values (one chance in 2^32 of two values sharing one). */
#ifndef NL_BYTEKEY_H
#define NL_BYTEKEY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t nl_bytes_key(const char *s, size_t n)
{
	uint64_t h = 0x9E3779B97F4A7C15ull ^ n, w;
	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&w, s + i, 8);
			h = (h ^ w) * 0xff51afd7ed558ccdull;
			h ^= h >> 32;
		}
		memcpy(&w, s + n - 8, 8);
	} else {
		w = 0;
		for (size_t i = 0; i < n; i++)
			w |= (uint64_t)(unsigned char)s[i] << (8 * i);
	}
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	return (uint32_t)(h >> 32) | 1;
}

#endif
