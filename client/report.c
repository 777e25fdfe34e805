// SPDX-License-Identifier: BSD-2-Clause
#include "report.h"
#include "format.h"
#include "flame.h"
#include "value.h"
#include "grow.h"
#include "satmath.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SITE_UNKNOWN "[launch site unknown]"
#define IDLE_DEPTH 8 /* frames of an idle stack shown, leaf first */

static int cmp_span(const void *a, const void *b)
{
	const struct report_span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

uint64_t report_union_ns(struct report_span *s, size_t n, uint64_t lo, uint64_t hi)
{
	uint64_t busy = 0, cur_s = 0, cur_e = 0;
	bool open = false;

	if (n) /* qsort(NULL, 0) is undefined */
		qsort(s, n, sizeof(*s), cmp_span);
	for (size_t i = 0; i < n; i++) {
		uint64_t a = s[i].start < lo ? lo : s[i].start;
		uint64_t b = s[i].end > hi ? hi : s[i].end;

		if (a >= b)
			continue;
		/* Sorted by start, and clipping keeps that order: merge while they touch. */
		if (open && a <= cur_e) {
			if (b > cur_e)
				cur_e = b;
			continue;
		}
		if (open)
			busy += cur_e - cur_s;
		cur_s = a;
		cur_e = b;
		open = true;
	}
	if (open)
		busy += cur_e - cur_s;
	return busy;
}

/* Rows under construction: one per contribution, merged by name at the end. */
struct rows {
	struct report_row *v;
	size_t n, cap;
};

static int row_add(struct rows *r, const char *name, uint64_t value, uint64_t count)
{
	int err = GROW(r->v, r->cap, r->n + 1);

	if (err)
		return err;
	r->v[r->n].name = strdup(name);
	if (!r->v[r->n].name)
		return -ENOMEM;
	r->v[r->n].value = value;
	r->v[r->n].count = count;
	r->n++;
	return 0;
}

static int cmp_row_name(const void *a, const void *b)
{
	return strcmp(((const struct report_row *)a)->name, ((const struct report_row *)b)->name);
}

static int cmp_row_value(const void *a, const void *b)
{
	const struct report_row *x = a, *y = b;

	if (x->value != y->value)
		return x->value > y->value ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Merge equal names, then order by value (ties: count, then name) so output is stable. */
static void rows_finish(struct rows *r, struct report_row **out, size_t *n_out)
{
	size_t n = 0;

	if (r->n) /* qsort(NULL, 0) is undefined */
		qsort(r->v, r->n, sizeof(*r->v), cmp_row_name);
	for (size_t i = 0; i < r->n; i++) {
		if (n && strcmp(r->v[n - 1].name, r->v[i].name) == 0) {
			r->v[n - 1].value = sat_add(r->v[n - 1].value, r->v[i].value);
			r->v[n - 1].count = sat_add(r->v[n - 1].count, r->v[i].count);
			free(r->v[i].name);
			continue;
		}
		r->v[n++] = r->v[i];
	}
	if (n) /* qsort(NULL, 0) is undefined */
		qsort(r->v, n, sizeof(*r->v), cmp_row_value);
	*out = r->v;
	*n_out = n;
	*r = (struct rows){0};
}

static void rows_free(struct rows *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].name);
	free(r->v);
	*r = (struct rows){0};
}

static bool skip_frame(Profd__FrameKind k)
{
	return k == PROFD__FRAME_KIND__FRAME_GPU || k == PROFD__FRAME_KIND__FRAME_NVTX ||
	       k == PROFD__FRAME_KIND__FRAME_KERNEL;
}

/*
 * Whether f lies in the CUDA runtime, the driver, CUPTI or profd's own library: a launching
 * stack starts inside them (the probe fires in a CUPTI callback), and the launch site is the
 * first frame outside.
 */
