/*
 * call.c -- the nvrtc backend's call layer: everything one kernel call
 * needs on the device, and the call itself.
 *
 * A call of either program (the reference or the solution) is prepared
 * the same way: inputs generated on the GPU from the call's seed (or a
 * test case's uploaded), outputs poisoned, both programs' scratch zeroed,
 * shared memory scrubbed; then the program's launch plan is queued.  The
 * buffers belong to the current size set: each tensor in its own guarded
 * buffer, allocated when its set becomes current and freed when another
 * does.  What the outputs mean is verdict.c's business; the order of the
 * calls is evaluate.c's (correctness) and timing.c's (timed calls).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_internal.h"

/* ----------------------------------------------------------- size sets */

const struct spec_plan *
call_plan(const struct evaluate *ev, const struct evaluate_prog *p, size_t k)
{
	return p == &ev->ref ? &ev->sevs[k]->reference : &ev->sevs[k]->solution;
}

void
call_set_note(const struct evaluate *ev, size_t k, char *buf, size_t len)
{
	char sizes[128];

	if (len == 0)
		return;
	buf[0] = '\0';
	if (ev->nsets <= 1)
		return;
	spec_size_set_text(ev->spec, k, sizes, sizeof sizes);
	snprintf(buf, len, " (size set problem.sizes[%zu]: %s)", k, sizes);
}

/* --------------------------------------------------------------- calls */

/*
 * Inputs from `seed` (init number `init_index`), the outputs `outs`
 * poisoned from `poison`, both programs' scratch zeroed, shared memory
 * scrubbed: everything one call needs, queued.
 */
static int
call_prepare_buffers(struct evaluate *ev, uint64_t seed, size_t init_index,
    const struct device_buf *outs, uint64_t poison, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	const struct spec_tensor *t;
	struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	size_t i, k;
	int error;

	for (i = 0; i < pb->ninputs; i++) {
		t = &pb->inputs[i];
		if (ev->case_in != NULL)
			error = device_upload(ev->in[i].ptr, ev->case_in[i], ev->in[i].bytes,
			    ret_cause);
		else
			error = device_fill(&ev->in[i], t->dtype, ev->sev->inputs[i].numel,
			    &t->init[init_index % t->ninit], value_seed(seed, VALUE_TAG_INPUT, i),
			    ret_cause);
		if (error < 0)
			return error;
	}
	for (i = 0; i < pb->noutputs; i++)
		if ((error = device_poison(&outs[i], pb->outputs[i].dtype,
		    ev->sev->outputs[i].numel, value_seed(poison, VALUE_TAG_POISON, i),
		    ret_cause)) < 0)
			return error;
	/* Both programs' scratch: the other's may hold its intermediate results. */
	for (k = 0; k < 2; k++)
		for (i = 0; progs[k]->scratch != NULL && i < progs[k]->plan->nscratch; i++)
			if ((error = device_zero(progs[k]->scratch[i].ptr,
			    progs[k]->scratch[i].bytes, ret_cause)) < 0)
				return error;
	return device_scrub_shared(ret_cause);
}

int
call_prepare(struct evaluate *ev, uint64_t seed, size_t init_index, bool hash,
    char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	CUdeviceptr hslot = ev->slots.ptr + ev->sev->noutputs * sizeof(struct kgym_compare_stats);
	size_t i;
	int error;

	ev->calls++;
	ev->call_seed = seed;
	ev->call_init = init_index;
	ev->poison_seed = value_seed(ev->seed, VALUE_TAG_POISON, ev->calls);
	if ((error = call_prepare_buffers(ev, seed, init_index, ev->out, ev->poison_seed,
	    ret_cause)) < 0)
		return error;
	if (!hash)
		return 0;
	for (i = 0; i < pb->ninputs; i++)
		if ((error = device_hash(&ev->in[i], value_seed(seed, VALUE_TAG_HASH, i),
		    hslot + i * sizeof(uint64_t), ret_cause)) < 0)
			return error;
	/* On the host before the candidate runs: it cannot rewrite them. */
	return pb->ninputs == 0 ? 0 : device_download(ev->in_hash, hslot,
	    pb->ninputs * sizeof(uint64_t), ret_cause);
}

