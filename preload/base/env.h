/* SPDX-License-Identifier: Apache-2.0 */
/* getenv for the shim's own variables while it loads.
 *
 * getenv compares the name it is given with each entry of the environment
 * in turn. The shim asks for some forty names at load, nearly all of them
 * unset, so every process under it would walk its whole environment forty
 * times: some twenty thousand instructions for an ordinary environment of
 * forty variables, before the program's main. Instead nl_env_open() walks
 * it once and keeps the entries whose names the shim can ask for (NEMO...,
 * OTEL_..., XDG_...); nl_env_get() then looks only among those, usually a
 * handful. An environment with more of them than the window holds is
 * walked as getenv would walk it.
 *
 * Between nl_env_open() and nl_env_close() the environment must not change:
 * the load path calls them around its reading of the configuration, before
 * it sets any variable itself. Outside that window, and for names of other
 * forms, nl_env_get() is getenv() (with getenv's rule: no thread may change
 * the environment meanwhile).
 */
#ifndef NL_ENV_H
#define NL_ENV_H

/* The entries kept, on the caller's stack: a table in the shim's data
 * would take a page that nothing else at load writes. */
#define NL_ENV_KEPT_MAX 32
struct nl_env_window {
	const char *kept[NL_ENV_KEPT_MAX];
	int n;
};

void nl_env_open(struct nl_env_window *w);   /* w must live until nl_env_close() */
const char *nl_env_get(const char *name);
void nl_env_close(void);

#endif
