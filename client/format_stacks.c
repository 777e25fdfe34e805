// SPDX-License-Identifier: BSD-2-Clause
/*
 * profctl dump stacks: a live stack dump (one sample per thread) as text, in the layout of
 * py-spy dump, or as JSON for scripts.
 */
#include "format.h"
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* The word for a thread's state, as ps and top would say it. */
static const char *state_name(const Profd__Thread *t)
{
	if (!t || !t->has_state)
		return "unknown";
	switch (t->state) {
	case PROFD__THREAD_STATE__THREAD_STATE_RUNNING:
		return "running";
	case PROFD__THREAD_STATE__THREAD_STATE_SLEEPING:
		return "sleeping";
	case PROFD__THREAD_STATE__THREAD_STATE_DISK_SLEEP:
		return "disk-sleep";
	case PROFD__THREAD_STATE__THREAD_STATE_STOPPED:
		return "stopped";
	case PROFD__THREAD_STATE__THREAD_STATE_TRACED:
		return "traced";
	case PROFD__THREAD_STATE__THREAD_STATE_DEAD:
		return "dead";
	case PROFD__THREAD_STATE__THREAD_STATE_ZOMBIE:
		return "zombie";
	case PROFD__THREAD_STATE__THREAD_STATE_PARKED:
		return "parked";
	case PROFD__THREAD_STATE__THREAD_STATE_IDLE:
		return "idle";
	default:
		return "unknown";
	}
}

/* The Profile.threads entry of a sample, or NULL. */
static const Profd__Thread *thread_of(const Profd__Profile *p, const Profd__Sample *s)
{
	for (size_t i = 0; i < p->n_threads; i++)
		if (p->threads[i]->pid == s->pid && p->threads[i]->tid == s->tid)
			return p->threads[i];
	return NULL;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Names may come from the process itself (thread names, paths): no control characters. */
static void put_clean(FILE *out, const char *s)
{
	for (; *s; s++)
		putc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, out);
}

/* One frame, newest first: Python "QUALNAME (FILE:LINE)", native "func (module)", kernel
 * "func [k]". */
static void put_frame(const Profd__Profile *p, const Profd__Frame *f, FILE *out)
{
	const char *name = profile_string(p, f->name);
	const char *module = f->has_module ? profile_string(p, f->module) : "";

	fputs("    ", out);
	put_clean(out, name);
	switch (f->kind) {
	case PROFD__FRAME_KIND__FRAME_PYTHON:
		fputs(" (", out);
		put_clean(out, f->has_file ? profile_string(p, f->file) : "?");
		if (f->has_line)
			fprintf(out, ":%" PRIu32, f->line);
		putc(')', out);
		break;
	case PROFD__FRAME_KIND__FRAME_KERNEL:
		fputs(" [k]", out);
		break;
	case PROFD__FRAME_KIND__FRAME_NATIVE:
		if (*module) {
			fputs(" (", out);
			put_clean(out, base_name(module));
			if (!strcmp(name, "[unknown]") && f->has_address)
				fprintf(out, "+0x%" PRIx64, f->address);
			putc(')', out);
		}
		break;
	default:
		break;
	}
	putc('\n', out);
}

/* What a Python thread's dump says of the GIL: ", holds the GIL", ... or "" when unknown. */
static const char *gil_text(const Profd__Thread *t)
{
	if (!t || !t->has_gil)
		return "";
	switch (t->gil) {
	case PROFD__GIL_STATE__GIL_HELD:
		return ", holds the GIL";
	case PROFD__GIL_STATE__GIL_NOT_HELD:
		return ", does not hold the GIL";
	case PROFD__GIL_STATE__GIL_NONE:
		return ", no GIL (free-threaded build)";
	default:
		return "";
	}
}

/* The JSON "gil" value, NULL when unknown. */
static const char *gil_json(const Profd__Thread *t)
{
	if (!t || !t->has_gil)
		return NULL;
	switch (t->gil) {
	case PROFD__GIL_STATE__GIL_HELD:
		return "held";
	case PROFD__GIL_STATE__GIL_NOT_HELD:
		return "not held";
	case PROFD__GIL_STATE__GIL_NONE:
		return "none";
	default:
		return NULL;
	}
}

