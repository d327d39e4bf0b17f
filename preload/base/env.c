/* SPDX-License-Identifier: Apache-2.0 */
#include "env.h"

#include <stdbool.h>
#include <stdlib.h>

#include "loadpath.h"

extern char **environ;

static struct nl_env_window *window NL_LOAD_STATE;   /* NULL: closed, or too many entries */

/* A name of the forms the shim reads; s may be a name or a NAME=value. */
NL_LOAD_PATH static bool wanted(const char *s)
{
	switch (s[0]) {
	case 'N':
		return s[1] == 'E' && s[2] == 'M' && s[3] == 'O';
	case 'O':
		return s[1] == 'T' && s[2] == 'E' && s[3] == 'L' && s[4] == '_';
	case 'X':
		return s[1] == 'D' && s[2] == 'G' && s[3] == '_';
	default:
		return false;
	}
}

NL_LOAD_PATH void nl_env_open(struct nl_env_window *w)
{
	w->n = 0;
	window = NULL;
	for (char **e = environ; e && *e; e++) {
		if (!wanted(*e))
			continue;
		if (w->n == NL_ENV_KEPT_MAX)
			return;   /* an unusual environment: getenv serves it */
		w->kept[w->n++] = *e;
	}
	window = w;
}

/* The value of entry ("NAME=value") if its NAME is name. By hand: strlen
 * and strncmp would be two more functions bound at load. */
NL_LOAD_PATH static const char *value_if_named(const char *entry, const char *name)
{
	while (*name && *entry == *name)
		entry++, name++;
	return !*name && *entry == '=' ? entry + 1 : NULL;
}

/* getenv() by hand, for the same reason: a process under a shim ancestor
 * asks for a name or two after the window closes, and getenv would be bound
 * and its page of libc faulted in for them. */
NL_LOAD_PATH static const char *find(const char *name)
{
	if (!*name)
		return NULL;   /* as getenv: an entry "=value" is no variable */
	for (char **e = environ; e && *e; e++) {
		const char *v = value_if_named(*e, name);
		if (v)
			return v;
	}
	return NULL;
}

NL_LOAD_PATH const char *nl_env_get(const char *name)
{
	const struct nl_env_window *w = window;
	if (!w || !wanted(name))
		return find(name);
	/* In the environment's order: the first of duplicates wins, as in getenv. */
	for (int i = 0; i < w->n; i++) {
		const char *v = value_if_named(w->kept[i], name);
		if (v)
			return v;
	}
	return NULL;
}

NL_LOAD_PATH void nl_env_close(void) { window = NULL; }
