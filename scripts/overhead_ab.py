"""Per-op overhead of two pyrite trees in one process each, back to back (a regression hunt):
`python scripts/overhead_ab.py TREE_A TREE_B`. Prints the median µs/op of 1000 chained adds."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys, time
sys.path.insert(0, sys.argv[1])
import pyrite as pr
x = pr.ones(1024)
for _ in range(200): x = x + 1
pr.synchronize()
ts = []
for r in range(9):
    y = x
    t = time.perf_counter()
    for _ in range(1000): y = y + 1
    pr.synchronize()
    ts.append((time.perf_counter() - t) / 1000 * 1e6)
print(f"{sys.argv[1]}: {sorted(ts)[4]:.2f} us/op (min {min(ts):.2f})")
"""

for _ in range(2):
    for tree in sys.argv[1:]:
        subprocess.run([sys.executable, "-c", CODE, tree], check=True)
