/*
 * cluster.h -- kgymd nodes sharing one queue on Redis Streams (DESIGN §12):
 * the connections (cluster.c) and the names both sides of a key agree on.
 * queue_redis.c is the queue backend built on them.
 *
 * Keys: kgym:q:P the stream of priority P (0 high, 1 normal, 2 low), read
 * by the consumer group "kgymd", one consumer per node; kgym:t:ID a task
 * (its fields, payload, and at the end its result, then a TTL); kgym:seq
 * the submission counter; kgym:idx and kgym:idx:OWNER the tasks by
 * submission order (for list); kgym:nodes the nodes' heartbeats.
 */
#ifndef KGYMD_CLUSTER_H
#define KGYMD_CLUSTER_H

#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "queue.h"

#define CLUSTER_STREAM		"kgym:q:"
#define CLUSTER_GROUP		"kgymd"
#define CLUSTER_CHANNEL_WAKE	"kgym:wake"
#define CLUSTER_CHANNEL_DONE	"kgym:done"

typedef void cluster_reply_cb(redisAsyncContext *ac, void *reply, void *arg);

/*
 * Connect (and keep connecting) to [cluster] redis.  on_up runs each time
 * both connections are up; on_message for every message of the channels.
 */
int	cluster_start(void (*on_up)(void),
	    void (*on_message)(const char *channel, const char *data, size_t len),
	    char **ret_cause);
/* Close both connections; pending callbacks run with a NULL reply. */
void	cluster_stop(void);
bool	cluster_up(void);
/* Send one command; cb gets the reply, or NULL when the connection is lost.  -EAGAIN: down. */
int	cluster_command(cluster_reply_cb *cb, void *arg, int argc, const char **argv,
	    const size_t *lens);

/* A command's words, some owned (freed by clear). */
struct cluster_argv {
	const char **v;
	size_t *len;
	char **owned;
	size_t n, cap;
};
int	cluster_argv_add(struct cluster_argv *a, const char *s, size_t len);
int	cluster_argv_str(struct cluster_argv *a, const char *s);
int	cluster_argv_fmt(struct cluster_argv *a, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
void	cluster_argv_clear(struct cluster_argv *a);

/* This node's name (queue_redis.c). */
extern char cluster_node[65];

/* Replies (cluster_read.c): a string or NULL, an integer or def, a copy. */
const char *cluster_str(const redisReply *r);
long long cluster_int(const redisReply *r, long long def);
char	*cluster_dup(const redisReply *r);
/* False for no reply or an error reply (logged, naming `what`). */
bool	cluster_reply_ok(const redisReply *r, const char *what);
/* EVAL of a script with no keys: begin the words, then send them (cleared). */
int	cluster_eval_begin(struct cluster_argv *a, const char *script);
int	cluster_eval(const char *script, struct cluster_argv *a, cluster_reply_cb *cb, void *arg);
/* The queue backend's reads (queue.h's lookup, cancel, list, nodes). */
void	cluster_lookup(const char *id, bool with_result, queue_lookup_cb *cb, void *arg);
void	cluster_cancel(const char *id, queue_lookup_cb *cb, void *arg);
void	cluster_list(int state, const char *owner, int64_t before_seq, int limit,
	    queue_row_cb *row_cb, void (*done)(int, void *), void *arg);
void	cluster_nodes(void (*cb)(json_t *nodes, void *arg), void *arg);

/* The Lua scripts of queue_redis.c (cluster_lua.c). */
extern const char cluster_lua_submit[];
extern const char cluster_lua_claim[];
extern const char cluster_lua_renew[];
extern const char cluster_lua_finish[];
extern const char cluster_lua_list[];

#endif /* KGYMD_CLUSTER_H */
