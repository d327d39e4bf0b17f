/* SPDX-License-Identifier: Apache-2.0 */
/* Call sites: which code asked for each connection the socket layer counts.
 *
 * Every counted connect() (nl_conn_attempt) is also counted in
 * nemolens.connection.call_site, by destination and by the code that asked
 * for it (docs/call-sites.md):
 *
 *   native code   the first frame from connect() outward that is not
 *                 plumbing: libc, the dynamic loader, the shim, and the
 *                 networking libraries of NEMOLENS_CALL_SITES_SKIP (libcurl,
 *                 libuv, OpenSSL...). Usually that is connect()'s caller,
 *                 whose return address the hook passes down: no unwinding.
 *                 When the caller is plumbing, the stack comes from
 *                 libunwind's fast path (libunwind is opened then). Each
 *                 return address is classified once and cached; a name
 *                 comes from the object file's symbol table (elfsym.h).
 *   Python        the adapter names the Python frame (module.qualname, file,
 *                 line) just before the socket's connect and the count takes
 *                 that name instead of the interpreter's native frames.
 *
 * A stack that cannot be read (no libunwind, another thread loading it, a
 * connect() made while this thread is already inside this code, a vfork
 * child, no frame outside the plumbing) counts under the call site
 * "unknown". Distinct call sites are bounded per process
 * (NEMOLENS_CALL_SITES_LIMIT); past the limit, the overflow series.
 */
#ifndef NL_CALLSITE_H
#define NL_CALLSITE_H

#include "config.h"

/* Settings, from the constructor. */
void nl_callsite_init(const struct nl_config *cfg);
/* The instrument and the registry room the hooks create series in: with
 * the process's other instruments, at its first record. */
void nl_callsite_register(void);

/* A connect() to destination dest was counted: count its call site.
 * caller is the return address of the connect() call (the first frame
 * outside the shim). From the connect hook; never blocks, and waits for
 * another thread only while that one loads libunwind (at most 100 ms). */
void nl_callsite_count(int dest, const void *caller);

/* The call site of the Python adapter's frame (function as module.qualname,
 * file, line; file may be NULL, line 0 when unknown): its number, or -1 when
 * call sites are off or past the limit. May allocate: not from a hook. */
int nl_callsite_named(const char *function, const char *file, long line);
/* The next counted connect() of this thread is site's (a number from
 * nl_callsite_named); -1 takes that back. */
void nl_callsite_next(int site);

#endif
