"""The Japanese catalogs follow what course/locale/ja/STYLE.md says a test can check: no forbidden
form (あなた beyond a few, the coinages, 無作為, ` x ` between numbers, `us` for µs), no sentence
ending in a colon, and lists in messages joined in the student's language (i18n.listed)."""

from __future__ import annotations

import ast
import re

import pytest
from babel.messages import pofile

from course import i18n
from course.instructor import i18n_catalog as cat
from tests.helpers import ROOT

FORBIDDEN = ("代役", "封印", "採点器", "手で採点", "無作為", "勾配の交換")
MOST_ANATA = 5  # あなた in both catalogs together: only where the student must be named
_CODE_SPAN = re.compile(r"`[^`]*`")
# ` x ` between two numbers, sizes or placeholders (not inside code)
_TIMES = re.compile(r"(?:\d|\})\s+x\s|\sx\s+(?:\d|\{)")
_MICRO = re.compile(r"(?:\d|\})\s*us\b")
# A sentence's end (a predicate), then a colon, at the end of a line
_COLON_END = re.compile(r"(?:ます|です|した|ください|ません|でしょう)[:：]\s*$", re.M)
# Two Japanese words joined with an English comma: a list joined with ", "
_ENGLISH_JOIN = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff][,;] [\u3040-\u30ff\u4e00-\u9fff]")


def translations() -> list[tuple[str, str]]:
    """(where, Japanese) of each translated entry of both catalogs."""
    found = []
    for domain in (cat.PYTHON_DOMAIN, cat.NOTEBOOK_DOMAIN):
        with open(i18n.catalog_path("ja", domain), "rb") as f:
            for m in pofile.read_po(f):
                if m.id and m.string:
                    found.append((f"{domain}: {m.context or m.id[:40]}", m.string))
    return found


def style_problems(entries: list[tuple[str, str]]) -> list[str]:
    """What STYLE.md forbids, entry by entry."""
    problems = []
    for where, text in entries:
        prose = _CODE_SPAN.sub(" ", text)
        problems += [f"{where}: {form}" for form in FORBIDDEN if form in prose]
        checks = ((_TIMES, "x for ×"), (_MICRO, "us for µs"), (_COLON_END, "ends in a colon"))
        problems += [f"{where}: {what}" for pattern, what in checks if pattern.search(prose)]
        if _ENGLISH_JOIN.search(prose):
            problems.append(f"{where}: a list joined with an English comma")
    anata = sum(text.count("あなた") for _, text in entries)
    if anata > MOST_ANATA:
        problems.append(f"あなた {anata} times (at most {MOST_ANATA})")
    return problems


def test_the_japanese_catalogs_have_no_form_the_style_guide_forbids():
    entries = translations()
    assert len(entries) > 1000
    assert style_problems(entries) == []


@pytest.mark.parametrize(
    "text,problem",
    [
        ("あなたの関数です。" * 6, "あなた 6 times"),
        ("アップデータの引数は代役が記録しました", "代役"),
        ("うち 1 ケースは無作為に選んだもの", "無作為"),
        ("2 ノード x 2 ランク", "x for ×"),
        ("alpha {alpha:.2f} us、beta", "us for µs"),
        ("次のように動きます:", "ends in a colon"),
        ("(線形スケーリング則の学習率, 平方根則の学習率)", "a list joined with an English comma"),
    ],
)
def test_each_forbidden_form_is_found(text, problem):
    assert any(problem in said for said in style_problems([("here", text)]))
    fine = style_problems(
        [("here", "2 ノード × 2 ランク、`N x batchsize` と 4 µs。次のとおりです。")]
    )
    assert fine == []


def _joins_in_messages(tree: ast.AST) -> list[int]:
    """Lines where a `.format()` of a message fills a placeholder with `", ".join(...)` or
    `"; ".join(...)`: a list that a Japanese sentence would show with English commas."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr != "format":
                continue
            for keyword in node.keywords:
                value = keyword.value
                if (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "join"
                    and isinstance(value.func.value, ast.Constant)
                    and value.func.value.value in (", ", "; ")
                ):
                    lines.append(value.lineno)
    return lines


def test_lists_in_the_kits_messages_are_joined_in_the_students_language():
    found = []
    for path in sorted((ROOT / "course").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "import _" not in text and "i18n" not in text:
            continue  # a module with no message a student reads
        tree = ast.parse(text)
        found += [f"{path.relative_to(ROOT)}:{n}" for n in _joins_in_messages(tree)]
    # the call arguments the kit shows as Python writes them (f(1, 2)) are code, not a list
    code = {"course/lessons/exchange/exchange.py", "course/lessons/exchange/exchange_scaling.py"}
    found = [where for where in found if where.split(":")[0] not in code]
    assert found == [], found
