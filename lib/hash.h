/* SPDX-License-Identifier: BSD-2-Clause */
/* Small helpers for the hand-sized open-addressing tables of the daemon and the client. */
#ifndef PROFD_HASH_H
#define PROFD_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit finalizer: every input bit affects every output bit (the murmur3 fmix64 constants). */
static inline uint64_t hash_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* FNV-1a over n bytes: for strings and byte keys. */
static inline uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 14695981039346656037ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

#endif
