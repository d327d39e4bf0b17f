/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run --print-config (printconfig.c). */
#ifndef NL_PRINTCONFIG_H
#define NL_PRINTCONFIG_H

/* Prints the configuration the shim will read in program (NULL: none named),
 * and its warnings; runs nothing. Returns the exit status: 0, or
 * EXIT_LAUNCHER when stdout could not be written. */
int print_config(const char *program);

#endif
