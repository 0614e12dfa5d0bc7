/*
 * wait.c -- clients waiting for tasks to end.
 *
 * A waiter is one request (op wait, or submit with "wait":true) of one peer
 * (a client, whatever transport carries its lines: struct peer), watching a
 * set of task ids.  Each watched id that is still live hangs in a tsearch(3)
 * tree keyed by task id, so a finishing task finds its waiters without
 * scanning.  When a task ends its waiters get an
 * event line each; when the last id of a waiter is answered (or its
 * timeout fires) the waiter sends its final reply and goes away.  Waiters
 * die with their peer; the tasks they watch do not.
 */
#include "config.h"

#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "queue.h"

struct waiter;

/* One watched id of one waiter. */
struct watch {
	char *id;
	struct waiter *waiter;
	bool done;
	LIST_ENTRY(watch) by_task;	/* all watches of one task id */
};

/* All watches on one task id: the tree node. */
struct watch_node {
	char *id;			/* borrowed from the first watch */
	LIST_HEAD(, watch) watches;
};

struct waiter {
	struct peer *peer;
	struct principal who;		/* whom the request acts for */
	json_t *req_id;
	struct watch *watches;
	size_t nwatches;
	size_t pending;
	json_t *not_found;
	bool final_done;
	struct event *timeout;
	TAILQ_ENTRY(waiter) entry;	/* in its peer's list */
};

static void *watch_root;
static size_t nwaiters;

static int
watch_node_compare(const void *a, const void *b)
{
	const struct watch_node *na = a, *nb = b;

	return strcmp(na->id, nb->id);
}

static struct watch_node *
watch_node_find(const char *id)
{
	struct watch_node key = { .id = (char *)id };
	void *n = tfind(&key, &watch_root, watch_node_compare);

	return n != NULL ? *(struct watch_node **)n : NULL;
}

static int
watch_attach(struct watch *w)
{
	struct watch_node *node;
	void *n;

	if ((node = watch_node_find(w->id)) == NULL) {
		if ((node = calloc(1, sizeof *node)) == NULL)
			return -ENOMEM;
		if ((node->id = strdup(w->id)) == NULL) {
			free(node);
			return -ENOMEM;
		}
		LIST_INIT(&node->watches);
		n = tsearch(node, &watch_root, watch_node_compare);
		if (n == NULL) {
			free(node->id);
			free(node);
			return -ENOMEM;
		}
	}
	LIST_INSERT_HEAD(&node->watches, w, by_task);
	return 0;
}

static void
watch_node_release(struct watch_node *node)
{
	if (!LIST_EMPTY(&node->watches))
		return;
	tdelete(node, &watch_root, watch_node_compare);
	free(node->id);
	free(node);
}

static void
watch_detach(struct watch *w)
{
	struct watch_node *node = watch_node_find(w->id);

	LIST_REMOVE(w, by_task);
	if (node != NULL)
		watch_node_release(node);
}

static void
waiter_free(struct waiter *wt)
{
	size_t i;

	for (i = 0; i < wt->nwatches; i++) {
		if (!wt->watches[i].done && wt->watches[i].waiter != NULL)
			watch_detach(&wt->watches[i]);
		free(wt->watches[i].id);
	}
	free(wt->watches);
	if (wt->timeout != NULL)
		event_free(wt->timeout);
	json_decref(wt->req_id);
	json_decref(wt->not_found);
	TAILQ_REMOVE(&wt->peer->waiters, wt, entry);
	wt->peer->nwaiters--;
	nwaiters--;
	free(wt);
}

static void
waiter_final(struct waiter *wt)
{
	json_t *reply, *pending;
	size_t i;

	reply = proto_reply_ok(wt->req_id);
	json_object_set_new(reply, "done", json_true());
	pending = json_array();
	for (i = 0; i < wt->nwatches; i++)
		if (!wt->watches[i].done && wt->watches[i].waiter != NULL)
			json_array_append_new(pending, json_string(wt->watches[i].id));
	json_object_set_new(reply, "pending", pending);
	if (wt->final_done)
		json_object_set(reply, "not_found", wt->not_found);
	peer_send(wt->peer, reply);
	json_decref(reply);
	waiter_free(wt);
}

