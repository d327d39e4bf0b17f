/* SPDX-License-Identifier: Apache-2.0 */
/* Destination rules (NEMOLENS_DESTINATIONS) and matching connect() addresses. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "dest.h"
#include "helpers.h"
#include "log.h"

static void setup(void)
{
	nl_log_set_level(NL_LOG_NONE);
	nl_dest_reset();
}

static void teardown(void)
{
	nl_dest_reset();
}

TestSuite(dest, .init = setup, .fini = teardown);

/* ---- socket addresses ---------------------------------------------------- */

static struct sockaddr_in6 addr6(const char *ip, int port)
{
	struct sockaddr_in6 sin6;
	memset(&sin6, 0, sizeof sin6);
	sin6.sin6_family = AF_INET6;
	sin6.sin6_port = htons((uint16_t)port);
	cr_assert_eq(inet_pton(AF_INET6, ip, &sin6.sin6_addr), 1, "bad test address %s", ip);
	return sin6;
}

static int match4(const char *ip, int port)
{
	struct sockaddr_in sin = addr4(ip, port);
	return nl_dest_match((const struct sockaddr *)&sin, sizeof sin);
}

static int match6(const char *ip, int port)
{
	struct sockaddr_in6 sin6 = addr6(ip, port);
	return nl_dest_match((const struct sockaddr *)&sin6, sizeof sin6);
}

/* A Unix address with len covering the path and its NUL, as most programs pass it. */
static int match_unix(const char *path)
{
	struct sockaddr_un sun;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	cr_assert_lt(strlen(path), sizeof sun.sun_path);
	memcpy(sun.sun_path, path, strlen(path));
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
	return nl_dest_match((const struct sockaddr *)&sun, len);
}

static int match_unix_full(const char *path)
{
	struct sockaddr_un sun;
	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	return nl_dest_match((const struct sockaddr *)&sun, sizeof sun);
}

/* An addrinfo list built by hand, as getaddrinfo would return it. */
struct ai_list {
	struct addrinfo ai[8];
	struct sockaddr_storage ss[8];
	size_t n;
};

static void ai_add4(struct ai_list *l, const char *ip, int port)
{
	cr_assert_lt(l->n, 8);
	struct sockaddr_in sin = addr4(ip, port);
	memcpy(&l->ss[l->n], &sin, sizeof sin);
	struct addrinfo *ai = &l->ai[l->n];
	memset(ai, 0, sizeof *ai);
	ai->ai_family = AF_INET;
	ai->ai_socktype = SOCK_STREAM;
	ai->ai_addr = (struct sockaddr *)&l->ss[l->n];
	ai->ai_addrlen = sizeof sin;
	if (l->n)
		l->ai[l->n - 1].ai_next = ai;
	l->n++;
}

static void ai_add6(struct ai_list *l, const char *ip, int port)
{
	cr_assert_lt(l->n, 8);
	struct sockaddr_in6 sin6 = addr6(ip, port);
	memcpy(&l->ss[l->n], &sin6, sizeof sin6);
	struct addrinfo *ai = &l->ai[l->n];
	memset(ai, 0, sizeof *ai);
	ai->ai_family = AF_INET6;
	ai->ai_socktype = SOCK_STREAM;
	ai->ai_addr = (struct sockaddr *)&l->ss[l->n];
	ai->ai_addrlen = sizeof sin6;
	if (l->n)
		l->ai[l->n - 1].ai_next = ai;
	l->n++;
}

static void resolved4(const char *node, const char *ip)
{
	struct ai_list l = { .n = 0 };
	ai_add4(&l, ip, 0);
	nl_dest_note_resolved(node, l.ai);
}

/* An address, IPv6 where it holds a ':', and the destination it must match:
 * a rule's number from 1, or EXT. */
struct probe {
	const char *ip;
	int port, want;
};

#define EXT NL_DEST_EXTERNAL

/* Rules as NEMOLENS_DESTINATIONS spells them, how many nl_dest_configure
 * counts, and addresses probed with only those rules in place. */
struct rules_case {
	const char *spec;
	int n;
	struct probe probes[6];
};

static void expect_cases(const struct rules_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct rules_case *c = &cases[i];
		cr_assert_eq(nl_dest_configure(c->spec), c->n, "%s", c->spec);
		for (const struct probe *p = c->probes; p < c->probes + 6 && p->ip; p++)
			cr_assert_eq(strchr(p->ip, ':') ? match6(p->ip, p->port) : match4(p->ip, p->port), p->want,
				     "rules %s, %s port %d", c->spec, p->ip, p->port);
	}
}

/* ---- no rules -------------------------------------------------------------- */

