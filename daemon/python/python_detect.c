// SPDX-License-Identifier: BSD-2-Clause
/*
 * CPython support: find the interpreter in a process. Candidates come from the memory maps (a
 * libpython, an executable named like python3.X, or the process's executable); their ELF files
 * give _PyRuntime, Py_Version and PyCode_Type, and the target's memory the version and, from
 * 3.13 on, the _Py_DebugOffsets table (see python_priv.h for how the files divide).
 */
#include "python_priv.h"

#include "log.h"
#include "procfs.h"
#include "symbolize_elf.h"
#include "timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LOADS 16

struct elf_load_seg {
	uint64_t offset, filesz, vaddr;
};

/* What one ELF file tells about CPython in it. Addresses are link-time (before the bias). */
struct py_elf {
	uint64_t runtime, py_version, code_type, runtime_scn;
	bool has_runtime, has_version, has_code_type, has_runtime_scn;
	bool has_interp;      /* PT_INTERP: dynamically linked */
	bool needs_libpython; /* DT_NEEDED names a libpython */
	struct elf_load_seg loads[MAX_LOADS];
	size_t n_loads;
};

/*
 * "3.11", "3.13t", "3.7m" at s: major, minor and whether the ABI flags say free-threaded. Returns
 * what follows, or NULL when s does not start that way (*major and *ft may be set even then).
 */
static const char *parse_version_flags(const char *s, unsigned int *major, unsigned int *minor,
				       bool *ft)
{
	unsigned int mi = 0;

	if (*s < '2' || *s > '3' || s[1] != '.')
		return NULL;
	*major = (unsigned int)(*s - '0');
	s += 2;
	if (*s < '0' || *s > '9')
		return NULL;
	while (*s >= '0' && *s <= '9' && mi < 1000)
		mi = mi * 10 + (unsigned int)(*s++ - '0');
	*ft = false;
	while (*s == 'd' || *s == 'm' || *s == 't' || *s == 'u') {
		if (*s == 't')
			*ft = true;
		s++;
	}
	*minor = mi;
	return s;
}

/*
 * "libpython3.11.so.1.0", "libpython3.13t.so", "libpython3.7m.so" -> major, minor and whether
 * the ABI flags say free-threaded. Returns true when name is a libpython.
 */
static bool parse_libpython(const char *name, unsigned int *major, unsigned int *minor, bool *ft)
{
	unsigned int mi;
	const char *s;

	if (strncmp(name, "libpython", 9) != 0)
		return false;
	s = parse_version_flags(name + 9, major, &mi, ft);
	if (!s || strncmp(s, ".so", 3) != 0 || (s[3] != '\0' && s[3] != '.'))
		return false;
	*minor = mi;
	return true;
}

/* "python3.11", "python3.13t": the name of an interpreter executable. */
static bool parse_exe_name(const char *name, unsigned int *major, unsigned int *minor, bool *ft)
{
	unsigned int mi;
	const char *s;

	if (strncmp(name, "python", 6) != 0)
		return false;
	s = parse_version_flags(name + 6, major, &mi, ft);
	if (!s || *s)
		return false;
	*minor = mi;
	return true;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static void scan_symbols(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct py_elf *pe)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;
	GElf_Sym sym;
	const char *name;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(e, sh->sh_link, sym.st_name);
		if (!name || name[0] == '\0')
			continue;
		if (!pe->has_runtime && strcmp(name, "_PyRuntime") == 0) {
			pe->runtime = sym.st_value;
			pe->has_runtime = true;
		} else if (!pe->has_version && strcmp(name, "Py_Version") == 0) {
			pe->py_version = sym.st_value;
			pe->has_version = true;
		} else if (!pe->has_code_type && strcmp(name, "PyCode_Type") == 0) {
			pe->code_type = sym.st_value;
			pe->has_code_type = true;
		}
	}
}

static void scan_needed(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, struct py_elf *pe)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	unsigned int ma, mi;
	const char *name;
	GElf_Dyn dyn;
	size_t i, n;
	bool ft;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < n; i++) {
		if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
			break;
		if (dyn.d_tag != DT_NEEDED)
			continue;
		name = elf_strptr(e, sh->sh_link, dyn.d_un.d_val);
		if (name && parse_libpython(name, &ma, &mi, &ft))
			pe->needs_libpython = true;
	}
}

/*
 * Read what CPython detection needs from the ELF file at path in pid's root: PT_LOADs,
 * PT_INTERP, DT_NEEDED, the .PyRuntime section and the _PyRuntime, Py_Version and PyCode_Type
 * symbols (.dynsym, then .symtab for what is still missing). Returns 0 or a negative errno.
 */
