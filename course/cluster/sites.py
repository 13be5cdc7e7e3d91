"""Site profiles: everything that differs between clusters, in one TOML file per site (sites/).

`python -m course site apply <profile>` writes the profile into the job scripts: the directive
block of each jobs/*.sh (between the `site directives` markers) and jobs/site_env.sh, which
every job sources (modules, Python environment, data, training defaults, MPI launcher).
Inside jobs/site_env.sh a few settings also tell `python -m course submit` and the notebooks how
this site is run (scheduler, how to ask for nodes, which runs to compare): course.cluster.siteenv
writes and reads them. `python -m course site verify` (course.instructor.site_verify) then runs the
course's jobs on the site and reports what to fix.
"""

from __future__ import annotations

import re
import shutil
import string
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from course import i18n, paths
from course.cli import command_parser
from course.cluster import pbs, siteenv
from course.cluster.launch import TEMPLATE_FIELDS
from course.cluster.profile_schema import Budget, check_template, validate
from course.cluster.siteenv import SiteSettings
from course.contracts.config_keys import did_you_mean, sentences
from course.errors import SiteError
from course.i18n import _

BEGIN = "# >>> site directives: written by `python -m course site apply` >>>"
END = "# <<< site directives <<<"
DIRECTIVE_FIELDS = (
    "queue",
    "group",
    "nodes",
    "ranks_per_node",
    "gpus",
    "walltime",
)  # what a directive may name
_UNSAFE = re.compile(r"[\"'`$\\{}]")  # values pasted into quoted shell strings
# Slurm reruns a requeued job into the same log, which it truncates by default: a Slurm job appends
# to it, so that each attempt's output survives (course.contracts.jobend reads the attempts).
SLURM_APPEND = "#SBATCH --open-mode=append"


@dataclass(frozen=True)
class JobResources:
    nodes: int
    ranks_per_node: int
    gpus: int  # per node
    walltime: str


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    scheduler: str
    directives: list[str]
    queue: str
    queues: list[str]  # every queue a job may name (-q); the profile's own queue first
    group: str
    gpus_per_node: int
    setup: list[str]
    dataset: str
    dataset_root: str
    train_args: str
    threads_per_rank: int
    mpiexec: str
    jobs: dict[str, JobResources]
    scaling_runs: list[tuple[int, int]]  # (nodes, ranks per node) for the stage-3 comparison
    communication: list[str]  # communicator[/MPI allreduce algorithm] settings to compare
    resources: list[str]  # the site's own `-l` resource names, allowed besides PBS's
    max_walltime: dict[str, str]  # queue: the longest walltime it allows ("" : every queue)
    # [budget]: what each student's jobs may use in all (course.cluster.usage); None: no limit
    node_hours_per_student: float | None = None
    gpu_hours_per_student: float | None = None

    def directive_block(self, job: str) -> list[str]:
        """The directive lines of one job script, lines whose values are empty or 0 left out."""
        resources = self.jobs[job]
        values = {
            "queue": self.queue,
            "group": self.group,
            "nodes": resources.nodes,
            "ranks_per_node": resources.ranks_per_node,
            "gpus": resources.gpus,
            "walltime": resources.walltime,
        }
        lines = []
        for template in self.directives:
            used = [
                field
                for _text, field, _spec, _conversion in string.Formatter().parse(template)
                if field
            ]
            if all(values.get(field) not in ("", 0, None) for field in used):
                lines.append(template.format(**values))
        if self.scheduler == "slurm" and not any("--open-mode" in line for line in lines):
            lines.append(SLURM_APPEND)
        return lines

    def select(self, nodes: int | str, ranks_per_node: int | str, gpus: int) -> str:
        """The `-l select=` value for a run of this shape (for `qsub -l` on the command line)."""
        fallback = f"#PBS -l select={siteenv.DEFAULT_SELECT}"
        template = next((d for d in self.directives if "select=" in d), fallback)
        rendered = template.format(
            queue=self.queue,
            group=self.group,
            nodes=nodes,
            ranks_per_node=ranks_per_node,
            gpus=gpus,
            walltime="",
        )
        return rendered.split("select=", 1)[1].split()[0]


