/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl, loaded on first use.
 *
 * Linking libcurl would map it and its ~30 dependencies (TLS, SSH, LDAP,
 * Kerberos...) into every process the shim is preloaded into, about 5 ms at
 * each exec even for `true`. Most processes under LD_PRELOAD (a shell's
 * children) never export anything, so libcurl is opened with dlopen the first
 * time a transport is created, and called through this table.
 */
#ifndef NL_CURL_DL_H
#define NL_CURL_DL_H

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#define NL_CURL_FUNCS(X)          \
	X(global_init)            \
	X(easy_init)              \
	X(easy_cleanup)           \
	X(easy_setopt)            \
	X(easy_getinfo)           \
	X(easy_strerror)          \
	X(getdate)                \
	X(multi_init)             \
	X(multi_cleanup)          \
	X(multi_add_handle)       \
	X(multi_remove_handle)    \
	X(multi_perform)          \
	X(multi_poll)             \
	X(multi_info_read)        \
	X(multi_strerror)         \
	X(slist_append)           \
	X(slist_free_all)         \
	X(version_info)

struct nl_curl_api {
#define NL_CURL_MEMBER(name) __typeof__(curl_##name) *name;
	NL_CURL_FUNCS(NL_CURL_MEMBER)
#undef NL_CURL_MEMBER
};

extern struct nl_curl_api nl_curl;

/* Opens libcurl and runs curl_global_init once per process. Returns 0, or -1
 * (with one warning) when libcurl cannot be used. Thread-safe. */
int nl_curl_load(void);

#endif
