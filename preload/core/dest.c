/* SPDX-License-Identifier: Apache-2.0 */
#include "dest.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#include "log.h"

enum rule_kind { RULE_ADDR, RULE_NET, RULE_ANY_ADDR, RULE_HOST, RULE_UNIX };

struct rule {
	enum rule_kind kind;
	int dest;               /* destination index */
	int family;             /* AF_INET / AF_INET6 for RULE_ADDR and RULE_NET */
	unsigned char addr[16];
	int prefix;             /* bits, RULE_NET */
	int port;               /* -1: any */
	int host;               /* index into hosts[], RULE_HOST */
	/* An IPv4 address a (network order) matches the rule's address part
	 * when (a & mask4) == net4: all ones for an IPv4 address, the prefix's
	 * mask for an IPv4 network, 0 and 0 for any address. A rule that
	 * matches no IPv4 address by its address alone (IPv6, a host name, a
	 * Unix path) has mask4 0 and net4 ~0, which nothing equals. */
	uint32_t mask4, net4;
	char *path;             /* RULE_UNIX */
};

static struct rule rules[NL_MAX_RULES];
static int n_rules;
static char *names[NL_DEST_SLOTS];
static int n_names;
#define MAX_HOSTS NL_MAX_RULES
static char *hosts[MAX_HOSTS];
static int n_hosts;

/* Addresses the program resolved for rule hostnames: a ring that getaddrinfo
 * hooks write and connect hooks read. Each entry is guarded by a sequence
 * number (odd while written) so a reader never uses a torn entry. */
#define RESOLVED_SLOTS 512
struct resolved {
	_Atomic unsigned seq;
	int host;
	int family;
	unsigned char addr[16];
};
static struct resolved resolved[RESOLVED_SLOTS];
static _Atomic unsigned resolved_next;

const char *nl_dest_name(int index)
{
	if (index == NL_DEST_OVERFLOW)
		return "overflow";
	if (index <= 0 || index > n_names)
		return "external";
	return names[index];
}

int nl_dest_count(void) { return n_names; }

void nl_dest_reset(void)
{
	/* Only what was used is cleared: the tables are large, and touching them
	 * in every process would cost page faults and resident memory. */
	for (int i = 0; i < n_rules; i++) {
		free(rules[i].path);
		memset(&rules[i], 0, sizeof rules[i]);
	}
	for (int i = 1; i <= n_names; i++) {
		free(names[i]);
		names[i] = NULL;
	}
	for (int i = 0; i < n_hosts; i++) {
		free(hosts[i]);
		hosts[i] = NULL;
	}
	n_rules = n_names = n_hosts = 0;
	unsigned used = atomic_exchange(&resolved_next, 0);
	for (unsigned i = 0; i < used && i < RESOLVED_SLOTS; i++)
		atomic_store(&resolved[i].seq, 0);
}

static int dest_index(const char *name, size_t len)
{
	for (int i = 1; i <= n_names; i++)
		if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
			return i;
	if (len == 8 && memcmp(name, "external", 8) == 0)
		return NL_DEST_EXTERNAL;
	if (n_names >= NL_MAX_DEST_NAMES) {
		nl_warn_once("dest.names", "NEMOLENS_DESTINATIONS names more than %d destinations; "
			     "the rest are reported with otel.metric.overflow=true", NL_MAX_DEST_NAMES);
		return NL_DEST_OVERFLOW;
	}
	char *copy = strndup(name, len);
	if (!copy)
		return NL_DEST_OVERFLOW;
	names[++n_names] = copy;
	return n_names;
}

static int host_index(const char *host, size_t len)
{
	for (int i = 0; i < n_hosts; i++)
		if (strlen(hosts[i]) == len && strncasecmp(hosts[i], host, len) == 0)
			return i;
	if (n_hosts >= MAX_HOSTS)
		return -1;
	hosts[n_hosts] = strndup(host, len);
	return hosts[n_hosts] ? n_hosts++ : -1;
}

static int parse_port(const char *s, size_t len)
{
	if (len == 1 && s[0] == '*')
		return -1;
	if (len == 0 || len > 5)
		return -2;
	int port = 0;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -2;
		port = port * 10 + (s[i] - '0');
	}
	return port <= 65535 ? port : -2;
}

static bool parse_ip(const char *s, size_t len, int *family, unsigned char *addr)
{
	char buf[INET6_ADDRSTRLEN + 1];
	if (len >= sizeof buf)
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	if (inet_pton(AF_INET, buf, addr) == 1) {
		*family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, buf, addr) == 1) {
		*family = AF_INET6;
		return true;
	}
	return false;
}

