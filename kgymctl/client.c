/*
 * client.c -- a client's side of the control socket (libkgymclient: kgymctl,
 * bench/control's control connection, tests/unit/test_client.c).
 *
 * kgymctl runs one command and exits, so blocking I/O is the simple and
 * right choice here (the daemon is the one that must never block).  The
 * connection keeps a read buffer because kgymd may send several lines in one
 * segment or one line over many; lines are parsed with jansson one at a time.
 * Replies are matched to requests by the integer id this file assigns, so a
 * caller may keep several requests in flight (submit pipelines its batches).
 */
#include "config.h"

#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

/* A reply larger than this is not something kgymd sends; stop reading. */
#define CLIENT_LINE_MAX (256u * 1024 * 1024)
#define CLIENT_READ_CHUNK 65536

struct client {
	int fd;
	char *buf;    /* received bytes not yet handed out */
	size_t start; /* first unconsumed byte */
	size_t len;   /* end of received bytes */
	size_t cap;
	size_t scanned; /* bytes from start known to hold no '\n' */
	json_int_t next_id;
	void (*tap)(const char *line, size_t len, void *arg);
	void *tap_arg;
};

static void client_cause(char **ret_cause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
client_cause(char **ret_cause, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (ret_cause == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	*ret_cause = s;
}

struct client *
client_connect(const char *path, char **ret_cause)
{
	struct sockaddr_un sun;
	struct client *c;
	int fd, saved;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		client_cause(ret_cause, "cannot connect to %s: socket path too long", path);
		return NULL;
	}
	memcpy(sun.sun_path, path, strlen(path));

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		client_cause(ret_cause, "socket: %s", strerror(errno));
		return NULL;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		saved = errno;
		client_cause(ret_cause, "cannot connect to %s: %s", path, strerror(saved));
		goto close_fd;
	}
	c = calloc(1, sizeof *c);
	if (c == NULL) {
		client_cause(ret_cause, "out of memory");
		goto close_fd;
	}
	c->fd = fd;
	c->next_id = 1;
	return c;

close_fd:
	close(fd);
	return NULL;
}

void
client_free(struct client *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c->buf);
	free(c);
}

void
client_set_tap(struct client *c, void (*tap)(const char *line, size_t len, void *arg), void *arg)
{
	c->tap = tap;
	c->tap_arg = arg;
}

