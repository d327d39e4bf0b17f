/* The shim's lifecycle as the hooks see it. */
#ifndef NL_RUNTIME_H
#define NL_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>

/* True once the constructor configured an enabled shim with metrics on:
 * only then do hooks record anything. */
extern _Atomic bool nl_recording;

/* Something was recorded: make sure the background exporter thread runs.
 * Cheap after the first call (one atomic load). */
void nl_runtime_kick(void);

#endif
