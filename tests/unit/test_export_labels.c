// SPDX-License-Identifier: BSD-2-Clause
/*
 * The fleet export's labels: containers and pods from cgroup paths of each runtime, service
 * names from the environment and [services] rules, against a /proc tree made by the test and
 * against this test's own process.
 */
#include "check.h"
#include "labels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void cg(const char *text, const char *container, const char *pod)
{
	struct proc_labels l;

	memset(&l, 0x55, sizeof(l));
	labels_from_cgroup(text, &l);
	if (strcmp(l.container, container) || strcmp(l.pod_uid, pod))
		fprintf(stderr, "cgroup '%s': container '%s' pod '%s'\n", text, l.container,
			l.pod_uid);
	CHECK_STREQ(l.container, container);
	CHECK_STREQ(l.pod_uid, pod);
}

static void test_cgroup(void)
{
	/* Docker with systemd's cgroup driver, and with cgroupfs. */
	cg("0::/system.slice/docker-" ID64 ".scope\n", "0123456789ab", "");
	cg("0::/docker/" ID64 "\n", "0123456789ab", "");
	/* Kubernetes with containerd and with CRI-O (systemd driver: '_' in the pod uid). */
	cg("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-"
	   "pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/cri-containerd-" ID64 ".scope\n",
	   "0123456789ab", "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
	cg("0::/kubepods.slice/kubepods-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/crio-" ID64
	   ".scope\n",
	   "0123456789ab", "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
	/* cgroupfs driver: /kubepods/burstable/pod<uid>/<id>. */
	cg("0::/kubepods/burstable/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/" ID64 "\n",
	   "0123456789ab", "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
	/* Podman, its conmon is not the container. */
	cg("0::/machine.slice/libpod-" ID64 ".scope/container\n", "0123456789ab", "");
	cg("0::/machine.slice/libpod-conmon-" ID64 ".scope\n", "", "");
	/* A systemd service; a login session is nothing. */
	cg("0::/system.slice/trainer.service\n", "trainer.service", "");
	cg("0::/user.slice/user-1000.slice/session-4.scope\n", "", "");
	cg("0::/\n", "", "");
	/* cgroup v1: the systemd hierarchy names the unit. */
	cg("12:cpu,cpuacct:/\n1:name=systemd:/system.slice/nginx.service\n", "nginx.service", "");
	/* Garbage is nothing, not a crash. */
	cg("", "", "");
	cg("::::\n\n0::", "", "");
	cg("0::/system.slice/docker-0123.scope\n", "", "");
}

static void test_environ(void)
{
	static const char env[] = "HOME=/root\0OTEL_SERVICE_NAME=ranker\0"
				  "PYROSCOPE_APPLICATION_NAME=other\0";
	static const char env2[] = "PYROSCOPE_APPLICATION_NAME=trainer\0OTEL_SERVICE_NAME=\0";
	static const char env3[] = "OTEL_SERVICE_NAME_X=no\0OTEL_SERVICE_NAME=bad\x01name";
	char out[64];

	CHECK(labels_service_from_environ(env, sizeof(env) - 1, out, sizeof(out)));
	CHECK_STREQ(out, "ranker");
	CHECK(labels_service_from_environ(env2, sizeof(env2) - 1, out, sizeof(out)));
	CHECK_STREQ(out, "trainer");
	CHECK(!labels_service_from_environ(env3, sizeof(env3) - 1, out, sizeof(out)));
	/* Not NUL-terminated at the end (a truncated read) is fine. */
	CHECK(labels_service_from_environ("OTEL_SERVICE_NAME=abc", 21, out, sizeof(out)));
	CHECK_STREQ(out, "abc");
	CHECK(labels_service_from_environ("OTEL_SERVICE_NAME=abcdefgh", 26, out, 4));
	CHECK_STREQ(out, "abc");
}

static void put(const char *dir, const char *name, const char *data, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fwrite(data, 1, len, f);
	fclose(f);
}

static void put_s(const char *dir, const char *name, const char *text)
{
	put(dir, name, text, strlen(text));
}

static void test_resolve(void)
{
	char root[] = "/tmp/profd-labels-XXXXXX", dir[600];
	struct export_config cfg = {0};
	struct proc_labels l;

	CHECK(mkdtemp(root) != NULL);
	snprintf(dir, sizeof(dir), "%s/4242", root);
	CHECK_EQ_I(mkdir(dir, 0755), 0);
	put_s(dir, "stat", "4242 (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0\n");
	put(dir, "cmdline", "python3\0train.py\0--epochs\0", 26);
	put_s(dir, "cgroup", "0::/system.slice/docker-" ID64 ".scope\n");
	put(dir, "environ", "A=1\0PYROSCOPE_APPLICATION_NAME=ranker\0", 38);

	/* A rule first: globs match the command line, comm or executable. */
	cfg.services[0] = (struct config_service){"trainer", "*train.py*"};
	cfg.nservices = 1;
	CHECK_EQ_I(labels_resolve(root, 4242, &cfg, "python3", "/usr/bin/python3.11", &l), 0);
	CHECK_STREQ(l.service, "trainer");
	CHECK_STREQ(l.container, "0123456789ab");
	CHECK_EQ_U(l.start_ticks, 777);
	cfg.services[0].glob = "/usr/bin/python3.*";
	CHECK_EQ_I(labels_resolve(root, 4242, &cfg, "python3", "/usr/bin/python3.11", &l), 0);
	CHECK_STREQ(l.service, "trainer");
	/* Then the environment. */
	cfg.services[0].glob = "nomatch";
	CHECK_EQ_I(labels_resolve(root, 4242, &cfg, "python3", "/usr/bin/python3.11", &l), 0);
	CHECK_STREQ(l.service, "ranker");
	/* Then the container. */
	put(dir, "environ", "A=1\0", 4);
	CHECK_EQ_I(labels_resolve(root, 4242, &cfg, "python3", "/usr/bin/python3.11", &l), 0);
	CHECK_STREQ(l.service, "0123456789ab");
	put_s(dir, "cgroup", "0::/system.slice/ranker.service\n");
	CHECK_EQ_I(labels_resolve(root, 4242, &cfg, "python3", "/usr/bin/python3.11", &l), 0);
	CHECK_STREQ(l.service, "ranker");
	CHECK_STREQ(l.container, "ranker.service");
	/* Then the executable's name. */
	put_s(dir, "cgroup", "0::/user.slice/session-2.scope\n");
	CHECK_EQ_I(labels_resolve(root, 4242, &cfg, "python3", "/usr/bin/python3.11", &l), 0);
	CHECK_STREQ(l.service, "python3.11");
	/* A process that is gone keeps what the store knew. */
	CHECK_EQ_I(labels_resolve(root, 99, &cfg, "worker", NULL, &l), 0);
	CHECK_STREQ(l.service, "worker");
	CHECK_EQ_I(labels_resolve(root, 99, &cfg, NULL, NULL, &l), -ESRCH);
	CHECK_STREQ(l.service, "unknown");

	/* This very process, through the real /proc. */
	CHECK_EQ_I(setenv("OTEL_SERVICE_NAME", "late", 1), 0); /* not in /proc's copy */
	CHECK_EQ_I(
	    labels_resolve(NULL, (uint32_t)getpid(), &(struct export_config){0}, NULL, NULL, &l),
	    0);
	CHECK(l.start_ticks > 0);
	/* Named by its container or service unit when it runs in one, else by its executable. */
	if (!l.container[0])
		CHECK_STREQ(l.service, "test_export_labels");
	else
		CHECK(l.service[0] != '\0');

	snprintf(dir, sizeof(dir), "rm -rf %s", root);
	CHECK_EQ_I(system(dir), 0);
}

int main(void)
{
	test_cgroup();
	test_environ();
	test_resolve();
	return CHECK_DONE();
}
