#!/usr/bin/env bash
# bench/claims_over_runs.py on three hand-written compare tables: min,
# median, max per claim; "met" judged on the worst run (the minimum for
# >= targets, the maximum for <=); a claim skipped in one run counted in
# the others only; a foreign file and disagreeing targets refused (exit 2).
set -uo pipefail
tool=$1
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/claims.XXXXXX")
table() { # FILE LOAD ROWS...
  local file=$1 load=$2
  shift 2
  {
    printf 'Command: `bench/compare --quick`  \nMachine: test  \n'
    printf 'Load average (1, 5, 15 min) at start: %s, at end: 0.1  \nDate: x\n\n' "$load"
    printf '| claim | ratio | target | met |\n|---|---:|---:|:---:|\n'
    printf '%s\n' "$@"
  } >"$file"
}
table "$dir/1.md" 0.5 '| `a` | 2.10 | 2 | yes |' '| `b` | 0.90 | 0.85 | yes |' '| `c` | 1.20 | <= 1.5 | yes |'
table "$dir/2.md" 0.7 '| `a` | 1.90 | 2 | no |' '| `b` | skipped: no mpirun | 0.85 | - |' '| `c` | 1.60 | <= 1.5 | no |'
table "$dir/3.md" 0.9 '| `a` | 2.50 | 2 | yes |' '| `b` | 0.95 | 0.85 | yes |' '| `c` | 1.00 | <= 1.5 | yes |'
got=$("$tool" "$dir/1.md" "$dir/2.md" "$dir/3.md") || { echo "exit $?"; exit 1; }
want='| claim | target | min | median | max | runs | met (worst run) |
|---|---:|---:|---:|---:|---:|:---:|
| `a` | 2 | 1.90 | 2.10 | 2.50 | 3 | no |
| `b` | 0.85 | 0.90 | 0.93 | 0.95 | 2 | yes |
| `c` | <= 1.5 | 1.00 | 1.20 | 1.60 | 3 | no |

Load average (1, 5, 15 min) at the start -> end of each run: 1: 0.5 -> 0.1; 2: 0.7 -> 0.1; 3: 0.9 -> 0.1'
if [[ "$got" != "$want" ]]; then
  echo "got:"; echo "$got"; echo "want:"; echo "$want"
  exit 1
fi
echo "not a table" >"$dir/bad.md"
"$tool" "$dir/1.md" "$dir/bad.md" 2>"$dir/err"
rc=$?
[[ $rc == 2 ]] && grep -q "no claim rows" "$dir/err" || { echo "foreign file: exit $rc"; cat "$dir/err"; exit 1; }
table "$dir/4.md" 0.1 '| `a` | 2.00 | 3 | no |'
"$tool" "$dir/1.md" "$dir/4.md" 2>"$dir/err"
rc=$?
[[ $rc == 2 ]] && grep -q "claim a has target 3" "$dir/err" || { echo "targets: exit $rc"; cat "$dir/err"; exit 1; }
echo PASS
