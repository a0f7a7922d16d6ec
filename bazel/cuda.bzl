"""CUDA targets: built with `--config=cuda`, skipped (as incompatible) otherwise.

A default build needs no CUDA toolkit: every target here carries CUDA_ONLY, so `//...`
skips it, and binaries add their CUDA parts through `select` on //bazel:cuda.
"""

CUDA_ONLY = select({
    "//bazel:cuda": [],
    "//conditions:default": ["//bazel:incompatible"],
})

# Machine code for Ampere (sm_80) and Hopper (sm_90), plus Hopper PTX that newer GPUs
# compile at load time.
_GENCODE = " ".join([
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
])

_NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler=-fPIC,-Wall",
    "-I.",
    _GENCODE,
])

def cuda_library(name, srcs, hdrs = [], cuda_hdrs = [], deps = [], **kwargs):
    """A cc_library whose `srcs` are .cu files compiled by nvcc.

    Args:
      name: the library.
      srcs: .cu files.
      hdrs: the library's public headers (plain C++; no CUDA types needed to include them).
      cuda_hdrs: other headers the .cu files include (for rebuilds when they change).
      deps: cc deps of the library's users (usually @local_cuda//:cudart).
      **kwargs: passed to cc_library.
    """
    objects = []
    for src in srcs:
        obj = "_%s_%s.o" % (name, src.replace("/", "_").replace(".cu", ""))
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs + cuda_hdrs,
            outs = [obj],
            tools = ["@local_cuda//:nvcc"],
            cmd = "$(location @local_cuda//:nvcc) %s -c $(location %s) -o $@" % (_NVCC_FLAGS, src),
            target_compatible_with = CUDA_ONLY,
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps,
        target_compatible_with = CUDA_ONLY,
        **kwargs
    )