/*
 * Open the file behind a mapping the way the symbolizer does: the path is the profiled user's to
 * choose, so through map_files first (the very file mapped), else through the process's root,
 * non-blocking, regular files only, and only if it is still the mapped inode.
 */
static int open_mapping(struct python *py, uint32_t pid, const struct proc_map *m)
{
	char full[PATH_MAX];
	struct stat st;
	int fd;

	if ((size_t)snprintf(full, sizeof(full), "%s/%u/map_files/%llx-%llx", py->proc_root, pid,
			     (unsigned long long)m->start,
			     (unsigned long long)m->end) < sizeof(full)) {
		fd = procfs_open_regular(full, ELF_FILE_MAX, NULL);
		if (fd >= 0)
			return fd;
	}
	if ((size_t)snprintf(full, sizeof(full), "%s/%u/root%s", py->proc_root, pid, m->path) >=
	    sizeof(full))
		return -ENAMETOOLONG;
	fd = procfs_open_regular(full, ELF_FILE_MAX, &st);
	if (fd >= 0 && (uint64_t)st.st_ino != m->inode) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static int scan_elf(struct python *py, uint32_t pid, const struct proc_map *m, struct py_elf *pe)
{
	Elf_Scn *scn = NULL, *symtab = NULL;
	GElf_Shdr sh, symtab_sh;
	size_t shstrndx, nph, i;
	GElf_Phdr ph;
	const char *sname;
	Elf *e = NULL;
	int fd, err = 0;

	memset(pe, 0, sizeof(*pe));
	fd = open_mapping(py, pid, m);
	if (fd < 0)
		return fd;
	/* Read, not mapped: the file's owner could truncate it under us (SIGBUS). */
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64 ||
	    elf_getphdrnum(e, &nph) || elf_getshdrstrndx(e, &shstrndx)) {
		err = -ENOEXEC;
		goto out;
	}
	for (i = 0; i < nph; i++) {
		if (!gelf_getphdr(e, (int)i, &ph))
			continue;
		if (ph.p_type == PT_INTERP)
			pe->has_interp = true;
		if (ph.p_type == PT_LOAD && pe->n_loads < MAX_LOADS) {
			pe->loads[pe->n_loads].offset = ph.p_offset;
			pe->loads[pe->n_loads].filesz = ph.p_filesz;
			pe->loads[pe->n_loads].vaddr = ph.p_vaddr;
			pe->n_loads++;
		}
	}
	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM) {
			scan_symbols(e, scn, &sh, pe);
		} else if (sh.sh_type == SHT_SYMTAB) {
			symtab = scn;
			symtab_sh = sh;
		} else if (sh.sh_type == SHT_DYNAMIC) {
			scan_needed(e, scn, &sh, pe);
		} else {
			sname = elf_strptr(e, shstrndx, sh.sh_name);
			if (sname && strcmp(sname, ".PyRuntime") == 0 && sh.sh_addr) {
				pe->runtime_scn = sh.sh_addr;
				pe->has_runtime_scn = true;
			}
		}
	}
	/* .symtab can be large: only for an interpreter that hides symbols from .dynsym. */
	if (symtab && (pe->has_runtime || pe->has_runtime_scn) &&
	    (!pe->has_code_type || !pe->has_version))
		scan_symbols(e, symtab, &symtab_sh, pe);
out:
	if (e)
		elf_end(e);
	close(fd);
	return err;
}

/* bias = where the mapping starts - the link-time address of its file offset. */
static int load_bias(const struct py_elf *pe, const struct proc_map *m, uint64_t *bias)
{
	uint64_t page = 4096, lo;
	size_t i;

	for (i = 0; i < pe->n_loads; i++) {
		lo = pe->loads[i].offset & ~(page - 1);
		if (m->offset >= lo && m->offset < pe->loads[i].offset + pe->loads[i].filesz) {
			*bias = m->start - (pe->loads[i].vaddr - pe->loads[i].offset + m->offset);
			return 0;
		}
	}
	return -ENOEXEC;
}

/* A mapped file that may hold the interpreter, with its lowest-offset mapping. */
struct py_candidate {
	const struct proc_map *map;
	unsigned int major, minor; /* from the name; 0 when the name says nothing */
	bool ft;
	bool libpython;
};

#define MAX_CANDIDATES 8

