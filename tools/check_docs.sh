#!/usr/bin/env bash
# Checks that the docs cite only code that exists: every backticked identifier in
# README.md and docs/*.md that looks like code (CamelCase, snake_case, Class::Member,
# name()) must occur as a whole word in some tracked file other than the docs. Names the
# docs cite that live outside the repository (Kubernetes fields, Bazel repositories, test
# names made from parameters) are listed in tools/docs_external_names.txt, with why.
# Prints "docs identifiers passed|failed" (./dev.sh counts it); exits 1 on a failure.
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

if [ ${#missing[@]} -eq 0 ]; then
  echo "docs identifiers passed ($(wc -l <<<"$cited") cited names exist)"
else
  printf 'cited in the docs but found nowhere in the code: %s\n' "${missing[@]}" >&2
  echo "docs identifiers failed (${#missing[@]} names the code does not have, listed above)"
  exit 1
fi
