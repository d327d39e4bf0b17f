/* The code a fork child runs before it has recorded anything: its fork
 * handlers, and the exit's first look. A child's first touch of a code page
 * of the shim is a page fault (the kernel maps the 64 KiB around it), so
 * these few functions, spread over several files, go to one section that
 * the linker puts at the start of the text (.text.hot), next to the
 * destructor that every process runs at exit. */
#ifndef NL_FORKPATH_H
#define NL_FORKPATH_H

#define NL_FORK_PATH __attribute__((section(".text.hot.nl_fork")))

#endif