int format_stacks_text(const Profd__Profile *p, FILE *out)
{
	for (size_t i = 0; i < p->n_processes; i++) {
		const Profd__Process *pr = p->processes[i];

		fprintf(out, "Process %" PRIu32 ": ", pr->pid);
		put_clean(out, profile_string(p, pr->name));
		putc('\n', out);
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];
		const Profd__Thread *t = thread_of(p, s);
		const Profd__Stack *st = p->stacks[s->stack];

		fprintf(out, "\nThread %" PRIu32 " (", s->tid);
		put_clean(out, t ? profile_string(p, t->name) : "");
		fprintf(out, ") %s%s%s\n", state_name(t), t && t->on_cpu ? ", on a CPU" : "",
			gil_text(t));
		for (size_t j = 0; j < st->n_frames; j++)
			put_frame(p, p->frames[st->frames[j]], out);
	}
	if (p->has_threads_limit)
		fprintf(out, "\n(the process has more threads: the dump stops at %" PRIu32 ")\n",
			p->threads_limit);
	fflush(out);
	return ferror(out) ? -EIO : 0;
}

static const char *kind_name(Profd__FrameKind k)
{
	switch (k) {
	case PROFD__FRAME_KIND__FRAME_KERNEL:
		return "kernel";
	case PROFD__FRAME_KIND__FRAME_NATIVE:
		return "native";
	case PROFD__FRAME_KIND__FRAME_PYTHON:
		return "python";
	default:
		return "other";
	}
}

static void json_frame(const Profd__Profile *p, const Profd__Frame *f, bool last, FILE *out)
{
	fprintf(out, "        {\"kind\": \"%s\", \"name\": ", kind_name(f->kind));
	json_write_string(out, profile_string(p, f->name));
	if (f->has_module) {
		fputs(", \"module\": ", out);
		json_write_string(out, profile_string(p, f->module));
	}
	if (f->has_address)
		fprintf(out, ", \"address\": %" PRIu64, f->address);
	if (f->has_file) {
		fputs(", \"file\": ", out);
		json_write_string(out, profile_string(p, f->file));
	}
	if (f->has_line)
		fprintf(out, ", \"line\": %" PRIu32, f->line);
	fprintf(out, "}%s\n", last ? "" : ",");
}

int format_stacks_json(const Profd__Profile *p, FILE *out)
{
	const Profd__Process *pr = p->n_processes ? p->processes[0] : NULL;

	fputs("{\n  \"version\": 1,\n", out);
	if (pr) {
		fprintf(out, "  \"pid\": %" PRIu32 ",\n  \"process\": ", pr->pid);
		json_write_string(out, profile_string(p, pr->name));
		fputs(",\n", out);
	}
	fprintf(out, "  \"time_ns\": %" PRIu64 ",\n", p->end_ns);
	if (p->has_threads_limit)
		fprintf(out, "  \"threads_limit\": %" PRIu32 ",\n", p->threads_limit);
	fputs("  \"threads\": [\n", out);
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];
		const Profd__Thread *t = thread_of(p, s);
		const Profd__Stack *st = p->stacks[s->stack];

		fprintf(out, "    {\"tid\": %" PRIu32 ", \"name\": ", s->tid);
		json_write_string(out, t ? profile_string(p, t->name) : "");
		fprintf(out, ", \"state\": \"%s\", \"on_cpu\": %s", state_name(t),
			t && t->on_cpu ? "true" : "false");
		if (gil_json(t))
			fprintf(out, ", \"gil\": \"%s\"", gil_json(t));
		fputs(", \"frames\": [\n", out);
		for (size_t j = 0; j < st->n_frames; j++)
			json_frame(p, p->frames[st->frames[j]], j + 1 == st->n_frames, out);
		fprintf(out, "    ]}%s\n", i + 1 == p->n_samples ? "" : ",");
	}
	fputs("  ]\n}\n", out);
	fflush(out);
	return ferror(out) ? -EIO : 0;
}
