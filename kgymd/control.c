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
#include <sys/resource.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "kgymd.h"

/* A refused client may take this long to read its error line and close. */
#define CONTROL_LINGER_S	5
/* Refused clients lingering at once; more get the short refusal. */
#define CONTROL_REFUSED_MAX	64
/* Lines of one connection answered in one turn of the loop, in microseconds. */
#define CONTROL_TURN_US		300
/* After a line this long, freed memory goes back to the system. */
#define CONTROL_TRIM_BYTES	(1024 * 1024)
/*
 * Lines this long are parsed off the loop: jansson takes about 3 ms for an
 * 80 KB submit of 1,000 tasks and 13 ms for 100 tasks of 8 KiB, time every
 * other client would wait.  Shorter lines parse in microseconds, less than
 * the trip to the parser thread costs.
 */
#define CONTROL_OFFLOAD_BYTES	(16 * 1024)

/* A client on the socket: a peer (peer.c) and its bytes. */
struct conn {
	struct peer peer;		/* who it is, what it holds: ops.c's and wait.c's */
	struct bufferevent *bev;
	uint64_t serial;
	bool refused;			/* refused at accept: only its error line */
	bool closing;			/* close once the output is flushed */
	bool linger;			/* refused (too_large, busy): half-close, discard input */
	bool half_closed;
	bool peer_eof;			/* the client stopped sending; close once answered */
	bool dropped;			/* too slow a reader: being freed by reap_ev */
	struct event *reap_ev;		/* frees the connection from its own event */
	struct event *resume_ev;	/* the next buffered line, on the next loop turn */
	struct event *idle_ev;		/* idle_timeout */
	size_t in_counted;		/* its input bytes counted in max_input_bytes */
	size_t scanned;			/* input bytes known to hold no newline */
	struct control_parse *parsing;	/* a long line being parsed off the loop */
	struct control_parse *ready;	/* parsed ahead: answered after the pending submit */
	TAILQ_ENTRY(conn) entry;
};

#define control_conn_of(p)	((struct conn *)((char *)(p) - offsetof(struct conn, peer)))

/* A line with the parser thread; the connection reads no further meanwhile. */
struct control_parse {
	struct offload_job job;
	struct conn *conn;		/* NULL once the connection is gone */
	char *line;
	size_t len;
	int rc;
	struct request req;
	json_t *id;
	struct proto_error err;
	uint64_t t0;
};

static void control_parse_discard(struct control_parse *);

static struct evconnlistener *control_listener;
static char *control_path;
static TAILQ_HEAD(, conn) control_conns = TAILQ_HEAD_INITIALIZER(control_conns);
static size_t control_nconns;		/* served connections, not refused ones */
static size_t control_nrefused;		/* refused ones still saying why */
static size_t control_input;		/* sum of every connection's in_counted */
static uint64_t control_serial;
static void (*control_on_empty)(void);
static int control_spare_fd = -1;	/* given up to accept and refuse at EMFILE */

static void control_process(struct conn *conn);
static void control_send(struct conn *conn, const json_t *reply);
static void control_send_line(struct conn *conn, const char *line, size_t len);
static void control_resume(struct conn *conn);

static void
control_peer_send(struct peer *peer, const json_t *msg)
{
	control_send(control_conn_of(peer), msg);
}

static void
control_peer_send_line(struct peer *peer, const char *line, size_t len)
{
	control_send_line(control_conn_of(peer), line, len);
}

static void
control_peer_resume(struct peer *peer)
{
	control_resume(control_conn_of(peer));
}

static const struct peer_transport control_transport = {
	.send = control_peer_send,
	.send_line = control_peer_send_line,
	.resume = control_peer_resume,
};

/*
 * Come back to this connection on the next turn of the loop, after the
 * loop has polled every socket: a zero timeout, not event_active(), since
 * an event made active from its own callback runs again before any other
 * client is read.
 */
static void
control_later(struct conn *conn)
{
	static const struct timeval now = { 0, 0 };

	evtimer_add(conn->resume_ev, &now);
}

