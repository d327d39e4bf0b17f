/* SPDX-License-Identifier: Apache-2.0 */
/* The name of the function at a code address, from the symbol table of the
 * object's file.
 *
 * The loader knows only the dynamic symbols (.dynsym, what dladdr names);
 * a program's static functions are in .symtab, which is not loaded. This
 * reads the file itself: mapped read-only for the look-up, then unmapped.
 * It takes no lock, does not allocate with malloc and loads nothing, so it
 * is usable where dlopen is not: from a hook, once per new address.
 */
#ifndef NL_ELFSYM_H
#define NL_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The function of the object file `path`, loaded at bias `bias` (a link
 * map's l_addr), that covers the code address `addr`: its name into
 * name[len]. .symtab where the file has one, else .dynsym. False when the
 * file cannot be read or no function symbol covers addr. */
bool nl_elf_symbol(const char *path, uintptr_t bias, uintptr_t addr, char *name, size_t len);

#endif
