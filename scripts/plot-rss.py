#!/usr/bin/env python3
"""Plots the RSS curves of `tests/soak.rs` runs: one panel per CSV (its
`SEBULBA_SOAK_OUT`), one line per role, MiB against minutes.

Usage: .venv-tools/bin/python scripts/plot-rss.py OUT.png TITLE=FILE.csv...
(`scripts/python-env.sh` makes .venv-tools, with matplotlib.)
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, data = rows[0], [list(map(float, r)) for r in rows[1:] if r]
    minutes = [r[0] / 60 for r in data]
    roles = {
        name.removesuffix("_rss_kib"): [r[i] / 1024 for r in data]
        for i, name in enumerate(header)
        if i > 0
    }
    return minutes, roles


def main(out, panels):
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        title, _, path = panel.partition("=")
        minutes, roles = read(path)
        for role, mib in roles.items():
            ax.plot(minutes, mib, label=role, linewidth=1.2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("minutes")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("resident memory (MiB)")
    axes[0][-1].legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
