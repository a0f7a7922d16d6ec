# shellcheck shell=bash
# The programs each step of ./dev.sh runs that are not the project's own, each with the
# Debian package it comes from. Sourced by dev.sh and deploy/local/run.sh; not a program.
#
#   check_prerequisites STEP...   prints one line per missing program, naming its Debian
#                                 package and the step, and returns 1 if any is missing
#   missing_prerequisites STEP... the missing ones as "STEP PROGRAM PACKAGE" lines
#   report_missing LINES          what check_prerequisites says, for lines already found
#   packages_of LINES             the packages those lines name, once each
#
# A step that calls a new program adds a line here, so that a fresh machine fails with
# "missing iptables (Debian package iptables) ..." before the step starts, not with an
# error from deep inside podman. Nothing here installs: dev.sh does (DEBIAN_PACKAGES,
# DEPLOY_PACKAGES), and tools/fresh_machine.sh checks the two agree on a new Debian root.
#
# Each line: STEP PROGRAM PACKAGE. PROGRAM is a command looked up on PATH (and in the sbin
# folders, which a non-root PATH may lack), an absolute path (programs that podman runs
# from its own folders), or python3:MODULE (a module Debian's /usr/bin/python3 imports).
PREREQUISITES="
build   bazel                       bazel-bootstrap
build   g++                         g++
build   protoc                      protobuf-compiler
build   grpc_cpp_plugin             protobuf-compiler-grpc
build   grpc_python_plugin          protobuf-compiler-grpc
build   /usr/bin/python3            python3
build   tar                         tar
build   gzip                        gzip
build   ldd                         libc-bin
test    ip                          iproute2
test    iptables                    iptables
test    mount                       mount
test    umount                      mount
test    unshare                     util-linux
test    dd                          coreutils
test    openssl                     openssl
test    python3:torch               python3-torch
test    python3:grpc                python3-grpcio
test    python3:google.protobuf     python3-protobuf
test    python3:yaml                python3-yaml
checks  clang-format-14             clang-format-14
checks  clang-tidy-14               clang-tidy-14
checks  run-clang-tidy-14           clang-tidy-14
checks  clang-apply-replacements-14 clang-tools-14
checks  git                         git
checks  ctags                       universal-ctags
fuzz    clang++-14                  clang-14
fuzz    make                        make
manifests kubectl                   kubernetes-client
manifests npm                       npm
manifests node                      nodejs
manifests apt-get                   apt
manifests dpkg-deb                  dpkg
images  buildah                     buildah
images  podman                      podman
images  xargs                       findutils
kube    podman                      podman
kube    runc                        runc
kube    conmon                      conmon
kube    /usr/lib/podman/netavark    netavark
kube    /usr/lib/podman/aardvark-dns aardvark-dns
kube    /usr/libexec/podman/catatonit catatonit
kube    iptables                    iptables
kube    ip6tables                   iptables
kube    kubectl                     kubernetes-client
kube    openssl                     openssl
kube    python3:yaml                python3-yaml
bench   perf                        linux-perf
"

# True if PROGRAM (in the table's forms) can be run or imported.
prerequisite_present() {
  case "$1" in
    /*) [ -x "$1" ] ;;
    python3:*) /usr/bin/python3 -c "import ${1#python3:}" >/dev/null 2>&1 ;;
    *) PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1 ;;
  esac
}

# The table's lines for the steps named, as "STEP PROGRAM PACKAGE".
prerequisite_lines() {
  local step program package wanted
  while read -r step program package; do
    [ -n "$step" ] || continue
    for wanted in "$@"; do
      [ "$step" = "$wanted" ] && echo "$step $program $package"
    done
  done <<<"$PREREQUISITES"
}

# The missing ones among the steps' programs, as "STEP PROGRAM PACKAGE" lines.
missing_prerequisites() {
  local step program package
  while read -r step program package; do
    prerequisite_present "$program" || echo "$step $program $package"
  done < <(prerequisite_lines "$@")
}

check_prerequisites() {
  report_missing "$(missing_prerequisites "$@")"
}

# Says what the "STEP PROGRAM PACKAGE" lines of missing_prerequisites lack, on stderr;
# returns 1 if they name anything.
report_missing() {
  local missing=$1 step program package
  [ -z "$missing" ] && return 0
  while read -r step program package; do
    case "$program" in
      python3:*) program="Python module ${program#python3:}" ;;
    esac
    echo "missing $program (Debian package $package), needed by the $step step" >&2
  done <<<"$missing"
  echo "install them with: apt-get install $(packages_of "$missing")" \
    "(./dev.sh deps installs everything)" >&2
  return 1
}

# The packages of "STEP PROGRAM PACKAGE" lines, once each, on one line.
packages_of() {
  awk '!seen[$3]++ {printf "%s%s", sep, $3; sep = " "}' <<<"$1"
}
