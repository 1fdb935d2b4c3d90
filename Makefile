# SPDX-License-Identifier: MIT
# gfxgraph: thin wrapper over CMake.  Quick start on Debian 12:
#   make demo    install what is missing, build what the demo needs, run it
#   make test    the whole suite: cpu build, ASan+UBSan build, AMD and NVIDIA builds
.POSIX:
SHELL := /bin/bash

JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE   ?= cmake
CTEST   ?= ctest
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ( [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc ))
# GPU: what build/ is configured for (auto|hip|cuda|off); an explicit GPU=
# reconfigures an existing tree.  Unset, a new tree takes auto (every GPU
# compiler found is used) for `make test`, so that the CI machine's build/ is
# its AMD build, and for the other targets auto only on a machine with a GPU
# device (/dev/kfd, /dev/nvidiactl), else off: a first `make demo` without
# a GPU compiles no GPU code.  An existing tree keeps what it was given.
GPU     ?=
GPU_HAVE_DEVICE := $(shell [ -e /dev/kfd ] || [ -e /dev/nvidiactl ] && echo yes)
GPU_DEFAULT      = $(if $(GPU_HAVE_DEVICE),auto,off)
test test-main: GPU_DEFAULT = auto
GPU_EFF          = $(or $(GPU),$(GPU_DEFAULT))
# Debian packages: what a cpu build and the demo need; what the whole suite
# adds (GPU compilers, Python, fuzzing); what `make deb` adds.
DEBS_BASE = gcc make cmake pkgconf libuv1-dev libmsgpack-dev libsystemd-dev
DEBS_GPU  = hipcc libamdhip64-dev
DEBS      = $(DEBS_BASE) $(DEBS_GPU) g++ systemd python3 python3-numpy python3-pip \
            python3-prometheus-client clang libclang-rt-14-dev
DEBS_DEB  = $(DEBS_BASE) dpkg-dev debhelper lintian fakeroot
# The demo on a machine with an AMD GPU uses it (hipcc for the kernels).
DEBS_DEMO = $(DEBS_BASE) $(if $(wildcard /dev/kfd),$(DEBS_GPU))
SUDO     = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The build tree of build, demo, test-main and install.
BUILD   ?= build
# What the demo runs: the daemon, the demo client, gfxgraphctl.
DEMO_TARGETS = gfxgraphd gfxgraph-demo gfxgraphctl
# NODEPS=1: never look for or install packages (a machine, or a test, that
# has what it needs and must not run apt-get).
NODEPS  ?=

# $(call gg_install_missing,PACKAGES): apt-get install of the ones not
# installed; a machine that has everything is left alone.
define gg_install_missing
@if [ -n "$(NODEPS)" ]; then echo "build dependencies: not checked (NODEPS=$(NODEPS))"; exit 0; fi; \
	missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "build dependencies: all present"; fi
endef

.PHONY: all deps deps-demo deps-deb configure build demo test test-main test-asan test-hip test-cuda test-fuzz fuzz install clean gpu-check

all: build

deps:
	$(call gg_install_missing,$(DEBS))

deps-demo:
	$(call gg_install_missing,$(DEBS_DEMO))

deps-deb:
	$(call gg_install_missing,$(DEBS_DEB))

# A new tree is configured with GPU_EFF; an existing one only when GPU= is
# given and differs from its setting.
configure:
	@cached=$$(sed -n 's/^GFXGRAPH_GPU:STRING=//p' $(BUILD)/CMakeCache.txt 2>/dev/null || true); \
	if [ -z "$$cached" ] || { [ -n "$(GPU)" ] && [ "$$cached" != "$(GPU)" ]; }; then \
	  echo "configuring $(BUILD)/ with GFXGRAPH_GPU=$(GPU_EFF)"; \
	  $(CMAKE) -S . -B $(BUILD) -DGFXGRAPH_GPU=$(GPU_EFF) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null; \
	fi

