"""Regenerates the measured tables of docs/heterogeneous-planning.md (Algorithms 4.1/4.2, the
partitioned runs and the fine-grained extension) on this machine's devices.

    .venv/bin/python lab/hetero_plan.py [--write docs/heterogeneous-planning.md]
"""

from __future__ import annotations

import argparse

from edgecnn.hetero.report import main


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", default="docs/heterogeneous-planning.md", help="the page to rewrite")
    args = parser.parse_args()
    main(["--write", args.write])


if __name__ == "__main__":
    cli()
