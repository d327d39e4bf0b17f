/* SPDX-License-Identifier: Apache-2.0 */
/* The one symbol of libnemolens_export.so (module.h): the exporter's entry
 * points, and the log line of the shim that opened the module. */
#include "module.h"

#include <stddef.h>

static const struct nl_export_host *host;

static void init(const struct nl_export_host *h) { host = h; }

/* The module's own code logs as the shim does (log.h); the shim decides
 * whether and where a line goes. */
void nl_log(enum nl_log_level level, const char *key, const char *fmt, ...)
{
	if (!host)
		return;
	va_list ap;
	va_start(ap, fmt);
	host->vlog(level, key, fmt, ap);
	va_end(ap);
}

__attribute__((visibility("default"))) const struct nl_export_api nl_export_module = {
	.version = NL_VERSION,
	.size = sizeof(struct nl_export_api),
	.init = init,
	.otlp_encode = nl_otlp_encode,
	.json_encode = nl_json_encode,
	.transport_new = nl_transport_new,
	.transport_send = nl_transport_send,
	.transport_set_final = nl_transport_set_final,
	.transport_set_wait = nl_transport_set_wait,
	.transport_free = nl_transport_free,
	.fork_prepare = nl_transport_fork_prepare,
	.fork_parent = nl_transport_fork_parent,
	.fork_child = nl_transport_fork_child,
};