int
call_prepare_reference(struct evaluate *ev, char **ret_cause)
{
	/* The candidate's poison seed stays: a check names unwritten elements. */
	return call_prepare_buffers(ev, ev->call_seed, ev->call_init, ev->expect,
	    value_seed(ev->poison_seed, VALUE_TAG_POISON, UINT64_MAX), ret_cause);
}

int
call_hash_inputs(struct evaluate *ev, CUdeviceptr slots, char **ret_cause)
{
	size_t i;
	int error;

	for (i = 0; i < ev->sev->ninputs; i++)
		if ((error = device_hash(&ev->in[i], value_seed(ev->call_seed, VALUE_TAG_HASH, i),
		    slots + i * sizeof(uint64_t), ret_cause)) < 0)
			return error;
	return 0;
}

int
call_launch(struct evaluate *ev, struct evaluate_prog *p, char **ret_cause)
{
	const struct spec_launch *l;
	CUresult rc;
	size_t s;

	ev->running = p;
	for (s = 0; s < p->plan->nsteps; s++) {
		l = &p->plan->steps[s];
		if ((rc = nvcu.cuLaunchKernel(p->fn[s], l->grid[0], l->grid[1], l->grid[2],
		    l->block[0], l->block[1], l->block[2], l->shared_bytes, nvdev.stream,
		    p->params[s], NULL)) != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "%s.launch[%zu] (kernel '%s')", p->path,
			    s, l->kernel);
	}
	return 0;
}

int
call_save_reference(struct evaluate *ev, char **ret_cause)
{
	size_t o;
	int error;

	for (o = 0; o < ev->sev->noutputs; o++)
		if ((error = device_download(ev->ref_host[o], ev->out[o].ptr, ev->out[o].bytes,
		    ret_cause)) < 0)
			return error;
	return 0;
}

/* ---------------------------------------------------------- allocation */

