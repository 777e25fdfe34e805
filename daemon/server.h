/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The protocol server: a libuv pipe server on a Unix socket. It frames and decodes requests,
 * answers Hello itself (protocol version check), identifies each peer with SO_PEERCRED and hands
 * every other request to the handler. Each connection has one request in flight: the next is
 * handled once the last reply is written, at most one per connection per loop turn; non-root
 * requests share a time budget per turn and a bound on their user's queued replies, so that
 * no client load delays root or the draining of the sample ring for long. Bad input (garbage,
 * oversized or truncated frames, unknown requests), clients that vanish mid-reply and slow readers
 * cost one connection, never the daemon.
 *
 * Everything runs on the loop's thread; none of these functions may be called from another.
 * The process must ignore SIGPIPE (signal(SIGPIPE, SIG_IGN)): libuv writes replies with write(),
 * and a client that disconnects mid-reply would otherwise kill the daemon instead of costing
 * one EPIPE.
 */
#ifndef PROFD_SERVER_H
#define PROFD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "memuse.h"
#include "profd.pb-c.h"

struct server_peer {
	uint32_t uid;
	uint32_t gid;
	int32_t pid;
	uint64_t conn_id; /* unique per connection of this server, from 1 */
};

/*
 * Answer one request (never a Hello). On success set *frame to a malloc'd, already framed reply
 * (see wire_pack_response) and return 0; the server frees it. A negative return closes the
 * connection.
 */
typedef int (*server_handle_fn)(void *ctx, const struct server_peer *peer,
				const Profd__Request *req, uint8_t **frame, size_t *frame_len);
/*
 * A connection that was admitted (its peer known) is closing, for whatever reason: the peer
 * hung up, an error, a timeout or server__close. Called once per connection, on the loop's
 * thread, before its memory goes; ctx is server_opts.ctx.
 */
typedef void (*server_close_fn)(void *ctx, const struct server_peer *peer);

struct server_opts {
	/*
	 * socket path; its directory is created with mode 0755, or, when it exists, must belong
	 * to root or the daemon's user and not be writable by others unless sticky
	 */
	const char *path;
	mode_t socket_mode;  /* 0 means 0660 */
	bool set_socket_gid; /* give the socket file the group socket_gid */
	gid_t socket_gid;
	server_handle_fn handle;
	server_close_fn on_close; /* NULL: not told */
	void *ctx;
	unsigned int max_clients;	  /* 0 means 64 */
	unsigned int max_clients_per_uid; /* connections of one non-root uid; 0 means a quarter
					   * of max_clients */
	unsigned int max_uplinks; /* connections marked by server__set_uplink; 0 means 1024 */
	unsigned int max_uplinks_per_uid; /* uplinks of one non-root uid; 0 means 64 */
	uint64_t idle_timeout_ms;	  /* a connection with no complete request for this long is
					   * closed; 0 means 30000 (each request starts the time again, so
					   * a client that sends regularly, like the CUPTI library's
					   * batches, stays) */
	size_t max_pending_write;   /* bytes queued to one client before it is treated as stuck and
				     * reading from it pauses; 0 means 4 MiB */
	uint64_t write_timeout_ms;  /* a reply not drained in this time closes the connection;
				     * 0 means 60000 */
	size_t max_pending_per_uid; /* reply bytes queued to one non-root uid's connections
				     * before its next requests wait for them to drain; 0 means
				     * 32 MiB */
};

struct server;

/*
 * Bind and listen. Refuses to take over a path where a live daemon answers (-EADDRINUSE); a
 * stale socket file is replaced; anything else at the path is refused (-EEXIST). Only the last
 * component of the socket's directory is created. Returns the server (free with server__close)
 * or NULL with errno set; after a libuv failure, a little memory is released only once the loop
 * runs its close callbacks.
 */
struct server *server__new(uv_loop_t *loop, const struct server_opts *opts);
/*
 * Stop listening, close every connection and unlink the socket, unless the file at the path is
 * no longer the one this server bound. Handles close asynchronously:
 * the memory is released once the loop has run the close callbacks (uv_run after this call).
 * Accepts NULL.
 */
void server__close(struct server *s);
/* Connected clients right now (uplinks not included). */
unsigned int server__clients(const struct server *s);
/*
 * Memory of the connections (count: every open one, admitted or not): their state, replies
 * queued, requests held back and partial frames read.
 */
void server__memory(const struct server *s, struct mem_usage *out);
/*
 * Mark a connection as an uplink: a long-lived data source such as a CUDA process's CUPTI
 * library, one per process. Uplinks leave the client counts (so a user with many GPU
 * processes still gets profctl connections) and have their own limits; from then on the
 * connection may only send GPU messages (GpuAttach, GpuBatch), anything else is answered with
 * a bad request. Returns 0, -ENOENT for no such open connection, -EBUSY when max_uplinks are
 * connected or the peer's (non-root) uid has max_uplinks_per_uid.
 */
int server__set_uplink(struct server *s, uint64_t conn_id);
/*
 * Close connection conn_id now (the handler's on_close runs before this returns), e.g. a
 * process's older uplink when it connected again. Returns 0 or -ENOENT.
 */
int server__close_conn(struct server *s, uint64_t conn_id);
/* Uplinks connected right now. */
unsigned int server__uplinks(const struct server *s);

#endif
