/*
 * profdata.c -- the accounting behind result.profile: which kernel ran for
 * whom, for how long, and whether anything ran where it should not.
 *
 * profile.c feeds this file what CUPTI tells it -- each launch we make
 * (API callback: correlation id and CUfunction), each kernel, memcpy and
 * memset record (activity buffers, in whatever order CUPTI delivers them)
 * -- and the timing code tells it where each measured call begins and ends.
 * Nothing here touches CUDA or CUPTI, so all of it is unit-tested with
 * made-up records (tests/unit/test_profile.c).
 *
 * Attribution is by identity: a record's correlation id names the launch,
 * the launch names the CUfunction we passed, and the CUfunction belongs to
 * one module (registered per job: our helpers, the reference, the
 * solution).  Kernel names are only reported, never used to decide whose a
 * kernel is.  A kernel record that none of our launches explains is
 * "unknown": it is compared with the time windows of the calls (the first
 * start to the last end of the program's kernels on our stream) -- inside
 * a window it is work beside the timed plan; starting while the call was
 * in progress on the host and ending after its window, it is work the end
 * event did not wait for.  Our own launches are never taken for unknown
 * work: a program's launch is remembered until its record comes.
 *
 * A call is settled (its numbers final) once it has ended, the next call
 * has begun (so whether it was timed is known) and every launch of its
 * program has a record -- or, short of records, once it is
 * PROFDATA_SETTLE_LAG calls old or profdata_settle(final) is called; it is
 * then incomplete.  Only complete, profiled calls that were timed (or made
 * for profiling) are counted in the profile.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_internal.h"

/* Unknown kernels and copies kept for comparing with calls not settled yet. */
#define PROFDATA_MAX_OTHERS	65536
/* Helper launches whose record is awaited, beyond which the oldest go. */
#define PROFDATA_MAX_OPEN	4096
/* Calls a record may lag behind (each call ends with a flush): a call this
 * many calls old is settled with what it has. */
#define PROFDATA_SETTLE_LAG	4

struct profdata_fn {
	const void *fn;
	enum profile_owner owner;
	const void *canonical;	/* the function it stands for (itself, or the one
				 * an earlier load of its module gave) */
};

struct profdata_launch {
	uint32_t corr;
	int call;			/* the call it belongs to; -1: none */
	enum profile_owner owner;
	const void *fn;
	bool seen, failed;
};

/* A program's kernel, kept until its call settles. */
struct profdata_rec {
	const void *fn;
	size_t name;
	uint32_t context, stream;
	uint64_t start, end;
	int32_t grid[3], block[3], static_shared, dynamic_shared;
	uint32_t registers;
};

/* A call's state beside its summary (same index in pd->sums). */
struct profdata_call {
	struct profdata_rec *recs;
	size_t nrecs, cap;
	unsigned int untimed;		/* records without timestamps */
	bool ended, settled;
};

/* An unknown kernel or a copy. */
struct profdata_other {
	bool copy;
	size_t name;			/* kernels */
	uint32_t context, stream;
	uint64_t start, end;
	int32_t grid[3], block[3], static_shared, dynamic_shared;
	uint32_t registers;
	bool aggregated;		/* already in the profile */
};

/* One line of result.profile: a kernel with one launch configuration. */
struct profdata_entry {
	enum profile_owner owner;
	const void *fn;			/* NULL for unknown kernels (by name) */
	size_t name;
	int32_t grid[3], block[3], static_shared, dynamic_shared;
	uint32_t registers;
	uint64_t calls, ns;
};

struct profdata_tally {
	uint64_t count, bytes, ns;
};

struct profdata {
	uint32_t context, stream;
	struct profdata_fn *fns;
	size_t nfns;
	struct profdata_launch *launches;	/* by correlation id, from `head` */
	size_t head, nlaunches, caplaunches;
	size_t sweep_at;		/* waiting launches that trigger a sweep */
	bool unsorted;
	struct profile_call_summary *sums;	/* lent by profdata_calls() */
	struct profdata_call *calls;
	size_t ncalls, capcalls, capsums;
	size_t unsettled;		/* the first call not settled */
	long current;			/* the call in progress; -1 */
	struct profdata_other *others;
	size_t nothers, capothers;
	struct profdata_entry *entries;
	size_t nentries, capentries;
	char **names;
	size_t nnames;
	uint64_t dropped, untimed, others_lost, launches_forgotten, late;
	struct profdata_tally helpers, memcpy, memset;
	bool oom;			/* something was not recorded */
};

/* ----------------------------------------------------------- helpers */

