/* Placeholder until the sampler lands: memory profiling reports nothing. */
#include "memsampler.h"

void nl_memsampler_init(const struct nl_config *cfg) { (void)cfg; }
bool nl_memsampler_active(void) { return false; }
void nl_memsampler_sample(void) {}
void nl_memsampler_shutdown(void) {}
void nl_memsampler_atfork_child(void) {}