Test(dest, no_rules_everything_external)
{
	cr_assert_eq(nl_dest_configure(NULL), 0);
	cr_assert_eq(nl_dest_count(), 0);
	cr_assert_eq(match4("10.0.0.1", 80), NL_DEST_EXTERNAL);
	cr_assert_eq(match6("2001:db8::1", 443), NL_DEST_EXTERNAL);
	cr_assert_str_eq(nl_dest_name(NL_DEST_EXTERNAL), "external");

	cr_assert_eq(nl_dest_configure(""), 0);
	cr_assert_eq(nl_dest_count(), 0);
	cr_assert_eq(match4("127.0.0.1", 8080), NL_DEST_EXTERNAL);
	cr_assert_eq(nl_dest_configure(" , ,, "), 0);
	cr_assert_eq(match4("127.0.0.1", 8080), NL_DEST_EXTERNAL);
}

Test(dest, names_out_of_range_are_external)
{
	cr_assert_eq(nl_dest_configure("db=10.0.0.5:5432"), 1);
	cr_assert_str_eq(nl_dest_name(1), "db");
	cr_assert_str_eq(nl_dest_name(0), "external");
	cr_assert_str_eq(nl_dest_name(2), "external");
	cr_assert_str_eq(nl_dest_name(-1), "external");
	cr_assert_str_eq(nl_dest_name(NL_DEST_OVERFLOW), "overflow");
}

/* ---- ip:port, [v6]:port ------------------------------------------------------ */

Test(dest, ipv4_and_port)
{
	cr_assert_eq(nl_dest_configure("db=10.0.0.5:5432"), 1);
	cr_assert_eq(nl_dest_count(), 1);
	cr_assert_eq(match4("10.0.0.5", 5432), 1);
	cr_assert_str_eq(nl_dest_name(1), "db");
	cr_assert_eq(match4("10.0.0.5", 5433), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.6", 5432), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.4", 5432), NL_DEST_EXTERNAL);
	cr_assert_eq(match6("2001:db8::5", 5432), NL_DEST_EXTERNAL);
}

