/* SPDX-License-Identifier: Apache-2.0 */
/* OTLP/HTTP and OTLP/gRPC transport over libcurl.
 *
 * We run inside someone else's process, so the transport must never raise a
 * signal (CURLOPT_NOSIGNAL), never block past the caller's deadline, and must
 * stop promptly when asked to. The transfer is driven through a private multi
 * handle polled in short slices instead of curl_easy_perform: the latter only
 * looks at the abort flag (through the progress callback) about once a second
 * while a server is silent. The multi handle also owns the connection cache,
 * so keeping it for the transport's lifetime gives HTTP keep-alive.
 *
 * OTLP/gRPC is the same POST over HTTP/2 (with prior knowledge on http://,
 * negotiated by ALPN on https://): the body framed as one gRPC message, the
 * outcome read from grpc-status in the trailers rather than from the HTTP
 * status, which libcurl hands to the header callback as it does headers.
 *
 * A transport is used by one thread at a time; several transports may live in
 * different threads. The globals are the curl_global_init once and the
 * library lock below, which makes fork() safe without waiting on a
 * collector.
 */
#include "export.h"

#include "curl_dl.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "clock.h"
#include "log.h"
#include "response.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"

#ifndef NL_VERSION
#define NL_VERSION "unknown"
#endif

#define RESPONSE_MAX (64u * 1024u)      /* bytes of a response body kept */
#define BACKOFF_START_MS 100u
#define BACKOFF_MAX_MS 5000u
#define SLICE_MS 10                     /* abort-flag polling period */
#define NS_PER_MS 1000000u

struct response {
	char *data;
	size_t len, cap;
	long retry_after_ms;            /* -1: no usable Retry-After header (gRPC: RetryInfo) */
	int grpc_status;                /* -1: no grpc-status seen */
	char grpc_message[200];         /* grpc-message, printable */
};

/* The gRPC status codes, by number, for messages. */
static const char *const grpc_code_names[] = {
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};
#define GRPC_UNKNOWN 2
#define GRPC_RESOURCE_EXHAUSTED 8
#define GRPC_INTERNAL 13
#define GRPC_UNAVAILABLE 14

struct nl_transport {
	CURL *easy;
	CURLM *multi;
	struct curl_slist *headers;       /* body sent as is */
	struct curl_slist *headers_gzip;  /* the same plus Content-Encoding: gzip */
	bool gzip;
	bool grpc;                        /* OTLP/gRPC rather than OTLP/HTTP */
	bool reuse_h2c;                   /* cleartext HTTP/2 kept by asking plainly (configure_easy) */
	bool h2c_open;                    /* ... and the last transfer left such a connection */
	long timeout_ms;
	char *endpoint;                   /* the URL without credentials, for messages */
	uint64_t rng;
	const _Atomic bool *abort;        /* of the send in progress */
	uint64_t not_before_ns;           /* a Retry-After that outlived the last send */
	bool final;                       /* the exit flush: this process sends nothing again */
	bool kept;                        /* ... but what fails is kept for another process */
	long wait_ms;                     /* > 0: a send waits at most this long (nl_transport_set_wait) */
	struct response resp;
	char errbuf[CURL_ERROR_SIZE];
};

/* What one attempt (or the retry loop) concluded. */
enum outcome { OUT_OK, OUT_RETRY, OUT_GIVE_UP, OUT_REJECTED, OUT_ABORTED };

static bool is_aborted(const _Atomic bool *abort) { return abort && atomic_load(abort); }

/* ---- Fork ---------------------------------------------------------------- */

/* Every call into libcurl (and through it into the TLS library, zlib and the
 * allocator) runs under `library`; it is released only while a transfer
 * waits on the network and while a backoff sleeps, when no library lock is
 * held. A fork takes it first, for a bounded time (nl_transport_fork_prepare),
 * so a child never inherits a lock that one of those libraries held midway
 * through a call, and a fork never waits on a collector: a send stuck on a
 * silent collector spends its time waiting, not under the lock.
 *
 * The one-time set-up (dlopen of libcurl, curl_global_init and the TLS
 * library's initialisation, run-once guards a child could never pass again)
 * may take a few milliseconds of CPU, once per process; a fork then waits
 * for it longer, still bounded. A child forked while the lock could not be
 * had never uses a transport: what it records stays in its segment for
 * another process to deliver. */
#define FORK_WAIT_US 300
#define FORK_INIT_WAIT_MS 50

static pthread_mutex_t library = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool initialising;       /* the one-time set-up runs */
static bool held_for_fork;              /* nl_transport_fork_prepare got the lock */
static bool unusable;                   /* forked while a library call ran: no transport, ever */

static void enter(void) { pthread_mutex_lock(&library); }
static void leave(void) { pthread_mutex_unlock(&library); }

