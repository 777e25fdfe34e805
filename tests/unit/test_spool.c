// SPDX-License-Identifier: BSD-2-Clause
/*
 * The export spool as a trust boundary (daemon/export/spool.c and the sender over it), against
 * the scripted server of sender_fixture.h: folders a link leads to or others can write are
 * refused; a spool damaged while the sender was stopped sends nothing of it, quarantines each
 * file with why, and keeps every good request; quarantine/ counts against the spool's size and
 * age caps, its oldest dropped first.
 */
#define _GNU_SOURCE
#include <zlib.h>

#include "sender_fixture.h"

/* A header as spool.h lays it out, its own CRC right, claiming a body of len bytes. */
static void fake_header(uint8_t *h, const char *exporter, uint64_t len)
{
	memset(h, 0, SPOOL_HDR_LEN);
	memcpy(h, "PROFDSPL", 8);
	h[8] = 1;
	h[12] = SPOOL_HDR_LEN;
	strcpy((char *)h + 16, exporter);
	for (int i = 0; i < 8; i++)
		h[32 + i] = (uint8_t)(len >> (8 * i));
	uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), h, 52);
	for (int i = 0; i < 4; i++)
		h[52 + i] = (uint8_t)(crc >> (8 * i));
}

/*
 * A spool damaged while profd was stopped (the probe's list, and more): files left by an older
 * profd without a header, emptied, cut short, random bytes, another exporter's, a file grown
 * past its header, one claiming a body over the cap, a 64 MiB sparse one, a link, a FIFO and a
 * file of another user. Each is quarantined with a note saying why, none is sent, none counts
 * against the cap of the three good requests, which all go.
 */
