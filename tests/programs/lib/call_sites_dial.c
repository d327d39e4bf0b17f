/* SPDX-License-Identifier: Apache-2.0 */
/* A shared library of the call-site test: a function of its own that opens
 * connections, so the test has a call site outside the program. */
#include "dial.h"

__attribute__((visibility("default"), noinline)) int call_sites_lib_dial(int port) { return dial_port(port); }
