/* SPDX-License-Identifier: Apache-2.0 */
/* Segments (segment.h): the arena, its file, and the leftovers of other
 * processes.
 *
 * Everything here that can run on a hook's path (nl_seg_alloc and the
 * copies, from series the hooks create; nl_seg_publish, from the first
 * record of a process, possibly in a signal handler; nl_seg_atfork_child)
 * makes system calls only: no stdio, no malloc, no locks, errno kept. The
 * directory scan (nl_seg_claim) runs on the background thread or in
 * nemolens-run; it allocates only the copy of what it claims.
 *
 * The shim's own files use the plain libc calls, on threads or in sections
 * where the hooks are bypassed, so that interceptors (a sanitizer's) see
 * every open paired with its close.
 */
#include "segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

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
/* Readers refuse larger files: no registry grows so big (the arena's
 * capacity is capped well below). */
#define MAX_FILE ((uint64_t)2 << 30)
#define MAX_STR 4096

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
static char dir_path[PATH_MAX];         /* validated private directory, "" when none */
static char own_name[96];
static char boot_id[40];                /* read once; the same for every process of this boot */

static bool replace_mapping(void *from, size_t capacity);
static void remove_name(void);

/* ---- small helpers, async-signal-safe --------------------------------------- */

NL_LOAD_PATH static size_t put_dec(char *out, uint64_t v)
{
	char tmp[24];
	size_t n = 0;
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof tmp);
	for (size_t i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

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
	n += put_dec(out + n, pid);
	out[n] = 0;
	return n;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads at most cap-1 bytes of a small file (a /proc file) into buf. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

static void read_boot_id(void)
{
	if (boot_id[0])
		return;
	char buf[64];
	if (read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf) < 36)
		memcpy(buf, "unknown", 8);
	buf[36] = 0;
	if (buf[35] == '\n')
		buf[35] = 0;
	memcpy(boot_id, buf, 37);
}

/* Field 22 of /proc/<pid>/stat (start time in clock ticks after boot): with
 * the pid it names one process, whatever pid reuse does. 0 when unknown. */
