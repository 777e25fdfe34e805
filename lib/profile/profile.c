// SPDX-License-Identifier: BSD-2-Clause
#include "profile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define UNKNOWN_NAME "[unknown]"

static bool str_ok(const Profd__Profile *p, uint32_t idx)
{
	/* Index 0 is "" by contract; tolerate a profile that left the table empty. */
	return idx < p->n_strings || idx == 0;
}

int profile_check(const Profd__Profile *p, char *err, size_t err_len)
{
	for (size_t i = 0; i < p->n_frames; i++) {
		const Profd__Frame *f = p->frames[i];

		if (!str_ok(p, f->name) || (f->has_module && !str_ok(p, f->module)) ||
		    (f->has_file && !str_ok(p, f->file)) ||
		    (f->has_build_id && !str_ok(p, f->build_id))) {
			snprintf(err, err_len, "frame %zu names a string past the %zu in the table",
				 i, p->n_strings);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < p->n_stacks; i++) {
		const Profd__Stack *s = p->stacks[i];

		for (size_t j = 0; j < s->n_frames; j++) {
			if (s->frames[j] >= p->n_frames) {
				snprintf(err, err_len, "stack %zu names frame %" PRIu32 " of %zu",
					 i, s->frames[j], p->n_frames);
				return -EPROTO;
			}
		}
	}
	for (size_t i = 0; i < p->n_samples; i++) {
		if (p->samples[i]->stack >= p->n_stacks) {
			snprintf(err, err_len, "sample %zu names stack %" PRIu32 " of %zu", i,
				 p->samples[i]->stack, p->n_stacks);
			return -EPROTO;
		}
		if (p->samples[i]->process > p->n_processes) {
			snprintf(err, err_len, "sample %zu names process %" PRIu32 " of %zu", i,
				 p->samples[i]->process, p->n_processes);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < p->n_processes; i++) {
		if (!str_ok(p, p->processes[i]->name)) {
			snprintf(err, err_len, "process %zu names a string past the table", i);
			return -EPROTO;
		}
	}
	for (size_t i = 0; i < p->n_threads; i++) {
		if (!str_ok(p, p->threads[i]->name)) {
			snprintf(err, err_len, "thread %zu names a string past the table", i);
			return -EPROTO;
		}
		if (p->threads[i]->process > p->n_processes) {
			snprintf(err, err_len, "thread %zu names process %" PRIu32 " of %zu", i,
				 p->threads[i]->process, p->n_processes);
			return -EPROTO;
		}
	}
	return 0;
}

const char *profile_string(const Profd__Profile *p, uint32_t idx)
{
	if (idx >= p->n_strings || !p->strings[idx])
		return "";
	return p->strings[idx];
}

const char *profile_stack_state(const Profd__Profile *p, const Profd__Stack *st)
{
	const Profd__Frame *root = st->n_frames ? p->frames[st->frames[st->n_frames - 1]] : NULL;

	return root && root->kind == PROFD__FRAME_KIND__FRAME_STATE ? profile_string(p, root->name)
								    : NULL;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* snprintf that appends at *pos and keeps counting past the end of buf. */
static void __attribute__((format(printf, 4, 5)))
append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos += (size_t)n;
}

static size_t frame_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len,
			 bool function)
{
	const char *name = profile_string(p, f->name);
	size_t pos = 0;

	if (len)
		buf[0] = '\0';
	if (!*name)
		name = UNKNOWN_NAME;
	if (f->kind == PROFD__FRAME_KIND__FRAME_NVTX) {
		/* A range name is the user's text, not a symbol: no module or address to add. */
		append(buf, len, &pos, "[nvtx] %s", name);
		return pos;
	}
	append(buf, len, &pos, "%s", name);
	if (f->kind == PROFD__FRAME_KIND__FRAME_PYTHON) {
		const char *file = f->has_file ? profile_string(p, f->file) : "";

		if (*file && f->has_line && f->line && !function)
			append(buf, len, &pos, " (%s:%" PRIu32 ")", base_name(file), f->line);
		else if (*file)
			append(buf, len, &pos, " (%s)", base_name(file));
	} else if (strcmp(name, UNKNOWN_NAME) == 0) {
		const char *module = f->has_module ? profile_string(p, f->module) : "";

		/* Without a symbol, where it was is the only thing worth showing. */
		if (*module && (function || !f->has_address))
			append(buf, len, &pos, " (%s)", base_name(module));
		else if (*module)
			append(buf, len, &pos, " (%s+0x%" PRIx64 ")", base_name(module),
			       f->address);
		else if (f->has_address && f->address)
			append(buf, len, &pos, " (0x%" PRIx64 ")", f->address);
	}
	if (f->kind == PROFD__FRAME_KIND__FRAME_KERNEL)
		append(buf, len, &pos, "_[k]");
	else if (f->kind == PROFD__FRAME_KIND__FRAME_GPU)
		append(buf, len, &pos, "_[g]");
	return pos;
}

size_t profile_frame_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len)
{
	return frame_name(p, f, buf, len, false);
}

size_t profile_function_name(const Profd__Profile *p, const Profd__Frame *f, char *buf, size_t len)
{
	return frame_name(p, f, buf, len, true);
}

const char *profile_process_name(const Profd__Profile *p, uint32_t pid)
{
	for (size_t i = 0; i < p->n_processes; i++)
		if (p->processes[i]->pid == pid)
			return profile_string(p, p->processes[i]->name);
	return NULL;
}

const Profd__Process *profile_sample_process(const Profd__Profile *p, const Profd__Sample *s)
{
	if (s->process && s->process <= p->n_processes)
		return p->processes[s->process - 1];
	for (size_t i = 0; i < p->n_processes; i++)
		if (p->processes[i]->pid == s->pid)
			return p->processes[i];
	return NULL;
}

uint64_t profile_thread_key(uint32_t process, uint32_t pid, uint32_t tid)
{
	return process ? 1ull << 63 | (uint64_t)process << 32 | tid : (uint64_t)pid << 32 | tid;
}

const char *profile_sample_thread_name(const Profd__Profile *p, const Profd__Sample *s)
{
	uint64_t key = profile_thread_key(s->process, s->pid, s->tid);

	for (size_t i = 0; i < p->n_threads; i++) {
		const Profd__Thread *t = p->threads[i];

		if (t->tid == s->tid && profile_thread_key(t->process, t->pid, t->tid) == key)
			return profile_string(p, t->name);
	}
	return NULL;
}

const char *profile_thread_name(const Profd__Profile *p, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < p->n_threads; i++)
		if (p->threads[i]->tid == tid && p->threads[i]->pid == pid)
			return profile_string(p, p->threads[i]->name);
	return NULL;
}
