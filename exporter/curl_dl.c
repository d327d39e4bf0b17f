/* SPDX-License-Identifier: Apache-2.0 */
#include "curl_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "log.h"

struct nl_curl_api nl_curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc = -1;

/* OpenSSL frees its locks in an atexit handler. An export thread that would
 * not stop at exit (a TLS handshake with a collector that does not answer)
 * may still hold one of them then. Asked before its first use, OpenSSL
 * registers no such handler; if the program initialised it already, this
 * changes nothing. The value is OPENSSL_INIT_NO_ATEXIT of <openssl/crypto.h>. */
#define NL_OPENSSL_INIT_NO_ATEXIT 0x00080000L

static void openssl_no_atexit(void)
{
	void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	int (*init)(uint64_t, const void *);
	*(void **)&init = dlsym(h, "OPENSSL_init_crypto");
	if (init)
		init(NL_OPENSSL_INIT_NO_ATEXIT, NULL);
}

static void load(void)
{
	openssl_no_atexit();
	/* RTLD_LOCAL: libcurl's symbols stay out of the global scope, so the
	 * program's own libcurl (if any) resolves exactly as it would without us. */
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		nl_warn_once("curl.dlopen", "cannot load libcurl (%s): metrics are not exported", dlerror());
		return;
	}
#define NL_CURL_RESOLVE(name)                                                                      \
	if (!(*(void **)&nl_curl.name = dlsym(h, "curl_" #name))) {                                \
		nl_warn_once("curl.dlsym", "libcurl lacks curl_" #name ": metrics are not exported"); \
		return;                                                                            \
	}
	NL_CURL_FUNCS(NL_CURL_RESOLVE)
#undef NL_CURL_RESOLVE
	CURLcode rc = nl_curl.global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK) {
		nl_warn_once("curl.init", "libcurl initialisation failed (%s): metrics are not exported",
			     nl_curl.easy_strerror(rc));
		return;
	}
	/* Never paired with curl_global_cleanup: the program may use libcurl too,
	 * and we cannot know when it is done with it. */
	load_rc = 0;
}

int nl_curl_load(void)
{
	pthread_once(&once, load);
	return load_rc;
}
