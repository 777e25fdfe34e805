// SPDX-License-Identifier: BSD-2-Clause
#include "sampler.h"
#include "grow.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <gelf.h>
#include <libelf.h>

#include "log.h"
#include "parse.h"
#include "procfs.h"
#include "sample.skel.h"

/* libcuda's launch entry points: the runtime and the graph API end up in one of these. */
static const char *const cuda_launch_funcs[] = {
    "cuLaunchKernel",	     "cuLaunchKernel_ptsz", "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz", "cuGraphLaunch",	    "cuGraphLaunch_ptsz",
};
#define N_CUDA_FUNCS (sizeof(cuda_launch_funcs) / sizeof(cuda_launch_funcs[0]))

/* Where the NVIDIA driver installs libcuda.so.1 (Debian/Ubuntu multiarch, Fedora, containers). */
static const char *const libcuda_dirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    "/usr/local/nvidia/lib64",	 "/usr/lib/wsl/lib",
};

/* Pids whose launch probe failed and was logged: later failures of the same pid are not. */
#define WARNED_PIDS 64
/* The largest .note.stapsdt section read to count a library's launch probes. */
#define LAUNCH_NOTES_MAX (1u << 20)

/* One process's USDT attachment to its CUPTI library. */
struct launch_probe {
	uint32_t pid;
	struct bpf_link *link;
};

struct sampler {
	struct sample_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link **links; /* one per CPU in cpus[] */
	int *perf_fds;
	unsigned int ncpus;
	struct bpf_link *exec_link;
	struct bpf_link *exit_link;
	struct bpf_link *fork_link;
	struct bpf_link *switch_link;	/* --off-cpu: tp_btf/sched_switch; NULL: off */
	struct bpf_link *sys_exit_link; /* --off-cpu: tp_btf/sys_exit */
	struct bpf_link *maps_link;	/* tp_btf/mmap_lock_released; NULL: changes not seen */
	bool filtered;
	bool no_children;
	/* A handful of processes run the CUPTI library at once: a plain array is enough. */
	struct launch_probe *probes;
	size_t nprobes;
	size_t probes_cap;
	/* ncuda_links = N_CUDA_FUNCS per target pid (or once for every process); NULL: not there */
	struct bpf_link **cuda_links;
	size_t ncuda_links;
	/* The target pids (none: every process), for uprobes only where they can matter. */
	uint32_t *pids;
	size_t npids;
	/* A ring: the oldest entry gives way, so a pid logs again at worst after 64 others. */
	uint32_t warned[WARNED_PIDS];
	unsigned int nwarned;
};

struct drain_ctx {
	sampler_record_fn fn;
	void *ctx;
};

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu, int group,
			   unsigned long flags)
{
	return (int)syscall(__NR_perf_event_open, attr, pid, cpu, group, flags);
}

/*
 * Parse a CPU list ("0-3,6\n") into online[0 .. n). Returns 0 or -EINVAL for a malformed list.
 * The file is the kernel's, but it is still input: every number is bounded.
 */
static int parse_cpu_list(const char *s, bool *online, int n)
{
	while (*s && *s != '\n') {
		char *end;
		long a, b;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		a = strtol(s, &end, 10);
		b = a;
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -EINVAL;
			b = strtol(s, &end, 10);
		}
		if (a < 0 || b < a || b >= n)
			return -EINVAL;
		for (long i = a; i <= b; i++)
			online[i] = true;
		s = end;
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return 0;
}

static int read_online_cpus(bool *online, int n)
{
	char buf[4096];
	ssize_t len;
	int fd, err;

	fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	err = len < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[len] = '\0';
	return parse_cpu_list(buf, online, n);
}

/*
 * The kernel refuses sampling frequencies above kernel.perf_event_max_sample_rate, which it
 * lowers by itself on busy machines; say so instead of a bare EINVAL later.
 */
