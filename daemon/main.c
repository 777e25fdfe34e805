// SPDX-License-Identifier: BSD-2-Clause
/*
 * profd: wires the sampler, ingest, store, symbolizer, GPU correlation and server onto one libuv
 * loop.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "config.h"
#include "exporter.h"
#include "daemon.h"
#include "unwinder.h"
#include "log.h"
#include "notify.h"
#include "procfs.h"
#include "record.h"
#include "route.h"
#include "timeutil.h"
#include "wire.h"

/* Capability bits (linux/capability.h), checked from /proc/self/status before anything else. */
#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_SYSLOG_BIT 34
#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39
#define CAP_CHECKPOINT_RESTORE_BIT 40

/* The initial pid namespace's inode number, fixed by the kernel (PROC_PID_INIT_INO). */
#define PID_NS_INIT_INO 0xeffffffcULL

/* How stale the newest samples in a dump may be. */
#define DRAIN_INTERVAL_MS 100

struct app {
	struct daemon d;
	uv_loop_t *loop;
	uv_poll_t rb_poll;
	uv_timer_t rb_timer;
	uv_signal_t sigint, sigterm;
	bool polling;
	/* GPU correlation needs pids as the kernel gives them: see check_pid_namespace(). */
	bool gpu_pids_ok;
	int exit_code;
	/* --record: profctl record runs the command; its exit code becomes profd's. */
	struct record *record;
	bool record_started; /* before that, Ctrl-C stops profd as usual */
	int stopping;	     /* the signal that stopped the loop */
	bool record_done;
	int record_code;
	/* The fleet export: its timer, and SIGHUP to reload its settings. */
	uv_timer_t export_timer;
	uv_signal_t sighup;
	uv_timer_t reload_timer; /* armed by the first SIGHUP of a burst: one reload for all */
	uint64_t export_files;	 /* config_export_files_hash of the [export] in use */
	unsigned export_peeks;
	int argc;
	char **argv;
	struct config *cfg;	 /* the start-up configuration */
	struct config *reloaded; /* the last good SIGHUP reload (its [export] is in use) */
};

static int effective_caps(uint64_t *caps)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	int err = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "CapEff:", 7)) {
			err = sscanf(line + 7, "%" SCNx64, caps) == 1 ? 0 : -EINVAL;
			break;
		}
	}
	fclose(f);
	return err;
}

/* Say which privileges are missing, all at once, before trying anything. */
static int check_privileges(void)
{
	uint64_t caps;
	bool admin;
	char missing[128] = "";

	if (effective_caps(&caps))
		return 0; /* cannot tell: let the BPF calls report */
	admin = caps & (1ull << CAP_SYS_ADMIN_BIT);
	if (!admin && !(caps & (1ull << CAP_BPF_BIT)))
		strcat(missing, " CAP_BPF");
	if (!admin && !(caps & (1ull << CAP_PERFMON_BIT)))
		strcat(missing, " CAP_PERFMON");
	if (!(caps & (1ull << CAP_SYS_PTRACE_BIT)))
		strcat(missing, " CAP_SYS_PTRACE");
	if (missing[0]) {
		pr_err("profd needs root or these capabilities:%s (run it with sudo, or as the "
		       "systemd service)",
		       missing);
		return -EPERM;
	}
	if (!(caps & (1ull << CAP_SYSLOG_BIT)) && !admin)
		pr_warn("no CAP_SYSLOG: kernel frames will show as [unknown]");
	if (!(caps & (1ull << CAP_CHECKPOINT_RESTORE_BIT)) && !admin)
		pr_warn("no CAP_CHECKPOINT_RESTORE: GPU launch stacks of processes with the CUPTI "
			"library are not collected (opening a process's mapped library needs it)");
	return 0;
}

/*
 * Whether profd runs in the initial pid namespace. The GPU library's connection says who it is
 * by SO_PEERCRED, a pid in profd's namespace; the launch probes and the CPU samples name
 * processes by their pid in the initial one. Only there are the two the same: elsewhere a
 * process's launches would be joined to another's stacks, or to none.
 */
