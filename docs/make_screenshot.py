"""Draw docs/img/plots.png: the two plots of `dvc plots show` (recall at k, rank of the first
relevant chunk) from the committed sample run's metrics/plots/*.csv, as the plots page shows them.

    python docs/make_screenshot.py   # needs matplotlib (installed with the default model's package)
"""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PLOTS = ROOT / "metrics" / "plots"
OUT = ROOT / "docs" / "img" / "plots.png"


def rows(name: str) -> list[dict[str, str]]:
    with open(PLOTS / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def main() -> None:
    recall = rows("recall_at_k.csv")
    ranks = rows("first_relevant_rank_histogram.csv")
    plt.rcParams.update({"font.size": 8, "axes.spines.top": False, "axes.spines.right": False})
    figure, (left, right) = plt.subplots(1, 2, figsize=(7.2, 2.6), dpi=100)
    left.plot([int(r["k"]) for r in recall], [float(r["recall"]) for r in recall], marker="o", color="#4c78a8")
    left.set(title="Recall at k", xlabel="k", ylabel="recall", ylim=(0, 1))
    left.grid(alpha=0.3)
    labels = [r["first_relevant_rank"] for r in ranks]
    right.barh(labels[::-1], [int(r["questions"]) for r in ranks][::-1], color="#4c78a8")
    right.set(title="Rank of the first relevant chunk", xlabel="questions", ylabel="first_relevant_rank")
    right.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    figure.savefig(OUT)


if __name__ == "__main__":
    main()
