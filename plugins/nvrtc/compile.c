/*
 * compile.c -- the nvrtc backend's compile step: CUDA C (device code only)
 * to a cubin for one architecture with NVRTC, behind a content-addressed
 * cache; and the "compile" job that the workflows run in a CPU worker.
 *
 * Compiling needs no GPU, so it runs in CPU workers, in parallel across
 * them, and the GPU worker receives only the cubin.  The options an
 * untrusted program may add are allowlisted (spec_option_allowed, checked
 * by the workflow at submit time and again here); everything that shapes
 * the result -- architecture, language standard, include directories -- is
 * set by this file.
 *
 * Cache: <cache_dir>/<sha256>.cubin, the key covering a format tag, the
 * NVRTC version, every option in order (ours and the program's, the
 * architecture among them) and the source, each length-prefixed so no two
 * inputs hash the same stream.  A file holds the cubin followed by the
 * SHA-256 of the cubin, so a short or damaged file (a crash, a full disk)
 * is recognised, ignored and rewritten.  Files are written to a temporary
 * name and renamed, so concurrent workers never see half a file and the
 * last writer of an identical entry wins harmlessly.  The directory is
 * trusted as much as the compile workers that share it.
 *
 * Confinement: NVRTC opens whatever an #include names, so each compile
 * runs in a thread of its own that can open only the include directory and
 * the job's scratch directory (confine.c), and its log is filtered before
 * anyone sees it (compile_log_filter): only diagnostics located in the
 * program's own source are kept, so no line of another file is quoted.
 * The first compile of a process (compile_warm_up, from prepare()) is ours
 * and unconfined: NVRTC loads its builtins library then.
 *
 * Sandbox: NVRTC runs inside the CPU worker's seccomp filter.  Beyond
 * memory management it reads files -- the CUDA headers under include_dir
 * (openat, read, pread64, fstat/newfstatat, lseek, close, readlink) -- and,
 * on its first compile in a process, dlopen()s libnvrtc-builtins (openat +
 * mmap with PROT_EXEC + mprotect), which is why a worker should compile
 * once in prepare(), before the filter is installed (compile_warm_up()).
 * It creates no threads for a plain compile (no --split-compile, which is
 * not on the allowlist).  The cache adds mkdir, openat(O_CREAT|O_EXCL),
 * write, rename and unlink inside cache_dir.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nvrtc.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "nvrtc_internal.h"

/* Bumped whenever the fixed options or the file format change. */
#define CACHE_TAG		"kgym-nvrtc-cubin-1"
#define DIGEST_LEN		32
/* No real cubin is near this; a bigger cache file is not read. */
#define CACHE_MAX_FILE		((size_t)256 << 20)
/* Units in one compile job (a reference and a solution, with room). */
#define COMPILE_MAX_UNITS	8
#define COMPILE_MAX_OPTIONS	SPEC_MAX_OPTIONS

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

char *
cause_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

const char *
compile_nvrtc_version(void)
{
	static char buf[32];
	int major = 0, minor = 0;

	if (buf[0] == '\0') {
		if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
			return "unknown";
		snprintf(buf, sizeof(buf), "%d.%d", major, minor);
	}
	return buf;
}

/* "sm_" + 2 or 3 digits + an optional 'a' or 'f' (sm_90a, sm_100f). */
static bool
arch_valid(const char *arch)
{
	size_t i, digits = 0;

	if (strncmp(arch, "sm_", 3) != 0)
		return false;
	for (i = 3; arch[i] >= '0' && arch[i] <= '9'; i++)
		digits++;
	if (digits < 2 || digits > 3 || arch[3] == '0')
		return false;
	if (arch[i] == 'a' || arch[i] == 'f')
		i++;
	return arch[i] == '\0';
}

/*
 * Make the log safe to put in a JSON string and bounded: invalid UTF-8
 * bytes become '?', and past COMPILE_MAX_LOG the tail is dropped with a
 * note (the first errors are the ones that matter).
 */
