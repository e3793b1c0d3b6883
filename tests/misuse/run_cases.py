#!/usr/bin/python3
"""The misuse suite: every tests/misuse/*.cases file, one case per line.

    tests/misuse/run_cases.py [--only=TEXT] [FILE.cases ...]
    ./bazelw test //tests/misuse:misuse_test

A case is one TAB-separated line (`#` starts a comment line):

    tags  max_seconds  expected_exit  phrase  command

tags: `-` or a comma list; `mpi` needs mpirun (the case is skipped, with a
message, where mpirun is absent). expected_exit: the exit code the command
must end with (usage errors 2, runtime errors 1, 0 for a run that must
succeed). phrase: a substring the combined stdout+stderr must contain
(case-sensitive). command: run with `bash -c` in a fresh scratch directory,
with $TOY_DDP, $DIGITS_DDP, $SAMPLER, $COMM_BENCHMARK, $COMM_BENCHMARK_MPI,
$DDP_BENCHMARK, $TENSOR_BENCHMARK, $MPI_ALLREDUCE_PEER (absolute paths of the binaries), $MPIRUN
(mpirun with the flags and environment comm/mpi/mpirun_test.sh uses),
$DIGITS_CSV (the digits data, gzipped CSV), $REPO (the source tree),
$UNCHANGED (unchanged.sh: `$UNCHANGED FILE... -- COMMAND` fails with 99 when
COMMAND changed a FILE) and $TMP
(the case's scratch directory, also its working directory).

A case passes when it ends within max_seconds (its whole process group is
killed at the limit) with the expected exit code and the phrase in its
output; a death by signal never passes. Prints one table row per case
(case, expected, got, seconds, ok) and, for each failure, the command and the
tail of its output. Exits 1 when any case fails or any line is malformed.
Outside Bazel the binaries default to bazel-bin/... (build them first);
--only=TEXT runs the cases whose file:line or command contains TEXT.
"""
import argparse
import glob
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BINARIES = {
    "TOY_DDP": "train/examples/toy_ddp",
    "DIGITS_DDP": "train/examples/digits_ddp",
    "GPT_DDP": "train/examples/gpt_ddp",
    "DDP_DEMO": "train/examples/ddp_demo",
    "AMP_DDP": "train/examples/amp_ddp",
    "RESNET_DDP": "train/examples/resnet_ddp",
    "DATA_PARALLEL_DEMO": "train/demos/data_parallel_demo",
    "PIPE_DEMO": "train/demos/pipe_demo",
    "PIPELINE_DEMO": "train/examples/pipeline_demo",
    "TANDEMRUN": "train/launch/tandemrun",
    "SAMPLER": "train/data/sampler",
    "COMM_BENCHMARK": "bench/comm_benchmark",
    "COMM_BENCHMARK_MPI": "bench/comm_benchmark_mpi",
    "DDP_BENCHMARK": "bench/ddp_benchmark",
    "TENSOR_BENCHMARK": "bench/tensor_benchmark",
    "MPI_ALLREDUCE_PEER": "bench/mpi_allreduce_peer",
    "ZERO_BENCHMARK": "bench/zero_benchmark",
    "PIPELINE_BENCHMARK": "bench/pipeline_benchmark",
    "PREDICT": "bench/predict/predict",
    "PREDICT_GPT2": "bench/predict/predict_gpt2",
    "PLOT_METRICS": "train/examples/plot_metrics",
}

# The environment comm/mpi/mpirun_test.sh gives mpirun: copy-in/copy-out
# shared memory (CMA needs ptrace rights containers lack), loopback TCP only.
MPI_ENV = {
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_btl": "self,vader,tcp",
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_oob_tcp_if_include": "lo",
}


# Signals whose 128+N exit status a shell reports for a child it lost:
# SIGILL, SIGABRT, SIGBUS, SIGFPE, SIGKILL, SIGSEGV, SIGTERM.
FATAL_SIGNALS = (4, 6, 7, 8, 9, 11, 15)


class Case:
    def __init__(self, where, tags, seconds, exit_code, phrase, command):
        self.where = where
        self.tags = tags
        self.seconds = seconds
        self.exit_code = exit_code
        self.phrase = phrase
        self.command = command


def parse_cases(path):
    """Returns (cases, errors); errors name file:line and what is wrong."""
    cases, errors = [], []
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = "%s:%d" % (name, number)
            fields = line.split("\t", 4)
            if len(fields) != 5:
                errors.append("%s: %d TAB-separated field(s), need 5: tags, "
                              "max_seconds, expected_exit, phrase, command"
                              % (where, len(fields)))
                continue
            tags, seconds, exit_code, phrase, command = fields
            try:
                seconds = float(seconds)
                exit_code = int(exit_code)
            except ValueError:
                errors.append("%s: max_seconds '%s' and expected_exit '%s' "
                              "must be numbers" % (where, fields[1], fields[2]))
                continue
            if not seconds > 0 or not 0 <= exit_code <= 255 or not phrase:
                errors.append("%s: need max_seconds > 0, 0 <= expected_exit <= "
                              "255 and a non-empty phrase" % where)
                continue
            tag_set = set() if tags == "-" else set(tags.split(","))
            cases.append(Case(where, tag_set, seconds, exit_code, phrase,
                              command))
    return cases, errors


