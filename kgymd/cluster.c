/*
 * cluster.c -- the connections to the shared queue's Redis (DESIGN §12).
 *
 * hiredis's asynchronous API on kgymd's own libevent loop: nothing here
 * blocks.  Two connections: one for commands (in order, pipelined) and one
 * subscribed to the queue's channels (kgym:wake when tasks are added,
 * kgym:done when one ends).  A connection that fails or drops is tried
 * again every CLUSTER_RETRY_MS; meanwhile cluster_up() is false, and a
 * command's callback gets a NULL reply, which its caller must take as
 * "Redis is unavailable" (queue_redis.c keeps what it cannot write and
 * writes it once Redis is back).
 *
 * Connecting to a host name resolves it with getaddrinfo(), which may
 * block: kgymd.conf(5) says to give an address (or a name of /etc/hosts).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "cluster.h"

#define CLUSTER_RETRY_MS	500

struct cluster_conn {
	const char *name;		/* "commands" or "subscriber" */
	redisAsyncContext *ac;		/* NULL while down */
	bool up;
	bool subscriber;
	struct event *retry;
};

static struct cluster_addr cluster_addr;
static char *cluster_password;
static struct cluster_conn cluster_cmd = { .name = "commands" };
static struct cluster_conn cluster_sub = { .name = "subscriber", .subscriber = true };
static void (*cluster_on_up)(void);
static void (*cluster_on_message)(const char *channel, const char *data, size_t len);
static bool cluster_stopping;
static bool cluster_said_down;

static void cluster_connect(struct cluster_conn *c);

static struct cluster_conn *
cluster_conn_of(const redisAsyncContext *ac)
{
	return ac->data;
}

static void
cluster_retry_later(struct cluster_conn *c)
{
	struct timeval tv = { 0, CLUSTER_RETRY_MS * 1000 };

	c->ac = NULL;
	c->up = false;
	if (!cluster_stopping)
		evtimer_add(c->retry, &tv);
}

static void
cluster_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	cluster_connect(arg);
}

/* A reply we only log when it is an error (AUTH, SELECT, XGROUP). */
static void
cluster_check_reply(redisAsyncContext *ac, void *r, void *privdata)
{
	redisReply *reply = r;
	const char *what = privdata;

	if (reply != NULL && reply->type == REDIS_REPLY_ERROR &&
	    strncmp(reply->str, "BUSYGROUP", 9) != 0)
		log_warnx("cluster: Redis refused %s: %s", what, reply->str);
}

static void
cluster_message(redisAsyncContext *ac, void *r, void *privdata)
{
	redisReply *reply = r;

	if (reply == NULL || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
	    reply->element[0]->type != REDIS_REPLY_STRING ||
	    strcmp(reply->element[0]->str, "message") != 0 ||
	    reply->element[2]->type != REDIS_REPLY_STRING)
		return;
	if (cluster_on_message != NULL)
		cluster_on_message(reply->element[1]->str, reply->element[2]->str,
		    reply->element[2]->len);
}

static void
cluster_connected(const redisAsyncContext *cac, int status)
{
	struct cluster_conn *c = cluster_conn_of(cac);
	redisAsyncContext *ac = c->ac;
	char db[16];
	int p;

	if (status != REDIS_OK) {
		if (!cluster_said_down)
			log_warnx("cluster: cannot reach Redis (%s connection): %s; retrying",
			    c->name, cac->errstr);
		cluster_said_down = true;
		cluster_retry_later(c);	/* hiredis frees the context */
		return;
	}
	/* In order on this connection: AUTH and SELECT come before all else. */
	if (cluster_password != NULL)
		redisAsyncCommand(ac, cluster_check_reply, "AUTH", "AUTH %s",
		    cluster_password);
	c->up = true;
	if (c->subscriber) {
		redisAsyncCommand(ac, cluster_message, NULL, "SUBSCRIBE %s %s",
		    CLUSTER_CHANNEL_WAKE, CLUSTER_CHANNEL_DONE);
	} else {
		snprintf(db, sizeof db, "%d", cluster_addr.db);
		redisAsyncCommand(ac, cluster_check_reply, "SELECT", "SELECT %s", db);
		for (p = 0; p < PRIO__COUNT; p++)
			redisAsyncCommand(ac, cluster_check_reply, "XGROUP CREATE",
			    "XGROUP CREATE " CLUSTER_STREAM "%d " CLUSTER_GROUP " 0 MKSTREAM", p);
	}
	if (cluster_cmd.up && cluster_sub.up) {
		if (cluster_said_down)
			log_info("cluster: Redis is reachable again");
		cluster_said_down = false;
		if (cluster_on_up != NULL)
			cluster_on_up();
	}
}

static void
cluster_disconnected(const redisAsyncContext *ac, int status)
{
	struct cluster_conn *c = cluster_conn_of(ac);

	if (!cluster_stopping && !cluster_said_down)
		log_warnx("cluster: lost Redis (%s connection): %s", c->name,
		    ac->errstr[0] != '\0' ? ac->errstr : "closed");
	cluster_said_down = true;
	cluster_retry_later(c);
}