static int
call_alloc_list(struct evaluate *ev, const char *role, const struct spec_tensor *t,
    const struct spec_shape *sh, size_t n, struct device_buf **ret, char **ret_cause)
{
	struct device_buf *b;
	char *cause = NULL;
	size_t i;
	int error;

	if ((b = calloc(n ? n : 1, sizeof *b)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	*ret = b;		/* freed by the caller, allocated or not */
	for (i = 0; i < n; i++) {
		if ((error = device_buf_alloc(sh[i].bytes, &b[i], &cause)) == 0)
			continue;
		if (error == -ENOMEM) {
			verdict_record(ev, true, "RESOURCE_ERROR", "out of GPU memory for %s '%s' "
			    "(%" PRIu64 " bytes): %s", role, t[i].name, sh[i].bytes, cause);
			free(cause);
			return 0;
		}
		*ret_cause = cause;
		return error;
	}
	return 0;
}

static void
call_free_list(struct device_buf *b, size_t n)
{
	size_t i;

	for (i = 0; b != NULL && i < n; i++)
		device_buf_free(&b[i]);
	free(b);
}

/* What does not depend on the size set: comparison slots, hashes, pointers. */
int
call_alloc(struct evaluate *ev, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	char *cause = NULL;
	size_t slots;
	int error;

	slots = pb->noutputs * sizeof(struct kgym_compare_stats) + (pb->ninputs + 1) * sizeof(uint64_t);
	if ((error = device_buf_alloc(slots, &ev->slots, &cause)) < 0) {
		*ret_cause = cause;
		return error;
	}
	if ((ev->in_hash = calloc(pb->ninputs + 1, sizeof *ev->in_hash)) == NULL ||
	    (ev->ref_host = calloc(pb->noutputs, sizeof *ev->ref_host)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	return 0;
}

/* The current size set's tensors (ev->sev), each in its own guarded buffer. */
static int
call_alloc_set(struct evaluate *ev, char **ret_cause)
{
	const struct spec_problem *pb = &ev->spec->problem;
	struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	size_t o, k;
	int error;

	if ((error = call_alloc_list(ev, "input", pb->inputs, ev->sev->inputs, pb->ninputs,
	    &ev->in, ret_cause)) < 0 || ev->code != NULL ||
	    (error = call_alloc_list(ev, "output", pb->outputs, ev->sev->outputs,
	    pb->noutputs, &ev->out, ret_cause)) < 0 || ev->code != NULL ||
	    (error = call_alloc_list(ev, "expected output", pb->outputs, ev->sev->outputs,
	    pb->noutputs, &ev->expect, ret_cause)) < 0 || ev->code != NULL)
		return error;
	for (k = 0; k < 2; k++) {
		if (progs[k]->plan == NULL || progs[k]->prog == NULL)
			continue;
		if ((error = call_alloc_list(ev, "scratch", progs[k]->prog->scratch,
		    progs[k]->plan->scratch, progs[k]->plan->nscratch, &progs[k]->scratch,
		    ret_cause)) < 0 || ev->code != NULL)
			return error;
	}
	if (!ev->has_ref)
		return 0;	/* test cases lend theirs */
	for (o = 0; o < pb->noutputs; o++) {
		if ((ev->ref_host[o] = malloc(ev->sev->outputs[o].bytes)) == NULL) {
			verdict_record(ev, true, "RESOURCE_ERROR", "out of host memory for the "
			    "expected values of output '%s' (%" PRIu64 " bytes)", pb->outputs[o].name,
			    ev->sev->outputs[o].bytes);
			return 0;
		}
	}
	return 0;
}

/* Undo call_alloc_set() (also what a failed one made). */
void
call_free_set(struct evaluate *ev)
{
	struct evaluate_prog *progs[2] = { &ev->ref, &ev->sol };
	size_t no = ev->sev != NULL ? ev->sev->noutputs : 0, ni = ev->sev != NULL ?
	    ev->sev->ninputs : 0, o, k;

	for (k = 0; k < 2; k++) {
		call_free_list(progs[k]->scratch, progs[k]->plan != NULL ?
		    progs[k]->plan->nscratch : 0);
		progs[k]->scratch = NULL;
	}
	call_free_list(ev->in, ni);
	call_free_list(ev->out, no);
	call_free_list(ev->expect, no);
	ev->in = ev->out = ev->expect = NULL;
	/* With test cases these are theirs. */
	for (o = 0; ev->has_ref && ev->ref_host != NULL && o < no; o++) {
		free(ev->ref_host[o]);
		ev->ref_host[o] = NULL;
	}
	ev->set_ready = false;
}

int
call_use_set(struct evaluate *ev, size_t k, char **ret_cause)
{
	char *cause = NULL;
	int error;

	if (ev->set_ready && ev->size_set == k)
		return 0;
	/* Nothing queued may still use the buffers about to go. */
	if (ev->set_ready && device_sync(NULL, &cause) < 0) {
		verdict_cuda_failure(ev, "changing the size set", cause);
		return 0;
	}
	call_free_set(ev);
	ev->size_set = k;
	ev->sev = ev->sevs[k];
	ev->sol.plan = call_plan(ev, &ev->sol, k);
	if (ev->has_ref)
		ev->ref.plan = call_plan(ev, &ev->ref, k);
	if ((error = call_alloc_set(ev, ret_cause)) < 0 || ev->code != NULL)
		return error;
	if (ev->has_ref)
		bind_tensors(ev, &ev->ref);
	bind_tensors(ev, &ev->sol);
	ev->set_ready = true;
	return 0;
}
