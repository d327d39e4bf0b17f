/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of nemolens-run share. */
#ifndef NL_LAUNCHER_H
#define NL_LAUNCHER_H

/* The launcher's name, first in each of its messages. */
extern const char *const progname;

#endif
