/*
 * spec.h -- the native payload (kgymd-protocol(7), "Native tasks") as C structures.
 *
 * spec_parse() reads the "problem" and "solution" members of a JSON object
 * (a task's payload, or the evaluate job's request, which carries the same
 * two members) and validates everything that can be checked without a GPU:
 * names, dtypes, inits, expressions (their syntax, their names, and their
 * values for the problem's sizes: shapes >= 1, tensor sizes within a limit,
 * grid and block >= 1), sources, options (an allowlist), launch plans and
 * their arguments.  What only the device can tell (the kernel exists, its
 * parameter count and sizes, grid/block/shared memory within the device's
 * limits) is checked later by the nvrtc backend on the GPU.
 *
 * spec_evaluate() turns a parsed spec into numbers for one set of size
 * values: each tensor's shape and byte size, each launch step's grid,
 * block, shared memory and argument values, and the device memory a task
 * needs (for admission).
 *
 * Size sets: "sizes" is an object of name: integer, or an array of 1 to
 * SPEC_MAX_SIZE_SETS such objects that all name the same sizes.  Every set
 * is validated and evaluated on its own; the backend's correctness trials
 * cycle through the sets (trial t uses set t % nsets), so a kernel that
 * ignores its size arguments and hard-codes one shape fails, and timing
 * uses the first set alone.  A task asks for the device memory of its
 * most demanding set (spec_device_bytes): one set's tensors exist at a
 * time.
 *
 * No CUDA here: this is linked into the daemon's workflow plugins (parent
 * side, submit-time validation) as well as the nvrtc backend (worker).
 *
 * Errors: functions return 0 or -errno (-EINVAL: the payload is wrong,
 * -ENOMEM) and write a message into the caller's buffer `err` (always
 * NUL-terminated when errlen > 0) that starts with the path of the field at
 * fault, e.g.
 *	solution.launch[1].args[2]: unknown tensor or size 'tmp2'
 *	problem.inputs[0].shape[0]: 'N*': expected a number, a name or '(' at column 3
 *
 * Unknown members inside "problem", "solution" and the objects below them
 * are refused (a misspelt "shared_byte" must not be silently ignored);
 * members of the enclosing object other than "problem" and "solution" are
 * not looked at, so workflows keep their own fields (test cases, settings)
 * beside them.
 *
 * Ownership: spec_parse() returns an owned struct spec freed with
 * spec_free(); spec_evaluate() an owned struct spec_eval freed with
 * spec_eval_free(); both free functions accept NULL.  Everything reachable
 * from these structs belongs to them; pointers into a spec (e.g. a launch's
 * kernel name) are valid while the spec lives.
 */
#ifndef KGYM_NVRTC_SPEC_H
#define KGYM_NVRTC_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "expr.h"

/* Fixed limits of the format (not configurable: they bound parsing work). */
#define SPEC_MAX_DIMS		8	/* dimensions of one tensor */
#define SPEC_MAX_TENSORS	64	/* inputs, outputs, scratch: each list */
#define SPEC_MAX_SIZES		64	/* sizes of one size set */
#define SPEC_MAX_SIZE_SETS	8	/* size sets of a problem ("sizes": [...]) */
#define SPEC_MAX_INITS		16	/* inits of one input */
#define SPEC_MAX_STEPS		64	/* launch steps of one program */
#define SPEC_MAX_ARGS		64	/* arguments of one launch step */
#define SPEC_MAX_OPTIONS	16	/* compiler options of one program */
#define SPEC_MAX_NAME		64	/* tensor, size and problem names */
#define SPEC_MAX_KERNEL_NAME	256	/* kernel names */
#define SPEC_MAX_GRID		2147483647	/* any grid or block dimension */

/* Defaults of struct spec_limits (the caller's config may change them). */
#define SPEC_DEFAULT_MAX_TENSOR_BYTES	(UINT64_C(64) << 30)	/* one tensor */
#define SPEC_DEFAULT_MAX_SOURCE_BYTES	((size_t)1 << 20)	/* one source */