static bool check_pid_namespace(void)
{
	char link[64], why[128];
	unsigned long long ino;
	ssize_t n;

	n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = '\0';
		if (sscanf(link, "pid:[%llu]", &ino) == 1 && ino == PID_NS_INIT_INO)
			return true;
		snprintf(why, sizeof(why), "it runs in a pid namespace of its own (%s)", link);
	} else {
		snprintf(why, sizeof(why), "/proc/self/ns/pid: %s", strerror(errno));
	}
	pr_warn("gpu: GPU correlation is off: %s, where the pids of connecting processes are not "
		"the kernel's; run profd in the host's pid namespace",
		why);
	return false;
}

static int on_py_config(void *ctx, uint32_t pid, const struct profd_py_proc *cfg)
{
	struct app *app = ctx;

	return sampler__set_python(app->d.sampler, pid, cfg);
}

static void on_unwind_note(void *ctx, uint32_t pid, uint32_t why)
{
	struct app *app = ctx;

	if (why == PROFD_UNWIND_NONE)
		unwinder__forget(app->d.unwinder, pid);
	else
		unwinder__want(app->d.unwinder, pid, why);
}

/*
 * pid mapped code (a PROFD_REC_MAPS record, which ingest has acted on): its unwind description
 * is redone, and the kernel side may report its next change.
 */
static void on_maps_changed(void *ctx, uint32_t pid)
{
	struct app *app = ctx;

	sampler__maps_seen(app->d.sampler, pid);
	unwinder__maps_changed(app->d.unwinder, pid);
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct app *app = ctx;

	return ingest__record(app->d.ingest, data, size);
}

static void on_ringbuf_readable(uv_poll_t *h, int status, int events)
{
	struct app *app = h->data;
	int n;

	if (status < 0) {
		pr_err("ring buffer poll: %s", uv_strerror(status));
		return;
	}
	n = sampler__drain(app->d.sampler);
	if (n < 0 && n != -EINTR)
		pr_warn("ring buffer: %s", strerror(-n));
}

/*
 * The store's compaction when it is due (route.h: the GPU module and the timeline keep their ids
 * through it). A failure leaves the store as it was and the next tick tries again; it is logged
 * once per run of failures.
 */
static void compact_store(struct app *app)
{
	static bool failing;
	struct route r = {.store = app->d.store, .gpu = app->d.gpu, .timeline = app->d.timeline};
	int err = route__compact(&r);

	if (err < 0 && !failing)
		pr_warn("store compaction: %s", strerror(-err));
	failing = err < 0;
}

/* Samples lost so far (ring buffer full, no memory to store them), for the dumps' windows. */
static void note_losses(struct app *app)
{
	uint64_t cnt[PROFD_CNT__MAX] = {0};
	struct ingest_stats is;

	sampler__counters(app->d.sampler, cnt);
	ingest__stats(app->d.ingest, &is);
	loss_log__note(app->d.losses, mono_ns(), cnt[PROFD_CNT_RINGBUF_FULL] + is.store_errors);
}

/*
 * The regular drain: the kernel side only wakes us when the ring buffer fills up. The GPU
 * module's periodic work follows it, so the samples just drained are held or released at once,
 * then the store's compaction when it is due.
 */
static void on_drain_timer(uv_timer_t *h)
{
	struct app *app = h->data;
	int n = sampler__drain(app->d.sampler);

	if (n < 0 && n != -EINTR)
		pr_warn("ring buffer: %s", strerror(-n));
	gpu__tick(app->d.gpu, mono_ns());
	/* A flood's count is written when its interval is over, not only when more is logged. */
	log_expire_repeats();
	/* Twice a second: new processes' export labels, read while they still run. */
	if (app->d.exporter && ++app->export_peeks % 5 == 0)
		exporter__peek(app->d.exporter);
	compact_store(app);
	note_losses(app);
	if (app->d.trim_after_ns && mono_ns() >= app->d.trim_after_ns) {
		app->d.trim_after_ns = 0;
		malloc_trim(0);
	}
}