static int
profdata_grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	if ((q = realloc(*p, n * size)) == NULL)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* The index of `name` in pd->names, added if new; SIZE_MAX: no memory. */
static size_t
profdata_name(struct profdata *pd, const char *name)
{
	char **q, *s;
	size_t i;

	if (name == NULL)
		name = "?";
	for (i = 0; i < pd->nnames; i++)
		if (strcmp(pd->names[i], name) == 0)
			return i;
	if ((s = strdup(name)) == NULL ||
	    (q = realloc(pd->names, (pd->nnames + 1) * sizeof *q)) == NULL) {
		free(s);
		return SIZE_MAX;
	}
	pd->names = q;
	pd->names[pd->nnames] = s;
	return pd->nnames++;
}

static bool
profdata_ours(const struct profdata *pd, uint32_t context, uint32_t stream)
{
	return context == pd->context && stream == pd->stream;
}

/* A record's duration; a record that ends before it starts lasted 0. */
static uint64_t
profdata_dur(uint64_t start, uint64_t end)
{
	return end > start ? end - start : 0;
}

static double
profdata_us(uint64_t ns)
{
	return (double)ns / 1e3;
}

/* ---------------------------------------------------------- life */

struct profdata *
profdata_new(uint32_t context, uint32_t stream)
{
	struct profdata *pd;

	if ((pd = calloc(1, sizeof *pd)) == NULL)
		return NULL;
	pd->context = context;
	pd->stream = stream;
	pd->current = -1;
	pd->sweep_at = 2 * PROFDATA_MAX_OPEN;
	return pd;
}

void
profdata_free(struct profdata *pd)
{
	size_t i;

	if (pd == NULL)
		return;
	for (i = 0; i < pd->ncalls; i++)
		free(pd->calls[i].recs);
	for (i = 0; i < pd->nnames; i++)
		free(pd->names[i]);
	free(pd->names);
	free(pd->calls);
	free(pd->sums);
	free(pd->fns);
	free(pd->launches);
	free(pd->others);
	free(pd->entries);
	free(pd);
}

int
profdata_add_function(struct profdata *pd, const void *fn, enum profile_owner owner)
{
	struct profdata_fn *q;

	if ((q = realloc(pd->fns, (pd->nfns + 1) * sizeof *q)) == NULL)
		return -ENOMEM;
	pd->fns = q;
	q[pd->nfns].fn = fn;
	q[pd->nfns].owner = owner;
	q[pd->nfns].canonical = fn;
	pd->nfns++;
	return 0;
}

int
profdata_add_alias(struct profdata *pd, const void *fn, const void *same_as)
{
	struct profdata_fn *q;
	size_t i;

	for (i = 0; i < pd->nfns; i++)
		if (pd->fns[i].fn == same_as)
			break;
	if (i == pd->nfns)
		return 0;	/* unknown: fn stays unknown too */
	if ((q = realloc(pd->fns, (pd->nfns + 1) * sizeof *q)) == NULL)
		return -ENOMEM;
	pd->fns = q;
	q[pd->nfns].fn = fn;
	q[pd->nfns].owner = q[i].owner;
	q[pd->nfns].canonical = q[i].canonical;
	pd->nfns++;
	return 0;
}

/* The function `fn` stands for: an alias's original, else itself. */
static const void *
profdata_canonical(const struct profdata *pd, const void *fn)
{
	size_t i;

	for (i = 0; i < pd->nfns; i++)
		if (pd->fns[i].fn == fn)
			return pd->fns[i].canonical;
	return fn;
}

static enum profile_owner
profdata_owner(const struct profdata *pd, const void *fn)
{
	size_t i;

	for (i = 0; i < pd->nfns; i++)
		if (pd->fns[i].fn == fn)
			return pd->fns[i].owner;
	return PROFILE_UNKNOWN;
}

/* ------------------------------------------------------- launches */

