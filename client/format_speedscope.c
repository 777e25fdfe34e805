// SPDX-License-Identifier: BSD-2-Clause
/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json): frames in one
 * shared table, one "sampled" profile per thread whose samples list frame indices root first,
 * each with a weight. Frames are merged by display name, as the folded and SVG output merge
 * them, so every format shows the same call tree.
 */
#include "format.h"
#include "grow.h"
#include "intern.h"
#include "profile.h"
#include "value.h"
#include "satmath.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"
#define NO_FRAME UINT32_MAX

struct thread_ref {
	uint32_t pid, process, tid; /* process: Sample.process (a reused pid has several) */
	size_t sample;		    /* index into Profile.samples */
};

/* One thread's aggregated stacks, in the order first seen. */
struct thread_out {
	uint32_t pid, process, tid;
	const Profd__Sample *first; /* names the thread and its process */
	struct intern *stacks;	    /* key: the stack's shared-frame ids, root first */
	uint64_t *weights;
	size_t cap_weights;
	uint64_t total;
};

struct ss {
	const Profd__Profile *p;
	struct intern *frames; /* key: display name; holds the shared frame table */
	uint32_t *frame_of;    /* Profile frame -> shared frame */
	uint32_t *first;       /* shared frame -> the Profile frame first seen with its name */
	size_t cap_first;
	int64_t nostack; /* shared frame standing for an empty stack, -1 until needed */
	struct thread_out *threads;
	size_t n_threads;
	uint32_t vi;	  /* the value column weighed */
	const char *unit; /* speedscope's name for its unit */
};

static int cmp_thread_ref(const void *a, const void *b)
{
	const struct thread_ref *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->sample < y->sample ? -1 : x->sample > y->sample;
}

/* Record that shared frame id was first seen as Profile frame i (NO_FRAME: none). */
static int note_first(struct ss *s, int64_t id, uint32_t i)
{
	int err = GROW(s->first, s->cap_first, (size_t)id + 1);

	if (err)
		return err;
	s->first[id] = i;
	return 0;
}

/*
 * Give every Profile frame its shared frame: one per display name, exactly as folded and SVG
 * merge frames, so that speedscope draws the same tree.
 */
static int build_frames(struct ss *s)
{
	const Profd__Profile *p = s->p;
	size_t buf_len = 4096, need;
	char *buf = malloc(buf_len);
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_frames; i++) {
		int64_t id;
		int added;

		need = profile_frame_name(p, p->frames[i], buf, buf_len);
		if (need >= buf_len) {
			char *nb = realloc(buf, need + 1);

			if (!nb) {
				err = -ENOMEM;
				goto out;
			}
			buf = nb;
			buf_len = need + 1;
			profile_frame_name(p, p->frames[i], buf, buf_len);
		}
		id = intern__add(s->frames, buf, need, &added);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		if (added) {
			err = note_first(s, id, (uint32_t)i);
			if (err)
				goto out;
		}
		s->frame_of[i] = (uint32_t)id;
	}
out:
	free(buf);
	return err;
}

/* The shared frame for samples without any frame, added on first use. */
static int64_t nostack_frame(struct ss *s)
{
	int added, err;

	if (s->nostack >= 0)
		return s->nostack;
	s->nostack = intern__add(s->frames, "[no stack]", strlen("[no stack]"), &added);
	if (s->nostack < 0)
		return s->nostack;
	if (added) {
		err = note_first(s, s->nostack, NO_FRAME);
		if (err)
			return err;
	}
	return s->nostack;
}

