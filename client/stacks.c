// SPDX-License-Identifier: BSD-2-Clause
/*
 * The inputs of profctl diff: folded text, gzip-compressed pprof and daemon profiles, each
 * turned into sorted stacks with counts.
 */
#define _GNU_SOURCE /* memrchr, open_memstream */
#include "stacks.h"
#include "format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "grow.h"
#include "parse.h"
#include "profile.pb-c.h"

struct stacks {
	struct stack_count *v;
	size_t n, cap;
	uint64_t total;
};

static void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static struct stacks *stacks_new(void)
{
	return calloc(1, sizeof(struct stacks));
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].stack);
	free(s->v);
	free(s);
}

const struct stack_count *stacks__items(const struct stacks *s, size_t *n)
{
	*n = s->n;
	return s->v;
}

uint64_t stacks__total(const struct stacks *s)
{
	return s->total;
}

/* Append stack (ownership moves to s, also on failure). Returns 0, -EOVERFLOW or -ENOMEM. */
static int stacks_add(struct stacks *s, char *stack, uint64_t count)
{
	int err = GROW(s->v, s->cap, s->n + 1);

	if (err) {
		free(stack);
		return err;
	}
	s->v[s->n++] = (struct stack_count){.stack = stack, .count = count};
	return 0;
}

static int cmp_stack(const void *a, const void *b)
{
	return strcmp(((const struct stack_count *)a)->stack,
		      ((const struct stack_count *)b)->stack);
}

/* Sort, merge equal stacks and sum the total. Returns 0 or -EOVERFLOW with err filled. */
static int stacks_finish(struct stacks *s, const char *name, char *err, size_t err_len)
{
	size_t out = 0;

	/* When the whole sum fits, every partial sum of the merge below fits too. */
	s->total = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (s->total > UINT64_MAX - s->v[i].count) {
			set_err(err, err_len, "%s: sample counts add up past 2^64", name);
			return -EOVERFLOW;
		}
		s->total += s->v[i].count;
	}
	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), cmp_stack);
	for (size_t i = 0; i < s->n; i++) {
		if (out && strcmp(s->v[out - 1].stack, s->v[i].stack) == 0) {
			s->v[out - 1].count += s->v[i].count;
			free(s->v[i].stack);
		} else {
			s->v[out++] = s->v[i];
		}
	}
	s->n = out;
	return 0;
}

/* True when s (n bytes) ends in a space and digits: a second count, as diff output has. */
static bool ends_in_count(const char *s, size_t n)
{
	size_t d = 0;

	while (d < n && s[n - 1 - d] >= '0' && s[n - 1 - d] <= '9')
		d++;
	return d > 0 && d < n && s[n - 1 - d] == ' ';
}

/*
 * Check one line (len bytes, no newline) and add its stack. diff_hint: say so when the line
 * looks like diff output, which only a file given by a person can be. Returns 0 or -EINVAL,
 * -ENOMEM with err filled.
 */
static int folded_line(struct stacks *s, const char *name, size_t lineno, const char *line,
		       size_t len, bool diff_hint, char *err, size_t err_len)
{
	const char *sp, *frame;
	char num[24], *stack;
	size_t depth = 1;
	uint64_t count;
	int rc;

	if (len && line[len - 1] == '\r')
		len--;
	if (!len)
		return 0;
	if (len > DIFF_MAX_LINE) {
		set_err(err, err_len, "%s:%zu: line longer than %u bytes", name, lineno,
			DIFF_MAX_LINE);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c < 0x20 || c == 0x7f) {
			set_err(err, err_len, "%s:%zu: control character 0x%02x in column %zu",
				name, lineno, c, i + 1);
			return -EINVAL;
		}
	}
	sp = memrchr(line, ' ', len);
	if (!sp || sp + 1 == line + len) {
		set_err(err, err_len, "%s:%zu: no sample count at the end (expected 'STACK COUNT')",
			name, lineno);
		return -EINVAL;
	}
	if ((size_t)(line + len - sp - 1) >= sizeof(num)) {
		set_err(err, err_len, "%s:%zu: sample count '%.20s...' is too long", name, lineno,
			sp + 1);
		return -EINVAL;
	}
	memcpy(num, sp + 1, (size_t)(line + len - sp - 1));
	num[line + len - sp - 1] = '\0';
	rc = parse_u64(num, 0, UINT64_MAX, &count);
	if (rc) {
		set_err(err, err_len, "%s:%zu: sample count '%s' is %s", name, lineno, num,
			rc == -ERANGE ? "too large" : "not a whole number");
		return -EINVAL;
	}
	len = (size_t)(sp - line);
	if (!len) {
		set_err(err, err_len, "%s:%zu: no stack before the count", name, lineno);
		return -EINVAL;
	}
	if (line[len - 1] == ' ') {
		set_err(err, err_len, "%s:%zu: more than one space before the count", name, lineno);
		return -EINVAL;
	}
	if (diff_hint && ends_in_count(line, len)) {
		set_err(err, err_len,
			"%s:%zu: two counts at the end: this is diff output ('STACK A B'), not a "
			"profile",
			name, lineno);
		return -EINVAL;
	}
	frame = line;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && line[i] != ';')
			continue;
		if (line + i == frame) {
			set_err(err, err_len, "%s:%zu: frame %zu is empty", name, lineno, depth);
			return -EINVAL;
		}
		if (i < len && ++depth > DIFF_MAX_DEPTH) {
			set_err(err, err_len, "%s:%zu: more than %d frames", name, lineno,
				DIFF_MAX_DEPTH);
			return -EINVAL;
		}
		frame = line + i + 1;
	}
	stack = strndup(line, len);
	if (!stack || stacks_add(s, stack, count)) {
		set_err(err, err_len, "%s: out of memory", name);
		return -ENOMEM;
	}
	return 0;
}

