"""The nbgrader workflow in JupyterLab 4, in a real browser: Debian's chromium, driven by Selenium.

A student's JupyterLab (the student environment: no instructor extensions) fetches the assignment
from the Assignment List, runs the first cells of notebook 01 and submits; the instructor collects
and autogrades with `python -m course grade`, and sees the submission and its score in the
Formgrader of the instructor's JupyterLab. Only 127.0.0.1 is contacted. Screenshots go to the test's
temporary folder, and also to COURSE_SCREENSHOTS when it names a folder.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from course import paths
from course.instructor import demo, exchange
from tests.helpers import PYTHON, ROOT, bubblewrap, python_ok

pytestmark = pytest.mark.slow

STUDENT = "alice"
TOKEN = "course-browser-test"
START_TIMEOUT = 90  # seconds for a JupyterLab server to answer (a loaded 2-core machine)
UI_TIMEOUT = 90  # seconds for anything the page shows (JupyterLab's first load, a kernel's imports)
INSTRUCTOR_TOOLS = {"Formgrader", "Create assignment"}  # nbgrader's menu entries for the instructor
CREATE_ASSIGNMENT = '[title="Nbgrader Create Assignment"]'  # the side panel's tab beside a notebook


@dataclass
class Lab:
    """A JupyterLab server of this test."""

    url: str
    root: Path
    process: subprocess.Popen

    def page(self, path: str = "lab") -> str:
        return f"{self.url}/{path}?token={TOKEN}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(root: Path, env: dict[str, str], log: Path) -> Lab:
    """JupyterLab on 127.0.0.1 (a free port, a token, no browser of its own, nothing fetched from
    the web)."""
    port = free_port()
    command = [
        PYTHON,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}",
        "--allow-root",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    lab = Lab(f"http://127.0.0.1:{port}", root, process)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"JupyterLab stopped at start (exit {process.returncode}):\n{log.read_text()}"
            )
        try:
            with urllib.request.urlopen(lab.page("api/status"), timeout=5):
                return lab
        except OSError:
            time.sleep(0.5)
    stop_lab(lab)
    raise AssertionError(f"JupyterLab did not answer within {START_TIMEOUT} s:\n{log.read_text()}")


def stop_lab(lab: Lab) -> None:
    lab.process.terminate()
    try:
        lab.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        lab.process.kill()
        lab.process.wait(timeout=20)


def jupyter_env(base: dict[str, str], home: Path) -> dict[str, str]:
    """An environment whose Jupyter configuration, data and runtime folders are under `home` only,
    and whose JupyterLab does not offer to fetch Jupyter's news (a prompt over the screenshots)."""
    home.mkdir()
    settings = home / "lab-settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (
        settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    ).write_text(json.dumps({"fetchNews": "false"}))
    return {
        **base,
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(home / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(home / "jupyter-runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
    }


@dataclass
class Course:
    """This test's course: its temporary folder, the course folder, and the environment of every
    process (the quick data set, the course's own exchange)."""

    tmp: Path
    folder: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def course(tmp_path_factory, quick_env) -> Course:
    """A course folder whose instructor has released the assignment to its exchange."""
    tmp = tmp_path_factory.mktemp("browser")
    env = {**quick_env, exchange.ENV: str(tmp / "exchange")}
    folder = demo.course_folder(ROOT, tmp / "course")
    shutil.copytree(ROOT / "notebooks" / paths.ASSIGNMENT, folder / "notebooks" / paths.ASSIGNMENT)
    python_ok(
        "-m",
        "nbgrader",
        "release_assignment",
        paths.ASSIGNMENT,
        "--force",
        cwd=folder,
        env=env,
        timeout=300,
    )
    return Course(tmp, folder, env)


@pytest.fixture(scope="module")
def student_lab(course: Course) -> Iterator[Lab]:
    """The student's JupyterLab as the student bundle starts it: in the bundle's folder (its
    nbgrader_config.py names the exchange), with the bundle's jupyter/ as its configuration (no
    instructor extensions)."""
    tmp = course.tmp
    bundle = tmp / "bundle"
    python_ok(
        "-m",
        "course",
        "bundle",
        "--out",
        str(bundle),
        "--exchange",
        course.env[exchange.ENV],
        env=course.env,
        timeout=300,
    )
    # The bundle holds the release where fetch would put it: this student fetches it from the
    # exchange instead.
    shutil.rmtree(exchange.assignment_folder(bundle, exchange.settings(bundle)))
    # nbgrader names a submission after the account (root here); on a hub it is the student's own.
    identity = tmp / "student-identity"
    identity.mkdir()
    (identity / "nbgrader_config.py").write_text(f"c.CourseDirectory.student_id = {STUDENT!r}\n")
    env = {
        **jupyter_env(course.env, tmp / "student-home"),
        "JUPYTER_CONFIG_DIR": str(bundle / "jupyter"),
        "JUPYTER_CONFIG_PATH": str(identity),
    }
    lab = start_lab(bundle, env, tmp / "student-lab.log")
    yield lab
    stop_lab(lab)


@pytest.fixture(scope="module")
def japanese_lab(course: Course) -> Iterator[Lab]:
    """The Japanese bundle's JupyterLab, its user settings where start-jupyterlab.sh leaves them
    (under the bundle's jupyter/), COURSE_LANG as that script sets it."""
    bundle = course.tmp / "演習 1"  # a student folder with Japanese characters and a space
    python_ok(
        *("-m", "course", "bundle", "--out", str(bundle), "--lang", "ja"),
        env=course.env,
        timeout=300,
    )
    settings = bundle / "jupyter" / "lab" / "user-settings"
    news = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false"}))
    env = {
        **jupyter_env(course.env, course.tmp / "japanese-home"),
        "JUPYTER_CONFIG_DIR": str(bundle / "jupyter"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "COURSE_LANG": "ja",
    }
    lab = start_lab(bundle, env, course.tmp / "japanese-lab.log")
    yield lab
    stop_lab(lab)


@pytest.fixture(scope="module")
def instructor_lab(course: Course) -> Iterator[Lab]:
    """The instructor's JupyterLab in the course folder, with every nbgrader extension."""
    home = course.tmp / "instructor-home"
    lab = start_lab(course.folder, jupyter_env(course.env, home), course.tmp / "instructor-lab.log")
    yield lab
    stop_lab(lab)


@pytest.fixture(scope="module")
def browser(chromium: tuple[str, str], course: Course) -> Iterator:
    """Headless chromium through its chromedriver, which may reach 127.0.0.1 only."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    # --no-sandbox: chromium's own sandbox refuses to start as root, as the tests run in CI.
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(argument)
    service = Service(executable_path=driver, log_output=str(course.tmp / "chromedriver.log"))
    session = webdriver.Chrome(service=service, options=options)
    yield session
    session.quit()


@pytest.fixture
def screenshot(browser, tmp_path) -> Callable[[str], Path]:
    """Save the page as <name>.png in the test's folder (and in COURSE_SCREENSHOTS, when set)."""

    def save(name: str) -> Path:
        path = tmp_path / f"{name}.png"
        browser.save_screenshot(str(path))
        if os.environ.get("COURSE_SCREENSHOTS"):
            Path(os.environ["COURSE_SCREENSHOTS"]).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(os.environ["COURSE_SCREENSHOTS"]) / path.name)
        return path

    return save


def wait_for(browser, condition: Callable, what: str, timeout: float = UI_TIMEOUT):
    """condition(browser) once truthy (its value); fails saying `what` did not appear, with the
    page's text."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:  # JupyterLab redraws as it loads: an element found a moment ago may be gone, so look again
        return WebDriverWait(
            browser,
            timeout,
            poll_frequency=0.25,
            ignored_exceptions=[StaleElementReferenceException],
        ).until(condition)
    except TimeoutException:
        text = browser.find_element("tag name", "body").text[-2000:]
        raise AssertionError(f"{what}: not within {timeout} s; the page shows:\n{text}") from None


def by_css(selector: str) -> Callable:
    return lambda browser: browser.find_elements("css selector", selector)


def open_lab(browser, lab: Lab, path: str = "lab") -> None:
    """Load JupyterLab at `path` afresh: `reset` drops the workspace an earlier page left, which
    would open its panels again (and a notebook twice, with a second kernel that replaces the
    first)."""
    browser.get(lab.page(path) + "&reset")
    wait_for(browser, by_css("#jp-main-dock-panel"), "JupyterLab's main area")
    wait_for(browser, lambda b: "Nbgrader" in menu_bar(b), "the Nbgrader menu")


def menu_bar(browser) -> dict:
    return {e.text: e for e in browser.find_elements("css selector", ".lm-MenuBar-itemLabel")}


def nbgrader_menu(browser, screenshot: Callable[[str], Path], name: str) -> set[str]:
    """The entries of JupyterLab's Nbgrader menu, photographed open as `name`."""
    from selenium.webdriver.common.keys import Keys

    menu_bar(browser)["Nbgrader"].click()
    entries = wait_for(
        browser, by_css(".lm-Menu .lm-Menu-itemLabel"), "the Nbgrader menu's entries"
    )
    labels = {entry.text for entry in entries}
    screenshot(name)
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    return labels


def choose(browser, entry: str) -> None:
    menu_bar(browser)["Nbgrader"].click()
    [item] = [
        e
        for e in wait_for(browser, by_css(".lm-Menu .lm-Menu-itemLabel"), "the Nbgrader menu")
        if e.text == entry
    ]
    item.click()


def test_the_student_lab_has_no_instructor_tools(browser, student_lab, screenshot):
    open_lab(browser, student_lab)
    entries = nbgrader_menu(browser, screenshot, "student-nbgrader-menu")
    assert "Assignment List" in entries and not entries & INSTRUCTOR_TOOLS, entries
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(student_lab.page("formgrader"), timeout=30)
    assert refused.value.code == 404, "the Formgrader's server extension is off"


def test_the_japanese_lab_shows_its_menus_and_the_notebooks_in_japanese(
    browser, japanese_lab, screenshot
):
    folder = f"{exchange.settings(japanese_lab.root).course_id}/distributed_training_ja"
    browser.get(japanese_lab.page(f"lab/tree/{folder}/01_single_gpu.ipynb") + "&reset")
    wait_for(browser, lambda b: "ファイル" in menu_bar(b), "JupyterLab's File menu in Japanese")
    assert {"編集", "表示", "ヘルプ"} <= set(menu_bar(browser)), set(menu_bar(browser))
    cells = wait_for(browser, by_css(".jp-Notebook .jp-MarkdownCell"), "notebook 01's text")
    wait_for(browser, lambda b: "ステージ 1" in cells[0].text, "notebook 01's Japanese title")
    screenshot("japanese-lab")


def test_the_instructor_lab_has_them(browser, instructor_lab, screenshot):
    open_lab(browser, instructor_lab, f"lab/tree/solutions/{paths.ASSIGNMENT}/01_single_gpu.ipynb")
    wait_for(browser, by_css(".jp-Notebook .jp-Cell"), "the source notebook 01")
    wait_for(browser, by_css(CREATE_ASSIGNMENT), "the Create Assignment side panel")
    assert INSTRUCTOR_TOOLS <= nbgrader_menu(browser, screenshot, "instructor-nbgrader-menu")


def assignment_row(section: str) -> Callable:
    """The assignment's row in a section of the Assignment List (released, fetched, submitted)."""

    def find(b):
        rows = b.find_elements("css selector", f"#{section}_assignments_list .list_item")
        return [row for row in rows if paths.ASSIGNMENT in row.text]

    return find


def test_a_submission_from_the_assignment_list_is_graded_and_shown_in_the_formgrader(
    browser, course, student_lab, instructor_lab, screenshot
):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    # The student fetches the released assignment.
    open_lab(browser, student_lab)
    choose(browser, "Assignment List")
    [released] = wait_for(browser, assignment_row("released"), "the released assignment")
    screenshot("assignment-list-released")
    released.find_element("xpath", ".//button[normalize-space()='Fetch']").click()
    wait_for(browser, assignment_row("fetched"), "the fetched assignment")
    settings = exchange.settings(course.folder)
    fetched = exchange.assignment_folder(student_lab.root, settings)
    assert (fetched / "01_single_gpu.ipynb").is_file() and (fetched / "jobs").is_dir()
    # The student's work: the solutions in the exercise cells (as make demo's student writes them).
    solved = demo.student_copy(
        fetched, ROOT / "solutions" / paths.ASSIGNMENT, course.tmp / "solved"
    )
    for name in demo.NOTEBOOKS:
        shutil.copy(solved / name, fetched / name)

    # Notebook 01: its first cells run and show their outputs, no error.
    notebook = fetched.relative_to(student_lab.root) / "01_single_gpu.ipynb"
    open_lab(browser, student_lab, f"lab/tree/{notebook}")
    wait_for(
        browser,
        lambda b: (
            "Python 3 (ipykernel) | Idle"
            in b.find_element("css selector", "#jp-main-statusbar").text
        ),
        "notebook 01's kernel, idle",
    )
    wait_for(
        browser,
        lambda b: b.find_element("css selector", ".jp-Notebook .jp-Cell").click() or True,
        "notebook 01's first cell, selected",
    )
    for _ in range(3):  # the introduction, the setup cell, the text after it
        ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(
            Keys.SHIFT
        ).perform()
    # textContent: the notebook scrolls on as cells run, and .text is empty for an output scrolled
    # out of view.
    output = wait_for(
        browser,
        lambda b: [
            e
            for e in b.find_elements("css selector", ".jp-OutputArea-output")
            if "Stage 1 (single_gpu)" in e.get_attribute("textContent")
        ],
        "the setup cell's output",
    )
    said = output[0].get_attribute("textContent")
    assert "site profile: local" in said and "Data: small" in said, said
    # JupyterLab renders tracebacks and stderr alike, as application/vnd.jupyter.stderr.
    assert not browser.find_elements(
        "css selector", '.jp-OutputArea-output[data-mime-type*="stderr"]'
    )
    assert not browser.find_elements("css selector", CREATE_ASSIGNMENT), (
        "no Create Assignment panel for students"
    )
    ActionChains(browser).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
    wait_for(
        browser,
        lambda b: not b.find_elements("css selector", ".jp-mod-dirty"),
        "the notebook saved",
    )
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", output[0])
    screenshot("notebook-01-setup")

    # The student submits from the Assignment List.
    choose(browser, "Assignment List")
    [row] = wait_for(browser, assignment_row("fetched"), "the fetched assignment")
    row.find_element("xpath", ".//button[normalize-space()='Submit']").click()
    wait_for(browser, assignment_row("submitted"), "the submitted assignment")
    screenshot("assignment-list-submitted")

    # The instructor collects and autogrades (in the sandbox where bubblewrap runs), then opens the
    # Formgrader.
    env = {**course.env, **({} if bubblewrap() else {"COURSE_SANDBOX": "off"})}
    python_ok(
        "-m",
        "course",
        "grade",
        "--course-dir",
        str(course.folder),
        "--exchange",
        env[exchange.ENV],
        "--no-feedback",
        env=env,
        timeout=600,
    )
    open_lab(browser, instructor_lab)
    choose(browser, "Formgrader")
    frame = wait_for(browser, by_css("iframe"), "the Formgrader's frame")[0]
    browser.switch_to.frame(frame)
    wait_for(browser, lambda b: b.find_elements("link text", "Manage Students"), "the Formgrader")[
        0
    ].click()
    with open(course.folder / "grades.csv") as f:
        [grade] = [row for row in csv.DictReader(f) if row["student_id"] == STUDENT]
    score = f"{float(grade['score']):g} / {float(grade['max_score']):g}"
    assert float(grade["score"]) > 0, "the solved exercises earned points"
    wait_for(
        browser,
        lambda b: [
            r
            for r in b.find_elements("css selector", "tbody tr")
            if STUDENT in r.text and score in r.text
        ],
        f"{STUDENT}'s score {score}",
    )
    screenshot("formgrader-students")
    browser.switch_to.default_content()


# What a student plants in a written answer, in an extra cell and in what their function prints:
# each, if it ran, would mark the page (the title, an attribute of the page's root element).
PLANTED_SCRIPT = "<script>document.documentElement.setAttribute('data-planted', 'script')</script>"
PLANTED_HANDLER = (
    "<img src=x onerror=\"document.documentElement.setAttribute('data-planted', 'handler')\">"
)
PLANTED_LINK = "[the data](javascript:document.title='planted')"
PLANTED_ANSWER = "My prediction held: **62.5 updates** per epoch, `iterations < 200`."
PLANTED_PRINT = "make_iterators says hello"
PLANTER = "mallory"


def planted_submission(course: Course) -> Path:
    """<folder>/mallory/distributed_training: notebook 01 solved, with script planted in its written
    answer, in a markdown cell of its own, in an HTML output and in what make_iterators prints."""
    import nbformat

    folder = demo.student_copy(
        course.folder / "notebooks" / paths.ASSIGNMENT,
        ROOT / "solutions" / paths.ASSIGNMENT,
        course.tmp / "planted" / PLANTER / paths.ASSIGNMENT,
    )
    for other in demo.NOTEBOOKS[1:]:  # one notebook is enough: the others score 0
        (folder / other).unlink()
    path = folder / "01_single_gpu.ipynb"
    notebook = nbformat.read(path, as_version=4)
    planted = f"{PLANTED_SCRIPT}\n\n{PLANTED_HANDLER}\n\n{PLANTED_LINK}\n"
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "answer_predict_run":
            cell.source = f"{PLANTED_ANSWER}\n\n{planted}"
        elif grade_id == "make_iterators":  # called by its check on the tiny data set
            docstring, body = cell.source.split('"""\n', 1)  # the print goes after the docstring
            printed = f"{PLANTED_PRINT} {PLANTED_SCRIPT}{PLANTED_HANDLER}"
            cell.source = f'{docstring}"""\n    print({printed!r})\n{body}'
            cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": planted})]
    notebook.cells.append(nbformat.v4.new_markdown_cell(f"A note of mine.\n\n{planted}"))
    nbformat.write(notebook, path)
    return folder.parent.parent


def no_planted_script_ran(browser, page: str, shown: list[str]) -> None:
    """The page (loaded: its images, the planted one included, have loaded or failed) shows every
    text of `shown` and carries no mark of a planted script."""
    wait_for(
        browser,
        lambda b: all(text in b.find_element("tag name", "body").text for text in shown),
        f"the {page} with {shown}",
    )
    marks = browser.execute_script(
        "return [document.documentElement.getAttribute('data-planted'), document.title]"
    )
    assert marks[0] is None and marks[1] != "planted", (
        f"a planted script ran in the {page}: {marks}"
    )
    for link in browser.find_elements("css selector", "a[href]"):
        assert not link.get_attribute("href").lower().startswith("javascript:"), page


def test_no_script_a_student_planted_runs_in_the_feedback_or_the_formgrader(
    browser, course, instructor_lab, screenshot
):
    from nbgrader.api import Gradebook

    submitted = planted_submission(course)
    env = {**course.env, **({} if bubblewrap() else {"COURSE_SANDBOX": "off"})}
    python_ok(
        *("-m", "course", "grade", str(submitted), "--course-dir", str(course.folder)),
        *("--out", str(course.tmp / "grades-planted.csv")),
        env=env,
        timeout=600,
    )
    # The student's feedback page, opened from its file as the student opens it.
    feedback = course.folder / "feedback" / PLANTER / paths.ASSIGNMENT / "01_single_gpu.html"
    browser.get(feedback.as_uri())
    shown = ["My prediction held: 62.5 updates per epoch", "A note of mine.", PLANTED_PRINT]
    no_planted_script_ran(browser, "feedback page", shown)
    screenshot("planted-feedback")
    # The instructor's page of the same notebook in the Formgrader, with the instructor's session.
    with Gradebook(f"sqlite:///{course.folder / 'gradebook.db'}") as gradebook:
        notebook_id = gradebook.find_submission_notebook(
            "01_single_gpu", paths.ASSIGNMENT, PLANTER
        ).id
    browser.get(instructor_lab.page(f"formgrader/submissions/{notebook_id}"))
    no_planted_script_ran(browser, "Formgrader's submission page", shown)
    screenshot("planted-formgrader")
