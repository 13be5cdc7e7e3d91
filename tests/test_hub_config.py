"""The hub's settings (course/instructor/hub.py), read by jupyterhub/jupyterhub_config.py: what a
missing setting says, and nbgrader's groups and roles. tests/test_hub.py runs the hub itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course.errors import CourseError
from course.instructor import exchange, hub
from tests.helpers import ROOT


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    return {
        hub.INSTRUCTORS: "kim",
        hub.STUDENTS: "ada, ben",
        hub.COURSE_DIR: str(course),
        exchange.ENV: str(tmp_path / "exchange"),
    }


def test_the_roster_comes_from_the_environment(env):
    roster = hub.roster(env)
    assert roster.course_id == "chainer-distributed-training"
    assert roster.instructors == ("kim",) and roster.students == ("ada", "ben")
    assert roster.grader == "grader-chainer-distributed-training", "nbgrader's naming by default"
    assert roster.exchange == Path(env[exchange.ENV])


@pytest.mark.parametrize(
    ("unset", "said"),
    [
        (hub.COURSE_DIR, "needs COURSE_HUB_COURSE_DIR"),
        (exchange.ENV, "needs COURSE_EXCHANGE"),
        (hub.STUDENTS, "COURSE_HUB_STUDENTS names no hub user"),
    ],
)
def test_a_missing_setting_is_named_with_how_to_set_it(env, unset, said):
    del env[unset]
    with pytest.raises(CourseError, match=said):
        hub.roster(env)


def test_a_course_folder_without_nbgrader_config_is_refused(env, tmp_path):
    env[hub.COURSE_DIR] = str(tmp_path)
    with pytest.raises(CourseError, match="has no nbgrader_config.py"):
        hub.roster(env)


def test_nbgraders_groups_and_who_reaches_the_formgrader(env):
    roster = hub.roster({**env, hub.GRADER: "grader"})
    groups = hub.groups(roster)
    assert groups["formgrade-chainer-distributed-training"]["users"] == ["kim", "grader"]
    assert groups["nbgrader-chainer-distributed-training"]["users"] == ["ada", "ben"]
    roles = {role["name"]: role for role in hub.roles(roster)}
    access = "access:services!service=chainer-distributed-training"
    assert access in roles["formgrade-chainer-distributed-training"]["scopes"]
    assert access not in roles["nbgrader-chainer-distributed-training"]["scopes"]


def test_the_instructors_nbgrader_configuration_uses_nbgraders_hub_plugin(env, tmp_path):
    folder = hub.instructor_config(tmp_path / "instructor", hub.roster(env))
    text = (folder / "nbgrader_config.py").read_text()
    assert "JupyterHubAuthPlugin" in text and "path_includes_course = True" in text
    assert env[exchange.ENV] in text
    compile(text, "nbgrader_config.py", "exec")
