/* SPDX-License-Identifier: Apache-2.0 */
#include "elfsym.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files larger than this are not looked into: a symbol name is not worth
 * mapping gigabytes of debug information for. */
#define MAX_FILE (1ull << 31)

/* The section header of index i, if the table holds it. */
static const Elf64_Shdr *section(const uint8_t *f, size_t size, const Elf64_Ehdr *eh, unsigned i)
{
	if (i >= eh->e_shnum || eh->e_shentsize != sizeof(Elf64_Shdr))
		return NULL;
	uint64_t off = eh->e_shoff + (uint64_t)i * sizeof(Elf64_Shdr);
	if (off > size || size - off < sizeof(Elf64_Shdr))
		return NULL;
	return (const Elf64_Shdr *)(f + off);
}

/* Searches one symbol table (and its string table) for the function that
 * covers value; false when none does. */
static bool search(const uint8_t *f, size_t size, const Elf64_Ehdr *eh, const Elf64_Shdr *tab, uint64_t value,
		   char *name, size_t len)
{
	const Elf64_Shdr *str = section(f, size, eh, tab->sh_link);
	if (!str || tab->sh_entsize != sizeof(Elf64_Sym) || tab->sh_offset > size ||
	    size - tab->sh_offset < tab->sh_size || str->sh_offset > size || size - str->sh_offset < str->sh_size)
		return false;
	const Elf64_Sym *syms = (const Elf64_Sym *)(f + tab->sh_offset);
	size_t n = tab->sh_size / sizeof(Elf64_Sym);
	const char *strings = (const char *)(f + str->sh_offset);
	for (size_t i = 0; i < n; i++) {
		const Elf64_Sym *s = &syms[i];
		unsigned type = ELF64_ST_TYPE(s->st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF)
			continue;
		if (value < s->st_value || value - s->st_value >= (s->st_size ? s->st_size : 1))
			continue;
		if (s->st_name >= str->sh_size)
			return false;
		const char *nm = strings + s->st_name;
		size_t k = strnlen(nm, str->sh_size - s->st_name);
		if (k >= len)
			k = len - 1;
		memcpy(name, nm, k);
		name[k] = '\0';
		return k > 0;
	}
	return false;
}

bool nl_elf_symbol(const char *path, uintptr_t bias, uintptr_t addr, char *name, size_t len)
{
	if (!path || !len || addr < bias)
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	bool found = false;
	if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr) && (uint64_t)st.st_size < MAX_FILE) {
		size_t size = (size_t)st.st_size;
		const uint8_t *f = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (f != MAP_FAILED) {
			const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
			if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64) {
				const Elf64_Shdr *symtab = NULL, *dynsym = NULL;
				for (unsigned i = 0; i < eh->e_shnum; i++) {
					const Elf64_Shdr *s = section(f, size, eh, i);
					if (!s)
						break;
					if (s->sh_type == SHT_SYMTAB)
						symtab = s;
					else if (s->sh_type == SHT_DYNSYM)
						dynsym = s;
				}
				uint64_t value = addr - bias;
				found = (symtab && search(f, size, eh, symtab, value, name, len)) ||
					(dynsym && search(f, size, eh, dynsym, value, name, len));
			}
			munmap((void *)f, size);
		}
	}
	close(fd);
	return found;
}