static int gpu_attach_probe(void *ctx, uint32_t pid, const char *library_path)
{
	struct app *app = ctx;

	/* Libraries connect once the loop runs, after the sampler exists. */
	if (!app->d.sampler) {
		pr_warn("gpu: pid %u: no sampler yet to attach the launch probe with", pid);
		return -ENODEV;
	}
	if (!app->gpu_pids_ok) {
		pr_debug("gpu: pid %u: launch probes are off in this pid namespace", pid);
		return -EOPNOTSUPP;
	}
	return sampler__attach_launch_probe(app->d.sampler, pid, library_path);
}

static void gpu_detach_probe(void *ctx, uint32_t pid)
{
	struct app *app = ctx;

	if (app->d.sampler)
		sampler__detach_launch_probe(app->d.sampler, pid);
}

/*
 * The session covers every process, or the --pid list and the processes followed from it (a
 * launcher's trainers); in a pid namespace of its own, no connecting process
 * (check_pid_namespace).
 */
static bool gpu_covers(void *ctx, uint32_t pid)
{
	const struct app *app = ctx;
	const struct config *cfg = app->d.cfg;

	if (!app->gpu_pids_ok)
		return false;
	if (app->d.sampler)
		return sampler__covers(app->d.sampler, pid);
	if (!cfg->npids)
		return true;
	for (size_t i = 0; i < cfg->npids; i++)
		if (cfg->pids[i] == pid)
			return true;
	return false;
}

/*
 * Uprobes on libcuda's launch functions, for CUDA processes without the CUPTI library. The
 * sampler keeps one libcuda's probes, so of several --libcuda paths the first that works wins.
 * Nothing found is not an error: the machine may have no GPU.
 */
static void attach_libcuda(struct app *app, const struct config *cfg)
{
	int err;

	if (cfg->libcuda_none)
		return;
	if (!cfg->nlibcuda) {
		err = sampler__attach_libcuda(app->d.sampler, NULL);
		if (err == -ENOENT)
			pr_info("gpu: no libcuda.so.1 found: launches of CUDA processes without "
				"the CUPTI library are not counted");
		return;
	}
	for (size_t i = 0; i < cfg->nlibcuda; i++) {
		err = sampler__attach_libcuda(app->d.sampler, cfg->libcuda[i]);
		if (!err)
			return;
	}
	pr_warn("gpu: none of the --libcuda files could be probed: launches of CUDA processes "
		"without the CUPTI library are not counted");
}

static void on_export_timer(uv_timer_t *h)
{
	struct app *app = h->data;

	if (!app->d.exporter)
		return;
	/* What the kernel has gathered so far goes in this interval. */
	sampler__drain(app->d.sampler);
	exporter__flush(app->d.exporter, mono_ns());
	uv_timer_start(&app->export_timer, on_export_timer, exporter__next_ms(app->d.exporter), 0);
}

/* Start the exporter of cfg's [export] (none configured: none). 0 or a negative errno. */
static int export_start(struct app *app, const struct config *cfg)
{
	app->export_files = config_export_files_hash(&cfg->export);
	app->d.exporter = exporter__new(&(struct exporter_opts){
	    .cfg = &cfg->export,
	    .store = app->d.store,
	    .frequency_hz = app->cfg->frequency_hz,
	    .proc_root = app->d.proc_root,
	});
	if (!app->d.exporter)
		return errno ? -errno : 0;
	uv_timer_start(&app->export_timer, on_export_timer, exporter__next_ms(app->d.exporter), 0);
	return 0;
}

