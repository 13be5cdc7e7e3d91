"""What a person sees of the report: integer ticks on count axes, one legend entry per run, a
visible ideal line, and run ids that stay on one line in the table."""

from __future__ import annotations

import re
import sys

import matplotlib
import pytest

from course.notebook import report, report_rules

matplotlib.use("Agg")

ONE_EPOCH = [{"epoch": 1, "iteration": 32, "seconds": 20.0, "accuracy": 0.4}]
THREE_EPOCHS = [
    {"epoch": e, "iteration": 16 * e, "seconds": 10.0 * e, "accuracy": 0.3 * e} for e in (1, 2, 3)
]


def row(
    run: str, workers: int, images_per_sec: float, curve: list[dict], baseline: bool = False
) -> dict:
    stage = "single_gpu" if run.startswith("single_gpu") else "multi_node"
    return {
        "run": run,
        "stage": stage,
        "workers": workers,
        "img/s": images_per_sec,
        "baseline": baseline,
        "setting": "-" if stage == "single_gpu" else "naive, lr warmup",
        "_curve": curve,
    }


@pytest.fixture
def figures():
    """Draws the figures report.plot makes (so that ticks and limits are final), closes them after
    the test."""
    import matplotlib.pyplot as plt

    def draw(table: list[dict]):
        figure = report.plot(table)
        figure.canvas.draw()
        return figure

    yield draw
    plt.close("all")


def visible_ticks(axis, limits: tuple[float, float]) -> list[float]:
    low, high = sorted(limits)
    return [tick for tick in axis.get_ticklocs() if low <= tick <= high]


@pytest.mark.parametrize("curve", [ONE_EPOCH, THREE_EPOCHS], ids=["one epoch", "three epochs"])
@pytest.mark.parametrize("workers", [2, 8])
def test_workers_epochs_and_updates_get_integer_ticks_only(figures, curve, workers):
    figure = figures(
        [
            row("single_gpu-1.local", 1, 150.0, curve, baseline=True),
            row("multi_node-2.local", workers, 140.0 * workers, curve),
        ]
    )
    speed, by_epoch, by_update, _ = figure.axes
    for ax in (speed, by_epoch, by_update):
        ticks = visible_ticks(ax.xaxis, ax.get_xlim())
        assert ticks and all(tick == int(tick) for tick in ticks), (ax.get_title(), ticks)


def test_each_label_has_one_legend_entry_and_one_colour(figures):
    # Two rows with the same label (one run listed twice) must not show it twice in two colours.
    figure = figures(
        [
            row("single_gpu-1.local", 1, 150.0, THREE_EPOCHS, baseline=True),
            row("single_gpu-1.local", 1, 148.0, THREE_EPOCHS),
            row("multi_node-2.local", 2, 290.0, THREE_EPOCHS),
        ]
    )
    for ax in figure.axes:
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
        assert len(labels) == len(set(labels)), (ax.get_title(), labels)
    by_epoch = figure.axes[1]
    colours = {}
    for line in by_epoch.get_lines():
        colours.setdefault(line.get_label(), set()).add(line.get_color())
    assert {label: len(found) for label, found in colours.items()} == {
        "single_gpu-1.local": 1,
        "multi_node-2.local (naive, lr warmup)": 1,
    }


@pytest.mark.parametrize("workers", [1, 4])
def test_the_ideal_line_is_drawn_inside_the_throughput_plot(figures, workers):
    figure = figures(
        [
            row("single_gpu-1.local", 1, 150.0, ONE_EPOCH, baseline=True),
            row("multi_node-2.local", workers, 100.0 * workers, ONE_EPOCH),
        ]
    )
    speed = figure.axes[0]
    [ideal] = [line for line in speed.get_lines() if line.get_label().startswith("ideal")]
    assert ideal.get_visible() and ideal.get_linewidth() > 0 and ideal.get_linestyle() == "--"
    (x_low, x_high), (y_low, y_high) = speed.get_xlim(), speed.get_ylim()
    xs, ys = ideal.get_data()
    assert list(xs) == [1, max(2, workers)] and list(ys) == [150.0, 150.0 * max(2, workers)]
    assert all(x_low < x < x_high for x in xs) and all(y_low < y < y_high for y in ys)
    assert "ideal (linear, from the baseline)" in [
        text.get_text() for text in speed.get_legend().get_texts()
    ]


def test_weak_and_strong_scaling_runs_are_told_apart_beside_one_ideal_line(figures):
    strong = {**row("multi_node-3.local", 2, 240.0, ONE_EPOCH), "scaling": "strong"}
    figure = figures(
        [
            row("single_gpu-1.local", 1, 150.0, ONE_EPOCH, baseline=True),
            {**row("multi_node-2.local", 2, 280.0, ONE_EPOCH), "scaling": "weak"},
            strong,
        ]
    )
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert labels == [
        "single_gpu",
        "multi_node",
        "multi_node (strong scaling)",
        "ideal (linear, from the baseline)",
    ]


def test_no_ideal_line_without_a_baseline(figures):
    speed = figures([row("multi_node-2.local", 2, 290.0, ONE_EPOCH)]).axes[0]
    assert [line.get_label() for line in speed.get_lines()] == []
    assert visible_ticks(speed.xaxis, speed.get_xlim()) == [1, 2]


def test_no_table_cell_wraps():
    html = report.table_html(
        [
            {
                **row("multi_node-12.reedbush-pbsadmin0", 2, 290.0, ONE_EPOCH),
                **{column: None for column in report.COLUMNS[2:]},
            }
        ]
    )
    cells = re.findall(r"<(t[dh])( [^>]*)?>", html)
    assert len(cells) == 2 * len(report.COLUMNS)
    assert all(attributes == ' style="white-space: nowrap"' for _, attributes in cells)
    assert "<td" in html and ">multi_node-12.reedbush-pbsadmin0</td>" in html


def test_without_the_grader_the_report_has_no_target_and_no_references(monkeypatch, tmp_path):
    # The students' bundle ships course/ without course/instructor/ (and without grading.toml).
    monkeypatch.setitem(sys.modules, "course.instructor", None)
    monkeypatch.setenv("COURSE_GRADING_CONFIG", str(tmp_path / "grading.toml"))  # none there
    assert report.references() == {}
    assert report_rules.accuracy_target(object()) is None


def test_runs_that_measured_nothing_still_plot(figures):
    # An untraced run's row has 0 img/s (evidence.Run.images_per_sec), and no curve.
    speed = figures([row("multi_node-2.local", 2, 0.0, [])]).axes[0]
    assert speed.get_ylim() == (0.0, 1.0)