/*
 * device_bytes rounds every allocation up to this, the granularity of the
 * virtual memory API the backend allocates with.
 */
#define SPEC_ALLOC_GRANULARITY		(UINT64_C(2) << 20)

/* Configurable limits; a zero field (or a NULL pointer) means its default. */
struct spec_limits {
	uint64_t max_tensor_bytes;
	size_t max_source_bytes;
};

/* Parse flags. */
#define SPEC_REFERENCE_OPTIONAL	0x1	/* kernel_simple: problem.reference may be absent */

enum spec_dtype {
	SPEC_FLOAT64 = 0,
	SPEC_FLOAT32,
	SPEC_FLOAT16,
	SPEC_BFLOAT16,
	SPEC_INT64,
	SPEC_INT32,
	SPEC_INT16,
	SPEC_INT8,
	SPEC_UINT8,
	SPEC_BOOL,		/* one byte, 0 or 1 */
};
#define SPEC_NDTYPES	10

enum spec_init_kind {
	SPEC_INIT_NORMAL = 0,	/* mean, std (floating dtypes only) */
	SPEC_INIT_UNIFORM,	/* [low, high) (floating dtypes only) */
	SPEC_INIT_RANDINT,	/* integers in [low, high), as torch.randint */
};

/*
 * How an input is filled for a trial.  Defaults when a tensor has no
 * "init": floating dtypes normal(0, 1); signed integers randint[-8, 8);
 * uint8 randint[0, 16); bool randint[0, 2).  randint bounds are integers
 * that fit the dtype.
 */
struct spec_init {
	enum spec_init_kind kind;
	double mean, std;	/* NORMAL */
	double low, high;	/* UNIFORM, RANDINT */
};

struct spec_tensor {
	char *name;
	enum spec_dtype dtype;
	size_t ndim;				/* 0: a scalar (one element) */
	struct expr *shape[SPEC_MAX_DIMS];
	/* Inputs: 1..SPEC_MAX_INITS, trial t uses init[t % ninit].  Others: 0. */
	struct spec_init *init;
	size_t ninit;
	/*
	 * Outputs: the tolerances to compare with, problem.atol/rtol when set,
	 * else the dtype's default (spec_default_tolerance).  Others: 0.
	 */
	double atol, rtol;
};

/* Which list a tensor argument refers to. */
enum spec_role {
	SPEC_ROLE_INPUT = 0,	/* problem.inputs */
	SPEC_ROLE_OUTPUT,	/* problem.outputs */
	SPEC_ROLE_SCRATCH,	/* the program's own scratch */
};

enum spec_arg_kind {
	SPEC_ARG_TENSOR = 0,	/* a device pointer */
	SPEC_ARG_INT,		/* an expression; 4 or 8 bytes as the kernel's parameter is */
	SPEC_ARG_I32,		/* {"i32": n} */
	SPEC_ARG_I64,		/* {"i64": n} */
	SPEC_ARG_F32,		/* {"f32": x} */
	SPEC_ARG_F64,		/* {"f64": x} */
};

struct spec_arg {
	enum spec_arg_kind kind;
	enum spec_role role;	/* TENSOR: which list ... */
	size_t index;		/* ... and which tensor of it */
	struct expr *expr;	/* INT */
	int64_t i;		/* I32, I64 */
	double f;		/* F32 (already rounded to float), F64 */
};

struct spec_step {
	char *kernel;		/* a C identifier; extern "C" in the source */
	struct expr *grid[3];	/* missing trailing dimensions are "1" */
	struct expr *block[3];
	struct expr *shared_bytes;	/* dynamic shared memory; "0" when absent */
	struct spec_arg *args;
	size_t nargs;
};

/* A source and how to launch it: problem.reference or solution. */
struct spec_program {
	char *source;
	size_t source_len;
	char **options;		/* allowlisted NVRTC options, in order */
	size_t noptions;
	struct spec_step *steps;	/* 1..SPEC_MAX_STEPS */
	size_t nsteps;
	struct spec_tensor *scratch;	/* zeroed before every call */
	size_t nscratch;
};

