/*
 * replay_main.c -- main() for the fuzz target when built without libFuzzer.
 *
 * `make check` builds fuzz_request.c with the ordinary compiler and this
 * driver, so the harness and the seed corpus are exercised on every
 * machine, clang or not.  Each file named on the command line (or found
 * in a named directory) is fed to LLVMFuzzerTestOneInput as it is, then
 * cut at every length up to REPLAY_MAX_CUT bytes, then with each of its
 * first REPLAY_MAX_CUT bytes replaced by a few values that matter to a JSON
 * parser: a cheap, deterministic stand-in for the fuzzer's mutations.  An
 * invariant the harness checks aborts the run; a missing or empty corpus
 * is an error, so the test cannot pass by finding nothing to replay.
 * Never linked into the libFuzzer build, which brings its own main().
 */
#include "config.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_MAX_CUT		512
#define REPLAY_MAX_FILE		(1024 * 1024)

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes that change a JSON parse: structure, quoting, escapes, bad UTF-8. */
static const uint8_t replay_bytes[] = {
	'{', '}', '[', ']', '"', ':', ',', '\\', '0', '-', 'e', ' ', '\0', 0x80, 0xc3,
	0xff,
};

static unsigned long replay_runs;

static void
replay_one(const uint8_t *data, size_t size)
{
	uint8_t *buf;

	/*
	 * A copy of exactly `size` bytes, so ASan or valgrind sees any read
	 * past the end: the daemon hands the parser lines in place.
	 */
	if ((buf = malloc(size > 0 ? size : 1)) == NULL) {
		perror("replay: malloc");
		exit(2);
	}
	memcpy(buf, data, size);
	LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	replay_runs++;
}

static void
replay_mutations(const uint8_t *data, size_t size)
{
	uint8_t *buf;
	size_t i, j, n = size < REPLAY_MAX_CUT ? size : REPLAY_MAX_CUT;

	replay_one(data, size);
	for (i = 0; i < n; i++)
		replay_one(data, i);
	if ((buf = malloc(size > 0 ? size : 1)) == NULL) {
		perror("replay: malloc");
		exit(2);
	}
	memcpy(buf, data, size);
	for (i = 0; i < n; i++) {
		for (j = 0; j < sizeof replay_bytes; j++) {
			if (buf[i] == replay_bytes[j])
				continue;
			buf[i] = replay_bytes[j];
			replay_one(buf, size);
		}
		buf[i] ^= 0x01;		/* a one-bit flip too */
		replay_one(buf, size);
		buf[i] = data[i];
	}
	free(buf);
}

static int
replay_file(const char *path)
{
	uint8_t *data;
	size_t size;
	FILE *f;
	int rc = 0;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if ((data = malloc(REPLAY_MAX_FILE)) == NULL) {
		fclose(f);
		return -ENOMEM;
	}
	size = fread(data, 1, REPLAY_MAX_FILE, f);
	if (ferror(f)) {
		fprintf(stderr, "replay: %s: read error\n", path);
		rc = -EIO;
	} else
		replay_mutations(data, size);
	free(data);
	fclose(f);
	return rc;
}

static int
replay_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of the directory, in name order so runs repeat. */
static int
replay_dir(const char *dir, unsigned long *nfiles)
{
	struct dirent *de;
	struct stat st;
	char **names = NULL, **grown, path[4096];
	size_t n = 0, i;
	DIR *d;
	int rc = 0;

	if ((d = opendir(dir)) == NULL) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if ((grown = realloc(names, (n + 1) * sizeof *names)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		names = grown;
		if ((names[n] = strdup(de->d_name)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (names != NULL)
		qsort(names, n, sizeof *names, replay_name_cmp);
	for (i = 0; i < n; i++) {
		if (rc == 0 && (size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) <
		    sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = replay_file(path);
			(*nfiles)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int
main(int argc, char **argv)
{
	unsigned long nfiles = 0;
	struct stat st;
	int i, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
		return 2;
	}
	for (i = 1; i < argc; i++) {
		/* libFuzzer-style flags (-runs=N) are accepted and ignored */
		if (argv[i][0] == '-')
			continue;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode))
			rc = replay_dir(argv[i], &nfiles);
		else {
			rc = replay_file(argv[i]);
			nfiles++;
		}
		if (rc < 0)
			return 1;
	}
	if (nfiles == 0) {
		fprintf(stderr, "replay: no corpus files found\n");
		return 1;
	}
	printf("replay: %lu files, %lu runs, no failure\n", nfiles, replay_runs);
	return 0;
}
