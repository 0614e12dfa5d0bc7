#!/bin/sh
# run-fuzz.sh -- the fuzz test of a decoder (make check).
#
# KGYM_FUZZ_TARGET picks it: "request" (the default: the control protocol's
# request parser, fuzz_request.c + protocol.c, corpus tests/fuzz/corpus) or
# "ipc" (the worker<->daemon frame decoder, fuzz_ipc.c + ipc.c, corpus
# tests/fuzz/corpus_ipc; run-fuzz-ipc.sh sets it).
# 1. Always: the replay build of tests/fuzz/fuzz_$target (gcc, built by
#    make check) runs over the seed corpus and its mutations, so the
#    harness and the decoder's invariants are checked on every machine.
# 2. When KGYM_CLANG names a clang that can build -fsanitize=fuzzer: build
#    a libFuzzer binary of the harness + its sources + log.c with ASan and
#    UBSan in a temporary directory and fuzz for KGYM_FUZZ_SECONDS (20) over
#    a copy of the corpus.  A crash, leak or sanitizer report fails the test
#    and its input is kept as $KGYM_BUILDDIR/tests/fuzz/crash-*.
# Environment (set by the Makefile): KGYM_BUILDDIR, KGYM_SRCDIR, KGYM_CLANG
# (path of clang, or "no").
set -u

srcdir=${KGYM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${KGYM_BUILDDIR:-.}
clang=${KGYM_CLANG:-no}
seconds=${KGYM_FUZZ_SECONDS:-20}
target=${KGYM_FUZZ_TARGET:-request}
case $target in
request)
	corpus=$srcdir/tests/fuzz/corpus
	sources="$srcdir/kgymd/protocol.c" ;;
ipc)
	corpus=$srcdir/tests/fuzz/corpus_ipc
	sources="$srcdir/kgymd/ipc.c" ;;
*)
	echo "run-fuzz: FAIL: unknown KGYM_FUZZ_TARGET '$target'" >&2
	exit 1 ;;
esac
replay=$builddir/tests/fuzz/fuzz_$target

fail() {
	echo "run-fuzz: FAIL: $*" >&2
	exit 1
}

[ -d "$corpus" ] || fail "no seed corpus at $corpus"
[ -x "$replay" ] || fail "$replay is not built (make tests/fuzz/fuzz_$target)"

echo "replaying $corpus with $replay"
"$replay" "$corpus" || fail "the replay build found a failure (see above)"

if [ "$clang" = no ] || [ -z "$clang" ] || ! command -v "$clang" >/dev/null 2>&1; then
	echo "libFuzzer skipped: no clang"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kgym-fuzz.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT INT TERM

# A clang without the libFuzzer runtime is treated like no clang.
cat > "$tmp/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
EOF
if ! "$clang" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" \
    >"$tmp/probe.log" 2>&1; then
	echo "libFuzzer skipped: no clang with -fsanitize=fuzzer ($clang)"
	sed 's/^/  /' "$tmp/probe.log" | head -5
	exit 0
fi

jansson=$(pkg-config --cflags --libs jansson) || fail "pkg-config does not know jansson"
# shellcheck disable=SC2086 # $jansson and $sources are lists
"$clang" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -Wall -Wextra -Wno-unused-parameter \
    -I"$builddir" -I"$srcdir/include" -I"$srcdir/kgymd" \
    "$srcdir/tests/fuzz/fuzz_$target.c" $sources "$srcdir/kgymd/log.c" \
    $jansson -o "$tmp/fuzz_$target" >"$tmp/build.log" 2>&1 ||
	{ cat "$tmp/build.log" >&2; fail "clang could not build the libFuzzer binary"; }

{ mkdir "$tmp/corpus" && cp "$corpus"/* "$tmp/corpus/"; } || fail "copying the corpus"
echo "fuzzing for ${seconds}s with libFuzzer"
"$tmp/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=8192 -print_final_stats=1 -artifact_prefix="$tmp/" \
    "$tmp/corpus" >"$tmp/fuzz.log" 2>&1
rc=$?
runs=$(sed -n 's/^Done \([0-9][0-9]*\) runs.*/\1/p' "$tmp/fuzz.log" | tail -n 1)
if [ $rc -ne 0 ]; then
	tail -n 40 "$tmp/fuzz.log" >&2
	mkdir -p "$builddir/tests/fuzz"
	for f in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-* "$tmp"/oom-*; do
		[ -f "$f" ] || continue
		cp "$f" "$builddir/tests/fuzz/" && echo "kept $builddir/tests/fuzz/${f##*/}" >&2
	done
	fail "libFuzzer found a failure (exit $rc)"
fi
[ -n "$runs" ] || { tail -n 20 "$tmp/fuzz.log" >&2; fail "libFuzzer did not report its runs"; }
echo "libFuzzer: $runs runs"
exit 0