static void test_spool_damage(void)
{
	char dir[512];
	struct body good[5], junk = make_body(2000, 99);
	char names[8][SPOOL_NAME_MAX], name[SPOOL_NAME_MAX], url[128];
	uint64_t t = real_ns() - 60 * NSEC_PER_SEC;
	uint8_t h[SPOOL_HDR_LEN], *data;
	struct sender_opts o;
	struct server sv;
	struct sender *s;
	size_t len, n;
	int dfd;

	snprintf(dir, sizeof(dir), "%s", path("damage"));
	o = opts_for(dir, dead_port(), url, sizeof(url));
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	for (unsigned i = 0; i < 5; i++) {
		good[i] = make_body(1000, 90 + i);
		CHECK_EQ_I(submit(s, good[i], t + i), 0);
	}
	CHECK(WAIT_FOR(count_files(dir, NULL, 0) == 5, 3));
	sender__free(s);
	n = list_requests(dir, names, 8);
	if (!CHECK_EQ_U(n, 5))
		return;
	/* the fourth, cut to 300 bytes; a byte of the fifth's body changed */
	CHECK_EQ_I(truncate(path("damage/%s", names[3]), 300), 0);
	dfd = open(path("damage/%s", names[4]), O_WRONLY | O_CLOEXEC);
	CHECK(pwrite(dfd, "?", 1, SPOOL_HDR_LEN + 500) == 1);
	close(dfd);
	/* older than the good ones, so a cap would take them first if they counted */
	spool_name(name, t - 20, 100);
	write_file(path("damage/%s", name), good[0].data, good[0].len); /* no header */
	spool_name(name, t - 19, 101);
	write_file(path("damage/%s", name), "", 0);
	spool_name(name, t - 18, 102);
	write_file(path("damage/%s", name), junk.data, junk.len);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	spool_name(name, t - 17, 103);
	CHECK_EQ_I(spool_write(dfd, name, "otlp", good[1].data, good[1].len, 10), 0);
	spool_name(name, t - 16, 104);
	CHECK_EQ_I(spool_write(dfd, name, "pyroscope", good[1].data, good[1].len, 10), 0);
	CHECK_EQ_I(truncate(path("damage/%s", name), 3ll << 30), 0); /* 3 GiB, sparse */
	spool_name(name, t - 15, 105);
	fake_header(h, "pyroscope", 3ull << 30);
	write_file(path("damage/%s", name), h, sizeof(h));
	spool_name(name, t - 14, 106);
	fake_header(h, "pyroscope", 64u << 20);
	write_file(path("damage/%s", name), h, sizeof(h));
	CHECK_EQ_I(truncate(path("damage/%s", name), SPOOL_HDR_LEN + (64 << 20)), 0);
	spool_name(name, t - 13, 107);
	CHECK_EQ_I(symlink(path("damage/%s", names[0]), path("damage/%s", name)), 0);
	spool_name(name, t - 12, 108);
	CHECK_EQ_I(mkfifo(path("damage/%s", name), 0600), 0);
	spool_name(name, t - 11, 109);
	CHECK_EQ_I(spool_write(dfd, name, "pyroscope", good[2].data, good[2].len, 10), 0);
	if (geteuid() == 0)
		CHECK_EQ_I(fchownat(dfd, name, 12345, 12345, 0), 0);
	close(dfd);
	/* a write a crash interrupted goes; a file that is no request is left alone */
	write_file(path("damage/.tmp-%s", names[0]), "x", 1);
	write_file(path("damage/README"), "x", 1);

	/* taken up: only the good ones wait, whatever the others' sizes say */
	o = opts_for(dir, dead_port(), url, sizeof(url));
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_U(STAT(s, spool_requests), 4);
	CHECK_EQ_U(STAT(s, spool_bytes), 4000);
	/* the changed byte: found reading the body, before anything is sent */
	CHECK(WAIT_FOR(STAT(s, requests_invalid) == (geteuid() == 0 ? 12 : 11), 5));
	CHECK_EQ_U(STAT(s, spool_requests), 3);
	CHECK_EQ_U(STAT(s, spool_bytes), 3000);
	CHECK_EQ_U(STAT(s, samples_resumed), 30 + (geteuid() == 0 ? 0 : 10));
	CHECK_EQ_U(STAT(s, quarantine_requests), STAT(s, requests_invalid));
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	CHECK_EQ_U(list_requests(dir, names + 5, 3), 3);
	CHECK_EQ_I(count_files(dir, NULL, 0), 4);
	CHECK(access(path("damage/README"), F_OK) == 0);
	/* each with its reason beside it */
	spool_name(name, t - 20, 100);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "no spool header"));
	free(data);
	spool_name(name, t - 17, 103);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "a request for otlp, not pyroscope"));
	free(data);
	spool_name(name, t - 14, 106);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "sparse"));
	free(data);
	spool_name(name, t - 13, 107);
	data = read_whole(path("damage/quarantine/%s.invalid", name), &len);
	CHECK(data && strstr((char *)data, "symbolic link"));
	free(data);
	data = read_whole(path("damage/quarantine/%s.invalid", names[3]), &len);
	CHECK(data && strstr((char *)data, "300 bytes, its header says"));
	free(data);
	data = read_whole(path("damage/quarantine/%s.invalid", names[4]), &len);
	CHECK(data && strstr((char *)data, "the body's checksum does not match"));
	free(data);
	sender__free(s);

	/* a cap the good ones fill exactly: quarantine/ makes way, they all go, in order */
	server_start(&sv, 200);
	o = opts_for(dir, sv.port, url, sizeof(url));
	o.max_bytes = 3000;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK(WAIT_FOR(STAT(s, requests_sent) == 3 && STAT(s, spool_requests) == 0, 10));
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	CHECK_EQ_U(STAT(s, samples_sent), 30);
	CHECK_EQ_U(STAT(s, quarantine_requests), 0);
	if (CHECK_EQ_U(server_ngot(&sv), 3))
		for (size_t i = 0; i < 3; i++)
			CHECK(got_is(&sv, i, good[i].data, good[i].len));
	CHECK_EQ_U(list_requests(dir, names + 5, 3), 0);
	sender__free(s);
	server_stop(&sv);
	for (int i = 0; i < 5; i++)
		free(good[i].data);
	free(junk.data);
}

/*
 * quarantine/ counts against the spool's cap and age: over them its oldest go first, before any
 * request still to be sent, and status counts them.
 */
