/*
 * upstream.c -- the gateway's connection to kgymd.
 *
 * One persistent, non-blocking Unix-socket connection speaking
 * kgymd-protocol(7): many requests in flight at once, each with an integer
 * id, its lines (replies, result events) handed to the call's callback as
 * they come.  A synchronous /evaluate is one "submit" with "wait":true, so
 * thousands of HTTP requests wait on one socket and no thread.
 *
 * When kgymd goes away (killed, restarting, idle_timeout), every call in
 * flight is told once (msg NULL) and the connection is made again from a
 * timer, with a backoff from 50 ms to 2 s; meanwhile up_call() refuses and
 * the HTTP side answers 503.  Nothing here outlives a restart of the
 * gateway: tasks are kgymd's, and a client that retries with its task_id
 * attaches to the same task.
 */
#include "config.h"

#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "gateway.h"

#define UP_BUCKETS 16384 /* calls by id: a power of two */
#define UP_BACKOFF_MIN_MS 50
#define UP_BACKOFF_MAX_MS 2000
#define UP_LINE_MAX (512u * 1024 * 1024) /* kgymd's own reply backlog bound */
#define UP_HELLO_ID 0
/* Requests kgymd has not read yet, at most: past it, 503 rather than grow. */
#define UP_OUTPUT_MAX (64u * 1024 * 1024)

struct up_call {
	json_int_t id;
	up_cb cb;
	void *arg;
	bool waits; /* ends with a "done" reply */
	LIST_ENTRY(up_call) entry;
};

LIST_HEAD(up_bucket, up_call);

enum up_state { UP_DOWN, UP_CONNECTING, UP_HELLO, UP_READY };

static struct {
	struct event_base *base;
	char *path;
	struct bufferevent *bev;
	enum up_state state;
	struct event *retry;
	int backoff_ms;
	json_int_t next_id;
	struct up_bucket buckets[UP_BUCKETS];
	size_t ncalls;
	const char *why;
	char why_buf[600]; /* an error line kgymd closed with */
	bool gateway;
	size_t max_line; /* kgymd's max_request_bytes */
} up;

static void up_connect(void);

static struct up_bucket *
up_bucket_of(json_int_t id)
{
	return &up.buckets[(uint64_t)id & (UP_BUCKETS - 1)];
}

static struct up_call *
up_find(json_int_t id)
{
	struct up_call *c;

	LIST_FOREACH(c, up_bucket_of(id), entry)
		if (c->id == id)
			return c;
	return NULL;
}

static void
up_call_end(struct up_call *c)
{
	LIST_REMOVE(c, entry);
	up.ncalls--;
	free(c);
}

static void
up_schedule_retry(void)
{
	struct timeval tv;

	tv.tv_sec = up.backoff_ms / 1000;
	tv.tv_usec = (up.backoff_ms % 1000) * 1000;
	evtimer_add(up.retry, &tv);
	up.backoff_ms = up.backoff_ms == 0 ? UP_BACKOFF_MIN_MS : up.backoff_ms * 2;
	if (up.backoff_ms > UP_BACKOFF_MAX_MS)
		up.backoff_ms = UP_BACKOFF_MAX_MS;
}

/* The connection is gone: tell every call, then try again later. */
static void
up_lost(const char *why)
{
	struct up_call *c;
	size_t i;

	if (up.state == UP_READY)
		gw_log("kgymd: connection lost (%s); reconnecting", why);
	up.state = UP_DOWN;
	up.why = why;
	if (up.bev != NULL) {
		bufferevent_free(up.bev);
		up.bev = NULL;
	}
	for (i = 0; i < UP_BUCKETS; i++) {
		while ((c = LIST_FIRST(&up.buckets[i])) != NULL) {
			LIST_REMOVE(c, entry);
			up.ncalls--;
			c->cb(NULL, true, c->arg);
			free(c);
		}
	}
	up_schedule_retry();
}

static void
up_hello_reply(const json_t *msg)
{
	if (!json_is_true(json_object_get(msg, "ok"))) {
		gw_log("kgymd refused the gateway: %s",
		    json_string_value(
			json_object_get(json_object_get(msg, "error"), "message")));
		up_lost("kgymd refused the gateway's connection");
		return;
	}
	up.gateway = json_is_true(json_object_get(msg, "gateway"));
	up.state = UP_READY;
	up.why = NULL;
	up.backoff_ms = 0;
	gw_log("kgymd: connected (%s)",
	    up.gateway ?
		"gateway_uids: principals enforced by kgymd" :
		"not in gateway_uids: tokens other than admin ones will be refused");
}

/* One line from kgymd. */
static void
up_line(const char *line, size_t len)
{
	json_error_t jerr;
	json_t *msg, *id, *ok, *err;
	const char *code, *message;
	struct up_call *c;
	bool last;

	if ((msg = json_loadb(line, len, 0, &jerr)) == NULL) {
		up_lost("kgymd sent a line that is not JSON");
		return;
	}
	id = json_object_get(msg, "id");
	if (!json_is_integer(id)) {
		/*
		 * too_large or busy with id null: kgymd closes; so do we, and
		 * every call in flight is told why, not only that it went.
		 */
		err = json_object_get(msg, "error");
		code = json_string_value(json_object_get(err, "code"));
		message = json_string_value(json_object_get(err, "message"));
		snprintf(up.why_buf, sizeof up.why_buf,
		    "kgymd closed the gateway's connection after an error: %.64s: %.400s",
		    code != NULL ? code : "no code",
		    message != NULL ? message : "no message");
		json_decref(msg);
		up_lost(up.why_buf);
		return;
	}
	if (json_integer_value(id) == UP_HELLO_ID && up.state == UP_HELLO) {
		up_hello_reply(msg);
		json_decref(msg);
		return;
	}
	if ((c = up_find(json_integer_value(id))) == NULL) {
		json_decref(msg);
		return;
	}
	ok = json_object_get(msg, "ok");
	last = json_is_false(ok) ||
	    (json_is_true(ok) &&
		(!c->waits || json_is_true(json_object_get(msg, "done"))));
	c->cb(msg, last, c->arg);
	if (last)
		up_call_end(c);
	json_decref(msg);
}