/* Connect addresses that are IPv4-mapped IPv6 are matched as IPv4 (see
 * inet_key), so rules written that way are turned into IPv4 rules too. */
static void unmap_v4(struct rule *r)
{
	static const unsigned char prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };
	if (r->family != AF_INET6 || memcmp(r->addr, prefix, 12) != 0)
		return;
	if (r->kind == RULE_NET) {
		if (r->prefix < 96)
			return;
		r->prefix -= 96;
	}
	memmove(r->addr, r->addr + 12, 4);
	memset(r->addr + 4, 0, 12);
	r->family = AF_INET;
}

static bool valid_hostname(const char *s, size_t len)
{
	if (len == 0 || len > 253)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
			return false;
	return true;
}

/* Parses the target part of one rule into r. */
static bool parse_target(const char *t, size_t len, struct rule *r)
{
	if (len > 5 && strncmp(t, "unix:", 5) == 0) {
		r->kind = RULE_UNIX;
		r->path = strndup(t + 5, len - 5);
		return r->path && r->path[0] && len - 5 < sizeof(((struct sockaddr_un *)0)->sun_path);
	}
	const char *slash = memchr(t, '/', len);
	if (slash) {
		char *end;
		char pfx[8] = { 0 };
		size_t plen = len - (size_t)(slash - t) - 1;
		if (plen == 0 || plen >= sizeof pfx)
			return false;
		memcpy(pfx, slash + 1, plen);
		long bits = strtol(pfx, &end, 10);
		if (*end || !isdigit((unsigned char)pfx[0]))
			return false;
		r->kind = RULE_NET;
		r->port = -1;
		r->prefix = (int)bits;
		if (!parse_ip(t, (size_t)(slash - t), &r->family, r->addr) ||
		    bits < 0 || bits > (r->family == AF_INET ? 32 : 128))
			return false;
		unmap_v4(r);
		return true;
	}
	/* [v6]:port */
	if (t[0] == '[') {
		const char *close = memchr(t, ']', len);
		if (!close || close + 1 >= t + len || close[1] != ':')
			return false;
		r->kind = RULE_ADDR;
		r->port = parse_port(close + 2, len - (size_t)(close + 2 - t));
		if (r->port == -2 || !parse_ip(t + 1, (size_t)(close - t - 1), &r->family, r->addr) ||
		    r->family != AF_INET6)
			return false;
		unmap_v4(r);
		return true;
	}
	const char *colon = NULL;
	for (const char *p = t; p < t + len; p++)
		if (*p == ':')
			colon = p;
	if (!colon)
		return false;
	r->port = parse_port(colon + 1, len - (size_t)(colon + 1 - t));
	if (r->port == -2)
		return false;
	size_t hlen = (size_t)(colon - t);
	if (hlen == 1 && t[0] == '*') {
		r->kind = RULE_ANY_ADDR;
		return true;
	}
	if (parse_ip(t, hlen, &r->family, r->addr)) {
		r->kind = RULE_ADDR;
		return r->family == AF_INET;   /* a bare v6 address needs brackets */
	}
	if (!valid_hostname(t, hlen))
		return false;
	r->kind = RULE_HOST;
	r->host = host_index(t, hlen);
	return r->host >= 0;
}

/* mask4 and net4 of a parsed rule (struct rule). */
static void set_key4(struct rule *r)
{
	r->mask4 = 0;
	r->net4 = ~0u;
	if (r->kind == RULE_ANY_ADDR) {
		r->net4 = 0;
	} else if ((r->kind == RULE_ADDR || r->kind == RULE_NET) && r->family == AF_INET) {
		int bits = r->kind == RULE_ADDR ? 32 : r->prefix;
		r->mask4 = bits == 0 ? 0 : htonl(~0u << (32 - bits));
		memcpy(&r->net4, r->addr, 4);
		r->net4 &= r->mask4;
	}
}

int nl_dest_configure(const char *spec)
{
	nl_dest_reset();
	if (!spec)
		return 0;
	const char *p = spec;
	while (*p) {
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		while (p < end && *p == ' ')
			p++;
		const char *e = end;
		while (e > p && e[-1] == ' ')
			e--;
		if (e > p) {
			const char *eq = memchr(p, '=', (size_t)(e - p));
			struct rule r = { 0 };
			bool ok = eq && eq > p && eq + 1 < e && parse_target(eq + 1, (size_t)(e - eq - 1), &r);
			if (!ok) {
				free(r.path);
				nl_warn_once("dest.invalid", "ignoring NEMOLENS_DESTINATIONS rule \"%.*s\": expected "
					     "name=host:port, ip:port, [v6]:port, ip/prefix, *:port or unix:/path",
					     (int)((e - p) > 80 ? 80 : (e - p)), p);
			} else if (n_rules >= NL_MAX_RULES) {
				free(r.path);
				nl_warn_once("dest.rules", "NEMOLENS_DESTINATIONS has more than %d rules; "
					     "the rest are ignored", NL_MAX_RULES);
			} else {
				r.dest = dest_index(p, (size_t)(eq - p));
				set_key4(&r);
				rules[n_rules++] = r;
			}
		}
		p = *end ? end + 1 : end;
	}
	return n_rules;
}