/* Count the connection's input buffer in the global input budget. */
static void
control_account(struct conn *conn)
{
	size_t n = conn->bev != NULL ?
	    evbuffer_get_length(bufferevent_get_input(conn->bev)) : 0;

	control_input = control_input - conn->in_counted + n;
	conn->in_counted = n;
}

static void
control_conn_free(struct conn *conn)
{
	if (conn->parsing != NULL)
		conn->parsing->conn = NULL;	/* its done() frees it */
	control_parse_discard(conn->ready);
	conn->ready = NULL;
	if (conn->reap_ev != NULL)
		event_free(conn->reap_ev);
	if (conn->resume_ev != NULL)
		event_free(conn->resume_ev);
	if (conn->idle_ev != NULL)
		event_free(conn->idle_ev);
	peer_release(&conn->peer);
	control_input -= conn->in_counted;
	TAILQ_REMOVE(&control_conns, conn, entry);
	if (conn->refused)
		control_nrefused--;
	else
		control_nconns--;
	bufferevent_free(conn->bev);
	free(conn);
	if (control_nconns == 0 && control_nrefused == 0 && control_on_empty != NULL)
		control_on_empty();
}

static void
control_reap(evutil_socket_t fd, short what, void *arg)
{
	control_conn_free(arg);
}

/*
 * Did the peer close its socket, not just shut down its sending side?  A
 * Unix stream socket whose peer is gone reports POLLHUP; one whose peer
 * only called shutdown(SHUT_WR) reports POLLRDHUP alone.
 */
static bool
control_peer_gone(struct conn *conn)
{
	struct pollfd pfd = { .fd = bufferevent_getfd(conn->bev), .events = POLLOUT };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR)) != 0;
}

static void
control_idle_arm(struct conn *conn)
{
	struct timeval tv = { .tv_sec = kgymd_config->idle_timeout_s };

	if (conn->idle_ev != NULL)
		evtimer_add(conn->idle_ev, &tv);
}

/*
 * Nothing asked for idle_timeout: close, unless the connection is waiting
 * for tasks or a request of it is still being served.  A half-closed client
 * that waits is looked at again, so one that has closed since goes away.
 */
static void
control_idle(evutil_socket_t fd, short what, void *arg)
{
	struct conn *conn = arg;

	if (conn->peer_eof && control_peer_gone(conn)) {
		log_debug("connection %llu: the client has gone; dropping its waits",
		    (unsigned long long)conn->serial);
		control_conn_free(conn);
		return;
	}
	if (conn->peer.nwaiters > 0 || conn->peer.pending != NULL || conn->parsing != NULL ||
	    conn->ready != NULL) {
		control_idle_arm(conn);
		return;
	}
	log_debug("connection %llu: idle for idle_timeout (%lld s); closing it",
	    (unsigned long long)conn->serial, (long long)kgymd_config->idle_timeout_s);
	control_conn_free(conn);
}

/* Queue an encoded line (len bytes ending in '\n'); not if the client is too slow. */
static void
control_send_line(struct conn *conn, const char *line, size_t len)
{
	struct evbuffer *out;

	if (conn == NULL || line == NULL || conn->dropped || conn->peer.gone)
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
	evbuffer_add(out, line, len);
}

static void
control_send(struct conn *conn, const json_t *reply)
{
	size_t len;
	char *line;

	if (conn == NULL || reply == NULL || conn->dropped || conn->peer.gone)
		return;
	if ((line = proto_encode(reply, &len)) == NULL) {
		log_warnx("connection %llu: cannot encode a reply", (unsigned long long)conn->serial);
		return;
	}
	control_send_line(conn, line, len);
	free(line);
}

/* Refuse the connection: one error line, then half-close and discard its input. */
static void
control_refuse_conn(struct conn *conn, const char *code, const char *message)
{
	json_t *reply = proto_reply_error(NULL, code, message);

	control_send(conn, reply);
	json_decref(reply);
	conn->linger = true;
}