static int check_sample_rate(uint32_t hz)
{
	char buf[32];
	uint64_t max;
	ssize_t n;
	int fd;

	fd = open("/proc/sys/kernel/perf_event_max_sample_rate", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* cannot tell: perf_event_open will */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (parse_u64(buf, 0, UINT64_MAX, &max) || hz <= max)
		return 0;
	pr_err("sampler: --frequency %u is above kernel.perf_event_max_sample_rate (%llu): use a "
	       "lower frequency or raise the sysctl",
	       hz, (unsigned long long)max);
	return -EINVAL;
}

static int on_ringbuf(void *ctx, void *data, size_t size)
{
	struct drain_ctx *d = ctx;

	return d->fn(d->ctx, data, size);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum log_level lvl = level == LIBBPF_WARN   ? LOG_LVL_WARN
			     : level == LIBBPF_INFO ? LOG_LVL_DEBUG
						    : LOG_LVL_DEBUG;

	/*
	 * libbpf prefixes its own name. Its format is the message site the log's rate limit
	 * counts by: formatted into "%s", all of libbpf's lines would be one site and -v would
	 * lose its load log after the first few lines.
	 */
	log_vmsg(lvl, fmt, ap);
	return 0;
}

/*
 * Size unwind_procs for descriptions of up to max_maps mappings (0: PROFD_UNWIND_MAX_MAPS): a
 * power of two of slots, the BPF search's index mask to match. Its entries take their value's
 * bytes each while in use (no preallocation); the number of processes it holds shrinks as the
 * bound grows, so that the map never passes SAMPLER_UNWIND_PROCS_BYTES.
 */
static int size_unwind_procs(struct sample_bpf *skel, uint32_t max_maps)
{
	uint32_t cap = 1, size, entries;
	int err;

	if (!max_maps)
		max_maps = PROFD_UNWIND_MAX_MAPS;
	while (cap < max_maps)
		cap <<= 1;
	size = PROFD_UNWIND_PROC_SIZE(cap);
	entries = SAMPLER_UNWIND_PROCS_BYTES / size;
	if (entries > SAMPLER_UNWIND_PROCS_MAX)
		entries = SAMPLER_UNWIND_PROCS_MAX;
	skel->rodata->unwind_maps_mask = cap - 1;
	err = bpf_map__set_value_size(skel->maps.unwind_procs, size);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.unwind_procs, entries);
	return err;
}

/*
 * Whether the kernel has the tracepoint profd_maps attaches to (CONFIG_TRACING), with the
 * arguments (mm, write) it was written for: else the program would fail the whole load.
 */
static bool has_maps_hook(void)
{
	const struct btf_type *t;
	struct btf *btf = btf__load_vmlinux_btf();
	bool ok = false;
	int id;

	if (!btf)
		return false;
	/* typedef void (*btf_trace_mmap_lock_released)(void *, struct mm_struct *, bool) */
	id = btf__find_by_name_kind(btf, "btf_trace_mmap_lock_released", BTF_KIND_TYPEDEF);
	t = id > 0 ? btf__type_by_id(btf, btf__resolve_type(btf, id)) : NULL;
	if (t && btf_is_ptr(t))
		t = btf__type_by_id(btf, t->type);
	ok = t && btf_is_func_proto(t) && btf_vlen(t) == 3;
	btf__free(btf);
	return ok;
}

/* Attach the mapping-change program, or say what is lost without it. */
static void attach_maps_hook(struct sampler *s)
{
	if (!bpf_program__autoload(s->skel->progs.profd_maps))
		return;
	s->maps_link = bpf_program__attach(s->skel->progs.profd_maps);
	if (!s->maps_link)
		pr_warn("sampler: attaching to mmap_lock_released: %s: code mapped later is not "
			"seen, and processes are described again on their walks' misses",
			strerror(errno));
}

static void explain_bpf_error(const char *what, int err)
{
	if (err == -EPERM || err == -EACCES)
		pr_err("sampler: %s: %s: profd needs root, or CAP_BPF and CAP_PERFMON "
		       "(CAP_SYS_ADMIN on kernels before 5.8)",
		       what, strerror(-err));
	else
		pr_err("sampler: %s: %s", what, strerror(-err));
}

