/*
 * control.c -- the control socket: listener, connections, framing, peers.
 *
 * Clients speak line-delimited JSON over a Unix stream socket.  This file
 * owns the bytes: it accepts connections (up to max_connections), reads the
 * peer's kernel credentials (SO_PEERCRED) and refuses peers the config does
 * not allow, cuts the input into lines, enforces max_request_bytes, and
 * queues replies.  What a line means is protocol.c's and ops.c's business.
 *
 * A connection never blocks the loop: bufferevents buffer both ways, a
 * read high-watermark bounds what one client can make us hold, and a
 * client that stops reading its replies is dropped once its unsent replies
 * pass max_reply_backlog (from an event of its own: never inside a callback
 * that may still use the connection).
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "kgymd.h"

static struct evconnlistener *control_listener;
static char *control_path;
static TAILQ_HEAD(, conn) control_conns = TAILQ_HEAD_INITIALIZER(control_conns);
static size_t control_nconns;
static uint64_t control_serial;
static void (*control_on_empty)(void);

static void
control_conn_free(struct conn *conn)
{
	if (conn->reap_ev != NULL)
		event_free(conn->reap_ev);
	wait_conn_gone(conn);
	TAILQ_REMOVE(&control_conns, conn, entry);
	control_nconns--;
	bufferevent_free(conn->bev);
	free(conn);
	if (control_nconns == 0 && control_on_empty != NULL)
		control_on_empty();
}

static void
control_reap(evutil_socket_t fd, short what, void *arg)
{
	control_conn_free(arg);
}

/* Send one line outside any request (refusals at accept time). */
static void
control_refuse(int fd, const char *code, const char *message)
{
	json_t *reply = proto_reply_error(NULL, code, message);
	size_t len;
	char *line = proto_encode(reply, &len);

	/* Best effort: the peer may already be gone; the socket is non-blocking. */
	if (line != NULL && write(fd, line, len) < 0)
		log_debug("refusal to fd %d not delivered: %s", fd, strerror(errno));
	free(line);
	json_decref(reply);
}

void
control_send(struct conn *conn, const json_t *reply)
{
	struct evbuffer *out;
	size_t len;
	char *line;

	if (conn == NULL || reply == NULL)
		return;
	if (conn->dropped)
		return;
	out = bufferevent_get_output(conn->bev);
	if (evbuffer_get_length(out) > kgymd_config->max_reply_backlog) {
		/*
		 * A client that does not read its replies would make us hold them
		 * without end: drop it, from an event of its own, since we may be
		 * inside one of its callbacks or another client's.
		 */
		log_warnx("connection %llu: client is not reading its replies "
		    "(more than max_reply_backlog = %zu bytes unsent); dropping it",
		    (unsigned long long)conn->serial, kgymd_config->max_reply_backlog);
		conn->dropped = true;
		conn->closing = true;
		evbuffer_drain(out, evbuffer_get_length(out));
		bufferevent_disable(conn->bev, EV_READ | EV_WRITE);
		event_active(conn->reap_ev, 0, 0);
		return;
	}
	if ((line = proto_encode(reply, &len)) == NULL) {
		log_warnx("connection %llu: cannot encode a reply", (unsigned long long)conn->serial);
		return;
	}
	evbuffer_add(out, line, len);
	free(line);
}

static void
control_handle_line(struct conn *conn, const char *line, size_t len)
{
	struct request req = { 0 };
	struct proto_error err = { 0 };
	json_t *id = NULL, *reply;
	uint64_t t0 = stats_now_us();

	/* Tolerate CRLF clients; skip blank lines. */
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return;
	if (proto_parse_request(line, len, &req, &id, &err) < 0) {
		reply = proto_reply_error(id, err.code, err.message);
		control_send(conn, reply);
		json_decref(reply);
		json_decref(id);
		return;
	}
	json_decref(id);
	ops_dispatch(conn, &req);
	stats_request(req.op, stats_now_us() - t0);
	proto_request_clear(&req);
}

/*
 * Half-close after the last reply, then read and discard until the peer
 * closes: closing a socket with unread input makes the kernel send a reset,
 * and the client would lose the error reply that explains why.
 */
