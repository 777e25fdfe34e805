// SPDX-License-Identifier: BSD-2-Clause
/* profctl status: what the daemon is doing, as text for people or JSON for scripts. */
#include "commands.h"
#include "conn.h"
#include "format.h"
#include "opts.h"
#include "flame.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "wire.h"

void cmd_status_usage(FILE *f)
{
	fputs(
	    "Usage: profctl [--socket PATH] status [--json] [--timeout DURATION]\n"
	    "\n"
	    "Show what the daemon is doing: version, uptime, sampling frequency and targets,\n"
	    "samples received and lost (ring buffer full), stack read errors, samples evicted by\n"
	    "the memory cap, store size, the time range it covers, clients, its CPU and memory;\n"
	    "with GPU support, the GPU counters and, per CUDA process, the state of the\n"
	    "profd CUPTI library inside it (ready, or why not), whether it is collecting, its\n"
	    "clock and the CUPTI version.\n"
	    "\n"
	    "Options:\n"
	    "  --json              print the fields as one JSON object (names as in profd.proto)\n"
	    "  --timeout DURATION  how long to wait for the daemon (default 10s)\n"
	    "  -h, --help          show this help\n"
	    "\n"
	    "Examples:\n"
	    "  profctl status\n"
	    "  profctl status --json | jq .samples_lost_ringbuf\n"
	    "  profctl --socket /tmp/profd.sock status\n",
	    f);
}

static void json_string(FILE *out, const char *s)
{
	json_write_string(out, s ? s : "");
}

/* One JSON value of a scalar field at p; false for a type the reply does not use. */
static bool json_scalar(FILE *out, ProtobufCType type, const void *p)
{
	switch (type) {
	case PROTOBUF_C_TYPE_UINT32:
		fprintf(out, "%" PRIu32, *(const uint32_t *)p);
		return true;
	case PROTOBUF_C_TYPE_INT32:
		fprintf(out, "%" PRId32, *(const int32_t *)p);
		return true;
	case PROTOBUF_C_TYPE_UINT64:
		fprintf(out, "%" PRIu64, *(const uint64_t *)p);
		return true;
	case PROTOBUF_C_TYPE_INT64:
		fprintf(out, "%" PRId64, *(const int64_t *)p);
		return true;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)p ? "true" : "false", out);
		return true;
	case PROTOBUF_C_TYPE_STRING:
		json_string(out, *(const char *const *)p);
		return true;
	default:
		return false;
	}
}

static void print_message(FILE *out, const ProtobufCMessageDescriptor *d, const void *msg);

/* One element of a field: a scalar, an enum by its name, or a nested message. */
static void json_value(FILE *out, const ProtobufCFieldDescriptor *fd, const void *p)
{
	if (fd->type == PROTOBUF_C_TYPE_ENUM) {
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(fd->descriptor, *(const int *)p);

		if (ev)
			json_string(out, ev->name);
		else
			fprintf(out, "%d", *(const int *)p);
	} else if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
		print_message(out, fd->descriptor, *(const void *const *)p);
	} else if (!json_scalar(out, fd->type, p)) {
		fputs("null", out);
	}
}

/* Size of one element of a repeated field in its array. */
static size_t elem_size(ProtobufCType type)
{
	switch (type) {
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_INT64:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	default:
		return 4;
	}
}

/*
 * Every field the daemon set, named as in profd.proto, walked from the message descriptor so
 * fields added to StatusReply (and the messages it holds) appear without touching this file.
 */
static void print_message(FILE *out, const ProtobufCMessageDescriptor *d, const void *msg)
{
	const char *base = msg;
	const char *sep = "";

	fputs("{", out);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		const void *val = base + fd->offset;

		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + fd->quantifier_offset);
			const char *arr = *(const char *const *)val;

			fprintf(out, "%s\"%s\": [", sep, fd->name);
			for (size_t k = 0; k < n; k++) {
				fputs(k ? ", " : "", out);
				json_value(out, fd, arr + k * elem_size(fd->type));
			}
			fputs("]", out);
			sep = ", ";
			continue;
		}
		if (fd->type == PROTOBUF_C_TYPE_STRING || fd->type == PROTOBUF_C_TYPE_MESSAGE) {
			if (!*(const void *const *)val)
				continue;
		} else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->quantifier_offset &&
			   !*(const protobuf_c_boolean *)(base + fd->quantifier_offset)) {
			continue;
		}
		fprintf(out, "%s\"%s\": ", sep, fd->name);
		json_value(out, fd, val);
		sep = ", ";
	}
	fputs("}", out);
}

