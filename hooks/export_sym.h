/* SPDX-License-Identifier: Apache-2.0 */
#ifndef NL_EXPORT_SYM_H
#define NL_EXPORT_SYM_H
/* Interposed libc functions and the public API are the only symbols the .so
 * exports (see preload/exports.map); everything else is hidden. The hooks
 * sit with the load path, where every process has them mapped already
 * (loadpath.h). */
#include "loadpath.h"

#define NL_EXPORT __attribute__((visibility("default"))) NL_ENTRY_PATH
/* Hooks of functions that programs call rarely (NL_REAL_FUNCS_COLD): with
 * the rest of the code, out of the load path's pages. */
#define NL_EXPORT_COLD __attribute__((visibility("default")))
#endif