struct sampler *sampler__new(const struct sampler_opts *opts)
{
	struct sampler *s;
	bool *online = NULL;
	int err, n, i;
	struct drain_ctx *dctx;

	libbpf_set_print(libbpf_print);

	s = calloc(1, sizeof(*s) + sizeof(*dctx));
	if (!s)
		return NULL;
	dctx = (struct drain_ctx *)(s + 1);
	dctx->fn = opts->on_record;
	dctx->ctx = opts->ctx;

	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		pr_err("sampler: the kernel has no BTF (/sys/kernel/btf/vmlinux): profd needs a "
		       "kernel built with CONFIG_DEBUG_INFO_BTF");
		err = -ENOTSUP;
		goto fail;
	}
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) <= 0) {
		pr_err("sampler: the kernel lacks BPF ring buffers (Linux 5.8+ needed), or BPF is "
		       "not permitted here");
		err = -ENOTSUP;
		goto fail;
	}

	/* Helpers the programs call, newest first: name the kernel that has them. */
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) <= 0 ||
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_get_current_task_btf,
				    NULL) <= 0 ||
	    libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_task_pt_regs, NULL) <= 0) {
		pr_err("sampler: the kernel lacks the BPF helpers bpf_loop, "
		       "bpf_get_current_task_btf or bpf_task_pt_regs: profd needs Linux 5.17 or "
		       "newer");
		err = -ENOTSUP;
		goto fail;
	}
	err = check_sample_rate(opts->frequency_hz);
	if (err)
		goto fail;

	s->skel = sample_bpf__open();
	if (!s->skel) {
		err = -errno;
		explain_bpf_error("opening the BPF object", err);
		goto fail;
	}
	s->filtered = opts->npids > 0 || opts->targets_only;
	s->no_children = opts->no_children;
	s->skel->rodata->filter_pids = s->filtered;
	s->skel->rodata->launch_interval_ns =
	    1000000000ull / (opts->launch_rate ? opts->launch_rate : SAMPLER_LAUNCH_RATE);
	s->skel->rodata->launch_burst_ns =
	    (opts->launch_burst ? opts->launch_burst : SAMPLER_LAUNCH_BURST) *
	    s->skel->rodata->launch_interval_ns;
	s->skel->rodata->wakeup_bytes = opts->ringbuf_size / 4;
	s->skel->rodata->off_cpu_min_ns = opts->off_cpu_min_ns;
	/* Without --off-cpu nothing is attached to the scheduler: not even a program to skip. */
	bpf_program__set_autoload(s->skel->progs.profd_switch, opts->off_cpu);
	bpf_program__set_autoload(s->skel->progs.profd_sys_exit, opts->off_cpu);
	if (!has_maps_hook()) {
		pr_warn(
		    "sampler: the kernel has no tracepoint mmap_lock_released(mm, write): code "
		    "mapped later is not seen, and processes are described again on their walks' "
		    "misses");
		bpf_program__set_autoload(s->skel->progs.profd_maps, false);
	}
	err = bpf_map__set_max_entries(s->skel->maps.events, (__u32)opts->ringbuf_size);
	if (err) {
		pr_err("sampler: ring buffer size %llu: %s", (unsigned long long)opts->ringbuf_size,
		       strerror(-err));
		goto fail;
	}
	err = size_unwind_procs(s->skel, opts->unwind_max_maps);
	if (err) {
		pr_err("sampler: unwind_procs for %u mappings: %s", opts->unwind_max_maps,
		       strerror(-err));
		goto fail;
	}
	err = sample_bpf__load(s->skel);
	if (err) {
		explain_bpf_error("loading the BPF programs", err);
		goto fail;
	}

	if (opts->npids) {
		s->pids = malloc(opts->npids * sizeof(*s->pids));
		if (!s->pids) {
			err = -ENOMEM;
			goto fail;
		}
		memcpy(s->pids, opts->pids, opts->npids * sizeof(*s->pids));
		s->npids = opts->npids;
	}
	for (size_t k = 0; k < opts->npids; k++) {
		__u8 flags = PROFD_TARGET_SAMPLE | (opts->no_children ? 0 : PROFD_TARGET_FOLLOW);

		err = bpf_map__update_elem(s->skel->maps.target_pids, &opts->pids[k],
					   sizeof(opts->pids[k]), &flags, sizeof(flags), BPF_ANY);
		if (err) {
			pr_err("sampler: adding pid %u to the filter: %s", opts->pids[k],
			       strerror(-err));
			goto fail;
		}
	}

	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_ringbuf, dctx, NULL);
	if (!s->rb) {
		err = -errno;
		pr_err("sampler: ring buffer: %s", strerror(-err));
		goto fail;
	}

	s->exec_link = bpf_program__attach(s->skel->progs.profd_exec);
	if (!s->exec_link) {
		err = -errno;
		explain_bpf_error("attaching to sched_process_exec", err);
		goto fail;
	}
	s->exit_link = bpf_program__attach(s->skel->progs.profd_exit);
	if (!s->exit_link) {
		err = -errno;
		explain_bpf_error("attaching to sched_process_exit", err);
		goto fail;
	}
	/* Before anything scans for the targets' existing children: none slips between. */
	s->fork_link = bpf_program__attach(s->skel->progs.profd_fork);
	if (!s->fork_link) {
		err = -errno;
		explain_bpf_error("attaching to sched_process_fork", err);
		goto fail;
	}
	attach_maps_hook(s);

	n = libbpf_num_possible_cpus();
	if (n <= 0) {
		err = n < 0 ? n : -EINVAL;
		pr_err("sampler: cannot count CPUs: %s", strerror(-err));
		goto fail;
	}
	online = calloc(n, sizeof(*online));
	s->links = calloc(n, sizeof(*s->links));
	s->perf_fds = calloc(n, sizeof(*s->perf_fds));
	if (!online || !s->links || !s->perf_fds) {
		err = -ENOMEM;
		goto fail;
	}
	err = read_online_cpus(online, n);
	if (err) {
		pr_err("sampler: /sys/devices/system/cpu/online: %s", strerror(-err));
		goto fail;
	}
	for (i = 0; i < n; i++) {
		struct perf_event_attr attr = {
		    .type = PERF_TYPE_SOFTWARE,
		    .config = PERF_COUNT_SW_CPU_CLOCK,
		    .size = sizeof(attr),
		    .freq = 1,
		    .sample_freq = opts->frequency_hz,
		};
		int fd;

		if (!online[i])
			continue;
		fd = perf_event_open(&attr, -1, i, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			err = -errno;
			if (err == -EACCES || err == -EPERM)
				pr_err(
				    "sampler: perf_event_open on CPU %d: %s: profd needs root or "
				    "CAP_PERFMON (see kernel.perf_event_paranoid)",
				    i, strerror(-err));
			else
				pr_err("sampler: perf_event_open on CPU %d: %s", i, strerror(-err));
			goto fail;
		}
		s->perf_fds[s->ncpus] = fd;
		s->links[s->ncpus] =
		    bpf_program__attach_perf_event(s->skel->progs.profd_sample, fd);
		if (!s->links[s->ncpus]) {
			err = -errno;
			close(fd);
			explain_bpf_error("attaching to the perf event", err);
			goto fail;
		}
		s->ncpus++;
	}
	free(online);
	online = NULL;
	if (opts->off_cpu) {
		s->switch_link = bpf_program__attach(s->skel->progs.profd_switch);
		if (!s->switch_link) {
			err = -errno;
			explain_bpf_error("attaching to sched_switch (--off-cpu)", err);
			goto fail;
		}
		s->sys_exit_link = bpf_program__attach(s->skel->progs.profd_sys_exit);
		if (!s->sys_exit_link) {
			err = -errno;
			explain_bpf_error("attaching to sys_exit (--off-cpu)", err);
			goto fail;
		}
		pr_info("sampler: off-CPU time of waits from %llu ns, shorter ones summed",
			(unsigned long long)opts->off_cpu_min_ns);
	}
	pr_info("sampler: sampling %u CPUs at %u Hz, %s", s->ncpus, opts->frequency_hz,
		!s->filtered	    ? "system-wide"
		: opts->no_children ? "target processes only"
				    : "target processes and the processes they start");
	return s;

