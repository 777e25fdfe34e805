// SPDX-License-Identifier: BSD-2-Clause
/* Wire helpers: framed packing of every message kind, size limits, the socket path. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "frame.h"
#include "wire.h"

/* Pack, check the header against the body, unpack. NULL on any mismatch. */
static Profd__Request *req_round_trip(const Profd__Request *req)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	Profd__Request *out;

	if (wire_pack_request(req, FRAME_MAX_REQUEST, &buf, &len))
		return NULL;
	if (len != FRAME_HDR_SIZE + protobuf_c_message_get_packed_size(&req->base) ||
	    frame_get_header(buf) != len - FRAME_HDR_SIZE) {
		free(buf);
		return NULL;
	}
	out = profd__request__unpack(NULL, len - FRAME_HDR_SIZE, buf + FRAME_HDR_SIZE);
	free(buf);
	return out;
}

static Profd__Response *resp_round_trip(const Profd__Response *resp)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	Profd__Response *out;

	if (wire_pack_response(resp, FRAME_MAX_REPLY, &buf, &len))
		return NULL;
	if (len != FRAME_HDR_SIZE + protobuf_c_message_get_packed_size(&resp->base) ||
	    frame_get_header(buf) != len - FRAME_HDR_SIZE) {
		free(buf);
		return NULL;
	}
	out = profd__response__unpack(NULL, len - FRAME_HDR_SIZE, buf + FRAME_HDR_SIZE);
	free(buf);
	return out;
}

static void test_requests(void)
{
	Profd__Request req = PROFD__REQUEST__INIT, *out;
	Profd__Hello hello = PROFD__HELLO__INIT;
	Profd__StatusRequest status = PROFD__STATUS_REQUEST__INIT;
	Profd__DumpRequest dump = PROFD__DUMP_REQUEST__INIT;
	uint32_t pids[] = {1, 4242, 4294967295u};

	hello.protocol_version = PROFD_PROTOCOL_VERSION;
	hello.client = "profctl 0.1.0";
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &hello;
	out = req_round_trip(&req);
	CHECK(out && out->msg_case == PROFD__REQUEST__MSG_HELLO);
	if (out && out->msg_case == PROFD__REQUEST__MSG_HELLO) {
		CHECK_EQ_U(out->hello->protocol_version, PROFD_PROTOCOL_VERSION);
		CHECK_STREQ(out->hello->client, "profctl 0.1.0");
	}
	profd__request__free_unpacked(out, NULL);

	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &status;
	out = req_round_trip(&req);
	CHECK(out && out->msg_case == PROFD__REQUEST__MSG_STATUS && out->status);
	profd__request__free_unpacked(out, NULL);

	dump.n_pids = 3;
	dump.pids = pids;
	dump.has_tid = true;
	dump.tid = 77;
	dump.has_since_ns = true;
	dump.since_ns = 10000000000ull;
	dump.has_start_ns = true;
	dump.start_ns = 5;
	dump.has_end_ns = true;
	dump.end_ns = UINT64_MAX;
	req.msg_case = PROFD__REQUEST__MSG_DUMP;
	req.dump = &dump;
	out = req_round_trip(&req);
	CHECK(out && out->msg_case == PROFD__REQUEST__MSG_DUMP);
	if (out && out->msg_case == PROFD__REQUEST__MSG_DUMP) {
		CHECK_EQ_U(out->dump->n_pids, 3);
		CHECK(out->dump->n_pids == 3 && out->dump->pids[0] == 1 &&
		      out->dump->pids[1] == 4242 && out->dump->pids[2] == 4294967295u);
		CHECK(out->dump->has_tid);
		CHECK_EQ_U(out->dump->tid, 77);
		CHECK_EQ_U(out->dump->since_ns, 10000000000ull);
		CHECK_EQ_U(out->dump->start_ns, 5);
		CHECK_EQ_U(out->dump->end_ns, UINT64_MAX);
	}
	profd__request__free_unpacked(out, NULL);

	/* An empty Request: nothing set, and it still frames (4 bytes of zero length). */
	{
		Profd__Request empty = PROFD__REQUEST__INIT;
		uint8_t *buf;
		size_t len;

		CHECK_EQ_I(wire_pack_request(&empty, FRAME_MAX_REQUEST, &buf, &len), 0);
		CHECK_EQ_U(len, FRAME_HDR_SIZE);
		CHECK_EQ_U(frame_get_header(buf), 0);
		free(buf);
		out = req_round_trip(&empty);
		CHECK(out && out->msg_case == PROFD__REQUEST__MSG__NOT_SET);
		profd__request__free_unpacked(out, NULL);
	}
}