/* A line parsed (rc 0: req is the request; else err, and id if it had one). */
static void
control_handle_parsed(struct conn *conn, int rc, struct request *req, json_t *id,
    const struct proto_error *err, uint64_t t0)
{
	json_t *reply;

	if (rc < 0) {
		reply = proto_reply_error(id, err->code, err->message);
		control_send(conn, reply);
		json_decref(reply);
		json_decref(id);
		return;
	}
	json_decref(id);
	if (ops_dispatch(&conn->peer, req) > 0)
		return;		/* ops.c goes on with it, and owns it */
	stats_request(req->op, stats_now_us() - t0);
	proto_request_clear(req);
}

/* In the parser thread: jansson only, nothing of the loop's. */
static void
control_parse_run(void *arg)
{
	struct control_parse *p = arg;

	p->rc = proto_parse_request(p->line, p->len, &p->req, &p->id, &p->err);
	free(p->line);
	p->line = NULL;
}

static void
control_parse_discard(struct control_parse *p)
{
	if (p == NULL)
		return;
	if (p->rc == 0)
		proto_request_clear(&p->req);
	json_decref(p->id);
	free(p);
}

/* Answer a line the parser thread is done with. */
static void
control_parse_answer(struct conn *conn, struct control_parse *p)
{
	control_handle_parsed(conn, p->rc, &p->req, p->id, &p->err, p->t0);
	/* A big line's parse trees leave freed memory behind: give it back. */
	if (p->len >= CONTROL_TRIM_BYTES)
		malloc_trim(0);
	free(p);
}

static void
control_parse_done(void *arg)
{
	struct control_parse *p = arg;
	struct conn *conn = p->conn;

	if (conn == NULL) {
		control_parse_discard(p);
		return;
	}
	conn->parsing = NULL;
	if (conn->peer.pending != NULL) {
		/* Parsed ahead: its turn comes when the submit before it is answered. */
		conn->ready = p;
		return;
	}
	control_parse_answer(conn, p);
	control_resume(conn);
}

/* Hand a long line (owned) to the parser thread; false: parse it here. */
static bool
control_parse_later(struct conn *conn, char *line, size_t len, uint64_t t0)
{
	struct control_parse *p;

	if ((p = calloc(1, sizeof *p)) == NULL)
		return false;
	p->conn = conn;
	p->line = line;
	p->len = len;
	p->t0 = t0;
	p->job.run = control_parse_run;
	p->job.done = control_parse_done;
	p->job.arg = p;
	conn->parsing = p;
	if (!offload_parser_submit(&p->job)) {
		conn->parsing = NULL;
		free(p);
		return false;
	}
	return true;
}

/* Answer one line (owned; freed here or by the parser). */
static void
control_handle_line(struct conn *conn, char *line, size_t len)
{
	struct request req = { 0 };
	struct proto_error err = { 0 };
	json_t *id = NULL;
	uint64_t t0 = stats_now_us();
	int rc;

	/* Tolerate CRLF clients; skip blank lines. */
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len == 0) {
		free(line);
		return;
	}
	if (len >= CONTROL_OFFLOAD_BYTES && control_parse_later(conn, line, len, t0))
		return;
	rc = proto_parse_request(line, len, &req, &id, &err);
	free(line);
	control_handle_parsed(conn, rc, &req, id, &err, t0);
}

/*
 * Half-close after the last reply, then read and discard until the peer
 * closes: closing a socket with unread input makes the kernel send a reset,
 * and the client would lose the error reply that explains why.
 */
static void
control_linger(struct conn *conn)
{
	struct timeval tv = { .tv_sec = CONTROL_LINGER_S };

	if (conn->half_closed)
		return;
	conn->half_closed = true;
	shutdown(bufferevent_getfd(conn->bev), SHUT_WR);
	bufferevent_set_timeouts(conn->bev, &tv, NULL);
	bufferevent_setwatermark(conn->bev, EV_READ, 0, 0);
	bufferevent_enable(conn->bev, EV_READ);
	if (conn->idle_ev != NULL)
		evtimer_del(conn->idle_ev);
}