static void
waiter_timeout(evutil_socket_t fd, short what, void *arg)
{
	waiter_final(arg);
}

static void
waiter_send_event(struct waiter *wt, const char *id, enum task_state state, json_t *result)
{
	json_t *ev = proto_event_result(wt->req_id, id, state, result);

	peer_send(wt->peer, ev);
	json_decref(ev);
}

static void
wait_looked_up(int error, const struct store_row *row, void *arg)
{
	wait_task_answer(arg, error, row);
	free(arg);
}

/*
 * Answer an id that is already terminal (or unknown) from the store.  A
 * shared queue knows of tasks this node's store does not: those are
 * looked up there, and waited for meanwhile.
 */
static bool
waiter_answer_from_store(struct waiter *wt, struct watch *w, bool *ret_ask)
{
	struct store_row *row = NULL;
	json_t *result;
	int error = queue->get(w->id, &row);

	if (queue->lookup != NULL && (error < 0 || !proto_state_terminal(row->state))) {
		store_row_free(row);
		*ret_ask = true;
		return false;
	}
	if (error < 0 || !ops_may_see(&wt->who, row->owner)) {
		/* Unknown, or another client's: the same answer. */
		store_row_free(row);
		json_array_append_new(wt->not_found, json_string(w->id));
		w->done = true;
		return true;
	}
	if (!proto_state_terminal(row->state)) {
		/* In the store but not live: only during a batch; treat as live. */
		store_row_free(row);
		return false;
	}
	result = row->result != NULL ? json_loads(row->result, 0, NULL) : NULL;
	waiter_send_event(wt, w->id, row->state, result);
	json_decref(result);
	store_row_free(row);
	w->done = true;
	return true;
}

struct wait_id {
	const char	*id;
	size_t		 at;
};

static int
wait_id_cmp(const void *a, const void *b)
{
	const struct wait_id *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	if (c != 0)
		return c;
	return x->at < y->at ? -1 : x->at > y->at;
}

/*
 * Which entries of `ids` repeat an earlier one: an id listed twice is
 * answered once (kgymd-protocol(7)), whether it has ended, is unknown or
 * is still running.  Sorted, not scanned: a list may hold 100,000 ids.
 */
static bool *
wait_repeats(const char **ids, size_t nids)
{
	struct wait_id *v;
	bool *repeat;
	size_t i;

	if ((repeat = calloc(nids > 0 ? nids : 1, sizeof *repeat)) == NULL)
		return NULL;
	if (nids < 2)
		return repeat;
	if ((v = calloc(nids, sizeof *v)) == NULL) {
		free(repeat);
		return NULL;
	}
	for (i = 0; i < nids; i++) {
		v[i].id = ids[i];
		v[i].at = i;
	}
	qsort(v, nids, sizeof *v, wait_id_cmp);
	for (i = 1; i < nids; i++)
		if (strcmp(v[i].id, v[i - 1].id) == 0)
			repeat[v[i].at] = true;
	free(v);
	return repeat;
}

