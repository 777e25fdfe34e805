// SPDX-License-Identifier: BSD-2-Clause
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"
#include "sampler.h"
#include "stacks.skel.h"

struct snapshot {
	struct stacks_bpf *skel;
	uint8_t *buf; /* read buffer: READ_CHUNK plus room for one record cut at its end */
};

/* What one read() asks for: the iterator's seq file hands out up to this much at once. */
#define READ_CHUNK (64u << 10)
#define BUF_SIZE (READ_CHUNK + sizeof(struct profd_sample_rec))

struct snapshot *snapshot__new(struct sampler *s, char *why, size_t why_len)
{
	struct snapshot *sn = calloc(1, sizeof(*sn));
	int procs_fd, tstates_fd, err;

	if (!sn) {
		snprintf(why, why_len, "out of memory");
		return NULL;
	}
	sn->buf = malloc(BUF_SIZE);
	sn->skel = stacks_bpf__open();
	if (!sn->buf || !sn->skel) {
		err = sn->buf ? -errno : -ENOMEM;
		snprintf(why, why_len, "opening the stacks BPF object: %s", strerror(-err));
		goto fail;
	}
	sampler__python_maps(s, &procs_fd, &tstates_fd);
	err = bpf_map__reuse_fd(sn->skel->maps.py_procs, procs_fd);
	if (!err)
		err = bpf_map__reuse_fd(sn->skel->maps.py_tstates, tstates_fd);
	if (err) {
		snprintf(why, why_len, "sharing the sampler's Python maps: %s", strerror(-err));
		goto fail;
	}
	err = stacks_bpf__load(sn->skel);
	if (err) {
		/*
		 * The program needs a sleepable task iterator (5.15), bpf_copy_from_user_task
		 * (5.18) and bpf_loop (5.17); the per-process filter needs 6.1.
		 */
		snprintf(why, why_len,
			 "the kernel cannot load the stack dump's BPF program (%s): it needs Linux "
			 "6.1 or newer",
			 strerror(-err));
		goto fail;
	}
	return sn;
fail:
	pr_warn("stacks: %s", why);
	snapshot__free(sn);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

void snapshot__free(struct snapshot *sn)
{
	if (!sn)
		return;
	stacks_bpf__destroy(sn->skel);
	free(sn->buf);
	free(sn);
}

/*
 * Hand the whole records at the start of buf[0..*have) to fn and keep the rest. Returns the
 * records handed, or a negative errno (-EPROTO for a record that makes no sense).
 */
static int parse(uint8_t *buf, size_t *have, uint32_t pid, size_t room, snapshot_thread_fn fn,
		 void *ctx, size_t *n)
{
	size_t off = 0;
	int err;

	while (*have - off >= sizeof(struct profd_rec_hdr)) {
		const struct profd_sample_rec *rec = (const void *)(buf + off);
		struct profd_rec_hdr hdr;

		memcpy(&hdr, buf + off, sizeof(hdr));
		if (hdr.type != PROFD_REC_THREAD || hdr.size < PROFD_SAMPLE_HDR_SIZE ||
		    hdr.size > sizeof(struct profd_sample_rec))
			return -EPROTO;
		if (*have - off < hdr.size)
			break;
		/* A kernel that ignored the link's pid filter: the program skips others too. */
		if (rec->pid == pid) {
			if (*n >= room)
				return -E2BIG;
			err = fn(ctx, rec, hdr.size);
			if (err < 0)
				return err;
			(*n)++;
		}
		off += hdr.size;
	}
	memmove(buf, buf + off, *have - off);
	*have -= off;
	return 0;
}

int snapshot__take(struct snapshot *sn, uint32_t pid, size_t max_threads, snapshot_thread_fn fn,
		   void *ctx)
{
	union bpf_iter_link_info info = {.task.pid = pid};
	LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof(info));
	struct bpf_link *link;
	size_t have = 0, n = 0;
	ssize_t got;
	int fd, err = 0;

	if (!pid)
		return -EINVAL;
	sn->skel->bss->target_tgid = pid;
	sn->skel->bss->py_walked_tgid = 0;
	/*
	 * Not LIBBPF_OPTS: libbpf 1.1 refuses opts whose tail padding is not zero, and the
	 * macro's compound literal does not zero it in every build.
	 */
	memset(&opts, 0, sizeof(opts));
	opts.sz = sizeof(opts);
	opts.link_info = &info;
	opts.link_info_len = sizeof(info);
	link = bpf_program__attach_iter(sn->skel->progs.profd_stacks, &opts);
	if (!link)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	for (;;) {
		got = read(fd, sn->buf + have, READ_CHUNK);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			err = -errno;
			break;
		}
		if (got == 0) {
			/* The iterator ends on a record boundary. */
			err = have ? -EPROTO : 0;
			break;
		}
		have += (size_t)got;
		err = parse(sn->buf, &have, pid, max_threads, fn, ctx, &n);
		if (err)
			break;
	}
	close(fd);
out:
	bpf_link__destroy(link);
	return err ? err : (int)n;
}
