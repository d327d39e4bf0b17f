/* SPDX-License-Identifier: Apache-2.0 */
/* Segments: the registry's memory as a file that another process can read
 * after this one is gone, so that nothing recorded is lost however a process
 * ends (docs/export.md; the format: docs/internals.md).
 *
 * The registry allocates its instruments, series and their strings from one
 * arena. When the private directory can be used (below), the arena is a file
 * there, mapped MAP_SHARED: the value atomics the hooks update ARE the file's
 * bytes, so recording costs what it did and nothing has to be written out
 * when the process dies. Records refer to each other by offsets from the
 * arena's start, never by pointers, so a reader in another process can walk
 * them (pointers the registry keeps for itself are ignored by readers).
 *
 * Life of a segment, a file "<delivery key>-<pid>" (segment.c):
 *   load        nothing is created: the arena is anonymous memory; a file
 *               an earlier image of this pid left (before an exec) is
 *               renamed for delivery
 *   1st record  (or fork: the parent delivers what its children leave) the
 *               private directory is set up, the arena copied into the file
 *               (O_EXCL, 0600, sized ahead with fallocate), which is mapped
 *               over it in one step while the runtime holds other recording
 *               threads back; then the identity (pid, start time, boot id,
 *               pid namespace, resource) is written, then the state "live".
 *               No descriptor is kept (a program may list or close its
 *               descriptors)
 *   exit        after the exit flush the file is removed (kept when that
 *               flush failed, for another process to deliver); a process
 *               that recorded nothing created nothing
 *   any death   the file stays. A reader (another shim process of the user
 *               or nemolens-run) judges the owner gone when its pid is dead,
 *               or reused (start time), or no longer maps the file (an exec,
 *               a zombie); exports the segment under the dead process's
 *               resource and start time; and removes it only after the
 *               collector took it. Readers lock a file (flock) while they
 *               judge and deliver it: one delivers, the others pass; the
 *               owner takes the lock only to take its export back from a
 *               nemolens-run that is gone (nl_seg_take_export)
 *   fork        the child reads its parent's file until its first record,
 *               which copies it into a file of the child's own at the same
 *               address (every pointer stays valid) and zeroes its values:
 *               a child that only execs copies nothing
 *   exec        the new image finds its predecessor's file under its own
 *               name and renames it ("-x" names) for delivery
 *
 * The private directory is $XDG_RUNTIME_DIR/nemolens when XDG_RUNTIME_DIR is
 * a private tmpfs directory of this user, else /dev/shm/nemolens-<uid>,
 * created 0700; it must be a directory (not a symlink) owned by the user,
 * with no group or other permission bits, on tmpfs. Otherwise the arena is
 * anonymous memory and the process behaves as without segments.
 *
 * This process's segment is segment.c's, the directory segdir.c's; other
 * processes' segments are read, claimed and released through
 * preload/readers/segread.h.
 */
#ifndef NL_SEGMENT_H
#define NL_SEGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "snapshot.h"

#define NL_SEG_MAGIC "NLSEGMT"          /* 8 bytes with its NUL; never changes */
#define NL_SEG_VERSION 2                /* the header's layout */
#define NL_SEG_DATA 512                 /* offset of the first allocation */

enum nl_seg_state {
	NL_SEG_UNNAMED,                 /* never seen by others */
	NL_SEG_LIVE,                    /* named: the owner runs, or died and it waits for delivery */
	NL_SEG_DONE,                    /* delivered (or folded): only removal is left */
};

enum {
	NL_SEG_DELTA_COUNTERS = 1,
	NL_SEG_DELTA_HISTOGRAMS = 2,
	/* Its memory sampler's roles (memsampler.h): a server root, the
	 * outermost process. Set at publication, so a fork child, which has
	 * none, does not inherit them with its copy of the arena. */
	NL_SEG_MEM_ROOT = 4,
	NL_SEG_MEM_OUTERMOST = 8,
	/* The process's figures from /proc are wanted (NEMOLENS_PROCESS_METRICS;
	 * procmetrics.h): whoever exports it samples them into its header. */
	NL_SEG_PROC_METRICS = 16,
};

