"""The prose of the job scripts (jobs/*.sh) a student reads: their comments, and the fixed messages
they echo into a job's log. Each is a piece (course.instructor.i18n_code.Piece): where it stands in
the script, so that a translation replaces exactly that text; everything else (commands, `#PBS`
and `#SBATCH` lines, the shebang, the block between the site directive markers, which `course site
apply` writes) stays byte for byte, so a translated script is submitted and runs as the English.

Consecutive comment lines (`# `) at one indentation make one piece, a paragraph; but a line
that shows a command after its label (`# Other settings:  qsub -j oe ...`: two spaces or more after
the colon) is a piece of its own, its label only, and its command stays as written. Not prose: a
shellcheck directive (only its reason after ` # ` is) and a commented-out command (a command word,
then an option, a path or an assignment). The scripts put no comment after a command.
jobs/site_env.sh is not read here: `course site apply` writes it in the applier's language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wcwidth import width

from course import paths
from course.cluster import sites
from course.instructor.i18n_code import Piece

_COMMENT = re.compile(r"^([ \t]*)# (\S.*)$")
_LABELLED = re.compile(r"^(.+?:)( {2,})(\S.*)$")
_SHELLCHECK = re.compile(r"^shellcheck \S.*? # (?=\S)")
_COMMENTED_OUT = re.compile(
    r"^(python3?|qsub|sbatch|srun|mpiexec|mpirun|module|source|export|cd|nsys)( +-| +\S*[/=.])"
)
_ECHO = re.compile(r'\becho "([^"$`\\\n]+)"')  # a fixed text: nothing the shell expands
UNSAFE_IN_ECHO = '"$`\\\n'  # what a translation inside echo's double quotes may not hold
# Words of a comment that are code: options, paths, variables and settings, names in capitals.
_CODE_WORD = re.compile(r"^(-\S+|\S*[=$/_]\S*|[A-Z][A-Z0-9]+)$")


@dataclass(frozen=True)
class Segment:
    """A piece of a job script and its context in the catalog; for a label, the command it shows
    and that command's column counted from the label's start."""

    context: str
    piece: Piece
    command: str = ""
    column: int = 0


def _context(name: str, echo: bool, index: int) -> str:
    return f"{paths.JOBS_DIR}/{name}:{'echo' if echo else ''}{index}"


def segments(name: str, script: str) -> list[Segment]:
    """The prose pieces of the job script `name` (its text `script`), in order; keyed
    `jobs/<name>:<n>` (the n-th comment piece) and `jobs/<name>:echo<n>` (the n-th message)."""
    found: list[tuple[Piece, bool, str, int]] = []  # (piece, an echo's, command, its column)
    block: list[tuple[int, str, str]] = []  # a paragraph: (offset, prefix, text) of its lines

    def add(start: int, text: str, prefix: str = "", command: str = "", column: int = 0) -> None:
        # an echoed message is the one piece without a comment's prefix
        found.append((Piece(start, start + len(text), text, prefix), not prefix, command, column))

    def close() -> None:
        if block:
            end = block[-1][0] + len(block[-1][2])
            text = "\n".join(line for _, _, line in block)
            found.append((Piece(block[0][0], end, text, block[0][1]), False, "", 0))
            block.clear()

    offset, directives = 0, False
    for line in script.split("\n"):
        comment = _COMMENT.match(line)
        marker = line.strip() if line.strip() in (sites.BEGIN, sites.END) else ""
        directives = marker == sites.BEGIN or (directives and marker != sites.END)
        if directives or marker or comment is None:
            close()
            for message in _ECHO.finditer(line) if comment is None else ():
                add(offset + message.start(1), message[1])
        else:
            # a translation of several lines gets the comment's prefix back on each
            prefix, text = comment[1] + "# ", comment[2]
            start = offset + len(prefix)
            checked, labelled = _SHELLCHECK.match(text), _LABELLED.match(text)
            code = _COMMENTED_OUT.match(text)
            if checked or labelled or code:
                close()
            if checked:
                add(start + checked.end(), text[checked.end() :], prefix)
            elif labelled:
                label, gap, command = labelled.groups()
                add(start, label, prefix, command, len(label) + len(gap))
            elif not code:
                if block and block[0][1] != prefix:
                    close()
                block.append((start, prefix, text))
        offset += len(line) + 1
    close()
    counts = {False: 0, True: 0}
    result = []
    for piece, echo, command, column in sorted(found, key=lambda item: item[0].start):
        result.append(Segment(_context(name, echo, counts[echo]), piece, command, column))
        counts[echo] += 1
    return result


def translated(name: str, script: str, translations: list[str | None]) -> str:
    """`script` with each piece (in `segments` order) replaced by its translation (None: kept).
    A label's command stays at its English column where the translation leaves room (a Japanese
    character takes two columns), else two spaces after it."""
    result = script
    found = segments(name, script)
    for segment, translation in reversed(list(zip(found, translations, strict=True))):
        if translation is None:
            continue
        piece = segment.piece
        text, end = piece.replaced_by(translation), piece.end
        if segment.command:
            end = piece.start + segment.column
            text += " " * max(2, segment.column - width(translation.split("\n")[-1]))
        result = result[: piece.start] + text + result[end:]
    return result


def is_echo(context: str) -> bool:
    return context.rsplit(":", 1)[-1].startswith("echo")


def code_words(text: str) -> list[str]:
    """The words of a comment that are code (a translation keeps each as it is), sorted."""
    words = (word.strip("(),.;:") for word in text.split())
    return sorted({word for word in words if len(word) > 1 and _CODE_WORD.match(word)})


def problems(context: str, english: str, translation: str) -> list[str]:
    """What is wrong with the translation of a job script's piece: code words it dropped, and in
    an echoed message what the shell would expand or a line break."""
    found = []
    missing = [word for word in code_words(english) if word not in translation]
    if missing:
        found.append(f"{context}: code words missing ({', '.join(missing)})")
    if is_echo(context) and any(c in translation for c in UNSAFE_IN_ECHO):
        found.append(f"{context}: an echoed message may not hold quotes, $, `, \\ or a line break")
    return found
