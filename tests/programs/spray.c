/* SPDX-License-Identifier: Apache-2.0 */
/* Connects once to each of COUNT distinct loopback addresses 127.2.0.0 + i on
 * PORT (nobody listens: each is refused at once), then to each of NAMED
 * addresses 127.1.0.0 + i. Prints the numbers of attempts.
 *
 *   spray PORT COUNT NAMED */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static void hit(unsigned base, unsigned i, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(base + i);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	connect(fd, (struct sockaddr *)&a, sizeof a);
	close(fd);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int port = atoi(argv[1]);
	unsigned count = (unsigned)atoi(argv[2]), named = (unsigned)atoi(argv[3]);
	for (unsigned i = 0; i < count; i++)
		hit(0x7F020000u, i, port);
	for (unsigned i = 0; i < named; i++)
		hit(0x7F010000u, i, port);
	printf("external %u named %u\n", count, named);
	return 0;
}