static void
cluster_connect(struct cluster_conn *c)
{
	redisAsyncContext *ac;

	if (cluster_addr.path[0] != '\0')
		ac = redisAsyncConnectUnix(cluster_addr.path);
	else
		ac = redisAsyncConnect(cluster_addr.host, cluster_addr.port);
	if (ac == NULL || ac->err) {
		if (!cluster_said_down)
			log_warnx("cluster: cannot connect to Redis: %s",
			    ac != NULL ? ac->errstr : "out of memory");
		cluster_said_down = true;
		if (ac != NULL)
			redisAsyncFree(ac);
		cluster_retry_later(c);
		return;
	}
	ac->data = c;
	c->ac = ac;
	redisLibeventAttach(ac, kgymd_base);
	redisAsyncSetConnectCallback(ac, cluster_connected);
	redisAsyncSetDisconnectCallback(ac, cluster_disconnected);
}

static int
cluster_read_password(const char *path, char **ret_cause)
{
	char buf[1024];
	FILE *f;
	size_t n;

	if ((f = fopen(path, "re")) == NULL) {
		if (asprintf(ret_cause, "password_file %s: %s", path, strerror(errno)) < 0)
			*ret_cause = NULL;
		return -errno;
	}
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	if (buf[0] == '\0') {
		if (asprintf(ret_cause, "password_file %s is empty", path) < 0)
			*ret_cause = NULL;
		return -EINVAL;
	}
	if ((cluster_password = strdup(buf)) == NULL)
		return -ENOMEM;
	explicit_bzero(buf, sizeof buf);
	return 0;
}

int
cluster_start(void (*on_up)(void), void (*on_message)(const char *, const char *, size_t),
    char **ret_cause)
{
	int error;

	if ((error = cluster_url_parse(kgymd_config->cluster_redis, &cluster_addr,
	    ret_cause)) < 0)
		return error;
	if (kgymd_config->cluster_password_file[0] != '\0' &&
	    (error = cluster_read_password(kgymd_config->cluster_password_file,
	    ret_cause)) < 0)
		return error;
	cluster_on_up = on_up;
	cluster_on_message = on_message;
	cluster_cmd.retry = evtimer_new(kgymd_base, cluster_retry_cb, &cluster_cmd);
	cluster_sub.retry = evtimer_new(kgymd_base, cluster_retry_cb, &cluster_sub);
	if (cluster_cmd.retry == NULL || cluster_sub.retry == NULL) {
		*ret_cause = strdup("out of memory");
		return -ENOMEM;
	}
	cluster_connect(&cluster_cmd);
	cluster_connect(&cluster_sub);
	return 0;
}

void
cluster_stop(void)
{
	struct cluster_conn *cs[] = { &cluster_cmd, &cluster_sub };
	size_t i;

	cluster_stopping = true;
	for (i = 0; i < 2; i++) {
		if (cs[i]->retry != NULL)
			event_free(cs[i]->retry);
		cs[i]->retry = NULL;
		/* Pending callbacks run now with no reply: their callers keep what is unsaid. */
		if (cs[i]->ac != NULL)
			redisAsyncFree(cs[i]->ac);
		cs[i]->ac = NULL;
		cs[i]->up = false;
	}
	if (cluster_password != NULL)
		explicit_bzero(cluster_password, strlen(cluster_password));
	free(cluster_password);
	cluster_password = NULL;
}

bool
cluster_up(void)
{
	return cluster_cmd.up && cluster_sub.up && !cluster_stopping;
}

int
cluster_command(cluster_reply_cb *cb, void *arg, int argc, const char **argv,
    const size_t *lens)
{
	if (!cluster_up() || cluster_cmd.ac == NULL)
		return -EAGAIN;
	if (redisAsyncCommandArgv(cluster_cmd.ac, (redisCallbackFn *)cb, arg, argc, argv,
	    lens) != REDIS_OK)
		return -EAGAIN;
	return 0;
}

/* ------------------------------------------------------------ argv lists */

int
cluster_argv_add(struct cluster_argv *a, const char *s, size_t len)
{
	const char **nv;
	size_t *nl;
	char **no;

	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 32;

		if ((nv = reallocarray(a->v, cap, sizeof *nv)) == NULL)
			return -ENOMEM;
		a->v = nv;
		if ((nl = reallocarray(a->len, cap, sizeof *nl)) == NULL)
			return -ENOMEM;
		a->len = nl;
		if ((no = reallocarray(a->owned, cap, sizeof *no)) == NULL)
			return -ENOMEM;
		a->owned = no;
		a->cap = cap;
	}
	a->owned[a->n] = NULL;
	a->v[a->n] = s;
	a->len[a->n++] = len;
	return 0;
}

int
cluster_argv_str(struct cluster_argv *a, const char *s)
{
	return cluster_argv_add(a, s != NULL ? s : "", s != NULL ? strlen(s) : 0);
}

int
cluster_argv_fmt(struct cluster_argv *a, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	if (cluster_argv_add(a, s, (size_t)n) < 0) {
		free(s);
		return -ENOMEM;
	}
	a->owned[a->n - 1] = s;
	return 0;
}

void
cluster_argv_clear(struct cluster_argv *a)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		free(a->owned[i]);
	free(a->v);
	free(a->len);
	free(a->owned);
	memset(a, 0, sizeof *a);
}
