/* SPDX-License-Identifier: Apache-2.0 */
/* nemolens-run's Prometheus endpoint: GET /metrics on
 * OTEL_EXPORTER_PROMETHEUS_HOST:OTEL_EXPORTER_PROMETHEUS_PORT, served by
 * libmicrohttpd's own thread in the launcher (never in the program), with
 * the tree's exposition (treestore.h) in the text format 0.0.4, or in
 * OpenMetrics 1.0 when the Accept header asks for it.
 *
 * What it answers otherwise: 403 to a client that is not on loopback while
 * the endpoint is bound to a loopback address (bound to 0.0.0.0, :: or
 * another address, it answers everyone: that was asked for); 405 to a
 * method other than GET and HEAD; 404 to another path; 413 to a request
 * that announces a body; and, from libmicrohttpd, 400 to a malformed
 * request and 414 or 431 to one larger than its per-connection memory. A
 * bounded number of connections, each with a timeout: a client that
 * misbehaves costs a connection, never the launcher.
 */
#ifndef NL_SCRAPE_H
#define NL_SCRAPE_H

/* Starts serving; 0, or -1 when the address cannot be resolved or bound
 * (then why holds the reason). */
int scrape_start(const char *host, long port, char *why, unsigned long why_size);

/* Stops serving: waits for a scrape being answered. */
void scrape_stop(void);

#endif
