#!/usr/bin/env bash
# Checks that the docs cite only code that exists: every backticked identifier in
# README.md and docs/*.md that looks like code (CamelCase, snake_case, Class::Member,
# name()) must occur as a whole word in some tracked file other than the docs. Names the
# docs cite that live outside the repository (Kubernetes fields, Bazel repositories, test
# names made from parameters) are listed in tools/docs_external_names.txt, with why.
# Every backticked path into the tree (`common/clock.h`, `worker/tools/`, `contracts/fsdp_layout`,
# `a/b.{h,cc}`) must exist as written, or with .h, .cc, .sh or .py added (a source, or a
# test's target).
# Prints "docs identifiers|paths passed|failed" (./dev.sh counts them); exits 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."

docs=(README.md docs/*.md)
external=$(grep -vE '^\s*(#|$)' tools/docs_external_names.txt | awk '{print $1}')
mapfile -t code < <(git ls-files | grep -vxE 'README.md|docs/.*\.md|tools/docs_external_names.txt')

# The backticked words that look like code: a name with an inner capital, an underscore
# or a "::", optionally qualified with :: or ., optionally called ().
cited=$(cat "${docs[@]}" | grep -oE '`[^`]+`' | tr -d '`' |
  grep -E '^[A-Za-z_][A-Za-z0-9_]*((::|\.)~?[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$' |
  grep -E '[a-z0-9][A-Z]|::|_' | sort -u)

missing=()
while read -r name; do
  [ -n "$name" ] || continue
  grep -qxF -- "$name" <<<"$external" && continue
  # Each part of a qualified name must exist (Class and Member may be in different files).
  for part in $(sed -e 's/()$//' -e 's/::/ /g' -e 's/\./ /g' -e 's/~//' <<<"$name"); do
    if ! grep -qw -- "$part" "${code[@]}" 2>/dev/null; then
      missing+=("$name")
      break
    fi
  done
done <<<"$cited"

failures=0
# report CHECK WHAT CITED PROBLEM MISSING...: CHECK's line, from the CITED list and the
# MISSING ones (each printed to stderr after PROBLEM).
report() {
  local check=$1 what=$2 cited=$3 problem=$4
  shift 4
  if [ $# -eq 0 ]; then
    echo "docs $check passed ($(wc -l <<<"$cited") cited $what exist)"
  else
    printf '%s: %s\n' "$problem" "$@" >&2
    echo "docs $check failed ($# $what not in the tree, listed above)"
    failures=1
  fi
}
report identifiers names "$cited" "cited in the docs but found nowhere in the code" \
  "${missing[@]}"

# Paths: backticked words that start with one of the tree's top folders.
tops=$(git ls-files | sed -n 's#^\([^/]*\)/.*#\1#p' | sort -u | paste -sd'|')
paths=$(cat "${docs[@]}" | grep -oE '`[^` ]+`' | tr -d '`' |
  grep -E "^($tops)/[A-Za-z0-9_./{},*-]*$" | grep -v '\*' | sort -u)
missing_paths=()
while read -r path; do
  [ -n "$path" ] || continue
  found=0
  for expanded in $(eval "echo $path"); do  # a/b.{h,cc} -> a/b.h a/b.cc
    for suffix in "" .h .cc .sh .py; do [ -e "$expanded$suffix" ] && found=1; done
  done
  [ "$found" = 1 ] || missing_paths+=("$path")
done <<<"$paths"
report paths paths "$paths" "a path the docs cite that the tree does not have" \
  "${missing_paths[@]}"

# Examples: a YAML block the docs label "(examples/NAME.yaml):" is that file, its comment
# lines left out (a newcomer copies the block; the file is what the tests validate).
examples=0
stale_examples=()
while IFS=: read -r doc line; do
  file=$(sed -n "${line}p" "$doc" | grep -oE 'examples/[A-Za-z0-9_.-]+\.yaml')
  examples=$((examples + 1))
  block=$(tail -n +"$((line + 1))" "$doc" | awk 'NR == 1 && /^$/ {next} /^```yaml$/ {on = 1; next}
    on && /^```$/ {exit} on {print}')
  if [ ! -f "$file" ] || [ "$block" != "$(grep -vE '^[[:space:]]*#' "$file")" ]; then
    stale_examples+=("$doc:$line ($file)")
  fi
done < <(grep -nE '\(examples/[A-Za-z0-9_.-]+\.yaml\):$' "${docs[@]}" | cut -d: -f1,2)
if [ ${#stale_examples[@]} -eq 0 ]; then
  echo "docs examples passed ($examples blocks equal their files)"
else
  printf 'a YAML block that is not the file it names: %s\n' "${stale_examples[@]}" >&2
  echo "docs examples failed (${#stale_examples[@]} blocks differ from their files, listed above)"
  failures=1
fi
exit $failures