Test(dest, ipv6_in_brackets_and_port)
{
	cr_assert_eq(nl_dest_configure("v6=[2001:db8::1]:8080"), 1);
	cr_assert_eq(match6("2001:db8::1", 8080), 1);
	cr_assert_str_eq(nl_dest_name(1), "v6");
	cr_assert_eq(match6("2001:db8::1", 8081), NL_DEST_EXTERNAL);
	cr_assert_eq(match6("2001:db8::2", 8080), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.1", 8080), NL_DEST_EXTERNAL);
}

Test(dest, ipv6_loopback)
{
	cr_assert_eq(nl_dest_configure("lo6=[::1]:9000"), 1);
	cr_assert_eq(match6("::1", 9000), 1);
	cr_assert_eq(match6("::", 9000), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("127.0.0.1", 9000), NL_DEST_EXTERNAL);
}

/* ---- ip/prefix --------------------------------------------------------------- */

Test(dest, networks)
{
	static const struct rules_case cases[] = {
		/* IPv4 networks: byte aligned */
		{ "net=10.1.0.0/16", 1,
		  { { "10.1.0.0", 1, 1 }, { "10.1.255.255", 65535, 1 }, { "10.1.2.3", 80, 1 },
		    { "10.0.255.255", 80, EXT }, { "10.2.0.0", 80, EXT }, { "2001:db8::1", 80, EXT } } },
		/* not byte aligned */
		{ "n=192.168.1.64/26", 1,
		  { { "192.168.1.64", 80, 1 }, { "192.168.1.127", 80, 1 }, { "192.168.1.63", 80, EXT },
		    { "192.168.1.128", 80, EXT } } },
		{ "judge=10.0.3.0/24", 1,
		  { { "10.0.3.0", 8000, 1 }, { "10.0.3.255", 8000, 1 }, { "10.0.2.255", 8000, EXT },
		    { "10.0.4.0", 8000, EXT } } },
		{ "odd=172.16.0.0/12", 1,
		  { { "172.16.0.0", 1, 1 }, { "172.31.255.255", 1, 1 }, { "172.15.255.255", 1, EXT },
		    { "172.32.0.0", 1, EXT } } },
		{ "one=128.0.0.0/1", 1,
		  { { "128.0.0.0", 1, 1 }, { "255.255.255.255", 1, 1 }, { "127.255.255.255", 1, EXT } } },
		/* host bits in the rule ignored */
		{ "net=10.1.2.3/16", 1, { { "10.1.200.200", 80, 1 }, { "10.2.2.3", 80, EXT } } },
		/* /0 and /32 */
		{ "all=0.0.0.0/0", 1,
		  { { "0.0.0.0", 1, 1 }, { "255.255.255.255", 65535, 1 }, { "8.8.8.8", 53, 1 },
		    { "2001:db8::1", 80, EXT } } },
		{ "host=10.9.8.7/32", 1,
		  { { "10.9.8.7", 1, 1 }, { "10.9.8.7", 65535, 1 }, { "10.9.8.6", 1, EXT }, { "10.9.8.8", 1, EXT } } },
		/* IPv6 networks */
		{ "n=2001:db8:abcd::/48", 1,
		  { { "2001:db8:abcd::", 1, 1 }, { "2001:db8:abcd:ffff:ffff:ffff:ffff:ffff", 1, 1 },
		    { "2001:db8:abcc:ffff:ffff:ffff:ffff:ffff", 1, EXT }, { "2001:db8:abce::", 1, EXT },
		    { "10.0.0.1", 1, EXT } } },
		{ "ula=fc00::/7", 1,
		  { { "fc00::", 80, 1 }, { "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 80, 1 },
		    { "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 80, EXT }, { "fe00::", 80, EXT } } },
		{ "fd=fd00::/8", 1, { { "fd12:3456::1", 80, 1 }, { "fc12:3456::1", 80, EXT } } },
		/* /0, /128 and /127 */
		{ "all6=::/0", 1,
		  { { "::", 1, 1 }, { "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 1, 1 }, { "10.0.0.1", 1, EXT } } },
		{ "lo=::1/128", 1, { { "::1", 5, 1 }, { "::2", 5, EXT }, { "::", 5, EXT } } },
		{ "x=2001:db8::ff/127", 1,
		  { { "2001:db8::fe", 5, 1 }, { "2001:db8::ff", 5, 1 }, { "2001:db8::fd", 5, EXT },
		    { "2001:db8::100", 5, EXT } } },
	};
	expect_cases(cases, sizeof cases / sizeof *cases);
}

/* ---- *:port and port "*" ------------------------------------------------------ */

Test(dest, any_address_or_port)
{
	static const struct rules_case cases[] = {
		/* any address on a port */
		{ "redis=*:6379", 1,
		  { { "10.0.0.1", 6379, 1 }, { "192.0.2.77", 6379, 1 }, { "2001:db8::1", 6379, 1 },
		    { "10.0.0.1", 6380, EXT }, { "2001:db8::1", 6378, EXT } } },
		/* any port of an address, of any address */
		{ "a=10.0.0.1:*,b=[2001:db8::1]:*", 2,
		  { { "10.0.0.1", 1, 1 }, { "10.0.0.1", 65535, 1 }, { "10.0.0.2", 1, EXT }, { "2001:db8::1", 443, 2 },
		    { "2001:db8::2", 443, EXT } } },
		{ "everything=*:*", 1, { { "1.2.3.4", 5, 1 }, { "2001:db8::9", 9, 1 } } },
		/* the first and last ports */
		{ "lo=10.0.0.1:1,hi=10.0.0.1:65535", 2,
		  { { "10.0.0.1", 1, 1 }, { "10.0.0.1", 65535, 2 }, { "10.0.0.1", 2, EXT },
		    { "10.0.0.1", 65534, EXT } } },
	};
	expect_cases(cases, sizeof cases / sizeof *cases);
}

/* ---- host:port ------------------------------------------------------------------- */

Test(dest, hostname_matches_only_after_resolution)
{
	cr_assert_eq(nl_dest_configure("api=api.example.com:443"), 1);
	cr_assert_eq(nl_dest_count(), 1);
	cr_assert_eq(match4("203.0.113.7", 443), NL_DEST_EXTERNAL);
	cr_assert_eq(match6("2001:db8::7", 443), NL_DEST_EXTERNAL);

	struct ai_list l = { .n = 0 };
	ai_add4(&l, "203.0.113.7", 443);
	ai_add6(&l, "2001:db8::7", 443);
	nl_dest_note_resolved("api.example.com", l.ai);

	cr_assert_eq(match4("203.0.113.7", 443), 1);
	cr_assert_eq(match6("2001:db8::7", 443), 1);
	cr_assert_str_eq(nl_dest_name(1), "api");
	/* other port, other address */
	cr_assert_eq(match4("203.0.113.7", 80), NL_DEST_EXTERNAL);
	cr_assert_eq(match6("2001:db8::7", 80), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("203.0.113.8", 443), NL_DEST_EXTERNAL);
}

Test(dest, hostname_case_insensitive)
{
	cr_assert_eq(nl_dest_configure("api=API.Example.COM:443"), 1);
	resolved4("api.example.com", "203.0.113.7");
	cr_assert_eq(match4("203.0.113.7", 443), 1);

	cr_assert_eq(nl_dest_configure("api=api.example.com:443"), 1);
	resolved4("Api.EXAMPLE.com", "203.0.113.9");
	cr_assert_eq(match4("203.0.113.9", 443), 1);
}

Test(dest, other_hostnames_resolutions_do_not_match)
{
	cr_assert_eq(nl_dest_configure("api=api.example.com:443"), 1);
	resolved4("other.example.com", "203.0.113.9");
	resolved4("api.example.com.evil", "203.0.113.10");
	resolved4("api.example.co", "203.0.113.11");
	cr_assert_eq(match4("203.0.113.9", 443), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("203.0.113.10", 443), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("203.0.113.11", 443), NL_DEST_EXTERNAL);
	nl_dest_note_resolved(NULL, NULL);
	nl_dest_note_resolved("api.example.com", NULL);
	cr_assert_eq(match4("203.0.113.9", 443), NL_DEST_EXTERNAL);
}

Test(dest, hostname_with_any_port)
{
	cr_assert_eq(nl_dest_configure("svc=svc:*"), 1);
	resolved4("svc", "10.20.30.40");
	cr_assert_eq(match4("10.20.30.40", 1), 1);
	cr_assert_eq(match4("10.20.30.40", 8000), 1);
}

Test(dest, two_hostnames_kept_apart)
{
	cr_assert_eq(nl_dest_configure("policy=policy-host:8000,judge=judge_host:8000"), 2);
	resolved4("policy-host", "10.0.0.1");
	resolved4("judge_host", "10.0.0.2");
	cr_assert_eq(match4("10.0.0.1", 8000), 1);
	cr_assert_eq(match4("10.0.0.2", 8000), 2);
}

Test(dest, hostname_resolved_to_v4_mapped_matches_v4_connect)
{
	cr_assert_eq(nl_dest_configure("api=api.example.com:443"), 1);
	struct ai_list l = { .n = 0 };
	ai_add6(&l, "::ffff:203.0.113.8", 443);
	nl_dest_note_resolved("api.example.com", l.ai);
	cr_assert_eq(match4("203.0.113.8", 443), 1);
	cr_assert_eq(match6("::ffff:203.0.113.8", 443), 1);
}

/* ---- by name (TLS: SNI, Host) ---------------------------------------------------- */

static int by_name(const char *name, int port) { return nl_dest_match_name(name, strlen(name), port); }

Test(dest, name_matches_host_rules_without_resolution)
{
	cr_assert_eq(nl_dest_configure("a=api.example.com:443,b=10.0.0.0/8,c=svc:*"), 3);
	cr_assert_eq(by_name("api.example.com", -1), 1);
	cr_assert_eq(by_name("API.Example.Com", 443), 1);
	cr_assert_eq(by_name("api.example.com.", 443), 1);   /* absolute name */
	cr_assert_eq(by_name("api.example.com", 8443), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name("svc", 1), 3);
	cr_assert_eq(by_name("svc", -1), 3);
	cr_assert_eq(by_name("api.example.co", -1), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name("api.example.com.evil", -1), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name("", -1), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name(".", -1), NL_DEST_EXTERNAL);
	cr_assert_eq(nl_dest_match_name(NULL, 0, -1), NL_DEST_EXTERNAL);
	/* a length shorter than the string: only that prefix is the name */
	cr_assert_eq(nl_dest_match_name("svc:8000", 3, 8000), 3);
}

Test(dest, name_first_matching_rule_and_port)
{
	cr_assert_eq(nl_dest_configure("one=localhost:1,two=localhost:8443,three=localhost:*"), 3);
	cr_assert_eq(by_name("localhost", -1), 1);     /* port unknown: the first */
	cr_assert_eq(by_name("localhost", 8443), 2);
	cr_assert_eq(by_name("localhost", 443), 3);
}

Test(dest, name_address_literals_match_as_addresses)
{
	cr_assert_eq(nl_dest_configure("a=127.0.0.1:8443,b=[::1]:9000,c=10.0.0.0/8"), 3);
	cr_assert_eq(by_name("127.0.0.1", 8443), 1);
	cr_assert_eq(by_name("127.0.0.1", 443), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name("127.0.0.1", -1), NL_DEST_EXTERNAL);   /* no port: not an address */
	cr_assert_eq(by_name("[::1]", 9000), 2);
	cr_assert_eq(by_name("::1", 9000), NL_DEST_EXTERNAL);     /* a Host header brackets it */
	cr_assert_eq(by_name("10.1.2.3", 1), 3);
	cr_assert_eq(by_name("10.1.2.300", 1), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name("[::1", 9000), NL_DEST_EXTERNAL);
}

Test(dest, name_without_rules_is_external)
{
	cr_assert_eq(nl_dest_configure(""), 0);
	cr_assert_eq(by_name("localhost", 443), NL_DEST_EXTERNAL);
	cr_assert_eq(by_name("127.0.0.1", 443), NL_DEST_EXTERNAL);
}

/* ---- unix:/path --------------------------------------------------------------- */

Test(dest, unix_path)
{
	cr_assert_eq(nl_dest_configure("sock=unix:/run/app.sock"), 1);
	cr_assert_eq(match_unix("/run/app.sock"), 1);
	cr_assert_eq(match_unix_full("/run/app.sock"), 1);
	/* Linux also accepts a length that leaves out the terminating NUL */
	struct sockaddr_un exact;
	memset(&exact, 0, sizeof exact);
	exact.sun_family = AF_UNIX;
	memcpy(exact.sun_path, "/run/app.sock", 13);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&exact,
				   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 13)), 1);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&exact,
				   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 12)), NL_DEST_NONE);
	cr_assert_str_eq(nl_dest_name(1), "sock");
	cr_assert_eq(match_unix("/run/other.sock"), NL_DEST_NONE);
	cr_assert_eq(match_unix("/run/app.so"), NL_DEST_NONE);
	cr_assert_eq(match_unix("/run/app.sock2"), NL_DEST_NONE);
	cr_assert_eq(match_unix("/run/app.soc"), NL_DEST_NONE);
	/* an unnamed socket address: just the family */
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sun, sizeof(sa_family_t)), NL_DEST_NONE);
	/* TCP is still external, not "none" */
	cr_assert_eq(match4("10.0.0.1", 80), NL_DEST_EXTERNAL);
}

