# maskpos — build, test and sanitizer targets.
#
#   make            release-ish build of build/maskpos and build/libmaskpos.a (-O2 -g)
#   make test       build and run the C test suite (cmocka); closing line "N passed, N failed, N skipped (...)"
#   make asan       the same suite built with AddressSanitizer + UBSan in build-asan/
#   make debug      -O0 -g with sanitizers, binary only, in build-debug/
#   make release    -O3 -march=native, in build-release/ (not portable: for local benchmarks)
#   make OPENMP=0   build without OpenMP (results are identical: tests run both ways in CI)
#   make fuzz       libFuzzer runs of the checkpoint parsers (clang; FUZZ_SECONDS=180 each)
#   make CUDA=1     also the CUDA backend: build/libmaskpos-cuda.so, a plugin the binary and libmaskpos.so
#                   load for --device cuda (src/cuda/cuda.mk; the plain build links no CUDA library)
#   make MPI=1      with OpenMPI (Debian libopenmpi-dev), in build-mpi/: `mpirun -np N build-mpi/maskpos
#                   probe|simulate|reproduce ...` (docs/mpi.md); run by hand it behaves as the plain build
#   make clean
#
# CC is overridable (make CC=clang). Every library comes from Debian packages via pkg-config;
# scripts/setup.sh installs them.

CC ?= cc
MPI ?= 0
ifeq ($(MPI),1)
  BUILD ?= build-mpi
endif
BUILD ?= build
OPENMP ?= 1
# Optimisation and instrumentation; the sanitizer targets override this.
OPT ?= -O2 -g

# C11 with POSIX; warnings are errors; prototypes required everywhere.
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Werror=implicit-function-declaration -Wno-error=unused-function
STD := -std=c11 -D_DEFAULT_SOURCE -D_GNU_SOURCE
PKGS := cairo jansson libpcre2-8 libutf8proc
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# OpenMP: detected by test-compiling; reported; OPENMP=0 switches it off.
# Without OpenMP its pragmas are ignored by design, so that warning is silenced then.
OMP_FLAGS := -Wno-unknown-pragmas
ifeq ($(OPENMP),1)
  OMP_OK := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo yes)
  ifeq ($(OMP_OK),yes)
    OMP_FLAGS := -fopenmp
  else
    $(info OpenMP not found: building single-threaded)
  endif
endif

# `#pragma omp simd` marks the few loops we want vectorised whatever their trip count; honoured
# with or without OpenMP (no reduction is marked, so results never depend on vector width).
VEC := $(shell $(CC) -fopenmp-simd -x c -c /dev/null -o /dev/null 2>/dev/null && echo -fopenmp-simd)

# MPI=1: src/core/mpi.c talks to OpenMPI (the only file that does); otherwise it holds stubs.
ifeq ($(MPI),1)
  MPI_CFLAGS := -DMP_MPI $(shell pkg-config --cflags ompi-c)
  MPI_LIBS := $(shell pkg-config --libs ompi-c)
  ifeq ($(MPI_LIBS),)
    $(error MPI=1: pkg-config finds no ompi-c; HINT: apt-get install libopenmpi-dev openmpi-bin (scripts/setup.sh))
  endif
endif

