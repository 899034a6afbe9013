# Makefile - builds the runtime library (kernels/), the tools, the tests.
#   make            library, tools and tests (gcc, -O3 -march=native)
#   make test       build and run the test suite
#   make sanitize   the test suite under AddressSanitizer + UBSan
#   make portable   the test suite without AVX-512 (the portable vector paths)
#   make tune       the main job: tune --chip m4max (TUNE_ARGS='--chip host' etc.)
#   make bench      bench on this machine (BENCH_ARGS; default: the smoke suite)
#   make kernel-bench  the CPU model's kernel benchmark (KERNEL_BENCH_ARGS)
#   make nightly    the nightly A/B regression run (make nightly-accept: new baseline;
#                   make nightly-bisect GOOD=REV BAD=REV: the commit that slowed a kernel)
#   make plots      redraw the README's pictures from the committed example results
#   make fuzz-run   the parsers' libFuzzer targets, a few seconds each (make fuzz: build)
#   make race       the MSL executor under ThreadSanitizer: a missing barrier is a race
#   make install    libmq.a, mq.h, the tools and mq.pc under PREFIX (/usr/local)
#   make deps       install libgsl-dev, libcsv-dev, gnuplot, parallel, rsync, slurm-wlm
#                   (and clang) with apt-get if missing; on macOS gsl, libcsv,
#                   gnuplot, parallel with Homebrew
# Linux and macOS (Apple Silicon and Intel; scripts/macos-cross.sh links the
# macOS arm64 build on Linux, for CI).
# CPPFLAGS, CFLAGS, LDFLAGS and LDLIBS from the command line or the
# environment are honoured (e.g. LDFLAGS=-L/opt/gsl/lib CPPFLAGS=-I/opt/gsl/include).
ifeq ($(origin CC),default)
CC = gcc
endif
# The platform, uname's unless given: scripts/macos-cross.sh sets UNAME_S=Darwin
# UNAME_M=arm64 (and BREW_PREFIX to its own GSL and libcsv) to build the macOS
# flavour on Linux.
UNAME_S ?= $(shell uname -s)
UNAME_M ?= $(shell uname -m)
ifeq ($(UNAME_S),Darwin)
# Apple clang refuses -march=native on arm64 ("does not support '-march=native'"
# before Xcode 15); -mcpu=apple-m1 (Xcode 13 on) is every Apple Silicon chip's
# baseline, -mcpu=native (Xcode 15 on) the chip's own: ARCH=-mcpu=native.
ifeq ($(UNAME_M),arm64)
ARCH    ?= -mcpu=apple-m1
PORTABLE_ARCH ?= -mcpu=apple-m1
endif
# Homebrew's headers and libraries (gsl, libcsv): /opt/homebrew on Apple
# Silicon, /usr/local on Intel; after the command line's flags
ifeq ($(origin BREW_PREFIX),undefined)
BREW_PREFIX := $(or $(shell brew --prefix 2>/dev/null),$(if $(filter arm64,$(UNAME_M)),/opt/homebrew,/usr/local))
endif
override CPPFLAGS += -I$(BREW_PREFIX)/include
override LDFLAGS  += -L$(BREW_PREFIX)/lib
DYLIB_EXT = .dylib
else
DYLIB_EXT = .so
endif
# make portable: no AVX-512 (on arm64 every build is without it)
PORTABLE_ARCH ?= -march=x86-64-v2 -Wno-psabi
ARCH    ?= -march=native
OPT     ?= -O3
SAN     ?=
CFLAGS  ?= $(OPT) $(ARCH) -g $(SAN)
# required flags, kept even when CFLAGS is given on the command line
override CFLAGS += -DMQ_SOURCE_DIR='"$(CURDIR)"' -std=c11 -D_DEFAULT_SOURCE -ffp-contract=fast -Wall -Wextra -pthread $(if $(WERROR),-Werror) $(if $(PLANT),-DMQ_PLANT)
override LDLIBS += -lgsl -lgslcblas -lcsv -lm -pthread -ldl
BUILD   ?= build
PREFIX  ?= /usr/local

