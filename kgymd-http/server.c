/*
 * server.c -- kgymd-http's HTTP side: libevent's evhttp, the routing table,
 * bearer tokens, the limits, and the replies every endpoint shares.
 *
 * Each HTTP request becomes a struct gw_req, handed to one endpoint
 * handler (evaluate.c, tasks.c, info.c, metrics.c).  A handler answers at
 * once or starts calls to kgymd (gw_call) and answers from their
 * callbacks; the gw_req lives until it is answered and its calls have
 * ended.  A client that goes away mid-request changes nothing for kgymd:
 * its task runs on, and evhttp frees a request that is answered after its
 * connection closed.
 *
 * Errors are KernelGYM's ErrorResponse, {error, message, error_code,
 * task_id, timestamp} plus "field", with X-Error-Code and X-Error-Field;
 * a client's mistake is a 4xx, kgymd's trouble a 503, never a 500.
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "gateway.h"

struct gw_req {
	struct evhttp_request *req; /* NULL once answered */
	enum gw_route route;
	const struct token *token; /* NULL: no tokens, or an admin's */
	struct timespec t0;
	char *arg; /* decoded path argument */
	json_t *body;
	void *state; /* the handler's */
	int calls;   /* calls to kgymd not ended */
};

struct gw_callrec {
	struct gw_req *r;
	up_cb cb;
};

struct route {
	const char *path; /* exact, or a prefix ending in '/' */
	bool has_arg;
	enum evhttp_cmd_type method;
	enum gw_route id;
	void (*handler)(struct gw_req *);
};

static const struct route routes[] = {
	{ "/", false, EVHTTP_REQ_GET, ROUTE_ROOT, info_root },
	{ "/health", false, EVHTTP_REQ_GET, ROUTE_HEALTH, info_health },
	{ "/metrics", false, EVHTTP_REQ_GET, ROUTE_METRICS, metrics_get },
	{ "/workers/status", false, EVHTTP_REQ_GET, ROUTE_WORKERS, info_workers },
	{ "/queue/status", false, EVHTTP_REQ_GET, ROUTE_QUEUE, info_queue },
	{ "/evaluate", false, EVHTTP_REQ_POST, ROUTE_EVALUATE, evaluate_one },
	{ "/evaluate/batch", false, EVHTTP_REQ_POST, ROUTE_BATCH, evaluate_batch },
	{ "/workflow/submit", false, EVHTTP_REQ_POST, ROUTE_WORKFLOW_SUBMIT,
	    workflow_submit },
	{ "/workflow/results/", true, EVHTTP_REQ_GET, ROUTE_WORKFLOW_RESULTS,
	    tasks_workflow_results },
	{ "/status/", true, EVHTTP_REQ_GET, ROUTE_STATUS, tasks_status },
	{ "/results/", true, EVHTTP_REQ_GET, ROUTE_RESULTS, tasks_results },
	{ "/tasks/", true, EVHTTP_REQ_DELETE, ROUTE_CANCEL, tasks_cancel },
};
#define NROUTES (sizeof routes / sizeof routes[0])

/* How long the listener rests after accept() fails for want of a descriptor. */
#define GW_ACCEPT_PAUSE_MS 250
/* At most one log line about it per this many seconds. */
#define GW_ACCEPT_LOG_S 10

static struct {
	struct evhttp *http;
	const struct gw_config *config;
	struct token_set *tokens;
	int inflight;
	struct evconnlistener *listener;
	struct event *accept_resume;
	unsigned long accept_pauses; /* since the last log line */
	time_t accept_logged;
} srv;

static void
gw_req_free(struct gw_req *r)
{
	srv.inflight--;
	json_decref(r->body);
	free(r->arg);
	free(r->state);
	free(r);
}

/* Freed once answered with no call of it still open. */
static void
gw_req_maybe_free(struct gw_req *r)
{
	if (r->req == NULL && r->calls == 0)
		gw_req_free(r);
}

double
gw_req_age_ms(const struct gw_req *r)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - r->t0.tv_sec) * 1e3 +
	    (double)(now.tv_nsec - r->t0.tv_nsec) / 1e6;
}

const char *
gw_req_as(const struct gw_req *r)
{
	return r->token != NULL ? r->token->name : NULL;
}

