/*
 * bind.c -- a compiled program meets its launch plan and the device.
 *
 * spec.c has checked everything a payload can be checked for without a
 * GPU.  What remains needs the loaded cubin and the device: does each
 * kernel exist, does it take as many parameters as the plan passes, is each
 * parameter the size the argument needs (a tensor an 8-byte pointer, an
 * integer expression 4 or 8 bytes, range-checked for 4), and do grid,
 * block and shared memory fit the device and the kernel as compiled
 * (registers limit its threads per block).  All of it is checked for both
 * programs before the first launch, and any problem becomes a precise
 * VALIDATION_ERROR naming the field, so nothing half-runs.
 *
 * A problem with several size sets has a plan per set: each is checked
 * here, before anything runs, and its messages name the set.  The
 * kernelParams arrays for cuLaunchKernel are built here once per job and
 * filled for the current size set by bind_tensors(): scalar values from
 * its plan, tensor pointers once its buffers exist.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_internal.h"

/* More parameters than any plan may pass: counting stops here. */
#define BIND_MAX_PARAMS		(SPEC_MAX_ARGS + 1)

static const char *
bind_kind_name(enum spec_arg_kind kind)
{
	switch (kind) {
	case SPEC_ARG_TENSOR:
		return "a tensor (a device pointer)";
	case SPEC_ARG_INT:
		return "an integer expression";
	case SPEC_ARG_I32:
		return "an i32 literal";
	case SPEC_ARG_I64:
		return "an i64 literal";
	case SPEC_ARG_F32:
		return "an f32 literal";
	case SPEC_ARG_F64:
		return "an f64 literal";
	}
	return "?";
}

/* The parameter sizes of f: how many there are (up to BIND_MAX_PARAMS). */
static int
bind_params(CUfunction f, size_t *sizes, size_t *ret_n, char **ret_cause)
{
	size_t i, off, size;
	CUresult rc;

	for (i = 0; i < BIND_MAX_PARAMS; i++) {
		rc = nvcu.cuFuncGetParamInfo(f, i, &off, &size);
		if (rc == CUDA_ERROR_INVALID_VALUE)
			break;		/* past the last parameter */
		if (rc != CUDA_SUCCESS)
			return device_fail(rc, ret_cause, "cuFuncGetParamInfo");
		sizes[i] = size;
	}
	*ret_n = i;
	return 0;
}

static int
bind_func_attr(CUfunction f, CUfunction_attribute attr, int *ret, char **ret_cause)
{
	CUresult rc;

	if ((rc = nvcu.cuFuncGetAttribute(ret, attr, f)) != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "cuFuncGetAttribute(%d)", (int)attr);
	return 0;
}

/*
 * Store launch argument `arg` as a parameter of `size` bytes into *v:
 * 0, -ERANGE (an integer expression a 4-byte parameter cannot hold) or
 * -EINVAL (the sizes do not match).  Tensor pointers: bind_tensors().
 */
static int
bind_value(const struct spec_launch_arg *arg, size_t size, union evaluate_val *v)
{
	switch (arg->kind) {
	case SPEC_ARG_INT:
		if (size == 8) {
			v->i64 = arg->i;
			return 0;
		}
		if (size != 4)
			return -EINVAL;
		/* The parameter's signedness is not in the cubin: accept what
		 * either an int or an unsigned int can hold. */
		if (arg->i < INT32_MIN || arg->i > (int64_t)UINT32_MAX)
			return -ERANGE;
		v->i32 = (int32_t)(uint32_t)(arg->i & 0xffffffff);
		return 0;
	case SPEC_ARG_TENSOR:
	case SPEC_ARG_I64:
	case SPEC_ARG_F64:
		if (size != 8)
			return -EINVAL;
		if (arg->kind == SPEC_ARG_I64)
			v->i64 = arg->i;
		else if (arg->kind == SPEC_ARG_F64)
			v->f64 = arg->f;
		return 0;
	case SPEC_ARG_I32:
	case SPEC_ARG_F32:
		if (size != 4)
			return -EINVAL;
		if (arg->kind == SPEC_ARG_I32)
			v->i32 = (int32_t)arg->i;
		else
			v->f32 = (float)arg->f;
		return 0;
	}
	return -EINVAL;
}

/*
 * Check argument `a` of step `s` of `plan` against the kernel's parameter
 * and store its value.  false (with a verdict; `note` names the size set)
 * when it does not fit.
 */