/* Normalises a socket address: family, 16 address bytes (IPv4 in the first
 * four; IPv4-mapped IPv6 becomes IPv4) and port. */
static bool inet_key(const struct sockaddr *sa, socklen_t len, int *family, unsigned char *addr, int *port)
{
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		*family = AF_INET;
		memcpy(addr, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return true;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		*port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			*family = AF_INET;
			memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
		} else {
			*family = AF_INET6;
			memcpy(addr, in6->sin6_addr.s6_addr, 16);
		}
		return true;
	}
	return false;
}

/* Constant-size compares: the common IPv4 case is one load and compare. */
static bool same_addr(const unsigned char *a, const unsigned char *b, int family)
{
	return family == AF_INET ? memcmp(a, b, 4) == 0 : memcmp(a, b, 16) == 0;
}

static bool prefix_match(const unsigned char *a, const unsigned char *b, int bits)
{
	int bytes = bits / 8, rest = bits % 8;
	if (memcmp(a, b, (size_t)bytes) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xFF << (8 - rest));
	return (a[bytes] & mask) == (b[bytes] & mask);
}

static bool resolved_for(int host, int family, const unsigned char *addr)
{
	size_t alen = family == AF_INET ? 4 : 16;
	for (int i = 0; i < RESOLVED_SLOTS; i++) {
		struct resolved *e = &resolved[i];
		unsigned s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
		if (s1 == 0 || (s1 & 1))
			continue;
		bool hit = e->host == host && e->family == family && memcmp(e->addr, addr, alen) == 0;
		atomic_thread_fence(memory_order_acquire);
		if (hit && atomic_load_explicit(&e->seq, memory_order_relaxed) == s1)
			return true;
	}
	return false;
}

/* A Unix stream socket path: the first unix: rule naming it. */
static __attribute__((noinline)) int match_unix(const struct sockaddr *sa, socklen_t len)
{
	const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
	size_t max = len - offsetof(struct sockaddr_un, sun_path);
	for (int i = 0; i < n_rules; i++)
		if (rules[i].kind == RULE_UNIX && strnlen(un->sun_path, max) == strlen(rules[i].path) &&
		    strncmp(un->sun_path, rules[i].path, max) == 0)
			return rules[i].dest;
	return NL_DEST_NONE;
}

/* The index of the first rule from i on that an IPv4 address a (network
 * order) on port matches by its address and port alone, or of the first
 * host name rule on that port, whose resolved addresses must be asked;
 * n_rules when there is none. A leaf loop: no call, no stack frame. */
static inline int scan4(int i, uint32_t a, int port)
{
	for (; i < n_rules; i++) {
		const struct rule *r = &rules[i];
		if (r->port >= 0 && r->port != port)
			continue;
		if ((a & r->mask4) == r->net4 || r->kind == RULE_HOST)
			return i;
	}
	return i;
}

/* The rules from a host name rule at i on, for an IPv4 address. */
static __attribute__((noinline)) int match4_from_host(int i, uint32_t a, int port)
{
	unsigned char addr[16] = { 0 };
	memcpy(addr, &a, 4);
	for (; i < n_rules; i = scan4(i + 1, a, port))
		if (rules[i].kind != RULE_HOST || resolved_for(rules[i].host, AF_INET, addr))
			return rules[i].dest;
	return NL_DEST_EXTERNAL;
}

/* An IPv4 address, with rules to try: the usual rules (addresses, networks,
 * ports) need no stack frame. */
static inline int match4(uint32_t a, int port)
{
	int i = scan4(0, a, port);
	if (i == n_rules)
		return NL_DEST_EXTERNAL;
	if (rules[i].kind != RULE_HOST)
		return rules[i].dest;
	return match4_from_host(i, a, port);
}