const char *
gw_req_arg(const struct gw_req *r)
{
	return r->arg;
}

void *
gw_req_state(struct gw_req *r, size_t size)
{
	if (r->state == NULL)
		r->state = calloc(1, size);
	return r->state;
}

static void
gw_send(
    struct gw_req *r, int code, const char *content_type, const char *data, size_t len)
{
	struct evkeyvalq *h;
	struct evbuffer *buf;

	if (r->req == NULL)
		return;
	h = evhttp_request_get_output_headers(r->req);
	evhttp_add_header(h, "Content-Type", content_type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	buf = evbuffer_new();
	if (buf != NULL)
		evbuffer_add(buf, data, len);
	evhttp_send_reply(r->req, code, NULL, buf);
	if (buf != NULL)
		evbuffer_free(buf);
	r->req = NULL;
	metrics_observe(r->route, code, gw_req_age_ms(r));
	gw_req_maybe_free(r);
}

void
gw_reply_text(
    struct gw_req *r, int code, const char *content_type, const char *text, size_t len)
{
	gw_send(r, code, content_type, text, len);
}

void
gw_reply_json(struct gw_req *r, int code, const json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);

	if (text == NULL) {
		gw_send(r, 503, "application/json",
		    "{\"error\":\"ServiceUnavailable\","
		    "\"message\":\"out of memory\"}",
		    54);
		return;
	}
	gw_send(r, code, "application/json", text, strlen(text));
	free(text);
}

static const char *
gw_error_name(int code)
{
	switch (code) {
	case 400:
		return "ValidationError";
	case 401:
		return "Unauthorized";
	case 404:
		return "NotFound";
	case 405:
		return "MethodNotAllowed";
	case 409:
		return "Conflict";
	case 413:
		return "PayloadTooLarge";
	case 429:
		return "TooManyRequests";
	default:
		return "ServiceUnavailable";
	}
}

static void
gw_reply_errorv(struct gw_req *r, int code, const char *ecode, const char *field,
    const char *task_id, const char *fmt, va_list ap)
{
	struct evkeyvalq *h;
	char message[1024];
	json_t *body;

	if (r->req == NULL)
		return;
	vsnprintf(message, sizeof message, fmt, ap);
	h = evhttp_request_get_output_headers(r->req);
	evhttp_add_header(h, "X-Error-Code", ecode);
	if (field != NULL)
		evhttp_add_header(h, "X-Error-Field", field);
	if (code == 429)
		evhttp_add_header(h, "Retry-After", "1");
	else if (code == 503)
		evhttp_add_header(h, "Retry-After", "2");
	else if (code == 401)
		evhttp_add_header(h, "WWW-Authenticate", "Bearer");
	body = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "error", gw_error_name(code),
	    "message", message, "error_code", ecode, "field",
	    field != NULL ? json_string(field) : json_null(), "task_id",
	    task_id != NULL ? json_string(task_id) : json_null(), "timestamp",
	    shape_time(shape_now_ms()));
	gw_reply_json(r, code, body);
	json_decref(body);
}

void
gw_reply_error(struct gw_req *r, int code, const char *ecode, const char *field,
    const char *task_id, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	gw_reply_errorv(r, code, ecode, field, task_id, fmt, ap);
	va_end(ap);
}

void
gw_reply_unavailable(struct gw_req *r)
{
	gw_reply_error(r, 503, "SERVICE_UNAVAILABLE", NULL, NULL, "%s; retry later",
	    up_ready() ? "kgymd is not keeping up with the gateway's requests" :
			 up_why_down());
}

void
gw_reply_call_failed(struct gw_req *r, int rc, const char *task_id)
{
	if (rc != -EMSGSIZE)
		return gw_reply_unavailable(r);
	gw_reply_error(r, 413, "PAYLOAD_TOO_LARGE", NULL, task_id,
	    "the request makes a line longer than kgymd's max_request_bytes "
	    "(%zu bytes) once sent to kgymd; send less (fewer or smaller tasks)",
	    srv.config->max_request_bytes);
}

