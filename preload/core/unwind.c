/* SPDX-License-Identifier: Apache-2.0 */
#include "unwind.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "elfsym.h"
#include "loadpath.h"
#include "real.h"

const char nl_unwind_default_skip[] = "libcurl,libuv,libssl,libcrypto,libnghttp2,libnghttp3,libngtcp2,"
				      "libevent,libev,libcares,libgnutls,libnss,libresolv,libzmq,libgrpc,"
				      "libwebsockets,libssh2";

/* Always plumbing, whatever the list says: libc and what comes with it,
 * the loader, the kernel's vDSO, and the sanitizers' runtimes, which
 * interpose connect() themselves. */
static const char always_skip[] = "libc,libpthread,libdl,ld-linux,linux-vdso,libunwind,libtsan,libasan,libubsan,"
				  "liblsan,libclang_rt";

NL_LOAD_STATE static const char *skip_list = nl_unwind_default_skip;

NL_LOAD_PATH void nl_unwind_set_skip(const char *list) { skip_list = list ? list : nl_unwind_default_skip; }

/* ---- libunwind, opened on first use ----------------------------------------- */

typedef int (*backtrace_fn)(void **, int);
static _Atomic(backtrace_fn) backtrace_p;
/* 0 not tried, 1 being opened, 2 open, 3 unavailable. */
static _Atomic int lib_state;
static _Atomic uintptr_t lib_start, lib_end;   /* libunwind's own text: plumbing */
/* The pid of this process as of its last fork, for telling a vfork child
 * (which shares this memory but has a pid of its own) from its parent. */
static _Atomic pid_t process_pid;

static bool in_vfork_child(void)
{
	pid_t p = atomic_load_explicit(&process_pid, memory_order_relaxed);
	return p && (pid_t)syscall(SYS_getpid) != p;
}

static void note_module_of(void *addr, _Atomic uintptr_t *start, _Atomic uintptr_t *end)
{
	struct dl_find_object fo;
	if (_dl_find_object(addr, &fo) == 0) {
		atomic_store(start, (uintptr_t)fo.dlfo_map_start);
		atomic_store(end, (uintptr_t)fo.dlfo_map_end);
	}
}

static void open_libunwind(void)
{
	int none = 0;
	if (!atomic_compare_exchange_strong(&lib_state, &none, 1))
		return;   /* another thread opens it */
	/* A signal handler that connects while this thread holds the loader's
	 * lock would wait for it forever: none runs here. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	void *h = dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
	backtrace_fn f = h ? (backtrace_fn)dlsym(h, "unw_backtrace") : NULL;
	if (f) {
		note_module_of((void *)f, &lib_start, &lib_end);
		atomic_store(&backtrace_p, f);
	}
	atomic_store(&lib_state, f ? 2 : 3);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void nl_unwind_init(void) { atomic_store(&process_pid, (pid_t)syscall(SYS_getpid)); }

/* Waits (bounded) for another thread that opens libunwind: unwinding has to
 * wait for the loader anyway. A signal handler cannot be the one waiting
 * for its own thread (signals are blocked while it opens). */
static void wait_for_open(void)
{
	uint64_t until = nl_monotonic_ns() + 100ull * 1000 * 1000;
	while (atomic_load(&lib_state) == 1 && nl_monotonic_ns() < until)
		sched_yield();
}

int nl_unwind_stack(uintptr_t *pcs, int max)
{
	backtrace_fn f = atomic_load_explicit(&backtrace_p, memory_order_acquire);
	if (!f) {
		if (in_vfork_child() || !atomic_load(&process_pid))
			return -1;   /* dlopen there would change the parent's memory under it */
		if (atomic_load(&lib_state) == 0)
			open_libunwind();
		wait_for_open();
		if (!(f = atomic_load_explicit(&backtrace_p, memory_order_acquire)))
			return -1;
	}
	return f((void **)pcs, max);
}

/* ---- modules ------------------------------------------------------------- */

static _Atomic uintptr_t self_start, self_end;   /* the shim's own module */

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Whether file name base starts with one of the comma-separated prefixes
 * of list, followed by the end of the library's name (libc matches
 * libc.so.6, not libcurl.so.4; libssl matches libssl3.so). */
