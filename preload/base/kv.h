/* SPDX-License-Identifier: Apache-2.0 */
/* A name and a value, both owned strings: HTTP headers of the exporter,
 * decoded resource attributes of the configuration. */
#ifndef NL_KV_H
#define NL_KV_H

struct nl_header {
	char *name;
	char *value;
};

#endif
