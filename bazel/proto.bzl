"""Generates C++ protobuf and gRPC code with Debian's protoc and grpc_cpp_plugin."""

def shardwise_proto_library(name, srcs, deps = [], grpc = False):
    """A cc_library holding the generated code for `srcs` (paths under //proto).

    Args:
      name: the cc_library's name.
      srcs: .proto files in this package.
      deps: other shardwise_proto_library targets the protos import.
      grpc: also generate gRPC service stubs.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]

    plugin = ""
    if grpc:
        plugin = " --plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) --grpc_out=$(GENDIR)"

    native.genrule(
        name = name + "_gen",
        srcs = srcs + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = "PATH=/usr/bin:/bin protoc -I. --cpp_out=$(GENDIR)" + plugin +
              " " + " ".join(["$(location " + s + ")" for s in srcs]),
    )
    native.filegroup(name = name + "_srcs", srcs = srcs)

    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party/system:grpc" if grpc else "//third_party/system:protobuf"],
    )
