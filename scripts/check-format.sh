#!/usr/bin/env bash
# Checks that every C++/CUDA source of the repository is formatted by .clang-format.
# Files: tracked plus untracked-but-not-ignored ones in a git checkout, else a find that skips
# build folders. Prints each offender and exits 1 if there is any; exits 77 (CTest's skip code
# here) when clang-format is not installed. $CLANG_FORMAT picks another binary.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found, skipping"
  exit 77
fi

files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do
    [[ -f "$f" ]] && files+=("$f")
  done < <(git ls-files -z --cached --others --exclude-standard -- \
             '*.h' '*.cc' '*.cu' '*.cuh')
else
  while IFS= read -r -d '' f; do files+=("$f"); done < <(
    find . \( -name .git -o -name 'build' -o -name 'build-*' -o -name out \) -prune -o \
      -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print0)
fi

# One clang-format process for all files (one per file spent most of its time starting up); each
# of its complaints starts with "<file>:<line>:<col>: error:".
report=$("$clang_format" --dry-run --Werror "${files[@]}" 2>&1 >/dev/null) && status=0 || status=$?
offenders=()
while IFS= read -r f; do offenders+=("$f"); done < <(
  sed -nE 's/^(.+):[0-9]+:[0-9]+: error: .*/\1/p' <<<"$report" | sort -u)
if ((status != 0 && ${#offenders[@]} == 0)); then
  echo "check-format: $clang_format failed (exit $status):" >&2
  head -20 <<<"$report" >&2
  exit 1
fi

if ((${#offenders[@]})); then
  echo "check-format: ${#offenders[@]} of ${#files[@]} files need '$clang_format -i':"
  printf '  %s\n' "${offenders[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted ($("$clang_format" --version))"
