#include "env.h"

#include <stdbool.h>
#include <stdlib.h>

#include "loadpath.h"

extern char **environ;

#define MAX_KEPT 64

static const char *kept[MAX_KEPT] NL_LOAD_STATE;
static int n_kept NL_LOAD_STATE = -1;   /* -1: closed, or more than MAX_KEPT were wanted */

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

NL_LOAD_PATH void nl_env_open(void)
{
	int n = 0;
	for (char **e = environ; e && *e; e++) {
		if (!wanted(*e))
			continue;
		if (n == MAX_KEPT) {
			n_kept = -1;   /* an unusual environment: getenv serves it */
			return;
		}
		kept[n++] = *e;
	}
	n_kept = n;
}

/* The value of entry ("NAME=value") if its NAME is name. By hand: strlen
 * and strncmp would be two more functions bound at load. */
NL_LOAD_PATH static const char *value_if_named(const char *entry, const char *name)
{
	while (*name && *entry == *name)
		entry++, name++;
	return !*name && *entry == '=' ? entry + 1 : NULL;
}

NL_LOAD_PATH const char *nl_env_get(const char *name)
{
	if (n_kept < 0 || !wanted(name))
		return getenv(name);
	/* In the environment's order: the first of duplicates wins, as in getenv. */
	for (int i = 0; i < n_kept; i++) {
		const char *v = value_if_named(kept[i], name);
		if (v)
			return v;
	}
	return NULL;
}

NL_LOAD_PATH void nl_env_close(void) { n_kept = -1; }
