// SPDX-License-Identifier: BSD-2-Clause
/*
 * The symbol index (daemon/symbolize/sym_index.c) on an ELF file the test writes byte by byte:
 * which symbols it keeps, their order, lookups at and around function bounds (aliases, nested
 * labels, sizeless symbols), names read from the file only when asked (a rewritten string table
 * shows), demangling, the name cache's bound, and files truncated or replaced under the index.
 */
#include "check.h"

#include "sym_index.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/profd-symix-XXXXXX";
static char path[sizeof(dir) + 16];

struct fsym {
	const char *name; /* NULL: st_name 0; "!": an offset past the string table */
	uint64_t value, size;
	unsigned char type, bind;
	uint16_t shndx;
};

/* Sorted by nothing: the index sorts. */
static const struct fsym syms[] = {
    {"alpha", 0x1000, 0x100, STT_FUNC, STB_GLOBAL, 1},
    {"alpha_local", 0x1000, 0x100, STT_FUNC, STB_LOCAL, 1}, /* loses to the global alias */
    {"beta", 0x1200, 0x80, STT_FUNC, STB_WEAK, 1},
    {"beta_strong", 0x1200, 0x80, STT_FUNC, STB_GLOBAL, 1}, /* a global beats a weak */
    {"outer", 0x2000, 0x400, STT_FUNC, STB_GLOBAL, 1},
    {"inner_label", 0x2100, 0x10, STT_FUNC, STB_LOCAL, 1}, /* nested in outer */
    {"nosize", 0x3000, 0, STT_FUNC, STB_GLOBAL, 1},	   /* covers up to the next */
    {"last@@VERS_1", 0x4000, 0x20, STT_FUNC, STB_GLOBAL, 1},
    {"_Z3fooi", 0x5000, 0x10, STT_FUNC, STB_GLOBAL, 1},
    {"data_obj", 0x6000, 8, STT_OBJECT, STB_GLOBAL, 1},	  /* not a function */
    {"undefined", 0, 0, STT_FUNC, STB_GLOBAL, SHN_UNDEF}, /* not defined here */
    {"ifunc_x", 0x7000, 0x10, STT_GNU_IFUNC, STB_GLOBAL, 1},
    {"!", 0x8000, 0x10, STT_FUNC, STB_GLOBAL, 1},  /* name outside the string table */
    {NULL, 0x9000, 0x10, STT_FUNC, STB_GLOBAL, 1}, /* no name */
};
#define NSYMS (sizeof(syms) / sizeof(syms[0]))
/* alpha, beta_strong, outer, inner_label, nosize, last, _Z3fooi, ifunc_x */
#define NKEPT 8

static uint64_t strtab_off, strtab_len;

/*
 * Write an ELF64 file of four sections (null, .symtab, .strtab, .shstrtab) holding syms.
 * Returns 0 or -1.
 */
static int write_elf(const char *p)
{
	static const char shstr[] = "\0.symtab\0.strtab\0.shstrtab";
	Elf64_Sym st[NSYMS + 1];
	char strtab[512];
	size_t slen = 1;
	Elf64_Ehdr eh = {0};
	Elf64_Shdr sh[4];
	uint64_t off;
	FILE *f;

	memset(st, 0, sizeof(st));
	memset(sh, 0, sizeof(sh));
	strtab[0] = '\0';
	for (size_t i = 0; i < NSYMS; i++) {
		Elf64_Sym *s = &st[i + 1];

		s->st_value = syms[i].value;
		s->st_size = syms[i].size;
		s->st_info = ELF64_ST_INFO(syms[i].bind, syms[i].type);
		s->st_shndx = syms[i].shndx;
		if (!syms[i].name)
			continue;
		if (!strcmp(syms[i].name, "!")) {
			s->st_name = 100000;
			continue;
		}
		s->st_name = (uint32_t)slen;
		memcpy(strtab + slen, syms[i].name, strlen(syms[i].name) + 1);
		slen += strlen(syms[i].name) + 1;
	}
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_ehsize = sizeof(eh);
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 4;
	eh.e_shstrndx = 3;
	off = sizeof(eh);
	sh[1] = (Elf64_Shdr){.sh_name = 1,
			     .sh_type = SHT_SYMTAB,
			     .sh_offset = off,
			     .sh_size = sizeof(st),
			     .sh_link = 2,
			     .sh_info = 1,
			     .sh_addralign = 8,
			     .sh_entsize = sizeof(Elf64_Sym)};
	off += sizeof(st);
	strtab_off = off;
	strtab_len = slen;
	sh[2] = (Elf64_Shdr){.sh_name = 9,
			     .sh_type = SHT_STRTAB,
			     .sh_offset = off,
			     .sh_size = slen,
			     .sh_addralign = 1};
	off += slen;
	sh[3] = (Elf64_Shdr){.sh_name = 17,
			     .sh_type = SHT_STRTAB,
			     .sh_offset = off,
			     .sh_size = sizeof(shstr),
			     .sh_addralign = 1};
	off += sizeof(shstr);
	off = (off + 7) & ~7ull;
	eh.e_shoff = off;
	f = fopen(p, "w");
	if (!f)
		return -1;
	fwrite(&eh, sizeof(eh), 1, f);
	fwrite(st, sizeof(st), 1, f);
	fwrite(strtab, slen, 1, f);
	fwrite(shstr, sizeof(shstr), 1, f);
	while ((uint64_t)ftell(f) < off)
		fputc(0, f);
	fwrite(sh, sizeof(sh), 1, f);
	return fclose(f) ? -1 : 0;
}

