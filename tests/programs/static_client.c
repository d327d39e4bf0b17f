/* SPDX-License-Identifier: Apache-2.0 */
/* Built with -static: LD_PRELOAD cannot reach it. It must run exactly as
 * without the shim.  static_client PORT N */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int n = atoi(argv[2]), ok = 0;
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		ok += connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		close(fd);
	}
	printf("static connected %d\n", ok);
	return 0;
}