/* What an owner's count counts, by the daemon's names for its owners. */
static const char *memory_noun(const char *name, uint64_t n)
{
	static const struct {
		const char *name, *one, *many;
	} nouns[] = {
	    {"symbols", "file", "files"},
	    {"unwind_tables", "file", "files"},
	    {"clients", "connection", "connections"},
	};

	for (size_t i = 0; i < sizeof(nouns) / sizeof(nouns[0]); i++)
		if (!strcmp(name, nouns[i].name))
			return n == 1 ? nouns[i].one : nouns[i].many;
	return n == 1 ? "process" : "processes";
}

/* The daemon's memory by owner, one line each: which part holds what. */
static void print_memory(FILE *out, const Profd__StatusReply *st)
{
	char a[32];

	for (size_t i = 0; i < st->n_memory; i++) {
		const Profd__MemoryOwner *m = st->memory[i];

		fprintf(out, "%-14s%-14s %10s", i ? "" : "memory:", m->name,
			fmt_bytes(m->bytes, a, sizeof(a)));
		if (m->has_count)
			fprintf(out, "  %" PRIu64 " %s", m->count, memory_noun(m->name, m->count));
		fputc('\n', out);
	}
}

static void status_print_json(FILE *out, const Profd__StatusReply *st)
{
	print_message(out, &profd__status_reply__descriptor, st);
	fputs("\n", out);
}

static const char *gpu_state_name(Profd__GpuState s)
{
	switch (s) {
	case PROFD__GPU_STATE__GPU_STATE_READY:
		return "ready";
	case PROFD__GPU_STATE__GPU_STATE_NO_CUPTI:
		return "no CUPTI";
	case PROFD__GPU_STATE__GPU_STATE_CUPTI_TOO_OLD:
		return "CUPTI too old";
	case PROFD__GPU_STATE__GPU_STATE_SUBSCRIBER_TAKEN:
		return "CUPTI subscriber taken by another tool";
	case PROFD__GPU_STATE__GPU_STATE_ERROR:
		return "error";
	case PROFD__GPU_STATE__GPU_STATE_ACTIVITY_TAKEN:
		return "stopped: CUPTI activity taken by another tool in the process";
	default:
		return "unknown state";
	}
}

static const char *gpu_clock_name(Profd__GpuClock c)
{
	switch (c) {
	case PROFD__GPU_CLOCK__GPU_CLOCK_CALLBACK:
		return "monotonic callback";
	case PROFD__GPU_CLOCK__GPU_CLOCK_OFFSET:
		return "measured offset";
	default:
		return "unknown";
	}
}

/* The GPU lines, when the daemon has GPU support (it sets the counters). */
/*
 * Python frames the daemon could not name stand as placeholders in their stacks: say how many,
 * and why. A frame is named from its code object, read from the process when the daemon
 * handles the sample (up to a drain interval after it was taken).
 */
static void print_py_left_out(FILE *out, const Profd__StatusReply *st)
{
	uint64_t exited = st->has_python_frames_exited ? st->python_frames_exited : 0;

	if (!st->has_python_frames_dropped)
		return;
	fprintf(out, "%-14s%" PRIu64, "", st->python_frames_dropped);
	if (st->has_python_frames_exited && exited <= st->python_frames_dropped)
		fprintf(out,
			" Python frames shown as placeholders: %" PRIu64
			" (process exited first), %" PRIu64 " (code unreadable)\n",
			exited, st->python_frames_dropped - exited);
	else
		fputs(" Python frames shown as placeholders (code unreadable)\n", out);
}

/* CPU samples of Python threads by the GIL state they were taken in. */
static void print_py_gil(FILE *out, const Profd__StatusReply *st)
{
	if (!st->has_python_gil_held || !st->has_python_gil_free || !st->has_python_no_gil)
		return;
	fprintf(out,
		"%-14sGIL: %" PRIu64 " samples holding it, %" PRIu64 " without it, %" PRIu64
		" in free-threaded builds\n",
		"", st->python_gil_held, st->python_gil_free, st->python_no_gil);
}

