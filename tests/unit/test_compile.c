/*
 * test_compile.c -- unit tests of the nvrtc backend's compile step
 * (plugins/nvrtc/compile.c).  NVRTC needs no GPU, so these run wherever the
 * CUDA toolkit is: cubins come out as ELF, compile errors come back with a
 * log naming the line, the standard headers resolve, the cache hits and
 * misses when it should and survives damaged files, and the JSON job does
 * what nvrtc_internal.h's compile_job() says.  Prints compile times (cold
 * process, warm process, cache hit).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "nvrtc_internal.h"

#define ARCH	"sm_90"

static const char vector_add[] =
    "extern \"C\" __global__ void add(const float *x, const float *y, float *o, int n)\n"
    "{\n"
    "\tint i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "\tif (i < n)\n"
    "\t\to[i] = x[i] + y[i];\n"
    "}\n";

static char cache_dir[] = "/tmp/kgym-test-compile-XXXXXX";

static int
make_cache(void **state)
{
	(void)state;
	return mkdtemp(cache_dir) == NULL ? -1 : 0;
}

static int
remove_cache(void **state)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	(void)state;
	if ((d = opendir(cache_dir)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' && (de->d_name[1] == '\0' ||
		    (de->d_name[1] == '.' && de->d_name[2] == '\0')))
			continue;
		snprintf(path, sizeof(path), "%s/%s", cache_dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(cache_dir);
	return 0;
}

/* Compile asserting a verdict (ok or not) was reached. */
static void
compile(const char *source, const char *const *options, size_t noptions, const char *arch,
    const char *cache, struct compile_output *out)
{
	struct compile_input in = {
		.name = "solution",
		.source = source,
		.options = options,
		.noptions = noptions,
		.arch = arch,
		.cache_dir = cache,
	};
	char *cause = NULL;
	int r;

	r = compile_source(&in, out, &cause);
	if (r != 0)
		fail_msg("compile_source: %d %s", r, cause != NULL ? cause : "");
}

static void
assert_cubin(const struct compile_output *out)
{
	if (!out->ok)
		fail_msg("did not compile: %s", out->log != NULL ? out->log : "(no log)");
	assert_non_null(out->cubin);
	assert_true(out->cubin_size > 64);
	assert_memory_equal(out->cubin, "\177ELF", 4);
	assert_int_equal(out->cubin[4], 2);	/* ELFCLASS64 */
}

static void
test_vector_add(void **state)
{
	struct compile_output out;

	(void)state;
	compile(vector_add, NULL, 0, ARCH, NULL, &out);
	assert_cubin(&out);
	assert_false(out.cache_hit);
	assert_non_null(out.log);
	assert_true(out.compile_ms > 0);
	/* The kernel's name is in the symbol table, unmangled (extern "C"). */
	assert_non_null(memmem(out.cubin, out.cubin_size, "add", 4));
	compile_output_clear(&out);
	compile_output_clear(&out);	/* a cleared struct is a no-op */
}

static void
test_compile_error(void **state)
{
	static const char broken[] =
	    "extern \"C\" __global__ void add(float *o)\n"
	    "{\n"
	    "\to[0] = 1.0f\n"	/* line 3: no ';' */
	    "}\n";
	static const char undeclared[] =
	    "extern \"C\" __global__ void add(float *o)\n"
	    "{\n"
	    "\to[0] = missing_variable;\n"
	    "}\n";
	struct compile_output out;

	(void)state;
	compile(broken, NULL, 0, ARCH, cache_dir, &out);
	assert_false(out.ok);
	assert_null(out.cubin);
	assert_non_null(out.log);
	/* NVRTC says "<name>(<line>): error: ...": the line is what a model needs. */
	if (strstr(out.log, "solution(4): error") == NULL &&
	    strstr(out.log, "solution(3): error") == NULL)
		fail_msg("log does not name the line: %s", out.log);
	compile_output_clear(&out);

	compile(undeclared, NULL, 0, ARCH, cache_dir, &out);
	assert_false(out.ok);
	assert_non_null(strstr(out.log, "solution(3): error"));
	assert_non_null(strstr(out.log, "missing_variable"));
	compile_output_clear(&out);

	/* A failed compile is not cached: the same source fails again, no hit. */
	compile(undeclared, NULL, 0, ARCH, cache_dir, &out);
	assert_false(out.ok);
	assert_false(out.cache_hit);
	compile_output_clear(&out);
}

