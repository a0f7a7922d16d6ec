#!/usr/bin/env bash
# Prints the path of promtool, Prometheus' rule checker, unpacked once out of Debian's
# prometheus package into deploy/validate/.promtool/ (which git ignores). The package is
# fetched with `apt-get download` (apt checks it against the archive's signed index) and
# not installed: installing it would start a Prometheus server on the machine, as its
# service, which the checks have no use for.
# Usage: deploy/validate/promtool.sh   (exit 1, saying why, if it cannot be had)
set -euo pipefail
cd "$(dirname "$0")"
dest=$PWD/.promtool
if [ ! -x "$dest/promtool" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  chmod 755 "$work"  # apt's download user reads and writes there
  download() { (cd "$work" && apt-get -qq download prometheus) >"$work/apt.log" 2>&1; }
  if ! download; then
    # A machine whose package lists were never fetched (a container image's) knows no
    # prometheus package yet.
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get -qq update >&2 && download || {
      cat "$work/apt.log" >&2
      echo "promtool.sh: apt-get download prometheus failed" >&2
      exit 1
    }
  fi
  dpkg-deb --fsys-tarfile "$work"/prometheus_*.deb | tar -x -C "$work" ./usr/bin/promtool
  mkdir -p "$dest"
  mv "$work/usr/bin/promtool" "$dest/promtool.partial"
  mv "$dest/promtool.partial" "$dest/promtool"
fi
echo "$dest/promtool"
