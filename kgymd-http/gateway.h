/*
 * gateway.h -- kgymd-http, the HTTP gateway: KernelGYM's wire API in front
 * of kgymd.  One header for the gateway's files, each listed with what it
 * does; ownership rule: x_new() returns an owned object, x_free(NULL) is a
 * no-op, json_t arguments are borrowed unless a comment says "stolen".
 *
 * The gateway holds no task state that a restart would lose: every task
 * lives in kgymd, reached through upstream.c over the ordinary control
 * socket; HTTP requests waiting for a task wait on a kgymd "wait".
 */
#ifndef KGYM_GATEWAY_H
#define KGYM_GATEWAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct event_base;
struct evhttp_request;

#define GW_NAME_MAX 64	   /* a token's name: kgymd's on_behalf_of */
#define GW_TASK_ID_MAX 128 /* kgymd's task_id: [A-Za-z0-9._:-] */
#define GW_DEFAULT_LISTEN "127.0.0.1:10907"

/* ---------------------------------------------------------------- conf.c */
/* [kgymd] socket and [http] of kgymd.conf, read with inih. */

struct gw_config {
	char *path;		  /* the file read */
	char *socket;		  /* [kgymd] socket */
	size_t max_request_bytes; /* [kgymd]'s too: the longest line kgymd reads */
	char *listen_host;	  /* [http] listen, split */
	int listen_port;
	bool loopback;	  /* listen_host is 127.0.0.1 or ::1 */
	char *token_file; /* NULL: no tokens */
	size_t max_body_bytes;
	int max_inflight;
	size_t max_reply_backlog; /* per connection: see server.c */
};

/* Load and check `path`; on error *ret_cause is "file:line: reason". */
int conf_load(const char *path, struct gw_config **ret_config, char **ret_cause);
void conf_free(struct gw_config *config);

/* -------------------------------------------------------------- tokens.c */
/* Bearer tokens: each one an identity (kgymd's on_behalf_of) or an admin. */

struct token {
	char name[GW_NAME_MAX + 1];
	bool admin;		  /* acts as the gateway itself: sees all */
	unsigned char digest[32]; /* SHA-256 of the secret */
};

struct token_set;

/* Read a token file ("NAME TOKEN [admin]" lines); refuses one others may read. */
int tokens_load(const char *path, struct token_set **ret_set, char **ret_cause);
void tokens_free(struct token_set *set);
size_t tokens_count(const struct token_set *set);
/*
 * The token whose secret is `secret` (len bytes), or NULL; compares with
 * every token in constant time, so timing tells nothing of any secret.
 */
const struct token *tokens_find(
    const struct token_set *set, const char *secret, size_t len);

/* ------------------------------------------------------------ upstream.c */
/*
 * The gateway's connection to kgymd: non-blocking, persistent, many
 * requests in flight, matched by id; reconnects with backoff on a timer.
 */

/*
 * Called for every line answering a call (events, replies), `last` true
 * on the line that ends it; when kgymd goes away first, once with msg
 * NULL and last true.  The callback may start new calls.
 */
typedef void (*up_cb)(const json_t *msg, bool last, void *arg);
struct up_call;

/* max_line: kgymd's max_request_bytes, the longest line up_call() sends. */
int up_init(struct event_base *base, const char *socket_path, size_t max_line);
void up_free(void);
/* Connected and said hello. */
bool up_ready(void);
/* Why not ready, for a 503's message (no host detail). */
const char *up_why_down(void);
/* kgymd said this gateway may name principals (gateway_uids). */
bool up_is_gateway(void);
/*
 * Send `req` (stolen; this adds v and id, and on_behalf_of when `as` is
 * not NULL).  A request that waits (op wait, submit with wait) ends with
 * its "done" reply.  -ENOTCONN when kgymd is not there, -EAGAIN when it
 * has not read 64 MiB of requests yet, -EMSGSIZE when the line would be
 * longer than max_line (cb not called in any of these).
 */
int up_call(json_t *req, const char *as, up_cb cb, void *arg);
size_t up_calls_in_flight(void);

/* -------------------------------------------------------------- server.c */
/* The HTTP side: listener, routing, authentication, limits, replies. */

struct gw_req;

int server_start(struct event_base *base, const struct gw_config *config,
    struct token_set *tokens, char **ret_cause);
void server_stop(void);

/* The request's principal for kgymd ("on_behalf_of"), NULL: the gateway itself. */
const char *gw_req_as(const struct gw_req *r);
/* The body as JSON: NULL after answering 400 (not an object, bad JSON). */
json_t *gw_req_body(struct gw_req *r);
/* Reply with a JSON body (borrowed) and end the request. */
void gw_reply_json(struct gw_req *r, int code, const json_t *body);
/* Reply with a text body and end the request. */
void gw_reply_text(
    struct gw_req *r, int code, const char *content_type, const char *text, size_t len);
/*
 * Reply with KernelGYM's ErrorResponse: `code` the HTTP status, `ecode`
 * the X-Error-Code, `field` the field at fault (or NULL) in X-Error-Field,
 * `task_id` or NULL.
 */
