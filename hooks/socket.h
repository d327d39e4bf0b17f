/* SPDX-License-Identifier: Apache-2.0 */
/* What socket.c's close hooks release, for the other ways a program closes
 * fds (syscall.c). */
#ifndef NL_SOCKET_H
#define NL_SOCKET_H

/* fd is about to be closed: its pending acquisition and HTTP exchanges are
 * settled, its entry forgotten, as close() does. */
void nl_sock_closing(int fd);

/* The same for each fd from first to last, as close_range(first, last,
 * flags) does (nothing with CLOSE_RANGE_CLOEXEC). */
void nl_sock_closing_range(unsigned first, unsigned last, int flags);

#endif
