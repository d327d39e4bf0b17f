/* SPDX-License-Identifier: Apache-2.0 */
#include "elfsym.h"

#include <elf.h>
#include <string.h>

/* [off, off + size) lies inside [0, len). */
static bool inside(size_t len, uint64_t off, uint64_t size) { return off <= len && size <= len - off; }

/* A section header, copied out (the image need not be aligned). */
static bool section(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, unsigned i, Elf64_Shdr *sh)
{
	uint64_t off = eh->e_shoff + (uint64_t)i * eh->e_shentsize;
	if (i >= eh->e_shnum || !inside(len, off, sizeof *sh))
		return false;
	memcpy(sh, img + off, sizeof *sh);
	return true;
}

static bool is_function(const Elf64_Sym *s)
{
	unsigned type = ELF64_ST_TYPE(s->st_info);
	return (type == STT_FUNC || type == STT_GNU_IFUNC) && s->st_shndx != SHN_UNDEF && s->st_value;
}

/* The best symbol of one table for addr: one whose range holds it, else
 * the nearest sized-0 function below it. */
static bool search(const uint8_t *img, size_t len, const Elf64_Shdr *tab, const Elf64_Shdr *str, uint64_t addr,
		   struct nl_elf_sym *out)
{
	if (tab->sh_entsize != sizeof(Elf64_Sym) || !inside(len, tab->sh_offset, tab->sh_size) ||
	    !inside(len, str->sh_offset, str->sh_size) || str->sh_size == 0)
		return false;
	const uint8_t *strings = img + str->sh_offset;
	/* The table must end with a NUL for names to be C strings. */
	if (strings[str->sh_size - 1] != 0)
		return false;
	uint64_t n = tab->sh_size / sizeof(Elf64_Sym);
	bool found = false, exact = false;
	Elf64_Sym best = { 0 };
	for (uint64_t k = 0; k < n; k++) {
		Elf64_Sym s;
		memcpy(&s, img + tab->sh_offset + k * sizeof s, sizeof s);
		if (!is_function(&s) || s.st_value > addr || s.st_name >= str->sh_size)
			continue;
		if (s.st_size && addr - s.st_value < s.st_size) {
			/* Aliases share a range: the global name reads best. */
			if (!exact || (ELF64_ST_BIND(best.st_info) == STB_LOCAL && ELF64_ST_BIND(s.st_info) != STB_LOCAL))
				best = s;
			found = exact = true;
		} else if (!exact && s.st_size == 0 && (!found || s.st_value > best.st_value)) {
			best = s;
			found = true;
		}
	}
	if (!found || !strings[best.st_name])
		return false;
	out->name = (const char *)strings + best.st_name;
	out->start = best.st_value;
	return true;
}

static bool search_type(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, uint32_t type, uint64_t addr,
			struct nl_elf_sym *out)
{
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		Elf64_Shdr tab, str;
		if (section(img, len, eh, i, &tab) && tab.sh_type == type && section(img, len, eh, tab.sh_link, &str) &&
		    search(img, len, &tab, &str, addr, out))
			return true;
	}
	return false;
}

bool nl_elf_symbol(const uint8_t *img, size_t len, uint64_t addr, struct nl_elf_sym *out)
{
	Elf64_Ehdr eh;
	if (!img || len < sizeof eh)
		return false;
	memcpy(&eh, img, sizeof eh);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr))
		return false;
	return search_type(img, len, &eh, SHT_SYMTAB, addr, out) || search_type(img, len, &eh, SHT_DYNSYM, addr, out);
}