build: deps configure
	$(CMAKE) --build $(BUILD) -j $(JOBS)

# Only the three programs the demo runs (no tests, no benchmarks).
demo: deps-demo configure
	@echo "building $(DEMO_TARGETS) in $(BUILD)/ (log: $(BUILD)/demo-build.log)"
	@$(CMAKE) --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS) >$(BUILD)/demo-build.log 2>&1 || \
	  { tail -n 40 $(BUILD)/demo-build.log; echo "make demo: the build failed"; exit 1; }
	@bash tests/scripts/demo.sh $(BUILD)

test: deps test-main test-asan test-fuzz test-hip test-cuda
	@echo "make test: all builds passed"

test-main: build
	cd $(BUILD) && $(CTEST) --output-on-failure -j $(JOBS) --timeout 300

test-asan: deps
	$(CMAKE) -S . -B build-asan -DGFXGRAPH_GPU=off -DGFXGRAPH_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --output-on-failure -j $(JOBS) --timeout 600 -LE gpu

# Fuzzing (libFuzzer, clang only; clang and libclang-rt-14-dev are in DEBS):
# build-fuzz is a clang ASan+UBSan tree with every library instrumented for
# coverage; fuzz_proto (framing, unpacking, envelopes) and fuzz_handlers (the
# server in-process on the cpu backend, every method, replays executed) each
# run FUZZ_SECONDS from the committed seeds (tests/fuzz/corpus/<target>/,
# copied: new inputs go to build-fuzz/corpus-<target>/).  A crash stops the
# run and leaves its reproducer in build-fuzz/ (crash-*, leak-*, timeout-*).
# make test runs each for FUZZ_SMOKE_SECONDS; make fuzz FUZZ_SECONDS=N longer.
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 60
FUZZ_CC            ?= clang
FUZZ_TARGETS        = fuzz_proto fuzz_handlers

build-fuzz/CMakeCache.txt:
	CC=$(FUZZ_CC) $(CMAKE) -S . -B build-fuzz -DGFXGRAPH_GPU=off -DGFXGRAPH_SANITIZE=ON \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link

fuzz-build: deps build-fuzz/CMakeCache.txt
	$(CMAKE) --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)

