"""Stand-in for rules_java: re-exports Bazel's native Java rules (Shardwise has no Java)."""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_proto_library = native.java_proto_library
java_runtime = native.java_runtime
java_test = native.java_test
java_toolchain = native.java_toolchain
