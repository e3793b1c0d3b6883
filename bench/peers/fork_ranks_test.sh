#!/usr/bin/env bash
# Runs bench/peers/fork_ranks_test.py under Debian's /usr/bin/python3 (the
# interpreter with python3-torch; a python3 earlier on PATH may lack it).
#
#   fork_ranks_test.sh TEST_SCRIPT
exec /usr/bin/python3 "$1"