fail:
	free(online);
	sampler__free(s);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

static void detach_libcuda(struct sampler *s)
{
	for (size_t i = 0; i < s->ncuda_links; i++)
		bpf_link__destroy(s->cuda_links[i]);
	free(s->cuda_links);
	s->cuda_links = NULL;
	s->ncuda_links = 0;
}

void sampler__free(struct sampler *s)
{
	if (!s)
		return;
	detach_libcuda(s);
	for (size_t i = 0; i < s->nprobes; i++)
		bpf_link__destroy(s->probes[i].link);
	free(s->probes);
	free(s->pids);
	for (unsigned int i = 0; i < s->ncpus; i++) {
		bpf_link__destroy(s->links[i]);
		close(s->perf_fds[i]);
	}
	free(s->links);
	free(s->perf_fds);
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->exit_link);
	bpf_link__destroy(s->fork_link);
	bpf_link__destroy(s->maps_link);
	bpf_link__destroy(s->sys_exit_link);
	bpf_link__destroy(s->switch_link);
	ring_buffer__free(s->rb);
	sample_bpf__destroy(s->skel);
	free(s);
}

static int add_target(struct sampler *s, uint32_t pid, __u8 flags)
{
	int err;

	if (s->no_children)
		flags &= (__u8)~PROFD_TARGET_FOLLOW;
	err = bpf_map__update_elem(s->skel->maps.target_pids, &pid, sizeof(pid), &flags,
				   sizeof(flags), BPF_ANY);
	return err == -E2BIG ? -ENOSPC : err;
}