static uint64_t proc_start(const char *stat_path)
{
	char buf[1024];
	if (read_small(stat_path, buf, sizeof buf) <= 0)
		return 0;
	/* The command name may hold anything, spaces and ')' included: the
	 * fields go on after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22; field++) {
		while (*p == ' ')
			p++;
		while (*p && *p != ' ')
			p++;
		if (!*p)
			return 0;
	}
	while (*p == ' ')
		p++;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

static uint64_t pid_start(int pid)
{
	char path[40] = "/proc/";
	size_t n = 6 + put_dec(path + 6, (uint64_t)pid);
	memcpy(path + n, "/stat", 6);
	return proc_start(path);
}

/* Inode of this process's pid namespace: pids of segments from another
 * namespace say nothing about processes here. */
static uint64_t own_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The effective uid (files are owned by it), asked once. */
static uid_t euid(void)
{
	static uid_t uid = (uid_t)-1;
	if (uid == (uid_t)-1)
		uid = geteuid();
	return uid;
}

static bool pid_alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

static bool read_all(int fd, uint8_t *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t r = pread(fd, buf + off, len - off, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		off += (size_t)r;
	}
	return true;
}

/* ---- the private directory ------------------------------------------------- */

/* A directory this user owns, with no permission for anyone else, in
 * memory (tmpfs): a disk directory would write every value change back. */
static bool private_dir_fd(int fd)
{
	struct stat st;
	struct statfs sf;
	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == euid() && (st.st_mode & 077) == 0 &&
	       fstatfs(fd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/* O_NOFOLLOW: a symlink planted at the path is refused, not followed. */
static int open_private_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !private_dir_fd(fd)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int setup_dir(const struct nl_config *cfg);

/* The directory is found (or created) at its first use, not at load: a
 * process that records nothing and delivers nothing never looks. Once,
 * by whichever thread comes first; the others wait for it (the shim's
 * threads and the first record hold signals meanwhile). */
NL_LOAD_STATE static const struct nl_config *dir_cfg;
static _Atomic int dir_state;           /* 0 not yet, 1 being set up, 2 done */

static int open_dir(void)
{
	int expected = 0;
	if (dir_cfg && atomic_compare_exchange_strong(&dir_state, &expected, 1)) {
		int fd = setup_dir(dir_cfg);
		atomic_store(&dir_state, 2);
		return fd;
	}
	while (atomic_load(&dir_state) == 1)
		;   /* a few system calls away */
	return dir_path[0] ? open_private_dir(dir_path) : -1;
}

/* Finds (or creates) the private directory; returns it open, or -1. */
static int setup_dir(const struct nl_config *cfg)
{
	if (dir_path[0])
		return open_private_dir(dir_path);
	char path[PATH_MAX];
	const char *xdg = cfg->runtime_dir;
	int fd = xdg && xdg[0] == '/' && strlen(xdg) + 10 < sizeof path ? open_private_dir(xdg) : -1;
	if (fd >= 0) {
		close(fd);
		snprintf(path, sizeof path, "%s/nemolens", xdg);
	} else {
		snprintf(path, sizeof path, "/dev/shm/nemolens-%u", (unsigned)euid());
	}
	/* Created 0700; an existing one is used only if it passes the checks
	 * (another user may have created it first, in /dev/shm). Opened first:
	 * it exists for every process but the first. */
	fd = open_private_dir(path);
	if (fd < 0 && errno == ENOENT) {
		if (mkdir(path, 0700) != 0 && errno != EEXIST) {
			nl_warn_once("segment.dir", "cannot create %s (%s): a process that ends without exit() "
				     "loses what it recorded since its last export", path, strerror(errno));
			return -1;
		}
		fd = open_private_dir(path);
	}
	if (fd < 0) {
		nl_warn_once("segment.dir", "%s is not a private directory of this user (a tmpfs directory it owns, "
			     "mode 0700, not a symlink): a process that ends without exit() loses what it recorded "
			     "since its last export", path);
		return -1;
	}
	memcpy(dir_path, path, strlen(path) + 1);
	return fd;
}

int nl_seg_configure(const struct nl_config *cfg)
{
	int fd = setup_dir(cfg);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}
const char *nl_seg_dir(void) { return dir_path; }

/* ---- the arena ------------------------------------------------------------- */

static void init_header(struct nl_seg_header *h, size_t capacity, uint64_t backed)
{
	memcpy(h->magic, NL_SEG_MAGIC, 8);
	h->version = NL_SEG_VERSION;
	h->header_size = sizeof *h;
	h->layout = nl_registry_layout();
	h->capacity = capacity;
	h->uid = (uint32_t)euid();
	/* Who owns even an unpublished file: others remove it once this
	 * process is gone (and leave it alone when it is in another pid
	 * namespace, where its pid means something else). */
	h->pid = self_pid ? self_pid : getpid();
	h->pidns = own_pidns();
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
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == euid();
	bool readable = ok && read_all(fd, (uint8_t *)&h, sizeof h) && memcmp(h.magic, NL_SEG_MAGIC, 8) == 0;
	close(fd);
	if (!ok)
		return false;
	if (readable && h.pidns && h.pidns != own_pidns())
		return false;
	if (readable && atomic_load(&h.state) == NL_SEG_LIVE) {
		char to[96];
		memcpy(to, name, len);
		memcpy(to + len, "-x", 2);
		size_t n = len + 2 + put_hex64(to + len + 2, (uint64_t)st.st_ino ^ realtime_ns());
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
 * tells others it is alive (judge()). Returns the mapping or MAP_FAILED. */
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
			name[len + 2 + put_hex64(name + len + 2, realtime_ns())] = 0;
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
	dir_cfg = cfg;
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
		n = 18 + put_dec(path + 18, euid());
		path[n++] = '/';
		memcpy(path + n, name, len + 1);
		there = faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	}
	int dfd = there ? open_dir() : -1;
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
	int dfd = open_dir();
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
	size_t d = strlen(dir_path);
	memcpy(path, dir_path, d);
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
	read_boot_id();
	memcpy(h->boot_id, boot_id, sizeof h->boot_id);
	size_t n = strnlen(id->instance_id, sizeof h->instance_id - 1);
	memcpy(h->instance_id, id->instance_id, n);
	h->instance_id[n] = 0;
	h->pid = getpid();
	h->pidns = own_pidns();
	h->proc_start = proc_start("/proc/self/stat");
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
	atomic_store(&h->heartbeat_ns, realtime_ns());

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
		atomic_store(&nl_seg_header()->heartbeat_ns, realtime_ns());
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
	return pid && pid_alive((int)pid);
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
	    (size_t)snprintf(path, sizeof path, "%s/%s", dir_path, own_name) < sizeof path)
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
	size_t d = strlen(dir_path), n = strlen(own_name);
	if (d + 1 + n < sizeof path) {
		memcpy(path, dir_path, d);
		path[d] = '/';
		memcpy(path + d + 1, own_name, n + 1);
		unlink(path);
	}
	/* Atomic: the exporter thread may be claiming leftovers meanwhile
	 * (nl_seg_claim reads this byte to skip this process's own file). */
	__atomic_store_n(&own_name[0], 0, __ATOMIC_RELAXED);
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
	DIR *d = opendir(dir_path);
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
	int dfd = open_dir();
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
	/* A parent's thread may have been setting the directory up: the
	 * child, alone now, tries again at its first use. */
	if (atomic_load(&dir_state) == 1) {
		dir_path[0] = 0;
		atomic_store(&dir_state, 0);
	}
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

/* ---- delivery key ---------------------------------------------------------- */

NL_LOAD_PATH static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull;   /* a separator, so "ab"+"c" differs from "a"+"bc" */
}

NL_LOAD_PATH uint64_t nl_seg_delivery_key(const struct nl_config *cfg)
{
	uint64_t h = fnv(14695981039346656037ull, "otlp");
	h = fnv(h, cfg->endpoint);
	for (size_t i = 0; i < cfg->n_headers; i++)
		h = fnv(fnv(h, cfg->headers[i].name), cfg->headers[i].value);
	h = fnv(fnv(fnv(h, cfg->ca_file), cfg->client_key), cfg->client_cert);
	return h ? h : 1;
}

/* ---- readers --------------------------------------------------------------- */

const char *nl_seg_str(const uint8_t *data, size_t len, uint64_t off)
{
	if (off < NL_SEG_DATA || off >= len)
		return NULL;
	size_t max = len - off < MAX_STR ? len - off : MAX_STR;
	return memchr(data + off, 0, max) ? (const char *)data + off : NULL;
}

bool nl_seg_get_attrs(const uint8_t *data, size_t len, const struct nl_sattr *in, size_t n, struct nl_attr *out)
{
	for (size_t k = 0; k < n; k++) {
		out[k].key = nl_seg_str(data, len, in[k].key);
		out[k].type = (enum nl_attr_type)in[k].type;
		if (!out[k].key || !out[k].key[0])
			return false;
		switch (in[k].type) {
		case NL_ATTR_STR:
			if (!(out[k].v.s = nl_seg_str(data, len, in[k].v.s)))
				return false;
			break;
		case NL_ATTR_INT:
			out[k].v.i = in[k].v.i;
			break;
		case NL_ATTR_BOOL:
			out[k].v.b = in[k].v.b != 0;
			break;
		case NL_ATTR_DOUBLE:
			memcpy(&out[k].v.d, &in[k].v.d, sizeof(double));
			break;
		default:
			return false;
		}
	}
	return true;
}

/* ---- leftovers ------------------------------------------------------------- */

enum kind {
	K_OWN,                          /* "<key>-<pid>" or "<key>-<pid>-n<hex>": its process's file */
	K_HANDED_OVER,                  /* "<key>-<pid>-x<hex>": left by an image that exec'd */
};

/* "<16 hex>-<pid>[-<suffix>]": the key, the pid and the kind. */
static bool parse_name(const char *name, uint64_t *key, long *pid, enum kind *kind)
{
	uint64_t k = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return false;
		k = k << 4 | (uint64_t)v;
	}
	const char *p = name + 16;
	if (*p++ != '-' || *p < '1' || *p > '9')
		return false;
	long v = 0;
	for (; *p >= '0' && *p <= '9' && v < 100000000; p++)
		v = v * 10 + (*p - '0');
	if (*p && (*p != '-' || !p[1]))
		return false;
	*key = k;
	*pid = v;
	*kind = *p && p[1] == 'x' ? K_HANDED_OVER : K_OWN;
	return true;
}

/* Whether process pid maps the file (dev, ino), or cannot be asked (then it
 * counts as alive: nothing of a live process is ever taken). A process maps
 * its segment from its start to its end or exec; so this tells the owner
 * from a successor image, a zombie, or another process with a reused pid. */
static bool maps_file(long pid, dev_t dev, ino_t ino)
{
	char path[48];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	/* "start-end perms offset major:minor inode path": read in blocks,
	 * line by line, nothing allocated. */
	char buf[4096];
	size_t have = 0;
	bool found = false, failed = false, skipping = false;
	for (;;) {
		ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			failed = true;
		if (r <= 0)
			break;
		have += (size_t)r;
		buf[have] = 0;
		char *line = buf, *nl;
		while (!found && (nl = strchr(line, '\n'))) {
			*nl = 0;
			unsigned maj, min;
			unsigned long long inode;
			if (!skipping && sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &inode) == 3)
				found = inode == (unsigned long long)ino && maj == major(dev) && min == minor(dev);
			skipping = false;
			line = nl + 1;
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof buf - 1) {
			/* A line longer than the buffer (a long path): its fields were
			 * at its start, already looked at; drop the rest of it. */
			have = 0;
			skipping = true;
		}
		if (found)
			break;
	}
	close(fd);
	return found || failed;
}