/*
 * The field a kgymd message names, after prefix: "field 'NAME'" (kgymd's
 * own checks), or a plugin's "'NAME': ..." or "NAME: ..." at its start.
 * Returns what follows "NAME: " when the message starts with the name (so
 * that it can be said again as "field 'PREFIXNAME': ..."), else NULL.
 */
static const char *
gw_field_of(const char *message, const char *prefix, char *field, size_t size)
{
	static const char ident[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.[]";
	const char *s = strstr(message, "field '"), *e;
	size_t n;

	field[0] = '\0';
	if (s != NULL) {
		s += 7;
	} else if (message[0] == '\'') {
		s = message + 1;
	} else if ((n = strspn(message, ident)) > 0 && message[n] == ':') {
		/* A name cut short would name the wrong field: none then. */
		if (snprintf(field, size, "%s%.*s", prefix, (int)n, message) >=
		    (int)size) {
			field[0] = '\0';
			return NULL;
		}
		return message + n + strspn(message + n, ": ");
	} else {
		return NULL;
	}
	if ((e = strchr(s, '\'')) == NULL || e == s ||
	    strspn(s, ident) != (size_t)(e - s))
		return NULL;
	if (snprintf(field, size, "%s%.*s", prefix, (int)(e - s), s) >= (int)size) {
		field[0] = '\0';
		return NULL;
	}
	if ((s == message + 7 || s == message + 1) && e[1] == ':')
		return e + 1 + strspn(e + 1, ": ");
	return NULL;
}

void
gw_reply_kgymd_error(struct gw_req *r, const json_t *reply, const char *task_id,
    const char *field_prefix)
{
	gw_reply_kgymd_error_in(r, reply, task_id, field_prefix, "");
}

void
gw_reply_kgymd_error_in(struct gw_req *r, const json_t *reply, const char *task_id,
    const char *field_prefix, const char *payload_prefix)
{
	const json_t *error = json_object_get(reply, "error");
	const char *code = json_string_value(json_object_get(error, "code"));
	const char *message = json_string_value(json_object_get(error, "message"));
	static const char payload[] = "field 'payload': ";
	static const char timeout_s[] = "field 'timeout_s': ";
	const char *rest;
	char field[128], prefix[128];

	if (code == NULL)
		code = "internal";
	if (message == NULL)
		message = "kgymd gave no reason";
	if (field_prefix == NULL)
		field_prefix = "";
	/*
	 * The plugin's complaint about the task's payload: its fields are the
	 * request's own (/evaluate) or those of its "payload" (/workflow/submit).
	 */
	if (strncmp(message, payload, sizeof payload - 1) == 0) {
		message += sizeof payload - 1;
		snprintf(prefix, sizeof prefix, "%s%s", field_prefix, payload_prefix);
	} else {
		snprintf(prefix, sizeof prefix, "%s", field_prefix);
	}
	if (strcmp(code, "bad_request") == 0 || strcmp(code, "bad_json") == 0) {
		rest = gw_field_of(message, prefix, field, sizeof field);
		/* The task's timeout_s is the request's timeout. */
		if (strncmp(message, timeout_s, sizeof timeout_s - 1) == 0) {
			snprintf(field, sizeof field, "%stimeout", field_prefix);
			gw_reply_error(r, 400, "VALIDATION_ERROR", field, task_id,
			    "field '%s': %s", field, message + sizeof timeout_s - 1);
		} else if (rest != NULL) {
			gw_reply_error(r, 400, "VALIDATION_ERROR", field, task_id,
			    "field '%s': %s", field, rest);
		} else {
			gw_reply_error(r, 400, "VALIDATION_ERROR",
			    field[0] != '\0' ? field : NULL, task_id, "%s%s", prefix,
			    message);
		}
	} else if (strcmp(code, "not_found") == 0) {
		gw_reply_error(r, 404, "TASK_NOT_FOUND", NULL, task_id, "%s", message);
	} else if (strcmp(code, "queue_full") == 0) {
		gw_reply_error(r, 429, "QUEUE_FULL", NULL, task_id, "%s", message);
	} else if (strcmp(code, "draining") == 0) {
		gw_reply_error(
		    r, 503, "SERVICE_DRAINING", NULL, task_id, "%s", message);
	} else if (strcmp(code, "forbidden") == 0 &&
	    strstr(message, "task_id") != NULL &&
	    strstr(message, "belongs to another") != NULL) {
		snprintf(field, sizeof field, "%stask_id", field_prefix);
		gw_reply_error(r, 409, "TASK_ID_CONFLICT", field, task_id,
		    "%s '%s' is taken by another client", field,
		    task_id != NULL ? task_id : "");
	} else if (strcmp(code, "forbidden") == 0) {
		gw_reply_error(r, 503, "GATEWAY_FORBIDDEN", NULL, task_id,
		    "kgymd does not let this gateway act for its tokens (gateway_uids)");
	} else if (strcmp(code, "too_large") == 0) {
		gw_reply_error(r, 413, "PAYLOAD_TOO_LARGE", NULL, task_id,
		    "the request is larger than kgymd's max_request_bytes");
	} else {
		gw_reply_error(
		    r, 503, "KGYMD_ERROR", NULL, task_id, "kgymd: %s", message);
	}
}

void
gw_req_hold(struct gw_req *r)
{
	r->calls++;
}

void
gw_req_release(struct gw_req *r)
{
	r->calls--;
	gw_req_maybe_free(r);
}

static void
gw_call_trampoline(const json_t *msg, bool last, void *arg)
{
	struct gw_callrec *rec = arg;
	struct gw_req *r = rec->r;

	rec->cb(msg, last, r);
	if (last) {
		free(rec);
		gw_req_release(r);
	}
}

int
gw_call(struct gw_req *r, json_t *req, up_cb cb)
{
	struct gw_callrec *rec;
	int rc;

	if ((rec = malloc(sizeof *rec)) == NULL) {
		json_decref(req);
		return -ENOMEM;
	}
	rec->r = r;
	rec->cb = cb;
	if ((rc = up_call(req, gw_req_as(r), gw_call_trampoline, rec)) < 0) {
		free(rec);
		return rc;
	}
	gw_req_hold(r);
	return 0;
}

json_t *
gw_req_body(struct gw_req *r)
{
	struct evbuffer *in;
	json_error_t jerr;
	size_t len;
	const char *data;

	if (r->body != NULL)
		return r->body;
	in = evhttp_request_get_input_buffer(r->req);
	len = evbuffer_get_length(in);
	if (len == 0) {
		gw_reply_error(r, 400, "VALIDATION_ERROR", "body", NULL,
		    "the request has no body: expected a JSON object");
		return NULL;
	}
	data = (const char *)evbuffer_pullup(in, -1);
	r->body = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (r->body == NULL) {
		gw_reply_error(r, 400, "VALIDATION_ERROR", "body", NULL,
		    "the body is not valid JSON: %s (line %d, column %d)", jerr.text,
		    jerr.line, jerr.column);
		return NULL;
	}
	if (!json_is_object(r->body)) {
		gw_reply_error(r, 400, "VALIDATION_ERROR", "body", NULL,
		    "the body must be a JSON object");
		return NULL;
	}
	return r->body;
}

/* The bearer token, when tokens are configured: false after answering 401. */
static bool
gw_authenticate(struct gw_req *r)
{
	const char *auth;
	size_t len;

	if (srv.tokens == NULL)
		return true;
	auth = evhttp_find_header(
	    evhttp_request_get_input_headers(r->req), "Authorization");
	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) {
		gw_reply_error(r, 401, "UNAUTHORIZED", "Authorization", NULL,
		    "expected the header Authorization: Bearer TOKEN");
		return false;
	}
	auth += 7;
	auth += strspn(auth, " ");
	len = strlen(auth);
	r->token = tokens_find(srv.tokens, auth, len);
	if (r->token == NULL) {
		gw_reply_error(r, 401, "UNAUTHORIZED", "Authorization", NULL,
		    "the token is not valid");
		return false;
	}
	if (r->token->admin)
		r->token = NULL; /* acts as the gateway itself */
	else if (!up_is_gateway() && up_ready()) {
		gw_reply_error(r, 503, "GATEWAY_FORBIDDEN", NULL, NULL,
		    "kgymd does not let this gateway act for its tokens (gateway_uids)");
		return false;
	}
	return true;
}

