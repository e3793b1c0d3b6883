#!/usr/bin/env python3
"""Checks docs/architecture.md against the tree.

    python3 docs/check_architecture.py      # from anywhere in the repository

What it checks:
  - every repository path the page names in backticks exists (a bare file
    name under a "### <room>" heading is looked up in that room first,
    then once in its folders); a glob must match something; a Bazel label
    names a package with a BUILD (and, with ":name", a target or file of
    it); no path leaves the repository;
  - every room in the table of "## Packages" is a folder, every top-level
    folder is in the table, and so is every folder with a BUILD file under
    base/ comm/ sim/ tensor/ train/ bench/ tests/;
  - the counts the page states: the engines registered
    (TANDEM_REGISTER_ENGINE) and their orders, the places outside its folder
    that an engine is named, the files a new op touches
    (docs/adding_an_op.md), the library files at tensor/'s and
    train/examples/' roots, sim's
    largest world and fast-lane limits, the length of two examples; and that
    every kernel row is declared with TANDEM_OP_ROW in tensor/dispatch/.

Exit status 0 when all is true; 1 with one line per problem otherwise.
Standard library only.
"""

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = "docs/architecture.md"
OP_DOC = "docs/adding_an_op.md"

# Backticked tokens with these endings are file names.
FILE_ENDINGS = (".h", ".cc", ".cu", ".cuh", ".md", ".py", ".sh", ".bzl",
                ".txt", ".inc", ".cases", ".gz")
# Top-level folders whose packages (folders with a BUILD) must be rooms.
LAYERED = ("base", "comm", "sim", "tensor", "train", "bench", "tests")
# Headings other files point at (the root BUILD names the second).
HEADINGS = ("Packages", "Which way dependencies go", "The contracts",
            "Rules of the house")
TENSOR_ROOT_LIBRARY_ENDINGS = (".h", ".cc", ".cu")


