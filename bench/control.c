/*
 * control.c -- benchmark of kgymd's control path, run against a live daemon.
 *
 *   bench/control -s SOCKET [-n TASKS] [-b BATCH] [-c CLIENTS] [-p PID]
 *                 [-q QUEUED] [-l STATUS_REQS] [-w WINDOW] [-K]
 *
 * Measures what a training loop feels: how many tasks a second the daemon
 * accepts (one task per submit, pipelined; and batched submits), how long
 * a status request takes, and how much memory the daemon holds with a deep
 * queue.  It speaks protocol v1 over plain sockets, with jansson only to
 * read replies, so the client costs little beside the daemon.  The tasks
 * are the test plugin's "selftest" workflow; bench/README.md says how to
 * start a daemon for it (max_queued_tasks large enough for the memory
 * phase) and bench/run-control.sh does all of it.  The table at the
 * end has one row per metric with its target and PASS or MISS; the exit
 * status is 0 when every target is met, 1 when one is missed, 2 when the
 * benchmark could not run.
 */
#include "config.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"

#define BENCH_REPLY_TIMEOUT_MS	120000	/* no reply for this long: give up */
#define BENCH_DRAIN_TIMEOUT_S	600
#define BENCH_TARGET_BATCH_TPS	20000.0
#define BENCH_TARGET_P99_US	1000.0
#define BENCH_TARGET_RSS_BYTES	(100LL * 1000 * 1000)
#define BENCH_MAX_ROWS		32
#define BENCH_TARGET_PAD_TPS	5000.0
#define BENCH_PAD_BYTES		8192
#define BENCH_PAD_BATCH		100
#define BENCH_LOAD_WINDOW	3	/* loader requests in flight */

struct sbuf {
	char *p;
	size_t len;
	size_t cap;
};

struct bconn {
	int fd;
	struct sbuf in;			/* bytes read, not yet split into lines */
	size_t inoff;			/* start of the first unread line */
	struct sbuf out;		/* requests not yet written */
	size_t outoff;
	long next;			/* next request index this connection sends */
	long inflight;
};

/* One pipelined phase: nreq requests made by make(), replies to reply(). */
struct phase {
	const char *name;
	long nreq;
	long window;			/* requests in flight per connection */
	long tasks_per_req;
	long ntasks;
	long delay_ms;			/* selftest payload */
	long pad_bytes;			/* a string of this many bytes in the payload */
	struct sbuf task;		/* make_submit: one task's text, made once */
	const char *const *ids;		/* cancel: the ids to cancel */
	void (*make)(struct phase *, long i, struct sbuf *out);
	/* results */
	long replies;
	long accepted;
	long rejected;
	long failed;			/* requests answered ok:false */
	char first_problem[256];
	char **collected;		/* accepted task ids, when collect is set */
	long ncollected;
	bool collect;
};

struct row {
	char metric[64];
	char value[48];
	char target[24];
	const char *verdict;		/* PASS, MISS or "-" (no target) */
};

static struct row bench_rows[BENCH_MAX_ROWS];
static int bench_nrows;
static bool bench_missed;

