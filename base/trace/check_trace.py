"""Checks a Chrome trace written by tandem's base/trace.

  check_trace.py TRACE.json [--ranks N] [--names a,b,...]

Parses the file as JSON; every complete event ("ph": "X") must have a name,
an integer pid that is a rank track (0 <= pid < N when --ranks is given,
never the host track) with a process_name metadata event, a tid with a
thread_name, and ts/dur >= 0. --names: each name must occur on every rank.
Prints "ok: <events> events on <ranks> rank(s)" or the first problem (exit 1).
"""
import json
import sys


def main(argv):
    path = argv[1]
    ranks = None
    names = []
    args = argv[2:]
    while args:
        if args[0] == "--ranks":
            ranks = int(args[1])
            args = args[2:]
        elif args[0] == "--names":
            names = [n for n in args[1].split(",") if n]
            args = args[2:]
        else:
            print("check_trace: unknown argument", args[0])
            return 2
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    process_names = {e["pid"]: e["args"]["name"] for e in events
                     if e.get("ph") == "M" and e["name"] == "process_name"}
    thread_names = {(e["pid"], e["tid"]) for e in events
                    if e.get("ph") == "M" and e["name"] == "thread_name"}
    complete = [e for e in events if e.get("ph") == "X"]
    if not complete:
        print("check_trace: no events in", path)
        return 1
    seen = {}
    for e in complete:
        pid = e["pid"]
        if not isinstance(pid, int) or process_names.get(pid) != "rank %d" % pid:
            print("check_trace: event not on a rank track:", e)
            return 1
        if ranks is not None and not 0 <= pid < ranks:
            print("check_trace: rank", pid, "outside 0 ..", ranks - 1, e)
            return 1
        if (pid, e["tid"]) not in thread_names:
            print("check_trace: event on an unnamed track:", e)
            return 1
        if e["ts"] < 0 or e["dur"] < 0 or not e["name"]:
            print("check_trace: bad event:", e)
            return 1
        seen.setdefault(e["name"], set()).add(pid)
    all_ranks = set(process_names)
    for n in names:
        if seen.get(n, set()) != all_ranks:
            print("check_trace: %r on ranks %s, expected every rank %s" %
                  (n, sorted(seen.get(n, set())), sorted(all_ranks)))
            return 1
    print("ok: %d events on %d rank(s)" % (len(complete), len(all_ranks)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