struct spec_problem {
	char *name;			/* "problem" when the payload has none */
	char **size_names;		/* problem.sizes, in the (first set's) payload order */
	/*
	 * nsets * nsizes values: set k's at size_values + k * nsizes, in
	 * size_names' order (spec_size_set()); set 0 first, as before.
	 */
	int64_t *size_values;
	size_t nsizes;
	size_t nsets;			/* 1 (an object, or no sizes) .. SPEC_MAX_SIZE_SETS */
	bool sizes_listed;		/* "sizes" was an array: paths say problem.sizes[k] */
	struct spec_tensor *inputs;
	size_t ninputs;
	struct spec_tensor *outputs;	/* 1..SPEC_MAX_TENSORS */
	size_t noutputs;
	bool has_reference;		/* false only with SPEC_REFERENCE_OPTIONAL */
	struct spec_program reference;	/* zeroed when !has_reference */
	bool has_atol, has_rtol;	/* as given; outputs carry the resolved values */
	double atol, rtol;
};

struct spec {
	struct spec_problem problem;
	struct spec_program solution;
};

/*
 * Parse and validate payload.problem and payload.solution (see the top of
 * this file).  `limits` may be NULL (defaults); `flags` is SPEC_* above.
 * Everything is also evaluated once with each of the problem's size sets,
 * so a spec that parses has a valid spec_evaluate(spec,
 * spec_size_set(spec, k), ...) for every k < problem.nsets.  A set that
 * fails says which: "problem.sizes[1].N: expected an integer, not a
 * string", "problem.sizes[1]: problem.inputs[0].shape[0]: 'N-8' is 0, must
 * be >= 1" (the prefix only when there are several sets).
 * 0, -EINVAL with the field path and reason in err, or -ENOMEM.
 */
int	spec_parse(const json_t *payload, const struct spec_limits *limits, unsigned int flags,
	    struct spec **ret_spec, char *err, size_t errlen);

/* Free a spec; NULL is a no-op. */
void	spec_free(struct spec *spec);

/* One tensor's evaluated shape. */
struct spec_shape {
	size_t ndim;
	int64_t dims[SPEC_MAX_DIMS];	/* each >= 1 */
	uint64_t numel;			/* product of dims (1 for a scalar) */
	uint64_t bytes;			/* numel * dtype size */
};

struct spec_launch_arg {
	enum spec_arg_kind kind;
	enum spec_role role;	/* TENSOR */
	size_t index;		/* TENSOR */
	int64_t i;		/* INT (the expression's value), I32, I64 */
	double f;		/* F32, F64 */
};

struct spec_launch {
	const char *kernel;	/* borrowed from the spec */
	uint32_t grid[3];	/* 1..SPEC_MAX_GRID; device limits are not checked */
	uint32_t block[3];
	uint32_t shared_bytes;
	struct spec_launch_arg *args;
	size_t nargs;
};

/* One program evaluated. */
struct spec_plan {
	struct spec_shape *scratch;	/* as program.scratch */
	size_t nscratch;
	struct spec_launch *steps;	/* as program.steps */
	size_t nsteps;
};

struct spec_eval {
	struct spec_shape *inputs;	/* as problem.inputs */
	size_t ninputs;
	struct spec_shape *outputs;	/* as problem.outputs */
	size_t noutputs;
	struct spec_plan reference;	/* zeroed when the problem has none */
	struct spec_plan solution;
	/*
	 * Device memory a task needs: inputs + outputs twice (the candidate's
	 * and the reference's) + both programs' scratch, each allocation
	 * rounded up to SPEC_ALLOC_GRANULARITY.  No trusted-kernel overhead.
	 */
	uint64_t device_bytes;
};