static struct timespec realtime_in_ns(long ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += ns;
	while (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void nl_transport_fork_prepare(void)
{
	struct timespec ts = realtime_in_ns(FORK_WAIT_US * 1000L);
	int rc = pthread_mutex_timedlock(&library, &ts);
	if (rc == ETIMEDOUT && atomic_load(&initialising)) {
		ts = realtime_in_ns(FORK_INIT_WAIT_MS * 1000000L);
		rc = pthread_mutex_timedlock(&library, &ts);
	}
	held_for_fork = rc == 0;
}

void nl_transport_fork_parent(void)
{
	if (held_for_fork)
		leave();
	held_for_fork = false;
}

void nl_transport_fork_child(void)
{
	/* Without the lock, another thread of the parent was inside a library
	 * call: its locks may be held in this child for ever. The mutex itself
	 * belongs to that thread and is never touched again here. */
	if (held_for_fork)
		leave();
	else
		unusable = true;
	held_for_fork = false;
}

/* ---- Small helpers ------------------------------------------------------- */

/* xorshift64: jitter only needs to decorrelate processes, and rand() would
 * disturb the host program's own sequence. */
static uint64_t next_random(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static uint64_t seed_random(const void *salt)
{
	uint64_t s = nl_realtime_ns() ^ (nl_monotonic_ns() << 17) ^ ((uint64_t)getpid() << 32) ^
		     (uint64_t)(uintptr_t)salt;
	return s ? s : 0x9E3779B97F4A7C15u;
}

/* "Equal jitter": between half and all of the nominal backoff, so retries from
 * many processes spread out yet each still waits a meaningful time. */
static uint64_t jittered_ms(struct nl_transport *t, uint64_t backoff_ms)
{
	uint64_t half = backoff_ms / 2;
	return half + next_random(&t->rng) % (backoff_ms - half + 1);
}

/* The URL minus user:password@ and the query, which may carry secrets. */
static char *redact_url(const char *url)
{
	const char *sep = strstr(url, "://");
	const char *auth = sep ? sep + 3 : url;
	size_t auth_len = strcspn(auth, "/?#");
	const char *host = auth;
	for (size_t i = 0; i < auth_len; i++)
		if (auth[i] == '@')
			host = auth + i + 1;
	size_t prefix = (size_t)(auth - url), rest = strcspn(host, "?#");
	char *out = malloc(prefix + rest + 1);
	if (!out)
		return NULL;
	memcpy(out, url, prefix);
	memcpy(out + prefix, host, rest);
	out[prefix + rest] = '\0';
	return out;
}

/* ---- curl callbacks ------------------------------------------------------ */

/* Keeps at most RESPONSE_MAX bytes but always reports everything consumed: a
 * large or unstorable body must not turn an accepted export into a failure. */
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct response *r = userdata;
	size_t n = size * nmemb;
	size_t take = n < RESPONSE_MAX - r->len ? n : RESPONSE_MAX - r->len;
	if (take > r->cap - r->len) {
		size_t cap = r->cap ? r->cap : 1024;
		while (cap - r->len < take)
			cap *= 2;
		if (cap > RESPONSE_MAX)
			cap = RESPONSE_MAX;
		char *data = realloc(r->data, cap);
		if (!data)
			return n;
		r->data = data;
		r->cap = cap;
	}
	memcpy(r->data + r->len, ptr, take);
	r->len += take;
	return n;
}

/* The value of the header line buf[0..n) when it is name's (name with its
 * colon), trimmed; NULL otherwise. */
static const char *header_value(const char *buf, size_t n, const char *name, size_t *len)
{
	size_t k = strlen(name);
	if (n < k || strncasecmp(buf, name, k) != 0)
		return NULL;
	const char *v = buf + k, *end = buf + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*len = (size_t)(end - v);
	return v;
}

/* grpc-status is a decimal code; anything else is treated as UNKNOWN, as
 * gRPC clients do. */
static int parse_grpc_status(const char *v, size_t n)
{
	int code = 0;
	if (n == 0 || n > 3)
		return GRPC_UNKNOWN;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return GRPC_UNKNOWN;
		code = code * 10 + (v[i] - '0');
	}
	return code;
}

/* Also called with the trailers, where gRPC's outcome is. */
static size_t on_header(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct response *r = userdata;
	size_t n = size * nitems, len;
	const char *v;
	if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		/* a new response (after a 100 Continue, say) */
		r->retry_after_ms = -1;
		r->grpc_status = -1;
		r->grpc_message[0] = '\0';
	} else if ((v = header_value(buf, n, "Retry-After:", &len))) {
		r->retry_after_ms = nl_parse_retry_after(v, len);
	} else if ((v = header_value(buf, n, "grpc-status:", &len))) {
		r->grpc_status = parse_grpc_status(v, len);
	} else if ((v = header_value(buf, n, "grpc-message:", &len))) {
		nl_grpc_message(v, len, r->grpc_message, sizeof r->grpc_message);
	} else if ((v = header_value(buf, n, "grpc-status-details-bin:", &len))) {
		uint8_t status[1024];
		size_t status_len;
		if (nl_base64_decode(v, len, status, sizeof status, &status_len))
			r->retry_after_ms = nl_grpc_retry_delay_ms(status, status_len);
	}
	return n;
}

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	const struct nl_transport *t = userdata;
	return is_aborted(t->abort);  /* non-zero makes curl stop the transfer */
}