static void test_responses(void)
{
	Profd__Response resp = PROFD__RESPONSE__INIT, *out;
	Profd__HelloReply hr = PROFD__HELLO_REPLY__INIT;
	Profd__StatusReply st = PROFD__STATUS_REPLY__INIT;
	Profd__Error e = PROFD__ERROR__INIT;
	uint32_t targets[] = {10, 20};

	hr.protocol_version = PROFD_PROTOCOL_VERSION;
	hr.daemon_version = PROFD_VERSION;
	hr.has_peer_uid = true;
	hr.peer_uid = 1000;
	resp.msg_case = PROFD__RESPONSE__MSG_HELLO;
	resp.hello = &hr;
	out = resp_round_trip(&resp);
	CHECK(out && out->msg_case == PROFD__RESPONSE__MSG_HELLO);
	if (out && out->msg_case == PROFD__RESPONSE__MSG_HELLO) {
		CHECK_EQ_U(out->hello->protocol_version, PROFD_PROTOCOL_VERSION);
		CHECK_STREQ(out->hello->daemon_version, PROFD_VERSION);
		CHECK(out->hello->has_peer_uid);
		CHECK_EQ_U(out->hello->peer_uid, 1000);
	}
	profd__response__free_unpacked(out, NULL);

	st.daemon_version = "0.1.0";
	st.has_pid = true;
	st.pid = 123;
	st.has_system_wide = true;
	st.system_wide = true;
	st.n_target_pids = 2;
	st.target_pids = targets;
	st.has_samples_received = true;
	st.samples_received = 1ull << 40;
	st.has_realtime_offset_ns = true;
	st.realtime_offset_ns = -5;
	resp.msg_case = PROFD__RESPONSE__MSG_STATUS;
	resp.status = &st;
	out = resp_round_trip(&resp);
	CHECK(out && out->msg_case == PROFD__RESPONSE__MSG_STATUS);
	if (out && out->msg_case == PROFD__RESPONSE__MSG_STATUS) {
		CHECK_STREQ(out->status->daemon_version, "0.1.0");
		CHECK_EQ_U(out->status->pid, 123);
		CHECK(out->status->has_system_wide && out->status->system_wide);
		CHECK(out->status->n_target_pids == 2 && out->status->target_pids[1] == 20);
		CHECK_EQ_U(out->status->samples_received, 1ull << 40);
		CHECK_EQ_I(out->status->realtime_offset_ns, -5);
		CHECK(!out->status->has_ncpus);
	}
	profd__response__free_unpacked(out, NULL);

	e.code = PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED;
	e.message = "pid 1: permission denied";
	resp.msg_case = PROFD__RESPONSE__MSG_ERROR;
	resp.error = &e;
	out = resp_round_trip(&resp);
	CHECK(out && out->msg_case == PROFD__RESPONSE__MSG_ERROR);
	if (out && out->msg_case == PROFD__RESPONSE__MSG_ERROR) {
		CHECK_EQ_U(out->error->code, PROFD__ERROR_CODE__ERROR_PERMISSION_DENIED);
		CHECK_STREQ(out->error->message, "pid 1: permission denied");
	}
	profd__response__free_unpacked(out, NULL);
}

