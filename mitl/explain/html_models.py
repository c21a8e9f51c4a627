"""The explain report's per-model comparison tables: adversarial re-ranking, crowd vs machine.

Also the small formatting helpers the report's HTML shares (`mitl.explain.html`). Every text
from the report is escaped. Pure Python: no Django import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from mitl.explain.failures import HIGHER_IS_BETTER
from mitl.explain.reranking import BLIND_LOWER_SHARE

NAMES = {"ca": "CA", "ncs": "NCS", "ce": "CE", "sd": "SD", "sd_rate": "SD rate", "aa": "AA"}
DIGITS = {"ca": 3, "ncs": 3, "ce": 2, "sd": 2, "sd_rate": 3, "aa": 3}
EXAMPLES_SHOWN = 2


def text(value: object) -> str:
    """Return any value as escaped HTML text."""
    return escape(str(value))


def number(value: float | None, digits: int = 3) -> str:
    """Return a number with `digits` decimals, or a dash for None."""
    return "—" if value is None else f"{value:.{digits}f}"


def percent(value: float | None) -> str:
    """Return a share as a percentage, or a dash for None."""
    return "—" if value is None else f"{100 * value:.1f}%"


def signed(value: float | None, digits: int) -> str:
    """Return a difference with its sign (a true minus), or a dash for None."""
    return "—" if value is None else f"{value:+.{digits}f}".replace("-", "−")


def points(share: float | None) -> float | None:
    """Return a share in percentage points."""
    return None if share is None else 100 * share


def table(head: Sequence[str], rows: Iterable[str], *, cls: str = "") -> str:
    """Return a scrollable table of header cells and row markup (already escaped)."""
    cells = "".join(head)
    body = "".join(rows)
    attribute = f' class="{cls}"' if cls else ""
    return (
        f'<div class="table-wrap"><table{attribute}><thead><tr>{cells}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def better_arrow(metric: str) -> str:
    """Return ↑ or ↓: which way the metric is better."""
    better = HIGHER_IS_BETTER[metric]
    return (
        f'<span title="{"higher" if better else "lower"} is better">{"↑" if better else "↓"}</span>'
    )


# --- adversarial re-ranking -----------------------------------------------------------------


def render_adversarial(adversarial: Mapping[str, Any] | None, *, title: str) -> str:
    """Return a model's adversarial table (one row per perturbation kind) with examples."""
    if adversarial is None:
        return ""
    heading = f"<h3>Adversarial caption queries · {text(title)}</h3>"
    if "skipped" in adversarial:
        return f'{heading}<p class="note">Not run: {text(adversarial["skipped"])}.</p>'
    kinds = adversarial.get("kinds") or {}
    if not kinds:
        return f'{heading}<p class="note">No perturbation kind could run.</p>'
    head = [
        "<th>Kind</th>",
        '<th class="num">Perturbed queries</th>',
        '<th class="num">Lower</th>',
        '<th class="num">Higher</th>',
        '<th class="num">Same</th>',
        '<th class="num">R@1 before → after (Δ)</th>',
        '<th class="num">MRR before → after (Δ)</th>',
        "<th>Verdict</th>",
    ]
    rows, examples = [], []
    for kind, moved in kinds.items():
        shares = moved.get("shares") or {}
        blind = bool(moved.get("blind"))
        badge = ' <span class="badge">blind</span>' if blind else ""
        before, after, delta = moved["before"], moved["after"], moved["delta"]
        rows.append(
            f'<tr class="{"blind" if blind else "reads"}" data-kind="{text(kind)}">'
            f"<td>{text(kind)}{badge}</td>"
            f'<td class="num">{moved["perturbed"]} ({percent(moved.get("perturbed_share"))})</td>'
            f'<td class="num">{percent(shares.get("lower"))}</td>'
            f'<td class="num">{percent(shares.get("higher"))}</td>'
            f'<td class="num">{percent(shares.get("same"))}</td>'
            f'<td class="num">{percent(before.get("recall@1"))} → {percent(after.get("recall@1"))} '
            f"({signed(points(delta.get('recall@1')), 1)})</td>"
            f'<td class="num">{number(before.get("mrr"))} → {number(after.get("mrr"))} '
            f"({signed(delta.get('mrr'), 3)})</td>"
            f"<td>{text(moved.get('verdict', ''))}</td></tr>"
        )
        examples += [
            f"<li>{text(kind)}: “{text(x['original'])}” → “{text(x['perturbed'])}”: rank "
            f"{text(x['rank_before'])} → {text(x['rank_after'])}</li>"
            for x in (moved.get("examples") or [])[:EXAMPLES_SHOWN]
        ]
    note = (
        f'<p class="note">{text(adversarial.get("queries", 0))} caption queries re-ranked with one '
        "kind of attribute changed; ranks are those of the query's best positive. A model is "
        f"blind to a kind when fewer than {BLIND_LOWER_SHARE:.0%} of its perturbed queries "
        "move lower.</p>"
    )
    listed = f'<h4>Examples</h4><ul class="examples">{"".join(examples)}</ul>' if examples else ""
    return heading + note + table(head, rows, cls="adversarial") + listed


