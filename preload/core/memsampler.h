/* SPDX-License-Identifier: Apache-2.0 */
/* Memory of server process trees and of the host, sampled from /proc
 * (NeMo Gym's gym.server.memory.*, gym.server.processes, gym.host.memory.*
 * and gym.servers.active). Runs on the shim's background thread only, or in
 * nemolens-run for the processes it exports (memtrees.h).
 *
 * A process where the shim runs is a server root when no ancestor runs the
 * shim, or when its server name differs from the one it inherited; the shim
 * passes the root's identity to children through the environment. A root
 * samples its own tree: itself and all descendants that are not roots of
 * another server, found through /proc (so children the shim cannot load
 * into, such as static binaries, still count). The outermost shim process
 * also reports host memory and the number of live server roots below it.
 */
#ifndef NL_MEMSAMPLER_H
#define NL_MEMSAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* From the constructor (single-threaded): decides this process's role, puts
 * the identity its children inherit into the environment, and registers the
 * instruments. Does nothing when memory profiling is off. */
void nl_memsampler_init(const struct nl_config *cfg);

/* Whether this process samples anything (memory profiling on, and a server
 * root or the outermost process). */
bool nl_memsampler_active(void);

/* Takes one sample now and records it in the registry. Background thread. */
void nl_memsampler_sample(void);

/* At exit: gym.servers.active goes to 0 before the last export. */
void nl_memsampler_shutdown(void);

/* Fork child: a child with the same server name is part of its parent's tree
 * and samples nothing. */
void nl_memsampler_atfork_child(void);

/* This process's roles, for its segment's flags (NL_SEG_MEM_ROOT,
 * NL_SEG_MEM_OUTERMOST of segment.h); 0 when it samples nothing. */
unsigned nl_memsampler_roles(void);

/* The interval, page size and PSS budget, from cfg and the environment.
 * nl_memsampler_init decides them for its own process; nemolens-run, which
 * samples the trees of others (memtrees.h), calls it before its first sample. */
void nl_memsampler_configure(const struct nl_config *cfg);

#endif
