/* SPDX-License-Identifier: Apache-2.0 */
/* A shared library of the call-site test: connects on behalf of its caller,
 * the way a client library the program links would. */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

__attribute__((visibility("default"), noinline)) int callsite_lib_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int r = connect(fd, (struct sockaddr *)&a, sizeof a);
	close(fd);
	return r;
}
