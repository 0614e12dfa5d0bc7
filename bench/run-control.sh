#!/bin/sh
# run-control.sh -- run bench/control against a private kgymd.
#
#   bench/run-control.sh [BUILDDIR] [BENCH_ARGS...]
#
# Builds nothing: BUILDDIR (default ./build) must hold kgymd/kgymd,
# bench/control and the test plugin tests/plugins/.libs/selftest.so
# (make kgymd/kgymd bench tests/plugins/selftest.la).  Starts kgymd on a
# temporary socket, state directory and plugin directory (selftest alone:
# the test-only bad plugins beside it would only add refusals to the log)
# with max_running_tasks = 256 (the default), so most of the memory phase's hour-long tasks stay
# queued, runs bench/control with BENCH_ARGS, stops the daemon and exits
# with bench/control's status (0 every target met, 1 one missed, 2 error).
set -u

builddir=./build
case "${1-}" in
-*|"") ;;
*) builddir=$1; shift ;;
esac

kgymd=$builddir/kgymd/kgymd
bench=$builddir/bench/control
selftest=$builddir/tests/plugins/.libs/selftest.so
for f in "$kgymd" "$bench" "$selftest"; do
	if [ ! -f "$f" ]; then
		echo "run-control: $f is missing; in $builddir run:" >&2
		echo "  make kgymd/kgymd bench tests/plugins/selftest.la" >&2
		exit 2
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kgym-bench.XXXXXX") || exit 2
pid=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

mkdir -p "$tmp/state" "$tmp/plugins" || exit 2
# The loader refuses plugins writable by group or others.
cp "$selftest" "$tmp/plugins/selftest.so" && chmod 0755 "$tmp/plugins/selftest.so" || exit 2
cat > "$tmp/kgymd.conf" <<EOF
[kgymd]
socket = $tmp/kgymd.sock
state_dir = $tmp/state
plugin_dir = $tmp/plugins
gpus = none
max_running_tasks = 256
max_queued_tasks = 1000000
log_level = warning
[workers]
# The control plane alone: tasks run in the daemon ("in_daemon"), no workers.
cpu_workers = 0
EOF

"$kgymd" -F -f "$tmp/kgymd.conf" 2>"$tmp/kgymd.log" &
pid=$!
i=0
while [ ! -S "$tmp/kgymd.sock" ]; do
	if ! kill -0 "$pid" 2>/dev/null || [ "$i" -ge 100 ]; then
		echo "run-control: kgymd did not start; its log:" >&2
		cat "$tmp/kgymd.log" >&2
		exit 2
	fi
	sleep 0.1
	i=$((i + 1))
done

echo "kgymd (pid $pid) with max_running_tasks = 256, max_queued_tasks = 1000000"
"$bench" -s "$tmp/kgymd.sock" -p "$pid" "$@"
rc=$?
if [ -s "$tmp/kgymd.log" ]; then
	echo "kgymd log (warnings and errors):"
	tail -n 20 "$tmp/kgymd.log" | sed 's/^/  /'
fi
exit $rc
