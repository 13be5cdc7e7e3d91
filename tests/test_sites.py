"""Site profiles: the shipped ones load, apply cleanly, and give job scripts that each scheduler
reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from course import cli
from course.cluster import hosts, launch, pbs, siteenv, sites
from course.contracts import jobend
from course.errors import SiteError
from tests.helpers import ROOT

PROFILES = sorted(p.stem for p in (ROOT / "sites").glob("*.toml"))


@pytest.fixture
def jobs_dir(tmp_path):
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    return tmp_path / "jobs"


def test_the_committed_jobs_have_the_local_profile_applied():
    assert siteenv.SiteSettings.read(ROOT / "jobs" / "site_env.sh").site == "local"
    assert sites.check(sites.load_profile("local"), ROOT / "jobs") == []


@pytest.mark.parametrize("name", PROFILES)
def test_site_env_reads_back_as_the_settings_it_was_written_from(name):
    settings = siteenv.SiteSettings.from_profile(sites.load_profile(name))
    assert siteenv.SiteSettings.from_shell(settings.to_shell()) == settings
    assert settings.scaling_runs and settings.select.startswith("{nodes}")


def test_the_largest_run_is_the_most_ranks_then_the_most_nodes():
    assert siteenv.largest_run([(1, 1), (1, 2)]) == (1, 2)
    assert siteenv.largest_run([(1, 4), (2, 2), (4, 1), (1, 2)]) == (4, 1)


def test_a_site_env_that_leaves_settings_out_reads_with_their_defaults():
    settings = siteenv.SiteSettings.from_shell("export COURSE_SITE=old\n")
    assert (settings.site, settings.queue, settings.gpus_per_node) == ("old", None, 0)
    assert settings.select == siteenv.DEFAULT_SELECT and settings.largest_run == (1, 2)
    assert settings.communication == (("naive", ""),)


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_applies_and_its_directives_parse(jobs_dir, name):
    profile = sites.load_profile(name)
    sites.apply(profile, jobs_dir)
    assert sites.check(profile, jobs_dir) == []
    assert siteenv.SiteSettings.read(jobs_dir / "site_env.sh").site == name
    for script in sites.job_scripts(jobs_dir):
        resources = profile.jobs[script.stem]
        request = pbs.read_request(script.read_text())
        assert (request.nodes, request.mpiprocs) == (resources.nodes, resources.ranks_per_node)
        assert request.walltime == pbs.parse_walltime(resources.walltime)
        assert request.queue == (profile.queue or None)


def test_reedbush_profile_is_faithful_to_the_published_scripts(jobs_dir):
    sites.apply(sites.load_profile("reedbush-h"), jobs_dir)
    text = (jobs_dir / "run_multi_node_training.sh").read_text()
    for line in (
        "#PBS -q h-regular",
        "#PBS -l select=2:mpiprocs=2",
        "#PBS -W group_list=gt00",
        "#PBS -l walltime=00:20:00",
    ):
        assert line in text
    env = (jobs_dir / "site_env.sh").read_text()
    assert "module load cuda" in env and "conda activate chainer-course" in env
    assert "export COURSE_MPIEXEC='mpirun --mca btl_openib_want_cuda_gdr 1" in env
    assert siteenv.SiteSettings.read(jobs_dir / "site_env.sh").dataset == "cifar10_256px_5p"


def test_slurm_profile_adds_what_pbs_syntax_cannot_say(jobs_dir):
    sites.apply(sites.load_profile("slurm"), jobs_dir)
    assert "#SBATCH --gres=gpu:2" in (jobs_dir / "run_multi_gpu_training.sh").read_text()
    assert "#SBATCH --account=course" in (jobs_dir / "run_single_gpu_training.sh").read_text()


@pytest.mark.parametrize("name", ["slurm", "slurm-cpu", "reedbush-h", "local"])
def test_a_slurm_jobs_log_keeps_every_attempt_of_a_rerun(jobs_dir, name):
    """Slurm truncates a requeued job's log when it reruns it, unless the job appends to it."""
    sites.apply(sites.load_profile(name), jobs_dir)
    scripts = sites.job_scripts(jobs_dir)
    appends = [sites.SLURM_APPEND in script.read_text() for script in scripts]
    assert len(scripts) == 5 and appends == [name.startswith("slurm")] * len(scripts)