/* What /proc said of the owner at its last sample (procmetrics.h), kept in
 * the header so that a process sampled by another one (nemolens-run) needs
 * no series of its own for it, and a dead process keeps its last values.
 * Written by whoever exports the segment, read with it; each field stands
 * alone, as every value of a segment does, and the cumulative ones only
 * ever grow. */
struct nl_seg_proc {
	_Atomic uint64_t have;          /* NL_PROC_HAVE_* of procmetrics.h: which fields hold a value */
	_Atomic uint64_t cpu_user_ns, cpu_system_ns;
	_Atomic uint64_t switches_voluntary, switches_involuntary;
	_Atomic uint64_t rss_bytes;
	_Atomic uint64_t threads;
	_Atomic uint64_t fds;
};

/* An attribute as a segment keeps it. */
struct nl_sattr {
	uint64_t key;                   /* offset of the NUL-terminated key */
	uint32_t type;                  /* enum nl_attr_type */
	uint32_t reserved;
	union {
		uint64_t s;             /* offset of the NUL-terminated string */
		int64_t i;
		uint64_t b;
		uint64_t d;             /* double bits */
	} v;
};

/* An attribute's value other than a string (whose offset each reader
 * resolves its own way), from its record into out: false for a type that
 * has no such value. */
static inline bool nl_sattr_scalar(const struct nl_sattr *a, struct nl_attr *out)
{
	switch (a->type) {
	case NL_ATTR_INT:
		out->v.i = a->v.i;
		return true;
	case NL_ATTR_BOOL:
		out->v.b = a->v.b != 0;
		return true;
	case NL_ATTR_DOUBLE:
		__builtin_memcpy(&out->v.d, &a->v.d, sizeof(double));
		return true;
	}
	return false;
}

struct nl_seg_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint32_t layout;                /* the registry's record layout (nl_registry_layout) */
	_Atomic uint32_t state;         /* enum nl_seg_state */
	uint64_t capacity;              /* the address range reserved for the arena */
	_Atomic uint64_t used;          /* bytes handed out */
	_Atomic uint64_t backed;        /* bytes that exist in the file (allocated ahead) */
	_Atomic uint64_t root;          /* the registry's: offset of its newest instrument */
	/* The identity, written before the file gets its name. */
	char boot_id[40];               /* /proc/sys/kernel/random/boot_id */
	char instance_id[40];           /* service.instance.id */
	int64_t pid;
	uint64_t pidns;                 /* inode of the pid namespace pid is in */
	uint64_t proc_start;            /* /proc/<pid>/stat field 22: ticks after boot */
	uint32_t uid;
	uint32_t flags;                 /* NL_SEG_DELTA_* */
	uint64_t start_unix_ns;         /* start of every cumulative series */
	uint64_t delivery_key;          /* where its metrics go (nl_seg_delivery_key) */
	uint64_t resource;              /* offset of struct nl_sattr[n_resource] */
	uint32_t n_resource;
	uint32_t interval_ms;
	_Atomic uint64_t heartbeat_ns;  /* CLOCK_REALTIME of the owner's last sign of life */
	_Atomic uint32_t exported;      /* an export under this identity may have reached a collector */
	/* The pid of the process that exports this segment while its owner
	 * lives (nemolens-run, for its tree), 0: the owner exports itself. */
	_Atomic uint32_t exporter;
	struct nl_seg_proc proc;
};
_Static_assert(sizeof(struct nl_seg_header) <= NL_SEG_DATA, "the header fits before the first record");

/* ---- this process's arena ------------------------------------------------ */

/* Start of the arena (its header), NULL before the first use. */
extern char *nl_seg_base;

static inline void *nl_seg_ptr(uint64_t off) { return nl_seg_base + off; }
static inline struct nl_seg_header *nl_seg_header(void) { return (struct nl_seg_header *)nl_seg_base; }

/* An anonymous arena of capacity bytes if there is none yet (unit tests,
 * and every process without the private directory). Not thread-safe: the
 * registry calls it under its lock. */
void nl_seg_arena_ensure(size_t capacity);
/* From the constructor, before anything is recorded: the arena becomes a
 * file in the private directory when it publishes, and an earlier image's
 * file under this pid is set aside for delivery. The arena itself is made
 * by the registry's first use, not here: a process that never records
 * reserves and touches none of it. Returns 0, or -1 (the arena stays
 * anonymous). */
