// SPDX-License-Identifier: BSD-2-Clause
/*
 * Streaming perf-map scan (see perf_map.h). The line format is the one perf(1) documents for
 * JIT interfaces (tools/perf/Documentation/jit-interface.txt in the kernel tree): "START SIZE
 * symbolname", START and SIZE in hex.
 */
#include "perf_map.h"

#include "parse.h"
#include "timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes read at a time; a line longer than LINE_MAX_LEN is skipped whole. */
#define CHUNK (64u << 10)
#define LINE_MAX_LEN (PERF_MAP_NAME_MAX + 64)

int perf_map__parse_line(char *line, uint64_t *start, uint64_t *size, char **name)
{
	char *p = line, *sp;
	int i;

	for (i = 0; i < 2; i++) {
		sp = strchr(p, ' ');
		if (!sp)
			return -EINVAL;
		*sp = '\0';
		if (parse_hex_u64(p, i ? size : start))
			return -EINVAL;
		p = sp + 1;
	}
	sp = p + strlen(p);
	while (sp > p && (sp[-1] == '\r' || sp[-1] == ' ' || sp[-1] == '\t'))
		*--sp = '\0';
	if (!*p || sp - p > PERF_MAP_NAME_MAX || !*size || *start + *size < *start)
		return -EINVAL;
	*name = p;
	return 0;
}

uint64_t perf_map__table_bytes(const struct sym_table *t)
{
	return (uint64_t)t->n * sizeof(*t->syms) + t->pool_len;
}

/* Whether [start, start + size) holds one of the sorted wanted addresses. */
static bool covers_wanted(const struct perf_map_scan_opts *o, uint64_t start, uint64_t size)
{
	size_t lo = 0, hi = o->n_wanted, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (o->wanted[mid] < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < o->n_wanted && o->wanted[lo] - start < size;
}

struct scan {
	const struct perf_map_scan_opts *o;
	struct sym_table *t;
	struct perf_map_scan_stats st;
	int err;
};

/*
 * Over budget: keep only the entries that cover wanted addresses, in the order they were added
 * (so a later line for the same start still wins when the table is finished).
 */
static int go_sparse(struct scan *sc)
{
	struct sym_table kept = {0};
	struct sym_table *t = sc->t;
	size_t i;
	int err;

	for (i = 0; i < t->n; i++) {
		struct sym_entry *e = &t->syms[i];

		if (!covers_wanted(sc->o, e->addr, e->size ? e->size : 1)) {
			sc->st.dropped++;
			continue;
		}
		err = sym_table__add(&kept, e->addr, e->size, t->pool + e->name, 0);
		if (err) {
			sym_table__fini(&kept);
			return err;
		}
	}
	sym_table__fini(t);
	*t = kept;
	sc->st.sparse = true;
	return 0;
}

static void scan_line(struct scan *sc, char *line)
{
	uint64_t start, size, need;
	char *name;
	int err;

	if (perf_map__parse_line(line, &start, &size, &name)) {
		sc->st.bad_lines++;
		return;
	}
	sc->st.lines++;
	need = perf_map__table_bytes(sc->t) + sizeof(struct sym_entry) + strlen(name) + 1;
	if (!sc->st.sparse && need > sc->o->budget) {
		err = go_sparse(sc);
		if (err) {
			sc->err = err;
			return;
		}
		need = perf_map__table_bytes(sc->t) + sizeof(struct sym_entry) + strlen(name) + 1;
	}
	if (sc->st.sparse && (need > sc->o->budget || !covers_wanted(sc->o, start, size))) {
		sc->st.dropped++;
		return;
	}
	err = sym_table__add(sc->t, start, size, name, 0);
	if (err == -ENOMEM)
		sc->err = err;
	else if (err)
		sc->st.dropped++;
}

static void shrink_pool(struct sym_table *t)
{
	char *p;

	if (t->pool_len && t->pool_cap > t->pool_len) {
		p = realloc(t->pool, t->pool_len);
		if (p) {
			t->pool = p;
			t->pool_cap = t->pool_len;
		}
	}
}

int perf_map__scan(int fd, const struct perf_map_scan_opts *opts, struct sym_table *out,
		   struct perf_map_scan_stats *stats)
{
	struct scan sc = {.o = opts, .t = out};
	size_t have = 0, rest, want;
	bool skipping = false, eof = false;
	char *buf, *p, *nl;
	ssize_t n;

	buf = malloc(CHUNK + 1);
	if (!buf)
		return -ENOMEM;
	while (!eof && !sc.err) {
		if (opts->stop && atomic_load_explicit(opts->stop, memory_order_relaxed)) {
			sc.err = -ECANCELED;
			break;
		}
		want = CHUNK - have;
		if (sc.st.bytes_read + want > opts->max_read)
			want = (size_t)(opts->max_read - sc.st.bytes_read);
		if (!want) {
			/* At max_read: the line in progress may be cut, so it is not parsed. */
			sc.st.truncated = true;
			break;
		}
		n = read(fd, buf + have, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			sc.err = -errno;
			break;
		}
		eof = n == 0;
		sc.st.bytes_read += (uint64_t)n;
		have += (size_t)n;
		for (p = buf; !sc.err && (nl = memchr(p, '\n', (size_t)(buf + have - p)));
		     p = nl + 1) {
			*nl = '\0';
			if (skipping)
				skipping = false;
			else
				scan_line(&sc, p);
		}
		rest = (size_t)(buf + have - p);
		if (eof && rest && !skipping) {
			p[rest] = '\0';
			scan_line(&sc, p);
		} else if (skipping || rest >= LINE_MAX_LEN) {
			/* Too long to be an entry: drop what we have and skip to the next newline.
			 */
			if (!skipping)
				sc.st.bad_lines++;
			skipping = true;
			rest = 0;
		}
		memmove(buf, p, rest);
		have = rest;
	}
	free(buf);
	if (sc.err) {
		sym_table__fini(out);
		return sc.err;
	}
	/* A later line for the same start is newer code: sym_table keeps the later one. */
	sym_table__finish(out);
	shrink_pool(out);
	sc.st.kept = out->n;
	if (stats)
		*stats = sc.st;
	return 0;
}

/* --- the worker ------------------------------------------------------------------------------- */

enum { W_IDLE, W_QUEUED, W_RUNNING, W_DONE };

struct perf_map_worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool started, quit;
	atomic_int state; /* W_*: written under mu, read without it by the fast paths */
	atomic_bool stop;
	int fd;
	struct perf_map_scan_opts opts;
	struct perf_map_result res;
};

