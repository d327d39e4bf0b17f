/* SPDX-License-Identifier: Apache-2.0 */
/* The export module: libnemolens_export.so, the exporter (export.h) with
 * protobuf-c, zlib and, through them, libcurl, in a library of its own.
 *
 * libnemolens_preload.so needs only libc: a program that never exports
 * never loads any of these. Its first export opens the module, installed
 * next to the shim, with dlopen (export_dl.c), and calls the exporter
 * through the one table the module exports. nemolens-run and libnemolens.so
 * link the exporter directly and never use this.
 */
#ifndef NL_MODULE_H
#define NL_MODULE_H

#include <stdarg.h>

#include "export.h"
#include "log.h"

#define NL_EXPORT_MODULE_FILE "libnemolens_export.so"
#define NL_EXPORT_MODULE_SYMBOL "nl_export_module"

/* What the module takes from the shim that opened it: its log, so the
 * module's warnings obey the shim's settings and once-only keys. */
struct nl_export_host {
	void (*vlog)(enum nl_log_level level, const char *key, const char *fmt, va_list ap);
};

struct nl_export_api {
	/* The shim refuses a module of another build: both must be the same
	 * version, with the same layout of this table. */
	const char *version;
	unsigned size;
	void (*init)(const struct nl_export_host *host);
	int (*otlp_encode)(const struct nl_snapshot *snap, uint8_t **out, size_t *out_len);
	int (*json_encode)(const struct nl_snapshot *snap, char **out, size_t *out_len);
	struct nl_transport *(*transport_new)(const struct nl_transport_config *cfg);
	enum nl_send_result (*transport_send)(struct nl_transport *t, const uint8_t *body, size_t len,
					      uint64_t deadline_ns, uint64_t retry_until_ns, const _Atomic bool *abort);
	void (*transport_set_final)(struct nl_transport *t, bool final, bool kept);
	void (*transport_set_wait)(struct nl_transport *t, long ms);
	void (*transport_free)(struct nl_transport *t);
	void (*fork_prepare)(void);
	void (*fork_parent)(void);
	void (*fork_child)(void);
};

#endif