static char *
log_clean(const char *log, size_t len)
{
	static const char note[] = "\n[log trimmed: %zu bytes in all]\n";
	size_t i = 0, o = 0, keep, need, k;
	unsigned char c;
	char *out;

	keep = len > COMPILE_MAX_LOG ? COMPILE_MAX_LOG : len;
	if ((out = malloc(keep + sizeof(note) + 24)) == NULL)
		return NULL;
	while (i < keep) {
		c = (unsigned char)log[i];
		need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 :
		    (c & 0xF8) == 0xF0 ? 4 : 0;
		if (need == 1 && c != 0) {
			out[o++] = (char)c;
			i++;
			continue;
		}
		/* Overlong 2-byte leads (0xC0, 0xC1) and anything cut at the end are bad. */
		if (need == 0 || i + need > keep || c == 0xC0 || c == 0xC1)
			goto bad;
		for (k = 1; k < need; k++)
			if (((unsigned char)log[i + k] & 0xC0) != 0x80)
				goto bad;
		memcpy(out + o, log + i, need);
		o += need;
		i += need;
		continue;
bad:
		out[o++] = '?';
		i++;
	}
	out[o] = '\0';
	if (len > keep)
		snprintf(out + o, sizeof(note) + 24, note, len);
	return out;
}

/* --- what of the log a client may see --- */

