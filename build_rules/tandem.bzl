"""tandem's Bazel macros: the shapes its BUILD files repeat, written once."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def unit_test(name, deps, srcs = None, size = "small", **kwargs):
    """A gtest test of the code beside it, run by gtest's main.

    Args:
      name: the test's name; its source is `name + ".cc"` unless `srcs`
        says otherwise.
      deps: what the test uses (gtest's main is added).
      srcs: the sources, when they are not just `name + ".cc"`.
      size: Bazel's size; "small" unless the test says otherwise.
      **kwargs: any other cc_test attribute (data, tags, timeout, ...).
    """
    cc_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        size = size,
        deps = deps + ["//third_party:gtest_main"],
        **kwargs
    )

def cli_test(name, tools, data = [], srcs = None, size = "small", args = [], **kwargs):
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
      **kwargs: any other sh_test attribute (tags, timeout, env, ...).
    """
    native.sh_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".sh"],
        size = size,
        args = ["$(location %s)" % t for t in tools] + args,
        data = tools + [d for d in data if d not in tools],
        **kwargs
    )
