"""The learning-curves figure of a run and of task=report: one color per run in every panel, and the
labels in one legend below the panels, where it hides no curve."""

from transformer_mt import plots


def test_each_run_keeps_its_color_in_every_panel_and_the_legend_sits_below_them():
    runs = {  # the second run has no train loss: the colors must not shift in that panel
        "a": {"train/loss": [(1, 5.0), (2, 4.0)], "val/loss": [(2, 4.5)], "val/bleu": [(2, 10.0)]},
        "b": {"val/loss": [(2, 4.7)], "val/bleu": [(2, 9.0)]},
        "c": {"train/loss": [(1, 5.5), (2, 4.2)], "val/loss": [(2, 4.6)], "val/bleu": [(2, 11.0)]},
    }
    fig = plots.curves_figure(runs, "three runs")
    colors = {}
    for ax in fig.axes:
        assert ax.get_legend() is None  # no legend over a panel
        for line in ax.get_lines():
            assert colors.setdefault(line.get_label(), line.get_color()) == line.get_color()
    assert len(set(colors.values())) == 3
    [legend] = fig.legends
    assert [text.get_text() for text in legend.get_texts()] == ["a", "b", "c"]
    fig.canvas.draw()
    legend_top = legend.get_window_extent().y1
    assert all(ax.get_window_extent().y0 > legend_top for ax in fig.axes)  # below every panel
    plots.close(fig)


def test_a_single_run_has_no_legend():
    fig = plots.curves_figure({"run": {"val/loss": [(1, 3.0)]}}, "one run")
    assert fig.legends == [] and all(ax.get_legend() is None for ax in fig.axes)
    plots.close(fig)
