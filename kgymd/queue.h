/*
 * queue.h -- where the scheduler's tasks live: the queue backend interface.
 *
 * The scheduler (sched.c) decides what runs when: priorities, the running
 * limit, timeouts, cancel.  Where tasks are kept, and where a node finds
 * the next ones to run, is a backend's business, after OpenSMTPD's
 * queue_backend: the SQLite store of one machine (queue_sqlite.c), or a
 * Redis stream shared by several machines (queue_redis.c, DESIGN §12)
 * that keeps a SQLite store of its own under it.
 *
 * Ownership: a batch or a set of marks is owned by the scheduler, lent to
 * the backend from the call until its done() runs on the loop.  Rows and
 * results returned to a callback are borrowed for the call.
 */
#ifndef KGYMD_QUEUE_H
#define KGYMD_QUEUE_H

#include "kgymd.h"

/* One new task of a submit. */
struct queue_task {
	struct store_row row;		/* owned strings; row.payload made by the backend */
	json_t *payload;		/* the request's; the loop leaves it alone meanwhile */
	int64_t seq;
	bool dup;			/* the queue had the id: that task stands */
	enum task_state dup_state;	/* its state and owner, when dup */
	char *dup_owner;
};

/* The new tasks of one submit, stored together. */
struct queue_batch {
	struct queue_task *t;
	size_t n, cap;
	int error;			/* 0, or why none was stored */
	char *cause;			/* for the client: names no host detail */
	void (*done)(struct queue_batch *b, void *arg);	/* on the loop */
	void *arg;
	struct writer_job job;		/* the backend's */
	void *backend;			/* the backend's, while it holds the batch */
};

/* One task's change of state. */
struct queue_mark {
	char id[KGYM_TASK_ID_MAX + 1];
	int attempt;
	enum task_state state;		/* ended: the terminal state */
	char *code, *message, *text;	/* ended: error and result JSON text */
	json_t *result;			/* ended: the result, when text is still to be made */
	bool want_payload;		/* running: read and parse its payload too */
	json_t *payload;		/* running: that payload (owned), NULL if none came */
	struct task *task;		/* the scheduler's (ended: kept until done) */
	int error;			/* this task's */
	bool lost;			/* another node's result stands: see state/canon */
	json_t *canon;			/* that result (owned), when lost */
};

/* State changes of several tasks, written together. */
struct queue_marks {
	int64_t now_ms;
	int error;			/* all of them */
	size_t n, next;
	void (*done)(struct queue_marks *m, void *arg);	/* on the loop */
	void *arg;
	struct writer_job job;		/* the backend's */
	TAILQ_ENTRY(queue_marks) entry;	/* the backend's */
	struct queue_mark t[];
};

/* A lookup's answer: error 0 and a row, or -ENOENT, or another -errno. */
typedef void queue_lookup_cb(int error, const struct store_row *row, void *arg);
typedef int queue_row_cb(const struct store_row *row, void *arg);

struct queue_backend {
	const char *name;
	/* Tasks of a submit run on this node (else they come back via claim). */
	bool local;
	/* Start-up: open under state_dir, recover, start writing off the loop. */
	int	(*open)(const char *state_dir, char **ret_cause);
	void	(*close)(void);
	/*
	 * Store new tasks; done() once they are stored (b->error 0, dups
	 * marked) or none is (-EAGAIN: the backend is unreachable).
	 */
	void	(*submit)(struct queue_batch *b);
	/* This node has room for `room` more tasks: hand them to sched_adopt(). */
	void	(*claim)(size_t room);
	/* Mark tasks running (attempt, started), or ended with their results. */
	void	(*mark_running)(struct queue_marks *m);
	void	(*mark_done)(struct queue_marks *m);
	/* Shutdown: a running task goes back to the queue. */
	int	(*mark_queued)(const char *id);
	/* This node's copy of a task (sync), and its payload. */
	int	(*get)(const char *id, struct store_row **ret_row);
	int	(*get_payload)(const char *id, char **ret_payload);
	/* Any node's task (NULL: get is the whole truth); cb may run at once. */
	void	(*lookup)(const char *id, bool with_result, queue_lookup_cb *cb, void *arg);
	/* Cancel a task that is not live here (NULL: nothing to do). */
	void	(*cancel)(const char *id, queue_lookup_cb *cb, void *arg);
	/* Rows newest first; see store_list().  done(error) once walked. */
	void	(*list)(int state, const char *owner, int64_t before_seq, int limit,
		    queue_row_cb *row_cb, void (*done)(int error, void *arg), void *arg);
	/* Terminal tasks finished before before_ms go. */
	int	(*prune)(int64_t before_ms, int *ret_n, int64_t by_state[TASK__STATE_COUNT]);
	/* Whether the queue can be reached now (NULL: always). */
	bool	(*reachable)(void);
	/* The nodes sharing the queue, [{node,gpus,workers,...}] (NULL: one). */
	void	(*nodes)(void (*cb)(json_t *nodes, void *arg), void *arg);
};

/* The backend in use: queue_sqlite unless [cluster] is configured. */
extern const struct queue_backend *queue;
extern const struct queue_backend queue_sqlite;
extern const struct queue_backend queue_redis;

/* This node's name in a shared queue; NULL for a single node. */
extern const char *queue_node;

void	queue_select(const struct config *config);
/* A batch's new task k (grows it).  NULL on allocation failure. */
struct queue_task *queue_batch_add(struct queue_batch *b);
void	queue_batch_clear(struct queue_batch *b);
struct queue_marks *queue_marks_new(size_t n);
void	queue_marks_free(struct queue_marks *m);
/* The result's text of an ended task, made from its tree on first use (any thread). */
const char *queue_mark_text(struct queue_mark *t);

/* queue_sqlite.c's pieces that queue_redis.c builds on. */
int	queue_sqlite_open(const char *state_dir, bool recover_here, char **ret_cause);
void	queue_sqlite_submit(struct queue_batch *b);
void	queue_sqlite_mark_running(struct queue_marks *m);
void	queue_sqlite_mark_done(struct queue_marks *m);
/* Store claimed tasks of other nodes (insert, or leave the row there). */
void	queue_sqlite_adopt(struct queue_batch *b);

/* sched.c: a task claimed from the shared queue, to run here. */
int	sched_adopt(const struct store_row *row, json_t *payload);
/* sched.c: a task ended elsewhere (cancelled, or finished by another node). */
void	sched_ended_elsewhere(const char *id);

#endif /* KGYMD_QUEUE_H */