def _safe(value: str, key: str, where: str, allow: str = "") -> str:
    if _UNSAFE.search(value.translate({ord(c): None for c in allow})):
        raise SiteError(
            f"{where}: "
            + _("`{key}` may not contain quotes, braces, $, ` or \\ ({value})").format(
                key=key, value=repr(value)
            ),
            _("it is pasted into a shell string in jobs/site_env.sh"),
        )
    return value


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (sites/<name>.toml of the kit) or by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = paths.kit_root() / "sites" / f"{name_or_path}.toml"
    if not path.is_file():
        known = i18n.listed(sorted(p.stem for p in (paths.KIT_ROOT / "sites").glob("*.toml")))
        raise SiteError(
            _("no site profile {name}").format(name=repr(name_or_path)),
            _("the kit has: {known}; or give a path to a .toml file").format(known=known),
        )
    where = str(path)
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SiteError(
            _("{where} is not valid TOML: {error}").format(where=where, error=e),
            _("fix the line it names"),
        ) from None
    profile = validate(data, where, text)
    jobs = {
        job: JobResources(table.nodes, table.ranks_per_node, table.gpus, table.walltime)
        for job, table in profile.jobs.items()
    }
    for template in profile.directives:
        check_template(template, DIRECTIVE_FIELDS, "directives", where, text)
    env, scaling = profile.environment, profile.scaling
    check_template(env.mpiexec, TEMPLATE_FIELDS, "environment.mpiexec", where, text)
    queues = [q for q in [profile.queue, *profile.other_queues] if q]
    max_walltime = _max_walltime(profile.max_walltime, queues, where)
    for job, resources in jobs.items():
        limit = max_walltime.get(profile.queue, max_walltime.get(""))
        if limit and pbs.parse_walltime(resources.walltime) > pbs.parse_walltime(limit):
            raise SiteError(
                f"{where}: "
                + _(
                    "[jobs.{job}] asks for walltime {walltime}, more than max_walltime allows "
                    "({limit})"
                ).format(job=job, walltime=resources.walltime, limit=limit),
                _("lower the job's walltime, or raise max_walltime to what the queue allows"),
            )
    budget = profile.budget or Budget()
    return Profile(
        name=path.stem,
        description=profile.description,
        scheduler=profile.scheduler,
        directives=list(profile.directives),
        queue=profile.queue,
        queues=queues,
        group=profile.group,
        gpus_per_node=profile.gpus_per_node,
        setup=list(env.setup),
        dataset=_safe(env.dataset, "dataset", where),
        dataset_root=_safe(env.dataset_root, "dataset_root", where),
        train_args=_safe(env.train_args, "train_args", where),
        threads_per_rank=env.threads_per_rank,
        mpiexec=_safe(env.mpiexec, "mpiexec", where, allow="{}"),
        jobs=jobs,
        scaling_runs=[siteenv.parse_run(run) for run in scaling.runs],
        communication=[_safe(c, "communication", where) for c in scaling.communication],
        resources=list(profile.resources),
        max_walltime=max_walltime,
        node_hours_per_student=_hours(budget.node_hours_per_student),
        gpu_hours_per_student=_hours(budget.gpu_hours_per_student),
    )


def _hours(value: float | None) -> float | None:
    return None if value is None else float(value)


def _max_walltime(setting: str | dict[str, str], queues: list[str], where: str) -> dict[str, str]:
    """{queue: limit} from the profile's max_walltime: one limit ("" for every queue) or a table."""
    if isinstance(setting, str):
        return {"": setting}
    for queue in setting:
        if queue not in queues:
            known = (
                _("its queues: {queues}").format(queues=i18n.listed(queues))
                if queues
                else _("its queues: none: a table needs queue and other_queues")
            )
            raise SiteError(
                f"{where}: "
                + _("max_walltime names queue {queue}, which the profile does not have").format(
                    queue=repr(queue)
                ),
                sentences(did_you_mean(queue, queues), known),
            )
    return dict(setting)


def rewrite_directives(script: str, lines: list[str], where: str) -> str:
    if BEGIN not in script or END not in script:
        raise SiteError(
            _("{where} has no site directive markers").format(where=where),
            _("put the #PBS lines between\n{begin}\n{end}").format(begin=BEGIN, end=END),
        )
    head, rest = script.split(BEGIN, 1)
    _directives, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + "".join(f"{line}\n" for line in lines) + END + tail


def job_scripts(jobs_dir: Path) -> list[Path]:
    return sorted(p for p in Path(jobs_dir).glob("*.sh") if p.name != siteenv.FILE)


def apply(profile: Profile, jobs_dir: Path, language: str | None = None) -> list[Path]:
    """Write `profile` into the job scripts and site_env.sh of `jobs_dir` (of the edition in
    `language`: its jobs' COURSE_LANG, "" for none; None: the one site_env.sh has); return what
    was written."""
    scripts = job_scripts(jobs_dir)
    missing = [s.stem for s in scripts if s.stem not in profile.jobs]
    if missing:
        raise SiteError(
            _("profile {name} has no [jobs.{job}] for jobs/{job}.sh").format(
                name=profile.name, job=missing[0]
            ),
            _("give every job script its nodes, ranks_per_node, gpus and walltime"),
        )
    written = []
    for script in scripts:
        # UTF-8 whatever the locale: a translated edition's scripts have comments in its language
        text = script.read_text(encoding="utf-8")
        updated = rewrite_directives(text, profile.directive_block(script.stem), str(script))
        if updated != text:
            script.write_text(updated, encoding="utf-8")
        written.append(script)
    env_file = Path(jobs_dir) / siteenv.FILE
    if language is None:
        language = SiteSettings.read(env_file).language if env_file.is_file() else ""
    settings = replace(SiteSettings.from_profile(profile), language=language)
    env_file.write_text(settings.to_shell(), encoding="utf-8")
    written.append(env_file)
    return written


