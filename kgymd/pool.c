/*
 * pool.c -- workers, jobs, and the per-GPU locks that keep timing exact.
 *
 * The pool owns the worker slots (gpus x workers_per_gpu GPU slots and
 * cpu_workers CPU slots) and the jobs that workflows ask for through
 * host->job_run.  Jobs wait in two queues (CPU, GPU), first come first
 * served but for affinity (pool_dispatch), until a slot's worker is idle
 * and, for GPU jobs, the GPU admits them:
 *
 *   - memory: a job's gpu_memory_bytes must fit beside what the jobs
 *     already on that GPU declared; a job larger than every GPU fails at
 *     once with RESOURCE_ERROR instead of waiting forever;
 *   - the lock: every GPU has a readers-writer lock held here, in the
 *     parent.  A running GPU job holds it shared; a backend that starts
 *     timing asks (IPC LOCK) for it exclusive, giving up its shared hold
 *     first, so two timers can never deadlock.  The lock prefers writers:
 *     while one waits, no new job is admitted and no shared hold granted,
 *     so a stream of ordinary jobs cannot starve timing.
 *
 * proc.c runs the worker processes; it calls back here when a worker is
 * ready, asks for a lock, finishes a job or dies.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "kgymd.h"

struct job {
	uint64_t id;
	struct task *task;		/* NULL once the task has gone */
	char *backend;
	enum kgym_job_where where;
	json_t *request;
	uint64_t gpu_memory_bytes;
	char *phase;
	char *affinity;			/* kgym_job_spec.affinity, or NULL */
	unsigned int passed_over;	/* times a later job took a worker first */
	void (*done)(struct kgym_task *, const struct kgym_job_outcome *);
	struct worker *worker;		/* while running */
	TAILQ_ENTRY(job) entry;		/* in a queue */
};
TAILQ_HEAD(job_queue, job);

static struct gpu_slotset *pool_gpus;
static size_t pool_ngpus;
static int pool_gpu_slots;		/* workers_per_gpu, auto resolved */
static struct worker **pool_cpu;
static size_t pool_ncpu;
static struct job_queue pool_cpu_queue = TAILQ_HEAD_INITIALIZER(pool_cpu_queue);
static struct job_queue pool_gpu_queue = TAILQ_HEAD_INITIALIZER(pool_gpu_queue);
static uint64_t pool_job_serial;
static bool pool_stopping;

/* ------------------------------------------------------------ set-up */