def test_site_env_is_valid_bash_and_env_overrides_its_defaults(tmp_path):
    probe = (
        "source jobs/site_env.sh; "
        'echo "$COURSE_DATASET|$COURSE_TRAIN_ARGS|$COURSE_MPIEXEC|$OMP_NUM_THREADS"'
    )
    run = subprocess.run(
        ["bash", "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": f"{ROOT / '.venv' / 'bin'}:/usr/bin:/bin", "COURSE_DATASET": "mine"},
    )
    [line, ended] = run.stdout.strip().splitlines()
    dataset, train_args, mpiexec, threads = line.split("|")
    assert (
        jobend.end(ended).says == "ended with exit status 0"
    )  # the trap that closes every job log
    assert dataset == "mine"  # a job's -v setting wins over the site's default
    assert train_args == "--model vgg --width 16 --batchsize 64 --epoch 3"
    assert mpiexec == "mpiexec -n {nprocs} --hostfile {hostfile} --bind-to core" and threads == "1"


def test_drift_is_reported(jobs_dir):
    profile = sites.load_profile("local")
    script = jobs_dir / "run_single_gpu_training.sh"
    script.write_text(script.read_text().replace("walltime=00:30:00", "walltime=09:00:00"))
    assert sites.check(profile, jobs_dir) == [
        "run_single_gpu_training.sh: its directives differ from the profile's"
    ]


@pytest.mark.parametrize(
    "change,message",
    [
        ('scheduler = "lsf"', "is not one of local, pbs, slurm"),
        (
            '[environment]\nsetup = []\ndataset = "x"\ntrain_args = "--width $(rm -rf ~)"\nmpiexec '
            '= "m"',
            "may not contain",
        ),
        ("not toml at all [", "not valid TOML"),
        ("#PBS -l walltime={wallime}", r"has an unknown field \{wallime\}"),
        ("communication = []", "needs at least one entry"),
    ],
)
def test_bad_profiles_are_refused_with_the_reason(tmp_path, change, message):
    with pytest.raises(SiteError, match=message):
        sites.load_profile(str(bad_profile(tmp_path / "site.toml", change)))


def bad_profile(path: Path, change: str) -> Path:
    """sites/local.toml with one of test_bad_profiles_are_refused_with_the_reason's `change`s,
    written to `path`."""
    text = (ROOT / "sites" / "local.toml").read_text()
    if change.startswith("scheduler"):
        text = text.replace('scheduler = "local"', change)
    elif change.startswith("#PBS"):
        text = text.replace("#PBS -l walltime={walltime}", change)
    elif change.startswith("communication"):
        text = text.replace('communication = ["naive", "naive/ring"]', change)
    elif change.startswith("[environment]"):
        text = text[: text.index("[environment]")] + change + text[text.index("\n[jobs.") :]
    else:
        text = change
    path.write_text(text)
    return path


def test_a_job_script_without_markers_is_named(jobs_dir):
    (jobs_dir / "run_single_gpu_training.sh").write_text("#!/bin/bash\n#PBS -l walltime=00:01:00\n")
    with pytest.raises(SiteError, match="no site directive markers"):
        sites.apply(sites.load_profile("local"), jobs_dir)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(SiteError) as caught:
        sites.load_profile("tsubame")
    assert "local" in caught.value.hint and "reedbush-h" in caught.value.hint


def edited_local_profile(path: Path, old: str, new: str) -> Path:
    """sites/local.toml with `old` (which it has) replaced by `new`, written to `path`."""
    text = (ROOT / "sites" / "local.toml").read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


def refusal(path: Path) -> SiteError:
    """The SiteError that loading the profile at `path` raises."""
    with pytest.raises(SiteError) as caught:
        sites.load_profile(str(path))
    return caught.value