static bool
bind_arg(struct evaluate *ev, struct evaluate_prog *p, const struct spec_plan *plan, size_t s,
    size_t a, const char *note)
{
	const struct spec_launch *l = &plan->steps[s];
	const struct spec_launch_arg *arg = &l->args[a];
	size_t size = p->param_sizes[s][a], need;
	int r;

	if ((r = bind_value(arg, size, &p->vals[s][a])) == 0)
		return true;
	if (r == -ERANGE) {
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].args[%zu]: "
		    "%lld does not fit kernel '%s''s 4-byte parameter %zu%s", p->path, s, a,
		    (long long)arg->i, l->kernel, a, note);
		return false;
	}
	need = arg->kind == SPEC_ARG_INT ? 0 : arg->kind == SPEC_ARG_I32 ||
	    arg->kind == SPEC_ARG_F32 ? 4 : 8;
	if (need == 0)
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].args[%zu]: kernel "
		    "'%s''s parameter %zu is %zu bytes; an integer expression is passed as 4 or "
		    "8%s", p->path, s, a, l->kernel, a, size, note);
	else
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].args[%zu]: kernel "
		    "'%s''s parameter %zu is %zu bytes; %s needs %zu%s", p->path, s, a, l->kernel,
		    a, size, bind_kind_name(arg->kind), need, note);
	return false;
}

/*
 * Grid, block and shared memory of step s of `plan` against the device and
 * kernel; with `record`, the step's entry in p->kernels (the timed plan's).
 */
static int
bind_limits(struct evaluate *ev, struct evaluate_prog *p, const struct spec_plan *plan, size_t s,
    bool record, const char *note, char **ret_cause)
{
	static const char axis[] = "xyz";
	const struct spec_launch *l = &plan->steps[s];
	CUfunction f = p->fn[s];
	int max_threads, static_shared, max_dynamic, regs, error;
	uint64_t threads;
	CUresult rc;
	size_t d;

	for (d = 0; d < 3; d++) {
		if (l->grid[d] > (uint32_t)nvdev.max_grid[d]) {
			verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].grid[%zu]: "
			    "%u blocks in %c; the device allows at most %d%s", p->path, s, d,
			    l->grid[d], axis[d], nvdev.max_grid[d], note);
			return 0;
		}
		if (l->block[d] > (uint32_t)nvdev.max_block[d]) {
			verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].block[%zu]: "
			    "%u threads in %c; the device allows at most %d%s", p->path, s, d,
			    l->block[d], axis[d], nvdev.max_block[d], note);
			return 0;
		}
	}
	if ((error = bind_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads,
	    ret_cause)) < 0 ||
	    (error = bind_func_attr(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_shared,
	    ret_cause)) < 0 ||
	    (error = bind_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
	    &max_dynamic, ret_cause)) < 0 ||
	    (error = bind_func_attr(f, CU_FUNC_ATTRIBUTE_NUM_REGS, &regs, ret_cause)) < 0)
		return error;
	threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	if (threads > (uint64_t)nvdev.max_threads_per_block || threads > (uint64_t)max_threads) {
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].block: %llu threads "
		    "per block; kernel '%s' can run at most %d (the device %d; the kernel uses %d "
		    "registers per thread)%s", p->path, s, (unsigned long long)threads, l->kernel,
		    max_threads < nvdev.max_threads_per_block ? max_threads :
		    nvdev.max_threads_per_block, nvdev.max_threads_per_block, regs, note);
		return 0;
	}
	if ((uint64_t)static_shared + l->shared_bytes > (uint64_t)nvdev.max_shared_optin) {
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].shared_bytes: kernel "
		    "'%s' would need %llu bytes of shared memory per block (%d static + %u "
		    "dynamic); the device allows at most %d%s", p->path, s, l->kernel,
		    (unsigned long long)static_shared + l->shared_bytes, static_shared,
		    l->shared_bytes, nvdev.max_shared_optin, note);
		return 0;
	}
	/*
	 * Beyond the default 48 KiB a kernel must opt in to dynamic shared
	 * memory.  Only ever raised: the largest size set's need holds for all.
	 */
	if (l->shared_bytes > (uint32_t)max_dynamic &&
	    (rc = nvcu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
	    (int)l->shared_bytes)) != CUDA_SUCCESS) {
		char err[256];

		device_error_text(rc, err, sizeof err);
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].shared_bytes: kernel "
		    "'%s' cannot have %u bytes of dynamic shared memory: %s%s", p->path, s,
		    l->kernel, l->shared_bytes, err, note);
		return 0;
	}
	if (record && json_array_append_new(p->kernels, json_pack("{s:s, s:i, s:i, s:I, "
	    "s:[i,i,i], s:[i,i,i]}", "name", l->kernel, "registers", regs, "static_shared_bytes",
	    static_shared, "dynamic_shared_bytes", (json_int_t)l->shared_bytes,
	    "grid", (int)l->grid[0], (int)l->grid[1], (int)l->grid[2],
	    "block", (int)l->block[0], (int)l->block[1], (int)l->block[2])) < 0)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	return 0;
}