/* Whether the process that wrote the segment (header h, file st) runs. */
static bool owner_alive(const struct nl_seg_header *h, const struct stat *st, uint64_t now)
{
	if (h->pidns != own_pidns()) {
		/* Its pids mean nothing here: its thread's heartbeat does. */
		uint64_t beat = atomic_load(&((struct nl_seg_header *)h)->heartbeat_ns);
		uint64_t limit = (3ull * h->interval_ms + 60000ull) * 1000000u;
		return now < beat || now - beat < limit;
	}
	if (!pid_alive((int)h->pid))
		return false;
	if (h->proc_start && pid_start((int)h->pid) != h->proc_start)
		return false;   /* the pid was reused */
	return maps_file((long)h->pid, st->st_dev, st->st_ino);
}

enum verdict { KEEP, REMOVE, CLAIM };

/* What to do with a file of the directory (its lock held, so no other
 * reader acts on it at the same time). */
static enum verdict judge(int fd, const struct stat *st, uint64_t key, uint64_t max_age_ns, long name_pid,
			  uint64_t now, struct nl_seg_header *h)
{
	uint64_t mtime = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
	/* A file made in the last seconds may still be being written (a fork
	 * child copies its parent's arena into it). */
	bool young = now < mtime + 5000000000ull;
	bool readable = (size_t)st->st_size >= sizeof *h && (uint64_t)st->st_size <= MAX_FILE &&
			read_all(fd, (uint8_t *)h, sizeof *h) && memcmp(h->magic, NL_SEG_MAGIC, 8) == 0;
	if (!readable)   /* being made by a process that runs, or not a segment at all */
		return young && pid_alive((int)name_pid) ? KEEP : REMOVE;
	if (h->version != NL_SEG_VERSION || h->header_size != sizeof *h || h->layout != nl_registry_layout())
		/* Another build of the shim wrote it: one of its kind may deliver it. */
		return now > mtime && now - mtime > max_age_ns ? REMOVE : KEEP;
	uint32_t state = atomic_load(&h->state);
	if (h->pid != name_pid || (state != NL_SEG_UNNAMED && state != NL_SEG_LIVE))
		return REMOVE;   /* delivered already, or not what its name says */
	if (state == NL_SEG_UNNAMED) {
		/* A process that recorded nothing: nothing to deliver, and gone
		 * with its process. Another pid namespace's is left to it. */
		if (h->pidns && h->pidns != own_pidns())
			return KEEP;
		if (!pid_alive((int)name_pid))
			return REMOVE;
		return young || maps_file(name_pid, st->st_dev, st->st_ino) ? KEEP : REMOVE;
	}
	read_boot_id();
	if (memcmp(h->boot_id, boot_id, sizeof h->boot_id) != 0)
		return REMOVE;   /* another boot's: its collector connection, its pids, are gone */
	if (owner_alive(h, st, now))
		return KEEP;
	/* Its owner is gone; its last heartbeat is about when. */
	uint64_t beat = atomic_load(&h->heartbeat_ns);
	if (now > beat && now - beat > max_age_ns)
		return REMOVE;   /* nobody could deliver it for too long */
	if (h->delivery_key != key)
		return KEEP;     /* for a process of its own collector */
	uint64_t used = atomic_load(&h->used);
	if (used > (uint64_t)st->st_size || used < NL_SEG_DATA)
		return REMOVE;
	return CLAIM;
}

