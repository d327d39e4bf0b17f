/* SPDX-License-Identifier: Apache-2.0 */
/* This process's segment (segment.h): the arena, its file, and what the
 * process does with it from load to exit, fork and exec included.
 *
 * Everything here that can run on a hook's path (nl_seg_alloc and the
 * copies, from series the hooks create; nl_seg_publish, from the first
 * record of a process, possibly in a signal handler; nl_seg_atfork_child)
 * makes system calls only: no stdio, no malloc, no locks, errno kept. The
 * directory is segdir.c's; other processes' segments are read in
 * preload/readers/segread.c.
 *
 * The shim's own files use the plain libc calls, on threads or in sections
 * where the hooks are bypassed, so that interceptors (a sanitizer's) see
 * every open paired with its close.
 */
#include "segment_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "loadpath.h"
#include "log.h"
#include "forkpath.h"
#include "registry.h"
#include "state.h"

/* The first part of the file holds what the registry creates at load
 * (about 15 KiB): every page of it costs every exec a page fault. It then
 * grows by half its size at a time, at least STEP. */
#define FIRST (16u * 1024u)
#define STEP (16u * 1024u)

enum { MODE_NONE, MODE_ANON, MODE_FILE };

NL_LOAD_STATE char *nl_seg_base;
static int mode;
NL_LOAD_STATE static uint64_t own_key;  /* delivery key, part of this process's file names */
NL_LOAD_STATE static pid_t self_pid;
static dev_t seg_dev;
static ino_t seg_ino;
static _Atomic bool full;               /* the arena cannot grow: allocations fail */
/* The file could not grow (a full tmpfs, or a process that dropped its
 * privileges and may no longer open it): the rest of the arena is then
 * anonymous memory. 0 file, 1 switching, 2 anonymous, 3 failed. */
static _Atomic int tail;
static _Atomic bool published;
NL_LOAD_STATE static bool want_file;    /* the directory is usable: the arena becomes a file when it publishes */
/* A fork child that has not recorded yet: its arena is still its parent's
 * file, which it only reads, until its first record gives it a file of its
 * own (to_file). A child that only execs, as a shell's do, copies nothing. */
static bool inherited;
NL_LOAD_STATE static bool predecessor;
static char own_name[96];

static bool replace_mapping(void *from, size_t capacity);
static void remove_name(void);

/* ---- small helpers, async-signal-safe --------------------------------------- */

static size_t put_hex64(char *out, uint64_t v)
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++)
		out[i] = hex[(v >> (60 - 4 * i)) & 15];
	return 16;
}

/* "<key>-<pid>": the name of a process's segment. */
NL_LOAD_PATH static size_t seg_name(char *out, uint64_t key, uint64_t pid)
{
	size_t n = put_hex64(out, key);
	out[n++] = '-';
	n += nl_seg_put_dec(out + n, pid);
	out[n] = 0;
	return n;
}

/* ---- the arena ------------------------------------------------------------- */

static void init_header(struct nl_seg_header *h, size_t capacity, uint64_t backed)
{
	memcpy(h->magic, NL_SEG_MAGIC, 8);
	h->version = NL_SEG_VERSION;
	h->header_size = sizeof *h;
	h->layout = nl_registry_layout();
	h->capacity = capacity;
	h->uid = (uint32_t)nl_seg_euid();
	/* Who owns even an unpublished file: others remove it once this
	 * process is gone (and leave it alone when it is in another pid
	 * namespace, where its pid means something else). */
	h->pid = self_pid ? self_pid : getpid();
	h->pidns = nl_seg_own_pidns();
	atomic_store(&h->used, NL_SEG_DATA);
	atomic_store(&h->backed, backed);
}