static void test_profile(void)
{
	Profd__Response resp = PROFD__RESPONSE__INIT, *out;
	Profd__Profile prof = PROFD__PROFILE__INIT;
	char *strings[] = {"", "main", "/usr/bin/app", "samples", "count"};
	Profd__Frame f0 = PROFD__FRAME__INIT, f1 = PROFD__FRAME__INIT;
	Profd__Frame *frames[] = {&f0, &f1};
	Profd__Stack s0 = PROFD__STACK__INIT;
	Profd__Stack *stacks[] = {&s0};
	uint32_t s0_frames[] = {1, 0};
	Profd__ValueType vt = PROFD__VALUE_TYPE__INIT;
	Profd__ValueType *vts[] = {&vt};
	Profd__Sample sm = PROFD__SAMPLE__INIT;
	Profd__Sample *samples[] = {&sm};
	uint64_t values[] = {17};
	Profd__Process pr = PROFD__PROCESS__INIT;
	Profd__Process *procs[] = {&pr};
	Profd__Thread th = PROFD__THREAD__INIT;
	Profd__Thread *threads[] = {&th};

	f0.kind = PROFD__FRAME_KIND__FRAME_NATIVE;
	f0.name = 1;
	f0.has_module = true;
	f0.module = 2;
	f0.has_address = true;
	f0.address = 0x1234;
	f1.kind = PROFD__FRAME_KIND__FRAME_KERNEL;
	f1.name = 1;
	s0.n_frames = 2;
	s0.frames = s0_frames;
	vt.type = 3;
	vt.unit = 4;
	sm.stack = 0;
	sm.pid = 42;
	sm.tid = 43;
	sm.n_values = 1;
	sm.values = values;
	pr.pid = 42;
	pr.name = 2;
	th.tid = 43;
	th.pid = 42;
	th.name = 1;
	prof.n_strings = 5;
	prof.strings = strings;
	prof.n_frames = 2;
	prof.frames = frames;
	prof.n_stacks = 1;
	prof.stacks = stacks;
	prof.n_value_types = 1;
	prof.value_types = vts;
	prof.n_samples = 1;
	prof.samples = samples;
	prof.n_processes = 1;
	prof.processes = procs;
	prof.n_threads = 1;
	prof.threads = threads;
	prof.has_start_ns = true;
	prof.start_ns = 100;
	prof.has_end_ns = true;
	prof.end_ns = 200;
	resp.msg_case = PROFD__RESPONSE__MSG_PROFILE;
	resp.profile = &prof;
	out = resp_round_trip(&resp);
	CHECK(out && out->msg_case == PROFD__RESPONSE__MSG_PROFILE);
	if (out && out->msg_case == PROFD__RESPONSE__MSG_PROFILE) {
		Profd__Profile *p = out->profile;

		CHECK_EQ_U(p->n_strings, 5);
		if (p->n_strings == 5) {
			CHECK_STREQ(p->strings[0], "");
			CHECK_STREQ(p->strings[2], "/usr/bin/app");
		}
		CHECK_EQ_U(p->n_frames, 2);
		if (p->n_frames == 2) {
			CHECK_EQ_U(p->frames[0]->kind, PROFD__FRAME_KIND__FRAME_NATIVE);
			CHECK_EQ_U(p->frames[0]->address, 0x1234);
			CHECK_EQ_U(p->frames[0]->module, 2);
			CHECK_EQ_U(p->frames[1]->kind, PROFD__FRAME_KIND__FRAME_KERNEL);
			CHECK(!p->frames[1]->has_module);
		}
		CHECK(p->n_stacks == 1 && p->stacks[0]->n_frames == 2 &&
		      p->stacks[0]->frames[0] == 1 && p->stacks[0]->frames[1] == 0);
		CHECK(p->n_value_types == 1 && p->value_types[0]->type == 3 &&
		      p->value_types[0]->unit == 4);
		CHECK(p->n_samples == 1 && p->samples[0]->pid == 42 && p->samples[0]->tid == 43 &&
		      p->samples[0]->n_values == 1 && p->samples[0]->values[0] == 17);
		CHECK(p->n_processes == 1 && p->processes[0]->pid == 42 &&
		      p->processes[0]->name == 2);
		CHECK(p->n_threads == 1 && p->threads[0]->tid == 43);
		CHECK_EQ_U(p->start_ns, 100);
		CHECK_EQ_U(p->end_ns, 200);
	}
	profd__response__free_unpacked(out, NULL);
}