static struct profdata_launch *
profdata_find_launch(struct profdata *pd, uint32_t corr)
{
	size_t lo = pd->head, hi = pd->nlaunches, mid, i;

	if (pd->unsorted) {
		for (i = pd->head; i < pd->nlaunches; i++)
			if (pd->launches[i].corr == corr)
				return &pd->launches[i];
		return NULL;
	}
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (pd->launches[mid].corr < corr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < pd->nlaunches && pd->launches[lo].corr == corr ? &pd->launches[lo] : NULL;
}

/*
 * Can this launch be forgotten?  When its record came (or cannot come:
 * the launch failed); a helper's, too, once PROFDATA_MAX_OPEN newer
 * launches are waiting -- a late helper record is then "unknown", which
 * stream order keeps out of every call's window and host turn.  A
 * program's launch is never forgotten before its record: a late one must
 * not pass for someone else's work.
 */
static bool
profdata_forgettable(const struct profdata_launch *l, bool old)
{
	return l->seen || l->failed || (l->call < 0 && old);
}

static void
profdata_prune(struct profdata *pd)
{
	struct profdata_launch *l;
	size_t i, n;

	while (pd->head < pd->nlaunches) {
		l = &pd->launches[pd->head];
		if (!profdata_forgettable(l, pd->nlaunches - pd->head > PROFDATA_MAX_OPEN))
			break;
		pd->launches_forgotten += !l->seen && !l->failed;
		pd->head++;
	}
	/* Something stays at the front (a call's missing record): sweep the
	 * rest now and then, keeping the order. */
	if (pd->nlaunches - pd->head > pd->sweep_at) {
		for (i = n = pd->head; i < pd->nlaunches; i++) {
			l = &pd->launches[i];
			if (profdata_forgettable(l, pd->nlaunches - i > PROFDATA_MAX_OPEN)) {
				pd->launches_forgotten += !l->seen && !l->failed;
				continue;
			}
			pd->launches[n++] = *l;
		}
		pd->nlaunches = n;
		n -= pd->head;
		pd->sweep_at = 2 * (n > PROFDATA_MAX_OPEN ? n : PROFDATA_MAX_OPEN);
	}
	if (pd->head > 0 && pd->head >= pd->nlaunches / 2) {
		memmove(pd->launches, pd->launches + pd->head,
		    (pd->nlaunches - pd->head) * sizeof *pd->launches);
		pd->nlaunches -= pd->head;
		pd->head = 0;
	}
}

int
profdata_launch(struct profdata *pd, uint32_t correlation, const void *fn)
{
	struct profdata_launch *l;
	struct profile_call_summary *s = pd->current >= 0 ? &pd->sums[pd->current] : NULL;

	profdata_prune(pd);
	if (profdata_grow((void **)&pd->launches, &pd->caplaunches, pd->nlaunches + 1,
	    sizeof *pd->launches) < 0) {
		pd->oom = true;
		return -ENOMEM;
	}
	if (pd->nlaunches > pd->head && pd->launches[pd->nlaunches - 1].corr >= correlation)
		pd->unsorted = true;
	l = &pd->launches[pd->nlaunches++];
	memset(l, 0, sizeof *l);
	l->corr = correlation;
	l->fn = profdata_canonical(pd, fn);
	l->owner = profdata_owner(pd, fn);
	l->call = -1;
	/* A launch belongs to the call only if it is the call's program's. */
	if (s != NULL && l->owner == s->program) {
		l->call = (int)pd->current;
		s->launches++;
	}
	return 0;
}

void
profdata_launch_failed(struct profdata *pd, uint32_t correlation)
{
	struct profdata_launch *l = profdata_find_launch(pd, correlation);

	if (l == NULL || l->failed)
		return;
	l->failed = true;
	if (l->call >= 0)
		pd->sums[l->call].launches--;
}

/* ---------------------------------------------------------- calls */

int
profdata_call_begin(struct profdata *pd, enum profile_owner program,
    enum profile_purpose purpose, bool profiled, uint64_t host_ns)
{
	struct profile_call_summary *s;

	profdata_settle(pd, false);
	if (profdata_grow((void **)&pd->calls, &pd->capcalls, pd->ncalls + 1,
	    sizeof *pd->calls) < 0 ||
	    profdata_grow((void **)&pd->sums, &pd->capsums, pd->ncalls + 1,
	    sizeof *pd->sums) < 0) {
		pd->oom = true;
		pd->current = -1;
		return -ENOMEM;
	}
	memset(&pd->calls[pd->ncalls], 0, sizeof pd->calls[pd->ncalls]);
	s = &pd->sums[pd->ncalls];
	memset(s, 0, sizeof *s);
	s->program = program;
	s->purpose = purpose;
	s->profiled = profiled;
	s->events_ms = NAN;
	s->host_ms = NAN;
	s->host_begin_ns = host_ns;
	pd->current = (long)pd->ncalls++;
	return 0;
}

void
profdata_call_end(struct profdata *pd, double events_ms, double host_ms, uint64_t host_ns)
{
	struct profile_call_summary *s;

	if (pd->current < 0)
		return;
	s = &pd->sums[pd->current];
	s->events_ms = events_ms;
	s->host_ms = host_ms;
	s->host_end_ns = host_ns;
	pd->calls[pd->current].ended = true;
	pd->current = -1;
}

void
profdata_call_times(struct profdata *pd, enum profile_owner program, double events_ms,
    double host_ms, uint64_t host_ns)
{
	struct profile_call_summary *s;
	size_t i;

	for (i = pd->ncalls; i-- > 0;) {
		if (!pd->calls[i].ended || pd->sums[i].program != program)
			continue;
		s = &pd->sums[i];
		s->events_ms = events_ms;
		s->host_ms = host_ms;
		s->host_end_ns = host_ns;
		return;
	}
}

void
profdata_mark_timed(struct profdata *pd, enum profile_owner program)
{
	size_t i;

	for (i = pd->ncalls; i-- > 0;) {
		if (!pd->calls[i].ended || pd->sums[i].program != program)
			continue;
		pd->sums[i].timed = true;
		return;
	}
}

static bool
profdata_complete(const struct profdata *pd, size_t ci)
{
	const struct profile_call_summary *s = &pd->sums[ci];

	return !s->profiled || (pd->calls[ci].untimed == 0 && s->kernels >= s->launches);
}

bool
profdata_call_complete(const struct profdata *pd)
{
	size_t i;

	/* The latest call, whether or not it has ended. */
	if (pd->ncalls == 0)
		return true;
	i = pd->current >= 0 ? (size_t)pd->current : pd->ncalls - 1;
	return profdata_complete(pd, i);
}

bool
profdata_calls_complete(const struct profdata *pd, size_t n)
{
	size_t i;

	for (i = pd->ncalls; n > 0 && i-- > 0; n--)
		if (!profdata_complete(pd, i))
			return false;
	return true;
}

/* ------------------------------------------------------- profile */

static struct profdata_entry *
profdata_entry(struct profdata *pd, enum profile_owner owner, const void *fn, size_t name,
    const int32_t grid[3], const int32_t block[3], int32_t static_shared,
    int32_t dynamic_shared, uint32_t registers)
{
	struct profdata_entry *e;
	size_t i;

	for (i = 0; i < pd->nentries; i++) {
		e = &pd->entries[i];
		if (e->owner == owner && e->fn == fn && (fn != NULL || e->name == name) &&
		    memcmp(e->grid, grid, sizeof e->grid) == 0 &&
		    memcmp(e->block, block, sizeof e->block) == 0 &&
		    e->dynamic_shared == dynamic_shared)
			return e;
	}
	if (profdata_grow((void **)&pd->entries, &pd->capentries, pd->nentries + 1,
	    sizeof *pd->entries) < 0) {
		pd->oom = true;
		return NULL;
	}
	e = &pd->entries[pd->nentries++];
	memset(e, 0, sizeof *e);
	e->owner = owner;
	e->fn = fn;
	e->name = name;
	memcpy(e->grid, grid, sizeof e->grid);
	memcpy(e->block, block, sizeof e->block);
	e->static_shared = static_shared;
	e->dynamic_shared = dynamic_shared;
	e->registers = registers;
	return e;
}

/* Is `o` work beside call c, or after its end?  Counts it and, for a
 * counted solution call, puts an unknown kernel in the profile. */
static void
profdata_match(struct profdata *pd, size_t ci, struct profdata_other *o)
{
	struct profile_call_summary *s = &pd->sums[ci];
	struct profdata_entry *e;
	bool overlap, belongs;

	if (!s->profiled || s->last_end_ns == 0)
		return;			/* no window to compare with */
	overlap = o->start < s->last_end_ns && o->end > s->first_start_ns;
	if (o->copy) {
		s->copies_during += overlap;
		return;
	}
	/* Started while the call was in progress on the host: the call's.
	 * (What starts later was queued later, by kgymd preparing the next
	 * call, not by this one.) */
	belongs = o->start >= s->host_begin_ns && o->start < s->host_end_ns;
	if (overlap) {
		if (profdata_ours(pd, o->context, o->stream))
			s->unattributed_kernels++;
		else
			s->foreign_stream_kernels++;
	}
	if (belongs && o->end > s->last_end_ns)
		s->after_end_kernels++;
	if (!s->counted || s->program != PROFILE_SOLUTION || o->aggregated ||
	    !(overlap || belongs))
		return;
	o->aggregated = true;
	if ((e = profdata_entry(pd, PROFILE_UNKNOWN, NULL, o->name, o->grid, o->block,
	    o->static_shared, o->dynamic_shared, o->registers)) == NULL)
		return;
	e->calls++;
	e->ns += profdata_dur(o->start, o->end);
}

/*
 * A new record against the settled calls it can concern: calls begin in
 * time order, so only those that began before it ended, back to the one
 * during whose turn it started.
 */
static void
profdata_match_settled(struct profdata *pd, struct profdata_other *o)
{
	size_t lo = 0, hi = pd->ncalls, mid, i;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (pd->sums[mid].host_begin_ns <= o->end)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i-- > 0;) {
		if (pd->calls[i].settled)
			profdata_match(pd, i, o);
		if (pd->sums[i].host_begin_ns <= o->start)
			break;
	}
}