static int exe_path(struct python *py, uint32_t pid, char *buf, size_t size)
{
	char link[PATH_MAX];
	ssize_t n;
	size_t dl = strlen(" (deleted)");

	if ((size_t)snprintf(link, sizeof(link), "%s/%u/exe", py->proc_root, pid) >= sizeof(link))
		return -ENAMETOOLONG;
	n = readlink(link, buf, size - 1);
	if (n < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	buf[n] = '\0';
	if ((size_t)n > dl && strcmp(buf + n - dl, " (deleted)") == 0)
		buf[n - dl] = '\0';
	return 0;
}

static size_t find_candidates(const struct proc_map *maps, size_t n, const char *exe,
			      struct py_candidate *cand)
{
	struct py_candidate c;
	size_t i, j, nc = 0;
	const char *b;

	for (i = 0; i < n; i++) {
		if (!maps[i].path[0] || maps[i].path[0] != '/')
			continue;
		memset(&c, 0, sizeof(c));
		c.map = &maps[i];
		b = base_name(maps[i].path);
		if (parse_libpython(b, &c.major, &c.minor, &c.ft))
			c.libpython = true;
		else if (!parse_exe_name(b, &c.major, &c.minor, &c.ft) &&
			 !(exe[0] && strcmp(maps[i].path, exe) == 0))
			continue;
		for (j = 0; j < nc; j++) {
			if (strcmp(cand[j].map->path, maps[i].path) == 0)
				break;
		}
		if (j < nc) {
			if (maps[i].offset < cand[j].map->offset)
				cand[j].map = &maps[i];
			continue;
		}
		if (nc == MAX_CANDIDATES)
			continue;
		/* A libpython holds the interpreter even when the executable links it: first. */
		if (c.libpython) {
			memmove(cand + 1, cand, nc * sizeof(*cand));
			cand[0] = c;
		} else {
			cand[nc] = c;
		}
		nc++;
	}
	return nc;
}

/*
 * Say once that pid runs an interpreter we do not read. Once per pid and version for a minute:
 * a process is looked at again when its exec record arrives after its first samples (records
 * of different CPUs come out of the ring in any order), and that is not news.
 */
static void log_unsupported(struct python *py, uint32_t pid, unsigned int major, unsigned int minor,
			    bool ft, const char *why)
{
	uint32_t ver = major << 16 | minor << 1 | ft;
	uint64_t now = mono_ns();
	size_t i;

	for (i = 0; i < PY_LOGGED_MAX; i++) {
		if (py->logged[i].pid == pid && py->logged[i].ver == ver &&
		    now - py->logged[i].ns < 60 * NSEC_PER_SEC)
			return;
	}
	py->logged[py->logged_next] = (struct py_logged){.pid = pid, .ver = ver, .ns = now};
	py->logged_next = (py->logged_next + 1) % PY_LOGGED_MAX;
	if (major)
		pr_info("python: pid %u: CPython %u.%u%s is not supported%s%s: native frames only",
			pid, major, minor, ft ? "t (free-threaded)" : "", why ? ": " : "",
			why ? why : "");
	else
		pr_info("python: pid %u: CPython of unknown version%s%s: native frames only", pid,
			why ? ": " : "", why ? why : "");
}

/*
 * Decide for one candidate that holds _PyRuntime. Returns an enum python_detect value with
 * p filled, or a negative errno when the process could not be read.
 */
static int detect_in(struct python *py, struct py_proc *p, const struct py_candidate *cand,
		     const struct py_elf *pe)
{
	uint8_t dbg[PY_DEBUG_OFFSETS_MAX];
	unsigned int major = cand->major, minor = cand->minor;
	uint32_t hex = 0, dbg_hex = 0;
	uint64_t bias, runtime, v64;
	bool ft = cand->ft, dbg_ft = false;
	int err, dbg_err = -EPROTO;

	err = load_bias(pe, cand->map, &bias);
	if (err) {
		pr_warn("python: pid %u: %s: mapping not covered by a PT_LOAD", p->pid,
			cand->map->path);
		return PYTHON_NOT_PYTHON;
	}
	runtime = (pe->has_runtime ? pe->runtime : pe->runtime_scn) + bias;
	if (pe->has_version) {
		err = python_read_mem(py, p->pid, pe->py_version + bias, &v64, sizeof(v64));
		if (err)
			return err == -EFAULT ? -EAGAIN : err;
		hex = (uint32_t)v64;
		if ((hex >> 24) == 3) {
			major = 3;
			minor = (hex >> 16) & 0xff;
		}
	}
	/* 3.13+: the table of offsets CPython keeps for out-of-process readers. */
	if (major == 0 || (major == 3 && minor >= 13)) {
		err = python_read_mem(py, p->pid, runtime, dbg, sizeof(dbg));
		if (err)
			return err == -EFAULT ? -EAGAIN : err;
		dbg_err = py_layout_from_debug(dbg, sizeof(dbg), &dbg_hex, &dbg_ft, &p->layout);
		if (dbg_err != -EPROTO && major == 0 && (dbg_hex >> 24) == 3) {
			major = 3;
			minor = (dbg_hex >> 16) & 0xff;
		}
		ft = ft || dbg_ft;
	}
	if (major)
		p->version = PY_VER(major, minor);
	if (ft) {
		/*
		 * No frames, but the sampler is told there is no GIL: an entry that says only
		 * that (python__detect hands it out with PYTHON_UNSUPPORTED).
		 */
		memset(&p->cfg, 0, sizeof(p->cfg));
		p->cfg.runtime_addr = runtime;
		p->cfg.version = p->version;
		p->cfg.gil_kind = PROFD_PY_GIL_DISABLED;
		log_unsupported(py, p->pid, major, minor, true, NULL);
		return PYTHON_UNSUPPORTED;
	}
	if (!major) {
		log_unsupported(py, p->pid, 0, 0, false, "no Py_Version and no usable file name");
		return PYTHON_UNSUPPORTED;
	}
	if (p->version < PY_VER_MIN || p->version > PY_VER_MAX) {
		log_unsupported(py, p->pid, major, minor, false, NULL);
		return PYTHON_UNSUPPORTED;
	}
	if (minor >= 13) {
		if (dbg_err == 0 && (dbg_hex >> 16) != (uint32_t)(0x0300 | minor)) {
			log_unsupported(py, p->pid, major, minor, false,
					"_Py_DebugOffsets names another version");
			return PYTHON_UNSUPPORTED;
		}
		if (dbg_err) {
			log_unsupported(py, p->pid, major, minor, false,
					dbg_err == -EPROTO ? "no _Py_DebugOffsets cookie"
							   : "implausible _Py_DebugOffsets");
			return PYTHON_UNSUPPORTED;
		}
	} else if (py_layout_static(p->version, &p->layout)) {
		log_unsupported(py, p->pid, major, minor, false, NULL);
		return PYTHON_UNSUPPORTED;
	}
	if (!pe->has_code_type) {
		log_unsupported(py, p->pid, major, minor, false, "no PyCode_Type symbol");
		return PYTHON_UNSUPPORTED;
	}
	if (!py_layout_plausible(&p->layout)) {
		log_unsupported(py, p->pid, major, minor, false,
				"object fields beyond what profd reads");
		return PYTHON_UNSUPPORTED;
	}
	p->code_type = pe->code_type + bias;
	py_layout_to_cfg(&p->layout, runtime, &p->cfg);
	pr_debug("python: pid %u: CPython %u.%u in %s, _PyRuntime at %#llx", p->pid, major, minor,
		 cand->map->path, (unsigned long long)runtime);
	return PYTHON_SUPPORTED;
}

int python_detect_proc(struct python *py, struct py_proc *p)
{
	struct py_candidate cand[MAX_CANDIDATES];
	struct proc_map *maps = NULL;
	char exe[PATH_MAX] = "";
	struct py_elf pe;
	size_t n = 0, nc, i;
	bool exe_needs_libpython = false, libpython_mapped = false;
	int err, ret = PYTHON_NOT_PYTHON;

	err = procfs_read_maps(py->proc_root, p->pid, false, &maps, &n);
	if (err)
		return err;
	err = exe_path(py, p->pid, exe, sizeof(exe));
	if (err == -ESRCH)
		goto out_err;
	nc = find_candidates(maps, n, exe, cand);
	for (i = 0; i < nc; i++)
		libpython_mapped = libpython_mapped || cand[i].libpython;
	for (i = 0; i < nc; i++) {
		if (scan_elf(py, p->pid, cand[i].map, &pe))
			continue;
		if (!cand[i].libpython && strcmp(cand[i].map->path, exe) == 0)
			exe_needs_libpython = pe.needs_libpython;
		if (pe.has_runtime || pe.has_runtime_scn) {
			ret = detect_in(py, p, &cand[i], &pe);
			goto out;
		}
		/* Before 3.7 there is no _PyRuntime; the name still tells the version. */
		if (cand[i].libpython || (cand[i].major && !pe.needs_libpython)) {
			p->version = PY_VER(cand[i].major, cand[i].minor);
			log_unsupported(py, p->pid, cand[i].major, cand[i].minor, cand[i].ft,
					"no _PyRuntime");
			ret = PYTHON_UNSUPPORTED;
			goto out;
		}
	}
	/* Caught between exec and the loader mapping libpython: ask again later. */
	if (exe_needs_libpython && !libpython_mapped)
		ret = -EAGAIN;
out:
	procfs_free_maps(maps, n);
	return ret;
out_err:
	procfs_free_maps(maps, n);
	return err;
}
