// SPDX-License-Identifier: BSD-2-Clause
#include "wire.h"
#include "frame.h"

#include <errno.h>
#include <stdlib.h>

static int pack(const ProtobufCMessage *msg, size_t max_len, uint8_t **out, size_t *out_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf;

	/* The header holds 32 bits whatever the caller allows. */
	if (len > max_len || len > UINT32_MAX)
		return -EMSGSIZE;
	buf = malloc(FRAME_HDR_SIZE + len);
	if (!buf)
		return -ENOMEM;
	frame_put_header(buf, (uint32_t)len);
	protobuf_c_message_pack(msg, buf + FRAME_HDR_SIZE);
	*out = buf;
	*out_len = FRAME_HDR_SIZE + len;
	return 0;
}

int wire_pack_request(const Profd__Request *req, size_t max_len, uint8_t **out, size_t *out_len)
{
	return pack(&req->base, max_len, out, out_len);
}

int wire_pack_response(const Profd__Response *resp, size_t max_len, uint8_t **out, size_t *out_len)
{
	return pack(&resp->base, max_len, out, out_len);
}

const char *wire_socket_path(const char *arg)
{
	const char *env;

	if (arg && *arg)
		return arg;
	env = getenv(PROFD_SOCKET_ENV);
	if (env && *env)
		return env;
	return PROFD_DEFAULT_SOCKET;
}

const char *wire_error_name(Profd__ErrorCode code)
{
	switch (code) {
	case PROFD__ERROR_CODE__ERROR_BAD_REQUEST:
		return "bad request";
	case PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION:
		return "unsupported protocol version";
	case PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED:
		return "permission denied";
	case PROFD__ERROR_CODE__ERROR_NO_SAMPLES:
		return "no samples";
	case PROFD__ERROR_CODE__ERROR_TOO_LARGE:
		return "too large";
	case PROFD__ERROR_CODE__ERROR_INTERNAL:
		return "internal error";
	case PROFD__ERROR_CODE__ERROR_BUSY:
		return "busy";
	default:
		return "error";
	}
}