static void
profdata_settle_call(struct profdata *pd, size_t ci, bool final)
{
	struct profdata_call *c = &pd->calls[ci];
	struct profile_call_summary *s = &pd->sums[ci];
	struct profdata_entry *e;
	struct profdata_rec *r;
	uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
	size_t i;

	if (c->settled || !c->ended || (!final && !profdata_complete(pd, ci)))
		return;
	c->settled = true;
	s->complete = profdata_complete(pd, ci);
	if (!s->profiled)
		return;
	for (i = 0; i < c->nrecs; i++) {
		r = &c->recs[i];
		sum += profdata_dur(r->start, r->end);
		if (!profdata_ours(pd, r->context, r->stream))
			continue;
		lo = r->start < lo ? r->start : lo;
		hi = r->end > hi ? r->end : hi;
	}
	s->kernel_us = profdata_us(sum);
	if (hi != 0) {
		s->first_start_ns = lo;
		s->last_end_ns = hi;
		s->span_us = profdata_us(hi - lo);
	}
	/* The program's own kernels somewhere else (impossible for a plan we
	 * launch on our stream, unless the driver is not what we think). */
	for (i = 0; i < c->nrecs; i++) {
		r = &c->recs[i];
		if (profdata_ours(pd, r->context, r->stream))
			continue;
		s->foreign_stream_kernels++;
		if (r->end > s->last_end_ns)
			s->after_end_kernels++;
	}
	s->counted = s->complete && c->nrecs > 0 && (s->purpose == PROFILE_PURPOSE_PROFILE ||
	    (s->purpose == PROFILE_PURPOSE_TIMING && s->timed));
	for (i = 0; i < pd->nothers; i++)
		profdata_match(pd, ci, &pd->others[i]);
	for (i = 0; s->counted && i < c->nrecs; i++) {
		r = &c->recs[i];
		if ((e = profdata_entry(pd, s->program, r->fn, r->name, r->grid, r->block,
		    r->static_shared, r->dynamic_shared, r->registers)) == NULL)
			break;
		e->calls++;
		e->ns += profdata_dur(r->start, r->end);
	}
	free(c->recs);
	c->recs = NULL;
	c->nrecs = c->cap = 0;
}

