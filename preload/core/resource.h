/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenTelemetry resource every export carries (service, instance, host,
 * process, SDK, NeMo Gym server identity, and OTEL_RESOURCE_ATTRIBUTES). */
#ifndef NL_RESOURCE_H
#define NL_RESOURCE_H

#include <stddef.h>

#include "config.h"
#include "registry.h"

struct nl_resource {
	struct nl_attr attrs[16 + NL_MAX_RESOURCE_ATTRS];
	size_t n;
	char instance_id[37];
	char host_name[256];
	char executable[256];
};

/* Builds the resource for the current process (call again after fork). */
void nl_resource_build(struct nl_resource *r, const struct nl_config *cfg);

#endif