static void
control_linger(struct conn *conn)
{
	struct timeval tv = { .tv_sec = 5 };

	if (conn->half_closed)
		return;
	conn->half_closed = true;
	shutdown(bufferevent_getfd(conn->bev), SHUT_WR);
	bufferevent_set_timeouts(conn->bev, &tv, NULL);
}

static void
control_read(struct bufferevent *bev, void *arg)
{
	struct conn *conn = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t max = kgymd_config->max_request_bytes, len;
	struct evbuffer_ptr eol;
	char *line;
	json_t *reply;
	char msg[128];

	while (!conn->closing && !conn->linger) {
		eol = evbuffer_search_eol(in, NULL, &len, EVBUFFER_EOL_LF);
		if (eol.pos < 0) {
			if (evbuffer_get_length(in) <= max)
				return;
			/* A line that has already outgrown the limit: refuse it now. */
		} else if ((size_t)eol.pos <= max) {
			line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
			if (line == NULL)
				return;
			control_handle_line(conn, line, len);
			free(line);
			continue;
		}
		snprintf(msg, sizeof msg, "request line exceeds max_request_bytes (%zu bytes)", max);
		reply = proto_reply_error(NULL, "too_large", msg);
		control_send(conn, reply);
		json_decref(reply);
		conn->linger = true;
	}
	evbuffer_drain(in, evbuffer_get_length(in));
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		if (conn->closing)
			control_conn_free(conn);
		else
			control_linger(conn);
	}
}

static void
control_write(struct bufferevent *bev, void *arg)
{
	struct conn *conn = arg;

	if (conn->closing || (conn->peer_eof && conn->nwaiters == 0))
		control_conn_free(conn);
	else if (conn->linger)
		control_linger(conn);
}

static void
control_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *conn = arg;

	if (what & BEV_EVENT_ERROR)
		log_debug("connection %llu: %s", (unsigned long long)conn->serial,
		    strerror(errno));
	/*
	 * A client that only shut down its sending side (echo ... | socat) still
	 * reads: answer what it asked, waits included, then close.
	 */
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && !conn->linger &&
	    (conn->nwaiters > 0 ||
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0)) {
		conn->peer_eof = true;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	/* EOF, error or a lingering peer's timeout: its tasks go on, its waiters go away. */
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		control_conn_free(conn);
}

static void
control_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct ucred cred;
	socklen_t clen = sizeof cred;
	struct conn *conn;
	char msg[128];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    clen != sizeof cred) {
		/* Fail closed: no credentials, no service. */
		log_warn("control: cannot read peer credentials");
		close(fd);
		return;
	}
	if (!config_uid_allowed(kgymd_config, cred.uid, cred.gid)) {
		log_warnx("control: refused pid %ld uid %lu gid %lu (not in allow_uids/allow_gids)",
		    (long)cred.pid, (unsigned long)cred.uid, (unsigned long)cred.gid);
		snprintf(msg, sizeof msg, "uid %lu is not allowed to use this daemon",
		    (unsigned long)cred.uid);
		control_refuse(fd, "forbidden", msg);
		close(fd);
		return;
	}
	if (control_nconns >= (size_t)kgymd_config->max_connections) {
		log_warnx("control: refused a connection: max_connections (%d) reached",
		    kgymd_config->max_connections);
		snprintf(msg, sizeof msg, "the daemon has max_connections (%d) clients",
		    kgymd_config->max_connections);
		control_refuse(fd, "too_many_connections", msg);
		close(fd);
		return;
	}
	if ((conn = calloc(1, sizeof *conn)) == NULL) {
		close(fd);
		return;
	}
	conn->bev = bufferevent_socket_new(kgymd_base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (conn->bev == NULL) {
		close(fd);
		free(conn);
		return;
	}
	if ((conn->reap_ev = event_new(kgymd_base, -1, 0, control_reap, conn)) == NULL) {
		bufferevent_free(conn->bev);
		free(conn);
		return;
	}
	conn->serial = ++control_serial;
	conn->pid = cred.pid;
	conn->uid = cred.uid;
	conn->gid = cred.gid;
	conn->admin = config_uid_admin(kgymd_config, cred.uid);
	TAILQ_INSERT_TAIL(&control_conns, conn, entry);
	control_nconns++;
	bufferevent_setcb(conn->bev, control_read, control_write, control_event, conn);
	/* Stop reading once one unfinished line has passed the limit. */
	bufferevent_setwatermark(conn->bev, EV_READ, 0, kgymd_config->max_request_bytes + 2);
	bufferevent_enable(conn->bev, EV_READ | EV_WRITE);
	log_debug("connection %llu: pid %ld uid %lu%s", (unsigned long long)conn->serial,
	    (long)cred.pid, (unsigned long)cred.uid, conn->admin ? " (admin)" : "");
}