void
profdata_settle(struct profdata *pd, bool final)
{
	size_t i;

	/* Calls before pd->unsettled are all settled: the loop stays short. */
	for (i = pd->unsettled; i < pd->ncalls; i++)
		profdata_settle_call(pd, i, final || i + PROFDATA_SETTLE_LAG < pd->ncalls);
	while (pd->unsettled < pd->ncalls && pd->calls[pd->unsettled].settled)
		pd->unsettled++;
	/* Others no unsettled call can use any more. */
	if (pd->unsettled == pd->ncalls)
		pd->nothers = 0;
	profdata_prune(pd);
}

/* -------------------------------------------------------- records */

int
profdata_kernel(struct profdata *pd, const struct profdata_kernel *k)
{
	struct profdata_launch *l = profdata_find_launch(pd, k->correlation);
	struct profdata_other *o;
	struct profdata_call *c;
	struct profdata_rec *r;
	size_t name;

	if (k->start == 0 && k->end == 0)
		pd->untimed++;
	if (l != NULL && !l->seen && l->owner != PROFILE_UNKNOWN) {
		l->seen = true;
		if (l->owner == PROFILE_OURS) {
			pd->helpers.count++;
			pd->helpers.ns += profdata_dur(k->start, k->end);
			return 0;
		}
		if (l->call < 0)
			return 0;	/* the program ran outside a measured call */
		if (pd->calls[l->call].settled) {
			pd->late++;	/* its call was settled without it */
			return 0;
		}
		c = &pd->calls[l->call];
		pd->sums[l->call].kernels++;
		if (k->start == 0 && k->end == 0) {
			c->untimed++;
			return 0;
		}
		if ((name = profdata_name(pd, k->name)) == SIZE_MAX ||
		    profdata_grow((void **)&c->recs, &c->cap, c->nrecs + 1, sizeof *c->recs) < 0) {
			pd->oom = true;
			c->untimed++;		/* so the call is not counted */
			return -ENOMEM;
		}
		r = &c->recs[c->nrecs++];
		r->fn = l->fn;
		r->name = name;
		r->context = k->context;
		r->stream = k->stream;
		r->start = k->start;
		r->end = k->end;
		memcpy(r->grid, k->grid, sizeof r->grid);
		memcpy(r->block, k->block, sizeof r->block);
		r->static_shared = k->static_shared;
		r->dynamic_shared = k->dynamic_shared;
		r->registers = k->registers;
		return 0;
	}
	if (k->start == 0 && k->end == 0)
		return 0;
	/* Unknown: kept for the calls to come, compared with those settled. */
	if (pd->nothers >= PROFDATA_MAX_OTHERS ||
	    (name = profdata_name(pd, k->name)) == SIZE_MAX ||
	    profdata_grow((void **)&pd->others, &pd->capothers, pd->nothers + 1,
	    sizeof *pd->others) < 0) {
		pd->others_lost++;
		return pd->nothers >= PROFDATA_MAX_OTHERS ? 0 : -ENOMEM;
	}
	o = &pd->others[pd->nothers++];
	memset(o, 0, sizeof *o);
	o->name = name;
	o->context = k->context;
	o->stream = k->stream;
	o->start = k->start;
	o->end = k->end;
	memcpy(o->grid, k->grid, sizeof o->grid);
	memcpy(o->block, k->block, sizeof o->block);
	o->static_shared = k->static_shared;
	o->dynamic_shared = k->dynamic_shared;
	o->registers = k->registers;
	profdata_match_settled(pd, o);
	return 0;
}