void nl_seg_arena_ensure(size_t capacity)
{
	if (nl_seg_base)
		return;
	/* Reserved, not committed: only what is used becomes memory. */
	void *p = mmap(NULL, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return;
	if (mprotect(p, FIRST, PROT_READ | PROT_WRITE) != 0) {
		munmap(p, capacity);
		return;
	}
	init_header(p, capacity, FIRST);
	mode = MODE_ANON;
	nl_seg_base = p;
}

bool nl_seg_shared(void) { return mode == MODE_FILE; }

/* What an existing file named like ours holds: an earlier image of this
 * pid (before an exec), or a dead process that had the pid. Published, it
 * is renamed out of the way, for delivery ("-x" names); else it holds
 * nothing to deliver and goes. A file of a process in another pid
 * namespace (same pid, alive there) is left alone: false. */
static bool clear_name(int dfd, const char *name, size_t len)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	struct nl_seg_header h;
	struct stat st;
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == nl_seg_euid();
	bool readable = ok && nl_seg_read_all(fd, (uint8_t *)&h, sizeof h) && memcmp(h.magic, NL_SEG_MAGIC, 8) == 0;
	close(fd);
	if (!ok)
		return false;
	if (readable && h.pidns && h.pidns != nl_seg_own_pidns())
		return false;
	if (readable && atomic_load(&h.state) == NL_SEG_LIVE) {
		char to[96];
		memcpy(to, name, len);
		memcpy(to + len, "-x", 2);
		size_t n = len + 2 + put_hex64(to + len + 2, (uint64_t)st.st_ino ^ nl_realtime_ns());
		to[n] = 0;
		if (renameat2(dfd, name, dfd, to, RENAME_NOREPLACE) != 0)
			return false;
		predecessor = true;
		return true;
	}
	return unlinkat(dfd, name, 0) == 0 || errno == ENOENT;
}

/* This process's file, "<key>-<pid>", size bytes long, mapped over
 * capacity bytes; with hdr (and the arena `from`, copy bytes of it) written
 * first when given. The file carries its one name from the process's first
 * record to its end: whether it holds anything to deliver is in its header
 * (state). No descriptor is kept: a process holds none of the shim's
 * descriptors (a program may list or close them), and the mapping alone
 * tells others it is alive (segread.c). Returns the mapping or MAP_FAILED. */
