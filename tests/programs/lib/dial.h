/* SPDX-License-Identifier: Apache-2.0 */
/* One TCP connection to 127.0.0.1:port, opened and closed: inlined into
 * the function that calls it, which is then the connection's call site. */
#ifndef CALL_SITES_DIAL_H
#define CALL_SITES_DIAL_H

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

static inline __attribute__((always_inline)) int dial_port(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	int r = connect(fd, (struct sockaddr *)&a, sizeof a);
	close(fd);
	return r;
}

#endif