/* Write all of buf; MSG_NOSIGNAL so a vanished daemon is an error, not SIGPIPE. */
static int
client_write_all(struct client *c, const char *buf, size_t len, char **ret_cause)
{
	ssize_t n;

	while (len > 0) {
		n = send(c->fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int saved = errno;

			client_cause(ret_cause, "sending to kgymd: %s", strerror(saved));
			return -saved;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int
client_send(struct client *c, const char *op, json_t *args, json_int_t *ret_id, char **ret_cause)
{
	json_t *req;
	char *line;
	size_t len;
	json_int_t id;
	int r;

	if (args != NULL && !json_is_object(args)) {
		client_cause(ret_cause, "request arguments are not an object");
		return -EINVAL;
	}
	id = c->next_id;
	req = json_object();
	if (req == NULL || (args != NULL && json_object_update(req, args) < 0) ||
	    json_object_set_new(req, "v", json_integer(CLIENT_PROTOCOL_VERSION)) < 0 ||
	    json_object_set_new(req, "id", json_integer(id)) < 0 ||
	    json_object_set_new(req, "op", json_string(op)) < 0)
		goto nomem;
	/* Compact encoding escapes newlines inside strings: one request, one line. */
	line = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (line == NULL) {
		client_cause(ret_cause, "cannot encode the %s request", op);
		return -EINVAL;
	}
	len = strlen(line);
	r = client_write_all(c, line, len, ret_cause);
	if (r == 0)
		r = client_write_all(c, "\n", 1, ret_cause);
	free(line);
	if (r < 0)
		return r;
	c->next_id++;
	if (ret_id != NULL)
		*ret_id = id;
	return 0;

nomem:
	json_decref(req);
	client_cause(ret_cause, "out of memory");
	return -ENOMEM;
}

/* Make room for at least one more chunk, dropping consumed bytes first. */
static int
client_grow(struct client *c, char **ret_cause)
{
	size_t cap;
	char *p;

	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->len - c->start);
		c->len -= c->start;
		c->start = 0;
	}
	if (c->cap - c->len >= CLIENT_READ_CHUNK)
		return 0;
	if (c->len >= CLIENT_LINE_MAX) {
		client_cause(
		    ret_cause, "a line from kgymd is longer than %u bytes", CLIENT_LINE_MAX);
		return -EMSGSIZE;
	}
	cap = c->cap ? c->cap * 2 : 2 * CLIENT_READ_CHUNK;
	p = realloc(c->buf, cap);
	if (p == NULL) {
		client_cause(ret_cause, "out of memory");
		return -ENOMEM;
	}
	c->buf = p;
	c->cap = cap;
	return 0;
}

static int
client_fill(struct client *c, char **ret_cause)
{
	ssize_t n;
	int r;

	r = client_grow(c, ret_cause);
	if (r < 0)
		return r;
	for (;;) {
		n = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		r = -errno;
		client_cause(ret_cause, "reading from kgymd: %s", strerror(-r));
		return r;
	}
	if (n == 0) {
		client_cause(ret_cause, "kgymd closed the connection%s",
		    c->len > c->start ? " in the middle of a reply" : "");
		return -ECONNRESET;
	}
	c->len += (size_t)n;
	return 0;
}

/* Find the next complete line; *ret_line points into the buffer. */
static int
client_next_line(struct client *c, const char **ret_line, size_t *ret_len, char **ret_cause)
{
	char *nl;
	int r;

	for (;;) {
		nl = NULL;
		if (c->len > c->start + c->scanned)
			nl = memchr(
			    c->buf + c->start + c->scanned, '\n', c->len - c->start - c->scanned);
		if (nl != NULL)
			break;
		c->scanned = c->len - c->start;
		r = client_fill(c, ret_cause);
		if (r < 0)
			return r;
	}
	*ret_line = c->buf + c->start;
	*ret_len = (size_t)(nl - (c->buf + c->start));
	c->start += *ret_len + 1;
	c->scanned = 0;
	return 0;
}

/* Is msg something protocol v1 allows kgymd to send? */
static bool
client_msg_valid(json_t *msg)
{
	json_t *v;

	if (!json_is_object(msg))
		return false;
	v = json_object_get(msg, "v");
	if (v != NULL && !(json_is_integer(v) && json_integer_value(v) == CLIENT_PROTOCOL_VERSION))
		return false;
	return client_msg_is_event(msg) || json_is_boolean(json_object_get(msg, "ok"));
}

int
client_read(struct client *c, json_t **ret_msg, char **ret_cause)
{
	const char *line;
	json_error_t jerr;
	json_t *msg;
	size_t len;
	int r;

	do {
		r = client_next_line(c, &line, &len, ret_cause);
		if (r < 0)
			return r;
		/* Tolerate a stray blank line (or a CR of CRLF) between messages. */
		while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
			len--;
	} while (len == 0);

	if (c->tap != NULL)
		c->tap(line, len, c->tap_arg);
	msg = json_loadb(line, len, 0, &jerr);
	if (msg == NULL) {
		client_cause(ret_cause, "malformed reply from kgymd: %s", jerr.text);
		return -EPROTO;
	}
	if (!client_msg_valid(msg)) {
		json_decref(msg);
		client_cause(ret_cause,
		    "unexpected message from kgymd (not a protocol v1 "
		    "reply or event): %.*s",
		    len > 200 ? 200 : (int)len, line);
		return -EPROTO;
	}
	*ret_msg = msg;
	return 0;
}

int
client_await(struct client *c, json_int_t id, void (*on_other)(json_t *msg, void *arg), void *arg,
    json_t **ret_reply, char **ret_cause)
{
	json_t *msg;
	int r;

	for (;;) {
		r = client_read(c, &msg, ret_cause);
		if (r < 0)
			return r;
		if (!client_msg_is_event(msg)) {
			if (client_msg_id(msg) == id)
				break;
			/* kgymd could not tie this error to a request: it is ours. */
			if (json_is_null(json_object_get(msg, "id")) && !client_msg_ok(msg))
				break;
		}
		if (on_other != NULL)
			on_other(msg, arg);
		json_decref(msg);
	}
	*ret_reply = msg;
	return 0;
}

int
client_call(struct client *c, const char *op, json_t *args,
    void (*on_other)(json_t *msg, void *arg), void *arg, json_t **ret_reply, char **ret_cause)
{
	json_int_t id;
	int r;

	r = client_send(c, op, args, &id, ret_cause);
	if (r < 0)
		return r;
	return client_await(c, id, on_other, arg, ret_reply, ret_cause);
}

pid_t
client_peer_pid(struct client *c)
{
	struct ucred uc;
	socklen_t len = sizeof uc;

	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -1;
	return uc.pid;
}

bool
client_msg_is_event(json_t *msg)
{
	return json_is_string(json_object_get(msg, "event"));
}

bool
client_msg_ok(json_t *msg)
{
	return json_is_true(json_object_get(msg, "ok"));
}

json_int_t
client_msg_id(json_t *msg)
{
	json_t *id = json_object_get(msg, "id");

	if (!json_is_integer(id))
		return -1;
	return json_integer_value(id);
}

const char *
client_error_code(json_t *msg)
{
	const char *s = json_string_value(json_object_get(json_object_get(msg, "error"), "code"));

	return s != NULL ? s : "?";
}

const char *
client_error_message(json_t *msg)
{
	const char *s =
	    json_string_value(json_object_get(json_object_get(msg, "error"), "message"));

	return s != NULL ? s : "?";
}
