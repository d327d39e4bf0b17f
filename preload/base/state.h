/* SPDX-License-Identifier: Apache-2.0 */
/* The few facts every layer may ask about the shim without depending on its
 * lifecycle, which sets them:
 *
 *   nl_recording      true once the constructor configured an enabled shim
 *                     with metrics on; only then is anything recorded
 *   nl_hooks_bypass   set on the shim's own threads and during its exit
 *                     flush: hooks then pass every call straight through, so
 *                     the shim's own sockets are never counted
 *   nl_runtime_kick() something is about to be recorded: make sure the
 *                     process's segment exists and the background thread
 *                     runs (after the first time, one atomic load). Every
 *                     path that writes into the registry kicks BEFORE its
 *                     first write: the first kick moves the registry into a
 *                     file, and holds other kicking threads back until then
 */
#ifndef NL_STATE_H
#define NL_STATE_H

#include <stdatomic.h>
#include <stdbool.h>

extern _Atomic bool nl_recording;
extern __thread int nl_hooks_bypass __attribute__((tls_model("initial-exec")));

extern _Atomic bool nl_runtime_kicked;
/* The lifecycle's starter, called once per process (again after fork) by
 * the first kick; a NULL starter makes kicks do nothing. */
void nl_runtime_set_starter(void (*start)(void));
void nl_runtime_kick_slow(void);

static inline void nl_runtime_kick(void)
{
	/* Acquire: what the first kick did to the registry (made its file)
	 * happens before this thread's writes into it. On x86 as cheap as a
	 * relaxed load. */
	if (!atomic_load_explicit(&nl_runtime_kicked, memory_order_acquire))
		nl_runtime_kick_slow();
}

#endif
