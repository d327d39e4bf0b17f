/* SPDX-License-Identifier: Apache-2.0 */
/* The program's preload environment (preload_env.c): where the shim is,
 * the program's LD_PRELOAD with it, and nemolens-run out from under the
 * shim when it was started under it.
 */
#ifndef NL_PRELOAD_ENV_H
#define NL_PRELOAD_ENV_H

#include <limits.h>
#include <stddef.h>

/* Where the shim is installed relative to this program's directory. */
#ifndef NL_RUN_LIB_RELATIVE
#define NL_RUN_LIB_RELATIVE "../lib"
#endif

#define SHIM_FILE "libnemolens_preload.so"

/* Room for a reason naming up to two paths. */
#define WHY_MAX (3 * PATH_MAX)

/* The LD_PRELOAD list for the program: sanitizer runtimes of old first, then
 * shim (unless NULL), then the rest of old, without any other copy of the
 * shim. malloc'd; NULL when out of memory. */
char *preload_list(const char *shim, const char *old);

/* Re-executes nemolens-run without the shim when it was started under it;
 * returns when there is nothing to do or the re-exec failed. */
void leave_the_shim(char **argv);

/* The shim's absolute path, malloc'd, or NULL with the reason in why. */
char *find_shim(char *why, size_t why_len);

#endif
