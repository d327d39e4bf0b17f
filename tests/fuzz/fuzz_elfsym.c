/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the ELF symbol reader of the call sites (preload/core/elfsym.c):
 * any bytes as a mapped file, looked up at addresses taken from the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy, so that reading past the end is caught. */
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	uint64_t addrs[3] = { 0x1000, 0, ~0ull };
	if (size >= 8)
		memcpy(&addrs[1], data + size - 8, 8);
	for (int i = 0; i < 3; i++) {
		struct nl_elf_sym sym;
		if (nl_elf_symbol(buf, size, addrs[i], &sym)) {
			/* The name lies inside the image, NUL-terminated there. */
			const uint8_t *p = (const uint8_t *)sym.name;
			if (p < buf || p >= buf + size || !memchr(p, 0, (size_t)(buf + size - p)) || sym.start > addrs[i])
				abort();
		}
	}
	free(buf);
	return 0;
}