/* CPUs this process may run on (its affinity mask: a cgroup's cpuset counts). */
static int
pool_cpus(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int
pool_workers_per_gpu(void)
{
	return pool_gpu_slots;
}

void
pool_init(void)
{
	struct gpu_info *info = NULL;
	uint64_t smallest = 0;
	size_t i, ninfo = 0;
	int s, cpus = pool_cpus();

	gpus_enumerate(kgymd_config, &info, &ninfo);
	pool_ngpus = ninfo;
	for (i = 0; i < ninfo; i++)
		if (info[i].memory_bytes > 0 && (smallest == 0 || info[i].memory_bytes < smallest))
			smallest = info[i].memory_bytes;
	pool_gpu_slots = kgymd_config->workers_per_gpu;
	if (pool_gpu_slots == CONFIG_AUTO)
		pool_gpu_slots = config_auto_gpu_workers(cpus, ninfo, smallest);
	if (ninfo > 0 && (pool_gpus = calloc(ninfo, sizeof *pool_gpus)) == NULL)
		fatalx("out of memory");
	for (i = 0; i < ninfo; i++) {
		struct gpu_slotset *g = &pool_gpus[i];

		g->index = info[i].index;
		g->name = info[i].name;		/* takes ownership */
		g->present = info[i].present;
		g->memory_bytes = (uint64_t)kgymd_config->gpu_memory_bytes;
		if (!g->present)
			log_warnx("gpu %d is configured but the NVIDIA driver does not show "
			    "it; its workers run only jobs that need no CUDA", g->index);
		TAILQ_INIT(&g->lock_waiters);
		g->nslots = (size_t)pool_gpu_slots;
		if ((g->slots = calloc(g->nslots, sizeof *g->slots)) == NULL)
			fatalx("out of memory");
		for (s = 0; s < (int)g->nslots; s++)
			g->slots[s] = proc_new(g->index, s, g);
	}
	free(info);
	pool_ncpu = (size_t)(kgymd_config->cpu_workers == CONFIG_AUTO ?
	    config_auto_cpu_workers(cpus) : kgymd_config->cpu_workers);
	if (pool_ncpu > 0 && (pool_cpu = calloc(pool_ncpu, sizeof *pool_cpu)) == NULL)
		fatalx("out of memory");
	for (i = 0; i < pool_ncpu; i++)
		pool_cpu[i] = proc_new(-1, (int)i, NULL);
	log_info("workers: %zu GPU(s) x %d slot(s)%s, %zu CPU worker(s)%s (%d CPUs, "
	    "smallest GPU %.0f GiB)", pool_ngpus, pool_gpu_slots,
	    kgymd_config->workers_per_gpu == CONFIG_AUTO ? " (auto)" : "", pool_ncpu,
	    kgymd_config->cpu_workers == CONFIG_AUTO ? " (auto)" : "", cpus,
	    (double)smallest / (1 << 30));
}

static void
job_free(struct job *job)
{
	if (job == NULL)
		return;
	free(job->backend);
	free(job->phase);
	free(job->affinity);
	json_decref(job->request);
	free(job);
}

/* ------------------------------------------------------------ the GPU lock */

static const char *
pool_lock_state(const struct gpu_slotset *g)
{
	if (g->writer != NULL)
		return "exclusive";
	if (g->readers > 0)
		return "shared";
	return "free";
}

static bool
pool_writer_waiting(const struct gpu_slotset *g)
{
	const struct worker *w;

	TAILQ_FOREACH(w, &g->lock_waiters, lock_entry)
		if (w->lock_wanted == KGYM_GPU_EXCLUSIVE)
			return true;
	return false;
}

/*
 * Grant what the lock allows now.  While any writer waits, only the first
 * waiting writer may be granted, once no reader holds the lock, wherever it
 * stands in the queue (a reader queued before it must not block it: that
 * reader would in turn wait for the writer).  With no writer waiting, every
 * waiting reader is granted.
 */
static void
pool_lock_grant(struct gpu_slotset *g)
{
	struct worker *w, *next;

	if (g->writer != NULL)
		return;
	TAILQ_FOREACH(w, &g->lock_waiters, lock_entry)
		if (w->lock_wanted == KGYM_GPU_EXCLUSIVE)
			break;
	if (w != NULL) {
		if (g->readers > 0)
			return;
		TAILQ_REMOVE(&g->lock_waiters, w, lock_entry);
		g->writer = w;
		w->lock_held = KGYM_GPU_EXCLUSIVE;
		w->lock_wanted = 0;
		proc_lock_granted(w);
		return;
	}
	for (w = TAILQ_FIRST(&g->lock_waiters); w != NULL; w = next) {
		next = TAILQ_NEXT(w, lock_entry);
		TAILQ_REMOVE(&g->lock_waiters, w, lock_entry);
		g->readers++;
		w->lock_held = KGYM_GPU_SHARED;
		w->lock_wanted = 0;
		proc_lock_granted(w);
	}
}

/* Drop whatever `w` holds or waits for on its GPU. */
static void
pool_lock_release(struct worker *w)
{
	struct gpu_slotset *g = w->gpuset;

	if (g == NULL)
		return;
	if (w->lock_held == KGYM_GPU_EXCLUSIVE && g->writer == w)
		g->writer = NULL;
	else if (w->lock_held == KGYM_GPU_SHARED && g->readers > 0)
		g->readers--;
	w->lock_held = 0;
	if (w->lock_wanted != 0) {
		TAILQ_REMOVE(&g->lock_waiters, w, lock_entry);
		w->lock_wanted = 0;
	}
}

void
pool_worker_dying(struct worker *w)
{
	/* A killed worker must not hold the GPU, or be granted it, until reaped. */
	pool_lock_release(w);
	/* Nor a key: what its last job set up dies with it. */
	free(w->affinity);
	w->affinity = NULL;
	if (w->gpuset != NULL)
		pool_lock_grant(w->gpuset);
}

void
pool_lock_request(struct worker *w, enum kgym_gpu_lock mode)
{
	struct gpu_slotset *g = w->gpuset;

	/* Give up the current hold first: upgrading in place could deadlock. */
	pool_lock_release(w);
	w->lock_wanted = mode;
	TAILQ_INSERT_TAIL(&g->lock_waiters, w, lock_entry);
	pool_lock_grant(g);
	pool_kick();
}

/* ------------------------------------------------------------ dispatch */

static bool
pool_gpu_admits(const struct gpu_slotset *g, const struct job *job)
{
	if (g->writer != NULL || pool_writer_waiting(g))
		return false;
	if (g->memory_bytes > 0 && job->gpu_memory_bytes > 0 &&
	    g->memory_reserved + job->gpu_memory_bytes > g->memory_bytes)
		return false;
	return true;
}

static void
pool_start_job(struct worker *w, struct job *job)
{
	struct gpu_slotset *g = w->gpuset;

	job->worker = w;
	w->job = job;
	free(w->affinity);
	w->affinity = job->affinity != NULL ? strdup(job->affinity) : NULL;
	if (g != NULL && job->task != NULL)
		job->task->gpu = g->index;
	if (g != NULL) {
		g->readers++;
		w->lock_held = KGYM_GPU_SHARED;
		g->memory_reserved += job->gpu_memory_bytes;
	}
	proc_send_job(w, job->id, job->backend, job->phase, job->request);
}

/*
 * Affinity (kgym_job_spec.affinity).  A worker keeps what its last job set
 * up for a key -- the python backend's judge server, bound to one
 * reference -- so a job of that key costs less there: no judge or
 * reference process to start, no CUDA to bring up for them.  RL training
 * sends the candidates of one problem together, so an idle worker takes a
 * job of its own key from among the first POOL_AFFINITY_WINDOW queued
 * behind the head, unless the head has already been passed over
 * POOL_AFFINITY_PATIENCE times.  A job never waits for its own worker,
 * only a job the head could have had the worker for passes it (a big job
 * that does not fit yet still keeps its place at the head), and never one
 * whose task has a lower priority than any job it would pass.
 */
#define POOL_AFFINITY_WINDOW	64
#define POOL_AFFINITY_PATIENCE	8

static bool
pool_same_key(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Whether the job may start on the slot set g now (NULL: a CPU worker). */
static bool
pool_fits(const struct gpu_slotset *g, const struct job *job)
{
	return g == NULL || pool_gpu_admits(g, job);
}

/*
 * The more urgent of so_far and j's priority (PRIO_HIGH is the smallest):
 * folded over the jobs a candidate would pass, from the head on, so that
 * it passes only jobs no more urgent than its own (pool_may_pass).  A job
 * whose task has gone counts as neither.
 */
static enum task_prio
pool_most_urgent(const struct job *j, enum task_prio so_far)
{
	return j->task != NULL && j->task->prio < so_far ? j->task->prio : so_far;
}

static bool
pool_may_pass(const struct job *j, enum task_prio most_urgent)
{
	return j->task == NULL || j->task->prio <= most_urgent;
}

/* Whether w holds a key that counts: a worker that is up. */
static bool
pool_worker_has_key(const struct worker *w, const char *key)
{
	return w != NULL && (w->state == W_IDLE || w->state == W_BUSY ||
	    w->state == W_LOCK_WAIT) && pool_same_key(w->affinity, key);
}

/* Whether a worker other than w (up) last ran a job of this key. */
static bool
pool_key_elsewhere(const char *key, const struct worker *w)
{
	size_t i, s;

	if (key == NULL)
		return false;
	for (i = 0; i < pool_ngpus; i++)
		for (s = 0; s < pool_gpus[i].nslots; s++)
			if (pool_gpus[i].slots[s] != w &&
			    pool_worker_has_key(pool_gpus[i].slots[s], key))
				return true;
	for (s = 0; s < pool_ncpu; s++)
		if (pool_cpu[s] != w && pool_worker_has_key(pool_cpu[s], key))
			return true;
	return false;
}

/*
 * A queued job after the head for the idle worker w on g, or NULL (then
 * the head): one of w's key; else, where another worker has the head's
 * key, one of a key no worker has yet -- so that a batch of several
 * problems spreads one problem to a worker, rather than every worker
 * starting on the first problem and all of them switching after.
 */
static struct job *
pool_job_to_pass_head(struct job *head, const struct worker *w, const struct gpu_slotset *g)
{
	enum task_prio urgent;
	struct job *j;
	unsigned int k;

	if (head->passed_over >= POOL_AFFINITY_PATIENCE)
		return NULL;
	urgent = pool_most_urgent(head, PRIO__COUNT);
	for (j = TAILQ_NEXT(head, entry), k = 0; w->affinity != NULL && j != NULL &&
	    k < POOL_AFFINITY_WINDOW; urgent = pool_most_urgent(j, urgent),
	    j = TAILQ_NEXT(j, entry), k++)
		if (pool_same_key(w->affinity, j->affinity) && pool_may_pass(j, urgent) &&
		    pool_fits(g, j))
			return j;
	if (!pool_key_elsewhere(head->affinity, w))
		return NULL;
	urgent = pool_most_urgent(head, PRIO__COUNT);
	for (j = TAILQ_NEXT(head, entry), k = 0; j != NULL && k < POOL_AFFINITY_WINDOW;
	    urgent = pool_most_urgent(j, urgent), j = TAILQ_NEXT(j, entry), k++)
		if (j->affinity != NULL && !pool_same_key(j->affinity, head->affinity) &&
		    !pool_key_elsewhere(j->affinity, NULL) && pool_may_pass(j, urgent) &&
		    pool_fits(g, j))
			return j;
	return NULL;
}

/*
 * Start one job of the queue (GPU slots when gpu, else the CPU workers):
 * the head on an idle worker of its key, else a later job an idle worker
 * is better placed for (pool_job_to_pass_head), else the head on the
 * first idle worker it fits.  False when none could start.
 */
static bool
pool_dispatch(struct job_queue *q, bool gpu)
{
	struct job *head = TAILQ_FIRST(q), *j;
	struct worker *w, *first_idle = NULL, **slots;
	struct gpu_slotset *g;
	size_t i, s, n, nsets = gpu ? pool_ngpus : 1;

	if (head == NULL)
		return false;
	for (i = 0; i < nsets; i++) {
		g = gpu ? &pool_gpus[i] : NULL;
		slots = gpu ? g->slots : pool_cpu;
		n = gpu ? g->nslots : pool_ncpu;
		if (!pool_fits(g, head))
			continue;
		for (s = 0; s < n; s++) {
			if ((w = slots[s]) == NULL || w->state != W_IDLE)
				continue;
			if (pool_same_key(w->affinity, head->affinity))
				break;
			if ((j = pool_job_to_pass_head(head, w, g)) != NULL) {
				head->passed_over++;
				TAILQ_REMOVE(q, j, entry);
				pool_start_job(w, j);
				return true;
			}
			if (first_idle == NULL)
				first_idle = w;
		}
		if (s < n) {		/* an idle worker of the head's key */
			first_idle = w;
			break;
		}
	}
	if (first_idle == NULL)
		return false;
	TAILQ_REMOVE(q, head, entry);
	pool_start_job(first_idle, head);
	return true;
}

void
pool_kick(void)
{
	if (pool_stopping)
		return;
	while (pool_dispatch(&pool_cpu_queue, false))
		;
	/* GPU jobs in order, but for affinity: a job that does not fit now
	 * waits at the head so large jobs are not starved by small ones. */
	while (pool_dispatch(&pool_gpu_queue, true))
		;
}

int
pool_job_run(struct task *task, const struct kgym_job_spec *spec,
    void (*done)(struct kgym_task *, const struct kgym_job_outcome *), char **ret_cause)
{
	uint64_t largest = 0, need;
	struct job *job;
	size_t i;

	if (spec == NULL || spec->struct_size < offsetof(struct kgym_job_spec, affinity) ||
	    spec->backend == NULL ||
	    done == NULL || (spec->where != KGYM_JOB_CPU && spec->where != KGYM_JOB_GPU)) {
		*ret_cause = strdup("malformed job spec");
		return -EINVAL;
	}
	if (task->job != NULL) {
		*ret_cause = strdup("the task already has a job running");
		return -EBUSY;
	}
	if (task->state != TASK_RUNNING || task->finished) {
		*ret_cause = strdup("the task has ended: no job can run for it");
		return -EINVAL;
	}
	if (plugin_find_backend(spec->backend) == NULL) {
		if (asprintf(ret_cause, "no backend plugin serves '%s'", spec->backend) < 0)
			*ret_cause = NULL;
		return -ENOENT;
	}
	if (spec->where == KGYM_JOB_CPU && pool_ncpu == 0) {
		*ret_cause = strdup("no CPU workers are configured (cpu_workers = 0)");
		return -E2BIG;
	}
	if (spec->where == KGYM_JOB_GPU) {
		if (pool_ngpus == 0) {
			*ret_cause = strdup("this daemon has no GPU slots (gpus found none)");
			return -E2BIG;
		}
		for (i = 0; i < pool_ngpus; i++) {
			if (pool_gpus[i].memory_bytes == 0)
				largest = UINT64_MAX;	/* not known yet: let it wait */
			else if (pool_gpus[i].memory_bytes > largest)
				largest = pool_gpus[i].memory_bytes;
		}
		need = spec->gpu_memory_bytes > 0 ? spec->gpu_memory_bytes :
		    (uint64_t)task->gpu_memory_bytes;
		if (need > largest) {
			if (asprintf(ret_cause, "the job needs %llu bytes of GPU memory; the "
			    "largest GPU has %llu", (unsigned long long)need,
			    (unsigned long long)largest) < 0)
				*ret_cause = NULL;
			return -E2BIG;
		}
	}
	if ((job = calloc(1, sizeof *job)) == NULL)
		return -ENOMEM;
	job->id = ++pool_job_serial;
	job->task = task;
	job->backend = strdup(spec->backend);
	job->where = spec->where;
	job->request = spec->request != NULL ? json_deep_copy(spec->request) : json_object();
	/* The backend's estimate, else what the task declared (resources). */
	job->gpu_memory_bytes = spec->gpu_memory_bytes > 0 ? spec->gpu_memory_bytes :
	    (uint64_t)task->gpu_memory_bytes;
	job->phase = strdup(spec->phase != NULL ? spec->phase : "run");
	/* A plugin built before ABI 1.4 has no affinity field. */
	if (spec->struct_size >= offsetof(struct kgym_job_spec, affinity) +
	    sizeof spec->affinity && spec->affinity != NULL &&
	    (job->affinity = strdup(spec->affinity)) == NULL) {
		job_free(job);
		return -ENOMEM;
	}
	job->done = done;
	if (job->backend == NULL || job->request == NULL || job->phase == NULL) {
		job_free(job);
		return -ENOMEM;
	}
	task->job = job;
	TAILQ_INSERT_TAIL(spec->where == KGYM_JOB_CPU ? &pool_cpu_queue : &pool_gpu_queue,
	    job, entry);
	pool_kick();
	return 0;
}

/* The job's worker is done with it: free its slot's lock and memory. */
static void
pool_job_detach(struct worker *w)
{
	struct job *job = w->job;

	pool_lock_release(w);
	if (w->gpuset != NULL && job != NULL) {
		w->gpuset->memory_reserved -= job->gpu_memory_bytes;
		pool_lock_grant(w->gpuset);
	}
	w->job = NULL;
}

void
pool_job_end(struct worker *w, const struct kgym_job_outcome *outcome)
{
	struct job *job = w->job;
	struct task *task;

	pool_job_detach(w);
	if (job == NULL)
		return;
	task = job->task;
	if (task != NULL) {
		task->job = NULL;
		job->done((struct kgym_task *)task, outcome);
	}
	job_free(job);
	pool_kick();
}

void
pool_task_gone(struct task *task)
{
	struct job *job = task->job;

	if (job == NULL)
		return;
	task->job = NULL;
	job->task = NULL;
	if (job->worker == NULL) {
		TAILQ_REMOVE(job->where == KGYM_JOB_CPU ? &pool_cpu_queue : &pool_gpu_queue,
		    job, entry);
		job_free(job);
		return;
	}
	/* Running: the job's code must stop now; its worker is replaced. */
	proc_kill(job->worker, "its task ended (cancelled or timed out)");
}

const char *
pool_job_phase(const struct worker *w)
{
	return w->job != NULL ? w->job->phase : NULL;
}

void
pool_job_set_phase(struct worker *w, const char *phase)
{
	char *p;

	if (w->job == NULL || (p = strdup(phase)) == NULL)
		return;
	free(w->job->phase);
	w->job->phase = p;
}

const char *
pool_job_task_id(const struct worker *w)
{
	return w->job != NULL && w->job->task != NULL ? w->job->task->id : NULL;
}

uint64_t
pool_job_id(const struct worker *w)
{
	return w->job != NULL ? w->job->id : 0;
}

/* ------------------------------------------------------------ workers' news */

/*
 * Jobs queued before the GPUs' memory was known (restored tasks dispatched
 * before any HELLO) may need more than any GPU has: they would block the
 * queue's head until their task timed out.  Once every GPU's memory is
 * known, end them as job_run would have.
 */
static void
pool_fail_never_fitting(void)
{
	struct kgym_job_outcome out = { .ok = 0, .error_code = "RESOURCE_ERROR" };
	uint64_t largest = 0;
	struct job *job, *next;
	struct task *task;
	char msg[160];
	size_t i;

	for (i = 0; i < pool_ngpus; i++) {
		if (pool_gpus[i].memory_bytes == 0)
			return;
		if (pool_gpus[i].memory_bytes > largest)
			largest = pool_gpus[i].memory_bytes;
	}
	for (job = TAILQ_FIRST(&pool_gpu_queue); job != NULL; job = next) {
		next = TAILQ_NEXT(job, entry);
		if (job->gpu_memory_bytes <= largest)
			continue;
		TAILQ_REMOVE(&pool_gpu_queue, job, entry);
		snprintf(msg, sizeof msg, "the job needs %llu bytes of GPU memory; the largest "
		    "GPU has %llu", (unsigned long long)job->gpu_memory_bytes,
		    (unsigned long long)largest);
		out.error_message = msg;
		out.phase = job->phase;
		if ((task = job->task) != NULL) {
			task->job = NULL;
			job->done((struct kgym_task *)task, &out);
		}
		job_free(job);
	}
}

void
pool_worker_ready(struct worker *w, const json_t *hello)
{
	const json_t *gpu = json_object_get(hello, "gpu");
	struct gpu_slotset *g = w->gpuset;
	json_int_t mem;
	const char *name, *cc;
	int major, minor;

	/* A new process: nothing a job set up before is kept in it. */
	free(w->affinity);
	w->affinity = NULL;
	/* The worker measured its GPU; the daemon itself never opens CUDA. */
	if (g != NULL && json_is_object(gpu)) {
		mem = json_integer_value(json_object_get(gpu, "memory_bytes"));
		name = json_string_value(json_object_get(gpu, "name"));
		/* gpu_memory caps what admission hands out, e.g. to keep headroom. */
		if (mem > 0 && (g->memory_bytes == 0 || (uint64_t)mem < g->memory_bytes))
			g->memory_bytes = (uint64_t)mem;
		if (name != NULL && (g->name == NULL || strcmp(g->name, name) != 0)) {
			free(g->name);
			g->name = strdup(name);
		}
		pool_fail_never_fitting();
		cc = json_string_value(json_object_get(gpu, "compute_capability"));
		if (cc != NULL && sscanf(cc, "%d.%d", &major, &minor) == 2 && major > 0 &&
		    major < 100 && minor >= 0 && minor < 10)
			snprintf(g->arch, sizeof g->arch, "sm_%d%d", major, minor);
	}
	pool_kick();
}

static size_t
pool_queue_len(const struct job_queue *q)
{
	const struct job *job;
	size_t n = 0;

	TAILQ_FOREACH(job, q, entry)
		n++;
	return n;
}

/* ------------------------------------------------------------ shutdown, status */

void
pool_stop(void)
{
	struct job *job;
	size_t i, s;

	pool_stopping = true;
	while ((job = TAILQ_FIRST(&pool_cpu_queue)) != NULL) {
		TAILQ_REMOVE(&pool_cpu_queue, job, entry);
		if (job->task != NULL)
			job->task->job = NULL;
		job_free(job);
	}
	while ((job = TAILQ_FIRST(&pool_gpu_queue)) != NULL) {
		TAILQ_REMOVE(&pool_gpu_queue, job, entry);
		if (job->task != NULL)
			job->task->job = NULL;
		job_free(job);
	}
	for (i = 0; i < pool_ncpu; i++)
		proc_free(pool_cpu[i]);
	for (i = 0; i < pool_ngpus; i++) {
		for (s = 0; s < pool_gpus[i].nslots; s++)
			proc_free(pool_gpus[i].slots[s]);
		free(pool_gpus[i].slots);
		free(pool_gpus[i].name);
	}
	free(pool_cpu);
	free(pool_gpus);
	pool_cpu = NULL;
	pool_gpus = NULL;
	pool_ncpu = pool_ngpus = 0;
}

const char *
pool_gpu_arch(void)
{
	const char *best = NULL;
	size_t i;

	for (i = 0; i < pool_ngpus; i++) {
		if (pool_gpus[i].arch[0] == '\0')
			continue;
		/* "sm_NN" strings of equal length compare as numbers. */
		if (best == NULL || strlen(pool_gpus[i].arch) < strlen(best) ||
		    (strlen(pool_gpus[i].arch) == strlen(best) &&
		    strcmp(pool_gpus[i].arch, best) < 0))
			best = pool_gpus[i].arch;
	}
	return best;
}

const char *
pool_gpu_name(int index)
{
	size_t i;

	for (i = 0; i < pool_ngpus; i++)
		if (pool_gpus[i].index == index)
			return pool_gpus[i].name;
	return NULL;
}

bool
pool_is_stopping(void)
{
	return pool_stopping;
}

static json_t *
pool_describe_slots(struct worker **slots, size_t n)
{
	json_t *list = json_array();
	size_t i;

	for (i = 0; i < n; i++)
		json_array_append_new(list, proc_describe(slots[i]));
	return list;
}

json_t *
pool_describe(void)
{
	json_t *gpus = json_array(), *waiting;
	const struct worker *w;
	size_t i;

	for (i = 0; i < pool_ngpus; i++) {
		struct gpu_slotset *g = &pool_gpus[i];

		waiting = json_array();
		TAILQ_FOREACH(w, &g->lock_waiters, lock_entry)
			json_array_append_new(waiting, json_pack("{s:s, s:s}", "worker", w->name,
			    "mode", w->lock_wanted == KGYM_GPU_EXCLUSIVE ? "exclusive" : "shared"));
		json_array_append_new(gpus, json_pack("{s:i, s:s?, s:s?, s:b, s:o, s:I, s:s, s:i, s:o, s:o}",
		    "index", g->index, "name", g->name,
		    "arch", g->arch[0] != '\0' ? g->arch : NULL, "present", g->present,
		    "memory_bytes", g->memory_bytes > 0 ? json_integer((json_int_t)g->memory_bytes) :
		    json_null(), "memory_reserved_bytes", (json_int_t)g->memory_reserved,
		    "lock", pool_lock_state(g), "lock_readers", g->readers,
		    "lock_waiting", waiting,
		    "workers", pool_describe_slots(g->slots, g->nslots)));
	}
	return json_pack("{s:o, s:o, s:i, s:i}", "gpus", gpus,
	    "cpu_workers", pool_describe_slots(pool_cpu, pool_ncpu),
	    "queued_cpu_jobs", (int)pool_queue_len(&pool_cpu_queue),
	    "queued_gpu_jobs", (int)pool_queue_len(&pool_gpu_queue));
}