# --- crowd vs machine -----------------------------------------------------------------------


def _mean(model: Mapping[str, Any], direction: str, metric: str) -> float | None:
    result = (model.get("explanation") or {}).get(direction) or {}
    return ((result.get("agnostic") or {}).get("means") or {}).get(metric)


def _moved(model: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return ((model.get("adversarial") or {}).get("kinds") or {}).get(kind) or {}


def render_crowd(crowd: Mapping[str, Any] | None, models: Sequence[Mapping[str, Any]]) -> str:
    """Return per annotator the crowd's wrong-concept shares beside its machine metrics."""
    if not crowd:
        return ""
    stats_all = list(crowd.values())
    concepts = [
        c
        for c in stats_all[0]["wrong_concepts"]
        if any(s["wrong_concepts"].get(c) for s in stats_all)
    ]
    by_name = {model["name"]: model for model in models}
    kinds = list(
        dict.fromkeys(k for m in models for k in (m.get("adversarial") or {}).get("kinds") or {})
    )
    machine_metrics = ("ca", "ncs", "ce", "sd", "aa")
    head = [
        "<th>Annotator</th>",
        '<th class="num">Judgements</th>',
        '<th class="num">Wrong description</th>',
        *(f'<th class="num">crowd: {text(c)}</th>' for c in concepts),
        *(f'<th class="num">{NAMES[m]} {better_arrow(m)} t2i / i2t</th>' for m in machine_metrics),
        *(f'<th class="num">{text(k)}: lower</th>' for k in kinds),
    ]
    rows = []
    for name, stats in crowd.items():
        model = by_name.get(name) or {}
        cells = [text(stats["judgements"]), text(stats["wrong_description"])]
        cells += [percent(stats["wrong_concepts"].get(c)) for c in concepts]
        cells += [
            " / ".join(number(_mean(model, d, m), DIGITS[m]) for d in ("t2i", "i2t"))
            for m in machine_metrics
        ]
        blind = "".join(
            f'<td class="num{" blind" if _moved(model, k).get("blind") else ""}">'
            f"{percent((_moved(model, k).get('shares') or {}).get('lower'))}</td>"
            for k in kinds
        )
        numbers = "".join(f'<td class="num">{cell}</td>' for cell in cells)
        rows.append(f"<tr><td>{text(name)}</td>{numbers}{blind}</tr>")
    return (
        '<section class="explain-report" id="crowd"><h2>Crowd vs machine</h2>'
        '<p class="note">Per machine annotator: among the crowd\'s answers "described in a wrong '
        'way" on its proposals, the share naming each concept (ECCV Caption Table B.3); beside '
        "them its query-agnostic concept metrics (text-to-image / image-to-text) and the share "
        "of perturbed queries whose positive moved lower, per kind.</p>"
        + table(head, rows, cls="crowd")
        + "</section>"
    )
