#!/bin/sh
# check_boundaries.sh -- the boundaries of the source tree, checked over the
# sources and the link maps of what was built.
#
#  1. No include arrow from plugins/ (and the test plugins, and lib/) into
#     kgymd/: a plugin's #include "..." resolves to its own directory,
#     plugins/common/ or include/kgym/, never to a daemon header;
#     plugins/common/ includes nothing of one plugin.
#  2. No link arrow either: kgymd and kgymd-worker export none of their own
#     symbols (no -rdynamic), and no plugin or plugin library defines or
#     needs a symbol that the daemon's objects define (a copy of daemon
#     code, a stub of its log functions, a call into it).
#  2b. Toolkits are reached through the ABI (host->toolkit), never linked:
#     an installed plugin exports nothing but kgym_plugin (so a toolkit's
#     API tables stay behind toolkit_api), and no other plugin defines a
#     function or table of a toolkit's (a copy of its sources).
#  3. No C file over 1,500 lines (STYLE.md).
#  4. The daemon's include cycle stays gone: the control socket (control.c)
#     reaches the op handlers and the waits through struct peer, and
#     nothing below it calls back into control.c or names its struct
#     conn.  main.c, which wires the process together, may; elsewhere
#     such a line needs a comment with "cycle:" on it or within the five
#     lines above, saying why.
#
# Every finding is printed with its file; the exit status is 1 when there
# is one, 0 otherwise.  KGYM_SRCDIR and KGYM_BUILDDIR come from make check.
set -u

srcdir=${KGYM_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${KGYM_BUILDDIR:-$srcdir/build}
fail=0

bad() {
	printf 'check_boundaries: %s\n' "$*"
	fail=1
}

cd "$srcdir" || exit 99

# --- 1. includes
for f in $(find plugins tests/plugins lib -name '*.[ch]' | sort); do
	dir=$(dirname "$f")
	grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
	    sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1 \2/' |
	    while read -r line inc; do
		case $inc in
		config.h) continue ;;
		*..*) echo "$f:$line: includes \"$inc\" (a path out of its directory)"; continue ;;
		esac
		if [ -f "include/$inc" ]; then
			case $inc in
			kgym/*) continue ;;
			esac
		fi
		if [ -f "$dir/$inc" ]; then
			continue
		fi
		case $dir in
		plugins/common|lib|tests/plugins) ;;
		plugins/*)
			[ -f "plugins/common/$inc" ] && continue ;;
		esac
		echo "$f:$line: includes \"$inc\", which is not in $dir/, plugins/common/ or include/kgym/"
	    done
done > "${TMPDIR:-/tmp}/kgym-boundaries.$$"
if [ -s "${TMPDIR:-/tmp}/kgym-boundaries.$$" ]; then
	while read -r l; do bad "$l"; done < "${TMPDIR:-/tmp}/kgym-boundaries.$$"
fi
rm -f "${TMPDIR:-/tmp}/kgym-boundaries.$$"

# The build must not hand plugins the daemon's include directory either.
if grep -n '^plugins_.*_CFLAGS.*-I[^ ]*kgymd\|^plugins_.*_CPPFLAGS.*-I[^ ]*kgymd\|^PLUGIN_C.*FLAGS.*-I[^ ]*kgymd' \
    Makefile.am >/dev/null; then
	bad "Makefile.am: a plugin is compiled with -I.../kgymd"
fi
# AM_CPPFLAGS has -I kgymd: every plugin target must replace it.
for t in $(sed -n 's/^\(plugins_[a-z0-9_]*_la\|tests_plugins_[a-z0-9_]*_la\)_SOURCES.*/\1/p' Makefile.am | sort -u); do
	grep -q "^${t}_CPPFLAGS = " Makefile.am ||
	    bad "Makefile.am: $t has no ${t}_CPPFLAGS, so it gets AM_CPPFLAGS' -I kgymd"
done
# Nor link daemon sources or libkgymcore into a plugin.
if grep -n '^\(plugins\|tests_plugins\)_.*_\(SOURCES\|LIBADD\|LDADD\).*\(kgymd/\|libkgymcore\)' \
    Makefile.am; then
	bad "Makefile.am: a plugin links daemon sources or libkgymcore (lines above)"
fi

# --- 2. link maps
if ! command -v nm >/dev/null 2>&1; then
	echo "check_boundaries: no nm (binutils): link maps not checked"
	[ "$fail" -eq 0 ] && exit 77
	exit 1
fi
for prog in kgymd/kgymd kgymd/worker/kgymd-worker; do
	if [ ! -f "$builddir/$prog" ]; then
		bad "$builddir/$prog is not built"
		continue
	fi
	# Only what libc's startup code puts there (stdio, getopt).
	exported=$(nm -D --defined-only "$builddir/$prog" |
	    awk '{print $3}' | sed 's/@.*//' |
	    grep -v '^\(_IO_stdin_used\|__bss_start\|__data_start\|data_start\|_edata\|_end\|_start\|_init\|_fini\|stdin\|stdout\|stderr\|optarg\|optind\|opterr\|optopt\|environ\|__environ\)$')
	if [ -n "$exported" ]; then
		bad "$prog exports its own symbols (-rdynamic?):" $exported
	fi