size_t nl_seg_claim(uint64_t key, uint64_t max_age_ns, bool thorough, struct nl_seg_leftover *out, size_t max)
{
	int dfd = open_dir();
	if (dfd < 0)
		return 0;
	uint64_t now = realtime_ns();
	size_t n = 0;
	/* getdents64 into the stack, not readdir: nothing is allocated unless
	 * something is claimed (the background thread scans while the program
	 * may fork). */
	union {
		char bytes[8192];
		struct dirent64 align;
	} buf;
	ssize_t got = 0, at = 0;
	while (n < max) {
		if (at >= got) {
			got = getdents64(dfd, buf.bytes, sizeof buf.bytes);
			at = 0;
			if (got <= 0)
				break;
		}
		const struct dirent64 *e = (const struct dirent64 *)(buf.bytes + at);
		at += e->d_reclen;
		const char *name = e->d_name;
		if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
			continue;
		char own0 = __atomic_load_n(&own_name[0], __ATOMIC_RELAXED);
		if (strlen(name) >= sizeof out->name || (own0 && name[0] == own0 && strcmp(name + 1, own_name + 1) == 0))
			continue;
		uint64_t k = 0;
		long pid = 0;
		enum kind kind = K_OWN;
		bool ours = parse_name(name, &k, &pid, &kind);
		/* Cheap filters first: every live process of the user has a file
		 * here, and looking into one costs a few system calls. */
		if (ours && !thorough && (k != key || (kind != K_HANDED_OVER && pid_alive((int)pid))))
			continue;
		int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st, again;
		struct nl_seg_header h;
		enum verdict v = KEEP;
		/* The lock is among readers only (owners hold none): whoever has it
		 * decides about the file; the others pass. */
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == euid() && st.st_nlink > 0 &&
		    flock(fd, LOCK_EX | LOCK_NB) == 0 && fstatat(dfd, name, &again, AT_SYMLINK_NOFOLLOW) == 0 &&
		    again.st_ino == st.st_ino)
			v = ours ? judge(fd, &st, key, max_age_ns, pid, now, &h) : REMOVE;
		if (v == CLAIM) {
			uint8_t *data = malloc((size_t)st.st_size);
			if (data && read_all(fd, data, (size_t)st.st_size)) {
				struct nl_seg_leftover *l = &out[n++];
				l->fd = fd;
				memcpy(l->name, name, strlen(name) + 1);
				l->data = data;
				l->len = (size_t)st.st_size;
				continue;
			}
			free(data);
			v = KEEP;
		}
		if (v == REMOVE)
			unlinkat(dfd, name, 0);
		close(fd);
	}
	close(dfd);
	return n;
}

