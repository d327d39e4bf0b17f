/* SPDX-License-Identifier: Apache-2.0 */
/* Other processes' segments (segread.h): the leftovers of processes that
 * are gone, claimed and released by whoever delivers them, and the live
 * segments nemolens-run exports for its tree.
 *
 * The directory scan (nl_seg_claim) runs on the background thread or in
 * nemolens-run; it allocates only the copy of what it claims. The shim's
 * own files use the plain libc calls, on threads or in sections where the
 * hooks are bypassed, so that interceptors (a sanitizer's) see every open
 * paired with its close.
 */
#include "segread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "clock.h"
#include "registry.h"
#include "segment_impl.h"

/* Readers refuse larger files: no registry grows so big (the arena's
 * capacity is capped well below). */
#define MAX_FILE ((uint64_t)2 << 30)
#define MAX_STR 4096

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
		if (in[k].type == NL_ATTR_STR ? !(out[k].v.s = nl_seg_str(data, len, in[k].v.s))
					      : !nl_sattr_scalar(&in[k], &out[k]))
			return false;
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
	if (h->pidns != nl_seg_own_pidns()) {
		/* Its pids mean nothing here: its thread's heartbeat does. */
		uint64_t beat = atomic_load(&((struct nl_seg_header *)h)->heartbeat_ns);
		uint64_t limit = (3ull * h->interval_ms + 60000ull) * 1000000u;
		return now < beat || now - beat < limit;
	}
	if (!nl_seg_pid_alive((int)h->pid))
		return false;
	if (h->proc_start && nl_seg_pid_start((int)h->pid) != h->proc_start)
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
			nl_seg_read_all(fd, (uint8_t *)h, sizeof *h) && memcmp(h->magic, NL_SEG_MAGIC, 8) == 0;
	if (!readable)   /* being made by a process that runs, or not a segment at all */
		return young && nl_seg_pid_alive((int)name_pid) ? KEEP : REMOVE;
	if (h->version != NL_SEG_VERSION || h->header_size != sizeof *h || h->layout != nl_registry_layout())
		/* Another build of the shim wrote it: one of its kind may deliver it. */
		return now > mtime && now - mtime > max_age_ns ? REMOVE : KEEP;
	uint32_t state = atomic_load(&h->state);
	if (h->pid != name_pid || (state != NL_SEG_UNNAMED && state != NL_SEG_LIVE))
		return REMOVE;   /* delivered already, or not what its name says */
	if (state == NL_SEG_UNNAMED) {
		/* A process that recorded nothing: nothing to deliver, and gone
		 * with its process. Another pid namespace's is left to it. */
		if (h->pidns && h->pidns != nl_seg_own_pidns())
			return KEEP;
		if (!nl_seg_pid_alive((int)name_pid))
			return REMOVE;
		return young || maps_file(name_pid, st->st_dev, st->st_ino) ? KEEP : REMOVE;
	}
	if (memcmp(h->boot_id, nl_seg_boot_id(), sizeof h->boot_id) != 0)
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
	int dfd = nl_seg_open_dir();
	if (dfd < 0)
		return 0;
	uint64_t now = nl_realtime_ns();
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
		if (strlen(name) >= sizeof out->name || nl_seg_own_file(name))
			continue;
		uint64_t k = 0;
		long pid = 0;
		enum kind kind = K_OWN;
		bool ours = parse_name(name, &k, &pid, &kind);
		/* Cheap filters first: every live process of the user has a file
		 * here, and looking into one costs a few system calls. */
		if (ours && !thorough && (k != key || (kind != K_HANDED_OVER && nl_seg_pid_alive((int)pid))))
			continue;
		int fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st, again;
		struct nl_seg_header h;
		enum verdict v = KEEP;
		/* The lock is among readers only (owners hold none): whoever has it
		 * decides about the file; the others pass. */
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == nl_seg_euid() && st.st_nlink > 0 &&
		    flock(fd, LOCK_EX | LOCK_NB) == 0 && fstatat(dfd, name, &again, AT_SYMLINK_NOFOLLOW) == 0 &&
		    again.st_ino == st.st_ino)
			v = ours ? judge(fd, &st, key, max_age_ns, pid, now, &h) : REMOVE;
		if (v == CLAIM) {
			uint8_t *data = malloc((size_t)st.st_size);
			if (data && nl_seg_read_all(fd, data, (size_t)st.st_size)) {
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
		int dfd = nl_seg_open_dir();
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
	return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == nl_seg_euid() && (size_t)st->st_size >= sizeof *h &&
	       (uint64_t)st->st_size <= MAX_FILE && pread(fd, h, sizeof *h, 0) == (ssize_t)sizeof *h &&
	       memcmp(h->magic, NL_SEG_MAGIC, 8) == 0 && h->version == NL_SEG_VERSION &&
	       h->header_size == sizeof *h && h->layout == nl_registry_layout() &&
	       atomic_load(&h->state) == NL_SEG_LIVE && h->pid == pid && h->delivery_key == key &&
	       is_one_of(atomic_load(&h->exporter), exporters, n_exporters) &&
	       (!h->proc_start || nl_seg_pid_start((int)pid) == h->proc_start);
}

/* Calls visit for every live segment of the delivery key exported by one
 * of exporters; returns how many visits said they counted. */
static size_t walk_exported(uint64_t key, const uint32_t *exporters, size_t n_exporters,
			    bool (*visit)(int fd, struct nl_seg_header *h, struct stat *st, void *ctx), void *ctx)
{
	int dfd = nl_seg_open_dir();
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
		if (!parse_name(e->d_name, &k, &pid, &kind) || k != key || kind != K_OWN || !nl_seg_pid_alive((int)pid))
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
		uint64_t now = nl_realtime_ns();
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
