/* SPDX-License-Identifier: Apache-2.0 */
/* clone(): a child made without CLONE_VM is a new process with a copy of
 * its parent's memory, as a fork child is, but libc runs no fork handlers
 * for it. The shim's own run around it (fork.h), so the child finds no lock
 * of the shim's held by a thread it does not have, and records as a child
 * of its own. Threads and vfork-like children (CLONE_VM) share the parent's
 * memory: their call is libc's alone.
 *
 * libc declares clone(fn, stack, flags, arg, ...); this definition takes
 * the three optional arguments as fixed ones, which libc's clone reads from
 * their registers whether the caller passed them or not. <sched.h>, which
 * has the variadic declaration, stays out of this file.
 */
#include <linux/sched.h>

#include "export_sym.h"
#include "fork.h"
#include "real.h"

NL_EXPORT_COLD int clone(nl_clone_body fn, void *stack, int flags, void *arg, void *ptid, void *tls, void *ctid)
{
	if (flags & CLONE_VM)
		return NL_REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
	return nl_fork_clone(NL_REAL(clone), fn, stack, flags, arg, ptid, tls, ctid);
}