int
profdata_copy(struct profdata *pd, const struct profdata_copy *cp)
{
	struct profdata_tally *t = cp->memset ? &pd->memset : &pd->memcpy;
	struct profdata_other *o;

	t->count++;
	t->bytes += cp->bytes;
	t->ns += profdata_dur(cp->start, cp->end);
	if (cp->start == 0 && cp->end == 0)
		return 0;
	if (pd->nothers >= PROFDATA_MAX_OTHERS ||
	    profdata_grow((void **)&pd->others, &pd->capothers, pd->nothers + 1,
	    sizeof *pd->others) < 0) {
		pd->others_lost++;
		return pd->nothers >= PROFDATA_MAX_OTHERS ? 0 : -ENOMEM;
	}
	o = &pd->others[pd->nothers++];
	memset(o, 0, sizeof *o);
	o->copy = true;
	o->context = cp->context;
	o->stream = cp->stream;
	o->start = cp->start;
	o->end = cp->end;
	profdata_match_settled(pd, o);
	return 0;
}

void
profdata_dropped(struct profdata *pd, uint64_t n)
{
	pd->dropped += n;
}


const struct profile_call_summary *
profdata_calls(const struct profdata *pd, size_t *ret_n)
{
	*ret_n = pd->ncalls;
	return pd->ncalls != 0 ? pd->sums : NULL;
}

/* --------------------------------------------------------- result */

/* Which number of a call profdata_median() takes. */
enum profdata_pick {
	PICK_KERNEL,		/* CUPTI's kernel time of a counted call */
	PICK_SPAN,		/* CUPTI's first start .. last end */
	PICK_EVENTS,		/* the events time of a counted call */
	PICK_WITH,		/* events with CUPTI collecting (its cost) */
	PICK_WITHOUT,		/* events without */
	PICK_WALL,		/* the host's clock around a counted call */
};

static bool
profdata_pick(const struct profile_call_summary *s, enum profdata_pick pick, double *ret)
{
	switch (pick) {
	case PICK_KERNEL:
		*ret = s->kernel_us / 1e3;
		return s->counted;
	case PICK_SPAN:
		*ret = s->span_us / 1e3;
		return s->counted;
	case PICK_EVENTS:
		*ret = s->events_ms;
		return s->counted && isfinite(s->events_ms);
	case PICK_WITH:
		*ret = s->events_ms;
		return s->profiled && isfinite(s->events_ms) &&
		    (s->purpose == PROFILE_PURPOSE_OVERHEAD || s->purpose == PROFILE_PURPOSE_PROFILE);
	case PICK_WITHOUT:
		*ret = s->events_ms;
		return !s->profiled && isfinite(s->events_ms) &&
		    s->purpose == PROFILE_PURPOSE_OVERHEAD;
	case PICK_WALL:
		*ret = s->host_ms;
		return s->counted && isfinite(s->host_ms);
	}
	return false;
}

/* The median of one number over the calls of `program`; false: no call
 * has it (or no memory). */
static bool
profdata_median(const struct profdata *pd, enum profile_owner program,
    enum profdata_pick pick, double *ret_median, size_t *ret_n)
{
	struct stats_summary sum;
	double *x, v;
	size_t i, n = 0;
	bool ok;

	if ((x = calloc(pd->ncalls + 1, sizeof *x)) == NULL)
		return false;
	for (i = 0; i < pd->ncalls; i++)
		if (pd->sums[i].program == program && profdata_pick(&pd->sums[i], pick, &v))
			x[n++] = v;
	ok = n > 0 && stats_summarise(x, n, &sum) == 0;
	if (ok) {
		*ret_median = sum.median;
		if (ret_n != NULL)
			*ret_n = n;
	}
	free(x);
	return ok;
}

static const char *
profdata_module(enum profile_owner owner)
{
	switch (owner) {
	case PROFILE_OURS:
		return "kgymd";
	case PROFILE_REFERENCE:
		return "reference";
	case PROFILE_SOLUTION:
		return "solution";
	case PROFILE_UNKNOWN:
		break;
	}
	return "unknown";
}

static int
profdata_cmp_entry(const void *a, const void *b)
{
	const struct profdata_entry *x = *(const struct profdata_entry *const *)a;
	const struct profdata_entry *y = *(const struct profdata_entry *const *)b;

	/* The most time first; the order of first appearance breaks ties. */
	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	return x < y ? -1 : x > y;
}

