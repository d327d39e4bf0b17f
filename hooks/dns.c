/* SPDX-License-Identifier: Apache-2.0 */
/* getaddrinfo: the original, plus noting what the program resolved for the
 * hostnames that destination rules name (the shim does no DNS of its own). */
#include <netdb.h>

#include "check.h"
#include "dest.h"
#include "export_sym.h"
#include "state.h"
#include "real.h"

NL_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
			  struct addrinfo **res)
{
	int r = NL_REAL(getaddrinfo)(node, service, hints, res);
	if (r == 0 && !nl_hooks_bypass && atomic_load_explicit(&nl_recording, memory_order_relaxed)) {
		NL_KEEP_ERRNO;
		nl_dest_note_resolved(node, *res);
	}
	return r;
}
