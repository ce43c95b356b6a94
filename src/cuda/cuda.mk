# src/cuda/cuda.mk — make CUDA=1: the CUDA backend as a plugin, included by the Makefile.
#
#   make CUDA=1        also builds BUILD/libmaskpos-cuda.so (src/cuda/*.cu, nvcc) and the GPU test
#                      program BUILD/tests/test_cuda (tests/cuda/test_cuda.c; on a machine without a
#                      GPU it says so and its tests count as expected skips)
#   CUDA_ARCHS="80 90" the GPUs' compute capabilities to build machine code for (default 80 90:
#                      A100, H100/H200), plus PTX of the last one for newer GPUs (JIT-compiled at start)
#
# The plain build is unchanged and links no CUDA library: BUILD/maskpos and libmaskpos.so dlopen the
# plugin for --device cuda (src/model/fwd_plugin.c). The plugin holds the CUDA runtime (static) and
# needs libcublasLt.so.13 at run time: found through its RUNPATH ($CUDA_HOME/lib64) or
# LD_LIBRARY_PATH (scripts/device_check.sh points it at the GPU machine's own copy).
# Every kernel file is compiled with --fmad=false: no a·b+c is contracted unless written as fmaf, so
# the ops that claim the CPU's bits (additions, bf16 rounding, the probe's float64 sums) keep them.

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
ifeq ($(wildcard $(NVCC)),)
  $(error CUDA=1: no nvcc at $(NVCC); HINT: set CUDA_HOME to the CUDA 13 toolkit (/usr/local/cuda))
endif
CUDA_ARCHS ?= 80 90
CUDA_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
                -gencode=arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS))
NVCC_FLAGS := -std=c++17 -O2 -lineinfo --fmad=false $(CUDA_GENCODE) \
              -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror,-Wno-unused-function \
              -Iinclude -Isrc -DMP_CUDA_ARCHS='"$(CUDA_ARCHS)"'
CUDA_SRC := $(sort $(wildcard src/cuda/*.cu))
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/obj/%.o)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcublasLt -Xlinker -rpath=$(CUDA_HOME)/lib64

$(BUILD)/obj/src/cuda/%.o: src/cuda/%.cu $(HDRS) $(wildcard src/cuda/*.cuh) Makefile src/cuda/cuda.mk
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# One exported symbol (maskpos_fwd_plugin, src/cuda/plugin.map); the CUDA runtime linked statically.
$(BUILD)/libmaskpos-cuda.so: $(CUDA_OBJ) src/cuda/plugin.map
	$(NVCC) -shared $(CUDA_GENCODE) -cudart static -o $@ $(CUDA_OBJ) -Xlinker --version-script=src/cuda/plugin.map $(CUDA_LIBS)

# The GPU test: the kernels linked in directly (not through the plugin), the CPU references from
# libmaskpos.a.
$(BUILD)/tests/test_cuda: tests/cuda/test_cuda.c $(CUDA_OBJ) $(BUILD)/libmaskpos.a $(HDRS) Makefile src/cuda/cuda.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -I$(CUDA_HOME)/include -DMP_TEST_BIN='"$(abspath $(BUILD))/maskpos"' -DMP_SOURCE_DIR='"$(CURDIR)"' \
	    -c $< -o $@.o
	$(CC) $(LDFLAGS) -o $@ $@.o $(CUDA_OBJ) $(BUILD)/libmaskpos.a $(LDLIBS) $(shell pkg-config --libs cmocka) \
	    -L$(CUDA_HOME)/lib64 -lcublasLt -lcudart_static -lstdc++ -ldl -lrt -lpthread -Wl,-rpath,$(CUDA_HOME)/lib64
	@rm -f $@.o

all: $(BUILD)/libmaskpos-cuda.so
test: $(BUILD)/libmaskpos-cuda.so $(BUILD)/tests/test_cuda