static void print_gpu(FILE *out, const Profd__StatusReply *st)
{
	if (!st->has_gpu_processes && !st->n_gpu)
		return;
	if (st->has_gpu_processes)
		fprintf(out,
			"%-14s%" PRIu64 " processes, %" PRIu64 " launches, %" PRIu64
			" records, %" PRIu64 " joined, %" PRIu64 " unmatched, %" PRIu64
			" dropped, %" PRIu64 " uprobe launches\n",
			"gpu:", st->gpu_processes, st->gpu_launches, st->gpu_records,
			st->gpu_joined, st->gpu_unmatched, st->gpu_dropped,
			st->gpu_uprobe_launches);
	if (st->gpu_launches_limited)
		fprintf(out, "%-14s%" PRIu64 " launch records over the per-process probe limit\n",
			"", st->gpu_launches_limited);
	if (st->gpu_memory_records)
		fprintf(out,
			"%-14s%" PRIu64 " memory records, %" PRIu64
			" releases of allocations not tracked\n",
			"", st->gpu_memory_records, st->gpu_memory_unmatched_frees);
	if (st->gpu_zero_time_records)
		fprintf(out,
			"%-14s%" PRIu64 " records without timestamps (a CUPTI bug before 13.1)\n",
			"", st->gpu_zero_time_records);
	if (st->gpu_forced_flushes)
		fprintf(out,
			"%-14s%" PRIu64
			" flushes forced by the delay bound (records in flight lost)\n",
			"", st->gpu_forced_flushes);
	if (st->gpu_bad_records)
		fprintf(out,
			"%-14s%" PRIu64
			" records refused as malformed (bad times, strings or sizes)\n",
			"", st->gpu_bad_records);
	if (st->gpu_records_refused || st->gpu_batches_refused) {
		char b[48];

		fprintf(out,
			"%-14s%" PRIu64 " records (%s in %" PRIu64
			" batches) refused: over the rate of an uplink (%" PRIu32
			" records a second) or of its user's\n",
			"", st->gpu_records_refused, fmt_bytes(st->gpu_bytes_refused, b, sizeof(b)),
			st->gpu_batches_refused, st->gpu_uplink_rate);
	}
	if (st->gpu_waits_refused)
		fprintf(out,
			"%-14s%" PRIu64
			" records not kept waiting for their launch (process or user bound)\n",
			"", st->gpu_waits_refused);
	for (size_t i = 0; i < st->n_gpu; i++) {
		const Profd__GpuProcessStatus *g = st->gpu[i];
		char pid[32];

		snprintf(pid, sizeof(pid), "  pid %" PRIu32 ":", g->pid);
		fprintf(out, "%-14s%s", pid, gpu_state_name(g->state));
		if (g->has_enabled)
			fputs(g->enabled ? ", collecting" : ", idle", out);
		if (g->has_clock)
			fprintf(out, ", clock %s", gpu_clock_name(g->clock));
		if (g->has_cupti_version && g->cupti_version)
			fprintf(out, ", CUPTI %" PRIu32, g->cupti_version);
		if (g->memory_live || g->memory_untracked) {
			char b[48];

			fprintf(out, ", memory live %s in %" PRIu64 " allocations",
				fmt_bytes(g->memory_live_bytes, b, sizeof(b)), g->memory_live);
			if (g->memory_untracked)
				fprintf(out, " (%" PRIu64 " not tracked: bound)",
					g->memory_untracked);
		}
		if (g->has_max_delay_ms && g->max_delay_ms)
			fprintf(out, ", delay bound %" PRIu32 " ms", g->max_delay_ms);
		if (g->zero_time_records)
			fprintf(out, ", %" PRIu64 " without timestamps", g->zero_time_records);
		if (g->forced_flushes)
			fprintf(out, ", %" PRIu64 " forced flushes", g->forced_flushes);
		if (g->records_refused)
			fprintf(out, ", %" PRIu64 " records refused (rate)", g->records_refused);
		if (g->waits_refused)
			fprintf(out, ", %" PRIu64 " not kept waiting", g->waits_refused);
		if (g->detail && *g->detail) {
			fputs(": ", out);
			/* One line whatever the library sent. */
			for (const char *p = g->detail; *p; p++)
				fputc((unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p, out);
		}
		fputc('\n', out);
	}
}

/* One line a backend: where, how it went lately, what it sent and what waits. */
static void print_export(FILE *out, const Profd__StatusReply *st)
{
	char a[48], b[48], c[48];

	for (size_t i = 0; i < st->n_export; i++) {
		const Profd__ExportStatus *x = st->export[i];

		fprintf(out, "export %s %s: last success %s, last error ", x->name, x->url,
			x->has_last_success_age_ns
			    ? (snprintf(a, sizeof(a), "%s ago",
					fmt_duration(x->last_success_age_ns, c, sizeof(c))),
			       a)
			    : "never");
		if (x->has_last_error_age_ns) {
			fprintf(out, "%s ago (", fmt_duration(x->last_error_age_ns, c, sizeof(c)));
			/* One line whatever the backend answered. */
			for (const char *p = x->last_error ? x->last_error : ""; *p; p++)
				fputc((unsigned char)*p < 0x20 || *p == 0x7f ? '?' : *p, out);
			fputc(')', out);
		} else {
			fputs("never", out);
		}
		fprintf(out,
			"; requests %" PRIu64 " sent, %" PRIu64 " retried, %" PRIu64
			" dropped, %" PRIu64 " expired, %" PRIu64 " quarantined; samples %" PRIu64
			" exported, %" PRIu64 " sent; spool %s in %" PRIu64 " requests",
			x->requests_sent, x->requests_retried, x->requests_dropped,
			x->requests_expired, x->requests_quarantined, x->samples_exported,
			x->samples_sent, fmt_bytes(x->spool_bytes, b, sizeof(b)),
			x->spool_requests);
		if (x->spool_requests)
			fprintf(out, ", oldest %s", fmt_duration(x->oldest_age_ns, a, sizeof(a)));
		if (x->spool_errors)
			fprintf(out, ", %" PRIu64 " spool write errors (kept in memory)",
				x->spool_errors);
		fprintf(out, "; quarantine %" PRIu64 " requests in %s, %" PRIu64 " dropped",
			x->quarantine_requests, fmt_bytes(x->quarantine_bytes, b, sizeof(b)),
			x->quarantine_dropped);
		if (x->requests_invalid)
			fprintf(out, ", %" PRIu64 " spool files did not verify",
				x->requests_invalid);
		if (x->auth_failing)
			fputs("; THE BACKEND REFUSES THE CREDENTIALS (401/403)", out);
		fputc('\n', out);
	}
}

/* How user stacks were walked, and the tables that walk reads. */
static void print_unwind(FILE *out, const Profd__StatusReply *st)
{
	const Profd__UnwindStatus *u = st->unwind;
	char a[48], b[48], c[48];

	if (!u)
		return;
	fprintf(out,
		"%-14sbottom %" PRIu64 ", truncated %" PRIu64 ", fp-fallback %" PRIu64
		", no-mapping %" PRIu64 ", no-table %" PRIu64 ", no-row %" PRIu64
		", invalid %" PRIu64 ", read-fault %" PRIu64 ", bad-frame %" PRIu64
		"; left JIT code by a stack scan: scanned %" PRIu64 ", scan-steps %" PRIu64
		", scan-rejects %" PRIu64 ", scan-short %" PRIu64 "\n",
		"unwind:", u->bottom, u->truncated, u->fp_fallback, u->no_mapping, u->no_table,
		u->no_row, u->invalid, u->read_fault, u->bad_frame, u->scanned, u->scan_steps,
		u->scan_rejects, u->scan_short);
	fprintf(out,
		"%-14stables: %" PRIu64 " files, %s of %s, %" PRIu64 " built in %s (%" PRIu64
		" failed, %" PRIu64 " without CFI, %" PRIu64 " too big), %" PRIu64
		" evicted, %" PRIu64 " reused; %" PRIu64 " processes described (%" PRIu64
		" descriptions, %" PRIu64 " mapping changes seen), %" PRIu64 " waiting",
		"", u->tables, fmt_bytes(u->table_bytes, a, sizeof(a)),
		fmt_bytes(u->memory, b, sizeof(b)), u->builds,
		fmt_duration(u->build_ns, c, sizeof(c)), u->build_failed, u->no_cfi, u->too_big,
		u->evictions, u->cache_hits, u->processes, u->described, st->maps_changes,
		u->queued);
	if (u->busy_pid)
		fprintf(out, "; describing pid %" PRIu32 ": %" PRIu32 " of %" PRIu32 " mappings",
			u->busy_pid, u->busy_done, u->busy_mappings);
	if (u->over_budget)
		fprintf(out, "; %" PRIu64 " left out for the bound (walks stop there: no-table)",
			u->over_budget);
	if (u->mappings_dropped)
		fprintf(out,
			"; %" PRIu64 " mappings over the %" PRIu64 " a process may have (%" PRIu64
			" processes over now, %" PRIu64 " misses left alone)",
			u->mappings_dropped, u->max_mappings, u->over_bound, u->backoffs);
	fputc('\n', out);
	/* Apart from the CFI's: rows of functions without CFI, analysed from their code. */
	if (u->has_insn_functions)
		fprintf(out,
			"%-14sfrom machine code: %" PRIu64 " functions without CFI, %" PRIu64
			" rows, %" PRIu64 " followed in part, %" PRIu64
			" left out (size, budget), %" PRIu64 " instructions\n",
			"", u->insn_functions, u->insn_rows, u->insn_partial, u->insn_skipped,
			u->insn_instructions);
}

static void status_print_text(FILE *out, const Profd__StatusReply *st)
{
	char a[48], b[48], c[48];

	fprintf(out, "profd %s", st->daemon_version ? st->daemon_version : "(unknown version)");
	if (st->has_pid)
		fprintf(out, ", pid %" PRIu32, st->pid);
	if (st->has_uptime_ns)
		fprintf(out, ", up %s", fmt_duration(st->uptime_ns, a, sizeof(a)));
	fputc('\n', out);

	fprintf(out, "%-14s%" PRIu32 " Hz on %" PRIu32 " CPUs, ", "sampling:", st->frequency_hz,
		st->ncpus);
	if (st->system_wide) {
		fputs("system-wide\n", out);
	} else if (!st->n_target_pids) {
		fputs(st->has_only_uid ? "target processes, none of them yours\n"
				       : "followed processes only (recorded commands)\n",
		      out);
	} else {
		fputs(st->n_target_pids == 1 ? "pid" : "pids", out);
		for (size_t i = 0; i < st->n_target_pids; i++)
			fprintf(out, "%s %" PRIu32, i ? "," : "", st->target_pids[i]);
		fputc('\n', out);
	}
	if (!st->system_wide && st->has_follows_children) {
		fprintf(out, "%-14s", "children:");
		if (!st->follows_children)
			fputs("not followed (--no-children)\n", out);
		else
			fprintf(out,
				"followed: %" PRIu64 " children followed, %" PRIu64
				" not followed (too many processes)\n",
				st->children_followed, st->children_not_followed);
	}
	if (!st->has_samples_received) {
		/* A non-root client: the machine's counters tell what other users run. */
		fprintf(out, "%-14sthe whole machine's counters are shown to root only",
			"counters:");
		if (st->has_only_uid)
			fprintf(out, " (you are uid %" PRIu32 ")", st->only_uid);
		fputc('\n', out);
		print_gpu(out, st);
		print_export(out, st);
		return;
	}
	fprintf(out,
		"%-14s%" PRIu64 " received, %" PRIu64 " lost (ring buffer full), %" PRIu64
		" evicted (memory cap)\n",
		"samples:", st->samples_received, st->samples_lost_ringbuf, st->samples_evicted);
	if (st->store_evicted_over_share)
		fprintf(out,
			"%-14s%" PRIu64 " entries evicted first from users over an equal share of "
			"the store\n",
			"", st->store_evicted_over_share);
	fprintf(out, "%-14s%" PRIu64 " kernel, %" PRIu64 " user\n",
		"stack errors:", st->kstack_errors, st->ustack_errors);
	print_unwind(out, st);
	if (st->has_off_cpu && st->off_cpu)
		fprintf(out,
			"%-14s%" PRIu64 " waits of %s or more, %" PRIu64 " shorter ones in %" PRIu64
			" sums, %" PRIu64 " records lost (ring buffer full)\n",
			"off-CPU:", st->off_cpu_waits,
			fmt_duration(st->off_cpu_min_ns, a, sizeof(a)), st->off_cpu_short_waits,
			st->off_cpu_short_records, st->off_cpu_lost);
	fprintf(out,
		"%-14s%" PRIu64 " task events lost, %" PRIu64 " malformed records, %" PRIu64
		" samples dropped (daemon memory)\n",
		"other losses:", st->task_events_lost, st->records_malformed, st->samples_dropped);
	fprintf(out,
		"%-14s%" PRIu64 " processes, %" PRIu64 " samples with Python frames, %" PRIu64
		" samples without a thread state\n",
		"python:", st->python_processes, st->python_samples, st->python_no_thread_state);
	print_py_gil(out, st);
	print_py_left_out(out, st);
	fprintf(
	    out, "%-14s%s of %s, %" PRIu64 " stacks, %" PRIu64 " frames, %" PRIu64 " processes\n",
	    "store:", fmt_bytes(st->store_bytes, a, sizeof(a)),
	    fmt_bytes(st->store_cap_bytes, b, sizeof(b)), st->stacks, st->frames, st->processes);

	fprintf(out, "%-14s", "time range:");
	if (!st->has_oldest_ns || !st->has_newest_ns || !st->oldest_ns ||
	    st->newest_ns < st->oldest_ns) {
		fputs("no samples yet\n", out);
	} else {
		fprintf(out, "%s", fmt_duration(st->newest_ns - st->oldest_ns, a, sizeof(a)));
		if (st->has_realtime_offset_ns)
			fprintf(
			    out, ", %s to %s",
			    fmt_mono_as_wall(st->oldest_ns, st->realtime_offset_ns, b, sizeof(b)),
			    fmt_mono_as_wall(st->newest_ns, st->realtime_offset_ns, c, sizeof(c)));
		if (st->has_now_ns && st->now_ns >= st->newest_ns)
			fprintf(out, " (newest %s ago)",
				fmt_duration(st->now_ns - st->newest_ns, a, sizeof(a)));
		fputc('\n', out);
	}
	print_gpu(out, st);
	if (st->has_perf_map_bytes) {
		fprintf(out, "%-14s%s of %s",
			"perf maps:", fmt_bytes(st->perf_map_bytes, a, sizeof(a)),
			fmt_bytes(st->perf_map_budget_bytes, b, sizeof(b)));
		if (st->perf_maps_sparse)
			fprintf(out,
				", %" PRIu32
				" too large (only entries that samples hit kept, %" PRIu64
				" left out)",
				st->perf_maps_sparse, st->perf_map_entries_dropped);
		fprintf(out, ", %" PRIu64 " reads (%s)\n", st->perf_map_reads,
			fmt_duration(st->perf_map_read_ns, c, sizeof(c)));
	}
	if (st->has_symbol_bytes)
		fprintf(out, "%-14s%s in %" PRIu32 " ELF files (bound %s)\n",
			"symbols:", fmt_bytes(st->symbol_bytes, a, sizeof(a)), st->symbol_files,
			fmt_bytes(st->symbol_budget_bytes, b, sizeof(b)));
	if (st->has_trace_ring_bytes)
		fprintf(out, "%-14s%s of recent events for traces\n",
			"trace ring:", fmt_bytes(st->trace_ring_bytes, a, sizeof(a)));
	fprintf(out, "%-14s%" PRIu32 "\n", "clients:", st->clients);
	fprintf(out, "%-14s%s CPU, %s RSS\n",
		"daemon:", fmt_duration(st->daemon_cpu_ns, a, sizeof(a)),
		fmt_bytes(st->daemon_rss_bytes, b, sizeof(b)));
	print_memory(out, st);
	print_export(out, st);
}

int cmd_status(int argc, char **argv, const struct global_opts *g)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	Profd__Request req = PROFD__REQUEST__INIT;
	Profd__StatusRequest sreq = PROFD__STATUS_REQUEST__INIT;
	uint64_t timeout_ns = g->timeout_ns ? g->timeout_ns : PROFCTL_STATUS_TIMEOUT_NS;
	Profd__Response *resp = NULL;
	struct cli_error e = {0};
	struct conn *c = NULL;
	bool json = false;
	int opt, err;

	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 't':
			if (opt_parse_timeout("status", optarg, &timeout_ns, &e))
				return cli_error_print(&e);
			break;
		case 'h':
			cmd_status_usage(stdout);
			return PROFCTL_EXIT_OK;
		default:
			opt_bad_option(opt, argv, longopts, "status", &e);
			return cli_error_print(&e);
		}
	}
	if (opt_no_operands("status", argc, argv, &e))
		return cli_error_print(&e);

	c = conn__open(wire_socket_path(g->socket), timeout_ns, &e);
	if (!c)
		return cli_error_print(&e);
	req.msg_case = PROFD__REQUEST__MSG_STATUS;
	req.status = &sreq;
	err = conn__call(c, &req, PROFD__RESPONSE__MSG_STATUS, &resp, &e);
	conn__free(c);
	if (err)
		return cli_error_print(&e);
	if (json)
		status_print_json(stdout, resp->status);
	else
		status_print_text(stdout, resp->status);
	profd__response__free_unpacked(resp, NULL);
	if (fflush(stdout) || ferror(stdout)) {
		cli_error_set(&e, PROFCTL_EXIT_ERROR, "writing to standard output: %s",
			      strerror(errno));
		return cli_error_print(&e);
	}
	return PROFCTL_EXIT_OK;
}
