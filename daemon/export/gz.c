// SPDX-License-Identifier: BSD-2-Clause
#include "gz.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int export_gunzip(const uint8_t *in, size_t len, size_t max, uint8_t **out, size_t *out_len)
{
	size_t cap = len * 4 < 4096 ? 4096 : len * 4, used = 0;
	uint8_t *buf = NULL, *nb;
	z_stream zs;
	int zerr, err = 0;

	if (!in || !len || len > UINT_MAX)
		return -EBADMSG;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	do {
		if (used == cap || !buf) {
			if (buf)
				cap *= 2;
			if (cap > max)
				cap = max;
			if (buf && used == cap) {
				err = -EFBIG;
				goto out;
			}
			nb = realloc(buf, cap);
			if (!nb) {
				err = -ENOMEM;
				goto out;
			}
			buf = nb;
		}
		zs.next_out = buf + used;
		zs.avail_out = (uInt)(cap - used);
		zerr = inflate(&zs, Z_NO_FLUSH);
		used = cap - zs.avail_out;
		if (zerr != Z_OK && zerr != Z_STREAM_END) {
			err = zerr == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
			goto out;
		}
		if (zerr == Z_OK && !zs.avail_in && zs.avail_out) {
			err = -EBADMSG; /* truncated */
			goto out;
		}
	} while (zerr != Z_STREAM_END);
	if (zs.avail_in)
		err = -EBADMSG; /* something after the gzip member */
out:
	inflateEnd(&zs);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*out_len = used;
	return 0;
}
