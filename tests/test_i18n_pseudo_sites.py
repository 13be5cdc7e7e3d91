"""The decisive test of the marking (issue 23) of the site, PBS, accounting and MPI modules of
course/cluster (pbs, accounting, mpi, hosts, plan, staging, supervisor, sites, siteenv,
profile_schema): what they say to a student or a profile's author, under the pseudo-locale, where
`_()` wraps each line of a translated message in markers. The cases are those the modules' own
tests build, read from their parametrizations (tests/test_pbs.py's misspelt resources,
tests/test_sites.py's and tests/test_budget.py's broken profiles, tests/test_evidence.py's
records, tests/test_launch.py's MPI worlds, tests/test_jobs.py's walltimes) or made with their
helpers and fixtures; with the markers taken off, a message is the English those tests expect.

A message about one place of a request or a profile starts with that place as it is written (the
#PBS line, the option, the profile's path and line: never translated), then `: ` and the message.
The comments of the jobs/site_env.sh that `site apply` writes are in the student's language, but
for the few lines SiteSettings.from_shell finds the setup by; the jobs/*.sh scripts are the kit's
files, copied as they are (their directive block aside). Left English by design: the protocol
line of a rank started by another MPI's launcher (course.contracts.joblog) and how the local
scheduler's supervisor records a job's end (course.cluster.diagnosis translates it)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from course import cli, gpu, i18n, paths
from course.cluster import accounting, hosts, mpi, pbs, plan, siteenv, sites, staging, supervisor
from course.contracts import joblog
from course.errors import CourseError, JobError, SiteError
from tests import test_budget, test_evidence, test_jobs, test_launch, test_pbs, test_sites
from tests.helpers import ROOT, local_site, make_run
from tests.test_evidence import gpu_run, records
from tests.test_gpu import fake_gpus  # noqa: F401  (a fixture)
from tests.test_i18n_pseudo_cluster import cases, plain, whole
from tests.test_sites import bad_profile, edited_local_profile, refusal

GRADING = test_evidence.GRADING  # the grading rules test_evidence's runs are traced under
_CODE = re.compile(r"`[^`]*`|\S*[./_()<>=\[\]*:]\S*")
_WORDS = re.compile(r"[A-Za-z]{2,}[ ,;'-]+[A-Za-z]{2,}")


@pytest.fixture(autouse=True)
def pseudo_locale(monkeypatch):
    monkeypatch.setenv(i18n.VARIABLE, i18n.PSEUDO)


def located(line: str) -> tuple[str, str]:
    """(the place, the message) of a line `PLACE: MESSAGE`, the place written as it is (a #PBS
    line, an option, a path and line: no words outside code); ("", line) for a line without."""
    place, said, message = line.partition(f": {i18n.MARK_OPEN}")
    if not said or i18n.MARK_CLOSE in place or _WORDS.search(_CODE.sub(" ", place)):
        return "", line
    return place, i18n.MARK_OPEN + message


def marked(text: str) -> bool:
    """Whether `text` is translated messages from end to end."""
    return text.startswith(i18n.MARK_OPEN) and text.endswith(i18n.MARK_CLOSE)


def translated(text: str) -> str:
    """`text`, once it is checked that each of its lines is translated messages from end to end,
    after the place it is about (see `located`) and a hint's arrow."""
    assert text
    for line in text.splitlines():
        _, message = located(line.strip().removeprefix("-> "))
        assert not line.strip() or marked(message), f"{line!r} in\n{text}"
    return text


def refused(call, *args, error=CourseError, **kwargs) -> CourseError:
    """The error `call(*args, **kwargs)` raises, once its message and hint are checked."""
    with pytest.raises(error) as raised:
        call(*args, **kwargs)
    translated(raised.value.message)
    if raised.value.hint:
        translated(raised.value.hint)
    return raised.value


# --- PBS requests (course.cluster.pbs) -----------------------------------------------------------


