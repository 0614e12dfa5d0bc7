/*
 * ops.h -- what ops.c and ops_queue.c share: requests answered later,
 * from a shared queue's reply.  An ops_later is owned by ops_queue.c's
 * list from ops_later_new() until ops_later_free().
 */
#ifndef KGYMD_OPS_H
#define KGYMD_OPS_H

#include "queue.h"

struct ops_list_page {
	json_t *tasks;
	int64_t last_seq;
	int64_t limit;
};

struct ops_later {
	struct peer *peer;		/* NULL once gone */
	struct principal who;		/* whom the request acts for */
	json_t *req_id;
	json_t *reply;
	char id[KGYM_TASK_ID_MAX + 1];
	struct store_row *local;	/* this node's copy of the task, or NULL */
	struct ops_list_page *page;
	TAILQ_ENTRY(ops_later) entry;
};

struct ops_later *ops_later_new(struct peer *peer, struct request *req, json_t *reply,
	    const char *id);
void	ops_later_free(struct ops_later *l);
void	ops_later_error(struct ops_later *l, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
void	ops_verror(struct peer *peer, json_t *req_id, const char *code, const char *fmt,
	    va_list ap);
void	ops_row_fields(json_t *o, const struct store_row *row);
/* With a shared queue, ask it about `id` (true: cb answers later). */
bool	ops_ask_queue(struct peer *peer, struct request *req, json_t *reply, const char *id,
	    bool with_result, queue_lookup_cb *cb);
queue_lookup_cb	ops_status_looked_up, ops_result_looked_up, ops_cancel_looked_up;
int	ops_list_row(const struct store_row *row, void *arg);
void	ops_list_done(int error, void *arg);
/* Send the reply, with every node's heartbeat when the queue is shared. */
void	ops_send_with_nodes(struct peer *peer, struct request *req, json_t *reply);

#endif /* KGYMD_OPS_H */
