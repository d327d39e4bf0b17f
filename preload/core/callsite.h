/* SPDX-License-Identifier: Apache-2.0 */
/* Call sites: which code opens the connections (DESIGN 13).
 *
 * Every connect() the socket layer counts is counted once more under the
 * code that asked for it, in nemo.lens.connection.call_site.attempts, with
 * the destination attribute of connect_total and the OpenTelemetry code.*
 * attributes. Native programs: the first frame outward from connect() that
 * is not plumbing (unwind.h). Python programs: the Python frame the adapter
 * names just before the interpreter calls connect() (nemolens_call_site).
 *
 * Bounded: at most a configured number of distinct call sites per process
 * (NEMOLENS_CALL_SITE_LIMIT), past which connections count in the
 * instrument's overflow series. A stack that cannot be unwound counts under
 * the call site "unknown". Lock-free and allocation-free: the first
 * connect() from a new function maps its module's file (once per module)
 * and reads its symbols; every later one costs an unwind and a few cache
 * look-ups.
 */
#ifndef NL_CALLSITE_H
#define NL_CALLSITE_H

#include <stdbool.h>

#include "config.h"

#define NL_CALLSITE_LIMIT_DEFAULT 64
#define NL_CALLSITE_LIMIT_MAX 256

/* From the constructor: on or off, the limit, the plumbing libraries. */
void nl_callsite_configure(const struct nl_config *cfg);
/* From the first record: the instrument. */
void nl_callsite_register(void);
bool nl_callsite_on(void);

/* A counted connect() on fd to destination dest: one more for its call
 * site. From the connect hook; keeps errno. */
void nl_callsite_connect(int fd, int dest);

/* The Python adapter names the code of the connect() that this thread is
 * about to make on fd: function (module.qualname), file and line (0:
 * unknown). Taken by that connect() only. */
void nl_callsite_python(int fd, const char *function, const char *file, int line);

/* A fork child: what threads of the parent were doing here is forgotten,
 * the values are the registry's (zeroed with it). */
void nl_callsite_atfork_child(void);

#endif