Test(dest, unix_without_rule_is_none)
{
	cr_assert_eq(nl_dest_configure(NULL), 0);
	cr_assert_eq(match_unix("/run/app.sock"), NL_DEST_NONE);
	cr_assert_eq(nl_dest_configure("db=10.0.0.1:5432,any=*:*"), 2);
	cr_assert_eq(match_unix("/run/app.sock"), NL_DEST_NONE);
	cr_assert_eq(match_unix_full("/var/run/docker.sock"), NL_DEST_NONE);
}

Test(dest, unix_rule_does_not_match_inet)
{
	cr_assert_eq(nl_dest_configure("sock=unix:/run/app.sock"), 1);
	cr_assert_eq(match4("127.0.0.1", 80), NL_DEST_EXTERNAL);
}

/* ---- order, shared names, v4-mapped, bad addresses ------------------------------ */

Test(dest, first_matching_rule_wins)
{
	cr_assert_eq(nl_dest_configure("a=10.0.0.0/8,b=10.0.0.1:80"), 2);
	cr_assert_eq(match4("10.0.0.1", 80), 1);
	cr_assert_str_eq(nl_dest_name(1), "a");

	cr_assert_eq(nl_dest_configure("b=10.0.0.1:80,a=10.0.0.0/8"), 2);
	cr_assert_eq(match4("10.0.0.1", 80), 1);
	cr_assert_str_eq(nl_dest_name(1), "b");
	cr_assert_eq(match4("10.0.0.1", 81), 2);
	cr_assert_str_eq(nl_dest_name(2), "a");

	cr_assert_eq(nl_dest_configure("x=*:443,y=10.0.0.1:443"), 2);
	cr_assert_eq(match4("10.0.0.1", 443), 1);
}