/* The index of the file at p (NULL on failure; *err set), built as the symbolizer does. */
static struct sym_index *index_file(const char *p, int *err)
{
	struct sym_index *ix = NULL;
	struct stat st;
	Elf *e;
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	*err = -ENOENT;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e) {
		struct sym_source src = {.fd = fd, .size = (uint64_t)st.st_size};

		*err = sym_index__build(&ix, e, SHT_SYMTAB, &src);
		elf_end(e);
	}
	/* The index keeps its own descriptor. */
	close(fd);
	return ix;
}

static const char *name_at(struct name_cache *c, const struct sym_index *ix, uint64_t addr)
{
	long i = sym_index__find(ix, addr);

	return i >= 0 ? name_cache__get(c, ix, (size_t)i) : NULL;
}

#define EXPECT_AT(c, ix, addr, want)                                                               \
	do {                                                                                       \
		const char *w_ = (want), *n_ = name_at(c, ix, addr);                               \
		if (w_)                                                                            \
			CHECK_STREQ(n_, w_);                                                       \
		else if (!CHECK(sym_index__find(ix, addr) < 0))                                    \
			fprintf(stderr, "  0x%llx named %s\n", (unsigned long long)(addr),         \
				n_ ? n_ : "(no name)");                                            \
	} while (0)

static void test_lookups(void)
{
	struct name_cache *c = name_cache__new(64, 1u << 20);
	struct sym_index *ix;
	int err;

	ix = index_file(path, &err);
	CHECK_EQ_I(err, 0);
	if (!CHECK(ix != NULL) || !CHECK(c != NULL))
		goto out;
	CHECK_EQ_U(sym_index__count(ix), NKEPT);
	/* Compact: 12 bytes a function and a small header. */
	CHECK(sym_index__bytes(ix) <= NKEPT * 12 + 128);
	for (size_t i = 1; i < sym_index__count(ix); i++)
		CHECK(sym_index__addr(ix, i - 1) < sym_index__addr(ix, i));

	EXPECT_AT(c, ix, 0xfff, NULL);
	EXPECT_AT(c, ix, 0x1000, "alpha");
	EXPECT_AT(c, ix, 0x10ff, "alpha");
	EXPECT_AT(c, ix, 0x1100, NULL); /* past alpha's size, before beta */
	EXPECT_AT(c, ix, 0x1200, "beta_strong");
	EXPECT_AT(c, ix, 0x127f, "beta_strong");
	EXPECT_AT(c, ix, 0x1280, NULL);
	EXPECT_AT(c, ix, 0x2000, "outer");
	EXPECT_AT(c, ix, 0x2100, "inner_label");
	EXPECT_AT(c, ix, 0x210f, "inner_label");
	EXPECT_AT(c, ix, 0x2110, "outer"); /* past the label, still inside outer */
	EXPECT_AT(c, ix, 0x23ff, "outer");
	EXPECT_AT(c, ix, 0x2400, NULL);
	EXPECT_AT(c, ix, 0x3000, "nosize");
	EXPECT_AT(c, ix, 0x3fff, "nosize");
	EXPECT_AT(c, ix, 0x4000, "last"); /* without its version */
	EXPECT_AT(c, ix, 0x401f, "last");
	EXPECT_AT(c, ix, 0x4020, NULL);
	EXPECT_AT(c, ix, 0x5008, "foo(int)"); /* demangled */
	EXPECT_AT(c, ix, 0x6000, NULL);	      /* data, not a function */
	EXPECT_AT(c, ix, 0x7000, "ifunc_x");
	EXPECT_AT(c, ix, 0x8000, NULL); /* its name lies outside the string table */
	EXPECT_AT(c, ix, 0x9000, NULL); /* no name */
	EXPECT_AT(c, ix, 0x100000000ull, NULL);
	CHECK_EQ_U(sym_index__addr(ix, (size_t)sym_index__find(ix, 0x23ff)), 0x2000);
	/* Asked again: from the cache, the same. */
	EXPECT_AT(c, ix, 0x5000, "foo(int)");
	CHECK(name_cache__bytes(c) > 0);
out:
	name_cache__free(c);
	sym_index__free(ix);
}