static void
test_headers(void **state)
{
	static const char *const sources[] = {
	    "#include <cuda_fp16.h>\n"
	    "extern \"C\" __global__ void k(__half *o, const __half *a)\n"
	    "{ o[threadIdx.x] = __hadd(a[threadIdx.x], __float2half(1.0f)); }\n",

	    "#include <cuda_bf16.h>\n"
	    "extern \"C\" __global__ void k(__nv_bfloat16 *o, const __nv_bfloat16 *a)\n"
	    "{ o[threadIdx.x] = __hmul(a[threadIdx.x], a[threadIdx.x]); }\n",

	    "#include <cooperative_groups.h>\n"
	    "#include <cooperative_groups/reduce.h>\n"
	    "namespace cg = cooperative_groups;\n"
	    "extern \"C\" __global__ void k(float *o, const float *a)\n"
	    "{ cg::thread_block_tile<32> t = cg::tiled_partition<32>(cg::this_thread_block());\n"
	    "  o[threadIdx.x] = cg::reduce(t, a[threadIdx.x], cg::plus<float>()); }\n",

	    "#include <mma.h>\n"
	    "using namespace nvcuda;\n"
	    "extern \"C\" __global__ void k(const half *a, const half *b, float *c)\n"
	    "{ wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;\n"
	    "  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;\n"
	    "  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;\n"
	    "  wmma::fill_fragment(fc, 0.0f);\n"
	    "  wmma::load_matrix_sync(fa, a, 16); wmma::load_matrix_sync(fb, b, 16);\n"
	    "  wmma::mma_sync(fc, fa, fb, fc);\n"
	    "  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major); }\n",

	    "#include <cuda/std/cstdint>\n"
	    "#include <cuda/std/limits>\n"
	    "#include <cuda/std/type_traits>\n"
	    "extern \"C\" __global__ void k(cuda::std::int64_t *o)\n"
	    "{ static_assert(cuda::std::is_same<cuda::std::int64_t, long long>::value ||\n"
	    "      sizeof(cuda::std::int64_t) == 8, \"\");\n"
	    "  o[0] = cuda::std::numeric_limits<cuda::std::int32_t>::max(); }\n",

	    "#include <cuda/atomic>\n"
	    "extern \"C\" __global__ void k(int *o)\n"
	    "{ cuda::atomic_ref<int, cuda::thread_scope_device> r(*o); r.fetch_add(1); }\n",
	};
	struct compile_output out;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
		compile(sources[i], NULL, 0, ARCH, NULL, &out);
		if (!out.ok)
			fail_msg("source %zu did not compile:\n%s\n%s", i, sources[i], out.log);
		assert_cubin(&out);
		compile_output_clear(&out);
	}
}

static void
test_options(void **state)
{
	static const char *const opts[] = { "--use_fast_math", "--maxrregcount=32",
		"-lineinfo", "--ftz=true", "--prec-div=false", "--extra-device-vectorization" };
	struct compile_output out;

	(void)state;
	compile(vector_add, opts, sizeof(opts) / sizeof(opts[0]), ARCH, NULL, &out);
	assert_cubin(&out);
	compile_output_clear(&out);
}

static void
test_bad_arch(void **state)
{
	static const char *const bad[] = { "sm90", "sm_9", "compute_90", "sm_90x", "sm_0900",
		"", "sm_1000", "sm_09" };
	struct compile_input in = { .source = vector_add };
	struct compile_output out;
	char *cause = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		in.arch = bad[i];
		assert_int_equal(compile_source(&in, &out, &cause), -EINVAL);
		assert_non_null(cause);
		assert_non_null(strstr(cause, "is not an architecture"));
		free(cause);
		cause = NULL;
	}
	/* Well-formed but unknown to NVRTC: NVRTC refuses, we say so. */
	in.arch = "sm_10";
	assert_int_equal(compile_source(&in, &out, &cause), -EINVAL);
	assert_non_null(cause);
	assert_non_null(strstr(cause, "NVRTC refused the options"));
	free(cause);
	/* An arch suffix NVRTC 13 knows. */
	compile(vector_add, NULL, 0, "sm_90a", NULL, &out);
	assert_cubin(&out);
	compile_output_clear(&out);
}