/* Fold sample i into thread t under its root-first shared-frame stack. */
static int add_sample(struct ss *s, struct thread_out *t, size_t i, uint32_t **key, size_t *key_cap)
{
	const Profd__Sample *smp = s->p->samples[i];
	const Profd__Stack *st = s->p->stacks[smp->stack];
	uint64_t v = s->vi < smp->n_values ? smp->values[s->vi] : 0;
	size_t n = st->n_frames ? st->n_frames : 1;
	int64_t id;
	int added;

	if (!v)
		return 0;
	int err = GROW(*key, *key_cap, n);

	if (err)
		return err;
	if (!st->n_frames) {
		id = nostack_frame(s);
		if (id < 0)
			return (int)id;
		(*key)[0] = (uint32_t)id;
	}
	for (size_t j = 0; j < st->n_frames; j++)
		(*key)[j] = s->frame_of[st->frames[st->n_frames - 1 - j]];
	id = intern__add(t->stacks, *key, n * sizeof(**key), &added);
	if (id < 0)
		return (int)id;
	if (added) {
		err = GROW(t->weights, t->cap_weights, (size_t)id + 1);
		if (err)
			return err;
		t->weights[id] = 0;
	}
	sat_inc(&t->weights[id], v);
	sat_inc(&t->total, v);
	return 0;
}

/*
 * Group the samples by (pid, process, tid), in that order, and aggregate each thread's stacks:
 * the processes of a reused pid are apart.
 */
static int build_threads(struct ss *s)
{
	const Profd__Profile *p = s->p;
	struct thread_ref *refs = calloc(p->n_samples ? p->n_samples : 1, sizeof(*refs));
	uint32_t *key = NULL;
	size_t key_cap = 0;
	int err = 0;

	if (!refs)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_samples; i++)
		refs[i] = (struct thread_ref){p->samples[i]->pid, p->samples[i]->process,
					      p->samples[i]->tid, i};
	qsort(refs, p->n_samples, sizeof(*refs), cmp_thread_ref);
	s->threads = calloc(p->n_samples ? p->n_samples : 1, sizeof(*s->threads));
	if (!s->threads) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		struct thread_out *t = s->n_threads ? &s->threads[s->n_threads - 1] : NULL;

		if (!t || t->pid != refs[i].pid || t->process != refs[i].process ||
		    t->tid != refs[i].tid) {
			t = &s->threads[s->n_threads++];
			t->pid = refs[i].pid;
			t->process = refs[i].process;
			t->tid = refs[i].tid;
			t->first = p->samples[refs[i].sample];
			t->stacks = intern__new();
			if (!t->stacks) {
				err = -ENOMEM;
				goto out;
			}
		}
		err = add_sample(s, t, refs[i].sample, &key, &key_cap);
		if (err)
			goto out;
	}
out:
	free(key);
	free(refs);
	return err;
}

/* "NAME (tid N)": the thread's name, else its process's, else "[pid N]". */
static void write_profile_name(const Profd__Profile *p, const struct thread_out *t, FILE *out)
{
	const char *name = profile_sample_thread_name(p, t->first);
	const Profd__Process *pr;
	char buf[256];

	if (!name || !*name) {
		pr = profile_sample_process(p, t->first);
		name = pr ? profile_string(p, pr->name) : NULL;
	}
	if (name && *name)
		snprintf(buf, sizeof(buf), "%.200s (tid %" PRIu32 ")", name, t->tid);
	else
		snprintf(buf, sizeof(buf), "[pid %" PRIu32 "] (tid %" PRIu32 ")", t->pid, t->tid);
	json_write_string(out, buf);
}

/*
 * The shared frames: the display name, and where the frame first seen with it was: its source
 * file (the module's path for native code without one) and line.
 */
static void write_shared(const struct ss *s, FILE *out)
{
	const Profd__Profile *p = s->p;
	char **names = intern__keys(s->frames);
	size_t n = intern__count(s->frames);

	fputs("  \"shared\": {\"frames\": [", out);
	for (size_t i = 0; i < n; i++) {
		const Profd__Frame *f = s->first[i] == NO_FRAME ? NULL : p->frames[s->first[i]];
		const char *file = "";

		fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
		json_write_string(out, names[i]);
		if (f && f->has_file)
			file = profile_string(p, f->file);
		if (f && !*file && f->has_module && f->kind != PROFD__FRAME_KIND__FRAME_PYTHON)
			file = profile_string(p, f->module);
		if (*file) {
			fputs(", \"file\": ", out);
			json_write_string(out, file);
		}
		if (f && f->has_line && f->line)
			fprintf(out, ", \"line\": %" PRIu32, f->line);
		putc('}', out);
	}
	fprintf(out, "%s]},\n", n ? "\n  " : "");
}

