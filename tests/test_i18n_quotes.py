"""Where the Japanese edition's text quotes or names something the kit prints (a message, a log
line, a table's heading, a cell's output), the quote is what the Japanese edition really prints.

The quotes are the code spans and 「」 quotes of the Japanese texts a student or instructor reads:
the notebooks' and job scripts' translations (notebooks.po), the messages themselves (course.po),
README.ja.md and the Japanese documents. What the Japanese edition prints is every translated
message of course.po (a report's headings and a cell's output among them), the job scripts' echoed
messages, and the protocol lines, which stay English.

- A code span holding Japanese, and a 「」 quote that is not a title or a phrase (NOT_PRINTED),
  quote the kit: their Japanese words stand, in order, in one message the edition prints.
- A code span never quotes in English a message the edition prints in Japanese.
"""

from __future__ import annotations

import re

import pytest
from babel.messages import pofile

from course import i18n
from course.instructor import i18n_catalog as cat
from tests.helpers import ROOT

DOCUMENTS = sorted(
    [ROOT / "README.ja.md", *ROOT.glob("docs/**/*.ja.md"), *ROOT.glob("docs/**/README.ja.md")]
)
_CODE_SPAN = re.compile(r"`([^`]+)`")
_FENCED = re.compile(r"^\s*```.*?^\s*```", re.M | re.S)
_QUOTE = re.compile(r"「([^「」]+)」")
_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
# A run of Japanese text in a quote: kana, kanji and full-width punctuation ("（", "、", "："...).
_RUN = re.compile(r"[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]+")
_FIELD = re.compile(r"\{[^{}]*\}")
# 「」 quotes that quote no output of the kit: titles of the sources, a student's thought, a phrase
NOT_PRINTED = {
    "MPI を用いた Deep Learning 処理高速化の提案",  # the Fujitsu study's title
    "スーパーコンピュータを用いた分散深層学習の性能評価",  # Hanawa's report's title
    "詳細な解析が必要である",  # the sources' words
    "差なのか、ノイズなのか",
    "予測してから実行する",
    "ノードごとに 2 GPU で 2 ノードなので……",  # a student's reasoning
    "128 台の GPU で 100 倍速い",
    "128 GPU で 100 倍",
    "256 あたり 0.1",
    "切り上げた値 × エポック数",  # a formula in words
    "エポックあたりの更新回数を切り捨てた値 × エポック数",
    "実行が存在する",
    "マルチノード実行による MPI の通信時間の増加",  # the Nagoya study's words
    "フェーズ -> ミリ秒",  # a dict's shape
    "リンク",  # names of things a reader looks at (a page's section, a menu)
    "メッセージ",
    "ネットワーク",
    "すべて",
    "Traced runs",
    "[What is where](README.md#what-is-where)",
    "[Not verified here](README.md#not-verified-here)",
    "resuming ... at iteration N",  # a job-log protocol line: English in both editions
    "未測定",  # the points table's own words (docs/grading.ja.md)
    "-",
}


def catalog(domain: str):
    with open(i18n.catalog_path("ja", domain), "rb") as f:
        return pofile.read_po(f)


def translated(domain: str) -> list[tuple[str, str, str]]:
    """(where, English, Japanese) of each translated entry of a catalog."""
    return [
        (str(m.context or m.id[:40]), m.id, m.string)
        for m in catalog(domain)
        if m.id and m.string and not m.fuzzy
    ]


def texts() -> list[tuple[str, str]]:
    """(where, text) of every Japanese text a reader sees."""
    found = [
        (f"{domain}: {where}", japanese)
        for domain in (cat.NOTEBOOK_DOMAIN, cat.PYTHON_DOMAIN)
        for where, _, japanese in translated(domain)
    ]
    return found + [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in DOCUMENTS]


def printed() -> list[str]:
    """What the Japanese edition prints: every message of course.po, translated, and the job
    scripts' echoed messages, each with its placeholders as they are."""
    messages = [japanese for _, _, japanese in translated(cat.PYTHON_DOMAIN)]
    echoed = [
        japanese
        for where, _, japanese in translated(cat.NOTEBOOK_DOMAIN)
        if where.startswith("jobs/") and ":echo" in where
    ]
    return messages + echoed


