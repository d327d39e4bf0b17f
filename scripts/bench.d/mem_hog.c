/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark helper for scripts/bench_memory.sh: touches MB MiB of anonymous
 * memory (every 4 KiB page written, no transparent huge pages), holds it for SECONDS, frees it, exits.
 *   mem_hog MB SECONDS */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	size_t n = (size_t)atol(argv[1]) << 20;
	unsigned secs = (unsigned)atoi(argv[2]);
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 2;
	/* 4 KiB pages, as a Python or C heap mostly has: the worst case for the
	 * page-table walk of smaps_rollup (huge pages are walked 512 times faster). */
	madvise(p, n, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	sleep(secs);
	munmap(p, n);
	return 0;
}