/* Flush what is left and stop: unsent requests stay in the spool for the next run. */
static void export_stop(struct app *app)
{
	if (!app->d.exporter)
		return;
	uv_timer_stop(&app->export_timer);
	if (app->d.sampler)
		sampler__drain(app->d.sampler);
	exporter__flush(app->d.exporter, mono_ns());
	exporter__free(app->d.exporter);
	app->d.exporter = NULL;
}

/*
 * SIGHUPs closer than this are one reload. A burst (a script's loop, a supervisor gone wrong)
 * otherwise re-reads the file once per signal, and the loop answers nobody meanwhile.
 */
#define RELOAD_DELAY_MS 200

/*
 * The reload: read the configuration again. The [export] settings take effect now; a bad file
 * keeps the running configuration (config_parse printed which line is wrong). Sampling settings
 * need a restart. The same [export] (and the same bytes in the files it names) leaves the
 * exporter running: a restart would flush early, re-arm its interval and forget its sender's
 * state, so a storm of reloads would stop delivery.
 */
static void on_reload(uv_timer_t *h)
{
	struct app *app = h->data;
	const struct config *in_use = app->reloaded ? app->reloaded : app->cfg;
	struct config *nc = calloc(1, sizeof(*nc));
	int err;

	if (!nc)
		return;
	err = config_parse(app->argc, app->argv, nc);
	if (err != CONFIG_RUN) {
		pr_err("reload: %s: the configuration is not valid; keeping the running one",
		       in_use->config_file ? in_use->config_file : "command line");
		goto drop;
	}
	if (nc->frequency_hz != app->cfg->frequency_hz || nc->off_cpu != app->cfg->off_cpu ||
	    nc->mem_cap != app->cfg->mem_cap)
		pr_warn("reload: only the [export] settings change now; the others at restart");
	if (config_export_same(&in_use->export, &nc->export) &&
	    config_export_files_hash(&nc->export) == app->export_files) {
		pr_info("reload: %s: [export] unchanged; the exporter goes on",
			nc->config_file ? nc->config_file : "command line");
		goto drop;
	}
	export_stop(app);
	err = export_start(app, nc);
	if (err) {
		pr_err("reload: export: %s; keeping the running configuration", strerror(-err));
		if (export_start(app, in_use))
			pr_err("reload: export: could not restart the previous exporter");
		goto drop;
	}
	if (app->reloaded) {
		config_free(app->reloaded);
		free(app->reloaded);
	}
	app->reloaded = nc;
	pr_info("reload: %s: configuration applied",
		nc->config_file ? nc->config_file : "command line");
	return;
drop:
	config_free(nc);
	free(nc);
}