static void
up_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;
	char *line;

	while (up.bev == bev &&
	    (line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF)) != NULL) {
		up_line(line, len);
		free(line);
	}
	if (up.bev == bev && evbuffer_get_length(in) > UP_LINE_MAX)
		up_lost("kgymd sent a line too long");
}

static void
up_event_cb(struct bufferevent *bev, short what, void *arg)
{
	json_t *hello;
	char *text;

	if (what & BEV_EVENT_CONNECTED) {
		up.state = UP_HELLO;
		hello = json_pack(
		    "{s:i, s:i, s:s}", "v", 1, "id", UP_HELLO_ID, "op", "hello");
		text = json_dumps(hello, JSON_COMPACT);
		json_decref(hello);
		if (text == NULL) {
			up_lost("out of memory");
			return;
		}
		bufferevent_write(bev, text, strlen(text));
		bufferevent_write(bev, "\n", 1);
		free(text);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		up_lost(up.state == UP_CONNECTING ?
			"kgymd is not running (cannot connect to its socket)" :
			"kgymd closed the connection");
}

static void
up_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	up_connect();
}

static void
up_connect(void)
{
	struct sockaddr_un sun;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", up.path);
	up.state = UP_CONNECTING;
	up.bev = bufferevent_socket_new(up.base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (up.bev == NULL) {
		up_lost("out of memory");
		return;
	}
	bufferevent_setcb(up.bev, up_read_cb, NULL, up_event_cb, NULL);
	bufferevent_enable(up.bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(up.bev, (struct sockaddr *)&sun, sizeof sun) < 0)
		up_lost("kgymd is not running (cannot connect to its socket)");
}

int
up_init(struct event_base *base, const char *socket_path, size_t max_line)
{
	size_t i;

	memset(&up, 0, sizeof up);
	up.base = base;
	up.next_id = UP_HELLO_ID + 1;
	up.max_line = max_line;
	for (i = 0; i < UP_BUCKETS; i++)
		LIST_INIT(&up.buckets[i]);
	if ((up.path = strdup(socket_path)) == NULL ||
	    (up.retry = evtimer_new(base, up_retry_cb, NULL)) == NULL)
		return -ENOMEM;
	up.why = "connecting to kgymd";
	up_connect();
	return 0;
}

void
up_free(void)
{
	struct up_call *c;
	size_t i;

	if (up.bev != NULL)
		bufferevent_free(up.bev);
	if (up.retry != NULL)
		event_free(up.retry);
	for (i = 0; i < UP_BUCKETS; i++)
		while ((c = LIST_FIRST(&up.buckets[i])) != NULL)
			up_call_end(c);
	free(up.path);
	memset(&up, 0, sizeof up);
}

bool
up_ready(void)
{
	return up.state == UP_READY;
}

const char *
up_why_down(void)
{
	return up.why != NULL ? up.why : "kgymd is not reachable";
}

bool
up_is_gateway(void)
{
	return up.gateway;
}

size_t
up_calls_in_flight(void)
{
	return up.ncalls;
}

int
up_call(json_t *req, const char *as, up_cb cb, void *arg)
{
	struct up_call *c;
	const char *op;
	char *text;
	int rc = 0;

	if (up.state != UP_READY) {
		json_decref(req);
		return -ENOTCONN;
	}
	if (evbuffer_get_length(bufferevent_get_output(up.bev)) > UP_OUTPUT_MAX) {
		json_decref(req);
		return -EAGAIN;
	}
	if ((c = calloc(1, sizeof *c)) == NULL) {
		json_decref(req);
		return -ENOMEM;
	}
	c->id = up.next_id++;
	c->cb = cb;
	c->arg = arg;
	op = json_string_value(json_object_get(req, "op"));
	c->waits = (op != NULL && strcmp(op, "wait") == 0) ||
	    json_is_true(json_object_get(req, "wait"));
	json_object_set_new(req, "v", json_integer(1));
	json_object_set_new(req, "id", json_integer(c->id));
	if (as != NULL)
		json_object_set_new(req, "on_behalf_of", json_string(as));
	text = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	/*
	 * kgymd answers a longer line too_large and closes the connection:
	 * every other client's call on it would end too.  Refuse it here.
	 */
	if (text != NULL && strlen(text) > up.max_line)
		rc = -EMSGSIZE;
	else if (text == NULL || bufferevent_write(up.bev, text, strlen(text)) < 0 ||
	    bufferevent_write(up.bev, "\n", 1) < 0)
		rc = -ENOMEM;
	free(text);
	if (rc < 0) {
		free(c);
		return rc;
	}
	LIST_INSERT_HEAD(up_bucket_of(c->id), c, entry);
	up.ncalls++;
	return 0;
}