static void test_limits(void)
{
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__Hello hello = PROFD__HELLO__INIT;
	Profd__Response resp = PROFD__RESPONSE__INIT;
	Profd__Error e = PROFD__ERROR__INIT;
	uint8_t *buf = (uint8_t *)"untouched";
	size_t len = 12345, size;

	hello.protocol_version = 1;
	hello.client = "a client name of some length";
	req.msg_case = PROFD__REQUEST__MSG_HELLO;
	req.hello = &hello;
	size = protobuf_c_message_get_packed_size(&req.base);
	/* The maximum is on the message, not counting the header. */
	CHECK_EQ_I(wire_pack_request(&req, size - 1, &buf, &len), -EMSGSIZE);
	CHECK_STREQ((char *)buf, "untouched");
	CHECK_EQ_U(len, 12345);
	CHECK_EQ_I(wire_pack_request(&req, size, &buf, &len), 0);
	CHECK_EQ_U(len, size + FRAME_HDR_SIZE);
	free(buf);

	e.code = PROFD__ERROR_CODE__ERROR_INTERNAL;
	e.message = "x";
	resp.msg_case = PROFD__RESPONSE__MSG_ERROR;
	resp.error = &e;
	size = protobuf_c_message_get_packed_size(&resp.base);
	buf = (uint8_t *)"untouched";
	CHECK_EQ_I(wire_pack_response(&resp, size - 1, &buf, &len), -EMSGSIZE);
	CHECK_STREQ((char *)buf, "untouched");
	CHECK_EQ_I(wire_pack_response(&resp, size, &buf, &len), 0);
	CHECK_EQ_U(len, size + FRAME_HDR_SIZE);
	free(buf);
}

static void test_socket_path(void)
{
	CHECK_EQ_I(unsetenv(PROFD_SOCKET_ENV), 0);
	CHECK_STREQ(wire_socket_path(NULL), "/run/profd/profd.sock");
	CHECK_STREQ(wire_socket_path(""), PROFD_DEFAULT_SOCKET);
	CHECK_STREQ(wire_socket_path("/tmp/a.sock"), "/tmp/a.sock");
	CHECK_EQ_I(setenv(PROFD_SOCKET_ENV, "/tmp/env.sock", 1), 0);
	CHECK_STREQ(wire_socket_path(NULL), "/tmp/env.sock");
	CHECK_STREQ(wire_socket_path(""), "/tmp/env.sock");
	/* The argument wins over the environment. */
	CHECK_STREQ(wire_socket_path("/tmp/a.sock"), "/tmp/a.sock");
	/* An empty variable is as good as none. */
	CHECK_EQ_I(setenv(PROFD_SOCKET_ENV, "", 1), 0);
	CHECK_STREQ(wire_socket_path(NULL), PROFD_DEFAULT_SOCKET);
	unsetenv(PROFD_SOCKET_ENV);
}

static void test_error_names(void)
{
	CHECK_STREQ(wire_error_name(PROFD__ERROR_CODE__ERROR_BUSY), "busy");
	CHECK_STREQ(wire_error_name(PROFD__ERROR_CODE__ERROR_TOO_LARGE), "too large");
	CHECK_STREQ(wire_error_name(PROFD__ERROR_CODE__ERROR_UNSUPPORTED_VERSION),
		    "unsupported protocol version");
	CHECK_STREQ(wire_error_name((Profd__ErrorCode)999), "error");
}

int main(void)
{
	test_requests();
	test_responses();
	test_profile();
	test_limits();
	test_socket_path();
	test_error_names();
	return CHECK_DONE();
}
