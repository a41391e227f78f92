#!/bin/sh
# Runs redis-server under valgrind memcheck, for the integration tests:
#   XSTREAM_REDIS_SERVER=$PWD/bench/valgrind-redis-server.sh XSTREAM_START_TIMEOUT_S=60 \
#     cargo test --release --test differential -- --test-threads=1
# Reports go to /tmp/xstream-vg-<pid>.log. Debian's redis-server uses jemalloc, so memcheck
# sees the module's heap (Redis's allocator) only coarsely: invalid reads and writes inside
# jemalloc's arenas are not detected; uninitialised values, bad frees and leaks of whole
# blocks are.
exec valgrind --tool=memcheck --error-exitcode=0 --track-origins=no --leak-check=no \
    --log-file=/tmp/xstream-vg-%p.log redis-server "$@"
