// SPDX-License-Identifier: BSD-2-Clause
/*
 * The profile as JSON for scripts: the Profile message with every string index resolved, one
 * array element per line so the output diffs and greps well. The layout is documented in
 * docs/profctl.md; scripts depend on it, so change it only by adding keys.
 */
#include "format.h"
#include "profile.h"
#include "value.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

/* Bumped when a key changes meaning or goes away; adding keys keeps the version. */
#define JSON_FORMAT_VERSION 1

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0 when s does not start one. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* The second byte's range rules out overlong forms, surrogates and values past U+10FFFF. */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

int json_write_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putc('"', out);
	while (*p) {
		size_t n = utf8_len(p);

		if (n == 0) {
			fputs("\xef\xbf\xbd", out); /* U+FFFD for each byte we cannot decode */
			p++;
			continue;
		}
		if (n > 1) {
			fwrite(p, 1, n, out);
			p += n;
			continue;
		}
		switch (*p) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		case '\b':
			fputs("\\b", out);
			break;
		case '\f':
			fputs("\\f", out);
			break;
		default:
			if (*p < 0x20)
				fprintf(out, "\\u%04x", *p);
			else
				putc(*p, out);
		}
		p++;
	}
	putc('"', out);
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
	case PROFD__FRAME_KIND__FRAME_GPU:
		return "gpu";
	case PROFD__FRAME_KIND__FRAME_NVTX:
		return "nvtx";
	case PROFD__FRAME_KIND__FRAME_STATE:
		return "state";
	default:
		return "unknown";
	}
}

/* "key": "string" or "key": null, with the separator that precedes it. */
static void opt_string(FILE *out, const char *sep, const char *key, const Profd__Profile *p,
		       bool has, uint32_t idx)
{
	fprintf(out, "%s\"%s\": ", sep, key);
	if (has)
		json_write_string(out, profile_string(p, idx));
	else
		fputs("null", out);
}

/* Close an array whose elements each began on their own line. */
static void end_array(FILE *out, size_t n, bool last)
{
	fprintf(out, "%s]%s\n", n ? "\n  " : "", last ? "" : ",");
}

static void write_frames(const Profd__Profile *p, FILE *out)
{
	fputs("  \"frames\": [", out);
	for (size_t i = 0; i < p->n_frames; i++) {
		const Profd__Frame *f = p->frames[i];

		fprintf(out, "%s\n    {\"kind\": \"%s\", ", i ? "," : "", kind_name(f->kind));
		opt_string(out, "", "name", p, true, f->name);
		opt_string(out, ", ", "module", p, f->has_module, f->module);
		/* A string: readers that parse numbers as doubles mangle kernel addresses. */
		if (f->has_address)
			fprintf(out, ", \"address\": \"0x%" PRIx64 "\"", f->address);
		else
			fputs(", \"address\": null", out);
		opt_string(out, ", ", "file", p, f->has_file, f->file);
		if (f->has_line)
			fprintf(out, ", \"line\": %" PRIu32, f->line);
		else
			fputs(", \"line\": null", out);
		opt_string(out, ", ", "build_id", p, f->has_build_id, f->build_id);
		putc('}', out);
	}
	end_array(out, p->n_frames, false);
}

static void write_samples(const Profd__Profile *p, FILE *out)
{
	fputs("  \"stacks\": [", out);
	for (size_t i = 0; i < p->n_stacks; i++) {
		const Profd__Stack *s = p->stacks[i];

		fprintf(out, "%s\n    [", i ? "," : "");
		for (size_t j = 0; j < s->n_frames; j++)
			fprintf(out, "%s%" PRIu32, j ? ", " : "", s->frames[j]);
		putc(']', out);
	}
	end_array(out, p->n_stacks, false);

	fputs("  \"samples\": [", out);
	for (size_t i = 0; i < p->n_samples; i++) {
		const Profd__Sample *s = p->samples[i];

		fprintf(out,
			"%s\n    {\"stack\": %" PRIu32 ", \"pid\": %" PRIu32 ", \"tid\": %" PRIu32
			", ",
			i ? "," : "", s->stack, s->pid, s->tid);
		/* Which process of the list: a reused pid has several. */
		if (s->process)
			fprintf(out, "\"process\": %" PRIu32 ", ", s->process - 1);
		fputs("\"values\": [", out);
		for (size_t j = 0; j < s->n_values; j++)
			fprintf(out, "%s%" PRIu64, j ? ", " : "", s->values[j]);
		fputs("]}", out);
	}
	end_array(out, p->n_samples, true);
}

int format_json(const Profd__Profile *p, const struct render_opts *o, FILE *out)
{
	fprintf(out,
		"{\n  \"format_version\": %d,\n  \"start_ns\": %" PRIu64 ",\n  \"end_ns\": %" PRIu64
		",\n  \"realtime_offset_ns\": %" PRId64 ",\n  \"frequency_hz\": %" PRIu32
		",\n  \"period_ns\": %" PRIu64 ",\n",
		JSON_FORMAT_VERSION, p->start_ns, p->end_ns, p->realtime_offset_ns, p->frequency_hz,
		p->period_ns);
	if (p->has_samples_lost)
		fprintf(out, "  \"samples_lost\": %" PRIu64 ",\n", p->samples_lost);
	/* Which column the user chose (--value), so scripts need not repeat the choice. */
	fputs("  \"value\": ", out);
	json_write_string(out, profile_value_type(p, o ? o->value_index : 0));
	fputs(",\n", out);

	fputs("  \"value_types\": [", out);
	for (size_t i = 0; i < p->n_value_types; i++) {
		fprintf(out, "%s\n    {", i ? "," : "");
		opt_string(out, "", "type", p, true, p->value_types[i]->type);
		opt_string(out, ", ", "unit", p, true, p->value_types[i]->unit);
		putc('}', out);
	}
	end_array(out, p->n_value_types, false);

	fputs("  \"processes\": [", out);
	for (size_t i = 0; i < p->n_processes; i++) {
		const Profd__Process *pr = p->processes[i];

		fprintf(out, "%s\n    {\"pid\": %" PRIu32 ", ", i ? "," : "", pr->pid);
		opt_string(out, "", "name", p, true, pr->name);
		if (pr->has_uid)
			fprintf(out, ", \"uid\": %" PRIu32, pr->uid);
		else
			fputs(", \"uid\": null", out);
		fprintf(out, ", \"exited\": %s", pr->has_exited && pr->exited ? "true" : "false");
		if (pr->has_start_time)
			fprintf(out, ", \"start_time\": %" PRIu64, pr->start_time);
		putc('}', out);
	}
	end_array(out, p->n_processes, false);

	fputs("  \"threads\": [", out);
	for (size_t i = 0; i < p->n_threads; i++) {
		const Profd__Thread *t = p->threads[i];

		fprintf(out, "%s\n    {\"tid\": %" PRIu32 ", \"pid\": %" PRIu32 ", ", i ? "," : "",
			t->tid, t->pid);
		opt_string(out, "", "name", p, true, t->name);
		if (t->process)
			fprintf(out, ", \"process\": %" PRIu32, t->process - 1);
		putc('}', out);
	}
	end_array(out, p->n_threads, false);

	write_frames(p, out);
	write_samples(p, out);
	fputs("}\n", out);
	if (fflush(out) || ferror(out))
		return -EIO;
	return 0;
}
