#!/usr/bin/env bash
# Makes (once) and names the Python virtual environment that the Hugging Face
# peers run in: Debian's /usr/bin/python3 with its PyTorch 1.13
# (python3-torch, seen through --system-site-packages) plus transformers
# 4.36.2 from PyPI (the newest release whose GPT-2 runs on torch 1.13, and
# the one train/hf follows). Prints the venv's python on stdout and exits 0;
# on failure prints why on stderr and exits 1 (tests then skip, saying why).
#
#   python=$(bench/peers/hf_venv.sh) || echo "no peer"
#
# Where: $TANDEM_HF_VENV if set, else ~/.cache/tandem/hf-venv-transformers-
# 4.36.2 of the user's home from the password database, not $HOME: Bazel runs
# tests with HOME set to the test's scratch folder, and the venv should be
# made once per machine, not once per test run. A finished venv holds the
# file .tandem-ready (written after transformers imported); a half-made one
# (an interrupted install) is removed and made again. Concurrent callers are
# serialised with flock. Needs PyPI the first time (about 20 s).
set -uo pipefail
readonly version=4.36.2
fail() {
  echo "hf_venv.sh: $*" >&2
  exit 1
}
if [[ -n ${TANDEM_HF_VENV:-} ]]; then
  dir=$TANDEM_HF_VENV
else
  home=$(getent passwd "$(id -u)" | cut -d: -f6)
  [[ -n $home && -d $home ]] || fail "no home folder for user $(id -u); set TANDEM_HF_VENV"
  dir=$home/.cache/tandem/hf-venv-transformers-$version
fi
python=$dir/bin/python
if [[ -f $dir/.tandem-ready ]]; then
  echo "$python"
  exit 0
fi
# Not made yet: the slower checks (importing torch takes a second).
[[ -x /usr/bin/python3 ]] || fail "no /usr/bin/python3 (Debian's python3)"
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
  fail "/usr/bin/python3 has no PyTorch: apt-get install python3-torch"
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null ||
  fail "/usr/bin/python3 cannot make virtual environments: apt-get install python3-venv"
mkdir -p "$(dirname "$dir")" || fail "cannot create $(dirname "$dir")"
exec 9>"$dir.lock" || fail "cannot open the lock file $dir.lock"
flock -w 600 9 || fail "waited 600 s for another setup of $dir (lock $dir.lock)"
if [[ ! -f $dir/.tandem-ready ]]; then
  rm -rf "$dir"
  log=$(mktemp)
  if ! /usr/bin/python3 -m venv --system-site-packages "$dir" >"$log" 2>&1 ||
    ! "$python" -m pip install --no-cache-dir --disable-pip-version-check \
      --timeout 30 --retries 2 \
      --quiet "transformers==$version" >>"$log" 2>&1; then
    tail -5 "$log" >&2
    rm -rf "$dir" "$log"
    fail "could not install transformers==$version from PyPI into $dir (see above)"
  fi
  rm -f "$log"
  "$python" -c 'import torch, transformers, safetensors
assert transformers.__version__ == "'$version'", transformers.__version__' ||
    fail "transformers $version does not import with Debian's torch in $dir"
  touch "$dir/.tandem-ready"
fi
echo "$python"
