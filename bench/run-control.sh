#!/bin/sh
# run-control.sh -- run bench/control against a private kgymd.
#
#   bench/run-control.sh [-B BEFORE_BUILDDIR] [BUILDDIR] [BENCH_ARGS...]
#
# Builds nothing: BUILDDIR (default ./build) must hold kgymd/kgymd,
# bench/control and the test plugin tests/plugins/.libs/selftest.so
# (make kgymd/kgymd bench tests/plugins/selftest.la).  Starts kgymd on a
# temporary socket, state directory and plugin directory (selftest alone:
# the test-only bad plugins beside it would only add refusals to the log)
# with max_running_tasks = 256 (the default), so most of the memory phase's hour-long tasks stay
# queued, runs bench/control with BENCH_ARGS, stops the daemon and exits
# with bench/control's status (0 every target met, 1 one missed, 2 error).
#
# With -B, the same benchmark runs first against BEFORE_BUILDDIR's kgymd
# (an older build, e.g. of the main branch) and then against BUILDDIR's,
# each on a fresh daemon, and one table shows both columns; BUILDDIR's
# bench/control drives both.  The exit status is the second run's.
set -u

before=
if [ "${1-}" = "-B" ]; then
	before=${2-}
	[ -n "$before" ] || { echo "run-control: -B needs a build directory" >&2; exit 2; }
	shift 2
fi
builddir=./build
case "${1-}" in
-*|"") ;;
*) builddir=$1; shift ;;
esac

bench=$builddir/bench/control
for b in $before "$builddir"; do
	for f in "$b/kgymd/kgymd" "$bench" "$b/tests/plugins/.libs/selftest.so"; do
		if [ ! -f "$f" ]; then
			echo "run-control: $f is missing; in $b run:" >&2
			echo "  make kgymd/kgymd bench tests/plugins/selftest.la" >&2
			exit 2
		fi
	done
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kgym-bench.XXXXXX") || exit 2
pid=
stop_daemon() {
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
	pid=
}
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	stop_daemon
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

# run_one BUILDDIR OUT [BENCH_ARGS...]: a fresh daemon from BUILDDIR, the
# benchmark's table in OUT; returns the benchmark's status.
run_one() {
	b=$1 out=$2
	shift 2
	d=$tmp/run
	rm -rf "$d"
	mkdir -p "$d/state" "$d/plugins" || return 2
	# The loader refuses plugins writable by group or others.
	cp "$b/tests/plugins/.libs/selftest.so" "$d/plugins/selftest.so" &&
	    chmod 0755 "$d/plugins/selftest.so" || return 2
	cat > "$d/kgymd.conf" <<EOC
[kgymd]
socket = $d/kgymd.sock
state_dir = $d/state
plugin_dir = $d/plugins
gpus = none
max_running_tasks = 256
max_queued_tasks = 1000000
log_level = warning
[workers]
# The control plane alone: tasks run in the daemon ("in_daemon"), no workers.
cpu_workers = 0
EOC
	"$b/kgymd/kgymd" -F -f "$d/kgymd.conf" 2>"$d/kgymd.log" &
	pid=$!
	i=0
	while [ ! -S "$d/kgymd.sock" ]; do
		if ! kill -0 "$pid" 2>/dev/null || [ "$i" -ge 100 ]; then
			echo "run-control: kgymd did not start; its log:" >&2
			cat "$d/kgymd.log" >&2
			return 2
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "kgymd of $b (pid $pid) with max_running_tasks = 256, max_queued_tasks = 1000000"
	"$bench" -s "$d/kgymd.sock" -p "$pid" "$@" > "$out"
	rc=$?
	stop_daemon
	if [ -s "$d/kgymd.log" ]; then
		echo "kgymd log (warnings and errors):"
		tail -n 20 "$d/kgymd.log" | sed 's/^/  /'
	fi
	return $rc
}

if [ -z "$before" ]; then
	run_one "$builddir" "$tmp/after" "$@"
	rc=$?
	cat "$tmp/after"
	exit $rc
fi
run_one "$before" "$tmp/before" "$@"
run_one "$builddir" "$tmp/after" "$@"
rc=$?
# One table: the metric, before, after, the target and the after verdict.
# A row is known by its name under the last unindented row ("queue depth
# after it" comes more than once); a row only one run has shows "-".
awk -F'|' '
function key(s) {
	if (s !~ /^  /)
		top = s
	return top "/" s
}
function trim(s) { sub(/^ +/, "", s); sub(/ +$/, "", s); return s }
NR == FNR { if (NF >= 4) b[key($1)] = trim($2); next }
/^-+\+/ { print "---------------------------------------------+----------+----------+----------+--------"; next }
NF >= 4 {
	m = $1
	sub(/ +$/, "", m)
	if (m == "metric")
		printf "%-44s | %8s | %8s | %-8s | %s\n", m, "before", "after", "target", "verdict"
	else
		printf "%-44s | %8s | %8s | %-8s | %s\n", m, (key($1) in b) ? b[key($1)] : "-",
		    trim($2), trim($3), trim($4)
	next
}
{ print }
' "$tmp/before" "$tmp/after"
exit $rc
