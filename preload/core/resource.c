/* SPDX-License-Identifier: Apache-2.0 */
#include "resource.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

/* A random (version 4) UUID: unique per process, so many workers of one
 * service never collide in a backend. */
static void make_uuid(char out[37])
{
	unsigned char b[16];
	if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
		/* No entropy yet (very early boot): time and pid still differ per process. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		unsigned long long x = (unsigned long long)ts.tv_nsec ^ ((unsigned long long)ts.tv_sec << 20) ^
				       ((unsigned long long)getpid() << 40);
		for (int i = 0; i < 16; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			b[i] = (unsigned char)x;
		}
	}
	b[6] = (unsigned char)((b[6] & 0x0F) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3F) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void read_executable(char *out, size_t size)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	const char *name = program_invocation_short_name;
	if (n > 0) {
		path[n] = 0;
		const char *slash = strrchr(path, '/');
		name = slash ? slash + 1 : path;
	}
	if (!name)
		name = "unknown";
	size_t len = strnlen(name, size - 1);
	memcpy(out, name, len);
	out[len] = 0;
	if (!nl_utf8_valid(out, strlen(out)))
		for (char *p = out; *p; p++)
			if (*p & 0x80)
				*p = '?';
}

static void add(struct nl_resource *r, struct nl_attr a)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->attrs[i].key, a.key) == 0)
			return;   /* the first value of a key wins */
	if (r->n < sizeof r->attrs / sizeof *r->attrs)
		r->attrs[r->n++] = a;
}

void nl_resource_build(struct nl_resource *r, const struct nl_config *cfg)
{
	int saved = errno;
	r->n = 0;
	make_uuid(r->instance_id);
	if (gethostname(r->host_name, sizeof r->host_name) != 0 || !nl_utf8_valid(r->host_name, strlen(r->host_name)))
		snprintf(r->host_name, sizeof r->host_name, "unknown");
	r->host_name[sizeof r->host_name - 1] = 0;
	read_executable(r->executable, sizeof r->executable);

	add(r, NL_ATTR_S("service.name", cfg->service_name ? cfg->service_name : cfg->server_name));
	/* Explicit attributes from the environment win over detected ones. */
	for (size_t i = 0; i < cfg->n_resource; i++)
		add(r, NL_ATTR_S(cfg->resource[i].name, cfg->resource[i].value));
	add(r, NL_ATTR_S("service.instance.id", r->instance_id));
	add(r, NL_ATTR_S("host.name", r->host_name));
	add(r, NL_ATTR_I("process.pid", getpid()));
	add(r, NL_ATTR_S("process.executable.name", r->executable));
	add(r, NL_ATTR_S("telemetry.sdk.name", "nemolens-preload"));
	add(r, NL_ATTR_S("telemetry.sdk.language", "c"));
	add(r, NL_ATTR_S("telemetry.sdk.version", NL_VERSION));
	add(r, NL_ATTR_S("nemo.gym.server.name", cfg->server_name));
	add(r, NL_ATTR_S("nemo.gym.server.type", cfg->server_type));
	if (cfg->run_id)
		add(r, NL_ATTR_S("nemo.run.id", cfg->run_id));
	errno = saved;
}
