"""Finds the CUDA toolkit for `--config=cuda` builds.

The toolkit is taken from $SHARDWISE_CUDA_PATH, or /usr/local/cuda when that is unset. It
must hold bin/nvcc, include/ (cuda_runtime.h, cublas_v2.h, nccl.h, cudnn.h) and lib64/
(libcudart, libcublas, libnccl, libcudnn, libcupti). Nothing here is fetched from the network.

When no toolkit is found the repository still loads, so CPU-only builds never depend on
CUDA; building a CUDA target then fails at its first nvcc call with a message that names
the path searched and the setting that changes it.
"""

_BUILD_FOUND = """
package(default_visibility = ["//visibility:public"])

sh_binary(
    name = "nvcc",
    srcs = ["nvcc.sh"],
)

cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inl"]),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart"],
    deps = [":headers"],
)

cc_library(
    name = "cublas",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas"],
    deps = [":cudart"],
)

# cuBLASLt: the GEMMs with epilogues (bias, GELU) that cuBLAS's GemmEx has not.
cc_library(
    name = "cublaslt",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublasLt"],
    deps = [":cudart"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lnccl"],
    deps = [":cudart"],
)

# cuDNN 9 (its graph API: cudnn_graph.h, libcudnn.so.9, which loads its engine libraries).
cc_library(
    name = "cudnn",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudnn"],
    deps = [":cudart"],
)

# CUPTI's activity API (cupti.h, libcupti): the GPU busy-time trace (bench/gpu_busy).
cc_library(
    name = "cupti",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcupti"],
    deps = [":headers"],
)
"""

_BUILD_MISSING = """
package(default_visibility = ["//visibility:public"])

sh_binary(
    name = "nvcc",
    srcs = ["nvcc.sh"],
)

cc_library(name = "headers")
cc_library(name = "cudart")
cc_library(name = "cublas")
cc_library(name = "cublaslt")
cc_library(name = "nccl")
cc_library(name = "cudnn")
cc_library(name = "cupti")
"""

def _cuda_configure_impl(ctx):
    path = ctx.os.environ.get("SHARDWISE_CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(path + "/bin/nvcc")
    if not nvcc.exists:
        ctx.file("nvcc.sh", "\n".join([
            "#!/bin/sh",
            "echo 'cuda_configure: no CUDA toolkit at %s (no bin/nvcc there); " % path +
            "set SHARDWISE_CUDA_PATH to the toolkit and build again' >&2",
            "exit 1",
            "",
        ]), executable = True)
        ctx.file("BUILD", _BUILD_MISSING)
        return
    ctx.symlink(path + "/include", "include")
    ctx.file("nvcc.sh", "#!/bin/sh\nexec '%s' \"$@\"\n" % nvcc, executable = True)
    ctx.file("BUILD", _BUILD_FOUND.replace("{lib}", path + "/lib64"))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["SHARDWISE_CUDA_PATH"],
    local = True,
)
