#!/usr/bin/env python
"""Run every bench/bench_*.py in turn (``make bench``); each prints its own figures and ratios."""
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
rc = 0
for b in sorted(here.glob("bench_*.py")):
    print(f"\n=== {b.name}", flush=True)
    rc |= subprocess.call([sys.executable, str(b)])
sys.exit(rc)