void gw_reply_error(struct gw_req *r, int code, const char *ecode, const char *field,
    const char *task_id, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Answer from a kgymd error reply (code, message): 400/404/409/429/503. */
void gw_reply_kgymd_error(struct gw_req *r, const json_t *reply, const char *task_id,
    const char *field_prefix);
/*
 * The same, for a task whose payload is the request's "payload" object
 * (/workflow/submit): the plugin's field names get payload_prefix too.
 */
void gw_reply_kgymd_error_in(struct gw_req *r, const json_t *reply, const char *task_id,
    const char *field_prefix, const char *payload_prefix);
/* 503: kgymd is not reachable. */
void gw_reply_unavailable(struct gw_req *r);
/* The answer to a failed gw_call() or up_call(): 413 for -EMSGSIZE, else 503. */
void gw_reply_call_failed(struct gw_req *r, int rc, const char *task_id);
/* Per-request scratch for the endpoint handlers (freed with the request). */
void *gw_req_state(struct gw_req *r, size_t size);
/* The path segment after the route's prefix (percent-decoded), or NULL. */
const char *gw_req_arg(const struct gw_req *r);
/* Milliseconds since the request arrived. */
double gw_req_age_ms(const struct gw_req *r);
/* A call for this request: its HTTP side keeps nothing when the client goes. */
int gw_call(struct gw_req *r, json_t *req, up_cb cb);
/* Keep the request past its answer until the matching release. */
void gw_req_hold(struct gw_req *r);
void gw_req_release(struct gw_req *r);

/* ------------------------------------------------------------ coalesce.c */
/* Synchronous /evaluate requests of one loop turn, one submit per principal. */
int coalesce_init(struct event_base *base);
void coalesce_free(void);
/*
 * Submit `task` (stolen) for `r` and answer `r` with its result (an
 * EvaluationResponse) or its error; -ENOMEM without answering.
 */
int coalesce_submit(
    struct gw_req *r, json_t *task, const char *task_id, int64_t submitted_ms);

/* ------------------------------------------------------------- shape.c */
/* KernelGYM's request and response shapes, to and from kgymd's. */

struct shape_error {
	char field[96]; /* "kernel_code", "tasks[3].timeout", ... */
	char message[512];
};

/*
 * An EvaluationRequest (or a WorkflowRequest when `workflow_form`) to a
 * kgymd task; `prefix` goes before field names ("tasks[3].").  The task
 * is a new object; NULL with *err filled when the request is wrong.
 */
json_t *shape_task(const json_t *body, bool workflow_form, const char *prefix,
    struct shape_error *err);
/* kgymd's state name to KernelGYM's TaskStatus. */
const char *shape_status(const char *state);
/* An ISO 8601 UTC time of ms since the epoch ("2026-11-25T18:00:00.123Z"). */
json_t *shape_time(int64_t ms);
int64_t shape_now_ms(void);
/*
 * EvaluationResponse from kgymd's result (borrowed): the result's fields,
 * status as KernelGYM says it, and the times.
 */
json_t *shape_evaluation(const char *task_id, const char *state, const json_t *result,
    int64_t submitted_ms, int64_t completed_ms);
/* Does `id` look like a kgymd task_id? */
bool shape_task_id_ok(const char *id);

/* ------------------------------------------------------------ evaluate.c */
void evaluate_one(struct gw_req *r);	/* POST /evaluate */
void evaluate_batch(struct gw_req *r);	/* POST /evaluate/batch */
void workflow_submit(struct gw_req *r); /* POST /workflow/submit */

/* --------------------------------------------------------------- tasks.c */
void tasks_status(struct gw_req *r);	       /* GET /status/{id} */
void tasks_results(struct gw_req *r);	       /* GET /results/{id} */
void tasks_workflow_results(struct gw_req *r); /* GET /workflow/results/{id} */
void tasks_cancel(struct gw_req *r);	       /* DELETE /tasks/{id} */

/* ---------------------------------------------------------------- info.c */
void info_root(struct gw_req *r);    /* GET / */
void info_health(struct gw_req *r);  /* GET /health */
void info_workers(struct gw_req *r); /* GET /workers/status */
void info_queue(struct gw_req *r);   /* GET /queue/status */

/* ------------------------------------------------------------- metrics.c */
/* GET /metrics, and the gateway's own counters and histograms. */
void metrics_get(struct gw_req *r);
/* One request ended: its route, HTTP status and duration. */
void metrics_observe(int route, int code, double ms);
/* One /evaluate ended with a task's end: its duration. */
void metrics_task(double ms);
size_t metrics_route_count(void);
const char *metrics_route_name(int route);

/* The routes, for the metrics' labels. */
enum gw_route {
	ROUTE_ROOT,
	ROUTE_HEALTH,
	ROUTE_METRICS,
	ROUTE_WORKERS,
	ROUTE_QUEUE,
	ROUTE_EVALUATE,
	ROUTE_BATCH,
	ROUTE_WORKFLOW_SUBMIT,
	ROUTE_WORKFLOW_RESULTS,
	ROUTE_STATUS,
	ROUTE_RESULTS,
	ROUTE_CANCEL,
	ROUTE_OTHER,
	ROUTE__COUNT
};

/* ---------------------------------------------------------------- main.c */
extern int gw_verbose;
void gw_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* KGYM_GATEWAY_H */