/* ---- Setup --------------------------------------------------------------- */

static bool header_name_ok(const char *name)
{
	if (!name || !*name)
		return false;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p <= 0x20 || *p >= 0x7F || *p == ':' || *p == ';')
			return false;
	return true;
}

/* Headers describing our body are ours to set; a duplicate would make the
 * request ambiguous. */
static bool header_reserved(const char *name, bool grpc)
{
	if (grpc && (!strcasecmp(name, "TE") || !strncasecmp(name, "grpc-", 5)))
		return true;
	return !strcasecmp(name, "Content-Type") || !strcasecmp(name, "Content-Encoding") ||
	       !strcasecmp(name, "Content-Length");
}

/* Appends "name: value" to *list; false on OOM (the list stays as it was). */
static bool append_header(struct curl_slist **list, const char *name, const char *value)
{
	size_t len = strlen(name) + strlen(value) + 3;
	char *line = malloc(len);
	if (!line)
		return false;
	/* curl drops a header written "Name:" without value; "Name;" sends it empty. */
	if (*value)
		snprintf(line, len, "%s: %s", name, value);
	else
		snprintf(line, len, "%s;", name);
	struct curl_slist *l = nl_curl.slist_append(*list, line);
	free(line);
	if (!l)
		return false;
	*list = l;
	return true;
}

static bool append_user_headers(struct curl_slist **list, const struct nl_transport_config *cfg)
{
	for (size_t i = 0; cfg->headers && i < cfg->n_headers; i++) {
		const char *name = cfg->headers[i].name, *value = cfg->headers[i].value;
		if (!value)
			value = "";
		if (!header_name_ok(name) || strpbrk(value, "\r\n")) {
			nl_warn_once("otlp.header.invalid", "ignoring an invalid OTLP header%s%s",
				     header_name_ok(name) ? " " : "", header_name_ok(name) ? name : "");
			continue;
		}
		if (header_reserved(name, cfg->grpc)) {
			nl_warn_once("otlp.header.reserved", "ignoring OTLP header %s: the exporter sets it",
				     name);
			continue;
		}
		if (!append_header(list, name, value))
			return false;
	}
	return true;
}

static struct curl_slist *build_headers(const struct nl_transport_config *cfg, bool gzip)
{
	struct curl_slist *list = NULL;
	/* "Expect:" stops curl from sending Expect: 100-continue for larger bodies
	 * and then waiting up to a second for a go-ahead many servers never send. */
	bool ok;
	if (cfg->grpc)
		/* TE: trailers is how a gRPC server knows the client reads them. */
		ok = append_header(&list, "Content-Type", "application/grpc") &&
		     append_header(&list, "TE", "trailers") && (!gzip || append_header(&list, "grpc-encoding", "gzip"));
	else
		ok = append_header(&list, "Content-Type", "application/x-protobuf") &&
		     (!gzip || append_header(&list, "Content-Encoding", "gzip"));
	if (ok) {
		struct curl_slist *l = nl_curl.slist_append(list, "Expect:");
		ok = l != NULL;
		list = l ? l : list;
	}
	if (ok)
		ok = append_user_headers(&list, cfg);
	if (!ok) {
		nl_curl.slist_free_all(list);
		return NULL;
	}
	return list;
}

