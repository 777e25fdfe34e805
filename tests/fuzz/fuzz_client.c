// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl diff's readers of files anyone may hand it: folded text and gzip'd pprof profiles,
 * and the diff of two sides. The first byte of an input picks what the rest is:
 *
 *	0  folded text (stacks__from_folded)
 *	1  a pprof file as it lies on disk, gzip'd (stacks__from_pprof)
 *	2  a pprof profile before compression: the harness gzips it first, so the fuzzer reaches
 *	   the profile decoder instead of spending itself on gzip's checksums
 *	3  two folded sides, split at the first NUL, diffed and written as two-column folded
 *
 * Output goes to /dev/null; nothing is kept between inputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "diff.h"
#include "stacks.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	return 0;
}

/* gzip data into a new buffer; NULL when zlib fails (the input is then skipped). */
static uint8_t *gzip(const uint8_t *data, size_t size, size_t *out_len)
{
	z_stream z = {0};
	uLong cap;
	uint8_t *out;

	/* windowBits 15 + 16: a gzip header and trailer, as pprof writes. */
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&z, (uLong)size) + 32;
	out = malloc(cap);
	if (!out) {
		deflateEnd(&z);
		return NULL;
	}
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)size;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		deflateEnd(&z);
		free(out);
		return NULL;
	}
	*out_len = z.total_out;
	deflateEnd(&z);
	return out;
}

/* Whatever a side holds must be readable back in full. */
static void use_side(struct stacks *s)
{
	const struct stack_count *items;
	uint64_t sum = 0;
	size_t n;

	if (!s)
		return;
	items = stacks__items(s, &n);
	for (size_t i = 0; i < n; i++) {
		if (!items[i].stack || (i && strcmp(items[i - 1].stack, items[i].stack) >= 0))
			abort(); /* unique, in bytewise order: as stacks.h promises */
		sum += items[i].count;
	}
	if (sum != stacks__total(s))
		abort();
}

static void fuzz_diff(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t la = nul ? (size_t)(nul - data) : size;
	struct stacks *a, *b;
	struct diff *d;
	char err[256];

	a = stacks__from_folded("a.folded", (const char *)data, la, err, sizeof(err));
	b = nul ? stacks__from_folded("b.folded", (const char *)nul + 1, size - la - 1, err,
				      sizeof(err))
		: NULL;
	if (a && b) {
		d = diff__new(a, b);
		if (d)
			diff__write_folded(d, devnull);
		diff__free(d);
	}
	stacks__free(a);
	stacks__free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stacks *s = NULL;
	uint8_t *gz;
	size_t gz_len;
	char err[256];

	if (size < 1)
		return 0;
	switch (data[0] & 3) {
	case 0:
		s = stacks__from_folded("fuzz.folded", (const char *)data + 1, size - 1, err,
					sizeof(err));
		break;
	case 1:
		s = stacks__from_pprof("fuzz.pb.gz", data + 1, size - 1, err, sizeof(err));
		break;
	case 2:
		gz = gzip(data + 1, size - 1, &gz_len);
		if (gz)
			s = stacks__from_pprof("fuzz.pb.gz", gz, gz_len, err, sizeof(err));
		free(gz);
		break;
	case 3:
		fuzz_diff(data + 1, size - 1);
		break;
	}
	use_side(s);
	stacks__free(s);
	return 0;
}
