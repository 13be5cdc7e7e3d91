"""jobs/site_env.sh: the applied site profile as the jobs see it. Its one writer, locator, reader.

`python -m course site apply` renders a profile into it (SiteSettings.from_profile, to_shell);
every job script sources it; the submitter, the notebooks, the doctor and the demo read it back as
a SiteSettings (SiteSettings.read), never its `export COURSE_...=value` lines themselves.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from course import i18n, paths
from course.contracts import jobend
from course.errors import JobError
from course.i18n import N_, _

FILE = "site_env.sh"
# How a run of N nodes x M ranks is asked for (`qsub -l select=`) where a profile's #PBS lines say
# nothing else.
DEFAULT_SELECT = "{nodes}:mpiprocs={ranks_per_node}"
# The comments of jobs/site_env.sh are in its edition's language, else the applier's (COURSE_LANG);
# from_shell finds the setup between these two, in whichever language of the course they are.
_SETUP_SAID = N_("Software: modules and the kit's Python environment.")
_DATA_SAID = N_("Data and training defaults, the same at every stage so that the stages compare.")
_NOTHING_SAID = N_("nothing to load: jobs inherit the submitting environment")  # after `: #`
_LANGUAGE_SAID = N_("the language of what the kit prints in a job (qsub passes no environment)")
_EVAL_ENV = 'eval "$(python -m course env)"'  # the CUDA libraries of the kit's gpu extra


class RenderedProfile(Protocol):
    """What of a site profile (course.cluster.sites.Profile) jobs/site_env.sh carries; read-only."""

    @property
    def name(self) -> str: ...
    @property
    def scheduler(self) -> str: ...
    @property
    def directives(self) -> list[str]: ...
    @property
    def queue(self) -> str: ...
    @property
    def queues(self) -> list[str]: ...
    @property
    def group(self) -> str: ...
    @property
    def gpus_per_node(self) -> int: ...
    @property
    def setup(self) -> list[str]: ...
    @property
    def dataset(self) -> str: ...
    @property
    def dataset_root(self) -> str: ...
    @property
    def train_args(self) -> str: ...
    @property
    def threads_per_rank(self) -> int: ...
    @property
    def mpiexec(self) -> str: ...
    @property
    def scaling_runs(self) -> list[tuple[int, int]]: ...
    @property
    def communication(self) -> list[str]: ...
    @property
    def resources(self) -> list[str]: ...
    @property
    def max_walltime(self) -> dict[str, str]: ...
    @property
    def node_hours_per_student(self) -> float | None: ...
    @property
    def gpu_hours_per_student(self) -> float | None: ...

    def select(self, nodes: int | str, ranks_per_node: int | str, gpus: int) -> str: ...


def largest_run(runs: tuple[tuple[int, int], ...] | list[tuple[int, int]]) -> tuple[int, int]:
    """The run with the most ranks; of two with as many, the one over more nodes, as stage 3 is
    about crossing nodes (and its job script's request must cover that run)."""
    return max(runs, key=lambda run: (run[0] * run[1], run[0]))


@dataclass(frozen=True)
class SiteSettings:
    """The settings of jobs/site_env.sh, typed. Defaults: what a reader assumes where a (hand
    written or older) file leaves a setting out."""

    site: str = ""  # the profile's name
    scheduler: str = ""  # local, pbs or slurm
    setup: tuple[str, ...] = ()  # shell lines: modules, the kit's Python environment
    dataset: str = ""  # the jobs' default, which COURSE_DATASET in the environment overrides
    dataset_root: str = ""  # CHAINER_DATASET_ROOT's default; "" leaves Chainer's own
    train_args: str = ""  # the jobs' default, which COURSE_TRAIN_ARGS in the environment overrides
    mpiexec: str = ""  # the launcher template `python -m course launch` fills in
    threads_per_rank: int = 1
    select: str = DEFAULT_SELECT  # the `-l select=` value, with {nodes} and {ranks_per_node}
    resources: tuple[str, ...] = ()  # the site's own `-l` resource names, besides PBS's
    queues: tuple[str, ...] = ()  # every queue a job may name; () when the site does not say
    queue: str | None = None  # the -q its #PBS lines ask for; None: they name none
    group: str | None = None  # their -W group_list; None: they name none
    gpus_per_node: int = 0  # 0: whatever the machine has
    scaling_runs: tuple[tuple[int, int], ...] = ((1, 2),)  # stage 3's (nodes, ranks per node)
    communication: tuple[tuple[str, str], ...] = (("naive", ""),)  # (communicator, allreduce)
    max_walltime: tuple[tuple[str, str], ...] = ()  # (queue, HH:MM:SS); queue "": every queue
    # The profile's [budget]: what each student's jobs may use in all; None: no limit
    node_hours_per_student: float | None = None
    gpu_hours_per_student: float | None = None
    language: str = ""  # the jobs' COURSE_LANG unless theirs is set (an edition's); "": theirs

    def walltime_limit(self, queue: str | None) -> tuple[str, str] | None:
        """(the queue it is for, the longest walltime a job in `queue` may ask for), None if no
        limit; `queue` None: the queue the site's jobs go to."""
        limits = dict(self.max_walltime)
        queue = queue or self.queue or (self.queues[0] if self.queues else "")
        for where in (queue, ""):
            if where in limits:
                return where, limits[where]
        return None

    @property
    def largest_run(self) -> tuple[int, int]:
        return largest_run(self.scaling_runs)

    def job_environment(self) -> dict[str, str]:
        """The data settings as the jobs see them (variable: value), empty ones left out."""
        data = {"CHAINER_DATASET_ROOT": self.dataset_root, "COURSE_DATASET": self.dataset}
        return {name: value for name, value in data.items() if value}

    @classmethod
    def from_profile(cls, profile: RenderedProfile) -> SiteSettings:
        def in_pbs_lines(field: str) -> bool:
            # A Slurm site may charge its group with #SBATCH: then the #PBS lines need none.
            return any(
                line.startswith("#PBS") and f"{{{field}}}" in line for line in profile.directives
            )

        return cls(
            site=profile.name,
            scheduler=profile.scheduler,
            setup=tuple(profile.setup),
            dataset=profile.dataset,
            dataset_root=profile.dataset_root,
            train_args=profile.train_args,
            mpiexec=profile.mpiexec,
            threads_per_rank=profile.threads_per_rank,
            select=profile.select("{nodes}", "{ranks_per_node}", profile.gpus_per_node or 0),
            resources=tuple(profile.resources),
            queues=tuple(profile.queues),
            queue=(profile.queue or None) if in_pbs_lines("queue") else None,
            group=(profile.group or None) if in_pbs_lines("group") else None,
            gpus_per_node=profile.gpus_per_node,
            scaling_runs=tuple((n, r) for n, r in profile.scaling_runs),
            communication=tuple(_communication(c) for c in profile.communication),
            max_walltime=tuple(profile.max_walltime.items()),
            node_hours_per_student=profile.node_hours_per_student,
            gpu_hours_per_student=profile.gpu_hours_per_student,
        )

    def to_shell(self) -> str:
        """The text of jobs/site_env.sh, its comments in its edition's language, else the
        student's (but for the few from_shell reads)."""
        say = functools.partial(i18n.in_language, self.language or i18n.language())
        setup = "\n".join(self.setup) if self.setup else ": # " + say(_NOTHING_SAID)
        threads = str(self.threads_per_rank)
        runs = " ".join(f"{n}x{r}" for n, r in self.scaling_runs)
        limits = " ".join(f"{q}={t}" if q else t for q, t in self.max_walltime)
        communication = " ".join("/".join(filter(None, c)) for c in self.communication)
        budget = (
            ("COURSE_NODE_HOURS_PER_STUDENT", self.node_hours_per_student),
            ("COURSE_GPU_HOURS_PER_STUDENT", self.gpu_hours_per_student),
        )
        header = say(
            N_(
                "Site settings shared by the job scripts: the `{site}` site profile of the course "
                "kit.\nWritten by `python -m course site apply {site}` from that profile; to "
                "change a setting,\nchange the profile and apply it again."
            )
        ).format(site=self.site)
        attempt = say(
            N_(
                "A job the scheduler reruns says first which attempt it is "
                "(course/contracts/jobend.py)."
            )
        )
        mpi = say(N_("MPI: `python -m course launch` fills in the ranks and hosts of the job."))
        how = say(N_("How this site is run, for `python -m course submit` and the notebooks."))
        cuda = say(N_("The CUDA libraries of the kit's gpu extra (prints nothing without them)."))
        end = say(
            N_(
                "The last line of the joined log says how the job ended, and when "
                "(course/contracts/jobend.py)."
            )
        )
        per_student = _after(say(N_("the site's per-student budget, checked by course submit")))
        language = _default(i18n.VARIABLE, self.language) + _after(say(_LANGUAGE_SAID))
        sections = [
            [
                _comment(header),
                _export("COURSE_SITE", self.site),
                _export("COURSE_SCHEDULER", self.scheduler),
                *([language] if self.language else []),
            ],
            [_comment(attempt), jobend.ATTEMPT_SHELL],
            [_comment(say(_SETUP_SAID)), setup],
            [
                _comment(say(_DATA_SAID)),
                *(
                    [_default("CHAINER_DATASET_ROOT", self.dataset_root)]
                    if self.dataset_root
                    else []
                ),
                _default("COURSE_DATASET", self.dataset),
                _default("COURSE_TRAIN_ARGS", self.train_args),
            ],
            [
                _comment(mpi),
                _quoted("COURSE_MPIEXEC", self.mpiexec),
                _export("OMP_NUM_THREADS", threads),
                _export("OPENBLAS_NUM_THREADS", threads),
                _export("MKL_NUM_THREADS", threads),
                _export("CHAINERMN_FORCE_ABORT_ON_EXCEPTION", "1")
                + _after(say(N_("one rank's exception ends the job, not a hang"))),
            ],
            [
                _comment(how),
                _quoted("COURSE_SELECT", self.select),
                _quoted("COURSE_RESOURCES", " ".join(self.resources))
                + _after(say(N_("the site's own -l resources, besides PBS's"))),
                _quoted("COURSE_QUEUES", " ".join(self.queues)),
                _quoted("COURSE_QUEUE", self.queue or "")
                + _after(say(N_("the -q of its #PBS lines"))),
                _quoted("COURSE_GROUP", self.group or "") + _after(say(N_("their -W group_list"))),
                _export("COURSE_GPUS_PER_NODE", str(self.gpus_per_node)),
                _quoted("COURSE_SCALING_RUNS", runs),
                _quoted("COURSE_COMMUNICATION", communication),
                *(
                    [
                        _quoted("COURSE_MAX_WALLTIME", limits)
                        + _after(say(N_("checked before qsub; QUEUE=HH:MM:SS or all")))
                    ]
                    if limits
                    else []
                ),
                *(
                    _export(name, str(hours)) + per_student
                    for name, hours in budget
                    if hours is not None
                ),
            ],
            [_comment(cuda), _EVAL_ENV],
            [_comment(end), jobend.END_TRAP],
        ]
        return "\n\n".join("\n".join(lines) for lines in sections) + "\n"

    @classmethod
    def from_shell(cls, text: str) -> SiteSettings:
        """The settings to_shell wrote; a setting the text leaves out keeps its default."""
        exports = _exports(text)
        setup = ""
        for lang in (*i18n.LANGUAGES, i18n.PSEUDO):  # the setup's markers, in each language
            begin = _comment(i18n.in_language(lang, _SETUP_SAID)) + "\n"
            end = "\n\n" + _comment(i18n.in_language(lang, _DATA_SAID))
            if begin in text and end in text:
                setup = text.split(begin, 1)[1].split(end, 1)[0]
                nothing = ": # " + i18n.in_language(lang, _NOTHING_SAID)
                setup = "" if setup == nothing else setup
                break
        default = cls()
        return cls(
            site=exports.get("COURSE_SITE", default.site),
            scheduler=exports.get("COURSE_SCHEDULER", default.scheduler),
            setup=tuple(setup.split("\n")) if setup else (),
            dataset=exports.get("COURSE_DATASET", default.dataset),
            dataset_root=exports.get("CHAINER_DATASET_ROOT", default.dataset_root),
            train_args=exports.get("COURSE_TRAIN_ARGS", default.train_args),
            mpiexec=exports.get("COURSE_MPIEXEC", default.mpiexec),
            threads_per_rank=int(exports.get("OMP_NUM_THREADS") or default.threads_per_rank),
            select=exports.get("COURSE_SELECT", default.select),
            resources=tuple(exports.get("COURSE_RESOURCES", "").split()),
            queues=tuple(exports.get("COURSE_QUEUES", "").split()),
            queue=exports.get("COURSE_QUEUE") or None,
            group=exports.get("COURSE_GROUP") or None,
            gpus_per_node=int(exports.get("COURSE_GPUS_PER_NODE") or default.gpus_per_node),
            scaling_runs=tuple(map(parse_run, exports.get("COURSE_SCALING_RUNS", "").split()))
            or default.scaling_runs,
            communication=tuple(
                map(_communication, exports.get("COURSE_COMMUNICATION", "").split())
            )
            or default.communication,
            max_walltime=tuple(  # "h-short=00:30:00" or, for every queue, "24:00:00"
                (queue, limit)
                for queue, _, limit in (
                    word.rpartition("=") for word in exports.get("COURSE_MAX_WALLTIME", "").split()
                )
            ),
            node_hours_per_student=_hours(exports.get("COURSE_NODE_HOURS_PER_STUDENT")),
            gpu_hours_per_student=_hours(exports.get("COURSE_GPU_HOURS_PER_STUDENT")),
            language=exports.get(i18n.VARIABLE, default.language),
        )

    @classmethod
    def read(cls, path: Path) -> SiteSettings:
        return cls.from_shell(Path(path).read_text(encoding="utf-8"))


def _export(name: str, value: str) -> str:
    return f"export {name}={value}"


def _quoted(name: str, value: str) -> str:
    """`name` set to `value` as it is (the value may not hold a single quote)."""
    return f"export {name}='{value}'"


def _default(name: str, value: str) -> str:
    """`name` set to `value` unless the job's environment sets it (`qsub -v`, `sbatch --export`)."""
    return f'export {name}="${{{name}:-{value}}}"'


def _comment(text: str) -> str:
    """`text` as shell comment lines, one for each of its lines."""
    return "\n".join(f"# {line}".rstrip() for line in text.split("\n"))


def _after(text: str) -> str:
    """`text` as the comment at the end of a line (on that line: _exports reads the value up to
    its two spaces)."""
    return "  # " + " ".join(text.split("\n"))


def without_comments(text: str) -> str:
    """A shell text of to_shell's without its comments, whole lines and ends of lines (`  # ...`):
    what it runs and sets, which two files share whatever language their comments are in."""
    # a setup with nothing to load is the no-op `: # <why>`, its why in the file's language
    lines = (
        ":" if line.startswith(": # ") else line.split("  # ")[0].rstrip()
        for line in text.split("\n")
    )
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def _hours(setting: str | None) -> float | None:
    return float(setting) if setting else None


def _communication(setting: str) -> tuple[str, str]:
    """("naive", "ring") from "naive/ring": a communicator and the MPI allreduce under it."""
    communicator, _, allreduce = setting.partition("/")
    return communicator, allreduce


def _exports(text: str) -> dict[str, str]:
    """The `export NAME=value` lines, quotes taken off, defaults of `${NAME:-default}` resolved."""
    settings = {}
    for name, value in re.findall(r"^export (\w+)=(.*)$", text, re.MULTILINE):
        value = value.split("  #")[0].strip()
        if value[:1] in "'\"" and value[-1:] == value[:1]:
            value = value[1:-1]
        default = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
        settings[name] = default.group(1) if default else value
    return settings


def parse_run(run: str) -> tuple[int, int]:
    """(2, 4) from "2x4": NODESxRANKS per node, as profiles and site_env.sh write a run."""
    nodes, ranks_per_node = run.split("x")
    return int(nodes), int(ranks_per_node)


def in_folder(folder: Path | str) -> Path:
    """<folder>/jobs/site_env.sh (the folder a student submits from); JobError when missing."""
    path = Path(folder) / paths.JOBS_DIR / FILE
    if not path.is_file():
        raise JobError(
            _("{path} does not exist").format(path=path),
            _("work in the assignment folder (the one with the notebooks and jobs/)"),
        )
    return path


def of_folder(folder: Path | str) -> SiteSettings:
    """The settings of <folder>/jobs/site_env.sh; JobError when it is missing."""
    return SiteSettings.read(in_folder(folder))


def locate() -> Path | None:
    """jobs/site_env.sh of the current folder, else of the kit's checkout; None if neither has."""
    for base in (Path.cwd(), paths.KIT_ROOT):
        candidate = base / paths.JOBS_DIR / FILE
        if candidate.is_file():
            return candidate
    return None
