/* SPDX-License-Identifier: Apache-2.0 */
#include "chunk.h"

#include <stdatomic.h>
#include <sys/mman.h>

#include "check.h"

void *nl_chunk_map(size_t size)
{
	NL_KEEP_ERRNO;
	void *chunk = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return chunk == MAP_FAILED ? NULL : chunk;
}

void *nl_chunk_install(_Atomic(void *) *slot, void *chunk, size_t size)
{
	void *expected = NULL;
	if (atomic_compare_exchange_strong(slot, &expected, chunk))
		return chunk;
	NL_KEEP_ERRNO;
	munmap(chunk, size);   /* another thread installed the chunk first */
	return expected;
}

void *nl_chunk_fill(_Atomic(void *) *slot, size_t size)
{
	void *chunk = nl_chunk_map(size);
	return chunk ? nl_chunk_install(slot, chunk, size) : NULL;
}