int sampler__follow(struct sampler *s, uint32_t pid)
{
	return add_target(s, pid,
			  PROFD_TARGET_SAMPLE | PROFD_TARGET_FOLLOW | PROFD_TARGET_TRANSIENT);
}

bool sampler__covers(const struct sampler *s, uint32_t pid)
{
	__u8 flags = 0;

	if (!s->filtered)
		return true;
	if (bpf_map__lookup_elem(s->skel->maps.target_pids, &pid, sizeof(pid), &flags,
				 sizeof(flags), 0))
		return false;
	return flags & PROFD_TARGET_SAMPLE;
}

bool sampler__filtered(const struct sampler *s)
{
	return s->filtered;
}

bool sampler__follows_children(const struct sampler *s)
{
	return s->filtered && !s->no_children;
}

int sampler__fd(const struct sampler *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

int sampler__drain(struct sampler *s)
{
	return ring_buffer__consume(s->rb);
}

int sampler__counters(const struct sampler *s, uint64_t out[PROFD_CNT__MAX])
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;
	int err = 0;

	if (ncpu <= 0)
		return -EINVAL;
	vals = calloc(ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	for (__u32 k = 0; k < PROFD_CNT__MAX; k++) {
		out[k] = 0;
		err = bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals,
					   sizeof(*vals) * ncpu, 0);
		if (err)
			break;
		for (int c = 0; c < ncpu; c++)
			out[k] += vals[c];
	}
	free(vals);
	return err;
}

void sampler__python_maps(const struct sampler *s, int *procs_fd, int *tstates_fd)
{
	*procs_fd = bpf_map__fd(s->skel->maps.py_procs);
	*tstates_fd = bpf_map__fd(s->skel->maps.py_tstates);
}

void sampler__unwind_maps(const struct sampler *s, int *tables_fd, int *procs_fd)
{
	*tables_fd = bpf_map__fd(s->skel->maps.unwind_tables);
	*procs_fd = bpf_map__fd(s->skel->maps.unwind_procs);
}

