/* SPDX-License-Identifier: Apache-2.0 */
/* The lifecycle of the runtime: what the constructor and destructor of each
 * shared library (load.c) call. Everything else reaches the lifecycle only
 * through the flags and the kick of state.h. */
#ifndef NL_RUNTIME_H
#define NL_RUNTIME_H

#include <stdbool.h>

/* Reads the configuration and, when the shim is enabled, sets everything up
 * and starts recording (nl_recording). Keeps nothing of errno. Returns
 * whether the shim records. */
bool nl_runtime_load(void);
/* Whether the configuration asks for crash reports (NEMOLENS_CRASH_REPORT);
 * after nl_runtime_load returned true. */
bool nl_runtime_crash_report(void);
/* Starts what must run without any record to start it (the memory sampler's
 * thread). Called last by the constructor, once it has changed the
 * environment (nl_python_setup): no thread of ours runs before that, so
 * none reads the environment while it changes. */
void nl_runtime_start(void);
/* The bounded flush at exit (also registered with atexit once something was
 * recorded; whichever runs first exports). */
void nl_runtime_unload(void);

#endif