done

# The daemon's symbols: every global its objects define, from objects whose
# source still exists (a build directory may hold stale ones).
syms=${TMPDIR:-/tmp}/kgym-daemon-syms.$$
: > "$syms"
for o in $(find "$builddir/kgymd" -name '*.o' 2>/dev/null); do
	rel=${o#"$builddir"/}
	d=$(dirname "$rel")
	d=${d%/.libs}
	stem=$(basename "$o" .o)
	stem=${stem#*-}
	[ -f "$srcdir/$d/$stem.c" ] || continue
	nm -g --defined-only "$o" 2>/dev/null | awk 'NF == 3 {print $3}' >> "$syms"
done
sort -u -o "$syms" "$syms"
if [ ! -s "$syms" ]; then
	bad "no daemon objects under $builddir/kgymd: build first"
fi
nplugins=0
for so in "$builddir"/plugins/.libs/*.so "$builddir"/plugins/python/.libs/*.so \
    "$builddir"/tests/plugins/.libs/*.so; do
	[ -f "$so" ] || continue
	nplugins=$((nplugins + 1))
	# Defined (global or local: a linked copy of daemon code) or needed.
	common=$(nm "$so" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//' | sort -u |
	    comm -12 - "$syms")
	if [ -n "$common" ]; then
		bad "${so#"$builddir"/} defines or needs daemon symbols:" $common
	fi
	# Linked with --no-undefined: everything it needs comes from its own
	# libraries.  ldd -r names what would stay unresolved.
	if command -v ldd >/dev/null 2>&1; then
		undef=$(ldd -r "$so" 2>&1 | grep 'undefined symbol' | head -5)
		if [ -n "$undef" ]; then
			bad "${so#"$builddir"/} has undefined symbols: $undef"
		fi
	fi
done
rm -f "$syms"

# --- 2b. toolkits
# The names a built object defines itself (functions, tables), without what
# the toolchain adds to every shared object.
own_syms() {
	nm "$1" 2>/dev/null | awk '$2 ~ /^[TtDdRrBb]$/ {print $3}' |
	    grep -v '^_\|\.\|^\(kgym_plugin\|deregister_tm_clones\|register_tm_clones\|frame_dummy\|completed\)$' |
	    sort -u
}
for so in "$builddir"/plugins/.libs/*.so; do
	[ -f "$so" ] || continue
	exported=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^kgym_plugin$')
	if [ -n "$exported" ]; then
		bad "${so#"$builddir"/} exports more than kgym_plugin:" $exported
	fi
done
for tk in "$builddir"/plugins/.libs/*.so; do
	[ -f "$tk" ] || continue
	name=$(basename "$tk" .so)
	# A toolkit: its folder's sources say KGYM_PLUGIN_TOOLKIT.
	grep -qs 'KGYM_PLUGIN_TOOLKIT' "$srcdir/plugins/$name"/*.c || continue
	tksyms=${TMPDIR:-/tmp}/kgym-toolkit-syms.$$
	own_syms "$tk" > "$tksyms"
	for so in "$builddir"/plugins/.libs/*.so "$builddir"/plugins/python/.libs/*.so; do
		[ -f "$so" ] && [ "$so" != "$tk" ] || continue
		common=$(own_syms "$so" | comm -12 - "$tksyms")
		if [ -n "$common" ]; then
			bad "${so#"$builddir"/} links code of toolkit $name instead of asking" \
			    "host->toolkit:" $common
		fi
	done
	rm -f "$tksyms"
done

if [ "$nplugins" -eq 0 ]; then
	bad "no plugin found under $builddir/plugins: build first"
fi

# --- 3. file length
for f in $(find kgymd kgymctl lib plugins tests bench -name '*.c' | sort); do
	n=$(wc -l < "$f")
	if [ "$n" -gt 1500 ]; then
		bad "$f: $n lines (more than 1,500: split it by responsibility)"
	fi
done

# --- 4. the daemon's include cycle
for f in kgymd/*.c; do
	case $f in
	kgymd/control.c|kgymd/main.c) continue ;;
	esac
	awk -v f="$f" '
	    /cycle:/ { last = NR }
	    /control_[a-z_]+\(|struct conn[^a-z_]/ {
		if (last == 0 || NR - last > 5)
			printf "%s:%d: calls into control.c (or names struct conn) without a \"cycle:\" comment\n", f, NR
	    }' "$f"
done > "${TMPDIR:-/tmp}/kgym-cycle.$$"
if [ -s "${TMPDIR:-/tmp}/kgym-cycle.$$" ]; then
	while read -r l; do bad "$l"; done < "${TMPDIR:-/tmp}/kgym-cycle.$$"
fi
rm -f "${TMPDIR:-/tmp}/kgym-cycle.$$"

if [ "$fail" -eq 0 ]; then
	echo "check_boundaries: ok ($nplugins plugin objects, $(find kgymd kgymctl lib plugins tests bench -name '*.c' | wc -l) C files)"
fi
exit "$fail"
