// SPDX-License-Identifier: BSD-2-Clause
/*
 * A Trace as Chrome trace event JSON (the layout is in trace.h). Every event goes into one
 * array that is sorted by time before anything is written: that is what keeps each track's
 * timestamps monotonic and puts an enclosing slice before the slices it holds, which viewers
 * need to nest them.
 */
#include "format.h"
#include "grow.h"
#include "profile.h"
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int trace_check(const Profd__Trace *t, char *err, size_t err_len)
{
	Profd__Profile view;
	size_t ns = t->n_strings;
	int rc;

#define BAD_STR(idx) ((idx) >= ns && (idx) != 0)
#define BAD_SPAN(e) ((e)->end_ns < (e)->start_ns)
	trace_as_profile(t, &view);
	rc = profile_check(&view, err, err_len);
	if (rc)
		return rc;
	for (size_t i = 0; i < t->n_processes; i++)
		if (BAD_STR(t->processes[i]->name))
			goto bad_string;
	for (size_t i = 0; i < t->n_threads; i++)
		if (BAD_STR(t->threads[i]->name))
			goto bad_string;
	for (size_t i = 0; i < t->n_samples; i++) {
		if (t->samples[i]->stack >= t->n_stacks) {
			snprintf(err, err_len, "sample %zu names stack %" PRIu32 " of %zu", i,
				 t->samples[i]->stack, t->n_stacks);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < t->n_waits; i++) {
		if (t->waits[i]->stack >= t->n_stacks) {
			snprintf(err, err_len, "wait %zu names stack %" PRIu32 " of %zu", i,
				 t->waits[i]->stack, t->n_stacks);
			return -EPROTO;
		}
		if (BAD_SPAN(t->waits[i]))
			goto bad_span;
	}
	for (size_t i = 0; i < t->n_launches; i++) {
		if (t->launches[i]->stack >= t->n_stacks) {
			snprintf(err, err_len, "launch %zu names stack %" PRIu32 " of %zu", i,
				 t->launches[i]->stack, t->n_stacks);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < t->n_kernels; i++) {
		if (BAD_STR(t->kernels[i]->name))
			goto bad_string;
		if (BAD_SPAN(t->kernels[i]))
			goto bad_span;
	}
	for (size_t i = 0; i < t->n_copies; i++)
		if (BAD_SPAN(t->copies[i]))
			goto bad_span;
	for (size_t i = 0; i < t->n_api_calls; i++) {
		if (BAD_STR(t->api_calls[i]->name))
			goto bad_string;
		if (BAD_SPAN(t->api_calls[i]))
			goto bad_span;
	}
	for (size_t i = 0; i < t->n_nvtx; i++) {
		if (BAD_STR(t->nvtx[i]->name))
			goto bad_string;
		if (BAD_SPAN(t->nvtx[i]))
			goto bad_span;
	}
	return 0;
bad_string:
	snprintf(err, err_len, "an event names a string past the %zu in the table", ns);
	return -EPROTO;
bad_span:
	snprintf(err, err_len, "an event ends before it starts");
	return -EPROTO;
#undef BAD_STR
#undef BAD_SPAN
}

void trace_as_profile(const Profd__Trace *t, Profd__Profile *view)
{
	profd__profile__init(view);
	view->n_strings = t->n_strings;
	view->strings = t->strings;
	view->n_frames = t->n_frames;
	view->frames = t->frames;
	view->n_stacks = t->n_stacks;
	view->stacks = t->stacks;
}

size_t trace_n_events(const Profd__Trace *t)
{
	return t->n_samples + t->n_launches + t->n_kernels + t->n_copies + t->n_api_calls +
	       t->n_nvtx + t->n_waits;
}

const char *trace_copy_kind_name(Profd__GpuCopyKind k)
{
	switch (k) {
	case PROFD__GPU_COPY_KIND__GPU_COPY_HTOD:
		return "HtoD";
	case PROFD__GPU_COPY_KIND__GPU_COPY_DTOH:
		return "DtoH";
	case PROFD__GPU_COPY_KIND__GPU_COPY_DTOD:
		return "DtoD";
	case PROFD__GPU_COPY_KIND__GPU_COPY_HTOH:
		return "HtoH";
	case PROFD__GPU_COPY_KIND__GPU_COPY_PTOP:
		return "PtoP";
	case PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET:
		return "memset";
	default:
		return "unknown";
	}
}

/* What an event is; at equal times and lengths the lower kind encloses the higher. */
enum ev_kind {
	EV_NVTX,
	EV_API,
	EV_WAIT, /* inside the API call it blocked in */
	EV_LAUNCH,
	EV_KERNEL,
	EV_COPY,
	EV_SAMPLE,
	EV_FLOW_START,
	EV_FLOW_END,
};

struct ev {
	uint64_t ts, dur;
	uint32_t pid, tid;
	uint32_t kind;	/* enum ev_kind */
	uint32_t depth; /* NVTX nesting, 0 for others */
	uint32_t idx;	/* into the Trace table of its kind; for flows the kernel */
	uint64_t id;	/* flow id; for launches their first kernel + 1, 0 none */
	size_t seq;	/* insertion order, the last tie-break */
};

static bool is_slice(uint32_t kind)
{
	return kind <= EV_COPY;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	/* A slice before an instant or flow at its start: flows bind to the slice there. */
	if (is_slice(x->kind) != is_slice(y->kind))
		return is_slice(x->kind) ? -1 : 1;
	/* Longer first: the enclosing slice must come before the ones it holds. */
	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A (pid, device) with GPU work, numbered into the pseudo process pids. */
struct gpu_proc {
	uint32_t pid, device;
};

static int cmp_gpu_proc(const void *a, const void *b)
{
	const struct gpu_proc *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->device < y->device ? -1 : x->device > y->device;
}

struct pid_tid {
	uint32_t pid, tid;
};

static int cmp_pid_tid(const void *a, const void *b)
{
	const struct pid_tid *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Kernels in (pid, correlation id) order, to find a launch's kernels. */
struct corr_ref {
	uint32_t pid, corr, idx;
};

static int cmp_corr(const void *a, const void *b)
{
	const struct corr_ref *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->corr != y->corr)
		return x->corr < y->corr ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct tw {
	const Profd__Trace *t;
	Profd__Profile view;
	FILE *out;
	struct ev *evs;
	size_t n_evs, cap_evs;
	struct gpu_proc *gpus;
	size_t n_gpus;
	bool first; /* no event written yet: no comma before the next */
	char *name;
	size_t name_len;
};

static int push(struct tw *w, struct ev e)
{
	int err = GROW(w->evs, w->cap_evs, w->n_evs + 1);

	if (err)
		return err;
	e.seq = w->n_evs;
	w->evs[w->n_evs++] = e;
	return 0;
}

static const char *tstr(const struct tw *w, uint32_t idx)
{
	return profile_string(&w->view, idx);
}

/* Display name of frame fi, in w->name (grown as needed). NULL when out of memory. */
static const char *frame_name(struct tw *w, uint32_t fi)
{
	const Profd__Frame *f = w->t->frames[fi];
	size_t need = profile_frame_name(&w->view, f, w->name, w->name_len);

	if (need >= w->name_len) {
		char *nb = realloc(w->name, need + 1);

		if (!nb)
			return NULL;
		w->name = nb;
		w->name_len = need + 1;
		profile_frame_name(&w->view, f, w->name, w->name_len);
	}
	return w->name;
}

/* Microseconds with three decimals: the ns exactly, no floating-point rounding. */
static void put_us(FILE *out, const char *key, uint64_t ns)
{
	fprintf(out, ", \"%s\": %" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

/* Start an event object: the separator, ph, pid, tid and ts. */
static void begin(struct tw *w, const char *ph, uint32_t pid, uint32_t tid, uint64_t ts)
{
	fprintf(w->out, "%s\n{\"ph\": \"%s\", \"pid\": %" PRIu32 ", \"tid\": %" PRIu32,
		w->first ? "" : ",", ph, pid, tid);
	w->first = false;
	put_us(w->out, "ts", ts);
}

static void put_key_string(FILE *out, const char *key, const char *s)
{
	fprintf(out, ", \"%s\": ", key);
	json_write_string(out, s);
}

static void metadata(struct tw *w, const char *what, uint32_t pid, uint32_t tid, const char *name,
		     int64_t sort_index)
{
	begin(w, "M", pid, tid, 0);
	put_key_string(w->out, "name", what);
	if (name) {
		fputs(", \"args\": {\"name\": ", w->out);
		json_write_string(w->out, name);
		fputs("}}", w->out);
	} else {
		fprintf(w->out, ", \"args\": {\"sort_index\": %" PRId64 "}}", sort_index);
	}
}

static const char *process_name(const struct tw *w, uint32_t pid)
{
	for (size_t i = 0; i < w->t->n_processes; i++)
		if (w->t->processes[i]->pid == pid && *tstr(w, w->t->processes[i]->name))
			return tstr(w, w->t->processes[i]->name);
	return NULL;
}

static const char *thread_name(const struct tw *w, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < w->t->n_threads; i++) {
		const Profd__Thread *th = w->t->threads[i];

		if (th->pid == pid && th->tid == tid && *tstr(w, th->name))
			return tstr(w, th->name);
	}
	return NULL;
}

static uint32_t gpu_pid(const struct tw *w, uint32_t pid, uint32_t device)
{
	struct gpu_proc key = {pid, device};
	const struct gpu_proc *hit =
	    bsearch(&key, w->gpus, w->n_gpus, sizeof(*w->gpus), cmp_gpu_proc);

	return TRACE_GPU_PID_BASE + (uint32_t)(hit ? hit - w->gpus : 0);
}

/* Sorted distinct (pid, device) pairs of kernels and copies into w->gpus. */
static int collect_gpus(struct tw *w)
{
	const Profd__Trace *t = w->t;
	size_t n = 0;

	w->gpus = calloc(t->n_kernels + t->n_copies + 1, sizeof(*w->gpus));
	if (!w->gpus)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_kernels; i++)
		w->gpus[n++] = (struct gpu_proc){t->kernels[i]->pid, t->kernels[i]->device};
	for (size_t i = 0; i < t->n_copies; i++)
		w->gpus[n++] = (struct gpu_proc){t->copies[i]->pid, t->copies[i]->device};
	if (n) /* qsort(NULL, 0) is undefined */
		qsort(w->gpus, n, sizeof(*w->gpus), cmp_gpu_proc);
	w->n_gpus = 0;
	for (size_t i = 0; i < n; i++)
		if (!w->n_gpus || cmp_gpu_proc(&w->gpus[w->n_gpus - 1], &w->gpus[i]))
			w->gpus[w->n_gpus++] = w->gpus[i];
	return 0;
}

/* Process, thread and GPU track names, and an order that puts each GPU under its process. */
static int write_metadata(struct tw *w)
{
	const Profd__Trace *t = w->t;
	size_t n = 0,
	       cap = t->n_samples + t->n_launches + t->n_api_calls + t->n_nvtx + t->n_waits + 1;
	struct pid_tid *th = calloc(cap, sizeof(*th));
	struct pid_tid *streams = calloc(t->n_kernels + t->n_copies + 1, sizeof(*streams));
	size_t n_streams = 0, gi = 0;
	int64_t order = 0;
	char buf[320];

	if (!th || !streams) {
		free(th);
		free(streams);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t->n_samples; i++)
		th[n++] = (struct pid_tid){t->samples[i]->pid, t->samples[i]->tid};
	for (size_t i = 0; i < t->n_launches; i++)
		th[n++] = (struct pid_tid){t->launches[i]->pid, t->launches[i]->tid};
	for (size_t i = 0; i < t->n_api_calls; i++)
		th[n++] = (struct pid_tid){t->api_calls[i]->pid, t->api_calls[i]->tid};
	for (size_t i = 0; i < t->n_nvtx; i++)
		th[n++] = (struct pid_tid){t->nvtx[i]->pid, t->nvtx[i]->tid};
	for (size_t i = 0; i < t->n_waits; i++)
		th[n++] = (struct pid_tid){t->waits[i]->pid, t->waits[i]->tid};
	/* Processes with only GPU work still get their CPU process row (with no threads). */
	for (size_t i = 0; i < w->n_gpus; i++) {
		int err = GROW(th, cap, n + 1);

		if (err) {
			free(th);
			free(streams);
			return err;
		}
		th[n++] = (struct pid_tid){w->gpus[i].pid, UINT32_MAX};
	}
	if (n) /* qsort(NULL, 0) is undefined */
		qsort(th, n, sizeof(*th), cmp_pid_tid);
	for (size_t i = 0; i < t->n_kernels; i++)
		streams[n_streams++] = (struct pid_tid){
		    gpu_pid(w, t->kernels[i]->pid, t->kernels[i]->device), t->kernels[i]->stream};
	for (size_t i = 0; i < t->n_copies; i++)
		streams[n_streams++] = (struct pid_tid){
		    gpu_pid(w, t->copies[i]->pid, t->copies[i]->device), t->copies[i]->stream};
	if (n_streams) /* qsort(NULL, 0) is undefined */
		qsort(streams, n_streams, sizeof(*streams), cmp_pid_tid);

	for (size_t i = 0; i < n; i++) {
		uint32_t pid = th[i].pid;
		const char *pname = process_name(w, pid);

		if (i == 0 || th[i - 1].pid != pid) {
			if (pname)
				snprintf(buf, sizeof(buf), "%.256s", pname);
			else
				snprintf(buf, sizeof(buf), "[pid %" PRIu32 "]", pid);
			metadata(w, "process_name", pid, 0, buf, 0);
			metadata(w, "process_sort_index", pid, 0, NULL, order++);
			/* This process's GPUs right under it. */
			for (; gi < w->n_gpus && w->gpus[gi].pid < pid; gi++)
				;
			for (; gi < w->n_gpus && w->gpus[gi].pid == pid; gi++) {
				uint32_t gp = TRACE_GPU_PID_BASE + (uint32_t)gi;

				snprintf(buf, sizeof(buf),
					 "GPU %" PRIu32 " of %.256s (pid %" PRIu32 ")",
					 w->gpus[gi].device, pname ? pname : "process", pid);
				metadata(w, "process_name", gp, 0, buf, 0);
				metadata(w, "process_sort_index", gp, 0, NULL, order++);
			}
		}
		if (th[i].tid == UINT32_MAX || (i && !cmp_pid_tid(&th[i - 1], &th[i])))
			continue;
		if (thread_name(w, pid, th[i].tid))
			snprintf(buf, sizeof(buf), "%.256s", thread_name(w, pid, th[i].tid));
		else
			snprintf(buf, sizeof(buf), "[tid %" PRIu32 "]", th[i].tid);
		metadata(w, "thread_name", pid, th[i].tid, buf, 0);
	}
	for (size_t i = 0; i < n_streams; i++) {
		if (i && !cmp_pid_tid(&streams[i - 1], &streams[i]))
			continue;
		snprintf(buf, sizeof(buf), "stream %" PRIu32, streams[i].tid);
		metadata(w, "thread_name", streams[i].pid, streams[i].tid, buf, 0);
	}
	free(th);
	free(streams);
	return 0;
}

/* Every event and flow into w->evs, unsorted. */
static int collect_events(struct tw *w)
{
	const Profd__Trace *t = w->t;
	struct corr_ref *corr = calloc(t->n_kernels + 1, sizeof(*corr));
	uint64_t flow_id = 0;
	int err = 0;

	if (!corr)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_kernels; i++)
		corr[i] = (struct corr_ref){t->kernels[i]->pid, t->kernels[i]->correlation_id,
					    (uint32_t)i};
	if (t->n_kernels) /* qsort(NULL, 0) is undefined */
		qsort(corr, t->n_kernels, sizeof(*corr), cmp_corr);

	for (size_t i = 0; i < t->n_nvtx && !err; i++) {
		const Profd__TraceNvtx *e = t->nvtx[i];

		err = push(w, (struct ev){.ts = e->start_ns,
					  .dur = e->end_ns - e->start_ns,
					  .pid = e->pid,
					  .tid = e->tid,
					  .kind = EV_NVTX,
					  .depth = e->has_depth ? e->depth : 0,
					  .idx = (uint32_t)i});
	}
	for (size_t i = 0; i < t->n_api_calls && !err; i++) {
		const Profd__TraceApiCall *e = t->api_calls[i];

		err = push(w, (struct ev){.ts = e->start_ns,
					  .dur = e->end_ns - e->start_ns,
					  .pid = e->pid,
					  .tid = e->tid,
					  .kind = EV_API,
					  .idx = (uint32_t)i});
	}
	for (size_t i = 0; i < t->n_waits && !err; i++) {
		const Profd__TraceWait *e = t->waits[i];

		err = push(w, (struct ev){.ts = e->start_ns,
					  .dur = e->end_ns - e->start_ns,
					  .pid = e->pid,
					  .tid = e->tid,
					  .kind = EV_WAIT,
					  .idx = (uint32_t)i});
	}
	for (size_t i = 0; i < t->n_kernels && !err; i++) {
		const Profd__TraceKernel *e = t->kernels[i];

		err = push(w, (struct ev){.ts = e->start_ns,
					  .dur = e->end_ns - e->start_ns,
					  .pid = gpu_pid(w, e->pid, e->device),
					  .tid = e->stream,
					  .kind = EV_KERNEL,
					  .idx = (uint32_t)i});
	}
	for (size_t i = 0; i < t->n_copies && !err; i++) {
		const Profd__TraceCopy *e = t->copies[i];

		err = push(w, (struct ev){.ts = e->start_ns,
					  .dur = e->end_ns - e->start_ns,
					  .pid = gpu_pid(w, e->pid, e->device),
					  .tid = e->stream,
					  .kind = EV_COPY,
					  .idx = (uint32_t)i});
	}
	for (size_t i = 0; i < t->n_samples && !err; i++) {
		const Profd__TraceSample *e = t->samples[i];

		err = push(w, (struct ev){.ts = e->ts_ns,
					  .pid = e->pid,
					  .tid = e->tid,
					  .kind = EV_SAMPLE,
					  .idx = (uint32_t)i});
	}
	for (size_t i = 0; i < t->n_launches && !err; i++) {
		const Profd__TraceLaunch *e = t->launches[i];
		struct corr_ref key = {e->pid, e->correlation_id, 0};
		size_t lo = 0, hi = t->n_kernels;

		/* The first kernel of (pid, correlation id), then every one after it. */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (cmp_corr(&corr[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		err = push(w, (struct ev){.ts = e->ts_ns,
					  .pid = e->pid,
					  .tid = e->tid,
					  .kind = EV_LAUNCH,
					  .idx = (uint32_t)i,
					  .id = lo < t->n_kernels && corr[lo].pid == e->pid &&
							corr[lo].corr == e->correlation_id
						    ? corr[lo].idx + 1ull
						    : 0});
		for (size_t k = lo; !err && k < t->n_kernels && corr[k].pid == e->pid &&
				    corr[k].corr == e->correlation_id;
		     k++) {
			const Profd__TraceKernel *kn = t->kernels[corr[k].idx];

			flow_id++;
			err = push(w, (struct ev){.ts = e->ts_ns,
						  .pid = e->pid,
						  .tid = e->tid,
						  .kind = EV_FLOW_START,
						  .idx = corr[k].idx,
						  .id = flow_id});
			if (!err)
				err = push(w, (struct ev){.ts = kn->start_ns,
							  .pid = gpu_pid(w, kn->pid, kn->device),
							  .tid = kn->stream,
							  .kind = EV_FLOW_END,
							  .idx = corr[k].idx,
							  .id = flow_id});
		}
	}
	free(corr);
	return err;
}

/* args "stack": the frames' display names, leaf first. Returns 0 or -ENOMEM. */
static int put_stack(struct tw *w, uint32_t stack)
{
	const Profd__Stack *st = w->t->stacks[stack];

	fputs("\"stack\": [", w->out);
	for (size_t j = 0; j < st->n_frames; j++) {
		const char *name = frame_name(w, st->frames[j]);

		if (!name)
			return -ENOMEM;
		if (j)
			fputs(", ", w->out);
		json_write_string(w->out, name);
	}
	putc(']', w->out);
	return 0;
}

static int write_event(struct tw *w, const struct ev *e)
{
	const Profd__Trace *t = w->t;
	FILE *out = w->out;
	int err = 0;

	switch (e->kind) {
	case EV_NVTX:
		begin(w, "X", e->pid, e->tid, e->ts);
		put_us(out, "dur", e->dur);
		put_key_string(out, "name", tstr(w, t->nvtx[e->idx]->name));
		fprintf(out, ", \"cat\": \"nvtx\", \"args\": {\"depth\": %" PRIu32 "}}", e->depth);
		break;
	case EV_API: {
		const Profd__TraceApiCall *a = t->api_calls[e->idx];

		begin(w, "X", e->pid, e->tid, e->ts);
		put_us(out, "dur", e->dur);
		put_key_string(out, "name", *tstr(w, a->name) ? tstr(w, a->name) : "[CUDA call]");
		fprintf(out,
			", \"cat\": \"cuda_api\", \"args\": {\"correlation_id\": %" PRIu32 "}}",
			a->correlation_id);
		break;
	}
	case EV_WAIT: {
		const Profd__TraceWait *wt = t->waits[e->idx];
		const char *state = profile_stack_state(&w->view, t->stacks[wt->stack]);
		size_t len = state ? strlen(state) : 0;
		char name[128];

		/* "[off-cpu: futex]" names the slice "off-cpu: futex". */
		if (len > 2 && state[0] == '[' && state[len - 1] == ']')
			snprintf(name, sizeof(name), "%.*s", (int)(len - 2), state + 1);
		else
			snprintf(name, sizeof(name), "off-cpu");
		begin(w, "X", e->pid, e->tid, e->ts);
		put_us(out, "dur", e->dur);
		put_key_string(out, "name", name);
		fputs(", \"cat\": \"off_cpu\", \"args\": {", out);
		err = put_stack(w, wt->stack);
		fputs("}}", out);
		break;
	}
	case EV_LAUNCH: {
		const Profd__TraceLaunch *l = t->launches[e->idx];

		begin(w, "X", e->pid, e->tid, e->ts);
		fputs(", \"dur\": 0.000, \"name\": \"launch\", \"cat\": \"launch\", \"args\": {",
		      out);
		fprintf(out, "\"correlation_id\": %" PRIu32, l->correlation_id);
		if (e->id)
			put_key_string(out, "kernel", tstr(w, t->kernels[e->id - 1]->name));
		fputs(", ", out);
		err = put_stack(w, l->stack);
		fputs("}}", out);
		break;
	}
	case EV_KERNEL: {
		const Profd__TraceKernel *k = t->kernels[e->idx];

		begin(w, "X", e->pid, e->tid, e->ts);
		put_us(out, "dur", e->dur);
		put_key_string(out, "name", *tstr(w, k->name) ? tstr(w, k->name) : "[kernel]");
		fprintf(out,
			", \"cat\": \"kernel\", \"args\": {\"correlation_id\": %" PRIu32
			", \"device\": %" PRIu32 ", \"stream\": %" PRIu32,
			k->correlation_id, k->device, k->stream);
		if (k->has_grid)
			fprintf(out, ", \"grid\": %" PRIu32, k->grid);
		if (k->has_block)
			fprintf(out, ", \"block\": %" PRIu32, k->block);
		fputs("}}", out);
		break;
	}
	case EV_COPY: {
		const Profd__TraceCopy *c = t->copies[e->idx];
		const char *kind = trace_copy_kind_name(c->kind);
		char name[32];

		if (c->kind == PROFD__GPU_COPY_KIND__GPU_COPY_MEMSET)
			snprintf(name, sizeof(name), "memset");
		else
			snprintf(name, sizeof(name), "memcpy %s", kind);
		begin(w, "X", e->pid, e->tid, e->ts);
		put_us(out, "dur", e->dur);
		put_key_string(out, "name", name);
		fprintf(out,
			", \"cat\": \"copy\", \"args\": {\"kind\": \"%s\", \"bytes\": %" PRIu64
			", \"correlation_id\": %" PRIu32 "}}",
			kind, c->bytes, c->correlation_id);
		break;
	}
	case EV_SAMPLE: {
		const Profd__TraceSample *s = t->samples[e->idx];
		const Profd__Stack *st = t->stacks[s->stack];
		const char *leaf = st->n_frames ? frame_name(w, st->frames[0]) : "[no stack]";

		if (!leaf)
			return -ENOMEM;
		begin(w, "i", e->pid, e->tid, e->ts);
		fputs(", \"s\": \"t\"", out);
		put_key_string(out, "name", leaf);
		fputs(", \"cat\": \"cpu_sample\", \"args\": {", out);
		err = put_stack(w, s->stack);
		fputs("}}", out);
		break;
	}
	case EV_FLOW_START:
	case EV_FLOW_END:
		begin(w, e->kind == EV_FLOW_START ? "s" : "f", e->pid, e->tid, e->ts);
		fprintf(out, ", \"id\": %" PRIu64 ", \"name\": \"launch\", \"cat\": \"launch\"%s}",
			e->id, e->kind == EV_FLOW_END ? ", \"bp\": \"e\"" : "");
		break;
	}
	return err;
}

int format_trace(const Profd__Trace *t, FILE *out)
{
	struct tw w = {.t = t, .out = out, .first = true};
	int err;

	trace_as_profile(t, &w.view);
	w.name_len = 256;
	w.name = malloc(w.name_len);
	if (!w.name)
		return -ENOMEM;
	err = collect_gpus(&w);
	if (!err)
		err = collect_events(&w);
	if (err)
		goto out;
	if (w.n_evs) /* qsort(NULL, 0) is undefined */
		qsort(w.evs, w.n_evs, sizeof(*w.evs), cmp_ev);
	fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", out);
	err = write_metadata(&w);
	for (size_t i = 0; i < w.n_evs && !err; i++)
		err = write_event(&w, &w.evs[i]);
	if (err)
		goto out;
	fputs("\n]", out);
	/* Trace viewers show otherData as the trace's metadata. */
	if (t->has_samples_lost)
		fprintf(out, ", \"otherData\": {\"samples_lost\": %" PRIu64 "}", t->samples_lost);
	fputs("}\n", out);
	if (fflush(out) || ferror(out))
		err = -EIO;
out:
	free(w.name);
	free(w.gpus);
	free(w.evs);
	return err;
}