/* An IPv4 connect passes over IPv6 and Unix rules, asks a host name rule
 * only when the program resolved the name, and keeps the rules' order. */
Test(dest, ipv4_rules_of_every_kind_in_order)
{
	cr_assert_eq(nl_dest_configure("v6=[2001:db8::1]:80,u=unix:/run/x.sock,h=svc:80,n=10.0.0.0/9,"
				       "a=10.200.0.1:80,any=*:80"),
		     6);
	cr_assert_eq(match4("10.0.0.1", 80), 4);      /* h not resolved: n */
	cr_assert_eq(match4("10.127.255.255", 81), 4);   /* a network: any port */
	cr_assert_eq(match4("11.0.0.1", 81), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.128.0.0", 80), 6);    /* outside the /9: not a (other address), any */
	cr_assert_eq(match4("10.200.0.1", 80), 5);
	resolved4("svc", "10.200.0.1");
	cr_assert_eq(match4("10.200.0.1", 80), 3);    /* h first now */
	cr_assert_eq(match4("10.200.0.1", 81), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.2", 80), 4);      /* h asked, not this address: n */
	cr_assert_eq(match6("::ffff:10.200.0.1", 80), 3);
	cr_assert_eq(match6("2001:db8::1", 80), 1);
}

Test(dest, same_name_in_two_rules_is_one_destination)
{
	cr_assert_eq(nl_dest_configure("db=10.0.0.1:5432,cache=10.0.0.3:6379,db=[2001:db8::1]:5432"), 3);
	cr_assert_eq(nl_dest_count(), 2);
	cr_assert_eq(match4("10.0.0.1", 5432), 1);
	cr_assert_eq(match6("2001:db8::1", 5432), 1);
	cr_assert_eq(match4("10.0.0.3", 6379), 2);
	cr_assert_str_eq(nl_dest_name(1), "db");
	cr_assert_str_eq(nl_dest_name(2), "cache");
}

Test(dest, spaces_around_rules)
{
	cr_assert_eq(nl_dest_configure("  db=10.0.0.1:5432 ,  cache=10.0.0.3:6379  "), 2);
	cr_assert_str_eq(nl_dest_name(1), "db");
	cr_assert_str_eq(nl_dest_name(2), "cache");
	cr_assert_eq(match4("10.0.0.3", 6379), 2);
}

Test(dest, ipv4_mapped_ipv6_matches_ipv4_rules)
{
	cr_assert_eq(nl_dest_configure("local=127.0.0.1:8000,lo=127.0.0.0/8,p=*:9000"), 3);
	cr_assert_eq(match6("::ffff:127.0.0.1", 8000), 1);
	cr_assert_eq(match6("::ffff:127.1.2.3", 8000), 2);
	cr_assert_eq(match6("::ffff:192.0.2.1", 9000), 3);
	cr_assert_eq(match6("::ffff:192.0.2.1", 8000), NL_DEST_EXTERNAL);
	/* not mapped: ::127.0.0.1 (deprecated v4-compatible) is a v6 address */
	cr_assert_eq(match6("::127.0.0.1", 8000), NL_DEST_EXTERNAL);
}

/* A rule written with the very IPv4-mapped address the program connects to
 * must match that connect (or be rejected as invalid: never accepted and dead). */
Test(dest, ipv4_mapped_rule_matches_same_address)
{
	cr_assert_eq(nl_dest_configure("m=[::ffff:127.0.0.1]:80"), 1);
	cr_assert_eq(match6("::ffff:127.0.0.1", 80), 1,
		     "rule [::ffff:127.0.0.1]:80 accepted but a connect to [::ffff:127.0.0.1]:80 is not matched");
}

Test(dest, ipv4_mapped_network_rule_matches_mapped_address)
{
	cr_assert_eq(nl_dest_configure("m=::ffff:10.0.0.0/104"), 1);
	cr_assert_eq(match6("::ffff:10.1.2.3", 80), 1,
		     "rule ::ffff:10.0.0.0/104 accepted but a connect to [::ffff:10.1.2.3]:80 is not matched");
}

Test(dest, af_unspec_and_short_lengths_are_none)
{
	cr_assert_eq(nl_dest_configure("all=*:*,sock=unix:/s"), 2);

	struct sockaddr unspec;
	memset(&unspec, 0, sizeof unspec);
	unspec.sa_family = AF_UNSPEC;
	cr_assert_eq(nl_dest_match(&unspec, sizeof unspec), NL_DEST_NONE);

	struct sockaddr_in sin = addr4("10.0.0.1", 80);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin, sizeof sin), 1);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin, sizeof sin - 1), NL_DEST_NONE);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin, 4), NL_DEST_NONE);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin, 1), NL_DEST_NONE);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin, 0), NL_DEST_NONE);

	struct sockaddr_in6 sin6 = addr6("2001:db8::1", 80);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin6, sizeof sin6), 1);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin6, sizeof sin6 - 1), NL_DEST_NONE);
	cr_assert_eq(nl_dest_match((const struct sockaddr *)&sin6, sizeof(struct sockaddr_in)), NL_DEST_NONE);

	cr_assert_eq(nl_dest_match(NULL, 0), NL_DEST_NONE);
	cr_assert_eq(nl_dest_match(NULL, sizeof sin), NL_DEST_NONE);

	struct sockaddr other;
	memset(&other, 0, sizeof other);
	other.sa_family = AF_PACKET;
	cr_assert_eq(nl_dest_match(&other, sizeof other), NL_DEST_NONE);
}