/*
 * Two Content-Length headers that disagree: evhttp reads the body by the
 * first, a proxy in front may have used the other (request smuggling).
 */
static bool
gw_length_ambiguous(struct evhttp_request *req)
{
	struct evkeyval *kv;
	const char *first = NULL;

	TAILQ_FOREACH(kv, evhttp_request_get_input_headers(req), next) {
		if (strcasecmp(kv->key, "Content-Length") != 0)
			continue;
		if (first == NULL)
			first = kv->value;
		else if (strcmp(first, kv->value) != 0)
			return true;
	}
	return false;
}

static const struct route *
gw_route(const char *path, bool *ret_method_ok, enum evhttp_cmd_type method,
    const char **ret_arg)
{
	const struct route *rt;
	size_t i, n;

	for (i = 0; i < NROUTES; i++) {
		rt = &routes[i];
		n = strlen(rt->path);
		if (rt->has_arg ? (strncmp(path, rt->path, n) != 0 || path[n] == '\0' ||
				      strchr(path + n, '/') != NULL) :
				  strcmp(path, rt->path) != 0)
			continue;
		*ret_arg = rt->has_arg ? path + n : NULL;
		*ret_method_ok = rt->method == method;
		return rt;
	}
	return NULL;
}

static const char *
gw_method_name(enum evhttp_cmd_type m)
{
	return m == EVHTTP_REQ_GET ? "GET" : m == EVHTTP_REQ_POST ? "POST" : "DELETE";
}

