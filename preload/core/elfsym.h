/* SPDX-License-Identifier: Apache-2.0 */
/* Function names from an ELF file's symbol tables: a pure unit, bytes in,
 * a name out, that knows nothing of the process it runs in (fuzzed on its
 * own, tests/fuzz/fuzz_elfsym.c).
 *
 * The call sites (callsite.h) name the function that holds a return
 * address. The dynamic symbol table alone would miss every function of a
 * program linked without -rdynamic, and the full table (.symtab) is not
 * loaded into memory: so the file itself is mapped, read-only, and read
 * here. Every offset and size in it is checked against the mapping.
 */
#ifndef NL_ELFSYM_H
#define NL_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nl_elf_sym {
	const char *name;       /* points into the image, NUL-terminated there */
	uint64_t start;         /* the function's first address (file addresses) */
};

/* The function of the 64-bit ELF image img[0,len) that holds address
 * addr (an address as the file has it: a runtime address minus the load
 * bias): from .symtab when the file has one, else from .dynsym. A symbol
 * with a size holds [value, value + size); without a size (hand-written
 * assembly), the nearest one below addr is taken. False when the image is
 * not such a file or has no symbol for addr. */
bool nl_elf_symbol(const uint8_t *img, size_t len, uint64_t addr, struct nl_elf_sym *out);

#endif