uint32_t sampler__unwind_slots(const struct sampler *s)
{
	return s->skel->rodata->unwind_maps_mask + 1;
}

bool sampler__sees_maps(const struct sampler *s)
{
	return s->maps_link != NULL;
}

void sampler__maps_seen(struct sampler *s, uint32_t pid)
{
	bpf_map__delete_elem(s->skel->maps.maps_dirty, &pid, sizeof(pid), 0);
}

int sampler__set_python(struct sampler *s, uint32_t pid, const struct profd_py_proc *cfg)
{
	int err;

	if (!cfg) {
		err = bpf_map__delete_elem(s->skel->maps.py_procs, &pid, sizeof(pid), 0);
		return err == -ENOENT ? 0 : err;
	}
	return bpf_map__update_elem(s->skel->maps.py_procs, &pid, sizeof(pid), cfg, sizeof(*cfg),
				    BPF_ANY);
}

unsigned int sampler__ncpus(const struct sampler *s)
{
	return s->ncpus;
}

static struct launch_probe *find_probe(struct sampler *s, uint32_t pid)
{
	for (size_t i = 0; i < s->nprobes; i++)
		if (s->probes[i].pid == pid)
			return &s->probes[i];
	return NULL;
}

/* Whether pid's failure should be logged: only its first (until a detach forgets it). */
static bool warn_first(struct sampler *s, uint32_t pid)
{
	unsigned int n = s->nwarned < WARNED_PIDS ? s->nwarned : WARNED_PIDS;

	for (unsigned int i = 0; i < n; i++)
		if (s->warned[i] == pid)
			return false;
	s->warned[s->nwarned++ % WARNED_PIDS] = pid;
	return true;
}

static void forget_warned(struct sampler *s, uint32_t pid)
{
	for (unsigned int i = 0; i < WARNED_PIDS; i++)
		if (s->warned[i] == pid)
			s->warned[i] = 0;
}

int sampler__count_launch_notes(int fd)
{
	/* NT_STAPSDT; the descriptor is pc, base and semaphore addresses, then three strings. */
	const unsigned int nt_stapsdt = 3;
	Elf_Scn *scn = NULL;
	size_t shstrndx, asize;
	int n = 0, err;
	Elf *elf;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	/* ELF_C_READ reads with pread: a mapping of a file someone truncates would fault. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf)
		return -EINVAL;
	err = -EINVAL;
	if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx))
		goto out;
	asize = gelf_getclass(elf) == ELFCLASS32 ? 4 : 8;
	while ((scn = elf_nextscn(elf, scn))) {
		size_t off = 0, name_off, desc_off;
		const char *name;
		Elf_Data *d;
		GElf_Shdr sh;
		GElf_Nhdr nh;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".note.stapsdt"))
			continue;
		/* Some 10,000 notes: not one library's few, and not read into memory. */
		if (sh.sh_size > LAUNCH_NOTES_MAX) {
			err = -EFBIG;
			goto out;
		}
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			goto out;
		while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			const char *desc = (const char *)d->d_buf + desc_off, *end, *prov, *probe;
			size_t len;

			if (nh.n_type != nt_stapsdt || nh.n_namesz != 8 ||
			    memcmp((const char *)d->d_buf + name_off, "stapsdt", 8) ||
			    nh.n_descsz < 3 * asize)
				continue;
			end = desc + nh.n_descsz;
			prov = desc + 3 * asize;
			len = strnlen(prov, (size_t)(end - prov));
			if (prov + len == end)
				continue;
			probe = prov + len + 1;
			if (probe + strnlen(probe, (size_t)(end - probe)) == end)
				continue;
			if (!strcmp(prov, PROFD_USDT_PROVIDER) && !strcmp(probe, PROFD_USDT_LAUNCH))
				n++;
		}
	}
	err = n;
out:
	elf_end(elf);
	return err;
}

/*
 * Open the library pid has mapped as library_path and check it is one to attach to. Returns
 * the fd, or a negative errno with the reason in why.
 */