@pytest.mark.parametrize(
    "option,unknown,nearest",
    cases(test_pbs.test_a_misspelt_resource_is_refused_with_the_nearest_valid_one),
)
def test_a_misspelt_resource_is_refused_in_the_students_language(option, unknown, nearest):
    error = refused(pbs.read_request, f"#!/bin/bash\n#PBS {option}\n")
    place, message = located(error.message)
    assert place == f"#PBS {option}" and whole(message)
    assert plain(message) == f"unknown resource {unknown!r}"
    assert whole(error.hint) and plain(error.hint).startswith(f"did you mean {nearest}?")
    error = refused(pbs.read_request, "#!/bin/bash\n", option.split())
    assert located(error.message)[0].startswith("-l ")


@pytest.mark.parametrize(
    "script,options,words",
    [
        ("", ["-l", "zzz=1"], "unknown resource 'zzz'"),  # test_pbs: the hint lists them all
        ("", ["-l", "walltime=1:xx"], "walltime '1:xx' is not HH:MM:SS"),
        ("", ["-l", "select=1+2:ngpus=1"], "select=1+2:ngpus=1 mixes chunk kinds"),
        ("", ["-l", "select=x:mpiprocs=2"], "the node count must come first"),
        ("#PBS -l nodes=:ppn=2\n", [], "the node count must come first"),
        ("", ["-l", "select=1:ngpus=two"], "ngpus must be a number"),
        ("", ["-X", "y"], "unknown qsub option '-X'"),
        ("", ["-q"], "qsub option -q needs a value"),
        ("#PBS -v 1x=2\n", [], "'1x' is not a variable name"),
    ],
)
def test_every_other_refusal_of_a_request_is_in_the_students_language(script, options, words):
    error = refused(pbs.read_request, f"#!/bin/bash\n{script}", options)
    assert words in plain(error.message)


@pytest.mark.parametrize(
    "options,message,hint",
    cases(test_jobs.test_a_short_walltime_without_hours_is_refused_with_what_it_means),
)
def test_what_a_walltime_without_hours_means_is_said_in_the_students_language(
    options, message, hint
):
    text = options[-1].removeprefix("walltime=") if options else "1:00"
    meaning, fix = pbs.without_hours(text)
    assert plain(whole(meaning)) == message.split(": too short")[0]
    assert plain(whole(fix)) == hint
    # each unit of a duration is a message of its own, with its number ("1 minute", "30 seconds")
    for seconds in (1, 60, 90, 3600, 5430):
        said = pbs._duration(seconds)
        assert re.fullmatch(r"⟦[^⟦⟧]+⟧( ⟦[^⟦⟧]+⟧)*", said), said


# --- the scheduler's records (course.cluster.accounting) -----------------------------------------


@pytest.mark.usefixtures("grading_config")
@pytest.mark.parametrize(
    "account,problem", cases(test_evidence.test_a_job_the_records_contradict_does_not_count)
)
def test_a_job_the_records_contradict_is_named_in_the_students_language(folder, account, problem):
    run = gpu_run(folder)
    why = "sacct -j 7.local knows no such job"  # the records' words, as the test gives them
    problems, notes = accounting.Accounting(
        "alice", "s1234", records=records(account, why, absent=account is None)
    ).check(run)
    assert [plain(whole(p)) for p in problems] == [problem]
    assert all(whole(note) for note in notes)


@pytest.fixture
def uncached():
    """accounting.lookup's answers asked again, before and after (other tests ask in English)."""
    accounting._lookup.cache_clear()
    yield
    accounting._lookup.cache_clear()


