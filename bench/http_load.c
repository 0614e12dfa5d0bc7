/*
 * http_load.c -- load generator for bench/http_gateway.py: many synchronous
 * evaluations at once, through kgymd-http or straight to kgymd's socket.
 *
 *   bench/http_load -m http -a HOST:PORT -n N -c C [-p PREFIX] [-t TOKEN] [-d MS]
 *   bench/http_load -m socket -a SOCKET -n N -c C [-p PREFIX]
 *   (-L: a second line, every request's latency in ms, a JSON array)
 *
 * N evaluations of the selftest workflow's in-daemon "ok" task, C at a
 * time.  In http mode each of C keep-alive connections (libevent's evhttp
 * client) posts /evaluate with a fresh task_id and waits for the answer;
 * in socket mode C submits with "wait":true are kept in flight on one
 * connection to kgymd, as the gateway itself does: the difference between
 * the two is what the gateway adds.  A request counts as done when its
 * answer says the task completed; anything else is an error, and a
 * request with no answer at all is lost.  Prints one JSON line of results.
 */
#include "config.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

struct load {
	struct event_base *base;
	const char *mode, *addr, *prefix, *token;
	bool all_latencies;
	char host[64];
	int port;
	long n, c, next, done, ok, errors;
	long delay_ms;			/* each task's delay_ms */
	double *lat_ms;	     /* per request, by index */
	struct timespec *t0; /* per request, by index */
	struct timespec start, end;
	struct bufferevent *sock; /* socket mode */
	char first_error[256];
};

struct hconn {
	struct load *L;
	struct evhttp_connection *evcon;
	long cur;
};

static double
since_ms(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) * 1e3 +
	    (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

static void
finish(struct load *L, long i, bool ok, const char *why)
{
	L->lat_ms[i] = since_ms(&L->t0[i]);
	L->done++;
	if (ok)
		L->ok++;
	else {
		L->errors++;
		if (L->first_error[0] == '\0')
			snprintf(L->first_error, sizeof L->first_error, "%s", why);
	}
	if (L->done == L->n) {
		clock_gettime(CLOCK_MONOTONIC, &L->end);
		event_base_loopbreak(L->base);
	}
}

static char *
task_body(struct load *L, long i)
{
	char *s;

	if (asprintf(&s,
		"{\"task_id\":\"%s-%ld\",\"workflow\":\"selftest\",\"action\":\"ok\","
		"\"delay_ms\":%ld,\"in_daemon\":true}",
		L->prefix, i, L->delay_ms) < 0)
		return NULL;
	return s;
}

/* ------------------------------------------------------------- http mode */

static void http_next(struct hconn *hc);

static void
http_done(struct evhttp_request *req, void *arg)
{
	struct hconn *hc = arg;
	struct load *L = hc->L;
	struct evbuffer *in;
	char why[128], want[160];
	const char *body;
	bool ok = false;
	size_t len;

	if (req == NULL || evhttp_request_get_response_code(req) == 0) {
		snprintf(why, sizeof why, "no answer (connection failed)");
	} else if (evhttp_request_get_response_code(req) != 200) {
		snprintf(
		    why, sizeof why, "HTTP %d", evhttp_request_get_response_code(req));
	} else {
		in = evhttp_request_get_input_buffer(req);
		len = evbuffer_get_length(in);
		body = (const char *)evbuffer_pullup(in, -1);
		snprintf(
		    want, sizeof want, "\"task_id\":\"%s-%ld\"", L->prefix, hc->cur);
		ok = body != NULL &&
		    memmem(body, len, "\"status\":\"completed\"", 20) != NULL &&
		    memmem(body, len, want, strlen(want)) != NULL;
		snprintf(why, sizeof why, "HTTP 200 without the completed result");
	}
	finish(L, hc->cur, ok, why);
	http_next(hc);
}

static void
http_next(struct hconn *hc)
{
	struct load *L = hc->L;
	struct evhttp_request *req;
	struct evkeyvalq *h;
	char *body, auth[300];
	long i;

	if (L->next >= L->n)
		return;
	i = hc->cur = L->next++;
	body = task_body(L, i);
	req = evhttp_request_new(http_done, hc);
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", L->host);
	evhttp_add_header(h, "Content-Type", "application/json");
	if (L->token != NULL) {
		snprintf(auth, sizeof auth, "Bearer %s", L->token);
		evhttp_add_header(h, "Authorization", auth);
	}
	evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	free(body);
	clock_gettime(CLOCK_MONOTONIC, &L->t0[i]);
	if (evhttp_make_request(hc->evcon, req, EVHTTP_REQ_POST, "/evaluate") < 0)
		finish(L, i, false, "evhttp_make_request failed");
}

static int
http_start(struct load *L)
{
	struct hconn *hc;
	char *colon = strrchr(L->addr, ':');
	long k;

	if (colon == NULL || (size_t)(colon - L->addr) >= sizeof L->host)
		return -EINVAL;
	memcpy(L->host, L->addr, (size_t)(colon - L->addr));
	L->host[colon - L->addr] = '\0';
	L->port = atoi(colon + 1);
	for (k = 0; k < L->c; k++) {
		if ((hc = calloc(1, sizeof *hc)) == NULL)
			return -ENOMEM;
		hc->L = L;
		hc->evcon = evhttp_connection_base_new(
		    L->base, NULL, L->host, (unsigned short)L->port);
		if (hc->evcon == NULL)
			return -ENOMEM;
		evhttp_connection_set_timeout(hc->evcon, 600);
		http_next(hc);
	}
	return 0;
}

/* ----------------------------------------------------------- socket mode */

static void
sock_send(struct load *L)
{
	char *body, *line;
	long i = L->next++;

	body = task_body(L, i);
	if (asprintf(&line,
		"{\"v\":1,\"id\":%ld,\"op\":\"submit\",\"wait\":true,\"task\":{"
		"\"task_id\":\"%s-%ld\",\"workflow\":\"selftest\",\"payload\":%s}}\n",
		i, L->prefix, i, body) < 0)
		line = NULL;
	free(body);
	clock_gettime(CLOCK_MONOTONIC, &L->t0[i]);
	if (line == NULL || bufferevent_write(L->sock, line, strlen(line)) < 0)
		finish(L, i, false, "cannot send");
	free(line);
}

static void
sock_read(struct bufferevent *bev, void *arg)
{
	struct load *L = arg;
	json_t *msg, *res;
	const char *status;
	char *line;
	size_t len;
	long id;

	while ((line = evbuffer_readln(
		    bufferevent_get_input(bev), &len, EVBUFFER_EOL_LF)) != NULL) {
		msg = json_loadb(line, len, 0, NULL);
		free(line);
		if (msg == NULL)
			continue;
		id = (long)json_integer_value(json_object_get(msg, "id"));
		if (json_is_string(json_object_get(msg, "event")) && id >= 0 &&
		    id < L->n) {
			res = json_object_get(msg, "result");
			status = json_string_value(json_object_get(res, "status"));
			finish(L, id,
			    status != NULL && strcmp(status, "completed") == 0,
			    "result not completed");
			if (L->next < L->n)
				sock_send(L);
		} else if (json_is_false(json_object_get(msg, "ok")) && id >= 0 &&
		    id < L->n) {
			finish(L, id, false, "kgymd error reply");
			if (L->next < L->n)
				sock_send(L);
		}
		json_decref(msg);
	}
}

static void
sock_event(struct bufferevent *bev, short what, void *arg)
{
	struct load *L = arg;

	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		snprintf(L->first_error, sizeof L->first_error,
		    "kgymd closed the connection");
		event_base_loopbreak(L->base);
	}
}

