"""Figures for the run directory and the loggers (matplotlib, Agg backend): attention heatmaps
and learning curves. Each function returns a Figure; `save` writes it atomically and closes it."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_mt.atomic import atomic_file  # noqa: E402

CURVES = [("train/loss", "train loss"), ("val/loss", "val loss"), ("val/bleu", "val BLEU")]


def attention_figure(weights, src_tokens: list[str], tgt_tokens: list[str], titles: list[str],
                     suptitle: str = "") -> Figure:
    """Heatmaps of (panels, T, S) attention probabilities: target tokens down, source tokens across."""
    panels, t, s = weights.shape
    cols = min(panels, 4)
    rows = (panels + cols - 1) // cols
    width, height = 1.2 + 0.28 * s, 1.0 + 0.25 * t
    fig, axes = plt.subplots(rows, cols, figsize=(max(3.5, width) * cols, max(2.8, height) * rows), squeeze=False,
                             layout="constrained")
    for k, ax in enumerate(axes.flat):
        if k >= panels:
            ax.axis("off")
            continue
        image = ax.imshow(weights[k], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(s), src_tokens, rotation=90, fontsize=7)
        ax.set_yticks(range(t), tgt_tokens, fontsize=7)
        ax.set_title(titles[k], fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8)
    if suptitle:
        fig.suptitle(suptitle, fontsize=9)
    return fig


def curves_figure(runs: dict[str, dict[str, list[tuple[int, float]]]], title: str) -> Figure:
    """Train loss, val loss and val BLEU against the step, one line per run ({label: {metric: [(step,
    value)]}})."""
    legend_rows = (len(runs) + 1) // 2 if len(runs) > 1 else 0  # below the panels, two labels a row
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4.2 * len(CURVES), 3.4 + 0.2 * legend_rows),
                             layout="constrained")
    lines = {}
    for ax, (key, name) in zip(axes, CURVES):
        for color, (label, series) in enumerate(runs.items()):
            points = sorted(series.get(key, []))
            if points:
                steps, values = zip(*points)
                [lines[label]] = ax.plot(steps, values, "-" if key.startswith("train") else "o-", markersize=3,
                                         label=label, color=f"C{color % 10}")
        ax.set_xlabel("step")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    if legend_rows:
        labels = [label for label in runs if label in lines]  # in the runs' order
        fig.legend([lines[label] for label in labels], labels, loc="outside lower center", ncols=2, fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def save(fig: Figure, path: Path, dpi: int = 100) -> None:
    """Write the figure as a PNG (whole or not at all) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    plt.close(fig)


def close(fig: Figure) -> None:
    plt.close(fig)