static json_t *
profdata_profile_json(const struct profdata *pd)
{
	const struct profdata_entry **v, *e;
	json_t *a, *o;
	size_t i;

	if ((a = json_array()) == NULL ||
	    (v = calloc(pd->nentries + 1, sizeof *v)) == NULL) {
		json_decref(a);
		return NULL;
	}
	for (i = 0; i < pd->nentries; i++)
		v[i] = &pd->entries[i];
	qsort(v, pd->nentries, sizeof *v, profdata_cmp_entry);
	for (i = 0; i < pd->nentries; i++) {
		e = v[i];
		o = json_pack("{s:s, s:s, s:I, s:f, s:f, s:[i,i,i], s:[i,i,i], s:i, s:i, s:i, s:i}",
		    "name", pd->names[e->name], "module", profdata_module(e->owner),
		    "calls", (json_int_t)e->calls, "total_us", profdata_us(e->ns),
		    "mean_us", e->calls ? profdata_us(e->ns) / (double)e->calls : 0.0,
		    "grid", e->grid[0], e->grid[1], e->grid[2],
		    "block", e->block[0], e->block[1], e->block[2],
		    "registers", (int)e->registers,
		    "shared_bytes", e->static_shared + e->dynamic_shared,
		    "static_shared_bytes", e->static_shared,
		    "dynamic_shared_bytes", e->dynamic_shared);
		if (o == NULL || json_array_append_new(a, o) < 0) {
			free(v);
			json_decref(a);
			return NULL;
		}
	}
	free(v);
	return a;
}

/* gpu_time_ms and its company in timing.<key>, when that object exists. */
static void
profdata_timing(const struct profdata *pd, json_t *timing, const char *key,
    enum profile_owner program)
{
	json_t *t = json_object_get(timing, key);
	double kernel, span;
	size_t n = 0;

	if (!json_is_object(t) || json_is_true(json_object_get(t, "cached")))
		return;
	if (!profdata_median(pd, program, PICK_KERNEL, &kernel, &n) ||
	    !profdata_median(pd, program, PICK_SPAN, &span, NULL)) {
		json_object_set_new(t, "gpu_time_ms", json_null());
		return;
	}
	json_object_set_new(t, "gpu_time_ms", json_real(kernel));
	json_object_set_new(t, "gpu_span_ms", json_real(span));
	json_object_set_new(t, "profiled_calls", json_integer((json_int_t)n));
}

/* A ratio, or null when the denominator is not a positive number. */
static json_t *
profdata_ratio(double num, double den)
{
	return den > 0.0 && isfinite(num) ? json_real(num / den) : json_null();
}

static json_t *
profdata_tally_json(const struct profdata_tally *t)
{
	return json_pack("{s:I, s:I, s:f}", "count", (json_int_t)t->count,
	    "bytes", (json_int_t)t->bytes, "total_us", profdata_us(t->ns));
}

