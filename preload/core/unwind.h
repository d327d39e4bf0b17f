/* SPDX-License-Identifier: Apache-2.0 */
/* Native stacks for the call sites (callsite.h): libunwind's fast path,
 * which modules a frame belongs to, and the name of a frame's function.
 *
 * libunwind is opened with dlopen by the first call that needs it, never at
 * load: most processes never ask. Module look-ups use glibc's
 * _dl_find_object, which takes no lock (dladdr takes the loader's lock, which
 * a connect() made from a library's constructor, or from a signal handler
 * that interrupted dlopen, would wait for forever).
 */
#ifndef NL_UNWIND_H
#define NL_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

#define NL_UNWIND_FUNCTION_MAX 128
#define NL_UNWIND_OBJECT_MAX 256

/* The caller's return addresses, innermost first, into pcs[0, max): their
 * number, or -1 when the stack cannot be unwound (no libunwind, or it could
 * not be loaded). The first call opens libunwind (with every signal
 * blocked), unless it is made from a vfork child, where it gives -1;
 * threads that ask meanwhile wait for it (at most 100 ms). */
int nl_unwind_stack(uintptr_t *pcs, int max);

/* From the first record: this process's pid, against which a vfork child
 * is told apart. */
void nl_unwind_init(void);

/* Sets the list of networking libraries whose frames are plumbing, as
 * file name prefixes separated by commas ("libcurl,libssl"); NULL: the
 * default list. Not thread-safe: from the constructor. */
void nl_unwind_set_skip(const char *list);
/* The default list. */
extern const char nl_unwind_default_skip[];

enum nl_frame_kind {
	NL_FRAME_PLUMBING,      /* libc, the loader, the shim, libunwind, a listed library */
	NL_FRAME_CODE,          /* the program's own code: a call site */
	NL_FRAME_UNKNOWN        /* in no module (JIT code, a bad address) */
};

/* What the frame with return address pc is: only its module is looked at.
 * Lock-free, allocation-free. */
enum nl_frame_kind nl_unwind_classify(uintptr_t pc);

struct nl_frame_name {
	uintptr_t key;          /* the function's first address; pc when the function has no symbol */
	char function[NL_UNWIND_FUNCTION_MAX];   /* "name", or "0x<offset>" in the object */
	char object[NL_UNWIND_OBJECT_MAX];       /* the file of the module */
};

/* Names the function of the frame with return address pc (a frame of
 * kind NL_FRAME_CODE). The first time a module is asked, its file is
 * mapped read-only (kept for the process's life, a bounded number of
 * modules); takes no lock and does not allocate. */
bool nl_unwind_name(uintptr_t pc, struct nl_frame_name *out);

/* A fork child: whatever another thread of the parent was doing here at
 * the fork is forgotten. */
void nl_unwind_atfork_child(void);

#endif