/* Has this connection anything left to do: a line to answer, a wait, output? */
static bool
control_busy(struct conn *conn)
{
	return conn->peer.pending != NULL || conn->parsing != NULL || conn->ready != NULL ||
	    conn->peer.nwaiters > 0 ||
	    evbuffer_get_length(bufferevent_get_output(conn->bev)) > 0 ||
	    evbuffer_get_length(bufferevent_get_input(conn->bev)) > 0;
}

/* A client that stopped sending is closed once everything is answered. */
static bool
control_finish_if_done(struct conn *conn)
{
	if ((conn->peer_eof || conn->peer.gone) && !conn->linger && !control_busy(conn)) {
		control_conn_free(conn);
		return true;
	}
	return false;
}

/*
 * The next complete line, if any: the search starts where the last one
 * stopped, so a long line arriving in pieces is scanned once, not once per
 * piece.
 */
static char *
control_next_line(struct conn *conn, size_t min, size_t *ret_len, bool *ret_too_long)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	struct evbuffer_ptr from, eol;
	size_t max = kgymd_config->max_request_bytes, len = evbuffer_get_length(in);
	char *line;

	*ret_too_long = false;
	if (conn->scanned > len)
		conn->scanned = 0;
	if (evbuffer_ptr_set(in, &from, conn->scanned, EVBUFFER_PTR_SET) < 0)
		return NULL;
	eol = evbuffer_search(in, "\n", 1, &from);
	if (eol.pos < 0) {
		conn->scanned = len;
		*ret_too_long = len > max;
		return NULL;
	}
	conn->scanned = 0;
	if ((size_t)eol.pos > max) {
		*ret_too_long = true;
		return NULL;
	}
	if ((size_t)eol.pos < min)
		return NULL;	/* left in the buffer */
	if ((line = malloc((size_t)eol.pos + 1)) == NULL)
		return NULL;
	evbuffer_remove(in, line, (size_t)eol.pos);
	evbuffer_drain(in, 1);
	line[eol.pos] = '\0';
	*ret_len = (size_t)eol.pos;
	return line;
}

/*
 * While a submit is being stored, the parser thread may already parse the
 * next long line of the same client: a client that pipelines big submits
 * then pays for parsing and storing side by side, not one after the other.
 * The line is answered only after the submit before it, so replies keep
 * their order.  Short lines wait in the buffer as before.
 */
static void
control_parse_ahead(struct conn *conn)
{
	size_t len = 0, n;
	bool too_long;
	char *line;

	if (conn->parsing != NULL || conn->ready != NULL || conn->linger || conn->closing)
		return;
	line = control_next_line(conn, CONTROL_OFFLOAD_BYTES, &len, &too_long);
	if (line == NULL)
		return;
	n = len;
	if (line[len - 1] == '\r')
		len--;
	if (!control_parse_later(conn, line, len, stats_now_us())) {
		/* No thread for it: the line goes back to wait its turn. */
		evbuffer_prepend(bufferevent_get_input(conn->bev), "\n", 1);
		evbuffer_prepend(bufferevent_get_input(conn->bev), line, n);
		free(line);
	}
	control_account(conn);
}

/* Turn a client away for the input budget: busy, its unfinished line dropped. */
static void
control_refuse_busy(struct conn *conn)
{
	char msg[160];

	log_warnx("connection %llu: unfinished requests of all clients exceed "
	    "max_input_bytes (%zu bytes); refusing the one holding the most (%zu)",
	    (unsigned long long)conn->serial, kgymd_config->max_input_bytes, conn->in_counted);
	snprintf(msg, sizeof msg, "the daemon holds max_input_bytes (%zu bytes) of "
	    "unfinished requests; send again later", kgymd_config->max_input_bytes);
	control_refuse_conn(conn, "busy", msg);
}

/* The same for a connection other than the one being read: drop its input now. */
static void
control_turn_away_busy(struct conn *conn)
{
	control_refuse_busy(conn);
	evbuffer_drain(bufferevent_get_input(conn->bev),
	    evbuffer_get_length(bufferevent_get_input(conn->bev)));
	control_account(conn);
	if (evbuffer_get_length(bufferevent_get_output(conn->bev)) == 0)
		control_linger(conn);
}

