/* SPDX-License-Identifier: Apache-2.0 */
/* Connection acquisitions: the state machine behind the connection metrics.
 *
 * An acquisition is one connect() on a stream socket to a counted
 * destination. It is counted on entry. When connect() does not finish the
 * connection inside the call (EINPROGRESS, or EINTR on a blocking socket), the
 * fd becomes NL_FD_CONNECTING and the acquisition waits until one of these
 * tells the shim how it ended:
 *   getsockopt(SO_ERROR)  an error: abandoned; 0 and a peer: ok
 *   connect() again       EISCONN or 0: ok; EALREADY/EINPROGRESS: still waiting;
 *                         any other error: abandoned
 *   the first I/O         success: ok; EAGAIN/EINTR: still waiting; error: abandoned
 *   close(), dup2() over it, close_range()
 *                         the socket's real state: ok when it had connected,
 *                         else abandoned
 * The wait (entry to connect() until then) is recorded once, by whichever
 * thread settles it first.
 */
#ifndef NL_ACQUIRE_H
#define NL_ACQUIRE_H

#include <sys/socket.h>

#include "fdtable.h"

#define NL_ACQ_RECHECK (-2)   /* connect() on an fd whose acquisition is pending */

/* Decides, before the real connect(), what this call is: a destination index,
 * NL_DEST_NONE (not counted) or NL_ACQ_RECHECK; *entry is fd's table entry
 * (NULL when it has none). */
int nl_acq_classify(int fd, const struct sockaddr *addr, socklen_t len, struct nl_fd **entry);
/* The connect() hook's work around the real call: counts the attempt
 * (made from caller, connect()'s return address), starts or settles a wait. A counted connect that did not fail at once
 * (connected, or still in progress) may carry HTTP requests: unless follow
 * is NL_HTTP_NONE, its bytes are then followed as follow (the wait's start
 * and the following are one update of the fd's entry). Returns what the
 * real connect() returned, with its errno. */
int nl_acq_connect(int fd, const struct sockaddr *addr, socklen_t len, enum nl_fd_http follow,
		   const void *caller);
/* After I/O on an fd that was NL_FD_CONNECTING: ok is whether the call
 * succeeded, errno is still the call's. Keeps errno. */
void nl_acq_after_io(int fd, int ok) __attribute__((cold));
/* After getsockopt(SO_ERROR) returned so_error on fd, whose entry e was
 * NL_FD_CONNECTING. Keeps errno. */
void nl_acq_so_error(struct nl_fd *e, int fd, int so_error);
/* The getsockopt(fd, SOL_SOCKET, SO_ERROR, val, len) hook's work while
 * some fd is watched: the real call, then nl_acq_so_error when fd is
 * connecting. Returns what the real call returned, with its errno. */
int nl_acq_getsockopt_so_error(int fd, void *val, socklen_t *len);
/* The fd is going away (close, dup2 target, close_range): settle what is
 * pending, forget the fd. Keeps errno. */
void nl_acq_release(int fd) __attribute__((cold));

#endif