static struct stacks *parse_folded(const char *name, const char *text, size_t len, bool diff_hint,
				   char *err, size_t err_len)
{
	const char *p = text, *end = text + len;
	struct stacks *s;
	size_t lineno = 0;
	int rc = 0;

	if (memchr(text, '\0', len)) {
		set_err(
		    err, err_len,
		    "%s: binary data: neither folded stacks nor a gzip-compressed pprof profile",
		    name);
		errno = EINVAL;
		return NULL;
	}
	s = stacks_new();
	if (!s) {
		set_err(err, err_len, "%s: out of memory", name);
		return NULL;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		rc = folded_line(s, name, ++lineno, p, n, diff_hint, err, err_len);
		if (rc)
			goto fail;
		p += n + (nl ? 1 : 0);
	}
	rc = stacks_finish(s, name, err, err_len);
	if (rc)
		goto fail;
	return s;
fail:
	stacks__free(s);
	errno = -rc;
	return NULL;
}

struct stacks *stacks__from_folded(const char *name, const char *text, size_t len, char *err,
				   size_t err_len)
{
	return parse_folded(name, text, len, true, err, err_len);
}

struct stacks *stacks__from_profile(const Profd__Profile *p, bool process_root)
{
	struct render_opts ro = {.process_root = process_root};
	struct stacks *s = NULL;
	char *buf = NULL, why[256];
	size_t len = 0;
	FILE *f;
	int err;

	/* The folded renderer already names frames and processes; read back what it writes. */
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	err = format_folded(p, &ro, f);
	if (fclose(f) && !err)
		err = -errno;
	if (!err) {
		s = parse_folded("profile", buf, len, false, why, sizeof(why));
		if (!s)
			err = -errno;
	}
	free(buf);
	if (err)
		errno = -err;
	return s;
}

/*
 * Make room in a byte buffer of *cap bytes, which holds at most max: double it, from 64 KiB.
 * Returns 0, -EFBIG when it already holds max, or -ENOMEM; *buf and *cap stay valid.
 */
static int grow_bytes(void **buf, size_t *cap, size_t max)
{
	size_t ncap;
	void *nb;

	if (grow_cap(*cap, *cap ? *cap + 1 : 1u << 16, 1, max, &ncap))
		return -EFBIG;
	nb = realloc(*buf, ncap);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = ncap;
	return 0;
}

