/* SPDX-License-Identifier: Apache-2.0 */
/* Preprocessed at build time (cc -E -P) into the version script of
 * libnemolens_preload.so: the interposed functions and the public nemolens_*
 * API are exported, everything else stays local, so the target's own copies
 * of libcurl, protobuf-c or zlib are never disturbed. */
#include "interposed.h"
#define NL_EXPORTED(ret, name, ...) name;
{
  global:
    NL_REAL_FUNCS(NL_EXPORTED)
    NL_REAL_FUNCS_COLD(NL_EXPORTED)
    NL_REAL_FUNCS_BY_HAND(NL_EXPORTED)
    NL_SSL_FUNCS(NL_EXPORTED)
    NL_SSL_FUNCS_BY_HAND(NL_EXPORTED)
    nemolens_*;
  local:
    *;
};
