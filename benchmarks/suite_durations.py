"""Where the test suite's time goes: pytest's ``--durations=0`` report summed per file
and per test function (setup, call and teardown; summed over xdist's workers).

    python -m pytest -q --durations=0 > /tmp/durations.txt
    python -m benchmarks.suite_durations /tmp/durations.txt [--top 25]

The suite is bound by JAX's tracing and XLA's compilation, so a file's sum is mostly the
programs it compiles (docs/verification.md, "How long the suite takes").
"""

from __future__ import annotations

import argparse
import collections
import re

_LINE = re.compile(r"^([\d.]+)s (setup|call|teardown)\s+(\S+)$", re.M)


def summed(text: str):
    """(per file, per test function) Counters of seconds from a --durations report."""
    files, functions = collections.Counter(), collections.Counter()
    for m in _LINE.finditer(text):
        seconds, node = float(m.group(1)), m.group(3)
        files[node.split("::")[0]] += seconds
        functions[re.sub(r"\[.*$", "", node)] += seconds
    return files, functions


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="pytest output with --durations=0")
    parser.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    args = parser.parse_args(argv)
    with open(args.report) as f:
        text = f.read()
    files, functions = summed(text)
    if not files:
        raise SystemExit(f"{args.report}: no duration lines (run pytest with --durations=0)")
    tail = re.findall(r"^=* ?(\d[\d,]* passed.*) in ([\d.]+)s", text, re.M)
    print(f"summed test time {sum(files.values()):.0f} s over {len(files)} files"
          + (f"; {tail[-1][0]}, wall {float(tail[-1][1]):.0f} s" if tail else ""))
    for title, table in (("files", files), ("test functions (all parameters)", functions)):
        print(f"\n{title}:")
        for name, seconds in table.most_common(args.top):
            print(f"{seconds:8.1f} s  {name}")


if __name__ == "__main__":
    main()