/* Rewrite len bytes at off of the file at p in place (same inode). */
static void patch(const char *p, uint64_t off, const void *b, size_t len)
{
	int fd = open(p, O_WRONLY | O_CLOEXEC);

	if (!CHECK(fd >= 0))
		return;
	CHECK_EQ_I(pwrite(fd, b, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/*
 * Names are read from the file when first asked for, not copied in when the index is built: a
 * string table rewritten in between shows. Then the file shrinks under the index (a mapping
 * would fault there), is emptied, refilled with bytes without a terminator, and replaced by
 * another file under its name: lookups go on, names go missing or stay the old file's.
 */
static void test_lazy_and_changed(void)
{
	struct name_cache *c = name_cache__new(64, 1u << 20);
	char big[16384];
	struct sym_index *ix;
	int err;

	ix = index_file(path, &err);
	if (!CHECK(ix != NULL) || !CHECK(c != NULL))
		goto out;
	patch(path, strtab_off + 1, "ALPHA", 5);
	EXPECT_AT(c, ix, 0x1000, "ALPHA");

	/* Truncated inside the string table: alpha's name is there, outer's is not. */
	CHECK_EQ_I(truncate(path, (off_t)(strtab_off + 8)), 0);
	EXPECT_AT(c, ix, 0x1004, "ALPHA"); /* cached */
	CHECK(sym_index__find(ix, 0x2000) >= 0);
	CHECK(name_at(c, ix, 0x2000) == NULL);
	{
		char buf[64];

		CHECK_EQ_I(
		    sym_index__name(ix, (size_t)sym_index__find(ix, 0x2000), buf, sizeof(buf)),
		    -ENOENT);
	}
	CHECK_EQ_I(truncate(path, 0), 0);
	CHECK(name_at(c, ix, 0x4000) == NULL);
	CHECK(name_at(c, ix, 0x7000) == NULL);
	/* Refilled with bytes and no terminator: bounded reads, no name. */
	memset(big, 'x', sizeof(big));
	patch(path, 0, big, sizeof(big));
	CHECK(name_at(c, ix, 0x4000) == NULL);
	CHECK(sym_index__find(ix, 0x3000) >= 0);

	/* Replaced under its name: the index reads the file it was built from. */
	sym_index__free(ix);
	CHECK_EQ_I(write_elf(path), 0);
	ix = index_file(path, &err);
	if (!CHECK(ix != NULL))
		goto out;
	CHECK_EQ_I(unlink(path), 0);
	CHECK_EQ_I(write_elf(path), 0);
	patch(path, strtab_off + 1, "OMEGA", 5);
	EXPECT_AT(c, ix, 0x1000, "alpha");
out:
	name_cache__free(c);
	sym_index__free(ix);
	CHECK_EQ_I(write_elf(path), 0);
}

/* A symbol table that lies past the end of the file is refused, not read. */
static void test_short_file(void)
{
	struct sym_index *ix;
	int err;

	CHECK_EQ_I(write_elf(path), 0);
	/* The section headers stay readable: move them to the front of a cut file. */
	{
		int fd = open(path, O_RDWR | O_CLOEXEC);
		Elf64_Ehdr eh;
		Elf64_Shdr sh[4];

		if (!CHECK(fd >= 0))
			return;
		CHECK_EQ_I(pread(fd, &eh, sizeof(eh), 0), (ssize_t)sizeof(eh));
		CHECK_EQ_I(pread(fd, sh, sizeof(sh), (off_t)eh.e_shoff), (ssize_t)sizeof(sh));
		sh[1].sh_size *= 1000; /* the symbol table runs past the end */
		CHECK_EQ_I(pwrite(fd, sh, sizeof(sh), (off_t)eh.e_shoff), (ssize_t)sizeof(sh));
		close(fd);
	}
	ix = index_file(path, &err);
	CHECK(ix == NULL);
	CHECK_EQ_I(err, -EINVAL);
	CHECK_EQ_I(write_elf(path), 0);
}

/* The cache holds at most its bound of name bytes, whatever is asked. */
static void test_cache_bound(void)
{
	struct name_cache *c = name_cache__new(4, 16);
	static const uint64_t at[] = {0x1000, 0x1200, 0x2000, 0x2100, 0x3000, 0x4000, 0x5000};
	struct sym_index *ix;
	int err;

	ix = index_file(path, &err);
	if (!CHECK(ix != NULL) || !CHECK(c != NULL))
		goto out;
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			CHECK(name_at(c, ix, at[i]) != NULL);
			CHECK(name_cache__bytes(c) <= 16);
		}
	}
	/* "beta_strong" alone is 12 bytes: the bound still names it. */
	EXPECT_AT(c, ix, 0x1200, "beta_strong");
out:
	name_cache__free(c);
	sym_index__free(ix);
}

/* PLT stubs: an index built from a list, named "TARGET@plt" from the file's string table. */
static void test_plt_list(void)
{
	struct name_cache *c = name_cache__new(64, 1u << 20);
	struct sym_index *ix = NULL;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	/* String table offsets of "alpha" (1) and "_Z3fooi" (after the names before it). */
	uint32_t foo = 1 + 6 + 12 + 5 + 12 + 6 + 12 + 7 + 13;
	struct sym_list_ent l[] = {
	    {0x20020, 16, foo},
	    {0x20010, 16, 1},
	    {0x20030, 16, 1}, /* replaced by the later entry at its address */
	    {0x20030, 16, foo},
	};

	if (!CHECK(fd >= 0) || !CHECK(c != NULL) || !CHECK_EQ_I(fstat(fd, &st), 0))
		goto out;
	struct sym_source src = {.fd = fd, .size = (uint64_t)st.st_size};

	CHECK_EQ_I(sym_index__from_list(&ix, l, 4, &src, strtab_off, strtab_len, NULL), 0);
	if (!CHECK(ix != NULL))
		goto out;
	CHECK_EQ_U(sym_index__count(ix), 3);
	EXPECT_AT(c, ix, 0x20010, "alpha@plt");
	EXPECT_AT(c, ix, 0x2001f, "alpha@plt");
	EXPECT_AT(c, ix, 0x20028, "foo(int)@plt");
	EXPECT_AT(c, ix, 0x20030, "foo(int)@plt");
	EXPECT_AT(c, ix, 0x20040, NULL);
	sym_index__free(ix);
	ix = NULL;
	/* A string table outside the file is refused. */
	CHECK_EQ_I(sym_index__from_list(&ix, l, 4, &src, (uint64_t)st.st_size, 64, NULL), -EINVAL);
	CHECK(ix == NULL);
	CHECK_EQ_I(sym_index__from_list(&ix, l, 0, &src, strtab_off, strtab_len, NULL), 0);
	CHECK(ix == NULL);
out:
	if (fd >= 0)
		close(fd);
	name_cache__free(c);
	sym_index__free(ix);
}

/* Descriptors this process holds. */
static int open_fds(void)
{
	char p[64];
	int n = 0;

	for (int fd = 0; fd < 1024; fd++) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		n += access(p, F_OK) == 0;
	}
	return n;
}

