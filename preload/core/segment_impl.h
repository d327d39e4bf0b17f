/* SPDX-License-Identifier: Apache-2.0 */
/* What the segment files share and nothing else sees: this process's
 * segment (segment.c), the directory segments live in (segdir.c), and the
 * readers of other processes' segments (preload/readers/segread.c).
 */
#ifndef NL_SEGMENT_IMPL_H
#define NL_SEGMENT_IMPL_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <unistd.h>

#include "config.h"
#include "segment.h"

/* The effective uid (files are owned by it), asked once. Threads may ask
 * at once (the launcher's export and its reaper): the value is the same
 * for all, kept with relaxed atomics so that none reads it half written. */
static inline uid_t nl_seg_euid(void)
{
	static _Atomic uid_t uid = (uid_t)-1;
	uid_t u = atomic_load_explicit(&uid, memory_order_relaxed);
	if (u == (uid_t)-1) {
		u = geteuid();
		atomic_store_explicit(&uid, u, memory_order_relaxed);
	}
	return u;
}

static inline bool nl_seg_pid_alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

/* ---- segdir.c ---------------------------------------------------------------- */

/* v in decimal at out (no NUL); its length. On the load path. */
size_t nl_seg_put_dec(char *out, uint64_t v);
/* The whole of fd's first len bytes. */
bool nl_seg_read_all(int fd, uint8_t *buf, size_t len);
/* This boot's id, read once (NUL-terminated, 40 bytes). */
const char *nl_seg_boot_id(void);
/* Field 22 of a /proc/<pid>/stat file; of process pid. 0 when unknown. */
uint64_t nl_seg_proc_start(const char *stat_path);
uint64_t nl_seg_pid_start(int pid);
/* Inode of this process's pid namespace, 0 when unknown. */
uint64_t nl_seg_own_pidns(void);

/* The directory is set up from cfg at its first use (nl_seg_open). */
void nl_seg_dir_defer(const struct nl_config *cfg);
/* The private directory, open, set up at the first call; -1 when there is
 * none. */
int nl_seg_open_dir(void);
/* A fork child: a parent's thread may have been setting it up. */
void nl_seg_dir_atfork_child(void);

/* ---- segment.c --------------------------------------------------------------- */

/* name is this process's own file (readers pass it). */
bool nl_seg_own_file(const char *name);

#endif
