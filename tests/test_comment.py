"""The PR comment: verdict first, escaped names, stable order, GitHub's size limit respected."""

from __future__ import annotations

from ha_bot import comment, diff
from tests.test_diff import model, report


def make(base_models, head_models, **kw):
    d = diff.diff_reports(
        report(*base_models),
        report(*head_models),
        base_info={"sha": "a" * 40, "ref": "main", "merge_base": True},
        head_info={"sha": "b" * 40, "ref": "pr"},
        **kw,
    )
    d["settings"] = {"precision": "fp16", "batch_sizes": [1], "targets": ["t1", "t2"]}
    return d


def test_verdict_first_and_footer_with_both_shas():
    text = comment.render(make([model()], [model(lat=0.02)]))
    lines = text.splitlines()
    assert lines[0].startswith("### ha-bot")
    assert "Within budget" in lines[2] and "1 changed" in lines[2]
    assert "aaaaaaaaaaaa" in text and "bbbbbbbbbbbb" in text and "merge-base" in text


def test_new_model_says_new():
    text = comment.render(make([], [model("fresh")]))
    assert "new model" in text and "+100" not in text


def test_names_are_escaped():
    evil = "x](http://evil)<img src=x>@team|"
    import re

    text = comment.render(make([], [model(evil)]))
    outside_code = re.sub(r"`[^`\n]*`", "", text)
    assert (
        "<img" not in outside_code and "](http" not in outside_code and "@team" not in outside_code
    )
    assert (
        "`x](http://evil)<img src=x>@team|`" in text
    )  # inside a code span nothing renders or pings


def test_stable_output():
    d = make([model("b"), model("a")], [model("b", lat=0.02), model("a")])
    assert comment.render(d) == comment.render(d)
    text = comment.render(d)
    assert text.index("`b` — changed") < text.index("`a` — unchanged")


def test_limit_trims_unchanged_first_then_points_to_summary():
    base = [model(f"m{i:03d}") for i in range(300)]
    head = [model(f"m{i:03d}", lat=0.02 if i < 3 else 0.01) for i in range(300)]
    d = make(base, head)
    full = comment.summary(d)
    assert len(full) > comment.COMMENT_LIMIT
    text = comment.render(d)
    assert len(text) <= comment.COMMENT_LIMIT
    assert "`m000` — changed" in text and "Unchanged:" in text
    tiny = comment.render(d, limit=3000)
    assert len(tiny) <= 3000 and "job summary" in tiny


def test_failed_budget_lines():
    from ha_bot.config import Budget

    d = make([model()], [model(lat=0.05)], budgets=[Budget("latency", "t1", 0.015, 0.03, False)])
    text = comment.render(d)
    assert "budget check failed" in text and "latency on t1" in text


def test_mermaid_chart_for_changed_model():
    text = comment.render(make([model()], [model(lat=0.02)]))
    assert "```mermaid" in text and "xychart-beta" in text