def repo_files():
    """Every file of the working tree that git tracks or would track."""
    try:
        out = subprocess.run(
            ["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            check=True, capture_output=True).stdout.decode()
        files = sorted({f for f in out.split("\0") if f})
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs
                       if x != ".git" and not x.startswith("bazel-")]
            for n in names:
                files.append(os.path.relpath(os.path.join(d, n), ROOT))
    # A deleted file stays in git's index until the deletion is staged.
    return [f for f in files if os.path.lexists(os.path.join(ROOT, f))]


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def exists(path):
    return os.path.exists(os.path.join(ROOT, path))


def flat(text):
    """The text with every run of white space made one space."""
    return " ".join(text.split())


def expand_braces(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(token[:m.start()] + alt + token[m.end():]))
    return out


class Checker:
    def __init__(self):
        self.problems = []
        self.report = []
        self.files = repo_files()
        self.doc = read(DOC)
        self.flat_doc = flat(self.doc)

    def problem(self, message):
        self.problems.append(message)

    def stated(self, pattern, what):
        """The match of `pattern` in the page (white space made single), or
        None after reporting that the page no longer says `what` in a form
        this script reads."""
        m = re.search(pattern, self.flat_doc)
        if not m:
            self.problem(
                f"{DOC} no longer states {what} in the form this script "
                f"reads (regular expression {pattern!r}); update the page or "
                f"docs/check_architecture.py")
        return m

    # ---- The table of rooms. -----------------------------------------------

    def table_rooms(self):
        """The rooms of the table under "## Packages", in order."""
        section = re.search(r"^## Packages\n(.*?)^## ", self.doc,
                            re.M | re.S)
        if not section:
            self.problem(f'{DOC} has no "## Packages" section')
            return []
        rooms = []
        for line in section.group(1).splitlines():
            if not line.startswith("|"):
                continue
            first = line.strip().strip("|").split("|")[0].strip()
            if not first or set(first) <= set("-: ") or first == "Room":
                continue
            names = re.findall(r"`([^`]+)`", first) or [first]
            for name in names:
                rooms.append(name.strip().rstrip("/"))
        if not rooms:
            self.problem(f'{DOC}: no table of rooms under "## Packages"')
        return rooms

    def check_rooms(self, rooms):
        seen = set()
        for room in rooms:
            if room in seen:
                self.problem(f"{DOC}: room {room} is in the table twice")
            seen.add(room)
            if os.path.isabs(room) or ".." in room.split("/"):
                self.problem(f"{DOC}: room {room} is outside the repository")
            elif not os.path.isdir(os.path.join(ROOT, room)):
                self.problem(f"{DOC}: room {room} in the table is not a "
                             f"folder of the repository")
        top = sorted({f.split("/")[0] for f in self.files if "/" in f})
        for folder in top:
            if folder not in seen:
                self.problem(f"{DOC}: top-level folder {folder}/ is not in "
                             f"the table of rooms")
        packages = sorted({os.path.dirname(f) for f in self.files
                           if os.path.basename(f) == "BUILD"
                           and f.split("/")[0] in LAYERED and "/" in f})
        for package in packages:
            if package not in seen:
                self.problem(f"{DOC}: {package}/ has a BUILD file but is not "
                             f"in the table of rooms")
        self.report.append(
            f"rooms: {len(rooms)} in the table, all folders; "
            f"{len(top)} top-level folders and {len(packages)} packages "
            f"under {', '.join(LAYERED)} all listed")

    # ---- Paths and labels. -------------------------------------------------

    def check_label(self, label, where):
        m = re.fullmatch(r"//([A-Za-z0-9_./-]*?)(/\.\.\.)?(?::(.+))?", label)
        if not m:
            self.problem(f"{DOC}{where}: cannot read Bazel label {label}")
            return
        package, recursive, target = m.group(1), m.group(2), m.group(3)
        if recursive:
            if not os.path.isdir(os.path.join(ROOT, package)):
                self.problem(f"{DOC}{where}: {label}: no folder {package}/")
            return
        build = os.path.join(package, "BUILD") if package else "BUILD"
        if not exists(build):
            self.problem(f"{DOC}{where}: {label}: no {build}")
            return
        if not target:  # the package itself
            return
        name = target
        text = read(build)
        if not (f'name = "{name}"' in text or f'"{name}"' in text
                or exists(os.path.join(package, name))):
            self.problem(f"{DOC}{where}: {label}: {build} has no target or "
                         f"file {name}")

    def is_path(self, token):
        if token.startswith(("-", "/")) or "::" in token:
            return False
        if any(c in token for c in " <>()=,;'\""):
            return False
        return "/" in token or token.endswith(FILE_ENDINGS)

    def check_path(self, token, room, where):
        if token.startswith("./"):
            token = token[2:]
        if token.startswith("../") or "/../" in token:
            self.problem(f"{DOC}{where}: `{token}` leaves the repository")
            return False
        bases = ([room] if room else []) + [""]
        for alt in expand_braces(token):
            found = False
            for base in bases:
                path = os.path.join(base, alt) if base else alt
                if any(c in path for c in "*?["):
                    found = bool(glob.glob(os.path.join(ROOT, path)))
                elif path.endswith("/"):
                    found = os.path.isdir(os.path.join(ROOT, path))
                else:
                    found = exists(path)
                if found:
                    break
            if not found and room and "/" not in alt:
                # A bare name may sit in one folder of the room
                # (train/examples/gpt_ddp/gpt_ddp_config.h); it must be one.
                found = len([f for f in self.files
                             if f.startswith(room + "/")
                             and os.path.basename(f) == alt]) == 1
            if not found:
                hint = (f" (looked in {room}/, once in its folders, and the "
                        f"root)" if room else "")
                self.problem(f"{DOC}{where}: `{alt}` does not exist{hint}")
                return False
        return True

    def check_paths(self, rooms):
        room_set = set(rooms)
        if "../" in self.doc:
            self.problem(f"{DOC}: names a path outside the repository "
                         f"(../)")
        checked = 0
        # Paragraph by paragraph, so that a backticked name wrapped over two
        # lines is read whole; a table line is a paragraph of its own.
        paragraphs, current, heading = [], [], None
        for number, line in enumerate(self.doc.splitlines(), 1):
            if line.startswith("#"):
                if current:
                    paragraphs.append((heading, start, " ".join(current)))
                    current = []
                title = line.lstrip("#").strip().strip("`").rstrip("/")
                heading = title if line.startswith("### ") else None
                continue
            if not line.strip() or line.startswith("|"):
                if current:
                    paragraphs.append((heading, start, " ".join(current)))
                    current = []
                if line.startswith("|"):
                    paragraphs.append((heading, number, line))
                continue
            if not current:
                start = number
            current.append(line.strip())
        if current:
            paragraphs.append((heading, start, " ".join(current)))
        for heading, number, text in paragraphs:
            room = heading if heading in room_set else None
            where = f":{number}"
            for token in re.findall(r"`([^`]+)`", text):
                token = token.strip()
                if token.startswith("//"):
                    self.check_label(token, where)
                    checked += 1
                elif self.is_path(token):
                    self.check_path(token, room, where)
                    checked += 1
        self.report.append(f"paths and labels: {checked} named, all exist")

    def check_headings(self):
        for title in HEADINGS:
            if not re.search(rf"^## {re.escape(title)}$", self.doc, re.M):
                self.problem(f'{DOC}: no "## {title}" section (other files '
                             f'point at it)')

    # ---- Counts. -----------------------------------------------------------

    def check_engines(self):
        registrations = []  # (order, name, folder, stem)
        for f in self.files:
            if not f.endswith(".cc") or f.endswith("_test.cc"):
                continue
            if f.startswith("comm/engine"):
                continue
            text = read(f)
            for m in re.finditer(r"^TANDEM_REGISTER_ENGINE\((\d+),\s*(\w+)\)",
                                 text, re.M):
                name = re.search(r'\.name\s*=\s*"([^"]+)"', text)
                registrations.append(
                    (int(m.group(1)), name.group(1) if name else m.group(2),
                     os.path.dirname(f), os.path.basename(f)[:-3]))
        registrations.sort()
        names = [r[1] for r in registrations]

        m = self.stated(r"tandem has (\d+) engines \(([^)]*)\)",
                        "the number of engines")
        if m:
            if int(m.group(1)) != len(registrations):
                self.problem(
                    f"{DOC} says tandem has {m.group(1)} engines; "
                    f"{len(registrations)} register themselves with "
                    f"TANDEM_REGISTER_ENGINE: {', '.join(names)}")
            listed = [x.strip() for x in m.group(2).split(",")]
            if sorted(listed) != sorted(names):
                self.problem(f"{DOC} lists the engines {', '.join(listed)}; "
                             f"registered: {', '.join(names)}")
        m = self.stated(r"choices and help \(([^)]*)\)",
                        "the engines' registration orders")
        if m:
            stated = sorted(
                (int(o), n) for n, o in
                re.findall(r"(\w+) (\d+)", m.group(1)))
            actual = sorted((o, n) for o, n, _, _ in registrations)
            if stated != actual:
                self.problem(
                    f"{DOC} states the orders "
                    f"{', '.join(f'{n} {o}' for o, n in stated)}; registered: "
                    f"{', '.join(f'{n} {o}' for o, n in actual)}")

        # The places outside its folder that name an engine: the engines
        # package_group in comm/BUILD and each BUILD that names its library.
        group = re.search(r'package_group\(\s*name = "engines",\s*'
                          r'packages = \[(.*?)\]', read("comm/BUILD"), re.S)
        group_packages = (re.findall(r'"//([^"]+)"', group.group(1))
                          if group else [])
        if not group:
            self.problem("comm/BUILD has no engines package_group")
        builds = [f for f in self.files if os.path.basename(f) == "BUILD"]
        n = self.stated(r"(\d+) places outside the folder",
                        "the places outside its folder an engine adds")
        places_seen = set()
        for _, name, folder, stem in registrations:
            places = []
            if folder in group_packages:
                places.append("comm/BUILD (engines package_group)")
            label = f'"//{folder}:{stem}"'
            for b in builds:
                if os.path.dirname(b) != folder and label in read(b):
                    places.append(b)
            if not exists(os.path.join(folder, "BUILD")) or (
                    f'name = "{stem}"' not in read(os.path.join(folder,
                                                                "BUILD"))):
                self.problem(f"engine {name}: {folder}/BUILD has no target "
                             f"{stem} for {stem}.cc")
            if not any(p.startswith("train/launch/") for p in places):
                self.problem(f"engine {name}: train/launch/BUILD does not "
                             f"link //{folder}:{stem}")
            places_seen.add(len(places))
            if n and int(n.group(1)) != len(places):
                self.problem(
                    f"{DOC} says an engine touches {n.group(1)} places "
                    f"outside its folder; {name} is named in {len(places)}: "
                    f"{', '.join(places) or 'none'}")
        if len(group_packages) != len(registrations):
            self.problem(
                f"comm/BUILD's engines package_group lists "
                f"{len(group_packages)} packages "
                f"({', '.join(group_packages)}); {len(registrations)} engines "
                f"register themselves")
        orders = ", ".join(f"{n} {o}" for o, n, _, _ in registrations)
        self.report.append(
            f"engines: {len(registrations)} registered ({orders}); each named "
            f"in {'/'.join(str(p) for p in sorted(places_seen))} places "
            f"outside its folder")

    def check_op_files(self):
        m = self.stated(r"new op with a CPU and a CUDA kernel touches (\d+) "
                        r"files \(`docs/adding_an_op\.md`",
                        "the files a new op touches")
        op = re.search(r"\*\*Files touched: (\d+)\*\*(.*?)Not counted",
                       read(OP_DOC), re.S)
        if not op:
            self.problem(f'{OP_DOC} no longer says "**Files touched: N**" '
                         f'followed by the files and "Not counted"')
            return
        count = int(op.group(1))
        listed = sorted(set(re.findall(r"`([^`]+)`", op.group(2))))
        for path in listed:
            if not exists(path):
                self.problem(f"{OP_DOC}: `{path}` (a file a new op touches) "
                             f"does not exist")
        if len(listed) != count:
            self.problem(f"{OP_DOC} says {count} files touched and lists "
                         f"{len(listed)}: {', '.join(listed)}")
        if m and int(m.group(1)) != count:
            self.problem(f"{DOC} says a new op touches {m.group(1)} files; "
                         f"{OP_DOC} says {count}")
        self.report.append(f"a new op with a CPU and a CUDA kernel: {count} "
                           f"files ({OP_DOC}), all exist")

    def check_tensor_root(self):
        m = self.stated(r"root holds at most (\d+) library files",
                        "the limit on tensor/'s root")
        files = [f for f in self.files
                 if f.startswith("tensor/") and f.count("/") == 1
                 and f.endswith(TENSOR_ROOT_LIBRARY_ENDINGS)
                 and not f.endswith("_test.cc")]
        if m and len(files) > int(m.group(1)):
            self.problem(f"tensor/ holds {len(files)} library files at its "
                         f"root; {DOC} says at most {m.group(1)}: "
                         f"{', '.join(os.path.basename(f) for f in files)}")
        self.report.append(f"tensor/ root: {len(files)} library files "
                           f"(at most {m.group(1) if m else '?'})")

    def check_examples_root(self):
        self.stated(r"nothing but cross-example tests at the root \(no\s+"
                    r"library file there", "train/examples' root")
        files = [f for f in self.files
                 if f.startswith("train/examples/") and f.count("/") == 2
                 and f.endswith((".h", ".cc")) and not f.endswith("_test.cc")]
        if files:
            self.problem(f"train/examples/ holds library files at its root; "
                         f"{DOC} says none: "
                         f"{', '.join(os.path.basename(f) for f in files)}")
        self.report.append(f"train/examples/ root: {len(files)} library files")

    def check_sim_limits(self):
        sim_h = re.search(r"kMaxWorldSize\s*=\s*(\d+)", read("sim/sim.h"))
        lane = read("sim/fast_lane.h")
        max_ranks = re.search(r"kMaxRanks\s*=\s*(\d+)", lane)
        max_bytes = re.search(r"kMaxBytes\s*=\s*([0-9<* ]+);", lane)
        if not (sim_h and max_ranks and max_bytes):
            self.problem("sim/sim.h's kMaxWorldSize or sim/fast_lane.h's "
                         "kMaxRanks/kMaxBytes is no longer where this script "
                         "reads it")
            return
        world = int(sim_h.group(1))
        lane_bytes = 1
        for factor in max_bytes.group(1).split("*"):
            a, _, b = factor.partition("<<")
            lane_bytes *= int(a) << int(b or 0)
        for pattern, what in (
                (r"as threads of one process, up to (\d+)",
                 "the most ranks sim runs"),
                (r"The (\d+) is `sim/sim\.h`'s kMaxWorldSize",
                 "sim's kMaxWorldSize")):
            m = self.stated(pattern, what)
            if m and int(m.group(1)) != world:
                self.problem(f"{DOC} says sim runs up to {m.group(1)} ranks; "
                             f"sim/sim.h's kMaxWorldSize is {world}")
        m = self.stated(r"all-reduces of up to (\d+) KiB among 2-(\d+) "
                        r"thread ranks", "the fast lane's limits")
        if m:
            if int(m.group(1)) * 1024 != lane_bytes:
                self.problem(f"{DOC} says the fast lane takes up to "
                             f"{m.group(1)} KiB; sim/fast_lane.h's kMaxBytes "
                             f"is {lane_bytes} bytes")
            if int(m.group(2)) != int(max_ranks.group(1)):
                self.problem(f"{DOC} says the fast lane takes up to "
                             f"{m.group(2)} ranks; sim/fast_lane.h's "
                             f"kMaxRanks is {max_ranks.group(1)}")
        self.report.append(
            f"sim: up to {world} ranks; fast lane up to {lane_bytes // 1024} "
            f"KiB among up to {max_ranks.group(1)} ranks")

    def check_example_lengths(self):
        m = self.stated(r"`toy_ddp_lib\.cc` and `digits_ddp_lib\.cc`, each "
                        r"under (\d+) lines", "the two examples' length")
        if not m:
            return
        limit = int(m.group(1))
        lengths = []
        for name in ("toy_ddp_lib.cc", "digits_ddp_lib.cc"):
            path = f"train/examples/{name[:-len('_lib.cc')]}/{name}"
            if not exists(path):
                self.problem(f"{path} does not exist")
                continue
            lines = read(path).count("\n")
            lengths.append(f"{name} {lines}")
            if lines >= limit:
                self.problem(f"{path} has {lines} lines; {DOC} says under "
                             f"{limit}")
        self.report.append(f"examples: {', '.join(lengths)} lines "
                           f"(under {limit})")

    def check_op_rows(self):
        self.stated(r"every row is declared with TANDEM_OP_ROW in a header "
                    r"of `tensor/dispatch/`", "where kernel rows are declared")
        rows = 0
        for f in self.files:
            if not f.endswith((".h", ".cc", ".cu", ".cuh")):
                continue
            for number, line in enumerate(read(f).splitlines(), 1):
                code = line.split("//")[0]
                if "TANDEM_OP_ROW(" not in code or "#define" in code:
                    continue
                rows += 1
                if not (f.startswith("tensor/dispatch/") and f.endswith(".h")):
                    self.problem(f"{f}:{number}: a kernel row declared "
                                 f"outside tensor/dispatch/'s headers; "
                                 f"{DOC} says every row is declared there")
        self.report.append(f"kernel rows: {rows} TANDEM_OP_ROW declarations, "
                           f"all in tensor/dispatch/'s headers")

    def run(self):
        rooms = self.table_rooms()
        self.check_headings()
        self.check_rooms(rooms)
        self.check_paths(rooms)
        self.check_engines()
        self.check_op_files()
        self.check_tensor_root()
        self.check_sim_limits()
        self.check_example_lengths()
        self.check_examples_root()
        self.check_op_rows()
        if self.problems:
            print(f"{DOC} disagrees with the tree "
                  f"({len(self.problems)} problem(s)):", file=sys.stderr)
            for p in self.problems:
                print(f"  {p}", file=sys.stderr)
            return 1
        print(f"{DOC} agrees with the tree:")
        for line in self.report:
            print(f"  {line}")
        return 0


if __name__ == "__main__":
    sys.exit(Checker().run())