@pytest.mark.parametrize(
    "old,new,message,nearest",
    [
        (
            'scheduler = "local"',
            'scheduler = "local"\nqueu = "gpu"',
            "unknown key `queu`",
            "did you mean `queue`?",
        ),
        (
            "gpus_per_node = 0",
            "gpu_per_node = 0",
            "unknown key `gpu_per_node`",
            "did you mean `gpus_per_node`?",
        ),
        (
            "threads_per_rank = 1",
            "treads_per_rank = 1",
            "unknown key `environment.treads_per_rank`",
            "did you mean `threads_per_rank`?",
        ),
        (
            'dataset = "synthetic"',
            'dataset = "synthetic"\ndataset_rot = "/data"',
            "unknown key `environment.dataset_rot`",
            "did you mean `dataset_root`?",
        ),
        ("[scaling]", "[scalling]", "unknown key `scalling`", "did you mean `scaling`?"),
        (
            "[scaling]",
            "[extras]\nx = 1\n[scaling]",
            "unknown key `extras`",
            "the top level takes description,",
        ),
        (
            'walltime = "00:30:00"',
            'walltime = "00:30:00"\nwaltime = "1"',
            "unknown key `jobs.run_single_gpu_training.waltime`",
            "did you mean `walltime`?",
        ),
        (
            "threads_per_rank = 1",
            'threads_per_rank = "1"',
            "`environment.threads_per_rank` should be a whole number",
            "fix the profile",
        ),
        (
            'runs = ["1x1", "1x2"]',
            'runs = ["1x1", "1by2"]',
            "`scaling.runs[1]` = '1by2' is not NODESxRANKS",
            "fix",
        ),
    ],
)
def test_misspelt_or_mistyped_profile_keys_are_refused_with_the_nearest_valid_key(
    tmp_path, old, new, message, nearest
):
    path = edited_local_profile(tmp_path / "site.toml", old, new)
    refused = refusal(path)
    assert str(path) in refused.message and message in refused.message
    assert nearest in refused.hint


def test_an_unknown_key_is_named_with_its_line_and_course_site_apply_fails(
    tmp_path, monkeypatch, capsys
):
    text = (
        (ROOT / "sites" / "local.toml").read_text().replace("threads_per_rank", "treads_per_rank")
    )
    (tmp_path / "typo.toml").write_text(text)
    line = text[: text.index("treads_per_rank")].count("\n") + 1
    monkeypatch.setattr(
        sites.paths, "kit_root", lambda: tmp_path
    )  # were it applied, it would go here
    assert cli.main(["site", "apply", str(tmp_path / "typo.toml")]) == 2
    err = capsys.readouterr().err
    assert f"typo.toml:{line}: unknown key `environment.treads_per_rank`" in err
    assert "did you mean `threads_per_rank`?" in err and "Traceback" not in err


def test_a_sites_own_resources_reach_the_job_scripts_checks(jobs_dir, tmp_path):
    text = (
        (ROOT / "sites" / "local.toml")
        .read_text()
        .replace('scheduler = "local"', 'scheduler = "local"\nresources = ["lscratch"]')
    )
    (tmp_path / "scratch.toml").write_text(text)
    sites.apply(sites.load_profile(str(tmp_path / "scratch.toml")), jobs_dir)
    extra = siteenv.SiteSettings.read(jobs_dir / "site_env.sh").resources
    assert extra == ("lscratch",)
    assert pbs.read_request("#PBS -l select=1:lscratch=10gb\n", extra=extra).nodes == 1


def site_apply(tmp_path, monkeypatch, capsys, old: str, new: str) -> tuple[int, str, Path]:
    """`python -m course site apply` of sites/local.toml with `old` replaced by `new`, into a copy
    of jobs/ in `tmp_path` (the kit's root there): (exit status, stderr, the profile's path)."""
    path = edited_local_profile(tmp_path / "mysite.toml", old, new)
    shutil.copytree(ROOT / "jobs", tmp_path / "jobs")
    monkeypatch.setattr(sites.paths, "kit_root", lambda: tmp_path)
    status = cli.main(["site", "apply", str(path)])
    return status, capsys.readouterr().err, path


def test_a_launcher_template_with_an_unknown_field_is_refused_by_site_apply(
    tmp_path, monkeypatch, capsys
):
    """Issue 28: `{ranks_per_nodes}` was accepted, and every stage-3 job then failed in `course
    launch`. Now `site apply` names the field, the template, the valid fields and the nearest."""
    template = "mpiexec -n {nprocs} --hostfile {hostfile} -npernode {ranks_per_nodes}"
    before = (ROOT / "jobs" / "site_env.sh").read_text()
    status, err, path = site_apply(
        tmp_path,
        monkeypatch,
        capsys,
        'mpiexec = "mpiexec -n {nprocs} --hostfile {hostfile} --bind-to core"',
        f'mpiexec = "{template}"',
    )
    line = path.read_text()[: path.read_text().index(template)].count("\n") + 1
    assert status == 2 and "Traceback" not in err, err
    assert f"mysite.toml:{line}: `environment.mpiexec` {template!r}" in err
    assert "has an unknown field {ranks_per_nodes}" in err
    assert "did you mean {ranks_per_node}?" in err
    assert "{nprocs}, {ranks_per_node}, {nodes}, {hostfile}, {export}" in err
    assert (tmp_path / "jobs" / "site_env.sh").read_text() == before  # nothing was written


