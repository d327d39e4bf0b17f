/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes configuration parsing: the input is a list of NAME=value lines
 * forming the whole environment seen by nl_config_load, plus the raw input
 * given to each value parser. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

#define MAX_VARS 64
static char *names[MAX_VARS], *values[MAX_VARS];
static size_t n_vars;

static const char *fake_getenv(const char *name)
{
	/* The level stays none, so nothing is ever written: a fuzzed
	 * NEMOLENS_LOG_PATH may name any file. */
	if (strcmp(name, "NEMOLENS_LOG_LEVEL") == 0)
		return NULL;
	for (size_t i = 0; i < n_vars; i++)
		if (strcmp(names[i], name) == 0)
			return values[i];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nl_log_set_level(NL_LOG_NONE);
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;

	bool b;
	long ms;
	struct nl_header kv[NL_MAX_HEADERS];
	nl_parse_bool(text, &b);
	nl_parse_ms(text, &ms);
	int n = nl_parse_kv_list(text, kv, NL_MAX_HEADERS);
	if (n > 0)
		nl_free_kv_list(kv, (size_t)n);
	free(nl_utf8_sanitized_dup(text));

	n_vars = 0;
	for (char *save, *line = strtok_r(text, "\n", &save); line && n_vars < MAX_VARS;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		names[n_vars] = line;
		values[n_vars++] = eq + 1;
	}
	struct nl_config cfg;
	nl_config_load(&cfg, fake_getenv, "fuzz");
	nl_config_free(&cfg);
	free(text);
	return 0;
}
