"""tandem's Bazel macros: the shapes its BUILD files repeat, written once."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

def _with(deps, always):
    """`deps` and then each of `always` it lacks."""
    return deps + [d for d in always if d not in deps]

def _in(folder, files):
    """`files` inside `folder` of the package ("": the package's own)."""
    return [folder + "/" + f for f in files] if folder else files

def unit_test(name, deps, srcs = None, size = "small", folder = "", **kwargs):
    """A gtest test of the code beside it, run by gtest's main.

    Args:
      name: the test's name; its source is `name + ".cc"` unless `srcs`
        says otherwise.
      deps: what the test uses (gtest's main and Abseil are added).
      srcs: the sources, when they are not just `name + ".cc"`.
      size: Bazel's size; "small" unless the test says otherwise.
      folder: the folder of the package that holds the default source.
      **kwargs: any other cc_test attribute (data, tags, timeout, ...).
    """
    cc_test(
        name = name,
        srcs = srcs if srcs != None else _in(folder, [name + ".cc"]),
        size = size,
        deps = _with(deps, ["//third_party:absl", "//third_party:gtest_main"]),
        **kwargs
    )

def cli_test(name, tools, data = [], srcs = None, size = "small", args = [], folder = "", **kwargs):
    """A shell test that runs programs as a user would.

    Each target in `tools` is handed to the script as one argument (its
    path), in order, and is among the test's data.

    Args:
      name: the test's name; its script is `name + ".sh"` unless `srcs`
        says otherwise.
      tools: the programs and files the script is given, as $1, $2, ...
      data: further files the script reads without being told their path.
      srcs: the script, when it is not `name + ".sh"`.
      size: Bazel's size; "small" unless the test says otherwise.
      args: arguments after the tools' paths.
      folder: the folder of the package that holds the default script.
      **kwargs: any other sh_test attribute (tags, timeout, env, ...).
    """
    native.sh_test(
        name = name,
        srcs = srcs if srcs != None else _in(folder, [name + ".sh"]),
        size = size,
        args = ["$(location %s)" % t for t in tools] + args,
        data = tools + [d for d in data if d not in tools],
        **kwargs
    )

def library(name, deps = [], srcs = None, hdrs = None, test_deps = None, test_size = "small", test_kwargs = {}, folder = "", **kwargs):
    """A library of one purpose (`name.cc`, `name.h`) and its unit test.

    The shape most of tandem's code has: `foo.cc` and `foo.h` make `:foo`,
    and `foo_test.cc` beside them tests it (a unit_test, above, depending on
    `:foo`). Abseil is among the library's deps whether listed or not: every
    tandem library speaks absl::Status.

    Args:
      name: the library's name.
      deps: what the library uses.
      srcs: the sources, when they are not just `name + ".cc"` ([] for a
        header-only library).
      hdrs: the headers, when they are not just `name + ".h"`.
      test_deps: what `name + "_test.cc"` uses besides the library, gtest
        and Abseil; None: no test of that name.
      test_size: the test's Bazel size.
      test_kwargs: any other unit_test attribute (data, tags, timeout, srcs).
      folder: the folder of the package that holds the default sources
        (a room of a package: "runner" for train/examples/runner/).
      **kwargs: any other cc_library attribute (visibility, testonly, ...).
    """
    cc_library(
        name = name,
        srcs = srcs if srcs != None else _in(folder, [name + ".cc"]),
        hdrs = hdrs if hdrs != None else _in(folder, [name + ".h"]),
        deps = _with(deps, ["//third_party:absl"]),
        **kwargs
    )
    if test_deps != None:
        unit_test(
            name = name + "_test",
            deps = _with([":" + name], test_deps),
            size = test_size,
            folder = folder,
            **test_kwargs
        )

def example(name, deps, main_deps = [], data = [], lib_test_deps = None, lib_test_kwargs = {}, with_cli_test = True):
    """A training example: `<name>_lib` (the run as a function the tests
    call), the binary `<name>` (its main over train/examples' runner) and
    their tests.

    Args:
      name: the binary's name, "toy_ddp"; the sources are `<name>_lib.cc`,
        `<name>_lib.h` and `<name>_main.cc` in the package's folder
        `<name>/`, with the tests'.
      deps: what the library uses (Abseil is added).
      main_deps: what the main uses besides the library, the runner
        (`:example_main`) and Abseil.
      data: files the binary reads at run time (its default data set).
      lib_test_deps: what `<name>_lib_test.cc` uses besides the library;
        None: no such test.
      lib_test_kwargs: any other attribute of that test (size, tags, ...).
      with_cli_test: whether `<name>_cli_test.sh` runs the binary as a user
        would (a cli_test; the binary's path is $1).
    """
    library(
        name = name + "_lib",
        deps = deps,
        test_deps = lib_test_deps,
        test_size = lib_test_kwargs.get("size", "small"),
        test_kwargs = {k: v for k, v in lib_test_kwargs.items() if k != "size"},
        folder = name,
    )
    cc_binary(
        name = name,
        srcs = [name + "/" + name + "_main.cc"],
        data = data,
        deps = _with([":" + name + "_lib", ":example_main", "//third_party:absl"], main_deps),
    )
    if with_cli_test:
        cli_test(name = name + "_cli_test", tools = [":" + name], folder = name)

def program(name, deps, srcs = None, **kwargs):
    """A command-line program: flags parsed by base/command_line (--help,
    usage errors exit 2), lost output a failed run (base/std_streams).

    Args:
      name: the binary's name; its source is `name + ".cc"` unless `srcs`
        says otherwise.
      deps: what it uses (//base:command_line, //base:std_streams and
        Abseil are added).
      srcs: the sources, when they are not just `name + ".cc"`.
      **kwargs: any other cc_binary attribute (tags, visibility, data, ...).
    """
    cc_binary(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = _with(deps, ["//base:command_line", "//base:std_streams", "//third_party:absl"]),
        **kwargs
    )

def benchmark(name, deps, srcs = None, **kwargs):
    """A program that measures: a program (above) tagged "benchmark", which
    `bazel test` never runs (.bazelrc filters the tag out). Its arguments
    are program()'s.
    """
    program(name = name, deps = deps, srcs = srcs, tags = ["benchmark"], **kwargs)

_MPIRUN = "//comm/mpi:mpirun_test.sh"

def process_test(name, nps, deps, size = "medium", launcher = _MPIRUN, tools = [], tags = None):
    """A gtest binary that is one rank of a world of processes, run at
    several world sizes.

    `<name>_test_bin` is built from `<name>_test.cc`; for each n of `nps`,
    the shell test `<name>_np<n>_test` has `launcher` start n processes of
    it. The launcher is handed n, then each of `tools`' paths, then the
    binary's path.

    Args:
      name: the stem of the binary's and the tests' names.
      nps: the world sizes, one test each.
      deps: what the binary uses. Abseil is added, and gtest without its
        main unless the deps name //third_party:gtest_main: the binary's own
        main starts the rank (MPI_Init, the launch environment).
      size: each test's Bazel size.
      launcher: the script that starts the processes; mpirun
        (comm/mpi/mpirun_test.sh) unless said otherwise.
      tools: programs the launcher is handed before the binary (tandemrun).
      tags: the tests' tags; None: "mpi" under mpirun (ThreadSanitizer's
        runs leave them out), none under another launcher.
    """
    binary = name + "_test_bin"
    gtest = [] if "//third_party:gtest_main" in deps else ["//third_party:gtest"]
    cc_binary(
        name = binary,
        testonly = True,
        srcs = [name + "_test.cc"],
        deps = _with(deps, ["//third_party:absl"] + gtest),
    )
    if tags == None:
        tags = ["mpi"] if launcher == _MPIRUN else []
    for n in nps:
        native.sh_test(
            name = "%s_np%d_test" % (name, n),
            size = size,
            srcs = [launcher],
            args = [str(n)] + ["$(location %s)" % t for t in tools] + ["$(location :%s)" % binary],
            data = [":" + binary] + tools,
            tags = tags,
        )