static void
control_accept_error(struct evconnlistener *l, void *arg)
{
	/* EMFILE and friends: log and keep listening; the loop retries. */
	log_warn("control: accept failed");
}

static int
control_start(int fd, char **ret_cause)
{
	control_listener = evconnlistener_new(kgymd_base, control_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (control_listener == NULL) {
		*ret_cause = strdup("cannot listen on the control socket");
		close(fd);
		return -EIO;
	}
	evconnlistener_set_error_cb(control_listener, control_accept_error);
	return 0;
}

/* Is a live daemon answering on `path`?  Then we must not steal its socket. */
static bool
control_path_live(const struct sockaddr_un *sun)
{
	int fd, live;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return false;
	live = connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0;
	close(fd);
	return live;
}

int
control_listen(const char *path, int mode, char **ret_cause)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, error;

	if (strlen(path) >= sizeof sun.sun_path) {
		if (asprintf(ret_cause, "%s: socket path too long", path) < 0)
			*ret_cause = NULL;
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			if (asprintf(ret_cause, "%s exists and is not a socket", path) < 0)
				*ret_cause = NULL;
			return -EEXIST;
		}
		if (control_path_live(&sun)) {
			if (asprintf(ret_cause, "%s: another kgymd is already listening", path) < 0)
				*ret_cause = NULL;
			return -EADDRINUSE;
		}
		unlink(path);	/* a stale socket of a crashed daemon */
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		goto fail;
	/* Create the socket with no access, then open it up to `mode`. */
	old = umask(0777);
	error = bind(fd, (struct sockaddr *)&sun, sizeof sun);
	umask(old);
	if (error < 0 || chmod(path, (mode_t)mode) < 0 || listen(fd, 512) < 0) {
		error = -errno;
		close(fd);
		errno = -error;
		goto fail;
	}
	if ((control_path = strdup(path)) == NULL)
		return -ENOMEM;
	return control_start(fd, ret_cause);
fail:
	error = -errno;
	if (asprintf(ret_cause, "%s: %s", path, strerror(errno)) < 0)
		*ret_cause = NULL;
	return error;
}

int
control_adopt(int fd, char **ret_cause)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		*ret_cause = strdup("cannot make the systemd socket non-blocking");
		return -errno;
	}
	/* The socket file belongs to systemd: never unlink it. */
	return control_start(fd, ret_cause);
}

void
control_close(void)
{
	if (control_listener != NULL) {
		evconnlistener_free(control_listener);
		control_listener = NULL;
	}
	if (control_path != NULL) {
		unlink(control_path);
		free(control_path);
		control_path = NULL;
	}
}

void
control_free_all(void)
{
	struct conn *conn;

	control_close();
	while ((conn = TAILQ_FIRST(&control_conns)) != NULL)
		control_conn_free(conn);
}

void
control_flush_and_close(void (*done)(void))
{
	struct conn *conn, *next;

	control_close();
	control_on_empty = done;
	for (conn = TAILQ_FIRST(&control_conns); conn != NULL; conn = next) {
		next = TAILQ_NEXT(conn, entry);
		conn->closing = true;
		bufferevent_disable(conn->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(conn->bev)) == 0)
			control_conn_free(conn);
	}
	if (control_nconns == 0)
		done();
}

size_t
control_connections(void)
{
	return control_nconns;
}
