/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the /proc parsers of the memory sampler and of the process figures
 * (preload/core/procfs.c): the same bytes go to every parser, as if any file
 * could hold anything. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	nl_log_set_level(NL_LOG_NONE);
	/* An exact-size copy, so that reading past the end is caught. */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);

	struct nl_proc_stat st;
	if (nl_parse_stat(buf, size, &st) == 0 &&
	    (st.pid <= 0 || strlen(st.comm) >= sizeof st.comm || (!st.has_rss && st.rss_pages)))
		abort();
	struct nl_proc_switches sw;
	if (nl_parse_status_switches(buf, size, &sw) != 0 && (sw.voluntary || sw.involuntary))
		abort();
	uint64_t v;
	nl_parse_statm(buf, size, &v);
	nl_parse_status_vmrss(buf, size, &v);
	if (nl_parse_smaps_rollup_pss(buf, size, &v) == 0 && v % 1024)
		abort();
	struct nl_meminfo mi;
	if (nl_parse_meminfo(buf, size, &mi) == 0 && mi.available > mi.total)
		abort();
	static const char *const keys[] = { "LD_PRELOAD", "NEMOLENS_SERVER_NAME", "A", "" };
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
		size_t n;
		const char *p = nl_environ_get(buf, size, keys[i], &n);
		if (p && (p < buf || p + n > buf + size))
			abort();
	}
	struct nl_env_role role;
	nl_environ_role(buf, size, &role);
	if (role.other_root && !(role.preloaded && role.profiling))
		abort();
	free(buf);
	return 0;
}
