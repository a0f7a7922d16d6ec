#!/usr/bin/env bash
# Checks that ./dev.sh installs everything its steps run, on a Debian 12 root made from
# nothing: `debootstrap --variant=minbase bookworm` (about 85 s), this repository's HEAD
# cloned into it, `./dev.sh deps` and `./dev.sh bench-deps` run there, then every step's
# programs checked
# (tools/prerequisites.sh). A minbase root has less than a new machine (no g++, python3,
# node or openssl), so a package list that passes here passes on a new machine too.
# Prints "fresh-machine deps|programs passed|failed" lines; exits 1 on a failure.
# Needs root and Debian's package registry; not part of ./dev.sh test (it downloads about
# 1.5 GB), run it after changing what a step calls or what dev.sh installs.
#
# usage: tools/fresh_machine.sh [ROOT]   (default: a new folder under /var/tmp, removed after;
#   SHARDWISE_FRESH_KEEP=1 keeps it, to look at or to run ./dev.sh test in with chroot)
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-machine deps skipped (needs root for debootstrap and chroot)"
  exit 0
fi
source tools/prerequisites.sh
ROOT=${1:-$(mktemp -d /var/tmp/shardwise-fresh.XXXXXX)}
MIRROR=http://deb.debian.org/debian
mounted=()

cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null; done
  if [ -z "${SHARDWISE_FRESH_KEEP:-}" ]; then rm -rf "$ROOT"; else echo "kept $ROOT" >&2; fi
}
trap cleanup EXIT

bind() {  # bind SOURCE: the host's SOURCE at the same place in the root
  mkdir -p "$ROOT$1" && mount --bind "$1" "$ROOT$1" && mounted+=("$ROOT$1")
}

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root bash -c "$1"; }

make_root() {
  command -v debootstrap >/dev/null ||
    { apt-get -o DPkg::Lock::Timeout=600 update -qq &&
      apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >/dev/null; } ||
    return 1
  echo "== debootstrap --variant=minbase bookworm $ROOT" >&2
  debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" >"$ROOT.debootstrap.log" 2>&1 ||
    { tail -20 "$ROOT.debootstrap.log" >&2; return 1; }
  rm -f "$ROOT.debootstrap.log"
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  echo "deb $MIRROR bookworm-updates main" >>"$ROOT/etc/apt/sources.list"
  bind /proc && bind /sys && bind /dev && bind /dev/pts
  git clone -q --no-hardlinks . "$ROOT/root/shardwise"
}

main() {
  make_root || { echo "fresh-machine deps failed (could not make the root)"; return 1; }
  echo "== ./dev.sh deps and bench-deps in the new root" >&2
  if in_root 'cd /root/shardwise && ./dev.sh deps && ./dev.sh bench-deps' >"$ROOT/root/deps.log" 2>&1; then
    echo "fresh-machine deps passed ($(in_root 'dpkg-query -W | wc -l') packages installed)"
  else
    tail -30 "$ROOT/root/deps.log" >&2
    echo "fresh-machine deps failed (see the log above)"
    return 1
  fi
  # Every step's programs, checked inside the root by the same table dev.sh uses.
  local steps
  steps=$(awk 'NF {print $1}' <<<"$PREREQUISITES" | sort -u | tr '\n' ' ')
  if in_root "cd /root/shardwise && source tools/prerequisites.sh && check_prerequisites $steps"; then
    echo "fresh-machine programs passed (every program of: $steps)"
  else
    echo "fresh-machine programs failed (the programs above are missing)"
    return 1
  fi
}

main