/* Step s of size set k's plan: its arguments, then its limits. */
static int
bind_check_step(struct evaluate *ev, struct evaluate_prog *p, size_t k, size_t s,
    char **ret_cause)
{
	const struct spec_plan *plan = call_plan(ev, p, k);
	char note[192];
	size_t a;

	call_set_note(ev, k, note, sizeof note);
	for (a = 0; a < plan->steps[s].nargs; a++)
		if (!bind_arg(ev, p, plan, s, a, note))
			return 0;
	return bind_limits(ev, p, plan, s, k == 0, note, ret_cause);
}

/* Step s's kernel and its parameters; then its checks for the first size set. */
static int
bind_step(struct evaluate *ev, struct evaluate_prog *p, size_t s, char **ret_cause)
{
	const struct spec_launch *l = &call_plan(ev, p, 0)->steps[s];
	size_t sizes[BIND_MAX_PARAMS], n = 0, a;
	CUresult rc;
	int error;

	rc = nvcu.cuModuleGetFunction(&p->fn[s], p->mod, l->kernel);
	if (rc == CUDA_ERROR_NOT_FOUND) {
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].kernel: the compiled "
		    "%s has no kernel '%s' (kernels must be extern \"C\" __global__)", p->path, s,
		    p->what, l->kernel);
		return 0;
	}
	if (rc != CUDA_SUCCESS)
		return device_fail(rc, ret_cause, "%s.launch[%zu]: kernel '%s'", p->path, s,
		    l->kernel);
	if ((error = bind_params(p->fn[s], sizes, &n, ret_cause)) < 0)
		return error;
	if (n != l->nargs) {
		verdict_record(ev, true, "VALIDATION_ERROR", "%s.launch[%zu].args: kernel '%s' "
		    "takes %s%zu parameter%s; the plan passes %zu", p->path, s, l->kernel,
		    n >= BIND_MAX_PARAMS ? "more than " : "", n >= BIND_MAX_PARAMS ? n - 1 : n,
		    n == 1 ? "" : "s", l->nargs);
		return 0;
	}
	if ((p->vals[s] = calloc(n ? n : 1, sizeof *p->vals[s])) == NULL ||
	    (p->params[s] = calloc(n ? n : 1, sizeof *p->params[s])) == NULL ||
	    (p->param_sizes[s] = calloc(n ? n : 1, sizeof *p->param_sizes[s])) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	memcpy(p->param_sizes[s], sizes, n * sizeof *sizes);
	for (a = 0; a < n; a++)
		p->params[s][a] = &p->vals[s][a];
	return bind_check_step(ev, p, 0, s, ret_cause);
}