int nl_seg_open(const struct nl_config *cfg);
/* The arena is a file others can read. */
bool nl_seg_shared(void);

/* size bytes of zeroed arena, 16-byte aligned; the offset, or 0 when the
 * arena is full. Lock-free and allocation-free (hooks create series): a
 * file is extended ahead of use, in steps, with fallocate, so that a full
 * tmpfs makes the allocation fail instead of the program take a SIGBUS. */
uint64_t nl_seg_alloc(size_t size);
/* A copy of s in the arena (offset), 0 when full. Hook-safe. */
uint64_t nl_seg_copy_str(const char *s);
/* Copies n attributes into the arena, records and strings in one block:
 * *out is the offset of struct nl_sattr[n] (0 when n is 0). False when the
 * arena is full. Hook-safe. */
bool nl_seg_put_attrs(const struct nl_attr *in, size_t n, uint64_t *out);

/* What a segment says about its process. */
struct nl_seg_identity {
	const struct nl_attr *resource;
	size_t n_resource;
	const char *instance_id;
	uint64_t start_unix_ns;
	uint32_t flags;                 /* NL_SEG_DELTA_* */
	uint32_t interval_ms;
	uint64_t delivery_key;
	uint32_t exporter;              /* nl_seg_header.exporter */
};

/* At the process's first recording: writes the identity, then the state
 * "live". Async-signal-safe (no stdio, no malloc), since the first record
 * may happen in a signal handler. True when the segment is (now) published. */
bool nl_seg_publish(const struct nl_seg_identity *id);
bool nl_seg_published(void);
/* The owner is alive (its background thread calls this at every wake). */
void nl_seg_heartbeat(void);
/* Before an export under this process's identity: from now on the segment
 * is delivered under that identity, never folded into another process. */
void nl_seg_mark_exported(void);
bool nl_seg_exported(void);
/* The exit flush is done (or nothing was recorded): the file is removed. */
void nl_seg_remove(void);
/* The exit flush is about to send: when it fails, may the file stay, for
 * another process to deliver? Only when the file holds everything (no
 * anonymous tail) and fewer than NL_SEG_KEEP_MAX files are in the
 * directory: a collector that is gone for good must not fill the user's
 * tmpfs. */
#define NL_SEG_KEEP_MAX 1000
bool nl_seg_keepable(void);
/* A fork child, single-threaded. True: the arena is the child's own copy
 * (anonymous memory), whose values the registry zeroes now. False: it is
 * still the parent's file, which the child only reads until its first
 * record copies it into a file of its own and zeroes the values there
 * (nl_seg_publish); until then nl_seg_inherited() is true and the child has
 * nothing of its own to export. */
bool nl_seg_atfork_child(void);
bool nl_seg_inherited(void);
/* The constructor found the segment an earlier image of this pid (before an
 * exec) left, published, and renamed it for delivery. */
bool nl_seg_predecessor_found(void);
/* The segment of process pid with this delivery key is published: that
 * process recorded or forked, so its background thread delivers leftovers. */
bool nl_seg_pid_published(int pid, uint64_t key);

/* The pid that exports this process's live segment (0: none, it exports
 * itself), and whether that process is alive. */
uint32_t nl_seg_exporter(void);
bool nl_seg_exporter_alive(void);
/* This process exports itself from now on (0), or pid does. */
void nl_seg_set_exporter(uint32_t pid);
/* The exporter named is gone: takes the export back (exporter 0) and
 * returns true, unless a successor named itself meanwhile (false). True
 * too when no exporter is named. */
bool nl_seg_take_export(void);

/* ---- the directory --------------------------------------------------------- */

/* Identifies the destination: the endpoint and what is sent with it
 * (headers, client certificate). Segments are delivered only by processes
 * whose key is the same, so a leftover never goes to another collector or
 * tenant than the one its process was configured for. */
uint64_t nl_seg_delivery_key(const struct nl_config *cfg);
/* The private directory alone, for readers that have no arena of their own
 * (nemolens-run). 0, or -1 when there is no usable directory. */
int nl_seg_configure(const struct nl_config *cfg);

/* For tests: the directory in use ("" when none). */
const char *nl_seg_dir(void);

#endif