/* An IP address, with rules to try. */
static __attribute__((noinline)) int match_ip(const struct sockaddr *sa, socklen_t len)
{
	int family, port;
	unsigned char addr[16] = { 0 };
	if (!inet_key(sa, len, &family, addr, &port))
		return NL_DEST_NONE;
	if (family == AF_INET) {
		uint32_t a;
		memcpy(&a, addr, 4);
		return match4(a, port);
	}
	for (int i = 0; i < n_rules; i++) {
		const struct rule *r = &rules[i];
		if (r->port >= 0 && r->port != port)
			continue;
		switch (r->kind) {
		case RULE_ANY_ADDR:
			return r->dest;
		case RULE_ADDR:
			if (r->family == family && same_addr(r->addr, addr, family))
				return r->dest;
			break;
		case RULE_NET:
			if (r->family == family && prefix_match(r->addr, addr, r->prefix))
				return r->dest;
			break;
		case RULE_HOST:
			if (resolved_for(r->host, family, addr))
				return r->dest;
			break;
		case RULE_UNIX:
			break;
		}
	}
	return NL_DEST_EXTERNAL;
}

/* Every connect() of the program asks: the cases without rules to try
 * (the usual one: no rules at all) need no stack frame, the others are
 * out of line. */
int nl_dest_match(const struct sockaddr *sa, socklen_t len)
{
	if (!sa || len < (socklen_t)sizeof(sa_family_t))
		return NL_DEST_NONE;
	if (sa->sa_family == AF_UNIX)
		return n_rules ? match_unix(sa, len) : NL_DEST_NONE;
	if (n_rules == 0)   /* no rules: every IP destination is external */
		return (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) ||
			       (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6))
			       ? NL_DEST_EXTERNAL
			       : NL_DEST_NONE;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return match4(in->sin_addr.s_addr, ntohs(in->sin_port));
	}
	return match_ip(sa, len);
}

/* An address literal ("1.2.3.4", "[::1]") with a known port, matched as
 * connect() would match it; NL_DEST_NONE when name is not one. */
static int literal_match(const char *name, size_t len, int port)
{
	char buf[INET6_ADDRSTRLEN + 1];
	if (len && name[0] == '[' && name[len - 1] == ']')
		name++, len -= 2;
	if (port < 0 || len == 0 || len >= sizeof buf)
		return NL_DEST_NONE;
	memcpy(buf, name, len);
	buf[len] = 0;
	struct sockaddr_in in4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, buf, &in4.sin_addr) == 1)
		return nl_dest_match((struct sockaddr *)&in4, sizeof in4);
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET6, buf, &in6.sin6_addr) == 1)
		return nl_dest_match((struct sockaddr *)&in6, sizeof in6);
	return NL_DEST_NONE;
}

int nl_dest_match_name(const char *name, size_t len, int port)
{
	if (!name)
		return NL_DEST_EXTERNAL;
	if (len && name[len - 1] == '.')
		len--;
	if (len == 0 || n_rules == 0)
		return NL_DEST_EXTERNAL;
	if ((name[0] >= '0' && name[0] <= '9') || name[0] == '[') {
		int d = literal_match(name, len, port);
		if (d != NL_DEST_NONE)
			return d;
	}
	for (int i = 0; i < n_rules; i++) {
		const struct rule *r = &rules[i];
		if (r->kind != RULE_HOST || (port >= 0 && r->port >= 0 && r->port != port))
			continue;
		const char *h = hosts[r->host];
		if (strncasecmp(h, name, len) == 0 && h[len] == '\0')
			return r->dest;
	}
	return NL_DEST_EXTERNAL;
}

static void remember(int host, int family, const unsigned char *addr)
{
	if (resolved_for(host, family, addr))
		return;
	unsigned slot = atomic_fetch_add(&resolved_next, 1) % RESOLVED_SLOTS;
	struct resolved *e = &resolved[slot];
	unsigned s = atomic_load(&e->seq);
	/* Claim the entry by making its sequence odd; a concurrent writer of the same
	 * slot (only after RESOLVED_SLOTS other resolutions) simply loses. */
	if ((s & 1) || !atomic_compare_exchange_strong(&e->seq, &s, s + 1))
		return;
	e->host = host;
	e->family = family;
	memset(e->addr, 0, sizeof e->addr);
	memcpy(e->addr, addr, family == AF_INET ? 4 : 16);
	atomic_store_explicit(&e->seq, s + 2, memory_order_release);
}

void nl_dest_note_resolved(const char *node, const struct addrinfo *res)
{
	if (!node || n_hosts == 0)
		return;
	int host = -1;
	for (int i = 0; i < n_hosts; i++)
		if (strcasecmp(hosts[i], node) == 0)
			host = i;
	if (host < 0)
		return;
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int family, port;
		unsigned char addr[16] = { 0 };
		if (ai->ai_addr && inet_key(ai->ai_addr, ai->ai_addrlen, &family, addr, &port))
			remember(host, family, addr);
	}
}