int
bind_program(struct evaluate *ev, struct evaluate_prog *p, const unsigned char *cubin,
    char **ret_cause)
{
	size_t n = p->plan->nsteps, s, k;
	char err[256];
	CUresult rc;
	int error;

	p->cubin = cubin;
	if ((rc = nvcu.cuModuleLoadData(&p->mod, cubin)) != CUDA_SUCCESS) {
		p->mod = NULL;
		device_error_text(rc, err, sizeof err);
		/* A cubin from our compile job that does not load: built for
		 * another GPU, or damaged on the way. */
		verdict_record(ev, true, "COMPILATION_ERROR", "the compiled %s does not load on "
		    "%s (%s): %s", p->what, nvdev.name, nvdev.arch, err);
		return 0;
	}
	if ((p->fn = calloc(n, sizeof *p->fn)) == NULL ||
	    (p->vals = calloc(n, sizeof *p->vals)) == NULL ||
	    (p->params = calloc(n, sizeof *p->params)) == NULL ||
	    (p->param_sizes = calloc(n, sizeof *p->param_sizes)) == NULL ||
	    (p->kernels = json_array()) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	for (s = 0; s < n && ev->code == NULL; s++)
		if ((error = bind_step(ev, p, s, ret_cause)) < 0)
			return error;
	/* The other size sets' plans: the same kernels, other numbers. */
	for (k = 1; k < ev->nsets && ev->code == NULL; k++)
		for (s = 0; s < n && ev->code == NULL; s++)
			if ((error = bind_check_step(ev, p, k, s, ret_cause)) < 0)
				return error;
	return 0;
}

void
bind_tensors(struct evaluate *ev, struct evaluate_prog *p)
{
	const struct spec_launch_arg *arg;
	size_t s, a;

	for (s = 0; s < p->plan->nsteps; s++) {
		for (a = 0; a < p->plan->steps[s].nargs; a++) {
			arg = &p->plan->steps[s].args[a];
			if (arg->kind != SPEC_ARG_TENSOR) {
				/* Checked for every size set by bind_program(). */
				(void)bind_value(arg, p->param_sizes[s][a], &p->vals[s][a]);
				continue;
			}
			p->vals[s][a].p = arg->role == SPEC_ROLE_INPUT ? ev->in[arg->index].ptr :
			    arg->role == SPEC_ROLE_OUTPUT ? ev->out[arg->index].ptr :
			    p->scratch[arg->index].ptr;
		}
	}
}

void
bind_outputs(struct evaluate *ev, struct evaluate_prog *p, const struct device_buf *outs)
{
	const struct spec_launch_arg *arg;
	size_t s, a;

	(void)ev;
	for (s = 0; s < p->plan->nsteps; s++)
		for (a = 0; a < p->plan->steps[s].nargs; a++) {
			arg = &p->plan->steps[s].args[a];
			if (arg->kind == SPEC_ARG_TENSOR && arg->role == SPEC_ROLE_OUTPUT)
				p->vals[s][a].p = outs[arg->index].ptr;
		}
}

int
bind_reload(struct evaluate *ev, struct evaluate_prog *p, char **ret_cause)
{
	size_t n = p->plan->nsteps, s, k;
	const struct spec_launch *l;
	CUfunction *fn;
	uint32_t shared;
	CUmodule mod;
	CUresult rc;
	int max_dynamic;

	if ((fn = calloc(n, sizeof *fn)) == NULL)
		return nvrtc_fail(ret_cause, -ENOMEM, "out of memory");
	if ((rc = nvcu.cuModuleLoadData(&mod, p->cubin)) != CUDA_SUCCESS) {
		free(fn);
		return device_fail(rc, ret_cause, "reloading the %s's module", p->what);
	}
	for (s = 0; s < n; s++) {
		l = &p->plan->steps[s];
		if ((rc = nvcu.cuModuleGetFunction(&fn[s], mod, l->kernel)) != CUDA_SUCCESS ||
		    (rc = nvcu.cuFuncGetAttribute(&max_dynamic,
		    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn[s])) != CUDA_SUCCESS)
			goto fail;
		/* bind_limits() opted in for the largest size set's need. */
		for (shared = 0, k = 0; k < ev->nsets; k++)
			if (call_plan(ev, p, k)->steps[s].shared_bytes > shared)
				shared = call_plan(ev, p, k)->steps[s].shared_bytes;
		if (shared > (uint32_t)max_dynamic && (rc = nvcu.cuFuncSetAttribute(fn[s],
		    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared)) != CUDA_SUCCESS)
			goto fail;
	}
	nvcu.cuModuleUnload(p->mod);
	p->mod = mod;
	free(p->fn);
	p->fn = fn;
	p->reloads++;
	return 0;
fail:
	nvcu.cuModuleUnload(mod);
	free(fn);
	return device_fail(rc, ret_cause, "reloading the %s's module", p->what);
}

void
bind_release(struct evaluate_prog *p)
{
	size_t s;

	if (p->plan != NULL && p->vals != NULL)
		for (s = 0; s < p->plan->nsteps; s++)
			free(p->vals[s]);
	if (p->plan != NULL && p->params != NULL)
		for (s = 0; s < p->plan->nsteps; s++)
			free(p->params[s]);
	if (p->plan != NULL && p->param_sizes != NULL)
		for (s = 0; s < p->plan->nsteps; s++)
			free(p->param_sizes[s]);
	free(p->vals);
	free(p->params);
	free(p->param_sizes);
	free(p->fn);
	json_decref(p->kernels);
	if (p->mod != NULL)
		nvcu.cuModuleUnload(p->mod);
	p->vals = NULL;
	p->params = NULL;
	p->param_sizes = NULL;
	p->fn = NULL;
	p->kernels = NULL;
	p->mod = NULL;
}
