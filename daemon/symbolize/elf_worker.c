// SPDX-License-Identifier: BSD-2-Clause
/* Loads of big ELF images off the event loop: see elf_worker.h. */
#include "elf_worker.h"

#include "timeutil.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct elf_job {
	struct elf_job *next;
	int fd;
	bool fdes_only; /* res.img gets only the CFI ranges (and debug_path, to find them) */
	char *debug_root, *fs_root, *path;
	struct elf_worker_result res;
};

struct elf_worker {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* a job queued, or stop */
	pthread_cond_t done; /* a job finished */
	bool stop;
	/* guarded by lock: FIFO lists of jobs to run and of results to collect */
	struct elf_job *todo, **todo_tail;
	struct elf_job *finished, **finished_tail;
	atomic_size_t pending;
};

static void job_free(struct elf_job *j)
{
	if (!j)
		return;
	if (j->fd >= 0)
		close(j->fd);
	elf_image__fini(&j->res.img);
	free(j->debug_root);
	free(j->fs_root);
	free(j->path);
	free(j);
}

static void run_job(struct elf_job *j)
{
	struct elf_debug_ctx dbg = {
	    .debug_root = j->debug_root,
	    .fs_root = j->fs_root,
	    .path = j->path,
	};
	uint64_t t0 = mono_ns();

	elf_big_read_begin();
	if (j->fdes_only) {
		j->res.img.debug_path = j->path;
		j->path = NULL;
		j->res.err = elf_image__load_fdes(&j->res.img, j->fd);
	} else {
		j->res.err = elf_image__load(&j->res.img, j->fd, &dbg);
	}
	close(j->fd);
	j->fd = -1;
	/*
	 * libelf's copies of sections (relocations for the PLT names, .eh_frame) were freed: give
	 * the pages back now, not when the allocator next decides to, so that the daemon's memory
	 * does not keep the peak of its biggest library.
	 */
	malloc_trim(0);
	elf_big_read_end();
	j->res.wall_ns = mono_ns() - t0;
}

static void *worker_main(void *arg)
{
	struct elf_worker *w = arg;
	struct elf_job *j;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->stop && !w->todo)
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->stop)
			break;
		j = w->todo;
		w->todo = j->next;
		if (!w->todo)
			w->todo_tail = &w->todo;
		pthread_mutex_unlock(&w->lock);

		run_job(j);

		pthread_mutex_lock(&w->lock);
		j->next = NULL;
		*w->finished_tail = j;
		w->finished_tail = &j->next;
		pthread_cond_broadcast(&w->done);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct elf_worker *elf_worker__new(void)
{
	struct elf_worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	pthread_cond_init(&w->done, NULL);
	w->todo_tail = &w->todo;
	w->finished_tail = &w->finished;
	atomic_init(&w->pending, 0);
	return w;
}

/* The thread, started with the first job; signals go to the daemon's other threads. */
static int worker_start_thread(struct elf_worker *w)
{
	sigset_t all, old;
	int err;

	if (w->started)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	w->started = true;
	return 0;
}

/* Queue job j (taken) on fd (taken when it returns 0). */
static int queue_job(struct elf_worker *w, struct elf_job *j, int fd)
{
	int err = worker_start_thread(w);

	if (err) {
		job_free(j);
		return err;
	}
	j->fd = fd;
	pthread_mutex_lock(&w->lock);
	*w->todo_tail = j;
	w->todo_tail = &j->next;
	atomic_fetch_add(&w->pending, 1);
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int elf_worker__start_fdes(struct elf_worker *w, int fd, const char *debug_path, uint64_t tag)
{
	struct elf_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->fd = -1;
	j->fdes_only = true;
	j->res.tag = tag;
	if (debug_path && !(j->path = strdup(debug_path))) {
		job_free(j);
		return -ENOMEM;
	}
	return queue_job(w, j, fd);
}

int elf_worker__start(struct elf_worker *w, int fd, const struct elf_debug_ctx *dbg, uint64_t tag)
{
	struct elf_job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	j->fd = -1;
	j->res.tag = tag;
	j->debug_root = dbg && dbg->debug_root ? strdup(dbg->debug_root) : NULL;
	j->fs_root = dbg && dbg->fs_root ? strdup(dbg->fs_root) : NULL;
	j->path = dbg && dbg->path ? strdup(dbg->path) : NULL;
	if ((dbg && dbg->debug_root && !j->debug_root) || (dbg && dbg->fs_root && !j->fs_root) ||
	    (dbg && dbg->path && !j->path)) {
		job_free(j);
		return -ENOMEM;
	}
	return queue_job(w, j, fd);
}

size_t elf_worker__pending(struct elf_worker *w)
{
	return w ? atomic_load(&w->pending) : 0;
}

bool elf_worker__collect(struct elf_worker *w, struct elf_worker_result *res, bool wait)
{
	struct elf_job *j;

	if (!elf_worker__pending(w))
		return false;
	pthread_mutex_lock(&w->lock);
	while (wait && !w->finished)
		pthread_cond_wait(&w->done, &w->lock);
	j = w->finished;
	if (j) {
		w->finished = j->next;
		if (!w->finished)
			w->finished_tail = &w->finished;
	}
	pthread_mutex_unlock(&w->lock);
	if (!j)
		return false;
	atomic_fetch_sub(&w->pending, 1);
	*res = j->res;
	memset(&j->res.img, 0, sizeof(j->res.img));
	job_free(j);
	return true;
}

void elf_worker__free(struct elf_worker *w)
{
	struct elf_job *j, *next;

	if (!w)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	for (j = w->todo; j; j = next) {
		next = j->next;
		job_free(j);
	}
	for (j = w->finished; j; j = next) {
		next = j->next;
		job_free(j);
	}
	pthread_cond_destroy(&w->done);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
