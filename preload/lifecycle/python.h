/* SPDX-License-Identifier: Apache-2.0 */
/* Delivery of the Python adapter (preload/python; docs/python-adapter.md).
 *
 * In a process that is a CPython interpreter, the constructor puts the
 * adapter's directory first on PYTHONPATH before Python reads it, and keeps
 * the program's own PYTHONPATH (set, empty or unset) in
 * NL_ENV_PYTHON_SAVED. The adapter's start-up hook (sitecustomize.py there)
 * puts both back before the program's code runs, so the program and its
 * children see what they would have seen without the shim; each child's
 * own constructor does the same again.
 *
 * Nothing is changed in a process that is not Python, in Python started
 * with -I, -E or -S (it would not read PYTHONPATH or run site, and so never
 * take the change back), or with NEMOLENS_PYTHON=off; there a PYTHONPATH
 * left changed by an ancestor whose hook never ran is put back as well.
 */
#ifndef NL_PYTHON_H
#define NL_PYTHON_H

#include <stdbool.h>
#include <stddef.h>

#define NL_ENV_PYTHON_SAVED "NEMOLENS_PYTHON_SAVED_PATH"

/* Called once by the preload's constructor, after the runtime was loaded. */
void nl_python_setup(void);

/* Whether a CPython command line (NUL-separated arguments, argv[0] first,
 * len bytes) asks for an interpreter that ignores PYTHONPATH or site:
 * -I, -E or -S among the options before the script, -c or -m. */
bool nl_python_argv_isolated(const char *args, size_t len);

#endif