static CURLcode configure_easy(struct nl_transport *t, const struct nl_transport_config *cfg)
{
	CURL *e = t->easy;
	const char *ua = cfg->user_agent && *cfg->user_agent ? cfg->user_agent : "nemolens-preload/" NL_VERSION;
	CURLcode rc = CURLE_OK;
#define SET(opt, val) \
	if (rc == CURLE_OK) \
	rc = nl_curl.easy_setopt(e, opt, val)
	SET(CURLOPT_ERRORBUFFER, t->errbuf);
	SET(CURLOPT_URL, cfg->url);
	SET(CURLOPT_NOSIGNAL, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
#else
	SET(CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	SET(CURLOPT_POST, 1L);
	/* gRPC needs HTTP/2: on http:// straight away, on https:// by ALPN. */
	if (cfg->grpc)
		SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
	/* libcurl before 8.0 breaks a cleartext HTTP/2 connection it reuses
	 * with prior knowledge (an error in the framing layer on the second
	 * request), yet reuses it well when asked for HTTP/2 plainly: attempt
	 * switches between the two (reuse_h2c). */
	t->reuse_h2c = cfg->grpc && strncasecmp(cfg->url, "http://", 7) == 0 &&
		       nl_curl.version_info(CURLVERSION_NOW)->version_num < 0x080000;
	SET(CURLOPT_USERAGENT, ua);
	SET(CURLOPT_HTTPHEADER, t->headers);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, &t->resp);
	SET(CURLOPT_HEADERFUNCTION, on_header);
	SET(CURLOPT_HEADERDATA, &t->resp);
	SET(CURLOPT_NOPROGRESS, 0L);
	SET(CURLOPT_XFERINFOFUNCTION, on_progress);
	SET(CURLOPT_XFERINFODATA, t);
	if (cfg->ca_file && *cfg->ca_file)
		SET(CURLOPT_CAINFO, cfg->ca_file);
	if (cfg->client_key && *cfg->client_key)
		SET(CURLOPT_SSLKEY, cfg->client_key);
	if (cfg->client_cert && *cfg->client_cert)
		SET(CURLOPT_SSLCERT, cfg->client_cert);
#undef SET
	return rc;
}

struct nl_transport *nl_transport_new(const struct nl_transport_config *cfg)
{
	if (!cfg || !cfg->url || !*cfg->url) {
		nl_warn_once("otlp.no_endpoint", "no OTLP endpoint configured: metrics are not exported");
		return NULL;
	}
	if (unusable) {
		nl_debug("forked while the exporter was in a library call: this process leaves its values "
			 "to another process to deliver");
		return NULL;
	}
	enter();
	atomic_store(&initialising, true);
	int loaded = nl_curl_load();
	atomic_store(&initialising, false);
	if (loaded != 0) {
		leave();
		return NULL;
	}
	if (cfg->grpc && !(nl_curl.version_info(CURLVERSION_NOW)->features & CURL_VERSION_HTTP2)) {
		nl_warn_once("otlp.grpc.nohttp2", "this libcurl has no HTTP/2, which OTLP/gRPC needs: metrics are "
			     "not exported (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf works with it)");
		leave();
		return NULL;
	}
	struct nl_transport *t = calloc(1, sizeof *t);
	if (!t)
		goto oom;
	t->gzip = cfg->gzip;
	t->grpc = cfg->grpc;
	t->timeout_ms = cfg->timeout_ms;
	t->rng = seed_random(t);
	t->resp.retry_after_ms = -1;
	t->resp.grpc_status = -1;
	t->endpoint = redact_url(cfg->url);
	t->easy = nl_curl.easy_init();
	t->multi = nl_curl.multi_init();
	t->headers = build_headers(cfg, false);
	if (cfg->gzip)
		t->headers_gzip = build_headers(cfg, true);
	if (!t->endpoint || !t->easy || !t->multi || !t->headers || (cfg->gzip && !t->headers_gzip))
		goto oom;
	CURLcode rc = configure_easy(t, cfg);
	if (rc != CURLE_OK) {
		nl_warn_once("otlp.setup", "cannot set up the OTLP exporter for %s: %s", t->endpoint,
			     nl_curl.easy_strerror(rc));
		leave();
		nl_transport_free(t);
		return NULL;
	}
	leave();
	return t;
oom:
	nl_warn_once("otlp.oom", "out of memory setting up the OTLP exporter: metrics are not exported");
	leave();
	nl_transport_free(t);
	return NULL;
}

void nl_transport_set_wait(struct nl_transport *t, long ms)
{
	if (t)
		t->wait_ms = ms;
}

void nl_transport_set_final(struct nl_transport *t, bool final, bool kept)
{
	if (t) {
		t->final = final;
		t->kept = final && kept;
	}
}

/* What becomes of the values when the exit flush fails. */
static const char *fate(const struct nl_transport *t)
{
	return t->kept ? "they are kept, for the next shim process to deliver" : "they are lost";
}

void nl_transport_free(struct nl_transport *t)
{
	if (!t)
		return;
	enter();
	if (t->easy)
		nl_curl.easy_cleanup(t->easy);
	if (t->multi)
		nl_curl.multi_cleanup(t->multi);  /* closes the kept-alive connection */
	nl_curl.slist_free_all(t->headers);
	nl_curl.slist_free_all(t->headers_gzip);
	leave();
	free(t->resp.data);
	free(t->endpoint);
	free(t);
}

/* ---- Body ---------------------------------------------------------------- */

/* gzip (not raw deflate or zlib) framing is what Content-Encoding: gzip means:
 * windowBits 15 + 16 asks zlib for the gzip header and trailer. */
static int gzip_compress(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	if (len > UINT_MAX)
		return -1;
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	uLong bound = deflateBound(&zs, (uLong)len);
	uint8_t *buf = bound <= UINT_MAX ? malloc(bound) : NULL;
	int rc = -1;
	if (buf) {
		zs.next_in = (Bytef *)in;
		zs.avail_in = (uInt)len;
		zs.next_out = buf;
		zs.avail_out = (uInt)bound;
		if (deflate(&zs, Z_FINISH) == Z_STREAM_END) {
			*out = buf;
			*out_len = zs.total_out;
			buf = NULL;
			rc = 0;
		}
	}
	deflateEnd(&zs);
	free(buf);
	return rc;
}

/* A gRPC message: a flag byte (compressed or not), its length in 32 bits
 * big-endian, the message. Replaces *owned (freed) with the framed copy. */
#define GRPC_PREFIX 5
static int grpc_frame(const uint8_t *data, size_t len, bool compressed, uint8_t **owned)
{
	if (len > UINT32_MAX)
		return -1;
	uint8_t *framed = malloc(GRPC_PREFIX + len);
	if (!framed)
		return -1;
	framed[0] = compressed;
	for (int i = 0; i < 4; i++)
		framed[1 + i] = (uint8_t)(len >> (24 - 8 * i));
	if (len)
		memcpy(framed + GRPC_PREFIX, data, len);
	free(*owned);
	*owned = framed;
	return 0;
}

/* Points curl at the body to send, compressed when configured (OTLP/HTTP:
 * the HTTP body, gzip Content-Encoding; gRPC: the message, grpc-encoding)
 * and framed for gRPC. *owned gets the buffer to free after the send, if
 * one was allocated. */
static CURLcode set_body(struct nl_transport *t, const uint8_t *body, size_t len, uint8_t **owned)
{
	*owned = NULL;
	const uint8_t *data = body ? body : (const uint8_t *)"";
	struct curl_slist *headers = t->headers;
	size_t gz_len;
	if (t->gzip && len > 0) {
		if (gzip_compress(body, len, owned, &gz_len) == 0) {
			data = *owned;
			len = gz_len;
			headers = t->headers_gzip;
		} else {
			nl_warn_once("otlp.gzip", "gzip compression failed: sending the export uncompressed");
		}
	}
	if (t->grpc) {
		if (grpc_frame(data, len, headers == t->headers_gzip, owned) != 0)
			return CURLE_OUT_OF_MEMORY;
		data = *owned;
		len += GRPC_PREFIX;
	}
	CURLcode rc = nl_curl.easy_setopt(t->easy, CURLOPT_HTTPHEADER, headers);
	if (rc == CURLE_OK)
		rc = nl_curl.easy_setopt(t->easy, CURLOPT_POSTFIELDS, (const char *)data);
	if (rc == CURLE_OK)
		rc = nl_curl.easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	return rc;
}

/* ---- One attempt --------------------------------------------------------- */

/* Runs the transfer, checking the abort flag every SLICE_MS. Returns the
 * transfer's result; CURLE_ABORTED_BY_CALLBACK when aborted. */
static CURLcode run_transfer(struct nl_transport *t)
{
	CURLMcode mc = nl_curl.multi_add_handle(t->multi, t->easy);
	if (mc != CURLM_OK) {
		nl_warn_once("otlp.curlm", "libcurl: %s", nl_curl.multi_strerror(mc));
		return CURLE_FAILED_INIT;
	}
	CURLcode rc = CURLE_FAILED_INIT;
	int running = 1;
	while (running) {
		mc = nl_curl.multi_perform(t->multi, &running);
		if (mc == CURLM_OK && running && is_aborted(t->abort))
			rc = CURLE_ABORTED_BY_CALLBACK;
		else if (mc == CURLM_OK && running) {
			/* Waiting on the network holds no library lock: a fork
			 * may happen meanwhile (the top of this file). */
			leave();
			mc = nl_curl.multi_poll(t->multi, NULL, 0, SLICE_MS, NULL);
			enter();
		}
		if (mc != CURLM_OK || rc == CURLE_ABORTED_BY_CALLBACK)
			break;
	}
	if (mc != CURLM_OK)
		nl_warn_once("otlp.curlm", "libcurl: %s", nl_curl.multi_strerror(mc));
	CURLMsg *msg;
	int queued;
	while (!running && (msg = nl_curl.multi_info_read(t->multi, &queued)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == t->easy)
			rc = msg->data.result;
	nl_curl.multi_remove_handle(t->multi, t->easy);
	return rc;
}

/* Before a transfer: nothing of the last answer is left. */
static void reset_response(struct nl_transport *t)
{
	t->resp.len = 0;
	t->resp.retry_after_ms = -1;
	t->resp.grpc_status = -1;
	t->resp.grpc_message[0] = '\0';
	t->errbuf[0] = '\0';
}

/* Whether the transfer just made got its answer over HTTP/2. */
static bool answered_in_h2(struct nl_transport *t)
{
	long version = 0;
	return nl_curl.easy_getinfo(t->easy, CURLINFO_HTTP_VERSION, &version) == CURLE_OK &&
	       version == CURL_HTTP_VERSION_2_0;
}

/* run_transfer, for a transport that keeps a cleartext HTTP/2 connection
 * on a libcurl that cannot reuse one it opened with prior knowledge (see
 * configure_easy): a new connection starts with prior knowledge, and the
 * next transfer asks for HTTP/2 plainly, which reuses it. Asked plainly,
 * a connection the server closed meanwhile would be opened anew as
 * HTTP/1.1 with an upgrade, which a gRPC server refuses: then the transfer
 * is made again at once, with prior knowledge, on a new connection. */
static CURLcode run_h2c_transfer(struct nl_transport *t)
{
	if (!t->reuse_h2c)
		return run_transfer(t);
	bool reused = t->h2c_open;
	nl_curl.easy_setopt(t->easy, CURLOPT_HTTP_VERSION,
			    (long)(reused ? CURL_HTTP_VERSION_2_0 : CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
	CURLcode rc = run_transfer(t);
	if (reused && !(rc == CURLE_ABORTED_BY_CALLBACK && is_aborted(t->abort)) &&
	    (rc != CURLE_OK || !answered_in_h2(t))) {
		reset_response(t);
		nl_curl.easy_setopt(t->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
		rc = run_transfer(t);
	}
	t->h2c_open = rc == CURLE_OK && answered_in_h2(t);
	return rc;
}

/* Errors that another attempt with the same configuration cannot fix: give up
 * on this export at once (the data is kept) instead of spinning to the deadline. */
static bool curl_error_permanent(CURLcode rc)
{
	switch (rc) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_NOT_BUILT_IN:
	case CURLE_FAILED_INIT:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_PEER_FAILED_VERIFICATION:
		return true;
	default:
		return false;
	}
}

static enum outcome transport_failure(struct nl_transport *t, CURLcode rc)
{
	char key[32];
	snprintf(key, sizeof key, "otlp.curl.%d", (int)rc);
	size_t n = strlen(t->errbuf);
	while (n && (t->errbuf[n - 1] == '\n' || t->errbuf[n - 1] == '\r'))
		t->errbuf[--n] = '\0';
	bool permanent = curl_error_permanent(rc);
	if (t->final) {
		snprintf(key, sizeof key, "otlp.exit.curl.%d", (int)rc);
		nl_warn_once(key, "exit: could not deliver this process's metrics to %s: %s (curl error %d); %s",
			     t->endpoint, n ? t->errbuf : nl_curl.easy_strerror(rc), (int)rc, fate(t));
		return OUT_GIVE_UP;
	}
	nl_warn_once(key, "cannot send metrics to %s: %s (curl error %d)%s", t->endpoint,
		     n ? t->errbuf : nl_curl.easy_strerror(rc), (int)rc,
		     permanent ? "; check the exporter configuration" : "; they are sent again at the next export");
	return permanent ? OUT_GIVE_UP : OUT_RETRY;
}

/* A 2xx body may carry partial_success; anything unparseable is still success,
 * since the status code is what the spec makes authoritative. */
static void check_partial_success(struct nl_transport *t)
{
	if (t->resp.len == 0)
		return;
	Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceResponse *r =
		opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__unpack(
			NULL, t->resp.len, (const uint8_t *)t->resp.data);
	if (!r) {
		nl_debug("%s: the 2xx response body (%zu bytes) is not an ExportMetricsServiceResponse; ignored",
			 t->endpoint, t->resp.len);
		return;
	}
	const Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsPartialSuccess *ps = r->partial_success;
	if (ps && (ps->rejected_data_points > 0 || (ps->error_message && *ps->error_message))) {
		char msg[200];
		nl_printable_summary(ps->error_message ? ps->error_message : "",
				  ps->error_message ? strlen(ps->error_message) : 0, msg, sizeof msg);
		nl_warn_once("otlp.partial_success", "%s accepted metrics partially: %lld data points rejected%s%s",
			     t->endpoint, (long long)ps->rejected_data_points, *msg ? ": " : "", msg);
	}
	opentelemetry__proto__collector__metrics__v1__export_metrics_service_response__free_unpacked(r, NULL);
}

/* What the server said about an error: the google.rpc.Status message when the
 * body is one, else the body's printable text (some proxies answer in HTML). */
static void error_summary(const struct response *r, char *out, size_t out_size)
{
	const char *msg;
	size_t msg_len;
	out[0] = '\0';
	if (r->len == 0)
		return;
	if (nl_rpc_status_message((const uint8_t *)r->data, r->len, &msg, &msg_len))
		nl_printable_summary(msg, msg_len, out, out_size);
	else
		nl_printable_summary(r->data, r->len, out, out_size);
}

static bool status_retryable(long status)
{
	return status == 429 || status == 502 || status == 503 || status == 504;
}

static enum outcome http_status(struct nl_transport *t, long status)
{
	if (status >= 200 && status < 300) {
		check_partial_success(t);
		return OUT_OK;
	}
	char key[32], why[200];
	snprintf(key, sizeof key, "otlp.http.%ld", status);
	error_summary(&t->resp, why, sizeof why);
	if (status_retryable(status) && t->final) {
		snprintf(key, sizeof key, "otlp.exit.http.%ld", status);
		nl_warn_once(key, "exit: could not deliver this process's metrics to %s: HTTP %ld%s%s; %s",
			     t->endpoint, status, *why ? ": " : "", why, fate(t));
		return OUT_GIVE_UP;
	}
	if (status_retryable(status)) {
		nl_warn_once(key, "%s answered HTTP %ld%s%s; the metrics are sent again at the next export", t->endpoint,
			     status, *why ? ": " : "", why);
		return OUT_RETRY;
	}
	nl_warn_once(key, "%s rejected metrics with HTTP %ld%s%s; the data is dropped", t->endpoint, status,
		     *why ? ": " : "", why);
	return OUT_REJECTED;
}

/* The gRPC code an HTTP status means when no grpc-status came (gRPC's
 * mapping of HTTP to gRPC status codes). */
static int grpc_code_of_http(long status)
{
	switch (status) {
	case 400:
		return GRPC_INTERNAL;
	case 401:
		return 16;  /* UNAUTHENTICATED */
	case 403:
		return 7;   /* PERMISSION_DENIED */
	case 404:
		return 12;  /* UNIMPLEMENTED */
	case 429:
	case 502:
	case 503:
	case 504:
		return GRPC_UNAVAILABLE;
	default:
		return GRPC_UNKNOWN;
	}
}

/* The codes the OTLP specification retries; RESOURCE_EXHAUSTED only when
 * the server said when to come back (RetryInfo). */
static bool grpc_retryable(int code, bool retry_info)
{
	switch (code) {
	case 1:   /* CANCELLED */
	case 4:   /* DEADLINE_EXCEEDED */
	case 10:  /* ABORTED */
	case 11:  /* OUT_OF_RANGE */
	case GRPC_UNAVAILABLE:
	case 15:  /* DATA_LOSS */
		return true;
	case GRPC_RESOURCE_EXHAUSTED:
		return retry_info;
	default:
		return false;
	}
}

/* The answer's ExportMetricsServiceResponse is the body's one gRPC message. */
static void check_grpc_partial_success(struct nl_transport *t)
{
	const uint8_t *msg;
	size_t msg_len;
	bool compressed;
	if (t->resp.len == 0)
		return;
	if (!nl_grpc_unframe((const uint8_t *)t->resp.data, t->resp.len, &compressed, &msg, &msg_len) || compressed) {
		nl_debug("%s: the OK answer's body (%zu bytes) is not one uncompressed gRPC message; ignored",
			 t->endpoint, t->resp.len);
		return;
	}
	memmove(t->resp.data, msg, msg_len);
	t->resp.len = msg_len;
	check_partial_success(t);
}

static enum outcome grpc_status(struct nl_transport *t, long http)
{
	int code = t->resp.grpc_status;
	if (code < 0 && http == 200) {
		nl_warn_once("otlp.grpc.nostatus", "%s answered without a grpc-status: is it a gRPC server? The "
			     "data is dropped", t->endpoint);
		return OUT_REJECTED;
	}
	if (code < 0)
		code = grpc_code_of_http(http);
	if (code == 0) {
		check_grpc_partial_success(t);
		return OUT_OK;
	}
	char key[40], name[24];
	if (code < (int)(sizeof grpc_code_names / sizeof *grpc_code_names))
		snprintf(name, sizeof name, "%s", grpc_code_names[code]);
	else
		snprintf(name, sizeof name, "code %d", code);
	const char *why = t->resp.grpc_message;
	bool retry = grpc_retryable(code, t->resp.retry_after_ms >= 0);
	if (!retry)
		t->resp.retry_after_ms = -1;
	if (retry && t->final) {
		snprintf(key, sizeof key, "otlp.exit.grpc.%d", code);
		nl_warn_once(key, "exit: could not deliver this process's metrics to %s: gRPC %s%s%s; %s",
			     t->endpoint, name, *why ? ": " : "", why, fate(t));
		return OUT_GIVE_UP;
	}
	snprintf(key, sizeof key, "otlp.grpc.%d", code);
	if (retry) {
		nl_warn_once(key, "%s answered gRPC %s%s%s; the metrics are sent again at the next export",
			     t->endpoint, name, *why ? ": " : "", why);
		return OUT_RETRY;
	}
	nl_warn_once(key, "%s rejected metrics with gRPC %s%s%s; the data is dropped", t->endpoint, name,
		     *why ? ": " : "", why);
	return OUT_REJECTED;
}

static enum outcome attempt(struct nl_transport *t, uint64_t deadline_ns)
{
	uint64_t now = nl_monotonic_ns();
	if (now >= deadline_ns)
		return OUT_GIVE_UP;
	/* Round up: a 0 timeout would mean "no timeout" to curl. */
	long budget_ms = (long)((deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS);
	if (budget_ms < 1)
		budget_ms = 1;
	nl_curl.easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, budget_ms);
	nl_curl.easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, budget_ms);
	reset_response(t);

	CURLcode rc = run_h2c_transfer(t);
	if (rc == CURLE_ABORTED_BY_CALLBACK && is_aborted(t->abort))
		return OUT_ABORTED;
	if (rc != CURLE_OK)
		return transport_failure(t, rc);
	long status = 0;
	nl_curl.easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
	return t->grpc ? grpc_status(t, status) : http_status(t, status);
}

/* ---- Retry loop ---------------------------------------------------------- */

/* Sleeps until until_ns in SLICE_MS slices; true if aborted meanwhile. */
static bool sleep_until(uint64_t until_ns, const _Atomic bool *abort)
{
	for (;;) {
		if (is_aborted(abort))
			return true;
		uint64_t now = nl_monotonic_ns();
		if (now >= until_ns)
			return false;
		uint64_t step = until_ns - now;
		if (step > (uint64_t)SLICE_MS * NS_PER_MS)
			step = (uint64_t)SLICE_MS * NS_PER_MS;
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)step };
		nanosleep(&ts, NULL);  /* EINTR just ends the slice early */
	}
}

static enum outcome send_with_retries(struct nl_transport *t, uint64_t deadline_ns, uint64_t retry_until_ns)
{
	if (retry_until_ns > deadline_ns)
		retry_until_ns = deadline_ns;
	uint64_t backoff_ms = BACKOFF_START_MS;
	for (int attempts = 1;; attempts++) {
		enum outcome out = attempt(t, deadline_ns);
		if (out != OUT_RETRY)
			return out;
		/* Retry-After is a minimum wait; our own backoff still applies on top
		 * of a zero or tiny one so a server cannot make us spin. */
		uint64_t delay_ms = jittered_ms(t, backoff_ms);
		if (t->resp.retry_after_ms >= 0 && (uint64_t)t->resp.retry_after_ms > delay_ms)
			delay_ms = (uint64_t)t->resp.retry_after_ms;
		backoff_ms = backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
		/* A retry that could only start at or after the deadline is pointless:
		 * give up now rather than sleep until then. */
		uint64_t now = nl_monotonic_ns();
		if (now >= retry_until_ns || delay_ms * NS_PER_MS >= retry_until_ns - now) {
			/* The server's wish holds for the next send too. */
			if (t->resp.retry_after_ms > 0)
				t->not_before_ns = now + (uint64_t)t->resp.retry_after_ms * NS_PER_MS;
			/* The cause was reported once already; this is routine. */
			if (!t->final)
				nl_debug("giving up an export to %s after %d attempt(s); the data is kept for the next export",
					 t->endpoint, attempts);
			return OUT_GIVE_UP;
		}
		leave();
		bool aborted = sleep_until(now + delay_ms * NS_PER_MS, t->abort);
		enter();
		if (aborted)
			return OUT_ABORTED;
	}
}

/* The configured export timeout bounds the caller's deadline too. */
static uint64_t effective_deadline(const struct nl_transport *t, uint64_t deadline_ns, uint64_t now)
{
	if (t->timeout_ms > 0) {
		uint64_t own = now + (uint64_t)t->timeout_ms * NS_PER_MS;
		if (own < deadline_ns)
			return own;
	}
	return deadline_ns;
}

static enum nl_send_result to_result(enum outcome out)
{
	switch (out) {
	case OUT_OK:
		return NL_SEND_OK;
	case OUT_REJECTED:
		return NL_SEND_REJECTED;
	case OUT_ABORTED:
		return NL_SEND_ABORTED;
	case OUT_RETRY:
	case OUT_GIVE_UP:
		break;
	}
	return NL_SEND_RETRYABLE_FAILED;
}

enum nl_send_result nl_transport_send(struct nl_transport *t, const uint8_t *body, size_t len,
				      uint64_t deadline_ns, uint64_t retry_until_ns, const _Atomic bool *abort)
{
	if (!t)
		return NL_SEND_RETRYABLE_FAILED;
	if (is_aborted(abort))
		return NL_SEND_ABORTED;
	uint64_t now = nl_monotonic_ns();
	deadline_ns = effective_deadline(t, deadline_ns, now);
	if (t->wait_ms > 0 && now + (uint64_t)t->wait_ms * NS_PER_MS < deadline_ns)
		deadline_ns = now + (uint64_t)t->wait_ms * NS_PER_MS;
	if (now < t->not_before_ns && t->final)
		nl_warn_once("otlp.exit.retry_after", "exit: could not deliver this process's metrics to %s: it asked "
			     "to wait (Retry-After) past the exit; %s", t->endpoint, fate(t));
	else if (now >= deadline_ns && t->final)
		nl_warn_once("otlp.exit.deadline", "exit: could not deliver this process's metrics to %s: the exit "
			     "deadline passed; %s", t->endpoint, fate(t));
	if (now >= deadline_ns || now < t->not_before_ns)
		return NL_SEND_RETRYABLE_FAILED;

	uint8_t *owned;
	enter();
	CURLcode rc = set_body(t, body, len, &owned);
	if (rc != CURLE_OK) {
		nl_warn_once("otlp.setup", "cannot set up the OTLP exporter for %s: %s", t->endpoint,
			     nl_curl.easy_strerror(rc));
		leave();
		free(owned);
		return NL_SEND_RETRYABLE_FAILED;
	}
	t->abort = abort;
	enum outcome out = send_with_retries(t, deadline_ns, retry_until_ns);
	t->abort = NULL;
	/* curl keeps only a pointer to the body: forget it before freeing it. */
	nl_curl.easy_setopt(t->easy, CURLOPT_POSTFIELDS, (const char *)"");
	nl_curl.easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	leave();
	free(owned);
	return to_result(out);
}
