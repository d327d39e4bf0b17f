/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of nemolens-run share. */
#ifndef NL_LAUNCHER_H
#define NL_LAUNCHER_H

#ifndef NL_VERSION
#define NL_VERSION "unknown"
#endif

/* The launcher's name, first in each of its messages. */
extern const char *const progname;

/* The exit status when nemolens-run fails itself (no shim, no fork), as
 * env(1) and timeout(1) do. */
#define EXIT_LAUNCHER 125

#endif