int
profdata_result(const struct profdata *pd, json_t *result)
{
	json_t *meta = json_object_get(result, "metadata"), *timing, *profile, *j;
	const struct profile_call_summary *s;
	const struct profdata_entry *e, *e2;
	uint64_t custom_ns = 0, total_ns = 0, foreign = 0, after = 0, unattributed = 0,
	    copies = 0, incomplete = 0, counted[2] = { 0, 0 };
	size_t i, i2, ncustom = 0, ntotal = 0;
	double ev, cu, with, without;
	size_t nwith = 0, nwithout = 0;

	if (!json_is_object(meta)) {
		if ((meta = json_object()) == NULL ||
		    json_object_set_new(result, "metadata", meta) < 0)
			return -ENOMEM;
	}
	for (i = 0; i < pd->ncalls; i++) {
		s = &pd->sums[i];
		foreign += s->foreign_stream_kernels;
		after += s->after_end_kernels;
		unattributed += s->unattributed_kernels;
		copies += s->copies_during;
		incomplete += s->profiled && pd->calls[i].settled && !s->complete;
		if (s->counted)
			counted[s->program == PROFILE_SOLUTION]++;
	}
	/* Distinct kernels: the solution's by function, unknown ones by name. */
	for (i = 0; i < pd->nentries; i++) {
		e = &pd->entries[i];
		if (e->owner != PROFILE_SOLUTION && e->owner != PROFILE_UNKNOWN)
			continue;
		total_ns += e->ns;
		if (e->owner == PROFILE_SOLUTION)
			custom_ns += e->ns;
		for (i2 = 0; i2 < i; i2++) {
			e2 = &pd->entries[i2];
			if (e2->owner == e->owner && (e->owner == PROFILE_SOLUTION ?
			    e2->fn == e->fn : e2->name == e->name))
				break;
		}
		if (i2 < i)
			continue;
		ntotal++;
		ncustom += e->owner == PROFILE_SOLUTION;
	}

	if ((profile = profdata_profile_json(pd)) == NULL ||
	    json_object_set_new(result, "profile", profile) < 0)
		return -ENOMEM;
	if ((timing = json_object_get(result, "timing")) != NULL) {
		profdata_timing(pd, timing, "kernel", PROFILE_SOLUTION);
		profdata_timing(pd, timing, "reference", PROFILE_REFERENCE);
	}
	/* KernelGYM's keys, over the counted calls of the solution. */
	if (counted[1] > 0) {
		json_object_set_new(meta, "num_custom_kernels", json_integer((json_int_t)ncustom));
		json_object_set_new(meta, "num_total_kernels", json_integer((json_int_t)ntotal));
		json_object_set_new(meta, "custom_kernel_cuda_time_in_profiling_us",
		    json_real(profdata_us(custom_ns)));
		json_object_set_new(meta, "total_kernel_run_time_in_profiling_us",
		    json_real(profdata_us(total_ns)));
		json_object_set_new(meta, "custom_kernel_time_coverage",
		    json_real(total_ns > 0 ? (double)custom_ns / (double)total_ns : 0.0));
	}
	j = json_null();
	if (profdata_median(pd, PROFILE_SOLUTION, PICK_EVENTS, &ev, NULL) &&
	    profdata_median(pd, PROFILE_SOLUTION, PICK_KERNEL, &cu, NULL)) {
		json_decref(j);
		j = profdata_ratio(ev, cu);
	}
	json_object_set_new(meta, "events_vs_cupti", j);
	j = json_null();
	if (profdata_median(pd, PROFILE_REFERENCE, PICK_EVENTS, &ev, NULL) &&
	    profdata_median(pd, PROFILE_REFERENCE, PICK_KERNEL, &cu, NULL)) {
		json_decref(j);
		j = profdata_ratio(ev, cu);
	}
	json_object_set_new(meta, "events_vs_cupti_reference", j);
	if (profdata_median(pd, PROFILE_SOLUTION, PICK_WITH, &with, &nwith) &&
	    profdata_median(pd, PROFILE_SOLUTION, PICK_WITHOUT, &without, &nwithout))
		j = json_pack("{s:f, s:f, s:o, s:I, s:I}", "with_cupti_ms", with,
		    "without_cupti_ms", without, "ratio", profdata_ratio(with, without),
		    "calls_with", (json_int_t)nwith, "calls_without", (json_int_t)nwithout);
	else
		j = json_null();
	json_object_set_new(meta, "cupti_overhead", j);

	j = json_pack("{s:{s:I, s:I}, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, "
	    "s:o, s:o, s:b}",
	    "counted_calls", "solution", (json_int_t)counted[1], "reference",
	    (json_int_t)counted[0],
	    "incomplete_calls", (json_int_t)incomplete,
	    "foreign_stream_kernels", (json_int_t)foreign,
	    "after_end_kernels", (json_int_t)after,
	    "unattributed_kernels", (json_int_t)unattributed,
	    "copies_during_calls", (json_int_t)copies,
	    "dropped_records", (json_int_t)pd->dropped,
	    "untimed_records", (json_int_t)pd->untimed,
	    "unmatched_records_lost", (json_int_t)pd->others_lost,
	    "launches_forgotten", (json_int_t)pd->launches_forgotten,
	    "late_records", (json_int_t)pd->late,
	    "helper_kernels", profdata_tally_json(&pd->helpers),
	    "memcpy", profdata_tally_json(&pd->memcpy),
	    "memset", profdata_tally_json(&pd->memset),
	    "out_of_memory", pd->oom);
	if (j == NULL || json_object_set_new(meta, "cupti", j) < 0)
		return -ENOMEM;
	return 0;
}

int
profdata_detect(const struct profdata *pd, struct detect_profile *ret)
{
	struct detect_profile d;
	const struct profile_call_summary *s;
	const struct profdata_entry *e;
	double wall = 0.0;
	size_t i, i2;

	memset(&d, 0, sizeof d);
	for (i = 0; i < pd->ncalls; i++) {
		s = &pd->sums[i];
		if (s->program != PROFILE_SOLUTION)
			continue;
		d.calls += s->counted;
		/* Work beside any call of the candidate counts, counted or not. */
		d.foreign_stream_kernels += s->foreign_stream_kernels;
		d.after_end_kernels += s->after_end_kernels;
	}
	if (d.calls == 0 ||
	    !profdata_median(pd, PROFILE_SOLUTION, PICK_KERNEL, &d.kernel_ms_median, NULL))
		return -ENODATA;
	if (profdata_median(pd, PROFILE_SOLUTION, PICK_WALL, &wall, NULL))
		d.wall_ms_median = wall;
	for (i = 0; i < pd->nentries; i++) {
		e = &pd->entries[i];
		if (e->owner == PROFILE_SOLUTION)
			d.custom_ms += profdata_us(e->ns) / 1e3;
		if (e->owner == PROFILE_SOLUTION || e->owner == PROFILE_UNKNOWN)
			d.total_ms += profdata_us(e->ns) / 1e3;
	}
	/* The solution's kernels that exist: its module's functions we know. */
	for (i = 0; i < pd->nfns; i++) {
		if (pd->fns[i].owner != PROFILE_SOLUTION || pd->fns[i].canonical != pd->fns[i].fn)
			continue;
		for (i2 = 0; i2 < i; i2++)
			if (pd->fns[i2].fn == pd->fns[i].fn)
				break;
		d.custom_kernels += i2 == i;
	}
	*ret = d;
	return 0;
}
