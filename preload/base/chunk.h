/* SPDX-License-Identifier: Apache-2.0 */
/* Tables mapped a chunk at a time, on first use.
 *
 * The per-fd table, the HTTP connections by fd, the HTTP/2 connection pool
 * and the TLS connection pool each keep an array of atomic slots, one per
 * chunk, that starts out empty. A look-up loads the slot and indexes into
 * the chunk; the first user of a chunk's range fills the slot with the
 * functions below. There is no lock: two threads that find the same slot
 * empty both map a chunk, one installs its own with compare-and-swap, and
 * the other unmaps its copy and uses the winner's.
 *
 * A chunk is mapped (anonymous, private, zeroed), not allocated: mmap is
 * async-signal-safe, so a hook running in a signal handler may fill a slot,
 * and a chunk's pages cost no memory until they are first touched, so a
 * large chunk of which a program uses a few entries costs a few pages. A
 * chunk lives as long as the process, and a fork child keeps its parent's.
 *
 * The slots are _Atomic(void *): the table's own inline look-up gives the
 * chunk its type (a void * converts to any object pointer in C), so that the
 * slot's address can be passed here without a cast between pointer-to-atomic
 * types.
 *
 * Neither function changes errno: the program sees the errno of its own
 * call, even when a mapping fails.
 */
#ifndef NL_CHUNK_H
#define NL_CHUNK_H

#include <stddef.h>

/* Fills an empty slot: maps a zeroed chunk of size bytes and installs it.
 * Returns the slot's chunk, this one or the one another thread installed
 * first; NULL when memory is short (the slot stays empty). */
void *nl_chunk_fill(_Atomic(void *) *slot, size_t size);

/* nl_chunk_fill in two steps, for a caller with work to do between the
 * mapping and the installing (the per-fd table records how far its chunks
 * reach before a fork child can see the new one).
 *
 * nl_chunk_map maps a zeroed chunk of size bytes; NULL when memory is short.
 * nl_chunk_install puts chunk in the slot unless another thread put one
 * there first, in which case chunk is unmapped; it returns the slot's chunk
 * either way. */
void *nl_chunk_map(size_t size);
void *nl_chunk_install(_Atomic(void *) *slot, void *chunk, size_t size);

#endif