/* The PLT index of a file shares the descriptor of the file's function index, and outlives it. */
static void test_shared_fd(void)
{
	struct name_cache *c = name_cache__new(64, 1u << 20);
	struct sym_index *ix, *plt = NULL;
	struct sym_list_ent l[] = {{0x20010, 16, 1}};
	struct stat st;
	int err, fd, before = open_fds();

	ix = index_file(path, &err);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!CHECK(ix != NULL) || !CHECK(fd >= 0) || !CHECK(c != NULL) ||
	    !CHECK_EQ_I(fstat(fd, &st), 0))
		goto out;
	struct sym_source src = {.fd = fd, .size = (uint64_t)st.st_size};

	CHECK_EQ_I(sym_index__from_list(&plt, l, 1, &src, strtab_off, strtab_len, ix), 0);
	close(fd);
	fd = -1;
	CHECK_EQ_I(open_fds(), before + 1);
	sym_index__free(ix);
	ix = NULL;
	EXPECT_AT(c, plt, 0x20010, "alpha@plt");
	sym_index__free(plt);
	plt = NULL;
	CHECK_EQ_I(open_fds(), before);
out:
	if (fd >= 0)
		close(fd);
	name_cache__free(c);
	sym_index__free(ix);
	sym_index__free(plt);
}

int main(void)
{
	elf_version(EV_CURRENT);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/lib.so", dir);
	if (!CHECK_EQ_I(write_elf(path), 0))
		return CHECK_DONE();
	test_lookups();
	test_lazy_and_changed();
	test_short_file();
	test_cache_bound();
	test_plt_list();
	test_shared_fd();
	unlink(path);
	rmdir(dir);
	return CHECK_DONE();
}