def run_command(argv, seconds, env, cwd, memory_bytes=None):
    """Runs argv in its own session, killed (the whole group) at `seconds`.

    memory_bytes, when given, caps the address space (RLIMIT_AS) of the
    command and its children. Returns (got, seconds, exit_code, output):
    got is the exit code as text, "timeout", or "signal N" (also for a shell
    that reports 128+N); exit_code is None unless the command exited.
    """
    def limit():
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS,
                               (memory_bytes, memory_bytes))

    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=limit)
    try:
        out, _ = proc.communicate(timeout=seconds)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    elapsed = time.monotonic() - start
    output = out.decode("utf-8", errors="replace")
    if code is None:
        got = "timeout"
    elif code < 0:
        got, code = "signal %d" % -code, None
    elif code > 128 and code - 128 in FATAL_SIGNALS:
        got, code = "%d (signal %d)" % (code, code - 128), None
    else:
        got = str(code)
    return got, elapsed, code, output


def run_case(case, env):
    """Runs one case; returns (got, seconds, ok, output)."""
    scratch = tempfile.mkdtemp(prefix="misuse_")
    got, seconds, code, output = run_command(
        ["bash", "-c", case.command], case.seconds, dict(env, TMP=scratch),
        scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    ok = code == case.exit_code and case.phrase in output
    return got, seconds, ok, output


def tool_env(args):
    """The environment every case and sweep run gets (see the docstring)."""
    repo = os.path.abspath(args.repo)
    env = dict(os.environ)
    env["REPO"] = repo
    env["UNCHANGED"] = os.path.join(repo, "tests/misuse/unchanged.sh")
    for var, rel in BINARIES.items():
        path = getattr(args, var.lower()) or os.path.join(repo, "bazel-bin",
                                                          rel)
        env[var] = os.path.abspath(path)
    env["DIGITS_CSV"] = os.path.abspath(
        args.digits_csv or os.path.join(repo, "train/data/digits.csv.gz"))
    mpi_flags = "--oversubscribe"
    if os.getuid() == 0:
        mpi_flags = "--allow-run-as-root " + mpi_flags
    env["MPIRUN"] = "mpirun " + mpi_flags
    env.update(MPI_ENV)
    if os.environ.get("TEST_TMPDIR"):
        # As mpirun_test.sh: Bazel gives each test its own pid namespace, so
        # OpenMPI's session directories (named after pids) and shared-memory
        # segments would collide between concurrent tests.
        tmp = os.environ["TEST_TMPDIR"]
        env.update({"TMPDIR": tmp, "OMPI_MCA_orte_tmpdir_base": tmp,
                    "OMPI_MCA_btl_vader_backing_directory": tmp})
    # Bazel's per-test output files are for this runner, not for the tools.
    for var in ("TEST_PREMATURE_EXIT_FILE", "XML_OUTPUT_FILE", "GTEST_OUTPUT"):
        env.pop(var, None)
    return env


def add_tool_flags(parser):
    """The flags naming the binaries and data (defaults: bazel-bin/...)."""
    repo_default = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    parser.add_argument("--repo", default=repo_default,
                        help="the source tree (for bench/compare)")
    parser.add_argument("--digits_csv", default=None)
    for var, rel in BINARIES.items():
        parser.add_argument("--" + var.lower(), default=None,
                            help="default: bazel-bin/" + rel)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*",
                        help="*.cases files (default: tests/misuse/*.cases)")
    parser.add_argument("--only", default="",
                        help="run only cases whose file:line or command "
                        "contains this text")
    add_tool_flags(parser)
    args = parser.parse_args()

    repo = os.path.abspath(args.repo)
    files = args.cases or sorted(glob.glob(os.path.join(
        repo, "tests", "misuse", "*.cases")))
    if not files:
        print("misuse: no *.cases files found (looked in %s/tests/misuse)"
              % repo)
        return 1
    env = tool_env(args)
    have_mpirun = shutil.which("mpirun") is not None

    cases, errors = [], []
    for path in files:
        more, bad = parse_cases(path)
        cases += more
        errors += bad
    for error in errors:
        print("misuse: malformed case: " + error)

    print("%-22s %8s %-14s %7s  %s" % ("case", "expected", "got", "seconds",
                                        "ok"))
    failures, skipped, ran = [], 0, 0
    for case in cases:
        if args.only and args.only not in case.where and \
                args.only not in case.command:
            continue
        if "mpi" in case.tags and not have_mpirun:
            print("%-22s %8d %-14s %7s  skipped: mpirun is not installed" %
                  (case.where, case.exit_code, "-", "-"))
            skipped += 1
            continue
        got, seconds, ok, output = run_case(case, env)
        ran += 1
        print("%-22s %8d %-14s %7.2f  %s" % (case.where, case.exit_code, got,
                                            seconds,
                                            "ok" if ok else "FAIL"))
        sys.stdout.flush()
        if not ok:
            failures.append((case, got, seconds, output))

    for case, got, seconds, output in failures:
        print("\n--- FAIL %s: expected exit %d and '%s' within %gs; got %s "
              "after %.2fs\n    command: %s\n    output (last 1500 chars):"
              % (case.where, case.exit_code, case.phrase, case.seconds, got,
                 seconds, case.command))
        print(output[-1500:])
    print("\nmisuse: %d case(s) run, %d failed, %d skipped, %d malformed "
          "line(s)" % (ran, len(failures), skipped, len(errors)))
    return 1 if failures or errors else 0


if __name__ == "__main__":
    sys.exit(main())
