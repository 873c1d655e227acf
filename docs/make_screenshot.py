"""Draw docs/img/plots.png: the two plots of `dvc plots show` (recall at k, rank of the first
relevant chunk), one line or bar per panel system, from the committed sample run's
metrics/plots/*.csv, as the plots page shows them.

    python docs/make_screenshot.py   # needs matplotlib (installed with the default model's package)
"""

from __future__ import annotations

import csv
from pathlib import Path

import matplotlib
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PLOTS = ROOT / "metrics" / "plots"
PARAMS = ROOT / "params.yaml"
OUT = ROOT / "docs" / "img" / "plots.png"


def rows(name: str) -> list[dict[str, str]]:
    with open(PLOTS / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def systems(*tables: list[dict[str, str]]) -> list[str]:
    """The panel's systems in params order (params.yaml's panel), then any other a plot names."""
    names = list(yaml.safe_load(PARAMS.read_text(encoding="utf-8")).get("panel") or {})
    for table in tables:
        names += [row["system"] for row in table if row["system"] not in names]
    return names


def main() -> None:
    recall = rows("recall_at_k.csv")
    ranks = rows("first_relevant_rank_histogram.csv")
    names = systems(recall, ranks)
    colors = dict(zip(names, plt.get_cmap("tab10").colors))
    plt.rcParams.update({"font.size": 8, "axes.spines.top": False, "axes.spines.right": False})
    figure, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6), dpi=100, layout="constrained")
    for name in names:
        points = sorted((int(r["k"]), float(r["recall"])) for r in recall if r["system"] == name)
        left.plot(*zip(*points), marker="o", markersize=3, color=colors[name], label=name)
    left.set(title="Recall at k, per panel system", xlabel="k", ylabel="recall", ylim=(0, 1))
    left.grid(alpha=0.3)
    labels = list(dict.fromkeys(r["first_relevant_rank"] for r in ranks))  # the bins, in rank order
    height = 0.8 / len(names)
    for index, name in enumerate(names):
        counts = {r["first_relevant_rank"]: int(r["questions"]) for r in ranks if r["system"] == name}
        places = [len(labels) - 1 - position + 0.4 - (index + 0.5) * height for position in range(len(labels))]
        right.barh(places, [counts.get(label, 0) for label in labels], height=height, color=colors[name])
    right.set_yticks(range(len(labels)), labels[::-1])
    right.set(title="Rank of the first relevant chunk, per panel system", xlabel="questions")
    right.set_ylabel("first_relevant_rank")
    right.grid(axis="x", alpha=0.3)
    figure.legend(loc="outside right center", frameon=False, title="system")
    figure.savefig(OUT)


if __name__ == "__main__":
    main()
