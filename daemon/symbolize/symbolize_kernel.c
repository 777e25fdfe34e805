// SPDX-License-Identifier: BSD-2-Clause
/* Kernel symbols: the text symbols of /proc/kallsyms, loaded once and sorted by address. */
#include "symbolize_elf.h"
#include "grow.h"
#include "parse.h"

#include "procfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* kallsyms is ~10 MiB on a big distribution kernel; refuse something absurd. */
#define KALLSYMS_MAX (256u << 20)
#define KSYM_NAME_MAX 512
#define KMOD_NAME_MAX 256
#define KMODS_MAX 65535

static const char core_module[] = "[kernel.kallsyms]";

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset into pool */
	uint32_t mod;  /* index into mods; 0 is the core kernel */
};

struct ksyms {
	struct ksym *syms;
	size_t n;
	char *pool;
	char **mods;
	size_t n_mods;
	uint64_t bytes; /* ksyms__bytes() */
};

static int ksym_cmp(const void *pa, const void *pb)
{
	const struct ksym *a = pa, *b = pb;

	if (a->addr != b->addr)
		return a->addr < b->addr ? -1 : 1;
	/* Keep the input order among aliases (qsort is not stable): the pool offset grows. */
	return a->name < b->name ? -1 : a->name > b->name;
}

static int mod_index(struct ksyms *k, const char *name, size_t len, uint32_t *idx)
{
	char **nm;
	size_t i;

	/* Symbols of one module are contiguous in kallsyms: try the latest first. */
	for (i = k->n_mods; i-- > 0;) {
		if (strlen(k->mods[i]) == len && !memcmp(k->mods[i], name, len)) {
			*idx = (uint32_t)i;
			return 0;
		}
	}
	if (k->n_mods >= KMODS_MAX)
		return -E2BIG;
	nm = realloc(k->mods, (k->n_mods + 1) * sizeof(*k->mods));
	if (!nm)
		return -ENOMEM;
	k->mods = nm;
	k->mods[k->n_mods] = strndup(name, len);
	if (!k->mods[k->n_mods])
		return -ENOMEM;
	*idx = (uint32_t)k->n_mods++;
	return 0;
}

/*
 * One line, "ADDR TYPE NAME" optionally followed by "\t[MODULE]". Returns 1 for a text symbol
 * (fields filled; name and module not NUL-terminated), 0 for a valid line to skip, -EINVAL.
 */
static int parse_line(const char *line, size_t len, uint64_t *addr, const char **name,
		      size_t *name_len, const char **mod, size_t *mod_len)
{
	const char *p = line, *end = line + len, *q;
	uint64_t v = 0;
	int i, d;
	char type;

	for (i = 0; p < end && (d = parse_hex_digit(*p)) >= 0; i++, p++) {
		if (i == 16)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	if (i == 0 || end - p < 4 || p[0] != ' ' || p[2] != ' ')
		return -EINVAL;
	type = p[1];
	p += 3;
	for (q = p; q < end && *q != '\t' && *q != ' '; q++)
		;
	if (q == p || (size_t)(q - p) > KSYM_NAME_MAX)
		return -EINVAL;
	*name = p;
	*name_len = (size_t)(q - p);
	*mod = NULL;
	*mod_len = 0;
	if (q < end) {
		while (q < end && (*q == '\t' || *q == ' '))
			q++;
		if (end - q < 3 || *q != '[' || end[-1] != ']' ||
		    (size_t)(end - q - 2) > KMOD_NAME_MAX)
			return -EINVAL;
		*mod = q + 1;
		*mod_len = (size_t)(end - q - 2);
		if (memchr(*mod, ']', *mod_len) || memchr(*mod, ' ', *mod_len))
			return -EINVAL;
	}
	*addr = v;
	return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

struct ksyms *ksyms__load(const char *path)
{
	size_t len, cap = 0, pool_len = 0, name_len, mod_len;
	const char *name, *mod;
	char *buf = NULL, *line, *nl;
	struct ksyms *k;
	bool nonzero = false;
	uint64_t addr;
	uint32_t midx;
	void *p;
	int err, r;

	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	err = procfs_read_file(path, KALLSYMS_MAX, &buf, &len);
	if (err)
		goto err;
	err = mod_index(k, core_module, sizeof(core_module) - 1, &midx);
	if (err)
		goto err;
	/* Names are copied in place to the front of buf, which then becomes the pool. */
	for (line = buf; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			nl = buf + len;
		r = parse_line(line, (size_t)(nl - line), &addr, &name, &name_len, &mod, &mod_len);
		if (r <= 0)
			continue;
		if (!addr)
			continue;
		nonzero = true;
		midx = 0;
		if (mod) {
			err = mod_index(k, mod, mod_len, &midx);
			if (err)
				goto err;
		}
		if (GROW(k->syms, cap, k->n + 1)) {
			err = -ENOMEM;
			goto err;
		}
		/* pool_len <= name's offset: each line is longer than the name it copies. */
		memmove(buf + pool_len, name, name_len);
		buf[pool_len + name_len] = '\0';
		k->syms[k->n++] =
		    (struct ksym){.addr = addr, .name = (uint32_t)pool_len, .mod = midx};
		pool_len += name_len + 1;
	}
	if (!nonzero) {
		/* kptr_restrict: unprivileged readers see every address as 0. */
		err = -EPERM;
		goto err;
	}
	qsort(k->syms, k->n, sizeof(*k->syms), ksym_cmp);
	p = realloc(buf, pool_len);
	k->pool = p ? p : buf;
	buf = NULL;
	k->bytes = sizeof(*k) + cap * sizeof(*k->syms) + (p ? pool_len : len) +
		   k->n_mods * sizeof(*k->mods);
	for (size_t i = 0; i < k->n_mods; i++)
		k->bytes += strlen(k->mods[i]) + 1;
	return k;
err:
	free(buf);
	ksyms__free(k);
	errno = -err;
	return NULL;
}

int ksyms__find(const struct ksyms *k, uint64_t addr, const char **name, const char **module)
{
	size_t lo = 0, hi = k->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	/* Among aliases at one address the first listed is the canonical one. */
	mid = lo - 1;
	while (mid > 0 && k->syms[mid - 1].addr == k->syms[mid].addr)
		mid--;
	*name = k->pool + k->syms[mid].name;
	*module = k->mods[k->syms[mid].mod];
	return 0;
}

size_t ksyms__count(const struct ksyms *k)
{
	return k ? k->n : 0;
}

uint64_t ksyms__bytes(const struct ksyms *k)
{
	return k ? k->bytes : 0;
}

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n_mods; i++)
		free(k->mods[i]);
	free(k->mods);
	free(k->syms);
	free(k->pool);
	free(k);
}