static void *worker_main(void *arg)
{
	struct perf_map_worker *w = arg;
	struct perf_map_result res;
	struct perf_map_scan_opts o;
	uint64_t t0;
	int fd;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->quit && atomic_load(&w->state) != W_QUEUED)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->quit)
			break;
		atomic_store(&w->state, W_RUNNING);
		fd = w->fd;
		o = w->opts;
		res = w->res;
		pthread_mutex_unlock(&w->mu);

		t0 = mono_ns();
		res.table = (struct sym_table){0};
		res.err = perf_map__scan(fd, &o, &res.table, &res.stats);
		res.wall_ns = mono_ns() - t0;
		close(fd);

		pthread_mutex_lock(&w->mu);
		w->fd = -1;
		w->res = res;
		atomic_store(&w->state, W_DONE);
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct perf_map_worker *perf_map_worker__new(void)
{
	struct perf_map_worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	atomic_init(&w->state, W_IDLE);
	atomic_init(&w->stop, false);
	w->fd = -1;
	return w;
}

static void result_free(struct perf_map_result *res)
{
	sym_table__fini(&res->table);
	free(res->wanted);
	res->wanted = NULL;
}

void perf_map_worker__free(struct perf_map_worker *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->quit = true;
	atomic_store(&w->stop, true);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (w->started)
		pthread_join(w->thread, NULL);
	switch (atomic_load(&w->state)) {
	case W_QUEUED:
		close(w->fd);
		free(w->res.wanted);
		break;
	case W_DONE:
		result_free(&w->res);
		break;
	}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* The thread takes no signals: they stay with the event loop's thread. */
static int worker_spawn(struct perf_map_worker *w)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	w->started = true;
	return 0;
}

int perf_map_worker__start(struct perf_map_worker *w, int fd, uint64_t *wanted, size_t n_wanted,
			   uint64_t budget, uint64_t max_read, uint64_t tag)
{
	int err;

	if (atomic_load(&w->state) != W_IDLE)
		return -EBUSY;
	if (!w->started) {
		err = worker_spawn(w);
		if (err)
			return err;
	}
	pthread_mutex_lock(&w->mu);
	w->fd = fd;
	w->res = (struct perf_map_result){.tag = tag, .wanted = wanted, .n_wanted = n_wanted};
	w->opts = (struct perf_map_scan_opts){
	    .wanted = wanted,
	    .n_wanted = n_wanted,
	    .budget = budget,
	    .max_read = max_read,
	    .stop = &w->stop,
	};
	atomic_store(&w->state, W_QUEUED);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

bool perf_map_worker__busy(struct perf_map_worker *w)
{
	return atomic_load(&w->state) != W_IDLE;
}

bool perf_map_worker__collect(struct perf_map_worker *w, struct perf_map_result *res, bool wait)
{
	bool got = false;
	int st = atomic_load(&w->state);

	if (st == W_IDLE || (!wait && st != W_DONE))
		return false;
	pthread_mutex_lock(&w->mu);
	while (wait && (atomic_load(&w->state) == W_QUEUED || atomic_load(&w->state) == W_RUNNING))
		pthread_cond_wait(&w->cv, &w->mu);
	if (atomic_load(&w->state) == W_DONE) {
		*res = w->res;
		w->res = (struct perf_map_result){0};
		atomic_store(&w->state, W_IDLE);
		got = true;
	}
	pthread_mutex_unlock(&w->mu);
	return got;
}