static void
gw_dispatch(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL,
		   *rawarg = NULL;
	const struct route *rt = NULL;
	bool method_ok = false;
	struct gw_req *r;
	size_t arglen = 0;

	if ((r = calloc(1, sizeof *r)) == NULL) {
		evhttp_send_error(req, 503, "Out of memory");
		return;
	}
	srv.inflight++;
	r->req = req;
	r->route = ROUTE_OTHER;
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	if (srv.inflight > srv.config->max_inflight) {
		gw_reply_error(r, 429, "TOO_MANY_REQUESTS", NULL, NULL,
		    "the gateway holds max_inflight (%d) requests; retry later",
		    srv.config->max_inflight);
		return;
	}
	if (gw_length_ambiguous(req)) {
		/* What follows on this connection cannot be trusted either. */
		evhttp_add_header(
		    evhttp_request_get_output_headers(req), "Connection", "close");
		gw_reply_error(r, 400, "VALIDATION_ERROR", "Content-Length", NULL,
		    "field 'Content-Length': the request has Content-Length headers "
		    "that disagree; send one");
		return;
	}
	if (path != NULL && *path != '\0')
		rt = gw_route(
		    path, &method_ok, evhttp_request_get_command(req), &rawarg);
	if (rt == NULL) {
		gw_reply_error(r, 404, "NOT_FOUND", NULL, NULL, "no such endpoint");
		return;
	}
	r->route = rt->id;
	if (!method_ok) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
		    gw_method_name(rt->method));
		gw_reply_error(r, 405, "METHOD_NOT_ALLOWED", NULL, NULL,
		    "%s takes %s only", rt->path, gw_method_name(rt->method));
		return;
	}
	if (rt->id != ROUTE_HEALTH && !gw_authenticate(r))
		return;
	if (rawarg != NULL) {
		r->arg = evhttp_uridecode(rawarg, 0, &arglen);
		/* strlen: a %00 must not cut the id short. */
		if (r->arg == NULL || strlen(r->arg) != arglen ||
		    !shape_task_id_ok(r->arg)) {
			gw_reply_error(r, 404, "TASK_NOT_FOUND", "task_id", NULL,
			    "no task with that task_id (a task_id is 1 to 128 characters of "
			    "A-Z, a-z, 0-9, '.', '_', ':' and '-')");
			return;
		}
	}
	if (rt->id != ROUTE_ROOT && rt->id != ROUTE_METRICS && rt->id != ROUTE_HEALTH &&
	    !up_ready()) {
		gw_reply_unavailable(r);
		return;
	}
	rt->handler(r);
}

/*
 * Each connection's bufferevent, made here so that it has a read high
 * watermark.  evhttp answers a connection's requests one at a time: it
 * reads the next only once the last reply has left, but it keeps reading
 * the socket meanwhile (to see the client close), so a client that
 * pipelines requests and never reads its replies would have them pile up
 * in memory without end.  Past max_reply_backlog bytes held for one
 * connection the gateway stops reading it: TCP pushes back on that client
 * alone, and evhttp's write timeout drops it if it never reads.
 */