/*
 * The served connection holding the most unfinished input, `self` on a
 * tie; only one whose input is idle (no line being parsed or answered) may
 * be picked in place of `self`.
 */
static struct conn *
control_biggest(struct conn *self)
{
	struct conn *c, *best = self;

	TAILQ_FOREACH(c, &control_conns, entry) {
		if (c == self || c->refused || c->linger || c->closing || c->bev == NULL ||
		    c->parsing != NULL || c->ready != NULL || c->peer.pending != NULL)
			continue;
		if (c->in_counted > best->in_counted)
			best = c;
	}
	return best;
}

/*
 * Answer buffered lines for at most CONTROL_TURN_US, then come back on the
 * next loop turn for the rest: a client that pipelines thousands of
 * requests takes its turn with the others instead of holding the loop, and
 * the requests of one turn still share the scheduler's transactions.
 */
static void
control_process(struct conn *conn)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	uint64_t t0 = stats_now_us();
	struct conn *victim = NULL;
	size_t len = 0;
	bool too_long;
	char msg[160];
	char *line;

	if (conn->linger || conn->closing) {
		evbuffer_drain(in, evbuffer_get_length(in));
		control_account(conn);
		return;
	}
	if (conn->parsing != NULL)
		return;		/* control_parse_done() brings us back */
	if (conn->peer.pending != NULL) {
		control_parse_ahead(conn);
		return;		/* control_resume() brings us back */
	}
	if (conn->ready != NULL) {
		struct control_parse *p = conn->ready;

		conn->ready = NULL;
		control_parse_answer(conn, p);
		control_idle_arm(conn);
		if (control_finish_if_done(conn))
			return;
		if (conn->peer.pending != NULL) {
			control_parse_ahead(conn);
			return;
		}
		if (conn->linger)
			return;
	}
	while ((line = control_next_line(conn, 0, &len, &too_long)) != NULL) {
		control_handle_line(conn, line, len);
		/* A big line's parse trees leave freed memory behind: give it back. */
		if (len >= CONTROL_TRIM_BYTES)
			malloc_trim(0);
		control_idle_arm(conn);
		control_account(conn);
		if (control_finish_if_done(conn))
			return;
		if (conn->peer.pending != NULL) {
			control_parse_ahead(conn);
			return;
		}
		if (conn->parsing != NULL || conn->linger)
			return;
		if (stats_now_us() - t0 >= CONTROL_TURN_US) {
			/* Our turn is over; the others' sockets first. */
			if (evbuffer_get_length(in) > 0)
				control_later(conn);
			return;
		}
	}
	if (too_long) {
		snprintf(msg, sizeof msg, "request line exceeds max_request_bytes (%zu bytes)",
		    kgymd_config->max_request_bytes);
		control_refuse_conn(conn, "too_large", msg);
	} else if (control_input > kgymd_config->max_input_bytes &&
	    evbuffer_get_length(in) > 0 && (victim = control_biggest(conn)) == conn) {
		/* This client holds the most: it goes, and memory stays bounded. */
		control_refuse_busy(conn);
	} else {
		/*
		 * Past the budget with another client holding more unfinished
		 * input than this one: that one is turned away, not whoever
		 * happened to send the last bytes (a gateway's connection,
		 * carrying many users' requests, would otherwise lose to anyone
		 * who fills the budget first).
		 */
		if (control_input > kgymd_config->max_input_bytes &&
		    evbuffer_get_length(in) > 0)
			control_turn_away_busy(victim);
		/* A client that stopped sending will never finish this line. */
		if (conn->peer_eof || conn->peer.gone) {
			evbuffer_drain(in, evbuffer_get_length(in));
			control_account(conn);
		}
		control_finish_if_done(conn);
		return;
	}
	evbuffer_drain(in, evbuffer_get_length(in));
	control_account(conn);
	if (evbuffer_get_length(bufferevent_get_output(conn->bev)) == 0)
		control_linger(conn);
}

static void
control_read(struct bufferevent *bev, void *arg)
{
	struct conn *conn = arg;

	control_account(conn);
	control_process(conn);
}

static void
control_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	control_process(arg);
}