static void
die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void
die(const char *fmt, ...)
{
	va_list ap;

	fputs("bench/control: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void
note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- growable strings */

static void
sbuf_reserve(struct sbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->len + more + 1 <= b->cap)
		return;
	cap = b->cap != 0 ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	if ((p = realloc(b->p, cap)) == NULL)
		die("out of memory");
	b->p = p;
	b->cap = cap;
}

static void
sbuf_add(struct sbuf *b, const char *p, size_t n)
{
	sbuf_reserve(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("vsnprintf failed");
	sbuf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* --- connections */

static struct bconn *
bconn_open(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct bconn *c;
	int fd;

	if (strlen(path) >= sizeof sun.sun_path)
		die("socket path too long: %s", path);
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0)
		die("connect %s: %s (is kgymd running?)", path, strerror(errno));
	/* Non-blocking: the pipelined phases write and read at once. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		die("fcntl: %s", strerror(errno));
	if ((c = calloc(1, sizeof *c)) == NULL)
		die("out of memory");
	c->fd = fd;
	return c;
}

static void
bconn_close(struct bconn *c)
{
	if (c == NULL)
		return;
	close(c->fd);
	free(c->in.p);
	free(c->out.p);
	free(c);
}

/* Write what is buffered; false when the socket would block. */
static bool
bconn_flush(struct bconn *c)
{
	ssize_t n;

	while (c->outoff < c->out.len) {
		n = write(c->fd, c->out.p + c->outoff, c->out.len - c->outoff);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return false;
			die("write to kgymd: %s", strerror(errno));
		}
		c->outoff += (size_t)n;
	}
	c->out.len = c->outoff = 0;
	return true;
}

/* Read what is there; dies on EOF, since the benchmark never closes first. */
static void
bconn_fill(struct bconn *c)
{
	ssize_t n;

	if (c->inoff > 0 && c->inoff == c->in.len)
		c->in.len = c->inoff = 0;
	else if (c->inoff > c->in.cap / 2) {
		memmove(c->in.p, c->in.p + c->inoff, c->in.len - c->inoff);
		c->in.len -= c->inoff;
		c->inoff = 0;
	}
	for (;;) {
		sbuf_reserve(&c->in, 65536);
		n = read(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			die("read from kgymd: %s", strerror(errno));
		}
		if (n == 0)
			die("kgymd closed the connection");
		c->in.len += (size_t)n;
		if (c->in.len < c->in.cap - 1)
			return;
	}
}

/* The next complete line (without '\n'), or NULL. */
static char *
bconn_line(struct bconn *c, size_t *ret_len)
{
	char *start, *nl;

	if (c->inoff >= c->in.len)
		return NULL;
	start = c->in.p + c->inoff;
	if ((nl = memchr(start, '\n', c->in.len - c->inoff)) == NULL)
		return NULL;
	*ret_len = (size_t)(nl - start);
	c->inoff += *ret_len + 1;
	return start;
}

static void
bconn_wait(struct bconn *c, short events)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };
	int n;

	while ((n = poll(&pfd, 1, BENCH_REPLY_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (n < 0)
		die("poll: %s", strerror(errno));
	if (n == 0)
		die("kgymd did not answer for %d s", BENCH_REPLY_TIMEOUT_MS / 1000);
}

/* Send one request line and return the reply to it (events are skipped). */
static json_t *
bconn_call(struct bconn *c, const char *line, size_t len, uint64_t *ret_ns)
{
	uint64_t t0;
	json_error_t jerr;
	json_t *reply;
	size_t n = 0;
	char *l;

	sbuf_reserve(&c->out, len);
	memcpy(c->out.p + c->out.len, line, len);
	c->out.len += len;
	t0 = now_ns();
	while (!bconn_flush(c))
		bconn_wait(c, POLLOUT);
	for (;;) {
		while ((l = bconn_line(c, &n)) == NULL) {
			bconn_wait(c, POLLIN);
			bconn_fill(c);
		}
		if (ret_ns != NULL)
			*ret_ns = now_ns() - t0;
		/* Parsing is outside the timed part: it is the client's cost. */
		if ((reply = json_loadb(l, n, 0, &jerr)) == NULL)
			die("kgymd sent a line that is not JSON: %s", jerr.text);
		if (json_object_get(reply, "event") == NULL)
			return reply;
		json_decref(reply);
	}
}

/* --- the daemon's side */

/*
 * The control connection (hello, health, the waits between phases) goes
 * through kgymctl's client library: only the timed phases use the
 * pipelined, non-blocking connections above.
 */
static struct client *bench_ctl;

static json_t *
bench_op(const char *op)
{
	json_t *reply = NULL;
	char *cause = NULL;

	if (client_call(bench_ctl, op, NULL, NULL, NULL, &reply, &cause) < 0)
		die("op %s: %s", op, cause != NULL ? cause : "failed");
	if (!client_msg_ok(reply))
		die("op %s failed: %s: %s", op, client_error_code(reply),
		    client_error_message(reply));
	return reply;
}

/* VmRSS of pid in bytes, or -1 when it cannot be read. */
static long long
bench_rss(pid_t pid)
{
	char path[64], line[256];
	long long kb = -1;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

static void
bench_health(long long *ret_queued, long long *ret_running)
{
	json_t *r = bench_op("health");

	*ret_queued = json_integer_value(json_object_get(r, "queued"));
	*ret_running = json_integer_value(json_object_get(r, "running"));
	json_decref(r);
}

/* Wait until nothing is queued or running; seconds it took, -1 on timeout. */
static double
bench_drain(void)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	long long queued, running;
	uint64_t t0 = now_ns();
	double s;

	for (;;) {
		bench_health(&queued, &running);
		s = (double)(now_ns() - t0) / 1e9;
		if (queued == 0 && running == 0)
			return s;
		if (s > BENCH_DRAIN_TIMEOUT_S) {
			note("  still %lld queued, %lld running after %d s; going on",
			    queued, running, BENCH_DRAIN_TIMEOUT_S);
			return -1;
		}
		nanosleep(&pause, NULL);
	}
}

/* --- the pipelined engine */

/*
 * Every task of a phase is the same text, so it is formatted once and
 * copied: vsnprintf of an 8 KiB "%.*s" took the client ~35 us per task
 * (glibc writes it through its string-stream overflow path), as much CPU
 * as a third of what the daemon spends on that task, on the same cores.
 */
static void
make_submit(struct phase *ph, long i, struct sbuf *out)
{
	long k, first = i * ph->tasks_per_req, n = ph->tasks_per_req;
	static const char task_fmt[] =
	    "{\"workflow\":\"selftest\",\"payload\":{\"action\":\"ok\",\"delay_ms\":%ld,\"in_daemon\":true%s%.*s%s}}";
	char *pad;

	if (ph->task.len == 0) {
		if ((pad = malloc((size_t)ph->pad_bytes + 1)) == NULL)
			die("out of memory");
		memset(pad, 'x', (size_t)ph->pad_bytes);
		sbuf_printf(&ph->task, task_fmt, ph->delay_ms,
		    ph->pad_bytes > 0 ? ",\"pad\":\"" : "", (int)ph->pad_bytes, pad,
		    ph->pad_bytes > 0 ? "\"" : "");
		free(pad);
	}
	if (first + n > ph->ntasks)
		n = ph->ntasks - first;
	if (ph->tasks_per_req == 1) {
		sbuf_printf(out, "{\"v\":1,\"id\":%ld,\"op\":\"submit\",\"task\":", i);
		sbuf_add(out, ph->task.p, ph->task.len);
	} else {
		sbuf_printf(out, "{\"v\":1,\"id\":%ld,\"op\":\"submit\",\"tasks\":[", i);
		sbuf_reserve(out, (size_t)n * (ph->task.len + 1) + 3);
		for (k = 0; k < n; k++) {
			if (k > 0)
				sbuf_add(out, ",", 1);
			sbuf_add(out, ph->task.p, ph->task.len);
		}
		sbuf_add(out, "]", 1);
	}
	sbuf_add(out, "}\n", 2);
}

static void
make_cancel(struct phase *ph, long i, struct sbuf *out)
{
	sbuf_printf(out, "{\"v\":1,\"id\":%ld,\"op\":\"cancel\",\"task_id\":\"%s\"}\n", i,
	    ph->ids[i]);
}

static void
phase_problem(struct phase *ph, const char *what, json_t *err)
{
	if (ph->first_problem[0] != '\0')
		return;
	snprintf(ph->first_problem, sizeof ph->first_problem, "%s: %s: %s", what,
	    json_string_value(json_object_get(err, "code")),
	    json_string_value(json_object_get(err, "message")));
}

static void
phase_reply(struct phase *ph, json_t *reply)
{
	json_t *acc, *rej, *a;
	size_t i;

	ph->replies++;
	if (!json_is_true(json_object_get(reply, "ok"))) {
		ph->failed++;
		phase_problem(ph, "request refused", json_object_get(reply, "error"));
		return;
	}
	if ((acc = json_object_get(reply, "accepted")) != NULL) {
		ph->accepted += (long)json_array_size(acc);
		if (ph->collect) {
			json_array_foreach(acc, i, a) {
				ph->collected[ph->ncollected] = strdup(json_string_value(
				    json_object_get(a, "task_id")));
				if (ph->collected[ph->ncollected] == NULL)
					die("out of memory");
				ph->ncollected++;
			}
		}
	} else
		ph->accepted++;		/* cancel: one task per reply */
	if ((rej = json_object_get(reply, "rejected")) != NULL && json_array_size(rej) > 0) {
		ph->rejected += (long)json_array_size(rej);
		phase_problem(ph, "task rejected",
		    json_object_get(json_array_get(rej, 0), "error"));
	}
}

/*
 * Send ph->nreq requests over the connections, request i on connection
 * i % nconns, at most ph->window in flight on each; returns the seconds
 * from the first byte sent to the last reply read.
 */
static double
phase_run(struct phase *ph, struct bconn **conns, int nconns)
{
	struct pollfd *pfd;
	json_error_t jerr;
	json_t *reply;
	uint64_t t0;
	size_t len;
	char *line;
	int i, n;

	if ((pfd = calloc((size_t)nconns, sizeof *pfd)) == NULL)
		die("out of memory");
	if (ph->collect && (ph->collected = calloc((size_t)ph->ntasks + 1,
	    sizeof *ph->collected)) == NULL)
		die("out of memory");
	for (i = 0; i < nconns; i++) {
		conns[i]->next = i;
		conns[i]->inflight = 0;
	}
	t0 = now_ns();
	while (ph->replies < ph->nreq) {
		for (i = 0; i < nconns; i++) {
			struct bconn *c = conns[i];

			while (c->inflight < ph->window && c->next < ph->nreq) {
				ph->make(ph, c->next, &c->out);
				c->next += nconns;
				c->inflight++;
			}
			bconn_flush(c);
			pfd[i].fd = c->fd;
			pfd[i].events = (c->inflight > 0 ? POLLIN : 0) |
			    (c->outoff < c->out.len ? POLLOUT : 0);
			pfd[i].revents = 0;
		}
		while ((n = poll(pfd, (nfds_t)nconns, BENCH_REPLY_TIMEOUT_MS)) < 0 &&
		    errno == EINTR)
			;
		if (n < 0)
			die("poll: %s", strerror(errno));
		if (n == 0)
			die("%s: no reply for %d s (%ld of %ld answered)", ph->name,
			    BENCH_REPLY_TIMEOUT_MS / 1000, ph->replies, ph->nreq);
		for (i = 0; i < nconns; i++) {
			struct bconn *c = conns[i];

			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
				bconn_fill(c);
			while ((line = bconn_line(c, &len)) != NULL) {
				if ((reply = json_loadb(line, len, 0, &jerr)) == NULL)
					die("kgymd sent a line that is not JSON: %s", jerr.text);
				if (json_object_get(reply, "event") == NULL) {
					c->inflight--;
					phase_reply(ph, reply);
				}
				json_decref(reply);
			}
		}
	}
	free(pfd);
	return (double)(now_ns() - t0) / 1e9;
}

static void
phase_free(struct phase *ph)
{
	long i;

	for (i = 0; i < ph->ncollected; i++)
		free(ph->collected[i]);
	free(ph->collected);
	ph->collected = NULL;
	ph->ncollected = 0;
	free(ph->task.p);
	memset(&ph->task, 0, sizeof ph->task);
}

/* --- the table */

static void
row_add(const char *metric, const char *target, int verdict, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* verdict: 1 PASS, 0 MISS, -1 no target. */
static void
row_add(const char *metric, const char *target, int verdict, const char *fmt, ...)
{
	struct row *r;
	va_list ap;

	if (bench_nrows == BENCH_MAX_ROWS)
		return;
	r = &bench_rows[bench_nrows++];
	snprintf(r->metric, sizeof r->metric, "%s", metric);
	snprintf(r->target, sizeof r->target, "%s", target);
	va_start(ap, fmt);
	vsnprintf(r->value, sizeof r->value, fmt, ap);
	va_end(ap);
	r->verdict = verdict > 0 ? "PASS" : verdict == 0 ? "MISS" : "-";
	if (verdict == 0)
		bench_missed = true;
}

static void
table_print(void)
{
	int i, wm = 6, wv = 5, wt = 6;

	for (i = 0; i < bench_nrows; i++) {
		if ((int)strlen(bench_rows[i].metric) > wm)
			wm = (int)strlen(bench_rows[i].metric);
		if ((int)strlen(bench_rows[i].value) > wv)
			wv = (int)strlen(bench_rows[i].value);
		if ((int)strlen(bench_rows[i].target) > wt)
			wt = (int)strlen(bench_rows[i].target);
	}
	printf("\n%-*s | %*s | %-*s | %s\n", wm, "metric", wv, "value", wt, "target",
	    "verdict");
	printf("%.*s-+-%.*s-+-%.*s-+--------\n", wm,
	    "----------------------------------------------------------------", wv,
	    "------------------------------------------------", wt,
	    "------------------------");
	for (i = 0; i < bench_nrows; i++)
		printf("%-*s | %*s | %-*s | %s\n", wm, bench_rows[i].metric, wv,
		    bench_rows[i].value, wt, bench_rows[i].target, bench_rows[i].verdict);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static uint64_t
percentile(const uint64_t *v, size_t n, double p)
{
	size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

/* --- the benchmarks */

/* Let what a phase left behind run before the next phase starts. */
static void
bench_drain_row(long long left)
{
	double s;

	if (left == 0)
		return;
	s = bench_drain();
	if (s < 0) {
		row_add("  then ran the rest in (s)", "-", -1, "> %d", BENCH_DRAIN_TIMEOUT_S);
		return;
	}
	note("  the %lld tasks left ran in %.2f s", left, s);
	row_add("  then ran the rest in (s)", "-", -1, "%.2f", s);
}

static double
bench_submit(const char *name, struct bconn **conns, int nconns, long ntasks, long per_req,
    long window, long pad_bytes, char *ret_id, size_t idlen)
{
	struct phase ph = {
		.name = name, .tasks_per_req = per_req, .ntasks = ntasks, .delay_ms = 0,
		.window = window, .make = make_submit, .collect = ret_id != NULL,
		.pad_bytes = pad_bytes,
	};
	long long queued, running;
	double s, tps;

	ph.nreq = (ntasks + per_req - 1) / per_req;
	note("%s: %ld tasks in %ld requests of up to %ld over %d connection(s), "
	    "window %ld", name, ntasks, ph.nreq, per_req, nconns, window);
	s = phase_run(&ph, conns, nconns);
	bench_health(&queued, &running);
	tps = (double)ph.accepted / s;
	note("  %ld accepted, %ld rejected, %ld requests refused in %.3f s: %.0f tasks/s; "
	    "queue now %lld queued, %lld running", ph.accepted, ph.rejected, ph.failed, s,
	    tps, queued, running);
	if (ph.first_problem[0] != '\0')
		note("  first problem: %s", ph.first_problem);
	if (ret_id != NULL && ph.ncollected > 0)
		snprintf(ret_id, idlen, "%s", ph.collected[0]);
	phase_free(&ph);
	if (ph.accepted != ntasks)
		note("  %ld of %ld tasks were not accepted", ntasks - ph.accepted, ntasks);
	return ph.accepted == ntasks ? tps : -tps;
}

/*
 * One connection pipelines stats, list (100 rows) and submits of `batch`
 * tasks, BENCH_LOAD_WINDOW in flight, while another sends status requests
 * one at a time and times each: what a client feels while another one is
 * heavy.  One process, both sockets non-blocking, one poll loop.
 */
static void
bench_status_under_load(const char *sock, const char *status_id, long nstatus, long batch)
{
	struct phase sub = { .tasks_per_req = batch, .ntasks = batch, .make = make_submit };
	struct bconn *load = bconn_open(sock), *st = bconn_open(sock);
	struct sbuf subline = { 0 };
	struct pollfd pfd[2];
	json_error_t jerr;
	json_t *reply;
	uint64_t *lat, t0 = 0;
	long done = 0, sent_load = 0, answered_load = 0, inflight = 0, ops[3] = { 0 };
	bool waiting = false;
	size_t len;
	char *l, req[256];
	int n;

	if ((lat = calloc((size_t)nstatus, sizeof *lat)) == NULL)
		die("out of memory");
	note("status under load: %ld status requests while another client pipelines "
	    "stats, list and %ld-task submits", nstatus, batch);
	while (done < nstatus) {
		while (inflight < BENCH_LOAD_WINDOW) {
			switch (sent_load % 3) {
			case 0:
				sbuf_printf(&load->out, "{\"v\":1,\"id\":%ld,\"op\":\"stats\"}\n",
				    sent_load);
				break;
			case 1:
				sbuf_printf(&load->out,
				    "{\"v\":1,\"id\":%ld,\"op\":\"list\",\"limit\":100}\n", sent_load);
				break;
			default:
				/* Made once: the client's own cost stays out of the timings. */
				if (subline.len == 0)
					make_submit(&sub, 0, &subline);
				sbuf_reserve(&load->out, subline.len);
				memcpy(load->out.p + load->out.len, subline.p, subline.len);
				load->out.len += subline.len;
				break;
			}
			ops[sent_load % 3]++;
			sent_load++;
			inflight++;
		}
		if (!waiting) {
			n = snprintf(req, sizeof req,
			    "{\"v\":1,\"id\":%ld,\"op\":\"status\",\"task_id\":\"%s\"}\n", done,
			    status_id);
			sbuf_reserve(&st->out, (size_t)n);
			memcpy(st->out.p + st->out.len, req, (size_t)n);
			st->out.len += (size_t)n;
			t0 = now_ns();
			waiting = true;
		}
		bconn_flush(st);
		bconn_flush(load);
		pfd[0] = (struct pollfd){ .fd = st->fd, .events = POLLIN |
		    (st->outoff < st->out.len ? POLLOUT : 0) };
		pfd[1] = (struct pollfd){ .fd = load->fd, .events = POLLIN |
		    (load->outoff < load->out.len ? POLLOUT : 0) };
		while ((n = poll(pfd, 2, BENCH_REPLY_TIMEOUT_MS)) < 0 && errno == EINTR)
			;
		if (n <= 0)
			die("status under load: no reply for %d s", BENCH_REPLY_TIMEOUT_MS / 1000);
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			bconn_fill(st);
			if ((l = bconn_line(st, &len)) != NULL) {
				lat[done++] = now_ns() - t0;
				waiting = false;
				if ((reply = json_loadb(l, len, 0, &jerr)) == NULL ||
				    !json_is_true(json_object_get(reply, "ok")))
					die("status under load: a status request failed");
				json_decref(reply);
			}
		}
		if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			bconn_fill(load);
			/* Counted, not parsed: the status client must not wait on us. */
			while ((l = bconn_line(load, &len)) != NULL) {
				if (memmem(l, len, "\"ok\":false", 10) != NULL)
					die("status under load: a request of the other client failed: %.*s",
					    (int)(len > 200 ? 200 : len), l);
				if (memmem(l, len, "\"event\"", 7) == NULL) {
					inflight--;
					answered_load++;
				}
			}
		}
	}
	note("  the other client had %ld requests answered meanwhile (%ld stats, %ld list, "
	    "%ld submits of %ld)", answered_load, ops[0], ops[1], ops[2], batch);
	qsort(lat, (size_t)nstatus, sizeof *lat, cmp_u64);
	row_add("status under load p50 (us)", "-", -1, "%.1f",
	    (double)percentile(lat, (size_t)nstatus, 50) / 1e3);
	row_add("status under load p99 (us)", "< 1000", (double)percentile(lat,
	    (size_t)nstatus, 99) / 1e3 < BENCH_TARGET_P99_US, "%.1f",
	    (double)percentile(lat, (size_t)nstatus, 99) / 1e3);
	row_add("status under load max (us)", "-", -1, "%.1f", (double)lat[nstatus - 1] / 1e3);
	row_add("  loader requests answered", "-", -1, "%ld", answered_load);
	free(lat);
	/* Let what is in flight end before the connection goes. */
	while (inflight > 0) {
		bconn_wait(load, POLLIN);
		bconn_fill(load);
		while ((l = bconn_line(load, &len)) != NULL)
			if (memmem(l, len, "\"event\"", 7) == NULL)
				inflight--;
	}
	bconn_close(load);
	bconn_close(st);
	free(subline.p);
	free(sub.task.p);
}

int
main(int argc, char **argv)
{
	const char *sock = getenv("KGYM_SOCKET");
	long ntasks = 20000, batch = 1000, nqueue = 100000, nstatus = 10000, window = 256;
	int nclients = 1, ch, i;
	pid_t pid = 0;
	bool keep = false;
	struct bconn **conns, *c;
	char line[256], status_id[160] = "";
	json_t *r, *plugins, *p;
	double single_tps, batch_tps, pad_tps;
	long long queued, running, rss0, rss1;
	uint64_t *lat;
	size_t k;
	bool have_selftest = false;
	struct phase mem = { 0 }, cancel = { 0 };
	char *cause = NULL;
	double s;

	if (sock == NULL)
		sock = "/run/kgym/kgymd.sock";
	while ((ch = getopt(argc, argv, "s:n:b:c:p:q:l:w:Kh")) != -1) {
		switch (ch) {
		case 's':
			sock = optarg;
			break;
		case 'n':
			ntasks = atol(optarg);
			break;
		case 'b':
			batch = atol(optarg);
			break;
		case 'c':
			nclients = atoi(optarg);
			break;
		case 'p':
			pid = (pid_t)atol(optarg);
			break;
		case 'q':
			nqueue = atol(optarg);
			break;
		case 'l':
			nstatus = atol(optarg);
			break;
		case 'w':
			window = atol(optarg);
			break;
		case 'K':
			keep = true;
			break;
		default:
			fprintf(stderr, "usage: %s -s SOCKET [-n TASKS] [-b BATCH] [-c CLIENTS] "
			    "[-p PID] [-q QUEUED] [-l STATUS_REQS] [-w WINDOW] [-K]\n", argv[0]);
			return ch == 'h' ? 0 : 2;
		}
	}
	if (ntasks < 1 || batch < 1 || nclients < 1 || nclients > 1024 || nqueue < 0 ||
	    nstatus < 1 || window < 1)
		die("each count must be positive (-q may be 0 to skip the memory phase)");

	if ((conns = calloc((size_t)nclients, sizeof *conns)) == NULL)
		die("out of memory");
	for (i = 0; i < nclients; i++)
		conns[i] = bconn_open(sock);
	c = conns[0];

	if ((bench_ctl = client_connect(sock, &cause)) == NULL)
		die("%s (is kgymd running?)", cause);
	r = bench_op("hello");
	plugins = json_object_get(r, "plugins");
	json_array_foreach(plugins, k, p)
		if (json_is_string(p) && strcmp(json_string_value(p), "selftest") == 0)
			have_selftest = true;
	note("kgymd %s on %s", json_string_value(json_object_get(r, "version")), sock);
	json_decref(r);
	if (!have_selftest)
		die("kgymd serves no 'selftest' workflow: add the test plugin's directory "
		    "(tests/plugins/.libs) to plugin_dir; see bench/README.md");
	if (pid == 0 && (pid = client_peer_pid(bench_ctl)) <= 0)
		note("cannot read kgymd's pid from the socket (SO_PEERCRED); give -p PID");
	bench_health(&queued, &running);
	if (queued != 0 || running != 0) {
		note("kgymd is busy (%lld queued, %lld running); waiting for it to drain",
		    queued, running);
		bench_drain();
	}

	/* 1. one task per submit, pipelined */
	single_tps = bench_submit("submit single", conns, nclients, ntasks, 1, window, 0,
	    status_id, sizeof status_id);
	row_add("submit, 1 task/request (tasks/s)", "-", -1, "%.0f%s", single_tps < 0 ?
	    -single_tps : single_tps, single_tps < 0 ? " (rejects)" : "");
	bench_health(&queued, &running);
	row_add("  queue depth after it", "-", -1, "%lld", queued);
	bench_drain_row(queued + running);

	/* 2. batched submits */
	batch_tps = bench_submit("submit batched", conns, nclients, ntasks, batch,
	    window / batch > 2 ? window / batch : 2, 0, NULL, 0);
	snprintf(line, sizeof line, "submit, %ld tasks/request (tasks/s)", batch);
	row_add(line, ">= 20000", batch_tps >= BENCH_TARGET_BATCH_TPS, "%.0f%s",
	    batch_tps < 0 ? -batch_tps : batch_tps, batch_tps < 0 ? " (rejects)" : "");
	bench_health(&queued, &running);
	row_add("  queue depth after it", "-", -1, "%lld", queued);
	bench_drain_row(queued + running);

	/* 3. status latency: request, wait for the reply, next */
	if (status_id[0] == '\0')
		die("no task was accepted; cannot measure status");
	if ((lat = calloc((size_t)nstatus, sizeof *lat)) == NULL)
		die("out of memory");
	note("status latency: %ld sequential requests for task %s", nstatus, status_id);
	for (i = 0; i < nstatus; i++) {
		int n = snprintf(line, sizeof line,
		    "{\"v\":1,\"id\":%d,\"op\":\"status\",\"task_id\":\"%s\"}\n", i, status_id);

		r = bconn_call(c, line, (size_t)n, &lat[i]);
		if (!json_is_true(json_object_get(r, "ok")) ||
		    json_integer_value(json_object_get(r, "id")) != i)
			die("status request %d was not answered as expected", i);
		json_decref(r);
	}
	qsort(lat, (size_t)nstatus, sizeof *lat, cmp_u64);
	row_add("status latency p50 (us)", "-", -1, "%.1f",
	    (double)percentile(lat, (size_t)nstatus, 50) / 1e3);
	row_add("status latency p99 (us)", "< 1000", (double)percentile(lat, (size_t)nstatus,
	    99) / 1e3 < BENCH_TARGET_P99_US, "%.1f",
	    (double)percentile(lat, (size_t)nstatus, 99) / 1e3);
	row_add("status latency max (us)", "-", -1, "%.1f",
	    (double)lat[nstatus - 1] / 1e3);
	free(lat);

	/* 3b. batched submits of tasks with 8 KiB payloads */
	pad_tps = bench_submit("submit 8 KiB payloads", conns, nclients, ntasks / 2,
	    BENCH_PAD_BATCH, 2, BENCH_PAD_BYTES, NULL, 0);
	snprintf(line, sizeof line, "submit, %d x 8 KiB tasks/request (tasks/s)",
	    BENCH_PAD_BATCH);
	row_add(line, ">= 5000", pad_tps >= BENCH_TARGET_PAD_TPS, "%.0f%s",
	    pad_tps < 0 ? -pad_tps : pad_tps, pad_tps < 0 ? " (rejects)" : "");
	bench_health(&queued, &running);
	bench_drain_row(queued + running);

	/* 3c. status while another client pipelines stats, list and big submits */
	bench_status_under_load(sock, status_id, nstatus, batch);

	/* 4. memory with a deep queue, from a quiet daemon as the other phases start */
	if (nqueue > 0) {
		bench_drain();
		rss0 = pid > 0 ? bench_rss(pid) : -1;
		mem.name = "queue";
		mem.tasks_per_req = batch;
		mem.ntasks = nqueue;
		mem.nreq = (nqueue + batch - 1) / batch;
		mem.window = 2;
		mem.delay_ms = 3600000;	/* an hour: they stay queued */
		mem.make = make_submit;
		mem.collect = true;
		note("memory: queueing %ld tasks (selftest, delay 1 h)", nqueue);
		s = phase_run(&mem, conns, 1);
		bench_health(&queued, &running);
		rss1 = pid > 0 ? bench_rss(pid) : -1;
		note("  %ld accepted, %ld rejected in %.2f s; %lld queued, %lld running; "
		    "VmRSS %.1f -> %.1f MB", mem.accepted, mem.rejected, s, queued, running,
		    (double)rss0 / 1e6, (double)rss1 / 1e6);
		if (mem.first_problem[0] != '\0')
			note("  first problem: %s", mem.first_problem);
		/* Nothing runs meanwhile: the daemon's accept path alone. */
		snprintf(line, sizeof line, "submit, %ld tasks/request, held (tasks/s)", batch);
		row_add(line, "-", -1, "%.0f", (double)mem.accepted / s);
		row_add("queued tasks held", "-", -1, "%lld", queued);
		if (rss0 >= 0 && rss1 >= 0) {
			row_add("kgymd VmRSS before (MB)", "-", -1, "%.1f", (double)rss0 / 1e6);
			snprintf(line, sizeof line, "kgymd VmRSS, %ld queued (MB)", nqueue);
			row_add(line, "< 100", rss1 < BENCH_TARGET_RSS_BYTES &&
			    queued + running >= nqueue, "%.1f%s", (double)rss1 / 1e6,
			    queued + running >= nqueue ? "" : " (not all queued)");
			row_add("  bytes per queued task", "-", -1, "%.0f",
			    (double)(rss1 - rss0) / (double)(nqueue > 0 ? nqueue : 1));
		} else
			row_add("kgymd VmRSS (MB)", "< 100", 0, "unreadable (-p PID)");

		/* Leave a shared daemon as found: cancel what was queued. */
		if (!keep && mem.ncollected > 0) {
			cancel.name = "cancel";
			cancel.ids = (const char *const *)mem.collected;
			cancel.nreq = mem.ncollected;
			cancel.ntasks = mem.ncollected;
			cancel.window = window;
			cancel.make = make_cancel;
			note("cancelling the %ld queued tasks", mem.ncollected);
			s = phase_run(&cancel, conns, nclients);
			note("  %ld cancelled in %.2f s", cancel.accepted, s);
			row_add("cancel, pipelined (tasks/s)", "-", -1, "%.0f",
			    (double)cancel.accepted / s);
		}
		phase_free(&mem);
	}

	for (i = 0; i < nclients; i++)
		bconn_close(conns[i]);
	free(conns);
	client_free(bench_ctl);
	table_print();
	return bench_missed ? 1 : 0;
}