/* Inflate a gzip stream into a malloc'd buffer of at most DIFF_MAX_INPUT bytes. */
static int gunzip(const char *name, const uint8_t *in, size_t len, uint8_t **out, size_t *out_len,
		  char *err, size_t err_len)
{
	z_stream z = {0};
	uint8_t *buf = NULL;
	size_t cap = 0;
	int zr, rc = 0;

	if (len > DIFF_MAX_INPUT) {
		set_err(err, err_len, "%s: larger than %u MiB", name, DIFF_MAX_INPUT >> 20);
		return -EFBIG;
	}
	/* 16 + MAX_WBITS: a gzip header and trailer, not a raw or zlib stream. */
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		set_err(err, err_len, "%s: out of memory", name);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	do {
		if (z.total_out == cap) {
			rc = grow_bytes((void **)&buf, &cap, DIFF_MAX_PPROF);
			if (rc == -EFBIG)
				set_err(err, err_len, "%s: larger than %u MiB once decompressed",
					name, DIFF_MAX_PPROF >> 20);
			else if (rc)
				set_err(err, err_len, "%s: out of memory", name);
			if (rc)
				goto out;
		}
		z.next_out = buf + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr == Z_BUF_ERROR && z.avail_in == 0) {
			set_err(err, err_len, "%s: the gzip stream is cut short", name);
			rc = -EINVAL;
			goto out;
		}
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			set_err(err, err_len, "%s: not valid gzip data (%s)", name,
				z.msg ? z.msg : "corrupt");
			rc = -EINVAL;
			goto out;
		}
	} while (zr != Z_STREAM_END);
	if (z.avail_in) {
		set_err(err, err_len, "%s: data after the end of the gzip stream", name);
		rc = -EINVAL;
		goto out;
	}
	*out = buf;
	*out_len = z.total_out;
	buf = NULL;
out:
	inflateEnd(&z);
	free(buf);
	return rc;
}

struct id_index {
	uint64_t id;
	size_t idx;
};

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = ((const struct id_index *)a)->id, y = ((const struct id_index *)b)->id;

	return x < y ? -1 : x > y;
}