static void
control_resume(struct conn *conn)
{
	control_idle_arm(conn);
	if (!control_finish_if_done(conn))
		control_later(conn);
}

static void
control_write(struct bufferevent *bev, void *arg)
{
	struct conn *conn = arg;

	if (conn->closing)
		control_conn_free(conn);
	else if (conn->linger)
		control_linger(conn);
	else
		control_finish_if_done(conn);
}

static void
control_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *conn = arg;

	if (what & BEV_EVENT_ERROR)
		log_debug("connection %llu: %s", (unsigned long long)conn->serial,
		    strerror(errno));
	if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		control_conn_free(conn);
		return;
	}
	if (conn->linger) {
		/* Refused: close once its error line is out. */
		bufferevent_disable(bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			control_conn_free(conn);
		else
			conn->closing = true;
		return;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	bufferevent_disable(bev, EV_READ);
	if (control_peer_gone(conn)) {
		/*
		 * The client closed its socket: nobody will read a reply or an
		 * event, so its waits go now (its tasks go on).  Lines it sent
		 * before closing are still served: a submit still submits.
		 */
		conn->peer.gone = true;
		wait_peer_gone(&conn->peer);
		evbuffer_drain(bufferevent_get_output(bev),
		    evbuffer_get_length(bufferevent_get_output(bev)));
	} else {
		/*
		 * A client that only shut down its sending side (echo ... | socat)
		 * still reads: answer what it asked, waits included, then close.
		 */
		conn->peer_eof = true;
	}
	if (!control_finish_if_done(conn) && conn->peer.pending == NULL &&
	    evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		control_later(conn);
}

static struct conn *
control_conn_new(int fd, const struct ucred *cred, bool refused)
{
	struct conn *conn;

	if ((conn = calloc(1, sizeof *conn)) == NULL) {
		close(fd);
		return NULL;
	}
	peer_init(&conn->peer, &control_transport);
	conn->bev = bufferevent_socket_new(kgymd_base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (conn->bev == NULL) {
		close(fd);
		free(conn);
		return NULL;
	}
	conn->reap_ev = event_new(kgymd_base, -1, 0, control_reap, conn);
	conn->resume_ev = evtimer_new(kgymd_base, control_resume_cb, conn);
	conn->idle_ev = refused ? NULL : evtimer_new(kgymd_base, control_idle, conn);
	if (conn->reap_ev == NULL || conn->resume_ev == NULL ||
	    (!refused && conn->idle_ev == NULL)) {
		if (conn->reap_ev != NULL)
			event_free(conn->reap_ev);
		if (conn->resume_ev != NULL)
			event_free(conn->resume_ev);
		if (conn->idle_ev != NULL)
			event_free(conn->idle_ev);
		bufferevent_free(conn->bev);
		free(conn);
		return NULL;
	}
	conn->serial = ++control_serial;
	conn->refused = refused;
	conn->peer.pid = cred->pid;
	conn->peer.uid = cred->uid;
	conn->peer.gid = cred->gid;
	conn->peer.admin = config_uid_admin(kgymd_config, cred->uid);
	snprintf(conn->peer.owner, sizeof conn->peer.owner, "uid:%lu", (unsigned long)cred->uid);
	TAILQ_INSERT_TAIL(&control_conns, conn, entry);
	if (refused)
		control_nrefused++;
	else
		control_nconns++;
	bufferevent_setcb(conn->bev, control_read, control_write, control_event, conn);
	return conn;
}

/*
 * Refuse a client with one error line it can read.  While few refused
 * clients linger, each gets a connection of its own that half-closes after
 * the line and discards what the client sends until it closes (at most
 * CONTROL_LINGER_S); past that, the line is written at once, the input read
 * so far discarded, and the socket shut down before it is closed.
 */
static void
control_refuse(int fd, const struct ucred *cred, const char *code, const char *message)
{
	json_t *reply;
	struct conn *conn;
	char buf[4096];
	size_t len;
	char *line;
	int i;

	if (control_nrefused < CONTROL_REFUSED_MAX &&
	    (conn = control_conn_new(fd, cred, true)) != NULL) {
		control_refuse_conn(conn, code, message);
		bufferevent_enable(conn->bev, EV_WRITE);
		return;
	}
	reply = proto_reply_error(NULL, code, message);
	line = proto_encode(reply, &len);
	for (i = 0; i < 16 && read(fd, buf, sizeof buf) > 0; i++)
		;
	/* Best effort: the peer may already be gone; the socket is non-blocking. */
	if (line != NULL && write(fd, line, len) < 0)
		log_debug("refusal to fd %d not delivered: %s", fd, strerror(errno));
	shutdown(fd, SHUT_WR);
	free(line);
	json_decref(reply);
	close(fd);
}

static void
control_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct ucred cred;
	socklen_t clen = sizeof cred;
	struct conn *conn;
	size_t limit = (size_t)kgymd_config->max_connections;
	size_t reserve = (size_t)kgymd_config->admin_connections;
	char msg[160];

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
		control_refuse(fd, &cred, "forbidden", msg);
		return;
	}
	/* The last admin_connections places are kept for admins. */
	if (reserve >= limit)
		reserve = limit - 1;
	if (control_nconns >= limit ||
	    (control_nconns >= limit - reserve && !config_uid_admin(kgymd_config, cred.uid))) {
		log_warnx("control: refused a connection of uid %lu: max_connections (%d) reached%s",
		    (unsigned long)cred.uid, kgymd_config->max_connections,
		    control_nconns < limit ? " for non-admin peers" : "");
		snprintf(msg, sizeof msg, "the daemon has max_connections (%d) clients%s",
		    kgymd_config->max_connections, control_nconns < limit ?
		    " (the rest are kept for admins)" : "");
		control_refuse(fd, &cred, "too_many_connections", msg);
		return;
	}
	if ((conn = control_conn_new(fd, &cred, false)) == NULL)
		return;
	/* Stop reading once one unfinished line has passed the limit. */
	bufferevent_setwatermark(conn->bev, EV_READ, 0, kgymd_config->max_request_bytes + 2);
	bufferevent_enable(conn->bev, EV_READ | EV_WRITE);
	control_idle_arm(conn);
	log_debug("connection %llu: pid %ld uid %lu%s", (unsigned long long)conn->serial,
	    (long)cred.pid, (unsigned long)cred.uid, conn->peer.admin ? " (admin)" : "");
}

/*
 * Out of file descriptors (EMFILE, ENFILE): the waiting client would stay
 * in the backlog, and the listener would wake the loop again at once.  Give
 * up the spare descriptor, accept the client, tell it why, and take the
 * spare back.
 */
static void
control_accept_error(struct evconnlistener *l, void *arg)
{
	struct ucred cred = { 0 };
	socklen_t clen = sizeof cred;
	int err = errno, fd;

	log_warn("control: accept failed");
	if ((err != EMFILE && err != ENFILE) || control_spare_fd < 0)
		return;
	close(control_spare_fd);
	control_spare_fd = -1;
	fd = accept4(evconnlistener_get_fd(l), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
			memset(&cred, 0, sizeof cred);
		/* No room for a lingering connection: the short refusal. */
		control_nrefused += CONTROL_REFUSED_MAX;
		control_refuse(fd, &cred, "too_many_connections",
		    "the daemon is out of file descriptors");
		control_nrefused -= CONTROL_REFUSED_MAX;
	}
	control_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
	if (control_spare_fd < 0)
		control_spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return 0;
}

int
control_listen(const char *path, int mode, char **ret_cause)
{
	int fd, error;

	if ((error = ctlsock_bind(path, mode, &fd, ret_cause)) < 0)
		return error;
	if ((control_path = strdup(path)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	return control_start(fd, ret_cause);
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
	if (control_spare_fd >= 0) {
		close(control_spare_fd);
		control_spare_fd = -1;
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
	/* Lines still being parsed are answered (or dropped) first. */
	offload_parser_free();
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
	if (control_nconns == 0 && control_nrefused == 0)
		done();
}

size_t
control_connections(void)
{
	return control_nconns;
}

size_t
control_input_bytes(void)
{
	return control_input;
}
