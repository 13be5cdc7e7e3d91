"""The hub's settings (course/instructor/hub.py), read by jupyterhub/jupyterhub_config.py: what a
missing setting says, and nbgrader's groups and roles. tests/test_hub.py runs the hub itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from course.errors import CourseError
from course.instructor import bundle, exchange, hub
from tests.helpers import PYTHON, ROOT


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


def test_a_student_whose_home_has_ipython_starts_jupyter_on_the_hubs_shared_configuration(
    env, tmp_path, monkeypatch
):
    """A student's second server start (issue 25): Jupyter, with ~/.ipython there, migrates IPython
    3's settings and writes its marker into JUPYTER_CONFIG_DIR, here the hub's folder that students
    cannot write. Jupyter's own start-up, run as someone who cannot write the folder."""
    monkeypatch.setattr(bundle, "student_jupyter_config", lambda folder: folder.mkdir())
    folder = hub.student_config(tmp_path / "jupyter-student", hub.roster(env))
    (tmp_path / "home" / ".ipython").mkdir(parents=True)
    folder.chmod(0o555)  # as the students see it: the hub's (root's), not theirs
    # root passes every permission: dropping its override makes it a student for this folder
    unprivileged = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("as root this needs setpriv (util-linux) to be refused a read-only folder")
    start = [*(unprivileged if os.geteuid() == 0 else []), PYTHON, "-c"]
    start.append("from jupyter_core.application import JupyterApp; JupyterApp().initialize([])")
    shown = {**os.environ, "HOME": str(tmp_path / "home"), "JUPYTER_CONFIG_DIR": str(folder)}
    shown.pop("IPYTHONDIR", None)

    def jupyter() -> subprocess.CompletedProcess:
        return subprocess.run(start, env=shown, capture_output=True, text=True, timeout=120)

    started = jupyter()
    assert started.returncode == 0, started.stderr
    folder.chmod(0o755)
    (folder / hub.MIGRATED).unlink()  # what the hub's folder was: the second start fails
    folder.chmod(0o555)
    assert "PermissionError" in jupyter().stderr, "the failure this marker prevents"


def test_the_batch_spawners_settings_come_from_the_environment():
    settings = hub.batch_settings(
        {hub.HUB_IP: "10.0.0.1", hub.PARTITION: "course", hub.WALLTIME: "4:00:00"}
    )
    assert settings == hub.BatchSettings("10.0.0.1", "course", "4:00:00")
    assert hub.batch_settings({hub.HUB_IP: "10.0.0.1"}).walltime == "", "the partition's limit"


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({}, "COURSE_HUB_HUB_IP='' is not an address the compute nodes can reach"),
        ({hub.HUB_IP: "127.0.0.1"}, "not an address the compute nodes can reach"),
        ({hub.HUB_IP: "login1"}, "set it to the hub host's IP address"),
        ({hub.HUB_IP: "10.0.0.1", hub.WALLTIME: "4h"}, "write it as hours:minutes:seconds"),
    ],
)
def test_a_wrong_batch_setting_says_how_to_set_it(settings, said):
    with pytest.raises(CourseError) as refused:
        hub.batch_settings(settings)
    assert said in f"{refused.value.message} {refused.value.hint}"