static int open_launch_library(uint32_t pid, const char *library_path, char *why, size_t len)
{
	struct stat st;
	int fd, n;

	fd = procfs_open_mapped("/proc", pid, library_path, SAMPLER_MAX_LAUNCH_LIB, &st);
	switch (fd) {
	case -ENOENT:
		snprintf(why, len, "the process maps no file of that name");
		return -ENOENT;
	case -EXDEV:
		snprintf(why, len, "it is on FUSE, or on a mount of neither the process nor profd");
		return -EINVAL;
	case -EINVAL:
		snprintf(why, len, "not a regular file");
		return -EINVAL;
	case -EFBIG:
		snprintf(why, len, "larger than %llu MiB", SAMPLER_MAX_LAUNCH_LIB >> 20);
		return -EFBIG;
	case -EPERM:
	case -EACCES:
		snprintf(why, len,
			 "/proc/%u/map_files: %s (profd needs CAP_SYS_ADMIN or "
			 "CAP_CHECKPOINT_RESTORE)",
			 pid, strerror(-fd));
		return fd;
	default:
		if (fd < 0) {
			snprintf(why, len, "%s", strerror(-fd));
			return fd;
		}
	}
	n = sampler__count_launch_notes(fd);
	if (n >= 1 && n <= SAMPLER_MAX_LAUNCH_NOTES)
		return fd;
	close(fd);
	if (n == -EFBIG) {
		snprintf(why, len, "its USDT notes are over %u KiB", LAUNCH_NOTES_MAX >> 10);
		return -EINVAL;
	}
	if (n < 0) {
		snprintf(why, len, "not an ELF file");
		return -EINVAL;
	}
	if (!n) {
		snprintf(why, len, "it has no %s:%s probe", PROFD_USDT_PROVIDER, PROFD_USDT_LAUNCH);
		return -ENOENT;
	}
	snprintf(why, len, "%d %s:%s probes, more than %d", n, PROFD_USDT_PROVIDER,
		 PROFD_USDT_LAUNCH, SAMPLER_MAX_LAUNCH_NOTES);
	return -EINVAL;
}

/* A process's failure is worth a warning once: it may say hello again and again. */
static void launch_failed(struct sampler *s, uint32_t pid, const char *library_path,
			  const char *why)
{
	if (warn_first(s, pid))
		pr_warn("sampler: pid %u: no launch probe in %s: %s", pid, library_path, why);
	else
		pr_debug("sampler: pid %u: no launch probe in %s: %s", pid, library_path, why);
}

int sampler__attach_launch_probe(struct sampler *s, uint32_t pid, const char *library_path)
{
	char path[64], why[256];
	struct bpf_link *link;
	__u8 one = 1;
	int fd, err;

	if (!pid || !library_path || library_path[0] != '/')
		return -EINVAL;
	if (find_probe(s, pid))
		return 0;
	if (GROW(s->probes, s->probes_cap, s->nprobes + 1))
		return -ENOMEM;
	fd = open_launch_library(pid, library_path, why, sizeof(why));
	if (fd < 0) {
		launch_failed(s, pid, library_path, why);
		return fd;
	}
	/*
	 * libbpf opens the path again to read the notes and hands it to the kernel, which
	 * resolves it to the inode to plant the uprobe (and its semaphore counter) in: through
	 * our descriptor both are that very file, not whatever a name says by now.
	 */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	/*
	 * Mark the pid first: a launch in between is then missed by both probes, rather than
	 * counted by the uprobe and the USDT probe both.
	 */
	err = bpf_map__update_elem(s->skel->maps.launch_pids, &pid, sizeof(pid), &one, sizeof(one),
				   BPF_ANY);
	if (err) {
		snprintf(why, sizeof(why), "marking the pid: %s", strerror(-err));
		launch_failed(s, pid, library_path, why);
		close(fd);
		return err;
	}
	/* libbpf raises the probe's semaphore through the uprobe's reference counter. */
	link = bpf_program__attach_usdt(s->skel->progs.profd_cuda_launch, (pid_t)pid, path,
					PROFD_USDT_PROVIDER, PROFD_USDT_LAUNCH, NULL);
	err = link ? 0 : -errno;
	close(fd);
	if (err) {
		snprintf(why, sizeof(why), "attaching USDT %s:%s: %s", PROFD_USDT_PROVIDER,
			 PROFD_USDT_LAUNCH, strerror(-err));
		launch_failed(s, pid, library_path, why);
		bpf_map__delete_elem(s->skel->maps.launch_pids, &pid, sizeof(pid), 0);
		return err;
	}
	s->probes[s->nprobes].pid = pid;
	s->probes[s->nprobes].link = link;
	s->nprobes++;
	pr_debug("sampler: pid %u: launch probe attached in %s", pid, library_path);
	return 0;
}