void nl_seg_release(struct nl_seg_leftover *l, bool delivered)
{
	if (delivered) {
		/* Marked first: a reader that opened it before the unlink and
		 * gets the lock after us sees it is done. */
		uint32_t done = NL_SEG_DONE;
		ssize_t w = pwrite(l->fd, &done, sizeof done, (off_t)offsetof(struct nl_seg_header, state));
		(void)w;
		int dfd = open_dir();
		struct stat st, named;
		if (dfd >= 0 && fstat(l->fd, &st) == 0 && st.st_nlink > 0 &&
		    fstatat(dfd, l->name, &named, AT_SYMLINK_NOFOLLOW) == 0 && named.st_ino == st.st_ino)
			unlinkat(dfd, l->name, 0);
		if (dfd >= 0)
			close(dfd);
	}
	close(l->fd);
	free(l->data);
	l->fd = -1;
	l->data = NULL;
}

/* ---- live segments, for the process that exports them ---------------------- */

static bool is_one_of(uint32_t pid, const uint32_t *pids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* Whether the file fd is the live segment of pid with delivery key key,
 * exported by one of exporters; its status and header then in st and h. */
static bool exported_by(int fd, long pid, uint64_t key, const uint32_t *exporters, size_t n_exporters, struct stat *st,
			struct nl_seg_header *h)
{
	return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == euid() && (size_t)st->st_size >= sizeof *h &&
	       (uint64_t)st->st_size <= MAX_FILE && pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h &&
	       memcmp(h->magic, NL_SEG_MAGIC, 8) == 0 && h->version == NL_SEG_VERSION &&
	       h->header_size == sizeof *h && h->layout == nl_registry_layout() &&
	       atomic_load(&h->state) == NL_SEG_LIVE && h->pid == pid && h->delivery_key == key &&
	       is_one_of(atomic_load(&h->exporter), exporters, n_exporters) &&
	       (!h->proc_start || pid_start((int)pid) == h->proc_start);
}

/* Calls visit for every live segment of the delivery key exported by one
 * of exporters; returns how many visits said they counted. */
static size_t walk_exported(uint64_t key, const uint32_t *exporters, size_t n_exporters,
			    bool (*visit)(int fd, struct nl_seg_header *h, struct stat *st, void *ctx), void *ctx)
{
	int dfd = open_dir();
	if (dfd < 0 || !n_exporters) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		uint64_t k;
		long pid;
		enum kind kind;
		if (!parse_name(e->d_name, &k, &pid, &kind) || k != key || kind != K_OWN || !pid_alive((int)pid))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st;
		struct nl_seg_header h;
		if (exported_by(fd, pid, key, exporters, n_exporters, &st, &h) && visit(fd, &h, &st, ctx))
			n++;
		close(fd);
	}
	closedir(d);
	return n;
}