/* Sorted (id, index) pairs of n items; -EINVAL on a zero or repeated id. */
static int index_ids(struct id_index **out, size_t n, uint64_t (*id_of)(const void *, size_t),
		     const void *items)
{
	struct id_index *v = calloc(n ? n : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = (struct id_index){.id = id_of(items, i), .idx = i};
	qsort(v, n, sizeof(*v), cmp_id);
	*out = v;
	for (size_t i = 0; i < n; i++)
		if (v[i].id == 0 || (i && v[i].id == v[i - 1].id))
			return -EINVAL;
	return 0;
}

static uint64_t location_id(const void *items, size_t i)
{
	return ((Perftools__Profiles__Location *const *)items)[i]->id;
}

static uint64_t function_id(const void *items, size_t i)
{
	return ((Perftools__Profiles__Function *const *)items)[i]->id;
}

static uint64_t mapping_id(const void *items, size_t i)
{
	return ((Perftools__Profiles__Mapping *const *)items)[i]->id;
}

/* Index of id in v, or SIZE_MAX. */
static size_t find_id(const struct id_index *v, size_t n, uint64_t id)
{
	struct id_index key = {.id = id};
	const struct id_index *hit = bsearch(&key, v, n, sizeof(*v), cmp_id);

	return hit ? hit->idx : SIZE_MAX;
}

struct pprof {
	const Perftools__Profiles__Profile *p;
	struct id_index *locs, *funcs, *maps;
	char *buf; /* the stack being built */
	size_t len, cap;
	size_t depth;
};

static const char *pp_str(const struct pprof *pp, int64_t idx)
{
	return idx > 0 && (uint64_t)idx < pp->p->n_string_table ? pp->p->string_table[idx] : "";
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash && slash[1] ? slash + 1 : path;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Append one frame, ';' first unless it is the root; ';' and control bytes are replaced. */
static int __attribute__((format(printf, 2, 3))) pp_frame(struct pprof *pp, const char *fmt, ...)
{
	size_t start = pp->len + (pp->len ? 1 : 0);
	va_list ap;
	int n, err;

	if (++pp->depth > DIFF_MAX_DEPTH)
		return -E2BIG;
	for (;;) {
		size_t room = pp->cap > start ? pp->cap - start : 0;

		va_start(ap, fmt);
		/* No offset on a NULL buffer (UB, even of 0): vsnprintf(NULL, 0) only counts. */
		n = vsnprintf(room ? pp->buf + start : pp->buf, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
		if ((size_t)n < room)
			break;
		if (start + (size_t)n + 1 > DIFF_MAX_LINE)
			return -E2BIG;
		err = GROW(pp->buf, pp->cap, start + (size_t)n + 1);
		if (err)
			return err;
	}
	if (pp->len)
		pp->buf[pp->len] = ';';
	for (size_t i = start; i < start + (size_t)n; i++) {
		unsigned char c = (unsigned char)pp->buf[i];

		if (c == ';')
			pp->buf[i] = '_';
		else if (c < 0x20 || c == 0x7f)
			pp->buf[i] = '?';
	}
	pp->len = start + (size_t)n;
	return 0;
}

/* Frames of one location, outermost caller first: inlined functions come before their caller. */
static int pp_location(struct pprof *pp, const Perftools__Profiles__Location *loc)
{
	const Perftools__Profiles__Profile *p = pp->p;
	const Perftools__Profiles__Mapping *m = NULL;
	bool kernel = false;
	size_t mi;
	int err;

	if (loc->mapping_id) {
		mi = find_id(pp->maps, p->n_mapping, loc->mapping_id);
		if (mi == SIZE_MAX)
			return -ENOENT;
		m = p->mapping[mi];
		/* perf and profd name the kernel's mapping "[kernel.kallsyms]" or "[kernel]". */
		kernel = strstr(pp_str(pp, m->filename), "[kernel") == pp_str(pp, m->filename);
	}
	if (!loc->n_line) {
		const char *mod = m ? base_name(pp_str(pp, m->filename)) : "";
		uint64_t addr = loc->address;

		/* profctl shows an unsymbolized frame at its offset in the module. */
		if (m && *mod && addr >= m->memory_start)
			err =
			    pp_frame(pp, "[unknown] (%s+0x%" PRIx64 ")%s", mod,
				     addr - m->memory_start + m->file_offset, kernel ? "_[k]" : "");
		else if (addr)
			err =
			    pp_frame(pp, "[unknown] (0x%" PRIx64 ")%s", addr, kernel ? "_[k]" : "");
		else /* pprof cannot tell address 0 from none: both read as a bare "[unknown]". */
			err = pp_frame(pp, "[unknown]%s", kernel ? "_[k]" : "");
		return err;
	}
	for (size_t k = loc->n_line; k-- > 0;) {
		const Perftools__Profiles__Line *l = loc->line[k];
		const Perftools__Profiles__Function *fn;
		const char *name, *file;
		size_t fi = find_id(pp->funcs, p->n_function, l->function_id);

		if (fi == SIZE_MAX)
			return -ENOENT;
		fn = p->function[fi];
		name = pp_str(pp, fn->name);
		if (!*name)
			name = pp_str(pp, fn->system_name);
		if (!*name)
			name = "[unknown]";
		file = pp_str(pp, fn->filename);
		if (ends_with(file, ".py") && l->line > 0)
			err = pp_frame(pp, "%s (%s:%" PRId64 ")", name, base_name(file), l->line);
		else if (ends_with(file, ".py"))
			err = pp_frame(pp, "%s (%s)", name, base_name(file));
		else
			err = pp_frame(pp, "%s%s", name, kernel ? "_[k]" : "");
		if (err)
			return err;
	}
	return 0;
}

/* Which column of Sample.value to read: "samples", else the default type, else the last. */
static size_t pp_value_index(const struct pprof *pp)
{
	const Perftools__Profiles__Profile *p = pp->p;
	const char *def = pp_str(pp, p->default_sample_type);

	for (size_t i = 0; i < p->n_sample_type; i++)
		if (strcmp(pp_str(pp, p->sample_type[i]->type), "samples") == 0)
			return i;
	for (size_t i = 0; *def && i < p->n_sample_type; i++)
		if (strcmp(pp_str(pp, p->sample_type[i]->type), def) == 0)
			return i;
	return p->n_sample_type - 1;
}

static int pp_check_strings(const struct pprof *pp, const char *name, char *err, size_t err_len)
{
	const Perftools__Profiles__Profile *p = pp->p;

	if (!p->n_string_table || p->string_table[0][0]) {
		set_err(err, err_len, "%s: the string table does not start with \"\"", name);
		return -EINVAL;
	}
	if (!p->n_sample_type) {
		set_err(err, err_len, "%s: the profile has no sample types", name);
		return -EINVAL;
	}
	return 0;
}

struct stacks *stacks__from_pprof(const char *name, const uint8_t *data, size_t len, char *err,
				  size_t err_len)
{
	Perftools__Profiles__Profile *p = NULL;
	struct pprof pp = {0};
	struct stacks *s = NULL;
	uint8_t *raw = NULL;
	size_t raw_len = 0, vi;
	int rc;

	rc = gunzip(name, data, len, &raw, &raw_len, err, err_len);
	if (rc)
		goto out;
	p = perftools__profiles__profile__unpack(NULL, raw_len, raw);
	if (!p) {
		set_err(err, err_len, "%s: gzip data that is not a pprof profile", name);
		rc = -EINVAL;
		goto out;
	}
	pp.p = p;
	rc = pp_check_strings(&pp, name, err, err_len);
	if (rc)
		goto out;
	rc = index_ids(&pp.locs, p->n_location, location_id, p->location);
	if (!rc)
		rc = index_ids(&pp.funcs, p->n_function, function_id, p->function);
	if (!rc)
		rc = index_ids(&pp.maps, p->n_mapping, mapping_id, p->mapping);
	if (rc) {
		set_err(err, err_len, "%s: %s", name,
			rc == -ENOMEM ? "out of memory"
				      : "a zero or repeated location, function "
					"or mapping id");
		goto out;
	}
	vi = pp_value_index(&pp);
	s = stacks_new();
	if (!s) {
		rc = -ENOMEM;
		set_err(err, err_len, "%s: out of memory", name);
		goto out;
	}
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *smp = p->sample[i];
		char *stack;

		if (smp->n_value != p->n_sample_type) {
			set_err(err, err_len, "%s: sample %zu has %zu values for %zu sample types",
				name, i, smp->n_value, p->n_sample_type);
			rc = -EINVAL;
			goto out;
		}
		if (smp->value[vi] < 0) {
			set_err(err, err_len, "%s: sample %zu has a negative value", name, i);
			rc = -EINVAL;
			goto out;
		}
		if (!smp->value[vi])
			continue;
		pp.len = 0;
		pp.depth = 0;
		for (size_t k = smp->n_location_id; k-- > 0 && !rc;) {
			size_t li = find_id(pp.locs, p->n_location, smp->location_id[k]);

			rc = li == SIZE_MAX ? -ENOENT : pp_location(&pp, p->location[li]);
		}
		if (!rc && !smp->n_location_id)
			rc = pp_frame(&pp, "[no stack]");
		if (rc) {
			set_err(err, err_len, "%s: sample %zu: %s", name, i,
				rc == -ENOENT  ? "names a location, function or mapping not in the "
						 "profile"
				: rc == -E2BIG ? "stack too deep or too long"
				: rc == -ENOMEM ? "out of memory"
						: "cannot name a frame");
			goto out;
		}
		stack = strndup(pp.buf, pp.len);
		if (!stack || stacks_add(s, stack, (uint64_t)smp->value[vi])) {
			rc = -ENOMEM;
			set_err(err, err_len, "%s: out of memory", name);
			goto out;
		}
	}
	rc = stacks_finish(s, name, err, err_len);
out:
	if (rc) {
		stacks__free(s);
		s = NULL;
	}
	free(pp.buf);
	free(pp.maps);
	free(pp.funcs);
	free(pp.locs);
	if (p)
		perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	if (rc)
		errno = -rc;
	return s;
}

/* The whole of f, at most DIFF_MAX_INPUT bytes, in a malloc'd buffer. */
static int read_all(FILE *f, const char *name, char **out, size_t *out_len, char *err,
		    size_t err_len)
{
	size_t len = 0, cap = 0;
	char *buf = NULL;

	for (;;) {
		size_t n;

		if (len == cap) {
			/* One byte past the limit tells a file of exactly the limit from a larger
			 * one. */
			int rc = grow_bytes((void **)&buf, &cap, DIFF_MAX_INPUT + 1);

			if (rc == -EFBIG)
				set_err(err, err_len, "%s: larger than %u MiB", name,
					DIFF_MAX_INPUT >> 20);
			else if (rc)
				set_err(err, err_len, "%s: out of memory", name);
			if (rc) {
				free(buf);
				return rc;
			}
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (len > DIFF_MAX_INPUT) {
			set_err(err, err_len, "%s: larger than %u MiB", name, DIFF_MAX_INPUT >> 20);
			free(buf);
			return -EFBIG;
		}
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		int rc = errno ? -errno : -EIO;

		set_err(err, err_len, "%s: %s", name, strerror(-rc));
		free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

struct stacks *stacks__read_file(const char *path, char *err, size_t err_len)
{
	bool std_in = strcmp(path, "-") == 0;
	const char *name = std_in ? "standard input" : path;
	struct stacks *s = NULL;
	char *data = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	f = std_in ? stdin : fopen(path, "rb");
	if (!f) {
		rc = -errno;
		set_err(err, err_len, "%s: %s", path, strerror(-rc));
		errno = -rc;
		return NULL;
	}
	errno = 0;
	rc = read_all(f, name, &data, &len, err, err_len);
	if (!std_in)
		fclose(f);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	if (len >= 2 && (uint8_t)data[0] == 0x1f && (uint8_t)data[1] == 0x8b)
		s = stacks__from_pprof(name, (const uint8_t *)data, len, err, err_len);
	else
		s = stacks__from_folded(name, data, len, err, err_len);
	rc = s ? 0 : errno;
	free(data);
	errno = rc;
	return s;
}