static void *new_file(int dfd, uint64_t size, size_t capacity, const struct nl_seg_header *hdr, const void *from,
		      uint64_t copy)
{
	char name[96];
	size_t len = seg_name(name, own_key, (uint64_t)self_pid);
	int fd = openat(dfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		if (clear_name(dfd, name, len)) {
			fd = openat(dfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
		} else {
			/* A name of our own, then. */
			name[len] = '-';
			name[len + 1] = 'n';
			name[len + 2 + put_hex64(name + len + 2, nl_realtime_ns())] = 0;
			fd = openat(dfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
		}
	}
	void *p = MAP_FAILED;
	struct stat st;
	/* 0600 exactly, whatever the umask: the file is reopened for writing. */
	bool ok = fd >= 0 && fstat(fd, &st) == 0 && ((st.st_mode & 0777) == 0600 || fchmod(fd, 0600) == 0) &&
		  fallocate(fd, 0, 0, (off_t)size) == 0;
	/* The header first: the file never shows another process's identity
	 * under this one's name. */
	if (ok && hdr)
		ok = pwrite(fd, hdr, sizeof *hdr, 0) == (ssize_t)sizeof *hdr;
	for (uint64_t off = NL_SEG_DATA; ok && off < copy;) {
		ssize_t w = pwrite(fd, (const char *)from + off, copy - off, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		ok = w > 0;
		off += ok ? (uint64_t)w : 0;
	}
	if (ok)
		p = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED && fd >= 0) {
		unlinkat(dfd, name, 0);
	} else if (p != MAP_FAILED) {
		seg_dev = st.st_dev;
		seg_ino = st.st_ino;
		memcpy(own_name, name, sizeof own_name);
	}
	return p;
}

NL_LOAD_PATH int nl_seg_open(const struct nl_config *cfg)
{
	if (nl_seg_base)
		return want_file ? 0 : -1;
	own_key = nl_seg_delivery_key(cfg);
	self_pid = getpid();
	nl_seg_dir_defer(cfg);
	want_file = true;
	/* An earlier image of this pid (before an exec) may have left a file
	 * under our name, in either place the directory can be: it is taken
	 * out of the way now, for delivery (if it cannot be, new_file picks a
	 * name of its own). Most often there is none: two failed lookups. */
	char name[96], path[PATH_MAX];
	size_t len = seg_name(name, own_key, (uint64_t)self_pid);
	const char *xdg = cfg->runtime_dir;
	bool there = false;
	/* Joined by hand, not by snprintf: every process does this at load,
	 * and printf's pages would cost it page faults. */
	size_t n;
	if (xdg && xdg[0] == '/' && (n = strlen(xdg)) + len + 12 < sizeof path) {
		memcpy(path, xdg, n);
		memcpy(path + n, "/nemolens/", 10);
		memcpy(path + n + 10, name, len + 1);
		there = faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	}
	if (!there) {
		memcpy(path, "/dev/shm/nemolens-", 18);
		n = 18 + nl_seg_put_dec(path + 18, nl_seg_euid());
		path[n++] = '/';
		memcpy(path + n, name, len + 1);
		there = faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	}
	int dfd = there ? nl_seg_open_dir() : -1;
	if (dfd >= 0) {
		if (faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			clear_name(dfd, name, len);
		close(dfd);
	}
	return 0;
}

/* The arena's identity reset, for a copy that becomes this process's. */
static void fresh_header(struct nl_seg_header *h)
{
	atomic_store(&h->state, NL_SEG_UNNAMED);
	atomic_store(&h->exported, 0);
	atomic_store(&h->exporter, 0);
	h->pid = self_pid;
	h->proc_start = 0;
	h->resource = 0;
	h->n_resource = 0;
	/* The parent's figures are not the child's. */
	memset(&h->proc, 0, sizeof h->proc);
}

/* A private copy of the arena at its own address, in place of the parent's
 * file: the fallback of a fork child that cannot have a file. */
static bool own_copy(void)
{
	struct nl_seg_header *h = nl_seg_header();
	size_t capacity = h->capacity;
	uint64_t used = atomic_load(&h->used), backed = atomic_load(&h->backed);
	if (used > backed)
		used = backed;
	uint64_t size = (used + 4095) / 4096 * 4096;
	void *p = mmap(NULL, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	if (mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
		munmap(p, capacity);
		return false;
	}
	memcpy(p, nl_seg_base, used);
	atomic_store(&((struct nl_seg_header *)p)->used, used);
	nl_registry_mend_copy(p, used);
	if (!replace_mapping(p, capacity))
		return false;
	mode = MODE_ANON;
	atomic_store(&tail, 0);
	h = nl_seg_header();
	atomic_store(&h->backed, size);
	fresh_header(h);
	return true;
}

/* The arena becomes a file, at the first record (the runtime holds every
 * other recording thread back meanwhile, and signals): a copy of it is
 * written to the file, which is then mapped over it in one step, so every
 * pointer stays valid. mode says FILE from just before the switch: a fork
 * at any moment of it gives the child a private copy of what is mapped. A
 * fork child's copy is of its parent's file, whose values it then zeroes. */
static bool to_file(void)
{
	struct nl_seg_header *h = nl_seg_header();
	size_t capacity = h->capacity;
	uint64_t size = atomic_load(&h->backed), used = atomic_load(&h->used);
	if (used > size)
		used = size;
	struct nl_seg_header fresh = *h;
	fresh_header(&fresh);
	/* A fork child copies its parent's file while the parent's threads go
	 * on writing it: the copy holds [0, used), and what lies past it is the
	 * parent's alone (nl_registry_mend_copy). */
	if (inherited)
		atomic_store(&fresh.used, used);
	int dfd = nl_seg_open_dir();
	void *p = dfd >= 0 ? new_file(dfd, size, capacity, &fresh, nl_seg_base, used) : MAP_FAILED;
	if (dfd >= 0)
		close(dfd);
	bool ok = p != MAP_FAILED;
	if (ok && inherited)
		nl_registry_mend_copy(p, used);
	if (ok) {
		mode = MODE_FILE;
		if (!replace_mapping(p, capacity)) {
			mode = inherited ? MODE_FILE : MODE_ANON;
			remove_name();
			ok = false;
		}
	}
	if (inherited) {
		if (!ok && !own_copy())
			atomic_store(&nl_recording, false);   /* still the parent's memory */
		inherited = false;
		nl_registry_reset_values();
	}
	return ok;
}

bool nl_seg_inherited(void) { return inherited; }

NL_FORK_PATH bool nl_seg_predecessor_found(void) { return predecessor; }

/* The file grows by [cur, want): opened again by its name (it keeps no
 * descriptor), checked to be the same file. */
static bool grow_file(uint64_t cur, uint64_t want)
{
	char path[PATH_MAX + 100];
	const char *dir = nl_seg_dir();
	size_t d = strlen(dir);
	memcpy(path, dir, d);
	path[d] = '/';
	bool ok = false;
	/* The name changes once (publishing): the other one is tried too. */
	for (int attempt = 0; attempt < 2 && !ok; attempt++) {
		memcpy(path + d + 1, own_name, sizeof own_name);
		int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st;
		ok = fstat(fd, &st) == 0 && st.st_ino == seg_ino && st.st_dev == seg_dev &&
		     fallocate(fd, 0, (off_t)cur, (off_t)(want - cur)) == 0;
		close(fd);
	}
	return ok;
}

/* The file cannot grow: the arena's unused tail becomes anonymous memory,
 * so that recording goes on as without segments. The segment is then
 * larger than its file, which readers take for unreadable: nothing of this
 * process is delivered after its death (its exports and its exit flush
 * deliver everything, as before). Once, by whoever gets here first; the
 * others wait for it, since their allocations lie in that tail. */
static bool anonymous_tail(struct nl_seg_header *h)
{
	int expected = 0;
	if (atomic_compare_exchange_strong(&tail, &expected, 1)) {
		uint64_t from = atomic_load(&h->backed);
		void *p = mmap(nl_seg_base + from, h->capacity - from, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			atomic_store(&tail, 3);
			return false;
		}
		atomic_store(&h->backed, h->capacity);
		atomic_store(&tail, 2);
		return true;
	}
	while (atomic_load(&tail) == 1)
		;   /* one mmap away */
	return atomic_load(&tail) == 2;
}

/* Makes [backed, end) exist, and some more. Runs on hook paths now and
 * then (a few times over a registry's life), like the fd table's chunks. */
static bool grow(struct nl_seg_header *h, uint64_t end)
{
	if (atomic_load_explicit(&full, memory_order_relaxed))
		return false;
	int saved = errno;
	int bypass = nl_hooks_bypass;
	nl_hooks_bypass = 1;   /* the shim's own file */
	uint64_t cur = atomic_load(&h->backed);
	uint64_t want = end + (cur / 2 > STEP ? cur / 2 : STEP);
	want = (want + 4095) / 4096 * 4096;
	if (want > h->capacity)
		want = h->capacity;
	bool ok = true;
	if (want > cur) {
		/* Concurrent growers may cover the same range twice: both calls are
		 * idempotent. */
		if (mode == MODE_FILE && atomic_load(&tail) == 0 && grow_file(cur, want)) {
			while (cur < want && !atomic_compare_exchange_weak(&h->backed, &cur, want))
				;
		} else if (mode == MODE_FILE) {
			ok = anonymous_tail(h);
		} else {
			ok = mprotect(nl_seg_base + cur, want - cur, PROT_READ | PROT_WRITE) == 0;
			while (ok && cur < want && !atomic_compare_exchange_weak(&h->backed, &cur, want))
				;
		}
	}
	if (!ok)
		atomic_store(&full, true);
	nl_hooks_bypass = bypass;
	errno = saved;
	return ok;
}

uint64_t nl_seg_alloc(size_t size)
{
	struct nl_seg_header *h = nl_seg_header();
	if (!h || size == 0 || size > h->capacity)
		return 0;
	size = (size + 15) & ~(size_t)15;
	uint64_t off = atomic_fetch_add_explicit(&h->used, size, memory_order_relaxed);
	uint64_t end = off + size;
	if (end > h->capacity)
		return 0;   /* used stays past the end: every later allocation fails too */
	if (end > atomic_load_explicit(&h->backed, memory_order_acquire) && !grow(h, end))
		return 0;
	return off;
}

uint64_t nl_seg_copy_str(const char *s)
{
	size_t n = strlen(s) + 1;
	uint64_t off = nl_seg_alloc(n);
	if (off)
		memcpy(nl_seg_ptr(off), s, n);
	return off;
}

bool nl_seg_put_attrs(const struct nl_attr *in, size_t n, uint64_t *out)
{
	*out = 0;
	if (n == 0)
		return true;
	/* One block: the records, then every string of the set. */
	size_t total = n * sizeof(struct nl_sattr);
	for (size_t k = 0; k < n; k++)
		total += strlen(in[k].key) + 1 + (in[k].type == NL_ATTR_STR ? strlen(in[k].v.s) + 1 : 0);
	uint64_t base = nl_seg_alloc(total);
	if (!base)
		return false;
	struct nl_sattr *rec = nl_seg_ptr(base);
	uint64_t off = base + n * sizeof(struct nl_sattr);
	for (size_t k = 0; k < n; k++) {
		struct nl_sattr a = { .type = (uint32_t)in[k].type };
		size_t len = strlen(in[k].key) + 1;
		memcpy(nl_seg_ptr(off), in[k].key, len);
		a.key = off;
		off += len;
		switch (in[k].type) {
		case NL_ATTR_STR:
			len = strlen(in[k].v.s) + 1;
			memcpy(nl_seg_ptr(off), in[k].v.s, len);
			a.v.s = off;
			off += len;
			break;
		case NL_ATTR_INT:
			a.v.i = in[k].v.i;
			break;
		case NL_ATTR_BOOL:
			a.v.b = in[k].v.b;
			break;
		case NL_ATTR_DOUBLE:
			memcpy(&a.v.d, &in[k].v.d, sizeof(double));
			break;
		}
		rec[k] = a;
	}
	*out = base;
	return true;
}

/* ---- this process's segment ---------------------------------------------- */

bool nl_seg_publish(const struct nl_seg_identity *id)
{
	if (atomic_load(&published))
		return true;
	/* No arena: the registry could not make one, and nothing was recorded. */
	if (!want_file || !nl_seg_base)
		return false;
	int saved = errno;
	if ((mode != MODE_FILE || inherited) && !to_file()) {
		want_file = false;   /* tried once: the process goes on as without segments */
		errno = saved;
		return false;
	}
	struct nl_seg_header *h = nl_seg_header();
	memcpy(h->boot_id, nl_seg_boot_id(), sizeof h->boot_id);
	size_t n = strnlen(id->instance_id, sizeof h->instance_id - 1);
	memcpy(h->instance_id, id->instance_id, n);
	h->instance_id[n] = 0;
	h->pid = getpid();
	h->pidns = nl_seg_own_pidns();
	h->proc_start = nl_seg_proc_start("/proc/self/stat");
	h->start_unix_ns = id->start_unix_ns;
	h->flags = id->flags;
	h->interval_ms = id->interval_ms;
	h->delivery_key = id->delivery_key;
	atomic_store(&h->exporter, id->exporter);
	size_t nr = id->n_resource < 128 ? id->n_resource : 128;
	uint64_t res;
	if (nl_seg_put_attrs(id->resource, nr, &res)) {
		h->resource = res;
		h->n_resource = (uint32_t)nr;
	}
	atomic_store(&h->heartbeat_ns, nl_realtime_ns());

	/* The state comes last: whoever sees it sees a complete segment. */
	atomic_store(&h->state, NL_SEG_LIVE);
	atomic_store(&published, true);
	errno = saved;
	return true;
}

bool nl_seg_published(void) { return atomic_load(&published); }

void nl_seg_heartbeat(void)
{
	if (atomic_load(&published))
		atomic_store(&nl_seg_header()->heartbeat_ns, nl_realtime_ns());
}

void nl_seg_mark_exported(void)
{
	if (nl_seg_base)
		atomic_store(&nl_seg_header()->exported, 1);
}

bool nl_seg_exported(void) { return nl_seg_base && atomic_load(&nl_seg_header()->exported); }

uint32_t nl_seg_exporter(void) { return atomic_load(&published) ? atomic_load(&nl_seg_header()->exporter) : 0; }

void nl_seg_set_exporter(uint32_t pid)
{
	if (atomic_load(&published))
		atomic_store(&nl_seg_header()->exporter, pid);
}

bool nl_seg_exporter_alive(void)
{
	uint32_t pid = nl_seg_exporter();
	return pid && nl_seg_pid_alive((int)pid);
}

/* Under the file's lock, which a successor of the exporter takes too when
 * it names itself (nl_seg_read_exported): exactly one of the two exports
 * the segment from then on. Held for a few loads and stores. */
bool nl_seg_take_export(void)
{
	if (!nl_seg_exporter())
		return true;
	if (nl_seg_exporter_alive())
		return false;
	int saved = errno;
	char path[PATH_MAX + 100];
	int fd = -1;
	if (mode == MODE_FILE && own_name[0] &&
	    (size_t)snprintf(path, sizeof path, "%s/%s", nl_seg_dir(), own_name) < sizeof path)
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	/* Without the file nobody else can name itself in it. */
	if (fd >= 0)
		while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
	bool mine = !nl_seg_exporter_alive();
	if (mine)
		nl_seg_set_exporter(0);
	if (fd >= 0)
		close(fd);   /* and the lock with it */
	errno = saved;
	return mine;
}

/* Async-signal-safe: no stdio. */
static void remove_name(void)
{
	char path[PATH_MAX + 100];
	const char *dir = nl_seg_dir();
	size_t d = strlen(dir), n = strlen(own_name);
	if (d + 1 + n < sizeof path) {
		memcpy(path, dir, d);
		path[d] = '/';
		memcpy(path + d + 1, own_name, n + 1);
		unlink(path);
	}
	/* Atomic: the exporter thread may be claiming leftovers meanwhile
	 * (nl_seg_own_file reads this byte to skip this process's own file). */
	__atomic_store_n(&own_name[0], 0, __ATOMIC_RELAXED);
}

bool nl_seg_own_file(const char *name)
{
	char own0 = __atomic_load_n(&own_name[0], __ATOMIC_RELAXED);
	return own0 && name[0] == own0 && strcmp(name + 1, own_name + 1) == 0;
}

void nl_seg_remove(void)
{
	if (mode != MODE_FILE || !own_name[0])
		return;
	int saved = errno;
	atomic_store(&published, false);
	atomic_store(&nl_seg_header()->state, NL_SEG_DONE);
	remove_name();
	errno = saved;
}

bool nl_seg_keepable(void)
{
	if (mode != MODE_FILE || !own_name[0] || !atomic_load(&published) || atomic_load(&tail) != 0)
		return false;
	DIR *d = opendir(nl_seg_dir());
	if (!d)
		return false;
	size_t n = 0;   /* with "." and ".." */
	while (n < NL_SEG_KEEP_MAX + 2 && readdir(d))
		n++;
	closedir(d);
	return n < NL_SEG_KEEP_MAX + 2;
}

bool nl_seg_pid_published(int pid, uint64_t key)
{
	char name[64];
	seg_name(name, key, (uint64_t)pid);
	int dfd = nl_seg_open_dir();
	if (dfd < 0)
		return false;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return false;
	uint32_t state = 0;
	bool yes = pread(fd, &state, sizeof state, (off_t)offsetof(struct nl_seg_header, state)) == sizeof state &&
		   state == NL_SEG_LIVE;
	close(fd);
	return yes;
}

/* Moves the mapping at `from` to the arena's own address, replacing the
 * one there in one step. */
static bool replace_mapping(void *from, size_t capacity)
{
	void *p = mremap(from, capacity, capacity, MREMAP_MAYMOVE | MREMAP_FIXED, nl_seg_base);
	if (p == MAP_FAILED) {
		munmap(from, capacity);
		return false;
	}
	return true;
}

bool nl_seg_atfork_child(void)
{
	nl_seg_dir_atfork_child();
	atomic_store(&published, false);
	predecessor = false;
	self_pid = getpid();
	atomic_store(&full, false);
	if (mode != MODE_FILE)
		return true;   /* anonymous memory is the child's own copy already */
	own_name[0] = 0;
	inherited = true;
	return false;
}