static void write_thread(const struct ss *s, const struct thread_out *t, FILE *out)
{
	uint32_t **stacks = (uint32_t **)intern__keys(t->stacks);
	size_t n = intern__count(t->stacks);

	fputs("    {\"type\": \"sampled\", \"name\": ", out);
	write_profile_name(s->p, t, out);
	fprintf(out,
		", \"unit\": \"%s\", \"startValue\": 0, \"endValue\": %" PRIu64
		",\n     \"samples\": [",
		s->unit, t->total);
	for (size_t i = 0; i < n; i++) {
		/* A key is the stack's ids; intern's malloc'd copy is aligned for reading them. */
		const uint32_t *fr = stacks[i];
		size_t depth = intern__key_len(t->stacks, i) / sizeof(*fr);

		fprintf(out, "%s[", i ? ", " : "");
		for (size_t j = 0; j < depth; j++)
			fprintf(out, "%s%" PRIu32, j ? ", " : "", fr[j]);
		putc(']', out);
	}
	fputs("],\n     \"weights\": [", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s%" PRIu64, i ? ", " : "", t->weights[i]);
	fputs("]}", out);
}

int format_speedscope(const Profd__Profile *p, const struct render_opts *o, FILE *out)
{
	struct ss s = {.p = p, .nostack = -1, .vi = o ? o->value_index : 0, .unit = "none"};
	size_t active = 0, shown = 0;
	int err = 0;

	/* speedscope knows a few units; anything else (sample and launch counts) stays "none". */
	if (value_unit_is_ns(profile_value_unit(p, s.vi)))
		s.unit = "nanoseconds";
	else if (value_unit_is_bytes(profile_value_unit(p, s.vi)))
		s.unit = "bytes";
	s.frames = intern__new();
	s.frame_of = calloc(p->n_frames ? p->n_frames : 1, sizeof(*s.frame_of));
	if (!s.frames || !s.frame_of) {
		err = -ENOMEM;
		goto out;
	}
	err = build_frames(&s);
	if (!err)
		err = build_threads(&s);
	if (err)
		goto out;
	/* Open on the busiest thread (ties: the first); threads without weight are left out. */
	for (size_t i = 0; i < s.n_threads; i++)
		if (s.threads[i].total > s.threads[active].total)
			active = i;
	for (size_t i = 0; i < active; i++)
		if (s.threads[i].total)
			shown++;

	fputs("{\n  \"$schema\": \"" SPEEDSCOPE_SCHEMA "\",\n  \"exporter\": \"profd " PROFD_VERSION
	      "\",\n  \"name\": ",
	      out);
	if (p->has_samples_lost && p->samples_lost) {
		char name[256];

		snprintf(name, sizeof(name), "%s (%" PRIu64 " samples lost)",
			 o && o->title ? o->title : "profd profile", p->samples_lost);
		json_write_string(out, name);
	} else {
		json_write_string(out, o && o->title ? o->title : "profd profile");
	}
	fprintf(out, ",\n  \"activeProfileIndex\": %zu,\n", shown);
	write_shared(&s, out);
	fputs("  \"profiles\": [", out);
	shown = 0;
	for (size_t i = 0; i < s.n_threads; i++) {
		if (!s.threads[i].total)
			continue;
		fputs(shown++ ? ",\n" : "\n", out);
		write_thread(&s, &s.threads[i], out);
	}
	fputs(shown ? "\n  ]\n}\n" : "]\n}\n", out);
	if (fflush(out) || ferror(out))
		err = -EIO;
out:
	for (size_t i = 0; i < s.n_threads; i++) {
		intern__free(s.threads[i].stacks);
		free(s.threads[i].weights);
	}
	free(s.threads);
	free(s.first);
	free(s.frame_of);
	intern__free(s.frames);
	return err;
}
