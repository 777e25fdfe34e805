// SPDX-License-Identifier: BSD-2-Clause
/*
 * PLT stubs are named "TARGET@plt", as objdump names them: programs built here in each layout
 * the toolchain makes (lazy and immediate binding, IBT's .plt.sec, a shared library), and the
 * system's own binaries (libc, whose ifunc stubs objdump calls "*ABS*+0x...@plt"). Every
 * "<...@plt>" of `objdump -d -C` must resolve to that name at its first and a middle byte; the
 * lazy binder's header is "[plt]", never the symbol before it.
 */
#include "check.h"

#include "symbolize_elf.h"
#include "sym_index.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/profd-plt-XXXXXX";
static const char *skipped;

static const char source[] = "#include <stdio.h>\n"
			     "#include <stdlib.h>\n"
			     "#include <string.h>\n"
			     "int lib_fn(const char *s) { return (int)strlen(s) + atoi(s); }\n"
			     "int main(int c, char **v)\n"
			     "{\n"
			     "	char b[64];\n"
			     "	snprintf(b, sizeof(b), \"%d\", c);\n"
			     "	puts(b);\n"
			     "	return lib_fn(v[0]) + (int)strtol(b, NULL, 10);\n"
			     "}\n";

static bool have_tool(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/* Address of the section called name, 0 when absent. */
static uint64_t section_addr(const char *path, const char *name, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	uint64_t addr = 0;
	size_t shstrndx;
	Elf *e;
	int fd;

	elf_version(EV_CURRENT);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && !elf_getshdrstrndx(e, &shstrndx)) {
		while ((scn = elf_nextscn(e, scn))) {
			const char *n;

			if (!gelf_getshdr(scn, &sh))
				break;
			n = elf_strptr(e, shstrndx, sh.sh_name);
			if (n && !strcmp(n, name)) {
				addr = sh.sh_addr;
				*size = sh.sh_size;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return addr;
}

static const char *name_at(struct elf_image *img, uint64_t addr)
{
	static struct name_cache *names;
	const char *n;

	if (!names)
		names = name_cache__new(64, 1u << 20);
	n = names ? elf_image__symbol(img, names, addr) : NULL;
	return n ? n : "(none)";
}

/*
 * Compare every "<NAME@plt>" objdump prints for path with our name for it. Returns how many
 * stubs were compared.
 */
static size_t check_file(const char *path, size_t want_min)
{
	char cmd[PATH_MAX + 64], *line = NULL;
	struct elf_image img;
	size_t cap = 0, n = 0, bad = 0;
	uint64_t plt, plt_size = 0;
	FILE *f;
	int fd;

	fd = open(path, O_RDONLY);
	if (!CHECK(fd >= 0))
		return 0;
	if (!CHECK_EQ_I(elf_image__load(&img, fd, NULL), 0)) {
		close(fd);
		return 0;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "objdump -d -C '%s'", path);
	f = popen(cmd, "r");
	if (!CHECK(f != NULL))
		goto out;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long addr;
		char *lt = strchr(line, '<'), *end = strstr(line, "@plt>:\n");
		const char *got, *got_mid;
		bool ok;

		if (!lt || !end || sscanf(line, "%llx <", &addr) != 1)
			continue;
		end[4] = '\0'; /* keep "@plt" */
		lt++;
		got = name_at(&img, addr);
		got_mid = name_at(&img, addr + 6);
		if (!strncmp(lt, "*ABS*", 5))
			/* An ifunc of this file: named by its resolver here. */
			ok = strcmp(got, "[plt]") && strlen(got) > 4 &&
			     !strcmp(got + strlen(got) - 4, "@plt");
		else
			ok = !strcmp(got, lt);
		ok = ok && !strcmp(got, got_mid);
		if (!ok && bad++ < 5)
			fprintf(stderr, "%s: %#llx: objdump <%s>, we %s (at +6: %s)\n", path, addr,
				lt, got, got_mid);
		n++;
	}
	free(line);
	pclose(f);
	fprintf(stderr, "%s: %zu PLT stubs, %zu misnamed\n", path, n, bad);
	CHECK_EQ_U(bad, 0);
	CHECK(n >= want_min);
	/* The lazy binder's header: not the function before .plt. */
	plt = section_addr(path, ".plt", &plt_size);
	if (plt && plt_size >= 16) {
		CHECK_STREQ(name_at(&img, plt), "[plt]");
		CHECK_STREQ(name_at(&img, plt + 8), "[plt]");
	}
out:
	elf_image__fini(&img);
	return n;
}

static void build(const char *out, const char *flags)
{
	char cmd[PATH_MAX * 2 + 256];

	snprintf(cmd, sizeof(cmd), "cc -O1 %s -o '%s/%s' '%s/t.c' 2>&1", flags, tmpdir, out,
		 tmpdir);
	CHECK_EQ_I(system(cmd), 0);
}

static void test_built(void)
{
	char path[PATH_MAX], src[PATH_MAX];
	uint64_t sec, size = 0;
	struct elf_image img;
	FILE *f;
	int fd;

	if (!have_tool("cc") || !have_tool("objdump")) {
		skipped = "no cc or objdump";
		return;
	}
	snprintf(src, sizeof(src), "%s/t.c", tmpdir);
	f = fopen(src, "w");
	if (!CHECK(f != NULL))
		return;
	fputs(source, f);
	fclose(f);
	build("lazy", "");
	build("now", "-Wl,-z,now");
	build("ibt", "-fcf-protection=full -Wl,-z,ibtplt");
	build("ibtnow", "-fcf-protection=full -Wl,-z,ibtplt -Wl,-z,now");
	build("lib.so", "-shared -fPIC");
	/* puts, strlen, snprintf, strtol (atoi is inline), __cxa_finalize. */
	snprintf(path, sizeof(path), "%s/lazy", tmpdir);
	check_file(path, 5);
	snprintf(path, sizeof(path), "%s/now", tmpdir);
	check_file(path, 5);
	snprintf(path, sizeof(path), "%s/ibtnow", tmpdir);
	check_file(path, 5);
	snprintf(path, sizeof(path), "%s/lib.so", tmpdir);
	check_file(path, 2);
	snprintf(path, sizeof(path), "%s/ibt", tmpdir);
	if (!check_file(path, 5))
		return;

	/* IBT's lazy entries in .plt push their .rela.plt index: named as their .plt.sec twin. */
	sec = section_addr(path, ".plt.sec", &size);
	if (!CHECK(sec != 0))
		return;
	fd = open(path, O_RDONLY);
	if (!CHECK(fd >= 0) || !CHECK_EQ_I(elf_image__load(&img, fd, NULL), 0)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	{
		uint64_t plt = section_addr(path, ".plt", &size);
		char lazy[256];

		snprintf(lazy, sizeof(lazy), "%s", name_at(&img, plt + 16));
		CHECK(strstr(lazy, "@plt") != NULL);
		/* The first lazy entry and the first .plt.sec entry are for one function. */
		CHECK_STREQ(lazy, name_at(&img, sec));
	}
	elf_image__fini(&img);
}

static void test_system(void)
{
	static const char *const files[] = {
	    "/lib/x86_64-linux-gnu/libc.so.6",
	    "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
	    "/usr/bin/python3.11",
	};
	size_t n = 0;

	if (!have_tool("objdump"))
		return;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (access(files[i], R_OK) == 0)
			n += check_file(files[i], 1);
	fprintf(stderr, "system binaries: %zu PLT stubs compared\n", n);
}

static void test_decode(void)
{
	/* jmp *0x2fe2(%rip) at 0x1030: the slot is 0x1036 + 0x2fe2. */
	static const uint8_t lazy[] = {0xff, 0x25, 0xe2, 0x2f, 0x00, 0x00, 0x68, 0x00,
				       0x00, 0x00, 0x00, 0xe9, 0xe0, 0xff, 0xff, 0xff};
	/* endbr64; bnd jmp *0x2f76(%rip) at 0x1080. */
	static const uint8_t sec[] = {0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x76,
				      0x2f, 0x00, 0x00, 0x0f, 0x1f, 0x44, 0x00, 0x00};
	/* endbr64; push $0x3; bnd jmp .plt */
	static const uint8_t ibt_lazy[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0x03, 0x00, 0x00,
					   0x00, 0xf2, 0xe9, 0xe2, 0xff, 0xff, 0xff, 0x90};
	/* A negative displacement. */
	static const uint8_t back[] = {0xff, 0x25, 0xf0, 0xff, 0xff, 0xff, 0x66, 0x90};
	static const uint8_t junk[] = {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90};
	uint64_t slot = 0;
	uint32_t index = 0;

	CHECK_EQ_I(plt_decode_x86_64(lazy, sizeof(lazy), 0x1030, &slot, &index), PLT_ENTRY_SLOT);
	CHECK_EQ_U(slot, 0x1036 + 0x2fe2);
	CHECK_EQ_I(plt_decode_x86_64(sec, sizeof(sec), 0x1080, &slot, &index), PLT_ENTRY_SLOT);
	CHECK_EQ_U(slot, 0x108b + 0x2f76);
	CHECK_EQ_I(plt_decode_x86_64(ibt_lazy, sizeof(ibt_lazy), 0x1030, &slot, &index),
		   PLT_ENTRY_INDEX);
	CHECK_EQ_U(index, 3);
	CHECK_EQ_I(plt_decode_x86_64(back, sizeof(back), 0x5000, &slot, &index), PLT_ENTRY_SLOT);
	CHECK_EQ_U(slot, 0x5006 - 0x10);
	CHECK_EQ_I(plt_decode_x86_64(junk, sizeof(junk), 0x5000, &slot, &index), -ENOENT);
	/* Cut short: never read past the entry. */
	CHECK_EQ_I(plt_decode_x86_64(sec, 8, 0x1080, &slot, &index), -ENOENT);
}

int main(void)
{
	char cmd[PATH_MAX + 16];

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_decode();
#if defined(__x86_64__)
	test_built();
	test_system();
#else
	skipped = "PLT names are decoded on x86_64 only";
#endif
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return skipped ? CHECK_SKIP(skipped) : CHECK_DONE();
}
