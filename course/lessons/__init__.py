"""The course's lessons, one folder each: the exercises' observers and checks, the arithmetic the
lesson teaches, and its reports."""

from __future__ import annotations

import importlib
import pkgutil


def load_all() -> None:
    """Import every lesson's modules: where a student's functions are checked for the grader, all of
    the kit is loaded (and frozen, course.notebook.checks.observe.freeze_kit) before their code
    runs, so that no observer is left for it to load and patch first."""
    for found in pkgutil.walk_packages(__path__, f"{__name__}."):
        importlib.import_module(found.name)