int
wait_add(struct peer *peer, const struct principal *who, json_t *req_id,
    const char **ids, size_t nids, int64_t timeout_ms, bool final_done)
{
	struct waiter *wt;
	struct task *live;
	struct timeval tv;
	bool ask, *repeat;
	char *copy;
	size_t i;

	/* A client that has closed its socket hears nothing: no waiter. */
	if (peer->gone)
		return 0;
	if ((repeat = wait_repeats(ids, nids)) == NULL)
		return -ENOMEM;
	if ((wt = calloc(1, sizeof *wt)) == NULL) {
		free(repeat);
		return -ENOMEM;
	}
	if (nids > 0 && (wt->watches = calloc(nids, sizeof *wt->watches)) == NULL) {
		free(repeat);
		free(wt);
		return -ENOMEM;
	}
	wt->peer = peer;
	wt->who = *who;
	wt->req_id = req_id != NULL ? json_incref(req_id) : json_null();
	wt->not_found = json_array();
	wt->final_done = final_done;
	TAILQ_INSERT_TAIL(&peer->waiters, wt, entry);
	peer->nwaiters++;
	nwaiters++;

	for (i = 0; i < nids; i++) {
		struct watch *w = &wt->watches[i];

		wt->nwatches++;
		if ((w->id = strdup(ids[i])) == NULL)
			goto oom;
		if (repeat[i]) {
			w->done = true;
			continue;
		}
		live = task_index_find(w->id);
		if (live != NULL && !ops_may_see(who, live->owner)) {
			json_array_append_new(wt->not_found, json_string(w->id));
			w->done = true;
			continue;
		}
		ask = false;
		if (live == NULL && waiter_answer_from_store(wt, w, &ask))
			continue;
		w->waiter = wt;
		if (watch_attach(w) < 0) {
			w->waiter = NULL;
			goto oom;
		}
		wt->pending++;
		/* Watched first: an end announced after the lookup still finds us. */
		if (ask && (copy = strdup(w->id)) != NULL)
			queue->lookup(copy, true, wait_looked_up, copy);
	}
	free(repeat);
	repeat = NULL;
	if (wt->pending == 0) {
		waiter_final(wt);
		return 0;
	}
	if (timeout_ms >= 0) {
		wt->timeout = evtimer_new(kgymd_base, waiter_timeout, wt);
		if (wt->timeout == NULL)
			goto oom;
		tv.tv_sec = timeout_ms / 1000;
		tv.tv_usec = (timeout_ms % 1000) * 1000;
		evtimer_add(wt->timeout, &tv);
	}
	return 0;
oom:
	free(repeat);
	waiter_free(wt);
	return -ENOMEM;
}

void
wait_task_done(const char *id, enum task_state state, json_t *result)
{
	struct watch_node *node;
	struct watch *w;
	struct waiter *wt;

	if ((node = watch_node_find(id)) == NULL)
		return;
	while ((w = LIST_FIRST(&node->watches)) != NULL) {
		LIST_REMOVE(w, by_task);
		w->done = true;
		wt = w->waiter;
		waiter_send_event(wt, id, state, result);
		if (--wt->pending == 0)
			waiter_final(wt);
	}
	watch_node_release(node);
}

static void (*wait_walk_cb)(const char *id);

static void
wait_walk_node(const void *n, VISIT which, int depth)
{
	if (which == postorder || which == leaf)
		wait_walk_cb((*(struct watch_node *const *)n)->id);
}

void
wait_foreach_watched(void (*cb)(const char *id))
{
	wait_walk_cb = cb;
	twalk(watch_root, wait_walk_node);
	wait_walk_cb = NULL;
}

bool
wait_watched(const char *id)
{
	return watch_node_find(id) != NULL;
}

void
wait_task_answer(const char *id, int error, const struct store_row *row)
{
	struct watch_node *node;
	struct watch *w, *next;
	struct waiter *wt;
	json_t *result;

	if ((node = watch_node_find(id)) == NULL)
		return;
	if (error == 0 && proto_state_terminal(row->state)) {
		result = row->result != NULL ? json_loads(row->result, 0, NULL) : NULL;
		/* Those who may not see it hear not_found, below. */
		for (w = LIST_FIRST(&node->watches); w != NULL; w = next) {
			next = LIST_NEXT(w, by_task);
			if (ops_may_see(&w->waiter->who, row->owner))
				continue;
			LIST_REMOVE(w, by_task);
			w->done = true;
			wt = w->waiter;
			json_array_append_new(wt->not_found, json_string(id));
			if (--wt->pending == 0)
				waiter_final(wt);
		}
		if (!LIST_EMPTY(&node->watches))
			wait_task_done(id, row->state, result);
		else
			watch_node_release(node);
		json_decref(result);
		return;
	}
	if (error != -ENOENT)
		return;		/* still running somewhere, or Redis is away: keep waiting */
	while ((w = LIST_FIRST(&node->watches)) != NULL) {
		LIST_REMOVE(w, by_task);
		w->done = true;
		wt = w->waiter;
		json_array_append_new(wt->not_found, json_string(id));
		if (--wt->pending == 0)
			waiter_final(wt);
	}
	watch_node_release(node);
}

void
wait_peer_gone(struct peer *peer)
{
	struct waiter *wt;

	while ((wt = TAILQ_FIRST(&peer->waiters)) != NULL)
		waiter_free(wt);
}

size_t
wait_count(void)
{
	return nwaiters;
}
