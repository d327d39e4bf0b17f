#include "state.h"

_Atomic bool nl_recording;
__thread int nl_hooks_bypass __attribute__((tls_model("initial-exec")));
_Atomic bool nl_runtime_kicked;

static void (*_Atomic starter)(void);

void nl_runtime_set_starter(void (*start)(void)) { atomic_store(&starter, start); }

void nl_runtime_kick_slow(void)
{
	void (*start)(void) = atomic_load(&starter);
	if (start)
		start();
}
