/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 well-formedness, shared by the configuration parser and both
 * encoders: protobuf and JSON strings must be valid UTF-8, or a collector
 * rejects the whole request. */
#ifndef NL_UTF8_H
#define NL_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s (1..4, of at most n bytes), or
 * 0 if the bytes at s do not start one; then *bad_len is the maximal ill-formed
 * prefix that one U+FFFD replaces (the Unicode "maximal subpart" practice). */
size_t nl_utf8_seq(const unsigned char *s, size_t n, size_t *bad_len);

/* True when the n bytes at s are valid UTF-8. */
bool nl_utf8_valid(const char *s, size_t n);
/* Replaces every byte of s that is not part of valid UTF-8 by '?'. */
void nl_utf8_sanitize(char *s);
/* A malloc'd copy of s, sanitized. */
char *nl_utf8_sanitized_dup(const char *s);

#endif