@pytest.mark.parametrize(
    "template,message",
    [
        ("mpiexec -n {nprocs} {}", "has an unknown field {}"),
        ("mpiexec -n {nprocs} --map-by {ppr", "expected '}' before end of string"),
        ("mpiexec -n {nprocs.real}", "has an unknown field {nprocs.real}"),
    ],
)
def test_other_broken_launcher_templates_are_refused(tmp_path, template, message):
    old = 'mpiexec = "mpiexec -n {nprocs} --hostfile {hostfile} --bind-to core"'
    refused = refusal(edited_local_profile(tmp_path / "site.toml", old, f'mpiexec = "{template}"'))
    assert message in refused.message and "{nprocs}" in refused.hint


def test_every_field_site_apply_allows_is_one_the_launcher_fills_in(tmp_path):
    template = " ".join(["mpiexec", *(f"{{{field}}}" for field in launch.TEMPLATE_FIELDS)])
    job = hosts.JobEnvironment("local", "1.local", "job.sh", tmp_path, [("localhost", 2)])
    argv, _ = launch.build(job, ["true"], template, tmp_path / "hostfile")
    assert argv[1:4] == ["2", "2", "1"]  # nprocs, ranks_per_node, nodes


@pytest.mark.parametrize(
    "old,new,message,hint",
    [
        (
            'walltime = "00:30:00"',
            'walltime = "30:00"',
            "`jobs.run_single_gpu_training.walltime` = '30:00' is not HH:MM:SS",
            "",
        ),
        (
            "gpus_per_node = 0",
            'gpus_per_node = 0\nmax_walltime = "00:20:00"',
            "[jobs.run_single_gpu_training] asks for walltime 00:30:00, more than max_walltime "
            "allows (00:20:00)",
            "lower the job's walltime",
        ),
        (
            "gpus_per_node = 0",
            'gpus_per_node = 0\nmax_walltime = "2:00"',
            "`max_walltime` = '2:00' is not HH:MM:SS",
            "",
        ),
        (
            "gpus_per_node = 0",
            "gpus_per_node = 0\nmax_walltime = 3600",
            "`max_walltime` should be text in quotes or a table, not 3600",
            "",
        ),
        (
            "gpus_per_node = 0",
            'gpus_per_node = 0\nqueue = "short"\nmax_walltime = { shrt = "01:00:00" }',
            "max_walltime names queue 'shrt', which the profile does not have",
            "did you mean `short`? its queues: short",
        ),
    ],
)
def test_walltimes_in_profiles_are_hhmmss_and_within_their_maximum(
    tmp_path, old, new, message, hint
):
    refused = refusal(edited_local_profile(tmp_path / "site.toml", old, new))
    assert message in refused.message and hint in refused.hint


@pytest.mark.parametrize(
    "setting,limits",
    [
        ('max_walltime = "24:00:00"', {None: "24:00:00", "long": "24:00:00"}),
        (
            'max_walltime = { short = "00:30:00", long = "48:00:00" }',
            {None: "00:30:00", "short": "00:30:00", "long": "48:00:00", "other": None},
        ),
    ],
)
def test_max_walltime_reaches_site_env_for_every_queue_or_per_queue(
    jobs_dir, tmp_path, setting, limits
):
    text = (
        (ROOT / "sites" / "local.toml")
        .read_text()
        .replace(
            "gpus_per_node = 0",
            f'gpus_per_node = 0\nqueue = "short"\nother_queues = ["long"]\n{setting}',
            1,
        )
    )
    (tmp_path / "limits.toml").write_text(text)
    sites.apply(sites.load_profile(str(tmp_path / "limits.toml")), jobs_dir)
    settings = siteenv.SiteSettings.read(jobs_dir / "site_env.sh")
    assert settings == siteenv.SiteSettings.from_profile(
        sites.load_profile(str(tmp_path / "limits.toml"))
    )
    for queue, limit in limits.items():
        found = settings.walltime_limit(queue)
        assert (found[1] if found else None) == limit, queue