static bool in_cuda_stack(const Profd__Profile *p, const Profd__Frame *f)
{
	static const char *const prefixes[] = {"libcuda", "libcupti", "libprofd_cupti"};
	const char *mod = f->has_module ? profile_string(p, f->module) : "";
	const char *base = strrchr(mod, '/');

	base = base ? base + 1 : mod;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/*
 * The launch site of a launching stack: its innermost Python frame, else its innermost native
 * frame outside the CUDA libraries (else the innermost native frame at all).
 */
static void site_name(const Profd__Profile *p, const Profd__Stack *st, char *buf, size_t len)
{
	const Profd__Frame *native = NULL, *any_native = NULL;

	for (size_t j = 0; j < st->n_frames; j++) {
		const Profd__Frame *f = p->frames[st->frames[j]];

		if (f->kind == PROFD__FRAME_KIND__FRAME_PYTHON) {
			profile_frame_name(p, f, buf, len);
			return;
		}
		if (skip_frame(f->kind))
			continue;
		if (!any_native)
			any_native = f;
		if (!native && !in_cuda_stack(p, f))
			native = f;
	}
	if (!native)
		native = any_native;
	if (native)
		profile_frame_name(p, native, buf, len);
	else
		snprintf(buf, len, "%s", SITE_UNKNOWN);
}

/*
 * "leaf <- caller <- ...": the first IDLE_DEPTH frames of st that are not NVTX labels or states,
 * and of the kernel frames only the innermost (a wait's futex_wait_[k]: the system call's path
 * to it would take the room the caller's lines need).
 */
static void idle_name(const Profd__Profile *p, const Profd__Stack *st, char *buf, size_t len)
{
	size_t pos = 0, shown = 0;
	bool kernel_shown = false;
	char name[512];

	buf[0] = '\0';
	for (size_t j = 0; j < st->n_frames && pos < len; j++) {
		const Profd__Frame *f = p->frames[st->frames[j]];

		if (f->kind == PROFD__FRAME_KIND__FRAME_NVTX ||
		    f->kind == PROFD__FRAME_KIND__FRAME_STATE)
			continue;
		if (f->kind == PROFD__FRAME_KIND__FRAME_KERNEL) {
			if (kernel_shown)
				continue;
			kernel_shown = true;
		}
		if (shown == IDLE_DEPTH) {
			snprintf(buf + pos, len - pos, " <- ...");
			return;
		}
		profile_frame_name(p, f, name, sizeof(name));
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", shown ? " <- " : "", name);
		shown++;
	}
	if (!shown)
		snprintf(buf, len, "[no stack]");
}

static int from_profile(struct report *r, const Profd__Profile *p)
{
	int gi = profile_value_index(p, "gpu_time");
	int ki = profile_value_index(p, "gpu_kernels");
	int ii = profile_value_index(p, "gpu_idle_samples");
	int ci = profile_value_index(p, "samples");
	int oi = profile_value_index(p, "off_cpu");
	int wi = profile_value_index(p, "gpu_idle_off_cpu");
	uint64_t period = p->has_period_ns ? p->period_ns : 0;
	struct rows kernels = {0}, sites = {0}, idle = {0}, states = {0}, waits = {0};
	struct rows idle_states = {0}, idle_wall = {0};
	char buf[2048], named[2200];
	int err = 0;

	r->has_gpu_time = gi >= 0;
	r->has_idle = ii >= 0;
	r->has_off_cpu = oi >= 0 && profile_value_total(p, (uint32_t)oi) > 0;
	r->has_idle_wall = r->has_off_cpu && r->has_idle && wi >= 0;
	for (size_t i = 0; i < p->n_samples && !err; i++) {
		const Profd__Sample *s = p->samples[i];
		const Profd__Stack *st = p->stacks[s->stack];
		uint64_t gpu = gi >= 0 && (size_t)gi < s->n_values ? s->values[gi] : 0;
		uint64_t kn = ki >= 0 && (size_t)ki < s->n_values ? s->values[ki] : 0;
		uint64_t id = ii >= 0 && (size_t)ii < s->n_values ? s->values[ii] : 0;
		uint64_t cpu = ci >= 0 && (size_t)ci < s->n_values ? s->values[ci] : 0;

		r->cpu_samples = sat_add(r->cpu_samples, cpu);
		if (gpu || kn) {
			const Profd__Frame *leaf = st->n_frames ? p->frames[st->frames[0]] : NULL;
			const char *kname = "[kernel unknown]";

			r->gpu_ns_total = sat_add(r->gpu_ns_total, gpu);
			if (leaf && leaf->kind == PROFD__FRAME_KIND__FRAME_GPU &&
			    *profile_string(p, leaf->name))
				kname = profile_string(p, leaf->name);
			err = row_add(&kernels, kname, gpu, kn);
			if (err)
				break;
			site_name(p, st, buf, sizeof(buf));
			err = row_add(&sites, buf, gpu, kn);
		}
		if (id && !err) {
			r->idle_samples = sat_add(r->idle_samples, id);
			idle_name(p, st, buf, sizeof(buf));
			err = row_add(&idle, buf, id, 0);
		}
		if (r->has_off_cpu && !err) {
			uint64_t off = (size_t)oi < s->n_values ? s->values[oi] : 0;
			uint64_t wall = sat_add(sat_mul(cpu, period), off);
			const char *state = profile_stack_state(p, st);

			if (!state)
				state = "[unknown state]";
			r->wall_ns = sat_add(r->wall_ns, wall);
			r->off_cpu_ns = sat_add(r->off_cpu_ns, off);
			if (wall)
				err = row_add(&states, state, wall, 0);
			if (off && !err) {
				idle_name(p, st, buf, sizeof(buf));
				err = row_add(&waits, buf, off, 0);
			}
			if (r->has_idle_wall && !err) {
				uint64_t ioff = (size_t)wi < s->n_values ? s->values[wi] : 0;
				uint64_t iw = sat_add(sat_mul(id, period), ioff);

				if (iw) {
					r->idle_wall_ns = sat_add(r->idle_wall_ns, iw);
					err = row_add(&idle_states, state, iw, 0);
				}
				if (iw && !err) {
					idle_name(p, st, buf, sizeof(buf));
					snprintf(named, sizeof(named), "%s %s", state, buf);
					err = row_add(&idle_wall, named, iw, 0);
				}
			}
		}
	}
	if (err) {
		rows_free(&idle_states);
		rows_free(&idle_wall);
		rows_free(&kernels);
		rows_free(&sites);
		rows_free(&idle);
		rows_free(&states);
		rows_free(&waits);
		return err;
	}
	rows_finish(&states, &r->states, &r->n_states);
	rows_finish(&waits, &r->waits, &r->n_waits);
	rows_finish(&kernels, &r->kernels, &r->n_kernels);
	rows_finish(&sites, &r->sites, &r->n_sites);
	rows_finish(&idle, &r->idle, &r->n_idle);
	rows_finish(&idle_states, &r->idle_states, &r->n_idle_states);
	rows_finish(&idle_wall, &r->idle_wall, &r->n_idle_wall);
	return 0;
}

static int cmp_device(const void *a, const void *b)
{
	const struct report_device *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->device < y->device ? -1 : x->device > y->device;
}

static int from_trace(struct report *r, const Profd__Trace *t)
{
	struct report_span *spans = calloc(t->n_kernels + 1, sizeof(*spans));
	struct report_span *dev_spans = calloc(t->n_kernels + 1, sizeof(*dev_spans));
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t n = 0, cap_devices = r->n_devices;

	if (!spans || !dev_spans) {
		free(spans);
		free(dev_spans);
		return -ENOMEM;
	}
	r->has_trace = true;
	r->realtime_offset_ns = t->realtime_offset_ns;
	/* The window: what the trace says it covers, less what the ring had already dropped. */
	for (size_t i = 0; i < t->n_kernels; i++) {
		lo = t->kernels[i]->start_ns < lo ? t->kernels[i]->start_ns : lo;
		hi = t->kernels[i]->end_ns > hi ? t->kernels[i]->end_ns : hi;
	}
	if (t->has_start_ns && t->start_ns)
		lo = t->start_ns;
	if (t->has_end_ns && t->end_ns)
		hi = t->end_ns;
	if (t->has_oldest_ns && t->oldest_ns > lo) {
		lo = t->oldest_ns;
		r->ring_cut = true;
	}
	if (lo > hi)
		lo = hi;
	r->window_start_ns = lo;
	r->window_end_ns = hi;

	for (size_t i = 0; i < t->n_kernels; i++) {
		const Profd__TraceKernel *k = t->kernels[i];
		struct report_device key = {.pid = k->pid, .device = k->device};
		struct report_device *d = NULL;

		if (k->end_ns <= lo || k->start_ns >= hi)
			continue;
		spans[n++] = (struct report_span){k->start_ns, k->end_ns};
		for (size_t j = 0; j < r->n_devices; j++)
			if (!cmp_device(&r->devices[j], &key))
				d = &r->devices[j];
		if (!d) {
			int err = GROW(r->devices, cap_devices, r->n_devices + 1);

			if (err) {
				free(spans);
				free(dev_spans);
				return err;
			}
			d = &r->devices[r->n_devices++];
			*d = key;
		}
		d->kernels++;
	}
	r->kernels_seen = n;
	r->busy_ns = report_union_ns(spans, n, lo, hi);
	if (r->n_devices) /* qsort(NULL, 0) is undefined */
		qsort(r->devices, r->n_devices, sizeof(*r->devices), cmp_device);
	for (size_t j = 0; j < r->n_devices; j++) {
		size_t m = 0;

		for (size_t i = 0; i < t->n_kernels; i++)
			if (t->kernels[i]->pid == r->devices[j].pid &&
			    t->kernels[i]->device == r->devices[j].device)
				dev_spans[m++] = (struct report_span){t->kernels[i]->start_ns,
								      t->kernels[i]->end_ns};
		r->devices[j].busy_ns = report_union_ns(dev_spans, m, lo, hi);
	}
	free(spans);
	free(dev_spans);
	return 0;
}

int report_build(struct report *r, const Profd__Profile *p, const Profd__Trace *t)
{
	int err = 0;

	*r = (struct report){0};
	if (p)
		err = from_profile(r, p);
	if (!err && t)
		err = from_trace(r, t);
	if (err)
		report_release(r);
	return err;
}

static void free_rows(struct report_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

void report_release(struct report *r)
{
	free_rows(r->kernels, r->n_kernels);
	free_rows(r->sites, r->n_sites);
	free_rows(r->idle, r->n_idle);
	free_rows(r->states, r->n_states);
	free_rows(r->waits, r->n_waits);
	free_rows(r->idle_states, r->n_idle_states);
	free_rows(r->idle_wall, r->n_idle_wall);
	free(r->devices);
	*r = (struct report){0};
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_gpu_rows(FILE *out, const char *what, const struct report_row *v, size_t n,
			   size_t top, uint64_t total)
{
	char t[32];

	fprintf(out, "  %12s %7s %9s  %s\n", "GPU time", "%", "Kernels", what);
	for (size_t i = 0; i < n && i < top; i++)
		fprintf(out, "  %12s %6.1f%% %9" PRIu64 "  %s\n",
			fmt_value(v[i].value, "nanoseconds", t, sizeof(t)), pct(v[i].value, total),
			v[i].count, v[i].name);
	if (n > top)
		fprintf(out, "  (%zu more)\n", n - top);
}

/* A titled list of rows whose values are nanoseconds, as shares of total. */
static void print_time_rows(FILE *out, const char *title, const char *what,
			    const struct report_row *v, size_t n, size_t top, uint64_t total)
{
	char a[48];

	fprintf(out, "\n%s, %s in all:\n", title, fmt_value(total, "nanoseconds", a, sizeof(a)));
	fprintf(out, "  %12s %7s  %s\n", "Time", "%", what);
	for (size_t i = 0; i < n && i < top; i++)
		fprintf(out, "  %12s %6.1f%%  %s\n",
			fmt_value(v[i].value, "nanoseconds", a, sizeof(a)), pct(v[i].value, total),
			v[i].name);
	if (n > top)
		fprintf(out, "  (%zu more)\n", n - top);
}

int report_print(const struct report *r, size_t top, FILE *out)
{
	uint64_t win = r->window_end_ns - r->window_start_ns;
	char a[48], b[48], c[48];

	if (r->has_trace) {
		fprintf(out, "Window: %s of the daemon's trace ring",
			fmt_value(win, "nanoseconds", a, sizeof(a)));
		if (r->realtime_offset_ns && win)
			fprintf(out, ", %s to %s",
				fmt_mono_as_wall(r->window_start_ns, r->realtime_offset_ns, b,
						 sizeof(b)),
				fmt_mono_as_wall(r->window_end_ns, r->realtime_offset_ns, c,
						 sizeof(c)));
		if (r->ring_cut)
			fputs(" (the ring held nothing older)", out);
		fprintf(out, "\nGPU busy: %.1f%% (%s with a kernel running, %" PRIu64 " kernels)\n",
			pct(r->busy_ns, win), fmt_value(r->busy_ns, "nanoseconds", a, sizeof(a)),
			r->kernels_seen);
		for (size_t i = 0; r->n_devices > 1 && i < r->n_devices; i++)
			fprintf(out,
				"  pid %" PRIu32 " GPU %" PRIu32 ": %.1f%% (%s, %" PRIu64
				" kernels)\n",
				r->devices[i].pid, r->devices[i].device,
				pct(r->devices[i].busy_ns, win),
				fmt_value(r->devices[i].busy_ns, "nanoseconds", a, sizeof(a)),
				r->devices[i].kernels);
	} else {
		fputs("GPU busy: unknown (the daemon sent no trace)\n", out);
	}

	fputs("\nTop kernels by GPU time", out);
	if (!r->has_gpu_time) {
		fputs(": none (the profile has no gpu_time column)\n", out);
	} else if (!r->n_kernels) {
		fputs(": none recorded\n", out);
	} else {
		fprintf(out, " (%s in all):\n",
			fmt_value(r->gpu_ns_total, "nanoseconds", a, sizeof(a)));
		print_gpu_rows(out, "Kernel", r->kernels, r->n_kernels, top, r->gpu_ns_total);
	}

	fputs("\nTop launch sites by GPU time", out);
	if (!r->has_gpu_time || !r->n_sites) {
		fputs(": none recorded\n", out);
	} else {
		fputs(":\n", out);
		print_gpu_rows(out, "Launch site", r->sites, r->n_sites, top, r->gpu_ns_total);
	}

	fputs("\nTop CPU stacks while the GPU was idle", out);
	if (!r->has_idle) {
		fputs(": none (the profile has no gpu_idle_samples column)\n", out);
	} else if (!r->n_idle) {
		fputs(": none recorded\n", out);
	} else {
		fprintf(out, " (%" PRIu64 " of %" PRIu64 " CPU samples, %.1f%%):\n",
			r->idle_samples, r->cpu_samples, pct(r->idle_samples, r->cpu_samples));
		fprintf(out, "  %12s %7s  %s\n", "Samples", "%", "Stack (leaf first)");
		for (size_t i = 0; i < r->n_idle && i < top; i++)
			fprintf(out, "  %12" PRIu64 " %6.1f%%  %s\n", r->idle[i].value,
				pct(r->idle[i].value, r->idle_samples), r->idle[i].name);
		if (r->n_idle > top)
			fprintf(out, "  (%zu more)\n", r->n_idle - top);
	}
	if (r->has_off_cpu) {
		print_time_rows(out,
				"Time by thread state (wall-clock: CPU samples x period + off-CPU)",
				"State", r->states, r->n_states, top, r->wall_ns);
		print_time_rows(out, "Top waits (off-CPU time by stack)", "Stack (leaf first)",
				r->waits, r->n_waits, top, r->off_cpu_ns);
	}
	if (r->has_idle_wall) {
		print_time_rows(out,
				"While the GPU was idle: time by thread state (wall-clock, every "
				"thread)",
				"State", r->idle_states, r->n_idle_states, top, r->idle_wall_ns);
		print_time_rows(out, "While the GPU was idle: top stacks (wall-clock)",
				"State and stack (leaf first)", r->idle_wall, r->n_idle_wall, top,
				r->idle_wall_ns);
	}
	return fflush(out) || ferror(out) ? -EIO : 0;
}

static void json_time_rows(FILE *out, const char *key, const struct report_row *v, size_t n,
			   size_t top, uint64_t total)
{
	fprintf(out, "  \"%s\": [", key);
	for (size_t i = 0; i < n && i < top; i++) {
		fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
		json_write_string(out, v[i].name);
		fprintf(out, ", \"ns\": %" PRIu64 ", \"percent\": %.2f}", v[i].value,
			pct(v[i].value, total));
	}
	fprintf(out, "%s],\n", n && top ? "\n  " : "");
}

static void json_rows(FILE *out, const char *key, const struct report_row *v, size_t n, size_t top,
		      uint64_t total, bool gpu)
{
	fprintf(out, "  \"%s\": [", key);
	for (size_t i = 0; i < n && i < top; i++) {
		fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
		json_write_string(out, v[i].name);
		if (gpu)
			fprintf(out, ", \"gpu_time_ns\": %" PRIu64 ", \"kernels\": %" PRIu64,
				v[i].value, v[i].count);
		else
			fprintf(out, ", \"samples\": %" PRIu64, v[i].value);
		fprintf(out, ", \"percent\": %.2f}", pct(v[i].value, total));
	}
	fprintf(out, "%s],\n", n && top ? "\n  " : "");
}

int report_print_json(const struct report *r, size_t top, FILE *out)
{
	uint64_t win = r->window_end_ns - r->window_start_ns;

	fputs("{\n", out);
	if (r->has_trace) {
		fprintf(out,
			"  \"window\": {\"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
			", \"realtime_offset_ns\": %" PRId64 ", \"ring_cut\": %s},\n",
			r->window_start_ns, r->window_end_ns, r->realtime_offset_ns,
			r->ring_cut ? "true" : "false");
		fprintf(out,
			"  \"gpu_busy\": {\"busy_ns\": %" PRIu64
			", \"percent\": %.2f, \"kernels\": "
			"%" PRIu64 ", \"devices\": [",
			r->busy_ns, pct(r->busy_ns, win), r->kernels_seen);
		for (size_t i = 0; i < r->n_devices; i++)
			fprintf(out,
				"%s{\"pid\": %" PRIu32 ", \"device\": %" PRIu32
				", \"busy_ns\": %" PRIu64
				", \"percent\": %.2f, \"kernels\": %" PRIu64 "}",
				i ? ", " : "", r->devices[i].pid, r->devices[i].device,
				r->devices[i].busy_ns, pct(r->devices[i].busy_ns, win),
				r->devices[i].kernels);
		fputs("]},\n", out);
	} else {
		fputs("  \"window\": null,\n  \"gpu_busy\": null,\n", out);
	}
	fprintf(out, "  \"gpu_time_ns\": %" PRIu64 ",\n", r->gpu_ns_total);
	json_rows(out, "kernels", r->kernels, r->n_kernels, top, r->gpu_ns_total, true);
	json_rows(out, "launch_sites", r->sites, r->n_sites, top, r->gpu_ns_total, true);
	fprintf(out, "  \"cpu_samples\": %" PRIu64 ",\n  \"idle_samples\": %" PRIu64 ",\n",
		r->cpu_samples, r->idle_samples);
	json_rows(out, "idle_stacks", r->idle, r->n_idle, top, r->idle_samples, false);
	if (r->has_off_cpu) {
		fprintf(out, "  \"wall_ns\": %" PRIu64 ",\n  \"off_cpu_ns\": %" PRIu64 ",\n",
			r->wall_ns, r->off_cpu_ns);
		json_time_rows(out, "thread_states", r->states, r->n_states, top, r->wall_ns);
		json_time_rows(out, "waits", r->waits, r->n_waits, top, r->off_cpu_ns);
	}
	if (r->has_idle_wall) {
		fprintf(out, "  \"gpu_idle_wall_ns\": %" PRIu64 ",\n", r->idle_wall_ns);
		json_time_rows(out, "gpu_idle_thread_states", r->idle_states, r->n_idle_states, top,
			       r->idle_wall_ns);
		json_time_rows(out, "gpu_idle_stacks_wall", r->idle_wall, r->n_idle_wall, top,
			       r->idle_wall_ns);
	}
	fprintf(out, "  \"has_gpu_time\": %s,\n  \"has_gpu_idle\": %s\n}\n",
		r->has_gpu_time ? "true" : "false", r->has_idle ? "true" : "false");
	return fflush(out) || ferror(out) ? -EIO : 0;
}