@pytest.mark.usefixtures("grading_config", "uncached")
def test_what_the_records_agree_with_and_what_they_cannot_tell_is_noted_in_the_students_language(
    folder,
):
    run = gpu_run(folder)
    for account, user in (
        (accounting.JobAccount("s1234", 2, None, 61.0, "sacct -j 7.local"), "s1234"),
        (accounting.JobAccount("s1234", 2, 2, 61.0, "sacct -j 7.local"), "s1234"),
        (accounting.JobAccount("s1234", 2, 2, 61.0, "sacct -j 7.local"), None),
    ):
        for student in ("alice", ""):
            problems, notes = accounting.Accounting(student, user, records=records(account)).check(
                run
            )
            assert not problems and notes and all(whole(note) for note in notes), notes
    path, _ = make_run(folder, "single_gpu", 1, 50.0)
    for checked in (dict(student="alice", user="s1234"), dict(enabled=False)):
        [note] = test_evidence.trace(path, **checked).notes
        assert whole(note).count(i18n.MARK_OPEN) == 2, note  # the note, and why
    assert plain(note) == (
        "job 1.local was not checked against the scheduler's records: grading.toml [accounting] "
        "has enabled = false"
    )


def test_why_the_records_cannot_be_read_is_said_in_the_students_language(monkeypatch):
    def lookup(scheduler: str, job_id: str) -> accounting.Lookup:  # each case asked again
        return accounting._lookup.__wrapped__(scheduler, job_id, i18n.language())

    for scheduler in ("local", "lsf"):
        assert whole(lookup(scheduler, "1").why)
    monkeypatch.setattr(accounting.shutil, "which", lambda name: None)
    assert plain(whole(lookup("pbs", "1").why)) == "qstat is not installed where grading runs"
    said = lookup("slurm", "1").why  # sacct's why, inside scontrol's
    assert whole(said) and said.count(i18n.MARK_OPEN) == 2, said
    monkeypatch.setattr(accounting.shutil, "which", lambda name: name)
    assert whole(accounting._said(subprocess.CompletedProcess([], 3, "", "")))

    def fails(command, **kwargs):
        raise OSError("cannot run it")

    monkeypatch.setattr(accounting.subprocess, "run", fails)
    assert plain(whole(lookup("pbs", "1").why)) == "qstat -x -f -F json 1 failed (cannot run it)"


# --- MPI (course.cluster.mpi) and the job's hosts (course.cluster.hosts) -------------------------


@pytest.mark.parametrize(
    "launched,launcher,size,error",
    [
        case
        for case in cases(
            test_launch.test_a_rank_checks_its_world_against_the_ranks_course_launch_started
        )
        if case[3]
    ],
)
def test_a_rank_in_the_wrong_world_is_stopped_in_the_students_language(
    launched, launcher, size, error, monkeypatch
):
    kit = "/kit/bin/mpiexec"
    monkeypatch.setenv(mpi.LAUNCHED_RANKS, launched)
    monkeypatch.setenv(mpi.LAUNCHER, kit if launcher == "kit" else launcher)
    monkeypatch.setattr(mpi, "library", lambda: mpi.Library("Open MPI v5.0.0", "5.0.0", None))
    monkeypatch.setattr(mpi, "matching_launcher", lambda lib: kit if launcher == "kit" else None)
    with pytest.raises(JobError) as raised:
        mpi.check_world(size)
    said = raised.value
    if launcher == "kit":
        assert plain(translated(said.message)).startswith(error)
    else:  # the rank's protocol line stays English; the hint names the launcher in the student's
        assert said.message == joblog.wrong_launcher(
            launcher, "the mpiexec of Open MPI v5.0.0", int(launched), size
        )
        assert f"JobError: {said.message}".startswith(error)
        assert f"{i18n.MARK_OPEN}the mpiexec of Open MPI v5.0.0{i18n.MARK_CLOSE}" in said.hint
    translated(said.hint)