static size_t
count_files(void)
{
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	assert_non_null(d = opendir(cache_dir));
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
		else if (strncmp(de->d_name, ".tmp-", 5) == 0)
			fail_msg("temporary file left behind: %s", de->d_name);
	closedir(d);
	return n;
}

/* The one .cubin file whose name is 64 hex digits, as a path. */
static void
only_cubin(char *path, size_t len)
{
	struct dirent *de;
	DIR *d;
	size_t i;

	assert_non_null(d = opendir(cache_dir));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		assert_int_equal(strlen(de->d_name), 64 + strlen(".cubin"));
		for (i = 0; i < 64; i++)
			assert_non_null(strchr("0123456789abcdef", de->d_name[i]));
		assert_string_equal(de->d_name + 64, ".cubin");
		snprintf(path, len, "%s/%s", cache_dir, de->d_name);
	}
	closedir(d);
}

static void
test_cache(void **state)
{
	static const char *const fast[] = { "--use_fast_math" };
	static const char *const fast2[] = { "--use_fast_math", "-lineinfo" };
	static const char *const fast2r[] = { "-lineinfo", "--use_fast_math" };
	struct compile_output a, b;
	size_t n0;

	(void)state;
	remove_cache(NULL);
	strcpy(cache_dir + strlen(cache_dir) - 6, "XXXXXX");
	assert_non_null(mkdtemp(cache_dir));

	compile(vector_add, fast, 1, ARCH, cache_dir, &a);
	assert_cubin(&a);
	assert_false(a.cache_hit);
	assert_int_equal(count_files(), 1);

	/* Same input: a hit, the same bytes. */
	compile(vector_add, fast, 1, ARCH, cache_dir, &b);
	assert_true(b.cache_hit);
	assert_true(b.ok);
	assert_int_equal(b.cubin_size, a.cubin_size);
	assert_memory_equal(b.cubin, a.cubin, a.cubin_size);
	compile_output_clear(&b);
	assert_int_equal(count_files(), 1);

	/* No option, another option, options in another order, another arch, another
	 * source: each a miss and a new entry. */
	n0 = count_files();
	compile(vector_add, NULL, 0, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	compile(vector_add, fast2, 2, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	compile(vector_add, fast2r, 2, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	compile(vector_add, fast, 1, "sm_80", cache_dir, &b);
	assert_cubin(&b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	compile("// another\n" "extern \"C\" __global__ void add(float *o) { o[0] = 1; }\n",
	    fast, 1, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	assert_int_equal(count_files(), n0 + 5);
	/* ... and each of them hits the second time. */
	compile(vector_add, fast, 1, "sm_80", cache_dir, &b);
	assert_true(b.cache_hit);
	compile_output_clear(&b);
	compile(vector_add, fast2r, 2, ARCH, cache_dir, &b);
	assert_true(b.cache_hit);
	compile_output_clear(&b);
	compile_output_clear(&a);
}

static void
test_cache_damaged(void **state)
{
	static const char *const fast[] = { "--use_fast_math" };
	struct compile_output a, b;
	char path[600];
	struct stat st;
	unsigned char byte;
	int fd;

	(void)state;
	remove_cache(NULL);
	strcpy(cache_dir + strlen(cache_dir) - 6, "XXXXXX");
	assert_non_null(mkdtemp(cache_dir));
	compile(vector_add, fast, 1, ARCH, cache_dir, &a);
	assert_cubin(&a);
	only_cubin(path, sizeof(path));
	assert_int_equal(stat(path, &st), 0);
	/* The file is the cubin and its SHA-256. */
	assert_int_equal((size_t)st.st_size, a.cubin_size + 32);

	/* Truncated: ignored, recompiled, rewritten whole. */
	assert_int_equal(truncate(path, st.st_size / 2), 0);
	compile(vector_add, fast, 1, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	assert_cubin(&b);
	compile_output_clear(&b);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((size_t)st.st_size, a.cubin_size + 32);
	compile(vector_add, fast, 1, ARCH, cache_dir, &b);
	assert_true(b.cache_hit);
	compile_output_clear(&b);

	/* One flipped byte in the middle: the digest catches it. */
	assert_true((fd = open(path, O_RDWR)) >= 0);
	assert_int_equal(pread(fd, &byte, 1, st.st_size / 2), 1);
	byte ^= 0x40;
	assert_int_equal(pwrite(fd, &byte, 1, st.st_size / 2), 1);
	close(fd);
	compile(vector_add, fast, 1, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	assert_memory_equal(b.cubin, a.cubin, a.cubin_size);
	compile_output_clear(&b);

	/* Empty file, and a file that is not even ELF. */
	assert_int_equal(truncate(path, 0), 0);
	compile(vector_add, fast, 1, ARCH, cache_dir, &b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	compile(vector_add, fast, 1, ARCH, cache_dir, &b);
	assert_true(b.cache_hit);
	compile_output_clear(&b);

	/* An unwritable cache only costs the hit. */
	compile(vector_add, fast, 1, ARCH, "/proc/kgym-no-such-dir", &b);
	assert_cubin(&b);
	assert_false(b.cache_hit);
	compile_output_clear(&b);
	compile_output_clear(&a);
}

static void
test_long_log(void **state)
{
	struct compile_output out;
	char *src, *p;
	int i;

	(void)state;
	/* 1500 warnings make a log of about 170 KB; the head is kept. */
	assert_non_null(src = malloc(1500 * 100 + sizeof(vector_add)));
	p = src;
	for (i = 0; i < 1500; i++)
		p += sprintf(p, "#warning warning number %d, padded to make the log long\n", i);
	strcpy(p, vector_add);
	compile(src, NULL, 0, ARCH, NULL, &out);
	assert_cubin(&out);
	assert_true(strlen(out.log) <= COMPILE_MAX_LOG + 64);
	assert_non_null(strstr(out.log, "warning number 0,"));
	assert_null(strstr(out.log, "warning number 1499,"));
	assert_non_null(strstr(out.log, "\n[log trimmed: "));
	assert_non_null(strstr(out.log, " bytes in all]\n"));
	compile_output_clear(&out);
	free(src);
}


/* --- the compile sandbox and the log filter --- */

/* A file outside the CUDA headers holding a secret, as the config or the
 * task store would: a number (so a source can make it a template argument)
 * and a word. */
static char secret_dir[] = "/tmp/kgym-test-secret-XXXXXX";
static char secret_path[600];
#define SECRET_NUMBER	"918273645"
#define SECRET_WORD	"kgymsecretword"

static void
make_secret(void)
{
	FILE *f;

	if (secret_path[0] != '\0')
		return;
	assert_non_null(mkdtemp(secret_dir));
	snprintf(secret_path, sizeof secret_path, "%s/secret.conf", secret_dir);
	assert_non_null(f = fopen(secret_path, "w"));
	fputs(SECRET_NUMBER "\n", f);
	fclose(f);
}

static void
compile_with(const char *source, bool unconfined, struct compile_output *out)
{
	struct compile_input in = {
		.name = "solution",
		.source = source,
		.arch = ARCH,
		.unconfined = unconfined,
	};
	char *cause = NULL;
	int r;

	if ((r = compile_source(&in, out, &cause)) != 0)
		fail_msg("compile_source: %d %s", r, cause != NULL ? cause : "");
}

/* No byte of `file` (each of its lines of 4 bytes or more) is in `text`. */
static void
assert_no_bytes_of(const char *text, const char *file)
{
	char line[4096];
	size_t n;
	FILE *f;

	if ((f = fopen(file, "r")) == NULL)
		return;		/* not on this machine */
	while (fgets(line, sizeof line, f) != NULL) {
		n = strcspn(line, "\n");
		line[n] = '\0';
		if (n >= 4 && strstr(text, line) != NULL)
			fail_msg("the log quotes %s: '%s' in:\n%s", file, line, text);
	}
	fclose(f);
}

static void
test_confined_includes(void **state)
{
	static const char *const files[] = { "/etc/passwd", "/proc/self/environ", "/etc/hostname",
	    "/proc/self/cmdline" };
	char src[1024];
	struct compile_output out;
	size_t i;

	(void)state;
	make_secret();
	for (i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(src, sizeof src, "#include \"%s\"\n%s", files[i], vector_add);
		compile_with(src, false, &out);
		assert_false(out.ok);
		/* It did not open: NVRTC says so on the candidate's own line. */
		if (strstr(out.log, "solution(1): catastrophic error: cannot open source file") ==
		    NULL)
			fail_msg("%s: %s", files[i], out.log);
		assert_no_bytes_of(out.log, files[i]);
		compile_output_clear(&out);
	}
	/* The value of a file, through a message about the candidate's own line. */
	snprintf(src, sizeof src, "template <int N> struct S;\nstatic const int x =\n"
	    "#include \"%s\"\n;\nS<x> s;\n%s", secret_path, vector_add);
	compile_with(src, false, &out);
	assert_false(out.ok);
	assert_null(strstr(out.log, SECRET_NUMBER));
	assert_non_null(strstr(out.log, "cannot open source file"));
	compile_output_clear(&out);
}

/*
 * The same source unconfined: the secret comes back, inside a diagnostic
 * of the candidate's own line, which no log filter may drop.  This is why
 * the file must not open at all (and shows the test above can fail).
 */
static void
test_unconfined_leaks(void **state)
{
	char src[1024];
	struct compile_output out;

	(void)state;
	make_secret();
	snprintf(src, sizeof src, "template <int N> struct S;\nstatic const int x =\n"
	    "#include \"%s\"\n;\nS<x> s;\n%s", secret_path, vector_add);
	compile_with(src, true, &out);
	assert_false(out.ok);
	assert_non_null(strstr(out.log, "S<" SECRET_NUMBER ">"));
	compile_output_clear(&out);
	/* A diagnostic inside the other file is not quoted even unconfined. */
	snprintf(src, sizeof src, "#include \"/etc/passwd\"\n%s", vector_add);
	compile_with(src, true, &out);
	assert_false(out.ok);
	assert_no_bytes_of(out.log, "/etc/passwd");
	assert_non_null(strstr(out.log, "located in a file other than solution, not shown"));
	compile_output_clear(&out);
	unlink(secret_path);
	rmdir(secret_dir);
}

/* The job's scratch directory is readable in the confined thread; its
 * neighbours are not. */
static void
test_confined_scratch(void **state)
{
	char dir[] = "/tmp/kgym-test-scratch-XXXXXX", path[600], src[1024];
	struct compile_input in = { .name = "solution", .arch = ARCH };
	struct compile_output out;
	char *cause = NULL;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/mine.h", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("#define MINE 1\n", f);
	fclose(f);
	snprintf(src, sizeof src, "#include \"%s\"\n%s", path, vector_add);
	in.source = src;
	in.scratch_dir = dir;
	assert_int_equal(compile_source(&in, &out, &cause), 0);
	assert_cubin(&out);
	compile_output_clear(&out);
	in.scratch_dir = NULL;
	assert_int_equal(compile_source(&in, &out, &cause), 0);
	assert_false(out.ok);
	assert_non_null(strstr(out.log, "cannot open source file"));
	compile_output_clear(&out);
	unlink(path);
	rmdir(dir);
}

static void
filter_is(const char *log, const char *want)
{
	char *got = compile_log_filter(log, strlen(log), "solution");

	assert_non_null(got);
	if (strcmp(got, want) != 0)
		fail_msg("filtered:\n%s\nwanted:\n%s", got, want);
	free(got);
}

static void
test_log_filter(void **state)
{
	(void)state;
	/* Why an include failed is cut: it would tell which host paths exist. */
	filter_is("solution(1): catastrophic error: cannot open source file \"/etc/shadow\": "
	    "Permission denied\n",
	    "solution(1): catastrophic error: cannot open source file \"/etc/shadow\"\n");
	filter_is("solution(1): catastrophic error: cannot open source file \"/etc/no_such\"\n",
	    "solution(1): catastrophic error: cannot open source file \"/etc/no_such\"\n");
	/* The candidate's own diagnostics, as they are. */
	filter_is("solution(3): error: identifier \"x\" is undefined\n"
	    "  o[0] = x;\n"
	    "         ^\n"
	    "\n"
	    "1 error detected in the compilation of \"solution\".\n",
	    "solution(3): error: identifier \"x\" is undefined\n"
	    "  o[0] = x;\n"
	    "         ^\n"
	    "\n"
	    "1 error detected in the compilation of \"solution\".\n");
	/* Another file's diagnostics (and their quoted lines) become one line. */
	filter_is("/etc/passwd(1): error: this declaration has no storage class\n"
	    "  root:x:0:0:root:/root:/bin/bash\n"
	    "  ^\n"
	    "\n"
	    "/etc/passwd(1): error: expected a \";\"\n"
	    "  root:x:0:0:root:/root:/bin/bash\n"
	    "      ^\n"
	    "\n"
	    "2 errors detected in the compilation of \"solution\".\n",
	    "[2 diagnostics located in a file other than solution, not shown]\n"
	    "2 errors detected in the compilation of \"solution\".\n");
	/* Reached from the candidate's line; "at line N of FILE" of a kept one. */
	filter_is("/usr/local/cuda/include/cccl/cuda/std/comp.h(52): error: no operator\n"
	    "      noexcept(noexcept(__lhs < __rhs))\n"
	    "          detected during:\n"
	    "            instantiation of \"f\" at line 36 of /usr/local/cuda/include/x.h\n"
	    "            instantiation of \"g\" at line 3 of solution\n"
	    "\n"
	    "solution(7): error: bad\n"
	    "  S<x> s;\n"
	    "          detected during instantiation of \"h\" at line 9 of /opt/secret.h\n"
	    "\n"
	    "1 error detected in the compilation of \"solution\".\n",
	    "[1 diagnostic located in a file other than solution, not shown; reached from "
	    "solution(3)]\n"
	    "solution(7): error: bad\n"
	    "  S<x> s;\n"
	    "          detected during instantiation of \"h\" at line 9 of an included file\n"
	    "\n"
	    "1 error detected in the compilation of \"solution\".\n");
	/* Lines of no known form, and another program's summary, are dropped. */
	filter_is("root:x:0:0:root:/root:/bin/bash\n"
	    "1 error detected in the compilation of \"/etc/passwd\".\n"
	    "Compilation terminated.\n",
	    "Compilation terminated.\n"
	    "[2 other lines of the log not shown]\n");
	/* A name that only starts like the candidate's is another file. */
	filter_is("solution.h(2): error: x\n  secret\n", "[1 diagnostic located in a file other "
	    "than solution, not shown]\n");
	filter_is("", "");
}

static json_t *
load(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	if (j == NULL)
		fail_msg("bad JSON in test: %s", jerr.text);
	return j;
}

static void
test_job(void **state)
{
	json_t *req, *res = NULL, *u;
	unsigned char *cubin;
	const char *key;
	char first_key[65];
	size_t len;
	char *cause = NULL, text[4096], *src;
	json_t *jsrc;
	int r;

	(void)state;
	jsrc = json_string(vector_add);
	src = json_dumps(jsrc, JSON_ENCODE_ANY);
	json_decref(jsrc);
	snprintf(text, sizeof(text), "{\"op\": \"compile\", \"arch\": \"sm_90\", \"cache_dir\": "
	    "\"%s\", \"units\": [{\"name\": \"reference\", \"source\": %s, \"options\": []},"
	    " {\"name\": \"solution\", \"source\": \"extern \\\"C\\\" __global__ void k() "
	    "{ nope; }\", \"options\": [\"--use_fast_math\"]}]}", cache_dir, src);
	free(src);
	req = load(text);
	r = compile_job(req, &res, &cause);
	if (r != 0)
		fail_msg("compile_job: %d %s", r, cause);
	assert_string_equal(json_string_value(json_object_get(res, "status")), "completed");
	assert_string_equal(json_string_value(json_object_get(res, "arch")), "sm_90");
	assert_non_null(json_string_value(json_object_get(res, "nvrtc_version")));
	assert_int_equal(json_array_size(json_object_get(res, "units")), 2);

	u = json_array_get(json_object_get(res, "units"), 0);
	assert_string_equal(json_string_value(json_object_get(u, "name")), "reference");
	assert_true(json_is_true(json_object_get(u, "ok")));
	assert_true(json_is_boolean(json_object_get(u, "cache_hit")));
	assert_true(json_is_number(json_object_get(u, "compile_ms")));
	assert_true(json_is_array(json_object_get(u, "kernels")));
	assert_true(json_is_string(json_object_get(u, "log")));
	/* In the cache, which the evaluate worker reads: the key, not the bytes. */
	assert_null(json_object_get(u, "cubin_b64"));
	key = json_string_value(json_object_get(u, "cubin_key"));
	assert_non_null(key);
	assert_int_equal(strlen(key), 64);
	if (compile_cache_load(cache_dir, key, &cubin, &len, &cause) != 0)
		fail_msg("compile_cache_load: %s", cause);
	assert_true(len > 64);
	assert_memory_equal(cubin, "\177ELF", 4);
	free(cubin);
	snprintf(first_key, sizeof first_key, "%s", key);

	u = json_array_get(json_object_get(res, "units"), 1);
	assert_string_equal(json_string_value(json_object_get(u, "name")), "solution");
	assert_true(json_is_false(json_object_get(u, "ok")));
	assert_null(json_object_get(u, "cubin_b64"));
	assert_non_null(strstr(json_string_value(json_object_get(u, "log")), "nope"));
	json_decref(res);

	/* The second time the reference is a cache hit. */
	res = NULL;
	assert_int_equal(compile_job(req, &res, &cause), 0);
	u = json_array_get(json_object_get(res, "units"), 0);
	assert_true(json_is_true(json_object_get(u, "cache_hit")));
	assert_string_equal(json_string_value(json_object_get(u, "cubin_key")), first_key);
	json_decref(res);

	/* No cache: the cubin travels by value. */
	json_object_del(req, "cache_dir");
	res = NULL;
	assert_int_equal(compile_job(req, &res, &cause), 0);
	u = json_array_get(json_object_get(res, "units"), 0);
	assert_null(json_object_get(u, "cubin_key"));
	assert_int_equal(compile_b64_decode(json_string_value(json_object_get(u, "cubin_b64")),
	    &cubin, &len), 0);
	assert_memory_equal(cubin, "\177ELF", 4);
	free(cubin);
	json_decref(res);
	json_decref(req);
}

/* Malformed requests: -EINVAL, a cause, no result. */
static void
bad_job(const char *text, const char *cause_part)
{
	json_t *req = load(text), *res = NULL;
	char *cause = NULL;

	assert_int_equal(compile_job(req, &res, &cause), -EINVAL);
	assert_null(res);
	assert_non_null(cause);
	if (strstr(cause, cause_part) == NULL)
		fail_msg("cause '%s' lacks '%s'", cause, cause_part);
	free(cause);
	json_decref(req);
}

static void
test_job_errors(void **state)
{
	(void)state;
	/* The allowlist is enforced in the worker too. */
	bad_job("{\"arch\": \"sm_90\", \"units\": [{\"name\": \"s\", \"source\": \"x\", "
	    "\"options\": [\"--use_fast_math\", \"-I/etc\"]}]}",
	    "units[0].options[1]: not an allowed option");
	bad_job("{\"arch\": \"sm_90\", \"units\": [{\"name\": \"s\", \"source\": \"x\", "
	    "\"options\": [\"--pre-include=/etc/passwd\"]}]}",
	    "units[0].options[0]: not an allowed option");
	bad_job("{\"arch\": \"sm_90\", \"units\": [{\"name\": \"s\", \"source\": \"x\", "
	    "\"options\": [\"--maxrregcount=300\"]}]}", "not an allowed option");
	bad_job("{\"units\": []}", "\"arch\" (a string) is missing");
	bad_job("{\"arch\": \"sm90\", \"units\": [{\"name\": \"s\", \"source\": \"x\"}]}",
	    "'sm90' is not an architecture");
	bad_job("{\"arch\": \"sm_90\", \"units\": []}", "\"units\" must be an array of 1 to 8");
	bad_job("{\"arch\": \"sm_90\", \"cache_dir\": \"relative/dir\", \"units\": "
	    "[{\"name\": \"s\", \"source\": \"x\"}]}", "cache_dir: expected an absolute path");
	bad_job("{\"arch\": \"sm_90\", \"include_dir\": 3, \"units\": "
	    "[{\"name\": \"s\", \"source\": \"x\"}]}", "include_dir: expected an absolute path");
	bad_job("{\"arch\": \"sm_90\", \"units\": [{\"name\": \"s\", \"source\": \"\"}]}",
	    "units[0]: expected");
	bad_job("{\"arch\": \"sm_90\", \"units\": [{\"source\": \"x\"}]}", "units[0]: expected");
	bad_job("{\"arch\": \"sm_90\", \"units\": [{\"name\": \"s\", \"source\": \"x\", "
	    "\"options\": \"--use_fast_math\"}]}", "units[0].options: expected an array");
}

static void
test_base64(void **state)
{
	static const unsigned char data[] = { 0x00, 0xff, 0x10, 0x7f, 0x80, 0x41, 0x42 };
	unsigned char *dec;
	size_t len, n;
	char *enc;

	(void)state;
	for (n = 0; n <= sizeof(data); n++) {
		assert_non_null(enc = compile_b64_encode(data, n));
		assert_int_equal(strlen(enc), (n + 2) / 3 * 4);
		assert_int_equal(compile_b64_decode(enc, &dec, &len), 0);
		assert_int_equal(len, n);
		assert_memory_equal(dec, data, n);
		free(dec);
		free(enc);
	}
	assert_non_null(enc = compile_b64_encode("hello", 5));
	assert_string_equal(enc, "aGVsbG8=");
	free(enc);
	assert_int_equal(compile_b64_decode("aGVsbG8", &dec, &len), -EINVAL);
	assert_int_equal(compile_b64_decode("aGV*bG8=", &dec, &len), -EINVAL);
	assert_int_equal(compile_b64_decode("aGVsbG8=", &dec, &len), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(dec, "hello", 5);
	free(dec);
}

static void
test_warm_up_and_times(void **state)
{
	static const char small[] =
	    "extern \"C\" __global__ void scale(float *o, const float *a, float s, int n)\n"
	    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = a[i] * s; }\n";
	struct compile_output out;
	char *cause = NULL;
	double miss = 0, hit = 0;
	int i;

	(void)state;
	assert_int_equal(compile_warm_up(ARCH, &cause), 0);
	assert_int_equal(compile_warm_up("sm_1", &cause), -EINVAL);
	free(cause);
	/* Warm process, cold cache; then the cache hit.  Three of each, best. */
	for (i = 0; i < 3; i++) {
		char src[sizeof(small) + 32];

		snprintf(src, sizeof(src), "// %d %ld\n%s", i, (long)getpid(), small);
		compile(src, NULL, 0, ARCH, cache_dir, &out);
		assert_false(out.cache_hit);
		if (miss == 0 || out.compile_ms < miss)
			miss = out.compile_ms;
		compile_output_clear(&out);
		compile(src, NULL, 0, ARCH, cache_dir, &out);
		assert_true(out.cache_hit);
		if (hit == 0 || out.compile_ms < hit)
			hit = out.compile_ms;
		compile_output_clear(&out);
	}
	printf("# NVRTC %s, %s: small kernel compile %.1f ms (cache miss), %.3f ms (cache hit)\n",
	    compile_nvrtc_version(), ARCH, miss, hit);
	assert_true(hit < miss);
}

/* Runs first, in a fresh process: the first compile loads NVRTC's builtins. */
static void
test_first_compile_time(void **state)
{
	struct compile_output out;

	(void)state;
	compile(vector_add, NULL, 0, ARCH, NULL, &out);
	assert_cubin(&out);
	printf("# NVRTC %s, %s: first compile in this process %.1f ms\n",
	    compile_nvrtc_version(), ARCH, out.compile_ms);
	compile_output_clear(&out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_compile_time),
		cmocka_unit_test(test_vector_add),
		cmocka_unit_test(test_compile_error),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_bad_arch),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_cache_damaged),
		cmocka_unit_test(test_long_log),
		cmocka_unit_test(test_confined_includes),
		cmocka_unit_test(test_unconfined_leaks),
		cmocka_unit_test(test_confined_scratch),
		cmocka_unit_test(test_log_filter),
		cmocka_unit_test(test_job),
		cmocka_unit_test(test_job_errors),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_warm_up_and_times),
	};

	return cmocka_run_group_tests(tests, make_cache, remove_cache);
}
