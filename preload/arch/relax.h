/* SPDX-License-Identifier: Apache-2.0 */
/* The pause of a spin wait, for a loop that waits a moment for another
 * thread (a slot being filled in, a name being interned): the processor is
 * told, so the loop's loads do not crowd out the other thread's work on
 * the same core (x86's pause, arm64's yield); elsewhere it does nothing.
 *
 * Header-only and below every layer (docs/internals.md, "Layers"): the
 * HTTP layer, which may include nothing of base, spins as core does. */
#ifndef NL_RELAX_H
#define NL_RELAX_H

static inline void nl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