static void test_quarantine_cap(void)
{
	const char *dir = path("qcap");
	uint64_t t = real_ns(), each = strlen("HTTP 400\n\n") + SPOOL_HDR_LEN + 1000;
	char names[16][SPOOL_NAME_MAX], want[SPOOL_NAME_MAX], url[128];
	struct body b[8];
	struct sender_opts o;
	struct server sv;
	struct sender *s;

	server_start(&sv, 400);
	o = opts_for(dir, sv.port, url, sizeof(url));
	o.max_bytes = 5000; /* four quarantined requests of 1000 bytes and their notes */
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	for (unsigned i = 0; i < 8; i++) {
		b[i] = make_body(1000, 110 + i);
		CHECK_EQ_I(submit(s, b[i], t + i), 0);
		CHECK(WAIT_FOR(STAT(s, requests_quarantined) == i + 1, 3));
	}
	CHECK_EQ_U(STAT(s, quarantine_requests), 4);
	CHECK_EQ_U(STAT(s, quarantine_dropped), 4);
	CHECK_EQ_U(STAT(s, quarantine_bytes), 4 * each);
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	/* the newest four are kept, their notes with them */
	CHECK_EQ_I(count_files(path("qcap/quarantine"), NULL, 0), 8);
	if (CHECK_EQ_U(list_requests(path("qcap/quarantine"), names, 16), 4)) {
		spool_name(want, t + 4, 4);
		CHECK_STREQ(names[0], want);
	}
	sender__free(s);
	server_stop(&sv);

	/* a backend down: what waits to be sent pushes quarantine/ out, not the other way */
	o = opts_for(dir, dead_port(), url, sizeof(url));
	o.max_bytes = 5000;
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK_EQ_U(STAT(s, quarantine_requests), 4);
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ_I(submit(s, b[i], 0), 0);
	CHECK(WAIT_FOR(STAT(s, spool_requests) == 3 && STAT(s, quarantine_requests) == 1, 3));
	CHECK_EQ_U(STAT(s, quarantine_dropped), 3);
	CHECK_EQ_U(STAT(s, requests_dropped), 0);
	sender__free(s);

	/* and the age cap: a restart with max_age 1 s empties it */
	o.max_age_ns = NSEC_PER_SEC;
	usleep(1100 * 1000);
	s = sender__new(&o);
	if (!CHECK(s != NULL))
		return;
	CHECK(WAIT_FOR(STAT(s, quarantine_requests) == 0, 3));
	CHECK_EQ_U(STAT(s, quarantine_dropped), 1);
	CHECK_EQ_I(count_files(path("qcap/quarantine"), NULL, 0), 0);
	sender__free(s);
	for (int i = 0; i < 8; i++)
		free(b[i].data);
}

/* Folders profd must not trust: a link on the path, one others can write, another user's. */
static void test_unsafe_folders(void)
{
	struct sender_opts o;
	char url[128];

	o = opts_for(path("unused"), dead_port(), url, sizeof(url));
	mkdir(path("real"), 0700);
	CHECK_EQ_I(symlink(path("real"), path("link")), 0);
	o.spool_dir = path("link/spool");
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, ELOOP);
	CHECK(access(path("real/spool"), F_OK) != 0); /* nothing made through the link */
	mkdir(path("open"), 0700);
	chmod(path("open"), 0777);
	o.spool_dir = path("open");
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, EPERM);
	o.spool_dir = path("open/spool"); /* under it, too: not sticky */
	CHECK(sender__new(&o) == NULL);
	CHECK_EQ_I(errno, EPERM);
	if (geteuid() == 0) {
		mkdir(path("theirs"), 0700);
		CHECK_EQ_I(chown(path("theirs"), 12345, 12345), 0);
		o.spool_dir = path("theirs/spool");
		CHECK(sender__new(&o) == NULL);
		CHECK_EQ_I(errno, EPERM);
	}
}

int main(void)
{
	if (fixture_setup("test_spool"))
		return 1;
	test_unsafe_folders();
	test_spool_damage();
	test_quarantine_cap();
	fixture_cleanup();
	return CHECK_DONE();
}
