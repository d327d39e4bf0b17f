/* SPDX-License-Identifier: Apache-2.0 */
/* What every program under the shim runs and writes at load, whether it
 * ever records or not: a shell's /bin/true pays for each page of it.
 *
 * A first touch of a code page is a page fault (the kernel maps the 64 KiB
 * around it), and so is a first write to a page of zeroed data. So the few
 * functions of the load path, spread over several files, go to one section
 * right after the headers and the read-only data, which the dynamic linker's
 * first look maps in (cmake/preload_layout.ld; NL_FORK_PATH's too); and the
 * variables they write, with those every exit reads, go to .data, whose
 * page the dynamic linker has written already (it relocates the pointers
 * there), instead of pages of .bss that nothing else would touch; so do
 * the few that every hook reads. */
#ifndef NL_LOADPATH_H
#define NL_LOADPATH_H

#define NL_LOAD_PATH __attribute__((section(".text.hot.nl_load")))
/* The hooks' entry points and the stubs that find libc's functions at their
 * first call: nearly every program calls read, write or close, and these
 * run whether the shim records or not. They go next to the load path. */
#define NL_ENTRY_PATH __attribute__((section(".text.hot.nl_entry")))
#define NL_LOAD_STATE __attribute__((section(".data.nl_load")))
/* Read-only tables that no process reads before it records: placed after
 * the code (cmake/preload_layout.ld), so that they do not push the load
 * path out of the pages the dynamic linker's first look maps. */
#define NL_COLD_RODATA __attribute__((section(".nl_cold_ro")))

#endif