struct log_out {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void
log_put(struct log_out *o, const char *p, size_t n)
{
	char *nb;
	size_t cap;

	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		cap = o->cap * 2 > o->len + n + 1 ? o->cap * 2 : o->len + n + 256;
		if ((nb = realloc(o->buf, cap)) == NULL) {
			o->oom = true;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

/*
 * A diagnostic's first line, "FILE(LINE): ...": FILE's length, or 0 when
 * the line is not one.  FILE starts the line (no blank) and is followed by
 * the first "(digits): ".
 */
static size_t
log_location(const char *line, size_t len)
{
	size_t i, j;

	if (len == 0 || line[0] == ' ' || line[0] == '\t')
		return 0;
	for (i = 1; i < len; i++) {
		if (line[i] != '(')
			continue;
		for (j = i + 1; j < len && line[j] >= '0' && line[j] <= '9'; j++)
			;
		if (j > i + 1 && j + 2 < len && line[j] == ')' && line[j + 1] == ':' &&
		    line[j + 2] == ' ')
			return i;
	}
	return 0;
}

/*
 * "... at line N of FILE" (a "detected during" line): the offset of
 * " of FILE" and FILE's, or false.
 */
static bool
log_at_line(const char *line, size_t len, size_t *ret_of, size_t *ret_file, unsigned long *ret_n)
{
	static const char at[] = " at line ";
	const char *p = NULL, *q;
	size_t i;

	for (i = 0; i + sizeof(at) - 1 <= len; i++)
		if (memcmp(line + i, at, sizeof(at) - 1) == 0)
			p = line + i;		/* the last one */
	if (p == NULL)
		return false;
	q = p + sizeof(at) - 1;
	if (q >= line + len || *q < '0' || *q > '9')
		return false;
	*ret_n = strtoul(q, NULL, 10);
	while (q < line + len && *q >= '0' && *q <= '9')
		q++;
	if ((size_t)(line + len - q) < 5 || memcmp(q, " of ", 4) != 0)
		return false;
	*ret_of = (size_t)(q - line);
	*ret_file = *ret_of + 4;
	return true;
}

static bool
log_is(const char *line, size_t len, const char *s)
{
	return len == strlen(s) && memcmp(line, s, len) == 0;
}

static bool
log_prefix(const char *line, size_t len, const char *s)
{
	return len >= strlen(s) && memcmp(line, s, strlen(s)) == 0;
}

/* NVRTC's closing line: 'N errors detected in the compilation of "NAME".' */
static bool
log_summary(const char *line, size_t len, const char *name)
{
	static const char tail[] = " detected in the compilation of \"";
	size_t nl = strlen(name);

	if (len < sizeof(tail) + nl + 2 || line[0] < '0' || line[0] > '9')
		return false;
	return memcmp(line + len - nl - 2, name, nl) == 0 &&
	    memcmp(line + len - 2, "\".", 2) == 0 &&
	    memcmp(line + len - nl - 2 - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0;
}

/* The run of left-out diagnostics ends: one line says so. */
static void
log_flush_dropped(struct log_out *o, const char *name, unsigned int *ndropped,
    unsigned long *from)
{
	char note[256];
	int n;

	if (*ndropped == 0)
		return;
	if (*from > 0)
		n = snprintf(note, sizeof note, "[%u diagnostic%s located in a file other than "
		    "%s, not shown; reached from %s(%lu)]\n", *ndropped, *ndropped == 1 ? "" : "s",
		    name, name, *from);
	else
		n = snprintf(note, sizeof note, "[%u diagnostic%s located in a file other than "
		    "%s, not shown]\n", *ndropped, *ndropped == 1 ? "" : "s", name);
	log_put(o, note, (size_t)n);
	*ndropped = 0;
	*from = 0;
}

/*
 * How much of a kept diagnostic line to show.  NVRTC says why an #include
 * could not be opened ("cannot open source file "X": Permission denied")
 * only when X exists and the confinement refused it, and says nothing more
 * when X does not exist: the reason is an oracle for which host paths
 * exist, kgymd's own among them.  So the line ends at the file's name, the
 * same for both.
 */
static size_t
log_open_failure(const char *line, size_t n)
{
	static const char what[] = "cannot open source file \"";
	const char *at, *q;

	if ((at = memmem(line, n, what, sizeof what - 1)) == NULL)
		return n;
	at += sizeof what - 1;
	if ((q = memchr(at, '"', (size_t)(line + n - at))) == NULL)
		return n;
	return (size_t)(q + 1 - line);
}

char *
compile_log_filter(const char *log, size_t len, const char *name)
{
	enum { TOP, KEEP, DROP } state = TOP;
	struct log_out o = { 0 };
	const char *line = log, *end = log + len, *nl;
	size_t n, loc, of, file, nlen = strlen(name);
	unsigned int ndropped = 0, nother = 0;
	unsigned long at, from = 0;
	char note[128], *clean;

	for (; line < end; line = nl < end ? nl + 1 : end) {
		if ((nl = memchr(line, '\n', (size_t)(end - line))) == NULL)
			nl = end;
		n = (size_t)(nl - line);
		if ((loc = log_location(line, n)) > 0) {
			if (loc == nlen && memcmp(line, name, nlen) == 0) {
				log_flush_dropped(&o, name, &ndropped, &from);
				state = KEEP;
				log_put(&o, line, log_open_failure(line, n));
				log_put(&o, "\n", 1);
			} else {
				state = DROP;
				ndropped++;
			}
			continue;
		}
		if (n == 0 || line[0] == ' ' || line[0] == '\t') {
			/* A diagnostic's quoted line, caret, notes, "detected during". */
			if (state == DROP) {
				if (log_at_line(line, n, &of, &file, &at) && from == 0 &&
				    n - file == nlen && memcmp(line + file, name, nlen) == 0)
					from = at;
				continue;
			}
			if (state == KEEP && log_at_line(line, n, &of, &file, &at) &&
			    !(n - file == nlen && memcmp(line + file, name, nlen) == 0)) {
				log_put(&o, line, of);
				log_put(&o, " of an included file\n", 21);
				continue;
			}
			if (state == KEEP || n == 0) {
				log_put(&o, line, n);
				log_put(&o, "\n", 1);
			}
			continue;
		}
		/* A line of its own: only NVRTC's known closing lines. */
		log_flush_dropped(&o, name, &ndropped, &from);
		state = TOP;
		if (log_summary(line, n, name) || log_is(line, n, "Compilation terminated.") ||
		    log_prefix(line, n, "Remark: The warnings can be suppressed with ") ||
		    log_prefix(line, n, "nvrtc: error: ")) {
			log_put(&o, line, n);
			log_put(&o, "\n", 1);
		} else {
			nother++;
		}
	}
	log_flush_dropped(&o, name, &ndropped, &from);
	if (nother > 0) {
		n = (size_t)snprintf(note, sizeof note, "[%u other line%s of the log not shown]\n",
		    nother, nother == 1 ? "" : "s");
		log_put(&o, note, n);
	}
	if (o.oom) {
		free(o.buf);
		return NULL;
	}
	clean = log_clean(o.buf != NULL ? o.buf : "", o.len);
	free(o.buf);
	return clean;
}

/* --- the cache --- */

static int
digest(const void *const *parts, const size_t *lens, size_t n, unsigned char out[DIGEST_LEN])
{
	EVP_MD_CTX *md;
	unsigned int outlen = 0;
	size_t i;
	int ok;

	if ((md = EVP_MD_CTX_new()) == NULL)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (i = 0; ok && i < n; i++)
		ok = EVP_DigestUpdate(md, parts[i], lens[i]);
	ok = ok && EVP_DigestFinal_ex(md, out, &outlen) && outlen == DIGEST_LEN;
	EVP_MD_CTX_free(md);
	return ok ? 0 : -EIO;
}

/* The key over length-prefixed fields; hex into `hex` (65 bytes). */
static int
cache_key(const char *const *options, size_t noptions, const char *source, char *hex)
{
	unsigned char md[DIGEST_LEN];
	EVP_MD_CTX *ctx;
	const char *version = compile_nvrtc_version();
	uint64_t len;
	size_t i;
	int ok;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return -ENOMEM;
#define FIELD(p, n) (len = (uint64_t)(n), \
	    EVP_DigestUpdate(ctx, &len, sizeof(len)) && EVP_DigestUpdate(ctx, (p), (size_t)len))
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
	    FIELD(CACHE_TAG, strlen(CACHE_TAG)) && FIELD(version, strlen(version));
	len = noptions;
	ok = ok && EVP_DigestUpdate(ctx, &len, sizeof(len));
	for (i = 0; ok && i < noptions; i++)
		ok = FIELD(options[i], strlen(options[i]));
	ok = ok && FIELD(source, strlen(source));
#undef FIELD
	ok = ok && EVP_DigestFinal_ex(ctx, md, NULL);
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -EIO;
	for (i = 0; i < DIGEST_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* A cached cubin, or -ENOENT for anything short of a good entry. */
static int
cache_read(const char *path, unsigned char **ret_cubin, size_t *ret_size)
{
	unsigned char md[DIGEST_LEN], *buf;
	const void *part[1];
	size_t len[1], size, got = 0;
	struct stat st;
	ssize_t n;
	int fd, r = -ENOENT;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 4 + DIGEST_LEN ||
	    (size_t)st.st_size > CACHE_MAX_FILE)
		goto close_fd;
	size = (size_t)st.st_size;
	if ((buf = malloc(size)) == NULL) {
		r = -ENOMEM;
		goto close_fd;
	}
	while (got < size) {
		n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	part[0] = buf;
	len[0] = size - DIGEST_LEN;
	if (got != size || memcmp(buf, "\177ELF", 4) != 0 ||
	    digest(part, len, 1, md) < 0 || memcmp(md, buf + size - DIGEST_LEN, DIGEST_LEN) != 0) {
		free(buf);
		goto close_fd;
	}
	*ret_cubin = buf;	/* the digest after the cubin is harmless slack */
	*ret_size = size - DIGEST_LEN;
	r = 0;
close_fd:
	close(fd);
	return r;
}

static int
write_all(int fd, const void *p, size_t n)
{
	const unsigned char *b = p;
	ssize_t w;

	while (n > 0) {
		w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Store a cubin; true when it is in place.  A failure only costs the next
 * compile a miss, and this job's cubin travels by value. */
static bool
cache_write(const char *dir, const char *path, const unsigned char *cubin, size_t size)
{
	unsigned char md[DIGEST_LEN], rnd[8];
	const void *part[1] = { cubin };
	size_t len[1] = { size };
	char tmp[PATH_MAX];
	int fd, n, r;

	if (digest(part, len, 1, md) < 0 || RAND_bytes(rnd, sizeof(rnd)) != 1)
		return false;
	(void)mkdir(dir, 0755);
	n = snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%02x%02x%02x%02x%02x%02x%02x%02x", dir,
	    (long)getpid(), rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return false;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0)
		return false;
	r = write_all(fd, cubin, size);
	if (r == 0)
		r = write_all(fd, md, sizeof(md));
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r != 0 || rename(tmp, path) < 0) {
		(void)unlink(tmp);
		return false;
	}
	return true;
}

/* A key as cache_key() writes it: 64 lowercase hex digits, nothing else
 * (it becomes a file name). */
static bool
cache_key_valid(const char *key)
{
	return strlen(key) == 2 * DIGEST_LEN &&
	    strspn(key, "0123456789abcdef") == 2 * DIGEST_LEN;
}

int
compile_cache_load(const char *cache_dir, const char *key, unsigned char **ret_cubin,
    size_t *ret_size, char **ret_cause)
{
	char path[PATH_MAX];
	int n, r;

	if (cache_dir == NULL || cache_dir[0] != '/') {
		*ret_cause = cause_printf("no compile cache here to find cubin %.64s in", key);
		return -ENOENT;
	}
	if (!cache_key_valid(key)) {
		*ret_cause = cause_printf("'%.80s' is not a cache key (64 hex digits)", key);
		return -EINVAL;
	}
	n = snprintf(path, sizeof(path), "%s/%s.cubin", cache_dir, key);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		*ret_cause = cause_printf("the compile cache's path is too long");
		return -ENAMETOOLONG;
	}
	if ((r = cache_read(path, ret_cubin, ret_size)) == -ENOMEM) {
		*ret_cause = cause_printf("out of memory");
		return r;
	}
	if (r < 0)
		*ret_cause = cause_printf("cubin %s is not in the compile cache (or is damaged)",
		    key);
	return r;
}

/* --- compiling --- */

void
compile_output_clear(struct compile_output *out)
{
	free(out->cubin);
	free(out->log);
	memset(out, 0, sizeof(*out));
}

/* NVRTC proper: ok or a compile error in *out, or -errno. */
static int
run_nvrtc(const struct compile_input *in, const char *const *options, size_t noptions,
    struct compile_output *out, char **ret_cause)
{
	const char *name = in->name != NULL ? in->name : "kernel";
	nvrtcProgram prog;
	nvrtcResult res;
	size_t loglen = 0, size = 0;
	char *log = NULL;
	int r = 0;

	res = nvrtcCreateProgram(&prog, in->source, name, 0, NULL, NULL);
	if (res != NVRTC_SUCCESS) {
		*ret_cause = cause_printf("nvrtcCreateProgram: %s", nvrtcGetErrorString(res));
		return res == NVRTC_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	res = nvrtcCompileProgram(prog, (int)noptions, options);
	if (nvrtcGetProgramLogSize(prog, &loglen) == NVRTC_SUCCESS && loglen > 0 &&
	    (log = malloc(loglen)) != NULL &&
	    nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
		log[0] = '\0';
	switch (res) {
	case NVRTC_SUCCESS:
		if (nvrtcGetCUBINSize(prog, &size) != NVRTC_SUCCESS || size == 0) {
			*ret_cause = cause_printf("nvrtcGetCUBINSize: no cubin for %s", in->arch);
			r = -EIO;
			break;
		}
		if ((out->cubin = malloc(size)) == NULL) {
			r = -ENOMEM;
			break;
		}
		if (nvrtcGetCUBIN(prog, (char *)out->cubin) != NVRTC_SUCCESS) {
			*ret_cause = cause_printf("nvrtcGetCUBIN failed for %s", in->arch);
			r = -EIO;
			break;
		}
		out->cubin_size = size;
		out->ok = true;
		break;
	case NVRTC_ERROR_COMPILATION:
		out->ok = false;
		break;
	case NVRTC_ERROR_INVALID_OPTION:
		/* Ours are fixed and theirs allowlisted: the arch or a path is wrong. */
		out->log = compile_log_filter(log != NULL ? log : "",
		    log != NULL ? strnlen(log, loglen) : 0, name);
		*ret_cause = cause_printf("NVRTC refused the options (arch %s): %s", in->arch,
		    out->log != NULL ? out->log : "");
		r = -EINVAL;
		break;
	default:
		*ret_cause = cause_printf("nvrtcCompileProgram: %s", nvrtcGetErrorString(res));
		r = res == NVRTC_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
		break;
	}
	if (r == 0 && (out->log = compile_log_filter(log != NULL ? log : "",
	    log != NULL ? strnlen(log, loglen) : 0, name)) == NULL)
		r = -ENOMEM;
	free(log);
	nvrtcDestroyProgram(&prog);
	return r;
}

/* run_nvrtc()'s arguments and outcome, across the confined thread. */
struct nvrtc_call {
	const struct compile_input *in;
	const char *const *options;
	size_t noptions;
	struct compile_output *out;
	char *cause;
};

static int
run_nvrtc_thread(void *arg)
{
	struct nvrtc_call *c = arg;

	return run_nvrtc(c->in, c->options, c->noptions, c->out, &c->cause);
}

/* Compile jobs' default; compile_source() takes it from its input. */
static bool compile_unconfined;

void
compile_set_unconfined(bool unconfined)
{
	compile_unconfined = unconfined;
}

/*
 * NVRTC loads its builtins library at its first compile in a process; in
 * a confined thread, which cannot read the library's directory, that
 * would fail.  So the first compile of a process is our own trivial
 * kernel, unconfined (prepare() does it in a worker: compile_warm_up()).
 */
static bool compile_warm;

static int
compile_nvrtc(const struct compile_input *in, const char *include_dir, const char *const *options,
    size_t noptions, struct compile_output *out, char **ret_cause)
{
	const char *read_dirs[] = { include_dir, NULL };
	const char *rw_dirs[] = { in->scratch_dir, NULL };
	struct confine_policy policy = { .read_dirs = read_dirs, .rw_dirs = rw_dirs };
	struct nvrtc_call call = { .in = in, .options = options, .noptions = noptions, .out = out };
	int r, fr = 0;

	if (in->unconfined)
		return run_nvrtc(in, options, noptions, out, ret_cause);
	if (!compile_warm && (r = compile_warm_up(in->arch, ret_cause)) < 0)
		return r;
	if ((r = confine_run(&policy, run_nvrtc_thread, &call, &fr, ret_cause)) < 0)
		return r;
	if (fr < 0) {
		if (ret_cause != NULL)
			*ret_cause = call.cause;
		else
			free(call.cause);
		return fr;
	}
	free(call.cause);
	return 0;
}

int
compile_source(const struct compile_input *in, struct compile_output *ret_out, char **ret_cause)
{
	const char *include_dir = in->include_dir != NULL ? in->include_dir :
	    COMPILE_DEFAULT_INCLUDE_DIR;
	const char *options[5 + COMPILE_MAX_OPTIONS];
	char archopt[64], inc[PATH_MAX + 3], cccl[PATH_MAX + 8], hex[2 * DIGEST_LEN + 1];
	char path[PATH_MAX];
	struct compile_output out;
	double t0 = now_ms();
	size_t n = 0, i;
	bool cache = false;
	int r;

	memset(&out, 0, sizeof(out));
	if (!arch_valid(in->arch)) {
		*ret_cause = cause_printf("'%.32s' is not an architecture (sm_75, sm_90a, ...)",
		    in->arch);
		return -EINVAL;
	}
	if (in->noptions > COMPILE_MAX_OPTIONS) {
		*ret_cause = cause_printf("%zu options, more than %d", in->noptions,
		    COMPILE_MAX_OPTIONS);
		return -EINVAL;
	}
	/* A cubin for exactly this GPU: nothing is left to the driver's JIT. */
	snprintf(archopt, sizeof(archopt), "--gpu-architecture=%s", in->arch);
	snprintf(inc, sizeof(inc), "-I%s", include_dir);
	/* CUDA 13 keeps libcu++ (cuda/std/...) and CUB under include/cccl. */
	snprintf(cccl, sizeof(cccl), "-I%s/cccl", include_dir);
	options[n++] = archopt;
	options[n++] = "-default-device";
	options[n++] = "--std=c++17";
	options[n++] = inc;
	options[n++] = cccl;
	for (i = 0; i < in->noptions; i++)
		options[n++] = in->options[i];

	if (in->cache_dir != NULL && in->cache_dir[0] != '\0') {
		if ((r = cache_key(options, n, in->source, hex)) < 0) {
			*ret_cause = cause_printf("cache key: %s", strerror(-r));
			return r;
		}
		r = snprintf(path, sizeof(path), "%s/%s.cubin", in->cache_dir, hex);
		cache = r > 0 && (size_t)r < sizeof(path);
	}
	if (cache && !in->force && cache_read(path, &out.cubin, &out.cubin_size) == 0) {
		out.ok = true;
		out.cache_hit = true;
		memcpy(out.cache_key, hex, sizeof(out.cache_key));
		out.compile_ms = now_ms() - t0;
		*ret_out = out;
		return 0;
	}
	if ((r = compile_nvrtc(in, include_dir, options, n, &out, ret_cause)) < 0) {
		compile_output_clear(&out);
		return r;
	}
	if (cache && out.ok && cache_write(in->cache_dir, path, out.cubin, out.cubin_size))
		memcpy(out.cache_key, hex, sizeof(out.cache_key));
	out.compile_ms = now_ms() - t0;
	*ret_out = out;
	return 0;
}

int
compile_warm_up(const char *arch, char **ret_cause)
{
	struct compile_input in = {
		.name = "warm_up",
		.source = "extern \"C\" __global__ void kgym_warm_up(int *p) { *p = 0; }",
		.arch = arch,
		.unconfined = true,	/* our own source: see compile_nvrtc() */
	};
	struct compile_output out;
	int r;

	if ((r = compile_source(&in, &out, ret_cause)) < 0)
		return r;
	compile_warm = true;
	if (!out.ok) {
		*ret_cause = cause_printf("NVRTC cannot compile a trivial kernel: %s", out.log);
		compile_output_clear(&out);
		return -EIO;
	}
	compile_output_clear(&out);
	return 0;
}

/* --- base64 --- */

char *
compile_b64_encode(const void *data, size_t len)
{
	char *out;

	if (len > (size_t)INT_MAX / 4 * 3)
		return NULL;
	if ((out = malloc((len + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

int
compile_b64_decode(const char *b64, unsigned char **ret_data, size_t *ret_len)
{
	size_t len = strlen(b64), pad = 0;
	unsigned char *out;
	int n;

	/* EVP_DecodeBlock skips blanks at the ends and ignores padding counts. */
	if (len % 4 != 0 || len > (size_t)INT_MAX)
		return -EINVAL;
	if (len > 0 && b64[len - 1] == '=')
		pad++;
	if (len > 1 && b64[len - 2] == '=')
		pad++;
	if ((out = malloc(len / 4 * 3 + 1)) == NULL)
		return -ENOMEM;
	n = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)len);
	if (n < 0 || (size_t)n != len / 4 * 3) {
		free(out);
		return -EINVAL;
	}
	*ret_data = out;
	*ret_len = (size_t)n - pad;
	return 0;
}

/* --- the job --- */

static int
job_unit(const json_t *unit, size_t idx, const char *arch, const char *include_dir,
    const char *cache_dir, const char *scratch_dir, json_t *results, char **ret_cause)
{
	const char *options[COMPILE_MAX_OPTIONS];
	struct compile_input in;
	struct compile_output out;
	const json_t *jname, *jsrc, *jopts, *o;
	json_t *res;
	char *b64;
	size_t i;
	int r;

	jname = json_object_get(unit, "name");
	jsrc = json_object_get(unit, "source");
	jopts = json_object_get(unit, "options");
	if (!json_is_object(unit) || !json_is_string(jname) || !json_is_string(jsrc) ||
	    json_string_length(jsrc) == 0 ||
	    strlen(json_string_value(jsrc)) != json_string_length(jsrc)) {
		*ret_cause = cause_printf("units[%zu]: expected {\"name\": string, \"source\": "
		    "non-empty string, \"options\": [string]}", idx);
		return -EINVAL;
	}
	if (jopts != NULL && (!json_is_array(jopts) ||
	    json_array_size(jopts) > COMPILE_MAX_OPTIONS)) {
		*ret_cause = cause_printf("units[%zu].options: expected an array of at most %d "
		    "strings", idx, COMPILE_MAX_OPTIONS);
		return -EINVAL;
	}
	memset(&in, 0, sizeof(in));
	for (i = 0; i < json_array_size(jopts); i++) {
		o = json_array_get(jopts, i);
		if (!json_is_string(o) || !spec_option_allowed(json_string_value(o))) {
			*ret_cause = cause_printf("units[%zu].options[%zu]: not an allowed option",
			    idx, i);
			return -EINVAL;
		}
		options[i] = json_string_value(o);
	}
	in.name = json_string_value(jname);
	in.source = json_string_value(jsrc);
	in.options = options;
	in.noptions = json_array_size(jopts);
	in.arch = arch;
	in.include_dir = include_dir;
	in.cache_dir = cache_dir;
	in.scratch_dir = scratch_dir;
	in.unconfined = compile_unconfined;
	in.force = json_is_true(json_object_get(unit, "force"));
	if ((r = compile_source(&in, &out, ret_cause)) < 0)
		return r;

	res = json_pack("{s:s, s:b, s:s, s:f, s:b, s:[]}", "name", in.name, "ok", out.ok,
	    "log", out.log != NULL ? out.log : "", "compile_ms", out.compile_ms,
	    "cache_hit", out.cache_hit, "kernels");
	if (res == NULL) {
		compile_output_clear(&out);
		return -ENOMEM;
	}
	if (out.ok && out.cache_key[0] != '\0') {
		/* In the cache, which GPU workers read: the key is enough. */
		if (json_object_set_new(res, "cubin_key", json_string(out.cache_key)) < 0) {
			json_decref(res);
			compile_output_clear(&out);
			return -ENOMEM;
		}
	} else if (out.ok) {
		b64 = compile_b64_encode(out.cubin, out.cubin_size);
		if (b64 == NULL || json_object_set_new(res, "cubin_b64", json_string(b64)) < 0) {
			free(b64);
			json_decref(res);
			compile_output_clear(&out);
			return -ENOMEM;
		}
		free(b64);
	}
	compile_output_clear(&out);
	if (json_array_append_new(results, res) < 0)
		return -ENOMEM;
	return 0;
}

static int
optional_path(const json_t *request, const char *key, const char **ret, char **ret_cause)
{
	const json_t *j = json_object_get(request, key);

	*ret = NULL;
	if (j == NULL || json_is_null(j))
		return 0;
	if (!json_is_string(j) || json_string_value(j)[0] != '/' ||
	    json_string_length(j) >= PATH_MAX - 80) {
		*ret_cause = cause_printf("%s: expected an absolute path", key);
		return -EINVAL;
	}
	*ret = json_string_value(j);
	return 0;
}

int
compile_job(const json_t *request, json_t **ret_result, char **ret_cause)
{
	const char *arch, *cache_dir, *include_dir, *scratch_dir;
	const json_t *units;
	json_t *results, *result;
	size_t i;
	int r;

	if (!json_is_object(request) || !json_is_string(json_object_get(request, "arch"))) {
		*ret_cause = cause_printf("compile request: \"arch\" (a string) is missing");
		return -EINVAL;
	}
	arch = json_string_value(json_object_get(request, "arch"));
	if ((r = optional_path(request, "cache_dir", &cache_dir, ret_cause)) < 0 ||
	    (r = optional_path(request, "include_dir", &include_dir, ret_cause)) < 0 ||
	    (r = optional_path(request, "scratch_dir", &scratch_dir, ret_cause)) < 0)
		return r;
	units = json_object_get(request, "units");
	if (!json_is_array(units) || json_array_size(units) < 1 ||
	    json_array_size(units) > COMPILE_MAX_UNITS) {
		*ret_cause = cause_printf("compile request: \"units\" must be an array of 1 to %d",
		    COMPILE_MAX_UNITS);
		return -EINVAL;
	}
	if ((results = json_array()) == NULL)
		return -ENOMEM;
	for (i = 0; i < json_array_size(units); i++)
		if ((r = job_unit(json_array_get(units, i), i, arch, include_dir, cache_dir,
		    scratch_dir, results, ret_cause)) < 0) {
			json_decref(results);
			return r;
		}
	result = json_pack("{s:s, s:s, s:s, s:o}", "status", "completed", "arch", arch,
	    "nvrtc_version", compile_nvrtc_version(), "units", results);
	if (result == NULL)
		return -ENOMEM;
	*ret_result = result;
	return 0;
}