static struct bufferevent *
gw_new_bufferevent(struct event_base *base, void *arg)
{
	struct bufferevent *bev;

	bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev != NULL)
		bufferevent_setwatermark(
		    bev, EV_READ, 0, srv.config->max_reply_backlog);
	return bev; /* NULL: evhttp makes one itself */
}

static void
gw_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(srv.listener);
}

/*
 * accept() failed.  Out of descriptors (EMFILE, ENFILE) or memory, the
 * connection stays in the listen queue and the listener stays readable:
 * retrying at once spins the loop (and libevent logs every try).  So the
 * listener rests a moment while the connections we have are served, and
 * is tried again from a timer; a line says so, not one per attempt.
 */
static void
gw_accept_error(struct evconnlistener *lev, void *arg)
{
	static const struct timeval pause = { 0, GW_ACCEPT_PAUSE_MS * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	time_t now = time(NULL);

	evconnlistener_disable(lev);
	evtimer_add(srv.accept_resume, &pause);
	srv.accept_pauses++;
	if (now - srv.accept_logged < GW_ACCEPT_LOG_S)
		return;
	gw_log("cannot accept connections: %s; pausing the listener for %d ms "
	       "(%lu pause%s since the last report)",
	    strerror(err), GW_ACCEPT_PAUSE_MS, srv.accept_pauses,
	    srv.accept_pauses == 1 ? "" : "s");
	srv.accept_logged = now;
	srv.accept_pauses = 0;
}

int
server_start(struct event_base *base, const struct gw_config *config,
    struct token_set *tokens, char **ret_cause)
{
	struct evhttp_bound_socket *handle;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof ss;
	char host[NI_MAXHOST], port[NI_MAXSERV];

	srv.config = config;
	srv.tokens = tokens;
	if ((srv.http = evhttp_new(base)) == NULL)
		return -ENOMEM;
	evhttp_set_max_body_size(srv.http, (ev_ssize_t)config->max_body_bytes);
	evhttp_set_max_headers_size(srv.http, 64 * 1024);
	evhttp_set_allowed_methods(srv.http,
	    EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD |
		EVHTTP_REQ_PUT | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	/*
	 * An idle keep-alive connection, or a client that stops sending its
	 * request, is dropped after this long; a request held for its task's
	 * end is not (evhttp does not time out a request it has handed over).
	 */
	evhttp_set_timeout(srv.http, 120);
	/* Read what is left of a refused body, so the client sees the 413. */
	evhttp_set_flags(srv.http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_gencb(srv.http, gw_dispatch, NULL);
	evhttp_set_bevcb(srv.http, gw_new_bufferevent, NULL);
	handle = evhttp_bind_socket_with_handle(
	    srv.http, config->listen_host, (ev_uint16_t)config->listen_port);
	if (handle == NULL) {
		if (asprintf(ret_cause, "cannot listen on %s port %d: %s",
			config->listen_host, config->listen_port, strerror(errno)) < 0)
			*ret_cause = NULL;
		evhttp_free(srv.http);
		srv.http = NULL;
		return -EADDRINUSE;
	}
	srv.listener = evhttp_bound_socket_get_listener(handle);
	if ((srv.accept_resume = evtimer_new(base, gw_accept_resume, NULL)) == NULL) {
		evhttp_free(srv.http);
		srv.http = NULL;
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(srv.listener, gw_accept_error);
	/* Port 0 picks one: say which (the tests read this line). */
	if (getsockname(evhttp_bound_socket_get_fd(handle), (struct sockaddr *)&ss,
		&sslen) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, sslen, host, sizeof host, port,
		sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		gw_log("listening on %s port %s%s", host, port,
		    tokens != NULL ? " (bearer tokens required)" : "");
	return 0;
}

void
server_stop(void)
{
	if (srv.accept_resume != NULL)
		event_free(srv.accept_resume);
	srv.accept_resume = NULL;
	if (srv.http != NULL)
		evhttp_free(srv.http);
	srv.http = NULL;
	srv.listener = NULL;
}
