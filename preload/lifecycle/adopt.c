/* SPDX-License-Identifier: Apache-2.0 */
#include "adopt.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "foreign.h"
#include "log.h"
#include "registry.h"
#include "segment.h"
#include "segread.h"

#ifndef NL_VERSION
#define NL_VERSION "unknown"
#endif

/* Segments claimed at a time, and the body size at which a request is sent:
 * one request carries many dead processes (each its own ResourceMetrics). */
#define BATCH 32
#define BODY_MAX (1u << 20)

struct nl_transport_config nl_adopt_transport_config(const struct nl_config *cfg, const char *user_agent)
{
	return (struct nl_transport_config){
		.url = cfg->endpoint,
		.grpc = cfg->grpc,
		.headers = cfg->headers,
		.n_headers = cfg->n_headers,
		.gzip = cfg->gzip,
		.timeout_ms = cfg->otlp_timeout_ms,
		.ca_file = cfg->ca_file,
		.client_key = cfg->client_key,
		.client_cert = cfg->client_cert,
		.user_agent = user_agent,
	};
}

/* Serialised ExportMetricsServiceRequests concatenate into one whose
 * resource_metrics are all of theirs (protobuf merges repeated fields), so
 * the bodies of several snapshots are simply appended. */
struct body {
	uint8_t *buf;
	size_t len, cap;
};

static bool append(struct body *b, const uint8_t *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64 * 1024;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *bigger = realloc(b->buf, cap);
		if (!bigger)
			return false;
		b->buf = bigger;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return true;
}

/* Sends the batch's body; every segment in it is delivered or none. */
static bool send_batch(const struct nl_adopter *a, struct body *b, uint64_t deadline_ns)
{
	if (a->no_send) {
		b->len = 0;
		return true;
	}
	/* The quick wait counts from here: the first transport loads the
	 * export libraries, tens of milliseconds a short process's exit
	 * would otherwise pay on top of it. */
	uint64_t t0 = a->quick_ms ? nl_monotonic_ns() : 0;
	struct nl_transport *t = a->transport ? a->transport(a->arg) : NULL;
	if (!t)
		return false;
	if (a->quick_ms) {
		uint64_t spent_ms = (nl_monotonic_ns() - t0) / 1000000u;
		nl_transport_set_wait(t, spent_ms + 1 < a->quick_ms ? (long)(a->quick_ms - spent_ms) : 1);
	}
	/* A failure here loses nothing: the segments stay for the next try. */
	nl_transport_set_final(t, false, false);
	enum nl_send_result r = nl_transport_send(t, b->buf, b->len, deadline_ns, 0, a->abort);
	b->len = 0;
	/* Rejected (a non-retryable answer) would be rejected again: dropped,
	 * as the process's own export would have been. */
	return r == NL_SEND_OK || r == NL_SEND_REJECTED;
}

static void finish(struct nl_seg_leftover *l, size_t n, bool delivered, size_t *count)
{
	for (size_t i = 0; i < n; i++)
		nl_seg_release(&l[i], delivered);
	if (delivered)
		*count += n;
}