/* SIGHUP: reload once, after the burst it may belong to; the signals meanwhile join it. */
static void on_sighup(uv_signal_t *h, int signum)
{
	struct app *app = h->data;

	if (!uv_is_active((uv_handle_t *)&app->reload_timer))
		uv_timer_start(&app->reload_timer, on_reload, RELOAD_DELAY_MS, 0);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct app *app = h->data;

	/*
	 * Ctrl-C reaches the whole foreground group: the command stops, and profctl record
	 * writes what it has; profd stops when profctl is done.
	 */
	if (app->record_started && signum == SIGINT && !app->record_done) {
		pr_info("%s: waiting for the profile to be written", strsignal(signum));
		return;
	}
	pr_info("%s: shutting down", strsignal(signum));
	app->stopping = signum;
	notify_stopping();
	uv_stop(app->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void on_record_done(void *ctx, int code)
{
	struct app *app = ctx;

	app->record_done = true;
	app->record_code = code;
	uv_stop(app->loop);
}

/*
 * The processes the targets started before profd: the kernel side follows those started from
 * now on (attached already), these are added here, with their parents for --children dumps.
 */
static void follow_existing_children(struct app *app, const struct config *cfg)
{
	uint32_t *kids = NULL, *parents = NULL, uid;
	size_t n = 0, added = 0;
	char path[64], comm[32];
	FILE *f;
	int err;

	if (!cfg->npids || cfg->no_children)
		return;
	err = procfs_descendants("/proc", cfg->pids, cfg->npids, &kids, &parents, &n);
	if (err) {
		pr_warn("cannot list the targets' child processes: %s", strerror(-err));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (sampler__follow(app->d.sampler, kids[i]))
			continue;
		added++;
		snprintf(path, sizeof(path), "/proc/%u/comm", kids[i]);
		comm[0] = '\0';
		f = fopen(path, "re");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		if (procfs_owner_uid("/proc", kids[i], &uid))
			continue;
		store__set_process(app->d.store, kids[i], uid, comm);
		store__set_parent(app->d.store, kids[i], parents[i]);
	}
	if (n)
		pr_info("following %zu processes the targets started before profd", added);
	free(kids);
	free(parents);
}

static int check_targets(const struct config *cfg)
{
	for (size_t i = 0; i < cfg->npids; i++) {
		if (kill((pid_t)cfg->pids[i], 0) && errno == ESRCH) {
			pr_err("no process with pid %u", cfg->pids[i]);
			return -ESRCH;
		}
	}
	return 0;
}

/*
 * Members of the group may connect; the daemon still filters what each uid sees. Resolves the
 * group, and warns when the socket's directory does not let its members reach the socket.
 */
static int socket_group_gid(const char *path, const char *group, gid_t *gid)
{
	char *dir = strdup(path), *slash;
	struct group *gr;
	struct stat st;

	errno = 0;
	gr = getgrnam(group);
	if (!gr) {
		pr_err("--socket-group %s: %s", group, errno ? strerror(errno) : "no such group");
		free(dir);
		return -ENOENT;
	}
	*gid = gr->gr_gid;
	slash = dir ? strrchr(dir, '/') : NULL;
	if (slash && slash != dir) {
		*slash = '\0';
		if (stat(dir, &st) == 0 && !(st.st_mode & S_IXOTH) &&
		    !((st.st_mode & S_IXGRP) && st.st_gid == *gid))
			pr_warn(
			    "--socket-group %s: the socket directory %s (mode %04o) does not let "
			    "the group's members reach the socket",
			    group, dir, (unsigned int)(st.st_mode & 07777));
	}
	free(dir);
	return 0;
}

int main(int argc, char **argv)
{
	struct app app = {.exit_code = 1, .record_code = 1};
	struct store_opts sopts = {0};
	struct config cfg;
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	char status[128];
	int err;

	/*
	 * Blocks of 1 MiB and more (symbol tables being built, a perf map's table, a dump's
	 * arrays) get their own mapping, returned whole when freed. glibc's default raises this
	 * threshold to the largest block freed so far (up to 32 MiB), after which such blocks
	 * come from the heap and, freed, stay in the daemon: under the churn soak that kept RSS
	 * 30 MiB higher for the same work (bench/RESULTS.md).
	 */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	err = config_parse(argc, argv, &cfg);
	if (err == CONFIG_EXIT || err < 0) {
		config_free(&cfg);
		return err < 0 ? 2 : 0;
	}
	app.argc = argc;
	app.argv = argv;
	app.cfg = &cfg;
	log_set_ident("profd");
	log_set_level(cfg.log_level);
	if (cfg.log_journal) {
		if (!notify_have_journal()) {
			fprintf(stderr, "profd: --log journal: built without libsystemd\n");
			return 2;
		}
		log_set_sink(notify_journal_sink, NULL);
	}
	if (check_privileges() || check_targets(&cfg))
		return 1;
	if (cfg.record) {
		app.record = record__new(&cfg);
		if (!app.record)
			return 1;
	}
	app.gpu_pids_ok = check_pid_namespace();

	/* Replies to clients that hung up must fail with EPIPE, not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	/* Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK. */
	setrlimit(RLIMIT_MEMLOCK, &rl);

	app.d.cfg = &cfg;
	app.d.start_ns = mono_ns();
	app.loop = uv_default_loop();

	sopts.mem_cap = cfg.mem_cap;
	sopts.bucket_ns = cfg.bucket_ns;
	app.d.store = store__new(&sopts);
	if (!app.d.store) {
		pr_err("store: %s", strerror(errno));
		goto out;
	}
	app.d.sym = symbolizer__new(&(struct symbolizer_opts){0});
	if (!app.d.sym) {
		pr_err("symbolize: %s", strerror(errno));
		goto out;
	}
	if (!symbolizer__has_kernel(app.d.sym))
		pr_warn("symbolize: /proc/kallsyms shows no addresses: kernel frames will be "
			"[unknown]");
	app.d.py = python__new(&(struct python_opts){0});
	if (!app.d.py) {
		pr_err("python: %s", strerror(errno));
		goto out;
	}
	app.d.timeline = timeline__new(&(struct timeline_opts){.bytes = cfg.gpu_ring_size});
	if (!app.d.timeline) {
		pr_err("timeline: %s", strerror(errno));
		goto out;
	}
	app.d.losses = loss_log__new(0);
	if (!app.d.losses) {
		pr_err("loss log: %s", strerror(errno));
		goto out;
	}
	app.d.gpu = gpu__new(&(struct gpu_opts){
	    .store = app.d.store,
	    .timeline = app.d.timeline,
	    .attach_probe = gpu_attach_probe,
	    .detach_probe = gpu_detach_probe,
	    .probe_ctx = &app,
	    .covers = gpu_covers,
	    .covers_ctx = &app,
	    .uplink_rate = app.cfg->gpu_uplink_rate,
	});
	if (!app.d.gpu) {
		pr_err("gpu: %s", strerror(errno));
		goto out;
	}
	app.d.ingest = ingest__new(&(struct ingest_opts){
	    .store = app.d.store,
	    .sym = app.d.sym,
	    .py = app.d.py,
	    .py_config = on_py_config,
	    .py_ctx = &app,
	    .gpu = app.d.gpu,
	    .timeline = app.d.timeline,
	    .thread_states = cfg.off_cpu,
	    .unwind_note = on_unwind_note,
	    .maps_changed = on_maps_changed,
	    .unwind_ctx = &app,
	});
	if (!app.d.ingest) {
		pr_err("ingest: %s", strerror(errno));
		goto out;
	}

	{
		struct server_opts so = {
		    .path = cfg.socket_path,
		    .handle = handlers__handle,
		    .on_close = handlers__closed,
		    .ctx = &app.d,
		};

		if (cfg.socket_group &&
		    socket_group_gid(cfg.socket_path, cfg.socket_group, &so.socket_gid))
			goto out;
		so.set_socket_gid = cfg.socket_group != NULL;
		app.d.server = server__new(app.loop, &so);
	}
	if (!app.d.server) {
		/* server__new has said what went wrong. */
		goto out;
	}

	/*
	 * Catch SIGTERM before the slow BPF load: a stop request during start-up must still remove
	 * the socket. A signal that arrives now is handled once the loop runs, which then stops.
	 */
	uv_signal_init(app.loop, &app.sigint);
	uv_signal_init(app.loop, &app.sigterm);
	app.sigint.data = app.sigterm.data = &app;
	uv_signal_start(&app.sigint, on_signal, SIGINT);
	uv_signal_start(&app.sigterm, on_signal, SIGTERM);

	app.d.sampler = sampler__new(&(struct sampler_opts){
	    .pids = cfg.pids,
	    .npids = cfg.npids,
	    .targets_only = cfg.record,
	    .no_children = cfg.no_children,
	    .frequency_hz = cfg.frequency_hz,
	    .ringbuf_size = cfg.ringbuf_size,
	    .off_cpu = cfg.off_cpu,
	    .off_cpu_min_ns = cfg.off_cpu_min_ns,
	    .unwind_max_maps = cfg.unwind_max_maps,
	    .on_record = on_record,
	    .ctx = &app,
	});
	if (!app.d.sampler)
		goto out;
	{
		struct unwinder_opts uo = {
		    .memory = cfg.unwind_memory,
		    .max_maps = cfg.unwind_max_maps,
		    .map_slots = sampler__unwind_slots(app.d.sampler),
		    .sees_maps = sampler__sees_maps(app.d.sampler),
		};

		sampler__unwind_maps(app.d.sampler, &uo.tables_fd, &uo.procs_fd);
		app.d.unwinder = unwinder__new(&uo);
		if (!app.d.unwinder) {
			pr_err("unwind: cannot start: %s", strerror(errno));
			goto out;
		}
	}
	follow_existing_children(&app, &cfg);
	attach_libcuda(&app, &cfg);

	uv_poll_init(app.loop, &app.rb_poll, sampler__fd(app.d.sampler));
	app.rb_poll.data = &app;
	app.polling = true;
	uv_poll_start(&app.rb_poll, UV_READABLE, on_ringbuf_readable);
	uv_timer_init(app.loop, &app.rb_timer);
	app.rb_timer.data = &app;
	uv_timer_start(&app.rb_timer, on_drain_timer, DRAIN_INTERVAL_MS, DRAIN_INTERVAL_MS);
	uv_timer_init(app.loop, &app.export_timer);
	app.export_timer.data = &app;
	err = export_start(&app, &cfg);
	if (err) {
		pr_err("export: cannot start: %s", strerror(-err));
		app.exit_code = 1;
		goto out;
	}
	uv_timer_init(app.loop, &app.reload_timer);
	app.reload_timer.data = &app;
	uv_signal_init(app.loop, &app.sighup);
	app.sighup.data = &app;
	uv_signal_start(&app.sighup, on_sighup, SIGHUP);

	snprintf(status, sizeof(status), "sampling %s at %u Hz, serving %s",
		 cfg.record  ? "the recorded command"
		 : cfg.npids ? "target processes"
			     : "all processes",
		 cfg.frequency_hz, cfg.socket_path);
	pr_info("%s", status);
	notify_ready(status);
	if (app.record) {
		/* A Ctrl-C during the start-up (the BPF load takes a while) means: do not run it.
		 */
		uv_run(app.loop, UV_RUN_NOWAIT);
		if (app.stopping) {
			app.exit_code = 128 + app.stopping;
			goto out;
		}
		if (record__start(app.record, app.loop, &cfg, on_record_done, &app))
			goto out;
		app.record_started = true;
	}

	uv_run(app.loop, UV_RUN_DEFAULT);
	app.exit_code = app.record ? app.record_code : 0;

out:
	/*
	 * Close every handle (the ring buffer poll before its fd goes away), remove the socket,
	 * let libuv run the close callbacks, then detach from the kernel.
	 */
	export_stop(&app);
	if (app.polling) {
		uv_poll_stop(&app.rb_poll);
		uv_timer_stop(&app.rb_timer);
	}
	server__close(app.d.server);
	uv_walk(app.loop, close_walk, NULL);
	uv_run(app.loop, UV_RUN_DEFAULT);
	uv_loop_close(app.loop);
	/* The GPU module before the sampler: a detach calls into the sampler. */
	gpu__free(app.d.gpu);
	app.d.gpu = NULL;
	/* Its worker writes the sampler's maps: stopped first. */
	unwinder__free(app.d.unwinder);
	sampler__free(app.d.sampler);
	ingest__free(app.d.ingest);
	timeline__free(app.d.timeline);
	loss_log__free(app.d.losses);
	handlers__fini(&app.d);
	python__free(app.d.py);
	symbolizer__free(app.d.sym);
	store__free(app.d.store);
	record__free(app.record);
	if (app.reloaded) {
		config_free(app.reloaded);
		free(app.reloaded);
	}
	config_free(&cfg);
	log_flush_repeats();
	return app.exit_code;
}