def quotes_in(message: str, quote: str) -> bool:
    """Whether `message` (a template) can print `quote`: the quote's Japanese runs stand in it, in
    order, none across one of its placeholders."""
    runs = _RUN.findall(quote)
    fixed, at = _FIELD.sub("\0", message), 0  # a placeholder: a character no run holds
    for run in runs:
        at = fixed.find(run, at)
        if at < 0:
            return False
        at += len(run)
    return bool(runs)


def prose(text: str) -> str:
    """`text` without its fenced code blocks (commands, a shell session)."""
    return _FENCED.sub("", text)


def quoted() -> list[tuple[str, str]]:
    """(where, quote) of each code span holding Japanese and each 「」 quote of output; a quote
    broken over two lines of a paragraph is one."""
    found = []
    for where, text in texts():
        text = prose(text)
        found += [(where, span) for span in _CODE_SPAN.findall(text) if _JAPANESE.search(span)]
        quotes = (q.replace("\n", "") for q in _QUOTE.findall(text))
        found += [(where, q) for q in quotes if q not in NOT_PRINTED]
    return found


def test_every_japanese_quote_of_the_kits_output_is_what_the_japanese_edition_prints():
    messages = printed()
    found = quoted()
    assert len(found) >= 5, found  # the kit's Japanese texts quote its output in many places
    wrong = [(where, q) for where, q in found if not any(quotes_in(m, q) for m in messages)]
    assert not wrong, "\n".join(f"{where}: {q}" for where, q in wrong)


_COMMAND = re.compile(
    r"^(?:(?:python|\.venv|qsub|sbatch|make|nbgrader|bash|mpiexec|cd|export)\b|course )"
)


def english_messages() -> list[str]:
    """The kit's messages the Japanese edition prints in Japanese, as English words: their code
    spans and placeholders cut out."""
    return [
        _FIELD.sub("\0", re.sub(r"`[^`]*`", "\0", en))
        for _, en, ja in translated(cat.PYTHON_DOMAIN)
        if en != ja
    ]


def quotes_english(span: str, messages: list[str]) -> bool:
    """Whether a code span quotes one of the English `messages`: its longest stretch of words
    (split at `...` and at capitals that stand for a value: R, HOST, N), two words or more,
    stands in one. A command, a call, an option or a path is code, never a quote."""
    if _JAPANESE.search(span) or _COMMAND.match(span) or re.search(r"[(=/]| -", span):
        return False
    span = span.removeprefix("course: ")  # the prefix of the kit's lines in a job log
    pieces = [p.strip(" :;,.|") for p in re.split(r"\.\.\.|…|\b[A-Z]{1,5}\b", span)]
    longest = max(pieces, key=len, default="")
    if len(longest.split()) < 2 or len(longest) < 10:
        return False
    return any(longest in message for message in messages)


def test_no_japanese_text_quotes_in_english_what_the_edition_prints_in_japanese():
    messages = english_messages()
    headings = {en for _, en, ja in translated(cat.PYTHON_DOMAIN) if en in HEADINGS and en != ja}
    wrong = [
        (where, span)
        for where, text in texts()
        for span in _CODE_SPAN.findall(prose(text))
        if span in headings or quotes_english(span, messages)
    ]
    assert not wrong, "\n".join(f"{where}: `{span}`" for where, span in wrong)


@pytest.mark.parametrize(
    "span,english",
    [
        ("course: profile rank R on HOST: data ... ms | forward ...", True),
        ("NOT SUBMITTED: this machine has no GPU ...", True),
        ("python -m course doctor", False),
        ("course.report.show()", False),
    ],
)
def test_an_english_quote_of_a_translated_message_is_found(span, english):
    assert quotes_english(span, english_messages()) is english


# The report's headings the notebooks name (course/notebook/report.py): in Japanese, the Japanese.
HEADINGS = {"setting", "scaling", "speedup", "efficiency", "time to target", "TTA speedup"}


@pytest.mark.parametrize(
    "quote,prints",
    [
        ("投入しませんでした: このマシンには GPU がなく、...", True),
        ("送信は取りやめました", False),
        ("course: プロファイル（HOST のランク R）: data ... ms", True),
        ("プロファイル（ランク R の HOST）", False),  # the words out of order
    ],
)
def test_a_quote_is_found_in_what_the_edition_prints_only_when_it_is_there(quote, prints):
    assert any(quotes_in(m, quote) for m in printed()) is prints
