/* SPDX-License-Identifier: Apache-2.0 */
/* Start-up figures of server processes: nemolens.server.ready.duration (from
 * the process's start to the first response it wrote on a socket it
 * accepted) and, where NeMo Gym's launch stamps are set, the stages of
 * gym.server.startup_stage_duration_ms. Both are recorded once per process,
 * at its first server response, so a process that never answers a request
 * (a launch shell, a helper, a client) records neither.
 *
 * The stamps are parsed and the start is taken at load; the first response
 * reads the clock (and /proc/self/stat in a fork child) once. After that
 * the request path pays one load and a branch (nl_startup_pending). */
#ifndef NL_STARTUP_H
#define NL_STARTUP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"

/* A stamp as NeMo Gym writes it (integer wall-clock nanoseconds): the
 * value, or 0 when v is NULL, not an integer, or not above 0, as Gym then
 * ignores it. Accepts what Python's int() accepts of a decimal integer:
 * blanks around it, a sign, and single underscores between digits. */
int64_t nl_startup_stamp(const char *v);

/* Gym's stages from the stamps (0: absent) and the process's entry time,
 * all wall-clock nanoseconds. A stage that does not apply is -1. With
 * spawn <= setup_done <= entered: venv_setup and interpreter_start; with
 * spawn alone and spawn <= entered: interpreter_start; otherwise neither. */
struct nl_startup_stages {
	int64_t venv_setup_ns, interpreter_start_ns;
};
struct nl_startup_stages nl_startup_stages_of(int64_t spawn, int64_t setup_done, int64_t entered);

/* From the constructor, with the environment window open (env.h): the
 * start of this process image and its stamps. */
void nl_startup_load(const struct nl_config *cfg);
/* From the first record: the instruments (HTTP server side on only). */
void nl_startup_register(void);
/* From a fork child's handler: the child is a process of its own, whose
 * first response is still to come. */
void nl_startup_atfork_child(void);

/* True until this process's first server response was seen. */
extern atomic_bool nl_startup_pending;
/* The first server response: records the figures, once per process. */
void nl_startup_first_response(void);

#endif