/*
 * Evaluate every expression of `spec` with `size_values` (problem.nsizes
 * values in the order of problem.size_names, e.g. spec_size_set(); NULL:
 * the problem's first size set).
 * Checks shapes >= 1, tensors within limits->max_tensor_bytes (NULL:
 * default), grid and block 1..SPEC_MAX_GRID, shared_bytes 0..UINT32_MAX,
 * typed and INT args evaluate.  0, -EINVAL with the field path, -ENOMEM.
 */
int	spec_evaluate(const struct spec *spec, const int64_t *size_values,
	    const struct spec_limits *limits, struct spec_eval **ret_eval, char *err,
	    size_t errlen);

/* Free an evaluation; NULL is a no-op. */
void	spec_eval_free(struct spec_eval *ev);

/*
 * Size set k's values (k < problem.nsets), in problem.size_names' order,
 * for spec_evaluate(); NULL when the problem has no sizes.  Borrowed.
 */
const int64_t *spec_size_set(const struct spec *spec, size_t k);

/* Size set k as "N=1048573, M=3" (truncated to fit; "" without sizes). */
void	spec_size_set_text(const struct spec *spec, size_t k, char *buf, size_t len);

/*
 * The device memory a task needs (for admission): the largest
 * spec_eval.device_bytes of its size sets, since one set's tensors exist
 * at a time.  0, -EINVAL with the path (as spec_parse()), -ENOMEM.
 */
int	spec_device_bytes(const struct spec *spec, const struct spec_limits *limits,
	    uint64_t *ret_bytes, char *err, size_t errlen);

/* The tensor an argument (or launch argument) refers to, within `program`. */
const struct spec_tensor *spec_tensor_of(const struct spec *spec,
	    const struct spec_program *program, enum spec_role role, size_t index);

/* "float32", ...; "?" for a value out of range. */
const char *spec_dtype_name(enum spec_dtype dtype);
/* Bytes per element (bool: 1). */
size_t	spec_dtype_size(enum spec_dtype dtype);
/* float64/32/16, bfloat16. */
bool	spec_dtype_is_float(enum spec_dtype dtype);
/* The dtype called `name`: 0 or -EINVAL. */
int	spec_dtype_parse(const char *name, enum spec_dtype *ret_dtype);
/*
 * Default tolerances (kgymd-protocol(7), RESULTS): float32 1e-4,
 * float16/bfloat16 1e-2, float64 1e-8, others 0 (exact).
 */
void	spec_default_tolerance(enum spec_dtype dtype, double *ret_atol, double *ret_rtol);

/* "input", "output", "scratch". */
const char *spec_role_name(enum spec_role role);

/*
 * `option` is one an untrusted program may pass to NVRTC: --use_fast_math,
 * -use_fast_math, --maxrregcount=N (16..255), --extra-device-vectorization,
 * -lineinfo, --ftz=, --prec-div=, --prec-sqrt=, --fmad= (each true|false).
 * Nothing that names a file, a macro or the target.  Inline so that the
 * compile worker (compile.c) checks again without linking the parser.
 */
static inline bool
spec_option_allowed(const char *option)
{
	static const char *const exact[] = {
		"--use_fast_math", "-use_fast_math", "--extra-device-vectorization",
		"-lineinfo", "--ftz=true", "--ftz=false", "--prec-div=true",
		"--prec-div=false", "--prec-sqrt=true", "--prec-sqrt=false",
		"--fmad=true", "--fmad=false",
	};
	static const char rreg[] = "--maxrregcount=";
	const char *p;
	int n = 0;
	size_t i;

	for (i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(option, exact[i]) == 0)
			return true;
	if (strncmp(option, rreg, sizeof(rreg) - 1) != 0)
		return false;
	p = option + sizeof(rreg) - 1;
	/* Three digits at most, no sign, no leading zero: "16".."255". */
	if (*p < '1' || *p > '9')
		return false;
	for (i = 0; p[i] != '\0'; i++) {
		if (i == 3 || p[i] < '0' || p[i] > '9')
			return false;
		n = n * 10 + (p[i] - '0');
	}
	return n >= 16 && n <= 255;
}

#endif /* KGYM_NVRTC_SPEC_H */
