#!/bin/sh
# run-fuzz-ipc.sh -- the fuzz test of the worker<->daemon frame decoder
# (kgymd/ipc.c): run-fuzz.sh with tests/fuzz/fuzz_ipc.c and its corpus,
# tests/fuzz/corpus_ipc (make check).
KGYM_FUZZ_TARGET=ipc
export KGYM_FUZZ_TARGET
exec "$(dirname "$0")/run-fuzz.sh"