def test_the_batch_configuration_adds_slurm_to_the_kits_hub(env, tmp_path, monkeypatch):
    """jupyterhub/batchspawner_config.py, loaded as JupyterHub loads it: the kit's hub
    (jupyterhub_config.py) with batchspawner's SlurmSpawner. tests/test_hub_batch.py runs it."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.chdir(tmp_path)  # the hub's state folder: the roles' Jupyter configuration
    # Not the students' lab extensions (two `jupyter labextension` runs, many seconds):
    # tests/test_hub.py checks them on the running hub.
    monkeypatch.setattr(bundle, "student_jupyter_config", lambda folder: folder.mkdir())
    settings = {hub.HUB_IP: "10.0.0.1", hub.PARTITION: "course", "SLURM_CONF": "/srv/slurm.conf"}
    for name, value in {**env, **settings}.items():
        monkeypatch.setenv(name, value)
    loader = PyFileConfigLoader("batchspawner_config.py", str(ROOT / "jupyterhub"))
    config = loader.load_config()
    assert config.JupyterHub.spawner_class == "batchspawner.SlurmSpawner"
    assert config.JupyterHub.hub_ip == "10.0.0.1", "the nodes reach the hub's API there"
    assert config.SlurmSpawner.req_partition == "course" and config.SlurmSpawner.req_runtime == ""
    assert config.SlurmSpawner.exec_prefix == "runuser -u {username} --"
    assert config.Spawner.environment["SLURM_CONF"] == "/srv/slurm.conf"
    assert config.JupyterHub.services[0]["name"] == "chainer-distributed-training"
    assert callable(config.Spawner.pre_spawn_hook), "the roles' configuration, as on the hub"


def test_the_authenticated_exchange_is_one_setting(env, tmp_path, monkeypatch):
    """COURSE_HUB_EXCHANGE=ngshare: ngshare a hub service (its store the hub's alone), every
    server's and the formgrader's nbgrader on ngshare-exchange; no shared folder is needed.
    tests/test_hub_ngshare.py runs it with two students."""
    from traitlets.config.loader import PyFileConfigLoader

    del env[exchange.ENV]
    with pytest.raises(CourseError, match="needs COURSE_EXCHANGE"):
        hub.roster(env)  # the shared folder stays the default
    env |= {hub.EXCHANGE_KIND: "ngshare", hub.NGSHARE_PORT: "10123"}
    roster = hub.roster(env)
    assert roster.exchange is None
    assert roster.ngshare_url == "http://127.0.0.1:10123/services/ngshare"
    assert hub.roster({**env, hub.HUB_IP: "10.0.0.1"}).ngshare_url.startswith("http://10.0.0.1:")
    service = hub.ngshare_service(roster, tmp_path)
    assert service["url"] == "http://127.0.0.1:10123" and "--admins=kim" in service["command"]
    assert (tmp_path / "ngshare").stat().st_mode & 0o777 == 0o700, "no student writes the store"
    # The same switch ends the course's nbgrader_config.py and both roles' configurations.
    assert f'os.environ.get("{hub.NGSHARE_URL}")' in hub.NGSHARE_SWITCH
    assert hub.NGSHARE_SWITCH in (ROOT / "nbgrader_config.py").read_text()
    monkeypatch.setattr(bundle, "student_jupyter_config", lambda folder: folder.mkdir())
    folders = [
        hub.instructor_config(tmp_path / "instructor", roster),
        hub.student_config(tmp_path / "student", roster),
    ]
    monkeypatch.setenv(hub.NGSHARE_URL, roster.ngshare_url)
    monkeypatch.setenv("JUPYTERHUB_USER", "kim")  # ngshare-exchange reads it (else USER) on import
    for folder in folders:
        config = PyFileConfigLoader("nbgrader_config.py", str(folder)).load_config()
        assert config.ExchangeFactory.submit.__module__ == "ngshare_exchange.submit", folder
        assert config.ExchangeFactory.collect.__module__ == "ngshare_exchange.collect", folder


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({hub.EXCHANGE_KIND: "nfs"}, "set COURSE_HUB_EXCHANGE=ngshare"),
        ({hub.EXCHANGE_KIND: "ngshare", hub.NGSHARE_PORT: "http"}, "is not a port"),
    ],
)
def test_a_wrong_exchange_setting_says_how_to_set_it(env, settings, said):
    with pytest.raises(CourseError) as refused:
        hub.roster({**env, **settings})
    assert said in f"{refused.value.message} {refused.value.hint}"


def test_ngshare_stores_what_it_answers_success_for_under_sqlalchemy_2():
    """ngshare 0.6.0 relied on SQLAlchemy 1.x putting an object attached to a stored one in the
    session; under SQLAlchemy 2 a release (or a hand-in) answered "success" and stored nothing. The
    kit's service start restores that cascade (course/instructor/ngshare_service.py)."""
    from ngshare.database.database import Assignment, Base, Course, File
    from sqlalchemy import create_engine
    from sqlalchemy.orm import sessionmaker

    from course.instructor import ngshare_service

    def released() -> int:
        engine = create_engine("sqlite://")
        Base.metadata.create_all(engine)
        db = sessionmaker(bind=engine)()
        course = Course("c")
        db.add(course)
        db.commit()
        assignment = Assignment("a", course)  # what ngshare's release does
        assignment.files.append(File("x.ipynb", b"{}"))
        db.commit()
        return db.query(File).count() + db.query(Assignment).count()

    if released() == 0:  # without the cascade: nothing stored (SQLAlchemy 2)
        ngshare_service.attach_cascades(Base)
    assert released() == 2, "the assignment and its file are stored"


def test_the_hubs_edition_comes_from_course_lang(env):
    assert hub.roster(env).lang == "en", "unset: the English edition"
    assert hub.roster({**env, "COURSE_LANG": "ja"}).lang == "ja"
    with pytest.raises(CourseError) as refused:
        hub.roster({**env, "COURSE_LANG": "jp"})
    said = f"{refused.value.message} {refused.value.hint}"
    assert "COURSE_LANG='jp'" in said and "en or ja" in said, said


def test_the_japanese_hub_gives_every_server_its_language(env, tmp_path, monkeypatch):
    """jupyterhub_config.py loaded as JupyterHub loads it, with COURSE_LANG=ja in the hub's
    environment: the servers and the formgrader service get it, and both roles' Jupyter
    configuration makes JupyterLab Japanese. tests/test_hub_ja.py runs such a hub."""
    from traitlets.config.loader import PyFileConfigLoader

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bundle, "student_jupyter_config", lambda folder: folder.mkdir())
    for name, value in {**env, "COURSE_LANG": "ja"}.items():
        monkeypatch.setenv(name, value)
    config = PyFileConfigLoader("jupyterhub_config.py", str(ROOT / "jupyterhub")).load_config()
    assert config.Spawner.environment["COURSE_LANG"] == "ja"
    assert config.JupyterHub.services[0]["environment"]["COURSE_LANG"] == "ja"
    for role in ("jupyter-student", "jupyter-instructor"):
        server = json.loads((tmp_path / role / "jupyter_server_config.json").read_text())
        settings = Path(server["LabApp"]["app_settings_dir"])
        overrides = json.loads((settings / "overrides.json").read_text())
        assert overrides == {"@jupyterlab/translation-extension:plugin": {"locale": "ja_JP"}}


def test_the_english_hub_leaves_jupyterlab_in_its_own_language(env, tmp_path):
    folder = hub.instructor_config(tmp_path / "instructor", hub.roster(env))
    assert "LabApp" not in json.loads((folder / "jupyter_server_config.json").read_text())
    assert hub.server_environment(hub.roster(env)) == {"COURSE_LANG": "en"}
