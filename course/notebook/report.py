"""Tables and plots of the runs, and the notebooks' visible checks of them (the demo's summary too)."""
from __future__ import annotations

import html
from pathlib import Path

from course import evidence, results, stages
from course.errors import CourseError

COLUMNS = ("run", "stage", "workers", "devices", "communication", "img/s", "spread", "speedup", "efficiency",
           "val. accuracy", "counts")


def rows(folder: Path = Path(".")) -> list[dict]:
    """One row per run of any stage, with speedup and efficiency against the stage-1 baseline."""
    base = evidence.baseline(folder)
    table = []
    for stage in stages.NAMES:
        for run in evidence.runs(stage, folder):
            record = run.record
            log = record.get("log") or []
            comparable = base is not None and run.traced and not evidence.comparable(run, base)
            table.append({
                "run": run.path.parent.name, "stage": stage, "workers": run.workers,
                "devices": ", ".join(sorted(set(record.get("devices") or []))) + (
                    f" on {len(set(record.get('hosts') or []))} node(s)" if record.get("hosts") else ""),
                "communication": run.setting if stage == stages.MULTI_NODE.name else "-",
                "img/s": run.images_per_sec,
                "spread": (record.get("throughput") or {}).get("std", 0.0),
                "speedup": run.images_per_sec / base.images_per_sec if comparable else None,
                "efficiency": evidence.efficiency(run, base) if comparable else None,
                "val. accuracy": log[-1].get("validation/main/accuracy") if log else None,
                "counts": "yes" if run.traced else "no: " + run.problems[0],
                "_log": log,
            })
    return table


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return html.escape(str(value))


def table_html(table: list[dict]) -> str:
    head = "".join(f"<th>{c}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{_cell(row[c])}</td>" for c in COLUMNS) + "</tr>" for row in table)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def table_text(table: list[dict]) -> str:
    cells = [list(COLUMNS)] + [[_cell(row[c]) if c != "counts" else row[c][:40] for c in COLUMNS] for row in table]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells)


def references() -> dict[str, dict[str, float]]:
    """Reference images/sec per GPU model from evidence.toml, where it can be found."""
    from course.instructor import scoring

    try:
        return scoring.config().get("reference", {})
    except CourseError:
        return {}


def plot(table: list[dict]):
    """Images/sec against workers, with the ideal line from stage 1; validation accuracy per epoch."""
    import matplotlib.pyplot as plt

    figure, (speed, accuracy) = plt.subplots(1, 2, figsize=(11, 4))
    markers = dict(zip(stages.NAMES, "os^"))
    for row in table:
        speed.scatter(row["workers"], row["img/s"], marker=markers[row["stage"]],
                      label=f"{row['stage']} {row['communication'] if row['stage'] == stages.MULTI_NODE.name else ''}".strip())
        epochs = [entry["epoch"] for entry in row["_log"] if "validation/main/accuracy" in entry]
        values = [entry["validation/main/accuracy"] for entry in row["_log"] if "validation/main/accuracy" in entry]
        if epochs:
            accuracy.plot(epochs, values, marker=markers[row["stage"]], label=row["run"])
    bases = [row for row in table if row["stage"] == stages.BASELINE.name and row["counts"] == "yes"]
    if bases:
        most = max(row["workers"] for row in table)
        speed.plot([1, most], [bases[-1]["img/s"], most * bases[-1]["img/s"]], "k--", lw=1, label="ideal (linear)")
    speed.set(xlabel="workers (GPUs or CPU cores)", ylabel="images/sec", title="Throughput")
    accuracy.set(xlabel="epoch", ylabel="validation accuracy", title="Accuracy", ylim=(0, 1))
    for axes in (speed, accuracy):
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    return figure


def show(folder: Path = Path(".")) -> list[dict]:
    """Display the table (and plots) of every run in this folder; return the rows."""
    from IPython.display import HTML, display

    table = rows(folder)
    if not table:
        print("No runs yet: submit a job above, then run this cell again.")
        return table
    display(HTML(table_html(table)))
    display(plot(table))
    import matplotlib.pyplot as plt

    plt.close("all")
    for model, figures in references().items():
        shown = ", ".join(f"{stage} {value} img/s" for stage, value in figures.items())
        print(f"Reference, {model}: {shown}")
    return table


def check_runs(stage: str, folder: Path = Path(".")) -> list[evidence.Run]:
    """Print whether the job outputs of `stage` will count (a visible self-check; never raises)."""
    found = evidence.runs(stage, folder)
    if not found:
        print(f"No {stage} run yet in {Path(folder, results.RUNS_DIR)}/: submit the job above.")
    for run in found:
        status = "OK, traced to " + run.log.name if run.traced else "WILL NOT COUNT: " + "; ".join(run.problems)
        print(f"{run.describe()}: {run.images_per_sec:.1f} img/s, {run.workers} worker(s) [{status}]")
        for note in run.notes:
            print(f"  note: {note}")
    return found


def check_comparison(folder: Path = Path(".")) -> evidence.Coverage:
    """Print what the stage-3 comparison covers so far (a visible self-check; never raises)."""
    coverage = evidence.comparison_coverage(evidence.runs(stages.MULTI_NODE.name, folder))
    if coverage.complete:
        print(f"OK: traced stage-3 runs cover {coverage.describe()}.")
    else:
        print(f"NOT YET: traced stage-3 runs cover {coverage.describe()}; the comparison needs at least "
              f"{coverage.NEEDED} of each: run the comparison cell above.")
    return coverage


def main(argv: list[str]) -> int:
    """`python -m course report [FOLDER]`: the table of the runs in a folder, in a terminal."""
    import argparse

    parser = argparse.ArgumentParser(prog="course report", description=main.__doc__)
    parser.add_argument("folder", type=Path, nargs="?", default=Path("."),
                        help="where you submit the jobs from (default: here)")
    args = parser.parse_args(argv)
    table = rows(args.folder)
    if not table:
        raise CourseError(f"no runs in {args.folder / results.RUNS_DIR}",
                          "give the folder you submit the jobs from (it holds runs/ and the job logs)")
    print(table_text(table))
    return 0
