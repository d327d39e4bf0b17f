/* SPDX-License-Identifier: Apache-2.0 */
/* The code a fork child runs before it has recorded anything: its fork
 * handlers, and the exit's first look. A child's first touch of a code page
 * of the shim is a page fault (the kernel maps the 64 KiB around it), so
 * these few functions, spread over several files, go to one section that
 * the linker puts next to the load path and the destructor that every
 * process runs at exit, right after the headers (cmake/preload_layout.ld). */
#ifndef NL_FORKPATH_H
#define NL_FORKPATH_H

#define NL_FORK_PATH __attribute__((section(".text.hot.nl_fork")))

#endif