CFLAGS := $(STD) $(WARN) $(OPT) $(VEC) $(OMP_FLAGS) -Iinclude -Isrc $(PKG_CFLAGS) $(MPI_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS := $(PKG_LIBS) $(MPI_LIBS) -lm $(EXTRA_LIBS)
LDFLAGS := $(filter -fopenmp,$(OMP_FLAGS)) $(EXTRA_LDFLAGS)

LIB_SRC := $(sort $(shell find src -name '*.c' ! -path 'src/cli/*' ! -path 'src/fuzz/*'))
CLI_SRC := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
HDRS := $(shell find src include tests -name '*.h')

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test asan debug release clean fuzz
all: $(BUILD)/maskpos

$(BUILD)/obj/%.o: %.c $(HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libmaskpos.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/maskpos: $(CLI_OBJ) $(BUILD)/libmaskpos.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libmaskpos.a $(LDLIBS)

# Tests are cmocka programs, one per file; they find the binary under test through MP_TEST_BIN.
$(BUILD)/tests/%: tests/%.c $(BUILD)/libmaskpos.a $(HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DMP_TEST_BIN='"$(abspath $(BUILD))/maskpos"' -DMP_SOURCE_DIR='"$(CURDIR)"' \
	    $< -o $@ $(LDFLAGS) $(BUILD)/libmaskpos.a $(LDLIBS) $(shell pkg-config --libs cmocka)

# The viewer's page script and style (src/viz/view.js, view.css) become C string literals that
# src/viz/view.c includes (src/viz/view.awk: one literal per line, nothing beyond awk).
CFLAGS += -I$(BUILD)/gen
$(BUILD)/gen/viz/view_assets.h: src/viz/view.css src/viz/view.js src/viz/view.awk
	@mkdir -p $(dir $@)
	awk -f src/viz/view.awk src/viz/view.css src/viz/view.js > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/src/viz/view.o: $(BUILD)/gen/viz/view_assets.h

test: $(BUILD)/maskpos $(TEST_BIN)
	@scripts/run_tests.sh $(BUILD)

# AddressSanitizer + UBSan: every UB report is fatal.
SAN := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_BUILD ?= build-asan
asan:
	$(MAKE) BUILD=$(ASAN_BUILD) OPT="$(SAN)" EXTRA_LDFLAGS="-fsanitize=address,undefined" test

debug:
	$(MAKE) BUILD=build-debug OPT="-O0 -g -fsanitize=address,undefined" EXTRA_LDFLAGS="-fsanitize=address,undefined" all

# Native-tuned build for local benchmarking only.
release:
	$(MAKE) BUILD=build-release OPT="-O3 -march=native -g" all

# libFuzzer (clang) targets for the checkpoint parsers, FUZZ_SECONDS each (tests/fuzz/Makefile).
fuzz: $(BUILD)/maskpos
	$(MAKE) -f tests/fuzz/Makefile fuzz MASKPOS=$(BUILD)/maskpos

clean:
	rm -rf build build-asan build-debug build-release build-noomp build-fuzz build-mpi

# ---- shared library, pkg-config file and install (the public C API: include/maskpos.h, src/api/)
#   make                      also builds build/libmaskpos.so -> libmaskpos.so.0 -> libmaskpos.so.0.1.0
#   make install PREFIX=DIR   bin/maskpos, lib/libmaskpos.{so*,a}, include/maskpos.h,
#                             lib/pkgconfig/maskpos.pc and the Python package (PYTHONDIR)
# Every object is position-independent (one set of objects serves the static library, the binary,
# the tests and the shared library) and hidden by default: libmaskpos.so exports only the
# MASKPOS_API functions of include/maskpos.h. Neither flag changes a computed bit.
CFLAGS += -fPIC -fvisibility=hidden
MP_VERSION_FULL := $(shell sed -n 's/^\#define MP_VERSION "\(.*\)"/\1/p' src/core/json.h)
MP_SONAME := libmaskpos.so.$(firstword $(subst ., ,$(MP_VERSION_FULL)))
MP_SOFILE := libmaskpos.so.$(MP_VERSION_FULL)
all: $(BUILD)/libmaskpos.so
test: $(BUILD)/libmaskpos.so
$(BUILD)/$(MP_SOFILE): $(LIB_OBJ) src/api/maskpos.map
	$(CC) -shared -Wl,-soname,$(MP_SONAME) -Wl,--no-undefined -Wl,--version-script=src/api/maskpos.map -o $@ $(LIB_OBJ) $(LDFLAGS) $(LDLIBS)
$(BUILD)/libmaskpos.so: $(BUILD)/$(MP_SOFILE)
	ln -sf $(MP_SOFILE) $(BUILD)/$(MP_SONAME)
	ln -sf $(MP_SONAME) $@

PREFIX ?= /usr/local
DESTDIR ?=
PYTHON ?= /usr/bin/python3
MP_PYVER := $(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)
PYTHONDIR ?= $(PREFIX)/lib/$(MP_PYVER)/dist-packages
.PHONY: install
install: $(BUILD)/maskpos $(BUILD)/libmaskpos.so $(BUILD)/libmaskpos.a
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PYTHONDIR)/maskpos
	install -m 755 $(BUILD)/maskpos $(DESTDIR)$(PREFIX)/bin/maskpos
	install -m 755 $(BUILD)/$(MP_SOFILE) $(DESTDIR)$(PREFIX)/lib/$(MP_SOFILE)
	ln -sf $(MP_SOFILE) $(DESTDIR)$(PREFIX)/lib/$(MP_SONAME)
	ln -sf $(MP_SONAME) $(DESTDIR)$(PREFIX)/lib/libmaskpos.so
	install -m 644 $(BUILD)/libmaskpos.a $(DESTDIR)$(PREFIX)/lib/libmaskpos.a
	install -m 644 include/maskpos.h $(DESTDIR)$(PREFIX)/include/maskpos.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(MP_VERSION_FULL)|' \
	    -e 's|@LIBS_PRIVATE@|$(filter -fopenmp,$(OMP_FLAGS)) $(MPI_LIBS) -lm|' \
	    -e 's|@REQUIRES_PRIVATE@|$(PKGS)|' src/api/maskpos.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/maskpos.pc
	install -m 644 python/maskpos/*.py $(DESTDIR)$(PYTHONDIR)/maskpos/
	printf '# written by make install: where this copy of the package finds its library\nLIBDIR = "%s"\n' \
	    '$(PREFIX)/lib' > $(DESTDIR)$(PYTHONDIR)/maskpos/_libdir.py

# ---- device backends as plugins (src/model/fwd_plugin.c loads them for --device cuda)
# tests/test_plugin.c loads a stand-in plugin (tests/plugin_stub.c) built three ways: the right
# interface version, another one, and without the entry function.
PLUGIN_STUBS := $(BUILD)/tests/plugin_stub.so $(BUILD)/tests/plugin_stub_abi.so $(BUILD)/tests/plugin_stub_noentry.so
$(BUILD)/tests/plugin_stub.so: STUB_DEFS :=
$(BUILD)/tests/plugin_stub_abi.so: STUB_DEFS := -DSTUB_OTHER_ABI
$(BUILD)/tests/plugin_stub_noentry.so: STUB_DEFS := -DSTUB_NO_ENTRY
$(PLUGIN_STUBS): tests/plugin_stub.c $(HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(STUB_DEFS) -shared -o $@ $< $(LDFLAGS)
$(BUILD)/tests/test_plugin: $(PLUGIN_STUBS)
CUDA ?= 0
ifeq ($(CUDA),1)
  include src/cuda/cuda.mk
endif
