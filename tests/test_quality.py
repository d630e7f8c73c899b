"""folio.page.quality: loops score high, prose and tables score low; truncation evidence."""

from __future__ import annotations

import pytest

from folio.page.quality import (
    looks_truncated,
    most_repeated,
    normalize_words,
    repeat_ratio,
    sequence_similarity,
    text_chars,
    truncation_reason,
    word_recall,
)
from folio.samples import report_pages

PROSE = "\n\n".join(p.text() for p in report_pages(seed=3, n=3))
ZH_PROSE = (
    "北京是中华人民共和国的首都，也是全国的政治中心和文化中心。这座城市有三千多年的建城史，"
    "拥有众多的历史古迹，例如故宫、天坛和颐和园。近年来，北京的经济发展迅速，科技公司和研究"
    "机构不断增加，吸引了大量年轻人前来工作和生活。与此同时，城市也面临交通拥堵、空气污染和"
    "房价上涨等问题，政府正在采取多种措施加以改善。"
)
HTML_TABLE = "<table>" + "".join(
    f"<tr><td>{i}</td><td>{i * 7 % 13}</td><td>row {i}</td></tr>" for i in range(60)
) + "</table>"
MD_TABLE = "| a | b | c |\n|---|---|---|\n" + "".join(f"| {i} | {i * 3} | x{i} |\n" for i in range(40))


@pytest.mark.parametrize(
    "text",
    [PROSE, ZH_PROSE, HTML_TABLE, MD_TABLE, "", "short text", "the the the"],
    ids=["prose", "chinese", "html-table", "md-table", "empty", "short", "too-short-to-judge"],
)
def test_normal_text_scores_low(text: str) -> None:
    assert repeat_ratio(text) < 0.2


@pytest.mark.parametrize(
    "text",
    [
        "the " * 200,
        "Revenue North 1200 growth 4.5% in the quarter\n" * 50,
        ZH_PROSE[:40] + "的的的的的" * 60,
        "我们的系统" * 40,
        "<tr><td>1</td><td>2</td></tr>" * 30 + "a b c d e f g h i j",
        "a" * 500,
    ],
    ids=["word-loop", "line-x50", "chinese-char-loop", "chinese-phrase-loop", "html-row-loop",
         "one-char-run"],
)
def test_loops_score_high(text: str) -> None:
    assert repeat_ratio(text) > 0.8


def test_a_loop_at_the_end_counts_by_its_share() -> None:
    head = PROSE[:1500]
    ratio = repeat_ratio(head + " and then" * 300)
    assert 0.5 < ratio < 0.95


def test_text_repeated_twice_scores_about_half() -> None:
    assert 0.45 < repeat_ratio(PROSE + "\n" + PROSE) < 0.55


def test_repeat_ratio_rejects_bad_n() -> None:
    with pytest.raises(ValueError):
        repeat_ratio("x", n=0)


def test_most_repeated_names_the_loop() -> None:
    gram, count = most_repeated("intro words here " + "the end " * 50)
    assert gram in ("the end the end", "end the end the")
    assert count >= 48


@pytest.mark.parametrize(
    ("text", "finish", "fragment"),
    [
        ("text", "length", "finish_reason"),
        ("<table><tr><td>1</td></tr>", None, "<table>"),
        ("<div>abc", "stop", "<div>"),
        ("```python\nx = 1\n", None, "code fence"),
        ("$$ x^2", None, "$$"),
    ],
)
def test_truncation_evidence(text: str, finish: str | None, fragment: str) -> None:
    reason = truncation_reason(text, finish)
    assert reason is not None and fragment in reason
    assert looks_truncated(text, finish)


@pytest.mark.parametrize(
    "text",
    ["A page that ends mid-sentence because it goes on", HTML_TABLE, "```\ncode\n```", "$$x$$"],
)
def test_complete_output_is_not_truncated(text: str) -> None:
    assert not looks_truncated(text, "stop")


def test_comparison_helpers() -> None:
    assert normalize_words("Ｑuarterly REPORT, 2024!") == ["quarterly", "report", "2024"]
    assert word_recall("a b c d", "d c b a") == 1.0
    assert word_recall("a b c d", "a b") == 0.5
    assert word_recall("", "anything") == 1.0
    assert sequence_similarity("a b c d", "a b c d") == 1.0
    assert sequence_similarity("a b c d", "d c b a") < 0.5
    assert text_chars(" a b\n\tc ") == 3


def test_mean_confidence_weighs_blocks_by_their_text() -> None:
    from folio.models import Block
    from folio.page.quality import mean_confidence

    blocks = [Block(label="Text", content="x" * 30, order=0, confidence=0.9),
              Block(label="Text", content="y" * 10, order=1, confidence=0.1),
              Block(label="Text", content="no confidence", order=2)]
    assert mean_confidence(blocks) == pytest.approx(0.7)
    assert mean_confidence(blocks[2:]) is None