static int
sock_start(struct load *L)
{
	struct sockaddr_un sun;
	long k;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", L->addr);
	L->sock = bufferevent_socket_new(L->base, -1, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(L->sock, sock_read, NULL, sock_event, L);
	bufferevent_enable(L->sock, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(L->sock, (struct sockaddr *)&sun, sizeof sun) <
	    0)
		return -ECONNREFUSED;
	for (k = 0; k < L->c && L->next < L->n; k++)
		sock_send(L);
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	struct load L = { .mode = "http", .prefix = "bench", .n = 1000, .c = 100 };
	struct rlimit rl;
	double wall, *sorted;
	long i, k = 0;
	int ch, rc;

	while ((ch = getopt(argc, argv, "m:a:n:c:p:t:d:L")) != -1) {
		switch (ch) {
		case 'd':
			L.delay_ms = atol(optarg);
			break;
		case 'L':
			L.all_latencies = true;
			break;
		case 'm':
			L.mode = optarg;
			break;
		case 'a':
			L.addr = optarg;
			break;
		case 'n':
			L.n = atol(optarg);
			break;
		case 'c':
			L.c = atol(optarg);
			break;
		case 'p':
			L.prefix = optarg;
			break;
		case 't':
			L.token = optarg;
			break;
		default:
			fprintf(stderr,
			    "usage: http_load -m http|socket -a ADDR [-n N] [-c C] "
			    "[-p PREFIX] [-t TOKEN] [-d DELAY_MS] [-L]\n");
			return 2;
		}
	}
	if (L.addr == NULL || L.n < 1 || L.c < 1) {
		fprintf(
		    stderr, "http_load: -a ADDR is required, -n and -c at least 1\n");
		return 2;
	}
	if (L.c > L.n)
		L.c = L.n;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	L.lat_ms = calloc((size_t)L.n, sizeof *L.lat_ms);
	L.t0 = calloc((size_t)L.n, sizeof *L.t0);
	if ((L.base = event_base_new()) == NULL || L.lat_ms == NULL || L.t0 == NULL)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &L.start);
	rc = strcmp(L.mode, "socket") == 0 ? sock_start(&L) : http_start(&L);
	if (rc < 0) {
		fprintf(stderr, "http_load: cannot start: %s\n", strerror(-rc));
		return 2;
	}
	event_base_dispatch(L.base);
	if (L.done < L.n)
		clock_gettime(CLOCK_MONOTONIC, &L.end);
	wall = (double)(L.end.tv_sec - L.start.tv_sec) +
	    (double)(L.end.tv_nsec - L.start.tv_nsec) / 1e9;
	sorted = calloc((size_t)L.n, sizeof *sorted);
	for (i = 0; i < L.n; i++)
		if (L.lat_ms[i] > 0)
			sorted[k++] = L.lat_ms[i];
	qsort(sorted, (size_t)k, sizeof *sorted, cmp_double);
	printf(
	    "{\"mode\":\"%s\",\"n\":%ld,\"c\":%ld,\"ok\":%ld,\"errors\":%ld,\"lost\":%ld,"
	    "\"wall_s\":%.3f,\"rps\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,"
	    "\"first_error\":\"%s\"}\n",
	    L.mode, L.n, L.c, L.ok, L.errors, L.n - L.done, wall,
	    wall > 0 ? (double)L.done / wall : 0.0, k ? sorted[k / 2] : 0.0,
	    k ? sorted[(size_t)((double)k * 0.99)] : 0.0, k ? sorted[k - 1] : 0.0,
	    L.first_error);
	if (L.all_latencies) {
		for (i = 0; i < k; i++)
			printf("%s%.4f", i == 0 ? "[" : ",", sorted[i]);
		printf("%s\n", k == 0 ? "[]" : "]");
	}
	return L.ok == L.n ? 0 : 1;
}
