/* SPDX-License-Identifier: Apache-2.0 */
/* The directory segments live in (segment.h): where it is and its checks,
 * the delivery key in every file's name, and the facts about a process
 * that a segment's header records and its readers check again (boot id,
 * start time, pid namespace).
 *
 * The directory is used by this process's own segment (segment.c) and by
 * the readers of other processes' segments; nemolens-run, which has no
 * segment of its own, only configures it (nl_seg_configure).
 */
#include "segment_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "loadpath.h"
#include "log.h"

static char dir_path[PATH_MAX];         /* validated private directory, "" when none */
static char boot_id[40];                /* read once; the same for every process of this boot */

/* ---- small helpers, async-signal-safe --------------------------------------- */

NL_LOAD_PATH size_t nl_seg_put_dec(char *out, uint64_t v)
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

bool nl_seg_read_all(int fd, uint8_t *buf, size_t len)
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

/* ---- what a header says about its process ----------------------------------- */

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

const char *nl_seg_boot_id(void)
{
	read_boot_id();
	return boot_id;
}

/* Field 22 of /proc/<pid>/stat (start time in clock ticks after boot): with
 * the pid it names one process, whatever pid reuse does. 0 when unknown. */
uint64_t nl_seg_proc_start(const char *stat_path)
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

uint64_t nl_seg_pid_start(int pid)
{
	char path[40] = "/proc/";
	size_t n = 6 + nl_seg_put_dec(path + 6, (uint64_t)pid);
	memcpy(path + n, "/stat", 6);
	return nl_seg_proc_start(path);
}

/* Inode of this process's pid namespace: pids of segments from another
 * namespace say nothing about processes here. */
uint64_t nl_seg_own_pidns(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ---- the private directory ------------------------------------------------- */

/* A directory this user owns, with no permission for anyone else, in
 * memory (tmpfs): a disk directory would write every value change back. */
static bool private_dir_fd(int fd)
{
	struct stat st;
	struct statfs sf;
	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == nl_seg_euid() && (st.st_mode & 077) == 0 &&
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

NL_LOAD_PATH void nl_seg_dir_defer(const struct nl_config *cfg) { dir_cfg = cfg; }

void nl_seg_dir_atfork_child(void)
{
	/* A parent's thread may have been setting the directory up: the
	 * child, alone now, tries again at its first use. */
	if (atomic_load(&dir_state) == 1) {
		dir_path[0] = 0;
		atomic_store(&dir_state, 0);
	}
}

int nl_seg_open_dir(void)
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
		snprintf(path, sizeof path, "/dev/shm/nemolens-%u", (unsigned)nl_seg_euid());
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

/* ---- delivery key ---------------------------------------------------------- */

NL_LOAD_PATH static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull;   /* a separator, so "ab"+"c" differs from "a"+"bc" */
}

NL_LOAD_PATH uint64_t nl_seg_delivery_key(const struct nl_config *cfg)
{
	/* A tree that nemolens-run serves to Prometheus alone has no
	 * collector: only that launcher may take its dead processes' values,
	 * for its scrape, so its pid makes the key. */
	if (cfg->exporter != NL_EXPORTER_OTLP && cfg->prometheus && cfg->prometheus_tree) {
		char pid[16], *p = pid + sizeof pid - 1;
		*p = '\0';
		for (unsigned v = cfg->prometheus_tree; v; v /= 10)
			*--p = (char)('0' + v % 10);
		uint64_t h = fnv(fnv(14695981039346656037ull, "prometheus"), p);
		return h ? h : 1;
	}
	uint64_t h = fnv(14695981039346656037ull, "otlp");
	h = fnv(h, cfg->endpoint);
	for (size_t i = 0; i < cfg->n_headers; i++)
		h = fnv(fnv(h, cfg->headers[i].name), cfg->headers[i].value);
	h = fnv(fnv(fnv(h, cfg->ca_file), cfg->client_key), cfg->client_cert);
	return h ? h : 1;
}
