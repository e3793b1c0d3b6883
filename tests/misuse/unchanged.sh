#!/bin/bash
# unchanged.sh FILE... -- COMMAND...
#
# Runs COMMAND and exits with its status, unless one of the FILEs changed
# (its bytes, or it vanished): then prints which and exits 99, so a misuse
# case that destroys its input fails whatever it printed. For the data-loss
# cases of paths.cases ($UNCHANGED there).
files=()
while [[ $# -gt 0 && $1 != -- ]]; do files+=("$1"); shift; done
if [[ $# -lt 2 ]]; then
  echo "unchanged.sh: usage: unchanged.sh FILE... -- COMMAND..." >&2
  exit 98
fi
shift
sums=()
for f in "${files[@]}"; do
  if [[ ! -f $f ]]; then echo "unchanged.sh: $f is not a file" >&2; exit 98; fi
  sums+=("$(sha256sum < "$f")")
done
"$@"
rc=$?
changed=0
for i in "${!files[@]}"; do
  now=$(sha256sum < "${files[$i]}" 2>/dev/null)
  if [[ $now != "${sums[$i]}" ]]; then
    echo "unchanged.sh: ${files[$i]} CHANGED (the run wrote over its input)"
    changed=1
  fi
done
[[ $changed -eq 1 ]] && exit 99
exit $rc