def test_a_missing_mpiexec_and_a_silent_launcher_are_said_in_the_students_language(
    tmp_path, monkeypatch
):
    silent = tmp_path / "silent"  # a launcher whose --version prints nothing
    silent.write_text("#!/bin/sh\nexit 0\n")
    silent.chmod(0o755)
    said = mpi.foreign(str(silent), mpi.Library("Open MPI v5.0.0", "5.0.0", None))
    assert plain(whole(said)) == "nothing"
    monkeypatch.setattr(mpi, "find_launcher", lambda program: None)
    refused(mpi.mpiexec, error=JobError)


def test_a_broken_node_list_or_node_file_is_said_in_the_students_language(tmp_path):
    # tests/test_hosts.py's broken inputs
    for broken in ("gpu[a-b]", "gpu[01", "gpu01]", "a,,b", ""):
        refused(hosts.expand_hostlist, broken, error=JobError)
    (tmp_path / "nodes").write_text("")
    refused(hosts.read_nodefile, tmp_path / "nodes", error=JobError)
    refused(hosts.read_nodefile, tmp_path / "missing", error=JobError)


# --- the stage-3 plan (course.cluster.plan), staging and the local scheduler's supervisor ---------


def test_the_runs_of_the_plan_are_described_in_the_students_language(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # tests/test_jobs.py's CPU plan
    runs = plan.comparison_plan(ROOT) + plan.profile_plan(ROOT)
    assert any(r.allreduce for r in runs) and any(r.batch_per_worker for r in runs)
    for run in runs:
        described, command = run.describe().split(":  qsub ")
        assert marked(described), described
    assert plain(runs[-1].describe()).startswith("1 node(s) x 2 rank(s), naive with ring ")


def test_a_comparison_this_machines_gpus_cannot_run_is_refused_in_the_students_language(
    tmp_path,
    fake_gpus,  # noqa: F811
    monkeypatch,
):
    # tests/test_gpu.py's: one GPU, and naive on GPUs without a CUDA-aware MPI
    fake_gpus(1)
    (tmp_path / "one").mkdir()
    refused(plan.comparison_plan, local_site(tmp_path / "one"))
    fake_gpus(4)
    monkeypatch.setattr(gpu, "mpi_cuda_aware", lambda: False)
    (tmp_path / "four").mkdir()
    refused(plan.comparison_plan, local_site(tmp_path / "four", gpus_per_node=4))


def test_a_data_set_that_cannot_be_staged_is_said_in_the_students_language(tmp_path, monkeypatch):
    from course.runtime import data

    monkeypatch.setattr(data, "path_for", lambda name: tmp_path / "missing.npz")
    refused(staging.stage, ["python", "train.py", "--dataset", "synthetic"], tmp_path / "local")


def test_the_local_schedulers_lines_in_a_job_log_are_translated(tmp_path, monkeypatch):
    """The supervisor, in this process: no watchdog forked, no signal handler changed."""
    monkeypatch.setattr(supervisor, "_start_watchdog", lambda spec, started: (0, -1))
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    script = tmp_path / "job.sh"
    script.write_text("exit 3\n")
    warning = i18n.pseudo("2 ranks on 1 cores: they share cores, so each runs slower")
    for number, home in ((1, tmp_path), (2, tmp_path / "missing")):
        spec = {
            "id": f"{number}.local",
            "script": str(script),
            "log": str(tmp_path / f"job.sh.o{number}"),
            "status": str(tmp_path / f"status{number}.json"),
            "walltime": 30,
            "warnings": [warning],
            "env": {"HOME": str(home), "PATH": "/usr/bin:/bin"},
        }
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        supervisor.supervise(tmp_path / "spec.json")
        lines = Path(spec["log"]).read_text().splitlines()
        assert lines and all(marked(line) for line in lines), lines
        assert plain(lines[0]) == f"course local scheduler: {plain(warning)}"
        says = json.loads(Path(spec["status"]).read_text())["says"]
        assert says == ("ended with exit status 3" if number == 1 else "could not start")
    assert plain(lines[-1]).startswith("course local scheduler: the job could not start: ")


# --- site profiles (course.cluster.sites, profile_schema) ----------------------------------------


@pytest.mark.parametrize(
    "old,new,message,nearest",
    cases(test_sites.test_misspelt_or_mistyped_profile_keys_are_refused_with_the_nearest_valid_key),
)
def test_a_misspelt_or_mistyped_key_is_refused_in_the_authors_language(
    tmp_path, old, new, message, nearest
):
    path = edited_local_profile(tmp_path / "site.toml", old, new)
    error = refusal(path)
    translated(error.message)
    translated(error.hint)
    place, said = located(error.message)
    assert place.startswith(str(path)) and message in plain(said)
    assert nearest in plain(error.hint)


@pytest.mark.parametrize(
    "old,new,message,hint",
    cases(test_sites.test_walltimes_in_profiles_are_hhmmss_and_within_their_maximum),
)
def test_a_walltime_a_profile_cannot_have_is_refused_in_the_authors_language(
    tmp_path, old, new, message, hint
):
    error = refusal(edited_local_profile(tmp_path / "site.toml", old, new))
    assert message in plain(translated(error.message)) and hint in plain(translated(error.hint))


@pytest.mark.parametrize(
    "change,message", cases(test_sites.test_bad_profiles_are_refused_with_the_reason)
)
def test_a_bad_profile_is_refused_in_the_authors_language(tmp_path, change, message):
    error = refused(sites.load_profile, str(bad_profile(tmp_path / "site.toml", change)))
    assert re.search(message, plain(error.message))


@pytest.mark.parametrize(
    "template,message", cases(test_sites.test_other_broken_launcher_templates_are_refused)
)
def test_a_broken_launcher_template_is_refused_in_the_authors_language(tmp_path, template, message):
    old = 'mpiexec = "mpiexec -n {nprocs} --hostfile {hostfile} --bind-to core"'
    path = edited_local_profile(tmp_path / "site.toml", old, f'mpiexec = "{template}"')
    error = refusal(path)
    assert message in plain(translated(error.message)) and "{nprocs}" in translated(error.hint)


@pytest.mark.parametrize(
    "budget,message,hint", cases(test_budget.test_a_bad_budget_is_refused_with_the_line_and_the_fix)
)
def test_a_bad_budget_is_refused_in_the_authors_language(tmp_path, budget, message, hint):
    path = test_budget.profile_with(tmp_path, budget)
    error = refused(sites.load_profile, str(path), error=SiteError)
    assert plain(error.message) == f"{path}{message}" and plain(error.hint) == hint


def test_site_apply_and_its_refusals_are_in_the_students_language(tmp_path, monkeypatch, capsys):
    jobs = tmp_path / "jobs"
    shutil.copytree(ROOT / "jobs", jobs)
    shutil.copytree(ROOT / "sites", tmp_path / "sites")
    refused(sites.load_profile, "tsubame", error=SiteError)  # tests/test_sites.py's unknown one
    script = jobs / "run_single_gpu_training.sh"
    text = script.read_text()
    script.write_text("#!/bin/bash\n#PBS -l walltime=00:01:00\n")  # no markers
    refused(sites.apply, sites.load_profile("local"), jobs, error=SiteError)
    script.write_text(text)
    (jobs / "run_extra.sh").write_text(text)  # a job the profile has no [jobs.run_extra] for
    refused(sites.apply, sites.load_profile("local"), jobs, error=SiteError)
    (jobs / "run_extra.sh").unlink()
    monkeypatch.setattr(sites.paths, "kit_root", lambda: tmp_path)
    assert cli.main(["site", "apply", "local"]) == 0
    assert plain(translated(capsys.readouterr().out)).startswith("applied local: jobs/")
    # tests/test_sites.py's drift
    script.write_text(text.replace("walltime=00:30:00", "walltime=09:00:00"))
    assert cli.main(["site", "show"]) == 1
    shown = capsys.readouterr().out.splitlines()
    said = [line for line in shown if not line.startswith(("  run_", "  -> python -m course"))]
    assert len(said) == 2 and translated("\n".join(said)), shown  # what is applied, what differs
    assert plain(said[1]) == (
        "  differs: run_single_gpu_training.sh: its directives differ from the profile's"
    )
    (jobs / "run_extra.sh").write_text(text)
    (jobs / siteenv.FILE).unlink()
    problems = sites.check(sites.load_profile("local"), jobs)
    assert len(problems) == 3 and translated("\n".join(problems)), problems
    refused(sites.main, ["show"], error=SiteError)
    with pytest.raises(SiteError) as raised:  # its hint is the command to type
        sites.main(["verify"])
    assert marked(raised.value.message)


# --- jobs/site_env.sh (course.cluster.siteenv) ---------------------------------------------------


def comments(text: str) -> list[str]:
    """The comments of a shell text: whole lines and the ends of lines (`  # ...`)."""
    found = []
    for line in text.splitlines():
        if line.startswith("#"):
            found.append(line)
        elif "  # " in line:
            found.append("#" + line.split("  #", 1)[1])
    return found


@pytest.mark.parametrize("name", test_sites.PROFILES)
def test_the_comments_of_site_env_are_in_the_students_language(name, tmp_path):
    settings = siteenv.SiteSettings.from_profile(sites.load_profile(name))
    if name == "reedbush-h":  # every setting a file can have: limits and a budget
        path = test_budget.profile_with(
            tmp_path, "node_hours_per_student = 40\ngpu_hours_per_student = 2.5", name
        )
        text = path.read_text().replace(
            "gpus_per_node = 2", 'gpus_per_node = 2\nmax_walltime = "24:00:00"'
        )
        path.write_text(text)
        settings = siteenv.SiteSettings.from_profile(sites.load_profile(str(path)))
        assert settings.max_walltime and settings.node_hours_per_student
    text = settings.to_shell()
    said = comments(text)  # the lines from_shell finds the setup by too
    assert settings.setup or marked(text.split("\n: # ")[1].split("\n")[0])  # nothing to load
    assert len(said) >= 14 and all(marked(line.removeprefix("# ")) for line in said), said
    assert siteenv.SiteSettings.from_shell(text) == settings  # read back whatever the language


def test_a_site_applied_in_one_language_matches_its_profile_in_another(tmp_path, monkeypatch):
    jobs = tmp_path / "jobs"
    shutil.copytree(ROOT / "jobs", jobs)
    profile = sites.load_profile("reedbush-h")
    sites.apply(profile, jobs)  # under the pseudo-locale: its comments marked
    assert i18n.MARK_OPEN in (jobs / siteenv.FILE).read_text()
    assert sites.check(sites.load_profile("local"), ROOT / "jobs") == []  # the English, committed
    monkeypatch.delenv(i18n.VARIABLE)
    assert sites.check(profile, jobs) == []
    text = (jobs / siteenv.FILE).read_text()
    (jobs / siteenv.FILE).write_text(text.replace("OMP_NUM_THREADS=4", "OMP_NUM_THREADS=8"))
    assert sites.check(profile, jobs) == ["site_env.sh: differs from the profile's"]


def test_a_folder_without_site_env_is_refused_in_the_students_language(tmp_path):
    refused(siteenv.of_folder, tmp_path, error=JobError)
    assert paths.JOBS_DIR in str(refused(siteenv.in_folder, tmp_path, error=JobError))


def test_the_group_is_marked():
    from course.instructor.i18n_catalog import MARKED

    group = [
        f"course/cluster/{name}.py"
        for name in (
            "pbs",
            "accounting",
            "mpi",
            "hosts",
            "plan",
            "staging",
            "supervisor",
            "sites",
            "siteenv",
            "profile_schema",
        )
    ]
    assert set(group) <= set(MARKED)
