"""Where the server's CPU went: reads the collapsed stacks `bench/cycles.py --profile FILE`
wrote (py-spy, every server process) and prints, per kind of process, the share of samples
spent inside each function (inclusive) and in each function itself (self).

    .venv/bin/python bench/stacks.py FILE [--top 25] [--match engine]
"""

import argparse
import re
from collections import Counter, defaultdict


def kind_of(processes: list[str]) -> str:
    """The kind of the process a stack was sampled in, from its chain of processes (py-spy
    names each, outermost first; a prefork pool's child repeats its parent's command)."""
    own = processes[-1]
    if "daphne" in own:
        return "daphne"
    if "celery" in own:
        queue = "deadlines worker" if "-deadlines" in own else "worker"
        if " beat" in own:
            return "beat"
        nested = sum("celery" in p for p in processes)
        return f"{queue} child" if nested > 1 else f"{queue} parent"
    return "serve"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default="", help="only functions whose name has this")
    args = parser.parse_args()
    inclusive: dict[str, Counter] = defaultdict(Counter)
    own: dict[str, Counter] = defaultdict(Counter)
    total: Counter = Counter()
    for line in open(args.file):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        processes = [f for f in frames if f.startswith("process ")]
        kind = kind_of(processes)
        n = int(count)
        total[kind] += n
        names = [
            re.sub(r" \((.*?):\d+\)$", r" (\1)", f) for f in frames if not f.startswith("process ")
        ]
        for name in set(names):
            inclusive[kind][name] += n
        if names:
            own[kind][names[-1]] += n
    for kind in sorted(total):
        print(f"== {kind}: {total[kind]} samples")
        for title, table in (("inclusive", inclusive[kind]), ("self", own[kind])):
            print(f"-- {title}")
            shown = 0
            for name, n in table.most_common():
                if args.match in name:
                    print(f"{n / total[kind] * 100:6.1f}%  {name[:150]}")
                    shown += 1
                    if shown >= args.top:
                        break


if __name__ == "__main__":
    main()
