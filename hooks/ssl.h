/* SPDX-License-Identifier: Apache-2.0 */
/* HTTPS: the plaintext of OpenSSL connections, fed to the HTTP glue.
 *
 * The interposed SSL_read, SSL_read_ex, SSL_write, SSL_write_ex and
 * SSL_sendfile carry a connection's plaintext to the parser exactly as the
 * socket hooks carry a plain socket's bytes; SSL_shutdown and SSL_free end
 * it. SSL_peek and SSL_peek_ex are passed through: their bytes are read
 * again by SSL_read, which feeds them.
 *
 * Connections are found by their SSL object, not by an fd: asyncio (aiohttp,
 * httpx) runs TLS over memory BIOs, where the SSL object has no socket. A
 * fixed open-addressing table keyed by the SSL pointer holds one entry per
 * connection seen, from its first read or write to SSL_free: claimed with a
 * CAS, its parser state (struct nl_httpconn) in a pool mapped at the first
 * TLS connection, so no hook allocates and a program without TLS pays
 * nothing. An SSL object whose first bytes are not HTTP/1.x keeps its entry,
 * marked, so its later calls cost one table load.
 */
#ifndef NL_SSL_H
#define NL_SSL_H

/* Fork child: the parent's TLS exchanges are the parent's (as for sockets,
 * fdtable.h). */
void nl_ssl_atfork_child(void);

#endif
