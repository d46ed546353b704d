"""Figures for the run directory and the loggers (matplotlib, Agg backend): attention heatmaps
and learning curves. Each function returns a Figure; `save` writes it atomically and closes it."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_mt.atomic import atomic_file  # noqa: E402

CHAR_INCH = 0.065  # the width of a 7-point tick label character, in inches
CURVES = [("train/loss", "train loss"), ("val/loss", "val loss"), ("val/bleu", "val BLEU")]


def attention_figure(weights, src_tokens: list[str], tgt_tokens: list[str], titles: list[str],
                     suptitle: str = "") -> Figure:
    """Heatmaps of (panels, T, S) attention probabilities: target tokens down, source tokens across."""
    panels, t, s = weights.shape
    cols = min(panels, 4)
    rows = (panels + cols - 1) // cols
    # margins in inches, from the longest tick labels (7 pt: about 0.06 inch a character): a fixed
    # layout, several times faster to draw than matplotlib's layout engines (one figure per validation)
    left = 0.3 + CHAR_INCH * max(map(len, tgt_tokens), default=1)
    bottom = 0.2 + CHAR_INCH * max(map(len, src_tokens), default=1)
    top, colorbar = 0.55 if suptitle else 0.35, 0.9
    panel_w, panel_h = max(2.3, 0.28 * s), max(1.8, 0.25 * t)
    width = cols * (left + panel_w) + colorbar
    height = rows * (bottom + panel_h + 0.3) + top
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    fig.subplots_adjust(left=left / width, right=1 - colorbar / width, bottom=bottom / height, top=1 - top / height,
                        wspace=left / panel_w, hspace=(bottom + 0.3) / panel_h)
    for k, ax in enumerate(axes.flat):
        if k >= panels:
            ax.axis("off")
            continue
        image = ax.imshow(weights[k], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(s), src_tokens, rotation=90, fontsize=7)
        if k % cols == 0:  # the panels of a row share their target tokens: labelled once, at its left
            ax.set_yticks(range(t), tgt_tokens, fontsize=7)
        else:
            ax.set_yticks([])
        ax.set_title(titles[k], fontsize=8)
    fig.colorbar(image, cax=fig.add_axes((1 - 0.75 * colorbar / width, bottom / height, 0.15 / width,
                                          1 - (bottom + top) / height)))
    if suptitle:
        fig.suptitle(suptitle, fontsize=9)
    return fig


def curves_figure(runs: dict[str, dict[str, list[tuple[int, float]]]], title: str) -> Figure:
    """Train loss, val loss and val BLEU against the step, one line per run ({label: {metric: [(step,
    value)]}})."""
    legend_rows = (len(runs) + 1) // 2 if len(runs) > 1 else 0  # below the panels, two labels a row
    height = 3.4 + 0.2 * legend_rows
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4.2 * len(CURVES), height))
    bottom = 0.5 + (0.2 * legend_rows + 0.15 if legend_rows else 0.0)  # inches: tick labels, step, the legend
    fig.subplots_adjust(left=0.05, right=0.99, wspace=0.25, bottom=bottom / height, top=1 - 0.65 / height)
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
        fig.legend([lines[label] for label in labels], labels, loc="lower center", ncols=2, fontsize=7,
                   frameon=False, borderaxespad=0.1)
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
