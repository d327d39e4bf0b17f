/* SPDX-License-Identifier: Apache-2.0 */
#include "state.h"

#include "loadpath.h"

NL_LOAD_STATE _Atomic bool nl_recording;
__thread int nl_hooks_bypass __attribute__((tls_model("initial-exec")));
NL_LOAD_STATE _Atomic bool nl_runtime_kicked;

NL_LOAD_STATE static void (*_Atomic starter)(void);

NL_LOAD_PATH void nl_runtime_set_starter(void (*start)(void)) { atomic_store(&starter, start); }

void nl_runtime_kick_slow(void)
{
	void (*start)(void) = atomic_load(&starter);
	if (start)
		start();
}
