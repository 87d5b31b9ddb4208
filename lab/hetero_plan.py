"""Regenerates the measured tables of docs/heterogeneous-planning.md (Algorithms 4.1/4.2, the
partitioned runs and the fine-grained extension) on this machine's devices.

    python benchmarks/hetero_plan.py
"""

from edgecnn.hetero.report import main

if __name__ == "__main__":
    main(["--write", "docs/heterogeneous-planning.md"])
