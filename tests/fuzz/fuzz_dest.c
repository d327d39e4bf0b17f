/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes destination rules: the first line is NEMOLENS_DESTINATIONS, and
 * every address family the hooks can see is then matched against it. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "dest.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nl_log_set_level(NL_LOG_NONE);
	char *rules = malloc(size + 1);
	if (!rules)
		return 0;
	memcpy(rules, data, size);
	rules[size] = 0;
	nl_dest_configure(rules);

	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(8000) };
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
	in6.sin6_addr = in6addr_loopback;
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	memcpy(un.sun_path, data, size < sizeof un.sun_path ? size : sizeof un.sun_path);

	/* Pretend the program resolved every token of the input as a hostname. */
	struct addrinfo ai = { .ai_family = AF_INET, .ai_addr = (struct sockaddr *)&in, .ai_addrlen = sizeof in };
	for (char *save, *tok = strtok_r(rules, "=,:", &save); tok; tok = strtok_r(NULL, "=,:", &save))
		nl_dest_note_resolved(tok, &ai);

	int d[4] = {
		nl_dest_match((struct sockaddr *)&in, sizeof in),
		nl_dest_match((struct sockaddr *)&in6, sizeof in6),
		nl_dest_match((struct sockaddr *)&un, sizeof un),
		nl_dest_match((struct sockaddr *)&in, 3),
	};
	/* TLS: the input as a server name or Host name, its bytes read no further than size. */
	int by_name[2] = { nl_dest_match_name((const char *)data, size, -1),
			   nl_dest_match_name((const char *)data, size, 443) };
	for (int i = 0; i < 2; i++)
		if (by_name[i] == NL_DEST_NONE || strlen(nl_dest_name(by_name[i])) == 0)
			abort();
	for (int i = 0; i < 4; i++)
		if (d[i] != NL_DEST_NONE && strlen(nl_dest_name(d[i])) == 0)
			abort();   /* every destination has a name */
	free(rules);
	return 0;
}