size_t nl_adopt_run(const struct nl_adopter *a, uint64_t deadline_ns, bool thorough, bool *send_failed)
{
	if (send_failed)
		*send_failed = false;
	uint64_t key = nl_seg_delivery_key(a->cfg);
	uint64_t max_age = (uint64_t)a->cfg->leftover_max_age_s * 1000000000u;
	bool folding = a->cfg->adopt == NL_ADOPT_FOLD && a->fold_ready;
	size_t delivered = 0;
	bool ok = true;
	for (int round = 0; ok && round < 64 && nl_monotonic_ns() < deadline_ns; round++) {
		struct nl_seg_leftover l[BATCH], sending[BATCH];
		size_t n = nl_seg_claim(key, max_age, thorough && round == 0, l, BATCH), n_sending = 0;
		struct body body = { NULL, 0, 0 };
		for (size_t i = 0; i < n; i++) {
			const struct nl_seg_header *h = nl_seg_leftover_header(&l[i]);
			if (!ok || (a->abort && atomic_load(a->abort))) {
				finish(&l[i], 1, false, &delivered);
				continue;
			}
			/* Only a process that never exported can be folded: one whose
			 * series a collector may have seen must end them under its own
			 * name, or they would count twice. */
			if (folding && !atomic_load(&((struct nl_seg_header *)l[i].data)->exported) && a->fold_ready(a->arg)) {
				/* Marked done and removed first: if this process dies midway,
				 * values are missing, never counted twice. */
				uint8_t *data = l[i].data;
				size_t len = l[i].len;
				l[i].data = NULL;
				finish(&l[i], 1, true, &delivered);
				nl_registry_fold_segment(data, len);
				free(data);
				continue;
			}
			struct nl_snapshot *snap = nl_snapshot_of_segment(l[i].data, l[i].len, nl_realtime_ns());
			uint8_t *enc = NULL;
			size_t enc_len = 0;
			if (snap && snap->n_points > 0 && !a->no_send) {
				snap->scope_name = "nemo.lens";
				snap->scope_version = NL_VERSION;
				if (nl_otlp_encode(snap, &enc, &enc_len) != 0)
					enc = NULL;
			}
			if (!snap || snap->n_points == 0) {
				/* Nothing recorded, or not readable as a segment: there is
				 * nothing to deliver, ever. */
				if (!snap)
					nl_debug("leftover %s (pid %lld) is not readable: removed", l[i].name,
						 (long long)h->pid);
				finish(&l[i], 1, true, &delivered);
			} else if (a->no_send || (enc && append(&body, enc, enc_len))) {
				if (a->seen)
					a->seen(l[i].data, l[i].len, a->seen_arg);
				sending[n_sending++] = l[i];
			} else {
				finish(&l[i], 1, false, &delivered);   /* out of memory: next time */
			}
			free(enc);
			nl_snapshot_free(snap);
			if (n_sending && (body.len >= BODY_MAX || a->no_send)) {
				ok = send_batch(a, &body, deadline_ns);
				finish(sending, n_sending, ok, &delivered);
				n_sending = 0;
			}
		}
		if (n_sending) {
			ok = send_batch(a, &body, deadline_ns);
			finish(sending, n_sending, ok, &delivered);
		}
		free(body.buf);
		if (n < BATCH)
			break;
	}
	if (send_failed)
		*send_failed = !ok;
	return delivered;
}

/* ---- live segments (nemolens-run) ------------------------------------------ */

struct live {
	const struct nl_adopter *a;
	uint64_t deadline_ns;
	struct body body;
	size_t points;
	bool ok;
};

static void take_live(const uint8_t *data, size_t len, void *arg)
{
	struct live *lv = arg;
	if (!lv->ok)
		return;
	struct nl_snapshot *snap = nl_snapshot_of_segment(data, len, nl_realtime_ns());
	uint8_t *enc = NULL;
	size_t enc_len = 0;
	if (snap && snap->n_points > 0 && lv->a->no_send) {
		lv->points += snap->n_points;
		if (lv->a->seen)
			lv->a->seen(data, len, lv->a->seen_arg);
	} else if (snap && snap->n_points > 0) {
		snap->scope_name = "nemo.lens";
		snap->scope_version = NL_VERSION;
		if (nl_otlp_encode(snap, &enc, &enc_len) == 0 && append(&lv->body, enc, enc_len)) {
			lv->points += snap->n_points;
			if (lv->a->seen)
				lv->a->seen(data, len, lv->a->seen_arg);
		}
	}
	free(enc);
	nl_snapshot_free(snap);
	if (lv->body.len >= BODY_MAX)
		lv->ok = send_batch(lv->a, &lv->body, lv->deadline_ns);
}

size_t nl_adopt_live(const struct nl_adopter *a, const uint32_t *exporters, size_t n_exporters, uint64_t deadline_ns,
		     size_t *points, bool *send_failed)
{
	struct live lv = { .a = a, .deadline_ns = deadline_ns, .ok = true };
	size_t n = nl_seg_read_exported(nl_seg_delivery_key(a->cfg), exporters, n_exporters, take_live, &lv);
	if (lv.ok && lv.body.len)
		lv.ok = send_batch(a, &lv.body, deadline_ns);
	free(lv.body.buf);
	if (points)
		*points = lv.points;
	if (send_failed)
		*send_failed = !lv.ok;
	return n;
}
