/* SPDX-License-Identifier: Apache-2.0 */
/* NeMo Gym's own description of a server process. Gym's orchestrator starts
 * each server with NEMO_GYM_CONFIG_PATH set to the server's name and
 * NEMO_GYM_CONFIG_DICT holding the whole global configuration (YAML), where
 * the server's entry is a top-level key and its type (resources_servers,
 * responses_api_agents, responses_api_models) the first key under it. */
#ifndef NL_GYMCONFIG_H
#define NL_GYMCONFIG_H

#include <stddef.h>

/* The type of server name in the configuration config: stored in type
 * (size bytes, NUL-terminated). Reads block YAML as Gym writes it and flow
 * style (JSON); reads at most 1 MiB, allocates nothing. Returns 0 when
 * found, -1 when not (no such server, malformed, a type too long), -2 when
 * the configuration is longer than the scan reads. */
int nl_gym_server_type(const char *config, const char *name, char *type, size_t size);

#endif