void sampler__detach_launch_probe(struct sampler *s, uint32_t pid)
{
	struct launch_probe *p = find_probe(s, pid);

	forget_warned(s, pid);
	if (!p)
		return;
	bpf_link__destroy(p->link);
	bpf_map__delete_elem(s->skel->maps.launch_pids, &pid, sizeof(pid), 0);
	*p = s->probes[--s->nprobes];
	pr_debug("sampler: pid %u: launch probe detached", pid);
}

static int find_libcuda(char *buf, size_t len)
{
	for (size_t i = 0; i < sizeof(libcuda_dirs) / sizeof(libcuda_dirs[0]); i++) {
		snprintf(buf, len, "%s/libcuda.so.1", libcuda_dirs[i]);
		if (access(buf, R_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

int sampler__attach_libcuda(struct sampler *s, const char *path)
{
	/*
	 * With a target list, one uprobe per target: the kernel then plants the breakpoint in
	 * those processes only, and every other CUDA process on the machine launches untrapped.
	 */
	size_t nsets = s->npids ? s->npids : 1;
	char found[256];
	unsigned int n = 0;
	int err = -ENOENT;

	detach_libcuda(s);
	if (!path) {
		if (find_libcuda(found, sizeof(found))) {
			pr_info(
			    "sampler: no libcuda.so.1 in the driver's usual directories: launches "
			    "of processes without the CUPTI library are not seen");
			return -ENOENT;
		}
		path = found;
	}
	if (access(path, R_OK)) {
		err = -errno;
		pr_warn("sampler: libcuda %s: %s", path, strerror(-err));
		return err;
	}
	s->cuda_links = calloc(nsets * N_CUDA_FUNCS, sizeof(*s->cuda_links));
	if (!s->cuda_links)
		return -ENOMEM;
	s->ncuda_links = nsets * N_CUDA_FUNCS;
	for (size_t i = 0; i < N_CUDA_FUNCS; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .func_name = cuda_launch_funcs[i]);
		bool any = false;

		for (size_t k = 0; k < nsets; k++) {
			pid_t pid = s->npids ? (pid_t)s->pids[k] : -1;
			struct bpf_link *l;

			l = bpf_program__attach_uprobe_opts(s->skel->progs.profd_cuda_uprobe, pid,
							    path, 0, &o);
			if (!l) {
				/*
				 * Older drivers lack some variants, and a target may be gone
				 * already: keep what could be attached.
				 */
				if (errno != ENOENT && errno != ESRCH)
					err = -errno;
				pr_debug("sampler: %s: no uprobe on %s for pid %d: %s", path,
					 cuda_launch_funcs[i], pid, strerror(errno));
				continue;
			}
			s->cuda_links[i * nsets + k] = l;
			any = true;
		}
		n += any;
	}
	if (!n) {
		detach_libcuda(s);
		pr_warn("sampler: %s: no launch function could be probed: %s", path,
			strerror(-err));
		return err;
	}
	pr_info("sampler: uprobes on %u launch functions of %s, %s", n, path,
		s->npids ? "target processes only" : "every process");
	return 0;
}
