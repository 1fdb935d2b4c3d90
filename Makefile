# gfxgraph: thin wrapper over CMake.  Quick start on Debian 12:
#   make demo    install what is missing, build, run the demo against a daemon
#   make test    the whole suite: cpu build, ASan+UBSan build, AMD and NVIDIA builds
.POSIX:
SHELL := /bin/bash

JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
GPU     ?= auto
CMAKE   ?= cmake
CTEST   ?= ctest
NVCC    ?= $(shell command -v nvcc 2>/dev/null || ( [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc ))
DEBS     = gcc g++ make cmake pkgconf libuv1-dev libmsgpack-dev libsystemd-dev systemd \
           hipcc libamdhip64-dev
SUDO     = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo test test-main test-asan test-hip test-cuda install clean gpu-check

all: build

# Install only what is missing; a machine that has everything is left alone.
deps:
	@missing=""; for p in $(DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "build dependencies: all present"; fi

build/CMakeCache.txt:
	$(CMAKE) -S . -B build -DGFXGRAPH_GPU=$(GPU) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps build/CMakeCache.txt
	$(CMAKE) --build build -j $(JOBS)

demo: build
	@bash tests/scripts/demo.sh build

test: deps test-main test-asan test-hip test-cuda
	@echo "make test: all builds passed"

test-main: build
	cd build && $(CTEST) --output-on-failure -j $(JOBS) --timeout 300

test-asan: deps
	$(CMAKE) -S . -B build-asan -DGFXGRAPH_GPU=off -DGFXGRAPH_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	$(CMAKE) --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --output-on-failure -j $(JOBS) --timeout 600 -LE gpu

# The AMD build: code objects for gfx1030/gfx1031, checked by a test.
test-hip: deps
	@if [ "$$(sed -n 's/^GFXGRAPH_GPU_KIND_RESOLVED:INTERNAL=//p' build/CMakeCache.txt 2>/dev/null)" = hip ]; then \
	  echo "hip build: build/ is the hip build"; cd build && $(CTEST) --output-on-failure -L build; \
	else \
	  $(CMAKE) -S . -B build-hip -DGFXGRAPH_GPU=hip && $(CMAKE) --build build-hip -j $(JOBS) && \
	  cd build-hip && $(CTEST) --output-on-failure -L 'build|gpu'; \
	fi

# The NVIDIA build through the project's vendor header; needs nvcc.
test-cuda:
	@if [ -z "$(NVCC)" ]; then echo "SKIP cuda build: nvcc not found (install CUDA to build for NVIDIA)"; exit 0; fi; \
	if [ "$$(sed -n 's/^GFXGRAPH_GPU_KIND_RESOLVED:INTERNAL=//p' build/CMakeCache.txt 2>/dev/null)" = cuda ]; then \
	  echo "cuda build: build/ is the cuda build"; cd build && $(CTEST) --output-on-failure -L build; \
	else \
	  $(CMAKE) -S . -B build-cuda -DGFXGRAPH_GPU=cuda -DCMAKE_CUDA_COMPILER=$(NVCC) && \
	  $(CMAKE) --build build-cuda -j $(JOBS) && \
	  cd build-cuda && $(CTEST) --output-on-failure -L 'build|gpu'; \
	fi

# make install [DESTDIR=/tmp/stage] [PREFIX=/usr]: cmake --install of build/.
# PREFIX (default: the configured one, /usr/local) is configured into build/
# first and the daemon rebuilt, so that its built-in config path
# (<sysconfdir>/gfxgraph/gfxgraphd.conf; /etc/... for /usr) is the file this
# install writes.
install: build
	$(if $(PREFIX),$(CMAKE) -S . -B build -DCMAKE_INSTALL_PREFIX="$(PREFIX)" && $(CMAKE) --build build -j $(JOBS))
	DESTDIR="$(DESTDIR)" $(CMAKE) --install build

clean:
	rm -rf build build-asan build-hip build-cuda