/* ---- invalid rules -------------------------------------------------------------- */

Test(dest, invalid_rules_skipped_valid_ones_apply)
{
	const char *spec = "noeq,"
			   "=10.0.0.1:80,"
			   "bad=10.0.0.2:70000,"
			   "pfx=10.0.0.0/33,"
			   "v6=::1:80,"
			   "v6b=2001:db8::1:443,"
			   "junk=!!!,"
			   "ok=10.0.0.9:80,"
			   "empty=,"
			   "noport=10.0.0.3,"
			   "colon=10.0.0.3:,"
			   "neg=10.0.0.3:-1,"
			   "letters=10.0.0.3:8o,"
			   "nobracketclose=[::1:80,"
			   "nocolon=[::1]80,"
			   "noport6=[::1]:,"
			   "pfxempty=10.0.0.0/,"
			   "pfxneg=10.0.0.0/-1,"
			   "pfx6=::/129,"
			   "pfxjunk=10.0.0.0/8x,"
			   "pfxhost=example.com/8,"
			   "unixempty=unix:,"
			   "host=bad host:80,"
			   "ok2=[2001:db8::9]:443";
	cr_assert_eq(nl_dest_configure(spec), 2);
	cr_assert_eq(nl_dest_count(), 2);
	cr_assert_str_eq(nl_dest_name(1), "ok");
	cr_assert_str_eq(nl_dest_name(2), "ok2");
	cr_assert_eq(match4("10.0.0.9", 80), 1);
	cr_assert_eq(match6("2001:db8::9", 443), 2);
	cr_assert_eq(match4("10.0.0.1", 80), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.2", 4464), NL_DEST_EXTERNAL);   /* 70000 mod 65536 */
	cr_assert_eq(match4("10.0.0.5", 1), NL_DEST_EXTERNAL);
	cr_assert_eq(match6("::1", 80), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.3", 80), NL_DEST_EXTERNAL);
}

Test(dest, unix_path_too_long_is_invalid)
{
	char spec[400];
	char path[200];
	memset(path, 'p', sizeof path - 1);
	path[0] = '/';
	path[sizeof path - 1] = 0;
	snprintf(spec, sizeof spec, "long=unix:%s,ok=unix:/ok", path);
	cr_assert_eq(nl_dest_configure(spec), 1);
	cr_assert_str_eq(nl_dest_name(1), "ok");
	cr_assert_eq(match_unix("/ok"), 1);
}

/* ---- limits ---------------------------------------------------------------------- */

Test(dest, names_past_the_limit_overflow)
{
	size_t cap = 300 * 40;
	char *spec = malloc(cap);
	cr_assert_not_null(spec);
	size_t o = 0;
	for (int i = 0; i < 300; i++)
		o += (size_t)snprintf(spec + o, cap - o, "%sn%d=10.%d.%d.1:80", i ? "," : "", i, i / 256, i % 256);
	cr_assert_eq(nl_dest_configure(spec), 300);
	free(spec);
	cr_assert_eq(nl_dest_count(), NL_MAX_DEST_NAMES);

	char want[16];
	for (int i = 0; i < NL_MAX_DEST_NAMES; i++) {
		char ip[32];
		snprintf(ip, sizeof ip, "10.%d.%d.1", i / 256, i % 256);
		cr_assert_eq(match4(ip, 80), i + 1, "%s", ip);
		snprintf(want, sizeof want, "n%d", i);
		cr_assert_str_eq(nl_dest_name(i + 1), want);
	}
	for (int i = NL_MAX_DEST_NAMES; i < 300; i++) {
		char ip[32];
		snprintf(ip, sizeof ip, "10.%d.%d.1", i / 256, i % 256);
		cr_assert_eq(match4(ip, 80), NL_DEST_OVERFLOW, "%s", ip);
	}
	cr_assert_str_eq(nl_dest_name(NL_DEST_OVERFLOW), "overflow");
	/* an address no rule names is still external */
	cr_assert_eq(match4("192.0.2.1", 80), NL_DEST_EXTERNAL);
}

Test(dest, existing_names_still_resolve_after_name_limit)
{
	size_t cap = 300 * 40;
	char *spec = malloc(cap);
	cr_assert_not_null(spec);
	size_t o = 0;
	for (int i = 0; i < 260; i++)
		o += (size_t)snprintf(spec + o, cap - o, "%sn%d=10.0.%d.1:80", i ? "," : "", i, i % 256);
	/* a name seen before the limit keeps its index in a later rule */
	o += (size_t)snprintf(spec + o, cap - o, ",n5=192.0.2.5:80");
	cr_assert_eq(nl_dest_configure(spec), 261);
	free(spec);
	cr_assert_eq(match4("192.0.2.5", 80), 6);
}

Test(dest, ten_thousand_rules)
{
	size_t cap = 10000 * 32;
	char *spec = malloc(cap);
	cr_assert_not_null(spec);
	size_t o = 0;
	for (int i = 0; i < 10000; i++)
		o += (size_t)snprintf(spec + o, cap - o, "%sr=10.%d.%d.%d:80", i ? "," : "", i / 65536,
				      (i / 256) % 256, i % 256);
	cr_assert_eq(nl_dest_configure(spec), NL_MAX_RULES);
	free(spec);
	cr_assert_eq(nl_dest_count(), 1);
	/* rules 0 .. NL_MAX_RULES-1 kept, the rest ignored */
	cr_assert_eq(match4("10.0.0.0", 80), 1);
	cr_assert_eq(match4("10.0.3.255", 80), 1);   /* rule 1023 */
	cr_assert_eq(match4("10.0.4.0", 80), NL_DEST_EXTERNAL);   /* rule 1024 */
	cr_assert_eq(match4("10.0.39.15", 80), NL_DEST_EXTERNAL); /* rule 9999 */
}

Test(dest, ten_thousand_distinct_rules_with_hostnames)
{
	size_t cap = 10000 * 40;
	char *spec = malloc(cap);
	cr_assert_not_null(spec);
	size_t o = 0;
	for (int i = 0; i < 10000; i++)
		o += (size_t)snprintf(spec + o, cap - o, "%sd%d=h%d.example:%d", i ? "," : "", i, i, 1 + i % 60000);
	int n = nl_dest_configure(spec);
	free(spec);
	cr_assert_gt(n, 0);
	cr_assert_leq(n, NL_MAX_RULES);
	cr_assert_leq(nl_dest_count(), NL_MAX_DEST_NAMES);
	resolved4("h0.example", "10.1.1.1");
	cr_assert_eq(match4("10.1.1.1", 1), 1);
	cr_assert_eq(match4("10.1.1.1", 2), NL_DEST_EXTERNAL);
}

/* docs/metrics.md: "at most 1024 rules and 256 distinct names are used". 300 hostname
 * rules that all name one destination are within both limits. */
Test(dest, hostname_rules_up_to_rule_limit)
{
	size_t cap = 300 * 40;
	char *spec = malloc(cap);
	cr_assert_not_null(spec);
	size_t o = 0;
	for (int i = 0; i < 300; i++)
		o += (size_t)snprintf(spec + o, cap - o, "%ssvc=h%d.example:80", i ? "," : "", i);
	int n = nl_dest_configure(spec);
	free(spec);
	cr_assert_eq(nl_dest_count(), 1);
	resolved4("h0.example", "10.7.0.1");
	cr_assert_eq(match4("10.7.0.1", 80), 1);
	resolved4("h299.example", "10.7.1.44");
	cr_assert_eq(n, 300, "only %d of 300 valid hostname rules kept", n);
	cr_assert_eq(match4("10.7.1.44", 80), 1, "rule svc=h299.example:80 dropped");
}

Test(dest, reconfigure_replaces_rules)
{
	cr_assert_eq(nl_dest_configure("a=10.0.0.1:80,b=10.0.0.2:80"), 2);
	cr_assert_eq(nl_dest_configure("c=10.0.0.2:80"), 1);
	cr_assert_eq(nl_dest_count(), 1);
	cr_assert_eq(match4("10.0.0.1", 80), NL_DEST_EXTERNAL);
	cr_assert_eq(match4("10.0.0.2", 80), 1);
	cr_assert_str_eq(nl_dest_name(1), "c");
}

/* ---- the resolved-address ring ------------------------------------------------- */

Test(dest, resolved_ring_wraps_without_misattribution)
{
	cr_assert_eq(nl_dest_configure("a=svc-a.example:80,b=svc-b.example:80"), 2);
	enum { N = 600, RING = 512 };
	char ip[32];
	for (int i = 0; i < N; i++) {
		snprintf(ip, sizeof ip, "10.1.%d.%d", i / 256, i % 256);
		resolved4("svc-a.example", ip);
	}
	/* the most recent resolutions are remembered; older ones may be
	 * forgotten, but are never someone else's */
	for (int i = 0; i < N; i++) {
		snprintf(ip, sizeof ip, "10.1.%d.%d", i / 256, i % 256);
		int d = match4(ip, 80);
		if (i >= N - RING)
			cr_assert_eq(d, 1, "%s (resolution %d) forgotten", ip, i);
		else
			cr_assert(d == 1 || d == NL_DEST_EXTERNAL, "%s gave %d", ip, d);
	}

	/* svc-b's addresses, written over svc-a's slots */
	for (int i = 0; i < N; i++) {
		snprintf(ip, sizeof ip, "10.2.%d.%d", i / 256, i % 256);
		resolved4("svc-b.example", ip);
	}
	for (int i = 0; i < N; i++) {
		snprintf(ip, sizeof ip, "10.2.%d.%d", i / 256, i % 256);
		int d = match4(ip, 80);
		if (i >= N - RING)
			cr_assert_eq(d, 2, "%s (resolution %d) forgotten", ip, i);
		else
			cr_assert(d == 2 || d == NL_DEST_EXTERNAL, "%s gave %d", ip, d);
		snprintf(ip, sizeof ip, "10.1.%d.%d", i / 256, i % 256);
		d = match4(ip, 80);
		cr_assert(d == 1 || d == NL_DEST_EXTERNAL, "svc-a's %s gave %d", ip, d);
	}
}

Test(dest, same_address_for_two_hosts)
{
	cr_assert_eq(nl_dest_configure("a=svc-a.example:80,b=svc-b.example:81"), 2);
	resolved4("svc-a.example", "10.9.9.9");
	resolved4("svc-b.example", "10.9.9.9");
	cr_assert_eq(match4("10.9.9.9", 80), 1);
	cr_assert_eq(match4("10.9.9.9", 81), 2);
	cr_assert_eq(match4("10.9.9.9", 82), NL_DEST_EXTERNAL);
}

Test(dest, repeated_resolution_of_one_address_keeps_it)
{
	cr_assert_eq(nl_dest_configure("a=svc-a.example:80,b=svc-b.example:80"), 2);
	resolved4("svc-a.example", "10.3.3.3");
	/* the program resolves the same name again and again */
	for (int i = 0; i < 2000; i++)
		resolved4("svc-a.example", "10.3.3.3");
	cr_assert_eq(match4("10.3.3.3", 80), 1);
	resolved4("svc-b.example", "10.4.4.4");
	cr_assert_eq(match4("10.4.4.4", 80), 2);
	cr_assert_eq(match4("10.3.3.3", 80), 1);
}