struct each_visit {
	uint32_t flags;
	void (*fn)(int fd, const struct nl_seg_header *h, const struct stat *st, void *arg);
	void *arg;
};

static bool visit_each(int fd, struct nl_seg_header *h, struct stat *st, void *ctx)
{
	const struct each_visit *v = ctx;
	if (!(h->flags & v->flags))
		return false;
	v->fn(fd, h, st, v->arg);
	return true;
}

size_t nl_seg_each_exported(uint64_t key, const uint32_t *exporters, size_t n_exporters, uint32_t flags,
			    void (*fn)(int fd, const struct nl_seg_header *h, const struct stat *st, void *arg), void *arg)
{
	struct each_visit v = { flags, fn, arg };
	return walk_exported(key, exporters, n_exporters, visit_each, &v);
}

struct read_visit {
	const uint32_t *exporters;
	size_t n_exporters;
	void (*fn)(const uint8_t *data, size_t len, void *arg);
	void *arg;
};

static bool visit_read(int fd, struct nl_seg_header *h, struct stat *st, void *ctx)
{
	const struct read_visit *v = ctx;
	bool counted = false;
	uint64_t used = atomic_load(&h->used);
	bool ok = used >= NL_SEG_DATA && used <= (uint64_t)st->st_size;
	/* The copy's header may link records allocated after `used` was
	 * read: then again, with the copy's size (the file grows ahead). */
	uint8_t *data = NULL;
	for (int tries = 0; ok && !data && tries < 3; tries++) {
		data = malloc((size_t)used);
		if (!data || pread(fd, data, (size_t)used, 0) != (ssize_t)used) {
			ok = false;
			break;
		}
		uint64_t now_used = atomic_load(&((struct nl_seg_header *)data)->used);
		if (now_used > used) {
			free(data);
			data = NULL;
			fstat(fd, st);
			used = now_used <= (uint64_t)st->st_size ? now_used : (uint64_t)st->st_size;
		}
	}
	uint32_t me = v->exporters[0];
	if (ok && data && atomic_load(&h->exporter) != me) {
		/* A successor names itself under the file's lock, unless the
		 * owner, finding its exporter gone, took its export back
		 * meanwhile (nl_seg_take_export): never both. */
		uint32_t now_exporter = 0;
		while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
			;
		ok = pread(fd, &now_exporter, sizeof now_exporter, (off_t)offsetof(struct nl_seg_header, exporter)) ==
			     sizeof now_exporter &&
		     is_one_of(now_exporter, v->exporters, v->n_exporters) &&
		     pwrite(fd, &me, sizeof me, (off_t)offsetof(struct nl_seg_header, exporter)) == sizeof me;
		flock(fd, LOCK_UN);
	}
	if (ok && data) {
		uint64_t now = realtime_ns();
		ssize_t w = pwrite(fd, &now, sizeof now, (off_t)offsetof(struct nl_seg_header, heartbeat_ns));
		(void)w;
		v->fn(data, (size_t)used, v->arg);
		counted = true;
	}
	free(data);
	return counted;
}

size_t nl_seg_read_exported(uint64_t key, const uint32_t *exporters, size_t n_exporters,
			    void (*fn)(const uint8_t *data, size_t len, void *arg), void *arg)
{
	struct read_visit v = { exporters, n_exporters, fn, arg };
	return walk_exported(key, exporters, n_exporters, visit_read, &v);
}
