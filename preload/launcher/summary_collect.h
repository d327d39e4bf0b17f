/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run --summary (summary_collect.c): what the tree's export read,
 * kept until the program ended, then made into the tables of summary.h.
 */
#ifndef NL_SUMMARY_COLLECT_H
#define NL_SUMMARY_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --summary[=FILE]: the tables are wanted, in file (opened now) or, when
 * it is NULL or cannot be opened, on stderr. */
void want_summary(const char *file);

/* Whether the tables are wanted. */
bool summary_wanted(void);

/* The pid of the tree's exporter (this process): only the segments that
 * name it are the tree's. */
void summary_set_exporter(uint32_t pid);

/* In the keeper: no tables, and the file named closed. */
void summary_forget(void);

/* The seen callback of the tree's export (adopt.h): keeps a copy of a
 * segment it just read. */
void summary_seen(const uint8_t *data, size_t len, void *arg);

/* Once the program ended: the tables, or why (when not NULL) there is
 * nothing to show. Frees what was kept and closes the file. */
void summary_print(const char *why);

#endif