fuzz-run: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus-$$t; cp -n tests/fuzz/corpus/$$t/* build-fuzz/corpus-$$t/ 2>/dev/null || true; \
	  echo "== $$t: $(SECS) s"; \
	  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	    tests/$$t -max_total_time=$(SECS) -max_len=8192 -timeout=30 -rss_limit_mb=4096 \
	    -print_final_stats=1 corpus-$$t 2>&1 | tee fuzz-$$t.log | grep -E "^#[0-9]+ +(INITED|DONE)|ERROR|SUMMARY|stat::" ; \
	    exit $${PIPESTATUS[0]}) || { echo "$$t: FAILED (see build-fuzz/fuzz-$$t.log, reproducer in build-fuzz/)"; exit 1; }; \
	done

test-fuzz:
	@$(MAKE) --no-print-directory fuzz-run SECS=$(FUZZ_SMOKE_SECONDS)

fuzz:
	@$(MAKE) --no-print-directory fuzz-run SECS=$(FUZZ_SECONDS)

# The AMD build: code objects for gfx1030/gfx1031, checked by a test.
test-hip: deps
	@if [ "$$(sed -n 's/^GFXGRAPH_GPU_KIND_RESOLVED:INTERNAL=//p' $(BUILD)/CMakeCache.txt 2>/dev/null)" = hip ]; then \
	  echo "hip build: $(BUILD)/ is the hip build"; cd $(BUILD) && $(CTEST) --output-on-failure -L build; \
	else \
	  $(CMAKE) -S . -B build-hip -DGFXGRAPH_GPU=hip && $(CMAKE) --build build-hip -j $(JOBS) && \
	  cd build-hip && $(CTEST) --output-on-failure -L 'build|gpu'; \
	fi

# The NVIDIA build through the project's vendor header; needs nvcc.
test-cuda:
	@if [ -z "$(NVCC)" ]; then echo "SKIP cuda build: nvcc not found (install CUDA to build for NVIDIA)"; exit 0; fi; \
	if [ "$$(sed -n 's/^GFXGRAPH_GPU_KIND_RESOLVED:INTERNAL=//p' $(BUILD)/CMakeCache.txt 2>/dev/null)" = cuda ]; then \
	  echo "cuda build: $(BUILD)/ is the cuda build"; cd $(BUILD) && $(CTEST) --output-on-failure -L build; \
	else \
	  $(CMAKE) -S . -B build-cuda -DGFXGRAPH_GPU=cuda -DCMAKE_CUDA_COMPILER=$(NVCC) && \
	  $(CMAKE) --build build-cuda -j $(JOBS) && \
	  cd build-cuda && $(CTEST) --output-on-failure -L 'build|gpu'; \
	fi

# make install [DESTDIR=/tmp/stage] [PREFIX=/usr] [BUILD=dir]: cmake --install
# of $(BUILD) (default build/; an up-to-date tree is not rebuilt).  PREFIX
# (default: the configured one, /usr/local) is configured into $(BUILD) first
# and the daemon rebuilt, so that its built-in config path
# (<sysconfdir>/gfxgraph/gfxgraphd.conf; /etc/... for /usr) is the file this
# install writes; the systemd units are generated for that prefix too.
install: build
	$(if $(PREFIX),$(CMAKE) -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX="$(PREFIX)" && $(CMAKE) --build $(BUILD) -j $(JOBS))
	DESTDIR="$(DESTDIR)" $(CMAKE) --install $(BUILD)

clean:
	rm -rf build build-asan build-hip build-cuda

# make deb [DEB_OUT=dir] [DEB_PROFILES=pkg.gfxgraph.cpu] [DEB_OPTIONS=...]: the
# Debian packages gfxgraphd, libgfxgraph-client0 and libgfxgraph-client-dev,
# built the Debian way (debian/: dh, dpkg-buildpackage) from a copy of the
# tracked and new files in $(DEB_BUILD)/src/ (the tree itself stays clean),
# then lintian on them.  The packages land in $(DEB_OUT) (default
# build-deb/debs/).  DEB_PROFILES=pkg.gfxgraph.cpu: a daemon without the
# GPU backend; DEB_OPTIONS (default nocheck: make test runs the suite)
# becomes DEB_BUILD_OPTIONS.  debian/changelog is written from the project
# version (packaging/debian-changelog.sh).
DEB_BUILD    ?= build-deb
DEB_OUT      ?= $(DEB_BUILD)/debs
DEB_PROFILES ?=
DEB_OPTIONS  ?= nocheck
.PHONY: deb
deb: deps-deb
	rm -rf $(DEB_BUILD)/src && mkdir -p $(DEB_BUILD)/src/gfxgraph $(DEB_OUT)
	git ls-files -z --cached --others --exclude-standard | \
	  while IFS= read -r -d '' f; do [ -e "$$f" ] && printf '%s\0' "$$f"; done | \
	  xargs -0 cp --parents -t $(DEB_BUILD)/src/gfxgraph
	sh packaging/debian-changelog.sh $(DEB_BUILD)/src/gfxgraph
	cd $(DEB_BUILD)/src/gfxgraph && DEB_BUILD_OPTIONS="$(DEB_OPTIONS) parallel=$(JOBS)" \
	  DEB_BUILD_PROFILES="$(DEB_PROFILES)" dpkg-buildpackage -b -us -uc
	mv $(DEB_BUILD)/src/*.deb $(DEB_BUILD)/src/*.changes $(DEB_BUILD)/src/*.buildinfo $(DEB_OUT)/
	@echo "== lintian"
	lintian --fail-on error,warning --tag-display-limit 0 $(DEB_OUT)/*.changes
	@ls $(DEB_OUT)/*.deb
