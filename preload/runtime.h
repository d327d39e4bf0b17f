/* The shim's lifecycle as the hooks see it. */
#ifndef NL_RUNTIME_H
#define NL_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>

/* True once the constructor configured an enabled shim with metrics on:
 * only then do hooks record anything. */
extern _Atomic bool nl_recording;

/* Something was recorded: make sure the background exporter thread runs.
 * After the first time, one atomic load. */
extern _Atomic bool nl_runtime_kicked;
void nl_runtime_start(void);
static inline void nl_runtime_kick(void)
{
	if (!atomic_load_explicit(&nl_runtime_kicked, memory_order_relaxed))
		nl_runtime_start();
}

#endif