def check(profile: Profile, jobs_dir: Path) -> list[str]:
    """What in `jobs_dir` differs from `profile` (empty when the profile is applied as it is).
    jobs/site_env.sh is compared without its comments, which are in the language of its edition
    or of whoever applied the profile (siteenv.without_comments), with its edition's COURSE_LANG."""
    problems = []
    for script in job_scripts(jobs_dir):
        if script.stem not in profile.jobs:
            problems.append(
                f"{script.name}: " + _("no [jobs.{job}] in the profile").format(job=script.stem)
            )
            continue
        text = script.read_text(encoding="utf-8")
        expected = rewrite_directives(text, profile.directive_block(script.stem), str(script))
        if expected != text:
            problems.append(f"{script.name}: " + _("its directives differ from the profile's"))
    env_file = Path(jobs_dir) / siteenv.FILE
    applied = SiteSettings.read(env_file) if env_file.is_file() else SiteSettings()
    rendered = replace(SiteSettings.from_profile(profile), language=applied.language).to_shell()
    if not env_file.is_file() or siteenv.without_comments(
        env_file.read_text(encoding="utf-8")
    ) != siteenv.without_comments(rendered):
        problems.append(f"{siteenv.FILE}: " + _("differs from the profile's"))
    return problems


def copy_jobs(jobs_dir: Path, destination: Path) -> None:
    """Mirror the job scripts into an assignment folder (the student release carries them)."""
    destination.mkdir(parents=True, exist_ok=True)
    for old in destination.glob("*.sh"):
        old.unlink()
    for script in [*job_scripts(jobs_dir), Path(jobs_dir) / siteenv.FILE]:
        shutil.copy2(script, destination / script.name)


def main(argv: list[str]) -> int:
    """`python -m course site list | show | apply PROFILE | verify [--out DIR]`."""
    parser = command_parser("course site", __doc__)
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help=_("the profiles in sites/"))
    actions.add_parser("show", help=_("the applied profile, and whether jobs/ still matches it"))
    apply_parser = actions.add_parser(
        "apply", help=_("write a profile into jobs/ (and the release's copy)")
    )
    apply_parser.add_argument("profile", help=_("a name from sites/ or a path to a .toml file"))
    # course.cli hands `site verify` to its own module (course.instructor.site_verify): listed
    # here for the help only.
    actions.add_parser(
        "verify",
        help=_(
            "from a login node: run the course's jobs on the applied site, report what to fix "
            "(course site verify -h)"
        ),
    )
    args = parser.parse_args(argv)
    root = paths.kit_root()
    jobs_dir = root / paths.JOBS_DIR
    if args.action == "list":
        for path in sorted((root / "sites").glob("*.toml")):
            print(f"{path.stem:<12} {load_profile(str(path)).description}")
        return 0
    if args.action == "show":
        env_file = jobs_dir / siteenv.FILE
        name = SiteSettings.read(env_file).site if env_file.is_file() else ""
        if not name:
            raise SiteError(
                _("no profile is applied: {file} is missing or sets no COURSE_SITE").format(
                    file=env_file
                ),
                _("python -m course site apply local (or your site's profile)"),
            )
        profile = load_profile(name)
        print(
            _("applied: {name} ({description}); scheduler {scheduler}").format(
                name=name, description=profile.description, scheduler=profile.scheduler
            )
        )
        for job in job_scripts(jobs_dir):
            print(f"  {job.name}: " + " | ".join(profile.directive_block(job.stem)))
        problems = check(profile, jobs_dir)
        for problem in problems:
            print("  " + _("differs: {problem}").format(problem=problem))
        if problems:
            print("  -> " + f"python -m course site apply {name}")
        return 1 if problems else 0
    if args.action == "verify":  # only where this function is called other than by course.cli
        raise SiteError(
            _("site verify runs through the kit's command line"), "python -m course site verify"
        )
    profile = load_profile(args.profile)
    written = apply(profile, jobs_dir)
    released = root / "notebooks" / paths.ASSIGNMENT / paths.JOBS_DIR
    if released.parent.is_dir():
        copy_jobs(jobs_dir, released)
        written.append(released)
    # A translated edition's release is applied in place: its scripts keep their comments.
    for lang in (lang for lang in i18n.LANGUAGES if lang != i18n.DEFAULT):
        translated = root / "notebooks" / i18n.assignment(lang) / paths.JOBS_DIR
        if translated.is_dir():
            apply(profile, translated, language=lang)
            written.append(translated)
    print(
        _("applied {name}: {files}").format(
            name=profile.name, files=i18n.listed(str(p.relative_to(root)) for p in written)
        )
    )
    return 0
