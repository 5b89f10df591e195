"""The command line of the differential fuzzers (``python -m tests.parity.<file> LO HI``): run
seeds LO..HI-1 and print the mismatches bucketed by the call and the part that differed."""

import collections
import sys


def label_key(mismatch):
    """A mismatch's bucket: the call its label names (after "seed N: ") and what differed."""
    return mismatch[0].split(": ")[1].split("(")[0] + " | " + mismatch[1]


def main(run_program, key=label_key, shown=2, width=500):
    """Run the seeds of ``sys.argv`` through ``run_program`` (None: agreed) and print buckets."""
    lo, hi = int(sys.argv[1]), int(sys.argv[2])
    buckets = collections.defaultdict(list)
    for s in range(lo, hi):
        print(s, file=sys.stderr, flush=True)
        r = run_program(s)
        if r is not None:
            buckets[key(r)].append((s, r))
    for k, v in sorted(buckets.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(v):4d} {k}")
        for s, r in v[:shown]:
            print("      ", s, str(r)[:width])
    print("total mismatches", sum(map(len, buckets.values())), "of", hi - lo)