# The floors, lowest first. A folder's files see the headers of its own
# floor and the floors below it, never above (tests/check_layers.sh checks
# the include graph too): kernels <- metal <- backends <- harness <- tuner <- plots.
FLOORS = kernels metal backends harness tuner plots
INC_kernels  = -Ikernels
INC_metal    = $(INC_kernels) -Imetal
INC_backends = $(INC_metal) -Ibackends
INC_harness  = $(INC_backends) -Iharness
INC_tuner    = $(INC_harness) -Ituner
INC_plots    = $(INC_tuner) -Iplots
# the tests also see inside each backend's folder (backends/metal, cuda, msl_cpu)
INC_tests    = $(INC_plots) $(BACKEND_DIRS:%=-I%) -Itests -Itests/fuzz
floor_of     = $(firstword $(subst /, ,$(1)))

# a backend's own files live in its folder under backends/; a file there
# includes its folder's headers by name and another floor's by -I
BACKEND_DIRS = backends/metal backends/cuda backends/msl_cpu
# the command-line tools: one main() each, in FLOOR/TOOL_main.c (the tool
# kernel-bench is harness/kernel_bench_main.c)
MAINS    = $(wildcard $(addsuffix /*_main.c,$(FLOORS)))
LIB_SRC  = $(wildcard kernels/*.c)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      = $(BUILD)/libmq.a
objs_of  = $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(MAINS),$(wildcard $(1)/*.c)))
METAL_OBJ    = $(call objs_of,metal)
BACKENDS_OBJ = $(call objs_of,backends) $(foreach d,$(BACKEND_DIRS),$(call objs_of,$(d)))
HARNESS_OBJ  = $(call objs_of,harness) $(BACKENDS_OBJ) $(METAL_OBJ)
TUNER_OBJ    = $(call objs_of,tuner) $(HARNESS_OBJ)
PLOTS_OBJ    = $(call objs_of,plots) $(TUNER_OBJ)
TEST_SRC = $(filter-out tests/check.c,$(wildcard tests/test_*.c))
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# the fault tests' LD_PRELOAD (DYLD_INSERT_LIBRARIES) library: never sanitized
# (it loads into any build)
FAULT_LIB = $(BUILD)/tests/libfault_inject$(DYLIB_EXT)
TOOLS    = $(BUILD)/kernel-bench $(BUILD)/bench $(BUILD)/merge $(BUILD)/moe-bench $(BUILD)/tune $(BUILD)/model $(BUILD)/compare $(BUILD)/plot
GIT_REV := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
HEADERS  = $(foreach f,$(FLOORS) $(BACKEND_DIRS) tests,$(wildcard $(f)/*.h))
# the kernel build: what a results row, a table or a model measured. The
# kernels with their planner, cost model and CPU model (kernels/), the MSL
# (metal/), and each backend's translation of the MSL (the preludes and the
# translators): a change to any of them makes earlier measurements another
# build's. POSIX cksum (CRC and size): the same on Linux and macOS.
KERNEL_BUILD_FILES = $(sort $(wildcard kernels/*.c kernels/*.h metal/*)) backends/msl_program.c \
  backends/cuda/metal_stdlib backends/cuda/metal_stdlib_mma backends/cuda/cuda_compile.c \
  backends/msl_cpu/metal_stdlib backends/msl_cpu/msl_translate.c
KERNEL_BUILD := $(shell cat $(KERNEL_BUILD_FILES) | cksum | awk '{printf "k%08x-%x", $$1, $$2}')

include tests/objc_standin/standin.mk

.PHONY: all test test-gpu sanitize portable race fuzz fuzz-targets fuzz-run bench kernel-bench tune plots nightly nightly-accept nightly-bisect deps install clean FORCE
# keep intermediate objects (no "rm" after the test summary), but not one a
# failed recipe left behind (zig's cross cc leaves an empty object on an error,
# which the next make would take as built)
.SECONDARY:
.DELETE_ON_ERROR:
all: $(LIB) $(TOOLS) $(TEST_BIN) $(STANDIN_LIB) $(MSGSEND_ABI)

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(INC_$(call floor_of,$<)) -c $< -o $@

# the build's identity goes into every result row: rebuilt every time
$(BUILD)/harness/version.o: harness/version.c FORCE
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DMQ_GIT_REV='"$(GIT_REV)"' $(INC_harness) -c $< -o $@

$(BUILD)/kernels/kernel_build.o: kernels/kernel_build.c $(KERNEL_BUILD_FILES) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -DMQ_KERNEL_BUILD='"$(KERNEL_BUILD)"' $(INC_kernels) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(BUILD)/tests/check.o $(BUILD)/tests/testdata.o $(PLOTS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/kernel-bench: $(BUILD)/harness/kernel_bench_main.o $(HARNESS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/bench: $(BUILD)/harness/bench_main.o $(HARNESS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/merge: $(BUILD)/harness/merge_main.o $(HARNESS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/moe-bench: $(BUILD)/harness/moe_bench_main.o $(HARNESS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tune: $(BUILD)/tuner/tune_main.o $(TUNER_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/model: $(BUILD)/tuner/model_main.o $(TUNER_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/compare: $(BUILD)/plots/compare_main.o $(PLOTS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/plot: $(BUILD)/plots/plot_main.o $(PLOTS_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(FAULT_LIB): tests/fault_inject.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fPIC -shared -Wall -Wextra $(if $(WERROR),-Werror) $< -ldl -o $@

# the tests run one at a time, and a make -jN's jobserver is taken out of the
# MAKEFLAGS they see (test_nightly.sh's builds run as under a plain make test)
test: deps $(TEST_BIN) $(TOOLS) $(FAULT_LIB) $(STANDIN_LIB) $(MSGSEND_ABI)
	@$(if $(filter -j%,$(MAKEFLAGS)),MAKEFLAGS='$(filter-out -j% --jobserver%,$(MAKEFLAGS))') \
	  scripts/run-tests.sh $(TEST_BIN) "tests/test_cli.sh $(BUILD)" "tests/test_plot.sh $(BUILD)" \
	  "tests/test_metal_standin.sh $(BUILD)" $(MSGSEND_ABI) tests/test_msgsend_arm64.sh \
	  "tests/test_badinput.sh $(BUILD)" "tests/test_faults.sh $(BUILD)" \
	  "tests/test_tune_resume.sh $(BUILD)" "tests/test_stale.sh $(BUILD)" "tests/test_install.sh $(BUILD)" tests/check_layers.sh tests/check_portable_sh.sh \
	  "tests/test_hostile.sh $(BUILD)" "tests/test_merge.sh $(BUILD)" tests/check_files.sh \
	  "tests/check_cycles.sh $(BUILD)" "tests/check_docs.sh $(BUILD)" \
	  "tests/test_sweep.sh $(BUILD)" \
	  $(if $(filter build,$(BUILD)),tests/test_nightly.sh)

# The GPU tests (tests/gpu_cuda.c): the cuda backend on an NVIDIA GPU, every
# variant x format verified against the float64 reference; needs the CUDA
# driver and NVRTC (CI has neither: scripts/gpu-run.sh runs it on a GPU machine,
# which may have no package network, hence no deps step)
test-gpu: $(BUILD)/tests/gpu_cuda $(TOOLS)
	$(BUILD)/tests/gpu_cuda

# make sanitize and make portable run the suite again in another build;
# MQ_TEST_REPEAT names it to the tests, so what checks a compiler (NVRTC,
# clang) and not this build runs in full in make test only: test_nvrtc is
# skipped, and test_metal's and test_cuda_prelude's clang sweeps compile a
# covering subset (each saying so in a "skipped on make ...:" line)
sanitize:
	MQ_TEST_REPEAT="make sanitize" $(MAKE) BUILD=build-san OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" test

portable:
	MQ_TEST_REPEAT="make portable" $(MAKE) BUILD=build-portable ARCH="$(PORTABLE_ARCH)" test

# libFuzzer targets, one per parser (tests/fuzz/), under ASan + UBSan with
# clang; `make fuzz-run` runs each FUZZ_SECONDS seconds from seed corpora of
# the committed files (scripts/fuzz.sh)
FUZZ_TARGETS = results table chips suite model compare cli public \
               manifest merge moe_results routing weight_cache tiers
FUZZ_SECONDS ?= 5
fuzz: deps
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 \
	  SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  fuzz-targets

fuzz-targets: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

$(BUILD)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/fuzz_common.o $(PLOTS_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) $^ $(LDLIBS) -o $@

fuzz-run: fuzz
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

# The executor and a kernel module under ThreadSanitizer (tests/msl_race.c):
# clang, its own build directory, the module compiled with -fsanitize=thread
# too; a report stops the launch's child with status 66.
race: deps
	$(MAKE) BUILD=build-tsan CC=clang OPT=-O1 SAN="-fsanitize=thread -fno-omit-frame-pointer" \
	  build-tsan/tests/msl_race
	MQ_MSL_CXX=clang++ MQ_MSL_CACHE=build-tsan/msl-cache \
	  TSAN_OPTIONS="halt_on_error=1 exitcode=66" build-tsan/tests/msl_race

bench: deps $(BUILD)/bench
	$(BUILD)/bench $(BENCH_ARGS)

kernel-bench: deps $(BUILD)/kernel-bench
	$(BUILD)/kernel-bench $(KERNEL_BENCH_ARGS)

# the README's pictures, redrawn from the committed example results
SWEEP = results/host/examples/sweep-fp4-4096x14336.csv
plots: deps $(BUILD)/plot
	$(BUILD)/plot occupancy --chip host --shape 1x4096x14336 --results $(SWEEP)
	$(BUILD)/plot occupancy --chip host --shape 16x4096x14336 --results $(SWEEP)
	$(BUILD)/plot splitk --chip host --shape 1x4096x14336 --results $(SWEEP)
	$(BUILD)/plot roofline --chip host --results $(SWEEP)
	$(BUILD)/plot model --chip host --results $(SWEEP)
	$(BUILD)/plot occupancy --chip m4max --shape 1x4096x14336
	$(BUILD)/plot splitk --chip m4max --shape 1x4096x14336
	$(BUILD)/plot history --nightly-dir results/host/examples/nightly
	$(BUILD)/plot moe --results results/devcpu/moe-decode.csv --out results/devcpu/plots
	$(BUILD)/plot moe --results results/devcpu/moe-prefill.csv --out results/devcpu/plots

nightly: deps
	scripts/nightly.sh

nightly-accept:
	scripts/nightly.sh --accept

# make nightly-bisect GOOD=REV BAD=REV [BENCH=TEXT]: the first commit after
# GOOD that the A/B finds slower (scripts/nightly.sh bisect)
nightly-bisect:
	@test -n "$(GOOD)" -a -n "$(BAD)" || { echo "usage: make nightly-bisect GOOD=REV BAD=REV [BENCH=TEXT]" >&2; exit 2; }
	scripts/nightly.sh bisect $(GOOD) $(BAD) $(if $(BENCH),--bench '$(BENCH)')

tune: deps $(BUILD)/tune
	$(BUILD)/tune $(if $(TUNE_ARGS),$(TUNE_ARGS),--chip m4max)

# The library and its header, the tools, and a pkg-config file. The tools
# read harness/chips.csv, metal/ and plots/*.gp from the source tree they
# were built in (MQ_SOURCE_DIR) unless MQ_CHIPS / MQ_METAL_DIR say otherwise.
install: $(LIB) $(TOOLS)
	scripts/install.sh $(BUILD) $(DESTDIR)$(PREFIX) $(PREFIX)

deps:
	@scripts/install-deps.sh

clean:
	rm -rf build build-san build-portable build-clang build-fuzz build-tsan build-macos