static bool listed(const char *base, const char *list)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n && strncmp(base, p, n) == 0) {
			char c = base[n];
			if (c == 0 || c == '.' || c == '-' || c == '_' || (c >= '0' && c <= '9'))
				return true;
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

enum nl_frame_kind nl_unwind_classify(uintptr_t pc)
{
	if (!atomic_load_explicit(&self_start, memory_order_relaxed))
		note_module_of((void *)nl_unwind_classify, &self_start, &self_end);
	if ((pc >= atomic_load_explicit(&self_start, memory_order_relaxed) &&
	     pc < atomic_load_explicit(&self_end, memory_order_relaxed)) ||
	    (pc >= atomic_load_explicit(&lib_start, memory_order_relaxed) &&
	     pc < atomic_load_explicit(&lib_end, memory_order_relaxed)))
		return NL_FRAME_PLUMBING;
	struct dl_find_object fo;
	/* A return address is one past its call: pc - 1 is inside the caller. */
	if (_dl_find_object((void *)(pc - 1), &fo) != 0 || !fo.dlfo_link_map)
		return NL_FRAME_UNKNOWN;
	const char *name = fo.dlfo_link_map->l_name;
	if (!name || !*name)
		return NL_FRAME_CODE;   /* the main program */
	const char *base = base_name(name);
	return listed(base, always_skip) || listed(base, skip_list) ? NL_FRAME_PLUMBING : NL_FRAME_CODE;
}

/* ---- names ----------------------------------------------------------------- */

/* String copies by hand: printf's family may allocate. */
static void copy(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void hex(char *dst, size_t size, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do
		tmp[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4) && n < (int)sizeof tmp);
	size_t k = 0;
	for (const char *p = "0x"; *p && k + 1 < size; p++)
		dst[k++] = *p;
	while (n && k + 1 < size)
		dst[k++] = tmp[--n];
	dst[k] = 0;
}

/* Files of modules, mapped once each and kept: the symbols of a module are
 * read again for every new call site in it. */
#define MAPPED_MAX 32
struct mapped {
	_Atomic uintptr_t start;   /* the module's dlfo_map_start; 0: free */
	const uint8_t *_Atomic image;
	size_t len;
};
static struct mapped mapped[MAPPED_MAX];

static const uint8_t *map_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	void *p = MAP_FAILED;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	NL_REAL(close)(fd);
	if (p == MAP_FAILED)
		return NULL;
	*len = (size_t)st.st_size;
	return p;
}

/* The mapped file of the module that starts at start (path: its file). */
static const uint8_t *image_of(uintptr_t start, const char *path, size_t *len)
{
	for (int i = 0; i < MAPPED_MAX; i++) {
		struct mapped *m = &mapped[i];
		uintptr_t s = atomic_load(&m->start);
		if (s == start) {
			const uint8_t *img = atomic_load(&m->image);
			*len = m->len;
			return img;   /* NULL while another thread maps it: the name waits */
		}
		if (s)
			continue;
		uintptr_t free_slot = 0;
		if (!atomic_compare_exchange_strong(&m->start, &free_slot, start)) {
			i--;   /* taken a moment ago: look at it again */
			continue;
		}
		const uint8_t *img = map_file(path, &m->len);
		atomic_store(&m->image, img);
		*len = m->len;
		return img;
	}
	/* Every slot taken: this module's file is mapped for this look-up only
	 * (callers unmap nothing: it stays, as the others do; bounded by the
	 * number of call sites, which is bounded). */
	return map_file(path, len);
}

bool nl_unwind_name(uintptr_t pc, struct nl_frame_name *out)
{
	struct dl_find_object fo;
	if (in_vfork_child() || _dl_find_object((void *)(pc - 1), &fo) != 0 || !fo.dlfo_link_map)
		return false;
	const struct link_map *lm = fo.dlfo_link_map;
	const char *path = lm->l_name && *lm->l_name ? lm->l_name : "/proc/self/exe";
	if (lm->l_name && *lm->l_name) {
		copy(out->object, sizeof out->object, path);
	} else {
		ssize_t n = readlink("/proc/self/exe", out->object, sizeof out->object - 1);
		out->object[n > 0 ? n : 0] = 0;
	}
	size_t len = 0;
	const uint8_t *img = image_of((uintptr_t)fo.dlfo_map_start, path, &len);
	struct nl_elf_sym sym;
	uint64_t addr = (uint64_t)(pc - 1 - lm->l_addr);
	if (img && nl_elf_symbol(img, len, addr, &sym)) {
		copy(out->function, sizeof out->function, sym.name);
		out->key = (uintptr_t)(sym.start + lm->l_addr);
	} else {
		hex(out->function, sizeof out->function, addr);
		out->key = pc;
	}
	return true;
}

void nl_unwind_atfork_child(void)
{
	atomic_store(&process_pid, (pid_t)syscall(SYS_getpid));
	/* Opened by a thread the child does not have: tried again. */
	if (atomic_load(&lib_state) == 1)
		atomic_store(&lib_state, 0);
	for (int i = 0; i < MAPPED_MAX; i++)
		if (atomic_load(&mapped[i].start) && !atomic_load(&mapped[i].image))
			atomic_store(&mapped[i].start, 0);
}
