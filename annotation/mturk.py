"""Amazon Mechanical Turk without the network or the database: pure helpers.

What MTurk needs from the platform (the HIT type request with its qualification
requirements, the ExternalQuestion that frames the HIT page, the feedback text of a
rejection) and the files of the offline path (the batch-input CSV and its crowd-form
layout for MTurk's web UI, the batch-results CSV it gives back). The ORM edge and the boto3
calls live in `mturk_services.py`; this module imports neither Django nor boto3.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from html import escape
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape as xml_escape

from mitl.judgements import (
    LEVEL_LABELS,
    SHORTCOMING_LABELS,
    SHORTCOMINGS,
    WRONG_CONCEPT_LABELS,
    WRONG_CONCEPTS,
    Level,
)
from mitl.quality import AUTOMATIC_REJECTION_PREFIX, GoldenMiss

REGION = "us-east-1"  # MTurk's API exists in this region only
SANDBOX_ENDPOINT = "https://mturk-requester-sandbox.us-east-1.amazonaws.com"
PRODUCTION_ENDPOINT = "https://mturk-requester.us-east-1.amazonaws.com"
SANDBOX, PRODUCTION = "sandbox", "production"
# Where a worker's browser posts the finished assignment (MTurk's `turkSubmitTo`).
SUBMIT_HOSTS: tuple[str, ...] = ("https://www.mturk.com", "https://workersandbox.mturk.com")
# Sites allowed to frame the HIT page: the two above, plus worker.mturk.com, the production
# worker site that shows an ExternalQuestion in its iframe today.
FRAME_ANCESTORS: tuple[str, ...] = (*SUBMIT_HOSTS, "https://worker.mturk.com")
WORKER_SITES = {
    SANDBOX: "https://workersandbox.mturk.com",
    PRODUCTION: "https://worker.mturk.com",
}
PREVIEW_ASSIGNMENT_ID = "ASSIGNMENT_ID_NOT_AVAILABLE"  # MTurk's assignmentId in a preview

# System qualification types (MTurk API reference, QualificationRequirement).
QUAL_PERCENT_APPROVED = "000000000000000000L0"  # Worker_PercentAssignmentsApproved
QUAL_NUMBER_HITS_APPROVED = "00000000000000000040"  # Worker_NumberHITsApproved
QUAL_LOCALE = "00000000000000000071"  # Worker_Locale

EXTERNAL_QUESTION_NS = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/"
    "ExternalQuestion.xsd"
)
FEEDBACK_MAX = 1024  # RequesterFeedback and a bonus Reason: MTurk's limit
TOKEN_MAX = 64  # UniqueRequestToken
_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_LOCALE = re.compile(r"^[A-Z]{2}(-[A-Z0-9]{1,3})?$")
CENT = Decimal("0.01")


class MTurkInputError(ValueError):
    """A setting, URL or file is not usable for MTurk; the message says how to fix it."""


# --- HIT type ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HitTypeSettings:
    """What workers see in MTurk's list of HITs, what they are paid, and who may work."""

    title: str = "Does the description match the image?"
    description: str = (
        "Look at image and description pairs and say whether each description is correct "
        "for its image; say why when it is only partly right."
    )
    keywords: str = "image, caption, description, matching, categorization"
    reward: Decimal = Decimal("0.50")  # per assignment, in USD
    assignment_minutes: int = 30  # time a worker has after accepting
    lifetime_hours: int = 72  # how long the HITs stay on the market
    auto_approval_hours: int = 72  # MTurk approves and pays by itself after this
    min_approval_rate: int | None = 95  # percent; None: no requirement
    min_approved_hits: int | None = 500  # None: no requirement
    locales: tuple[str, ...] = ("US",)  # ISO 3166 countries (or "US-CA"); empty: anywhere

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["reward"] = str(self.reward)
        data["locales"] = list(self.locales)
        return data


_TEXT_LIMITS = {"title": 128, "description": 2000, "keywords": 1000}
_INT_LIMITS = {
    "assignment_minutes": (1, 365 * 24 * 60),
    "lifetime_hours": (1, 365 * 24),
    "auto_approval_hours": (0, 30 * 24),
    "min_approval_rate": (0, 100),
    "min_approved_hits": (0, 1_000_000),
}


def parse_hit_type_settings(
    raw: Mapping[str, Any], *, defaults: HitTypeSettings | None = None
) -> HitTypeSettings:
    """Validate settings from a form or JSON; missing keys keep `defaults`."""
    base = defaults or HitTypeSettings()
    known = set(HitTypeSettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise MTurkInputError(
            f"MTurk settings: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )
    values = base.to_json() | dict(raw)
    for name, limit in _TEXT_LIMITS.items():
        text = str(values[name]).strip()
        if not text and name != "keywords":
            raise MTurkInputError(f"MTurk settings: `{name}` must not be empty")
        if len(text) > limit:
            raise MTurkInputError(
                f"MTurk settings: `{name}` is {len(text)} characters long; MTurk allows {limit}"
            )
        values[name] = text
    values["reward"] = parse_money(values["reward"], what="`reward`")
    for name, (low, high) in _INT_LIMITS.items():
        value = values[name]
        if name.startswith("min_") and value in (None, ""):
            values[name] = None
            continue
        values[name] = _parse_int(name, value, low, high)
    values["locales"] = _parse_locales(values["locales"])
    return HitTypeSettings(**values)


def parse_money(value: Any, *, what: str = "amount") -> Decimal:
    """Return a USD amount of at least one cent, in whole cents."""
    try:
        amount = Decimal(str(value).strip().lstrip("$"))
    except InvalidOperation:
        raise MTurkInputError(f"{what} must be a dollar amount like 0.50 (got {value!r})") from None
    if not amount.is_finite() or amount < CENT:
        raise MTurkInputError(f"{what} must be at least $0.01 (got {value!r})")
    if amount != amount.quantize(CENT):
        raise MTurkInputError(f"{what} must be in whole cents (got {value!r})")
    return amount.quantize(CENT)


def _parse_int(name: str, value: Any, low: int, high: int) -> int:
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None:
        raise MTurkInputError(f"MTurk settings: `{name}` must be a whole number (got {value!r})")
    if not low <= number <= high:
        raise MTurkInputError(
            f"MTurk settings: `{name}` must be between {low} and {high} (got {number})"
        )
    return number


def _parse_locales(value: Any) -> tuple[str, ...]:
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value or [])
    locales = tuple(dict.fromkeys(str(item).strip().upper() for item in items))
    bad = [locale for locale in locales if not _LOCALE.match(locale)]
    if bad:
        raise MTurkInputError(
            f"MTurk settings: {bad[0]!r} is not a country code (ISO 3166, e.g. US, GB or US-CA)"
        )
    return locales


def qualification_requirements(settings: HitTypeSettings, *, sandbox: bool) -> list[dict[str, Any]]:
    """Return MTurk's QualificationRequirements for the worker history and locale settings.

    In the sandbox, the worker-history requirements are left out: sandbox workers (the
    requester testing its own HITs, usually) have no approved work, so they could not
    accept anything.
    """
    requirements: list[dict[str, Any]] = []
    if not sandbox and settings.min_approval_rate is not None:
        requirements.append(
            {
                "QualificationTypeId": QUAL_PERCENT_APPROVED,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [settings.min_approval_rate],
                "ActionsGuarded": "Accept",
            }
        )
    if not sandbox and settings.min_approved_hits is not None:
        requirements.append(
            {
                "QualificationTypeId": QUAL_NUMBER_HITS_APPROVED,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [settings.min_approved_hits],
                "ActionsGuarded": "Accept",
            }
        )
    if settings.locales:
        locales = [_locale_value(locale) for locale in settings.locales]
        requirements.append(
            {
                "QualificationTypeId": QUAL_LOCALE,
                "Comparator": "EqualTo" if len(locales) == 1 else "In",
                "LocaleValues": locales,
                "ActionsGuarded": "Accept",
            }
        )
    return requirements


def _locale_value(locale: str) -> dict[str, str]:
    country, _, subdivision = locale.partition("-")
    return {"Country": country, "Subdivision": subdivision} if subdivision else {"Country": country}


def hit_type_request(settings: HitTypeSettings, *, sandbox: bool) -> dict[str, Any]:
    """Return the keyword arguments of MTurk's CreateHITType for these settings."""
    return {
        "Title": settings.title,
        "Description": settings.description,
        "Keywords": settings.keywords,
        "Reward": str(settings.reward),
        "AssignmentDurationInSeconds": settings.assignment_minutes * 60,
        "AutoApprovalDelayInSeconds": settings.auto_approval_hours * 3600,
        "QualificationRequirements": qualification_requirements(settings, sandbox=sandbox),
    }


def external_question_xml(url: str) -> str:
    """Return the ExternalQuestion that shows `url` in MTurk's frame (FrameHeight 0: full)."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_NS}">'
        f"<ExternalURL>{xml_escape(url)}</ExternalURL>"
        "<FrameHeight>0</FrameHeight>"
        "</ExternalQuestion>"
    )


def external_base_url(raw: str, *, production: bool) -> str:
    """Return the platform's public base URL without a trailing slash, or say what is wrong.

    MTurk shows the HIT page inside its own HTTPS site, where browsers block plain HTTP
    frames; production therefore needs HTTPS. The sandbox also accepts HTTP, for a tunnel
    to a development machine.
    """
    url = (raw or "").strip().rstrip("/")
    if not url:
        raise MTurkInputError(
            "set MTURK_EXTERNAL_BASE_URL to the public HTTPS address of this platform "
            "(e.g. https://curation.example.org): MTurk workers open the HIT page there"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise MTurkInputError(
            f"MTURK_EXTERNAL_BASE_URL must look like https://host[/path] (got {url!r})"
        )
    if production and parts.scheme != "https":
        raise MTurkInputError(
            f"production HITs need an HTTPS base URL (got {url!r}): MTurk frames the HIT "
            "page in its HTTPS site, and browsers refuse a plain HTTP frame there"
        )
    return url


def submit_url(turk_submit_to: str, *, allowed: Iterable[str]) -> str:
    """Return where the finished assignment is posted, if `turkSubmitTo` is an allowed host."""
    parts = urlsplit((turk_submit_to or "").strip())
    origin = f"{parts.scheme}://{parts.netloc}"
    if (
        not parts.scheme
        or not parts.netloc
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
        or origin not in set(allowed)
    ):
        raise MTurkInputError(
            f"turkSubmitTo {turk_submit_to!r} is not one of MTurk's sites "
            f"({', '.join(SUBMIT_HOSTS)})"
        )
    return f"{origin}/mturk/externalSubmit"


def valid_id(value: str) -> bool:
    """Say whether an MTurk id (HITId, AssignmentId, WorkerId) looks well formed."""
    return bool(_ID.match(value or ""))


def request_token(*parts: object) -> str:
    """Return a UniqueRequestToken: MTurk refuses a repeat within 24 hours."""
    token = "-".join(str(part) for part in parts)
    if len(token) > TOKEN_MAX:
        raise MTurkInputError(f"request token {token!r} is longer than {TOKEN_MAX} characters")
    return token


def publication_nonce(started_at: str) -> str:
    """Return the part of CreateHIT tokens that tells publications of one batch apart.

    `started_at` is the ISO time the publication started (kept in `Batch.mturk`): a resumed
    publish has the same one, hence the same tokens, while publishing again after a sandbox
    reset gets new tokens, which MTurk would otherwise refuse as repeats for 24 hours.
    """
    try:
        moment = datetime.fromisoformat(started_at)
    except (TypeError, ValueError):
        raise MTurkInputError(f"publication start {started_at!r} is not an ISO time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return str(int(moment.timestamp()))


def requester_annotation(batch_id: int, hit_id: int) -> str:
    """Return the note stored on an MTurk HIT, so a resumed publish can find it again."""
    return f"mitl:batch={batch_id}:hit={hit_id}"


def worker_preview_url(environment: str, hit_group_id: str) -> str:
    return f"{WORKER_SITES[environment]}/mturk/preview?groupId={hit_group_id}"


# --- feedback ---------------------------------------------------------------------------


# RequesterFeedback of a submission MTurk has but the platform never received (a worker
# who posted to externalSubmit without the HIT page, or whose answers were lost).
MISSING_FEEDBACK = (
    "No answers reached the platform for this assignment: the HIT was submitted on MTurk "
    "without the answers being saved through the HIT page, so there is no work to approve."
)


def rejection_feedback(*, reviewer_text: str, misses: Sequence[GoldenMiss]) -> str:
    """Return the RequesterFeedback of a rejection: which check pairs failed, and why.

    MTurk shows this text to the worker, so it names the pairs in page order with the
    answer the worker gave; a reviewer's own words come first.
    """
    parts = []
    own = reviewer_text.strip()
    if own and not own.startswith(AUTOMATIC_REJECTION_PREFIX):
        parts.append(own)
    if misses:
        details = "; ".join(
            f"pair {miss.position} "
            f"{'matches its description' if miss.is_match else 'does not match its description'}"
            f", but you answered “{LEVEL_LABELS[miss.answered]}”"
            for miss in misses
        )
        parts.append(f"Check pairs with a known answer were answered wrongly: {details}.")
    if not parts:
        parts.append(own or "The work did not meet the task's quality checks.")
    return _truncate(" ".join(parts), FEEDBACK_MAX)


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the offline path: batch input, layout, results -------------------------------------


@dataclass(frozen=True)
class InputItem:
    item_id: int
    image_url: str
    caption: str


@dataclass(frozen=True)
class InputHit:
    batch_id: int
    hit_id: int
    items: Sequence[InputItem]


def batch_input_csv(hits: Sequence[InputHit]) -> str:
    """Return MTurk's batch-input CSV: one row per HIT, every pair's item, image and caption.

    A HIT with fewer pairs than the longest leaves its last columns empty; the layout hides
    them. Nothing says which pairs are golden: they must look like the others.
    """
    width = max((len(hit.items) for hit in hits), default=0)
    header = ["batch_id", "hit_id"]
    for n in range(1, width + 1):
        header += [f"item_{n}", f"image_url_{n}", f"caption_{n}"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    for hit in hits:
        row: list[object] = [hit.batch_id, hit.hit_id]
        for item in hit.items:
            row += [item.item_id, item.image_url, item.caption]
        row += [""] * (len(header) - len(row))
        writer.writerow(row)
    return out.getvalue()


def layout_html(*, pairs: int, followups: bool) -> str:
    """Return the crowd-form layout for MTurk's web UI (Design Layout → Source).

    Each pair is a block with the four answers (radio `level_N`) and, for the middle
    answers, the reasons (`why_N_<reason>`, `concept_N_<concept>`, `other_N`). A script
    keeps the hidden field `answers` up to date with every answer as JSON, in the platform's
    submit format; the results importer reads it, or the single fields when it is missing.
    """
    blocks = "\n".join(_layout_pair(n, followups) for n in range(1, pairs + 1))
    middle = json.dumps([Level.WEAK_YES.value, Level.WEAK_NO.value])
    return _LAYOUT.format(
        pairs=blocks,
        middle=middle,
        followups="true" if followups else "false",
        shortcomings=json.dumps(list(SHORTCOMINGS)),
        concepts=json.dumps(list(WRONG_CONCEPTS)),
    )


def _layout_pair(n: int, followups: bool) -> str:
    levels = "\n".join(
        f'      <label><input type="radio" name="level_{n}" value="{level.value}"> '
        f"{escape(LEVEL_LABELS[level])}</label>"
        for level in Level
    )
    why = ""
    if followups:
        reasons = []
        for code, label in SHORTCOMING_LABELS.items():
            reasons.append(
                f'      <label><input type="checkbox" name="why_{n}_{code}"> {escape(label)}'
                "</label>"
            )
            if code == "wrong_description":
                concepts = "\n".join(
                    f'        <label><input type="checkbox" name="concept_{n}_{concept}"> '
                    f"{escape(concept_label)}</label>"
                    for concept, concept_label in WRONG_CONCEPT_LABELS.items()
                )
                reasons.append(
                    '      <fieldset class="mitl-concepts" hidden><legend>Which concept is '
                    f"described in a wrong way?</legend>\n{concepts}\n"
                    f'        <label>Describe the other concept <input type="text" '
                    f'name="other_{n}" maxlength="500"></label>\n      </fieldset>'
                )
        why = (
            '    <fieldset class="mitl-why" hidden><legend>Why? Choose all that apply.'
            "</legend>\n" + "\n".join(reasons) + "\n    </fieldset>\n"
        )
    return (
        f'  <section class="mitl-pair" data-n="{n}" data-item="${{item_{n}}}">\n'
        f"    <h3>Pair {n}</h3>\n"
        f'    <img src="${{image_url_{n}}}" alt="The image of pair {n}">\n'
        f"    <blockquote>${{caption_{n}}}</blockquote>\n"
        "    <fieldset><legend>Is the image correctly described?</legend>\n"
        f"{levels}\n    </fieldset>\n{why}  </section>"
    )


_LAYOUT = """<!-- MITL curation: paste into MTurk's Design Layout (Source). ${{...}} are the
     batch-input CSV columns. Do not rename the fields: the results importer reads them. -->
<script src="https://assets.crowd.aws/crowd-html-elements.js"></script>
<style>
  .mitl-pair {{ border-top: 1px solid #ccc; padding: .75rem 0; }}
  .mitl-pair img {{ max-width: 100%; max-height: 60vh; display: block; }}
  .mitl-pair blockquote {{ font-size: 1.2rem; border-left: 4px solid #3366cc; margin: .5rem 0;
    padding: .25rem .75rem; }}
  .mitl-pair label {{ display: block; padding: .2rem 0; }}
  .mitl-missing {{ outline: 3px solid #c62828; }}
</style>
<crowd-form>
  <input type="hidden" name="hit_id" value="${{hit_id}}">
  <input type="hidden" name="answers" id="mitl-answers" value="">
  <p>For each pair, is the image correctly described? "Partially YES" and "Mostly NO" ask
  why. Some pairs have a known answer and check the quality of the work.</p>
{pairs}
</crowd-form>
<script>
(function () {{
  var middle = {middle}, followups = {followups};
  var shortcomings = {shortcomings}, concepts = {concepts};
  var opened = Date.now(), last = opened, elapsed = {{}};
  var pairs = [].slice.call(document.querySelectorAll(".mitl-pair"));
  pairs = pairs.filter(function (p) {{
    if (p.dataset.item) return true;
    p.remove();  // a HIT shorter than the longest: its empty columns
    return false;
  }});
  function level(p) {{
    var c = p.querySelector("input[type=radio]:checked");
    return c ? c.value : null;
  }}
  function ticked(p, prefix, codes) {{
    return codes.filter(function (code) {{
      var box = p.querySelector("input[name='" + prefix + p.dataset.n + "_" + code + "']");
      return box && box.checked;
    }});
  }}
  function answer(p) {{
    var lv = level(p), asks = followups && middle.indexOf(lv) >= 0;
    var why = asks ? ticked(p, "why_", shortcomings) : [];
    var wrong = why.indexOf("wrong_description") >= 0 ? ticked(p, "concept_", concepts) : [];
    var other = p.querySelector("input[name='other_" + p.dataset.n + "']");
    return {{item: Number(p.dataset.item), level: lv, shortcomings: why, wrong_concepts: wrong,
      other_text: wrong.indexOf("other") >= 0 && other ? other.value.trim() : "",
      elapsed_ms: elapsed[p.dataset.n] || 0}};
  }}
  function complete(a) {{
    if (!a.level) return false;
    if (!followups || middle.indexOf(a.level) < 0) return true;
    if (!a.shortcomings.length) return false;
    if (a.shortcomings.indexOf("wrong_description") >= 0 && !a.wrong_concepts.length) return false;
    return a.wrong_concepts.indexOf("other") < 0 || a.other_text !== "";
  }}
  function refresh(p) {{
    var a = answer(p), why = p.querySelector(".mitl-why");
    if (why) why.hidden = middle.indexOf(a.level) < 0;
    var box = p.querySelector(".mitl-concepts");
    if (box) box.hidden = a.shortcomings.indexOf("wrong_description") < 0;
    document.getElementById("mitl-answers").value = JSON.stringify(pairs.map(answer));
  }}
  pairs.forEach(function (p) {{
    p.addEventListener("change", function (event) {{
      if (event.target.type === "radio") {{  // time since the previous answer, roughly
        var now = Date.now();
        elapsed[p.dataset.n] = (elapsed[p.dataset.n] || 0) + (now - last);
        last = now;
      }}
      p.classList.remove("mitl-missing");
      refresh(p);
    }});
    p.addEventListener("input", function () {{ refresh(p); }});
  }});
  document.querySelector("crowd-form").addEventListener("submit", function (event) {{
    pairs.forEach(refresh);
    var open = pairs.filter(function (p) {{ return !complete(answer(p)); }});
    if (open.length) {{
      event.preventDefault();
      open.forEach(function (p) {{ p.classList.add("mitl-missing"); }});
      open[0].scrollIntoView();
      alert("Please answer every pair (and say why for the middle answers).");
    }}
  }});
  if (pairs.length) refresh(pairs[0]);
}})();
</script>
"""

RESULT_COLUMNS = ("HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "Input.hit_id")
MTURK_STATUSES = ("Submitted", "Approved", "Rejected")


@dataclass(frozen=True)
class ResultRow:
    """One assignment of MTurk's batch-results CSV, with its answers in submit format."""

    line: int
    hit_external_id: str
    assignment_external_id: str
    worker_external_id: str
    status: str  # Submitted, Approved or Rejected
    hit_id: int  # the platform HIT, from the Input.hit_id column
    answers: list[dict[str, Any]] = field(default_factory=list)
    accept_time: datetime | None = None
    submit_time: datetime | None = None


def parse_results_csv(text: str, *, source: str) -> tuple[list[ResultRow], list[str]]:
    """Read MTurk's batch-results CSV; return the rows and `source:line: problem` errors.

    Columns: `HITId`, `AssignmentId`, `WorkerId`, `AssignmentStatus`, `AcceptTime`,
    `SubmitTime`, the batch-input columns as `Input.*` and the form's fields as `Answer.*`,
    or, with crowd-form, all of them as JSON in `Answer.taskAnswers`.
    """
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = reader.fieldnames or []
    missing = [column for column in RESULT_COLUMNS if column not in header]
    if missing:
        return [], [
            f"{source}:1: missing column {missing[0]!r}: is this the batch-results CSV of a "
            "batch made from `mturk_export`?"
        ]
    rows: list[ResultRow] = []
    errors: list[str] = []
    line = 2  # the header is line 1; a quoted cell may span several lines
    while True:
        try:
            raw = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell over the csv module's size limit
            errors.append(f"{source}:{line}: unreadable CSV ({exc}); the rest was not read")
            break
        start, line = line, reader.line_num + 1
        try:
            rows.append(_result_row(raw, start))
        except MTurkInputError as exc:
            errors.append(f"{source}:{start}: {exc}")
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            # A tampered file that slipped past the checks below must not stop the import.
            errors.append(f"{source}:{start}: unreadable answers ({type(exc).__name__})")
    return rows, errors


def _result_row(raw: Mapping[str, str | None], line: int) -> ResultRow:
    cell = {key: (value or "").strip() for key, value in raw.items() if key}
    for column in ("HITId", "AssignmentId", "WorkerId"):
        if not valid_id(cell[column]):
            raise MTurkInputError(f"{column} {cell[column]!r} is not an MTurk id")
    if cell["AssignmentStatus"] not in MTURK_STATUSES:
        raise MTurkInputError(
            f"AssignmentStatus {cell['AssignmentStatus']!r} is not one of "
            f"{', '.join(MTURK_STATUSES)}"
        )
    try:
        hit_id = int(cell["Input.hit_id"])
    except ValueError:
        raise MTurkInputError(f"Input.hit_id {cell['Input.hit_id']!r} is not a HIT id") from None
    return ResultRow(
        line=line,
        hit_external_id=cell["HITId"],
        assignment_external_id=cell["AssignmentId"],
        worker_external_id=cell["WorkerId"],
        status=cell["AssignmentStatus"],
        hit_id=hit_id,
        answers=answers_from_result(cell),
        accept_time=parse_mturk_time(cell.get("AcceptTime", "")),
        submit_time=parse_mturk_time(cell.get("SubmitTime", "")),
    )


def answers_from_result(cell: Mapping[str, str]) -> list[dict[str, Any]]:
    """Return a result row's answers: the `answers` JSON, or else the single fields."""
    fields = _answer_fields(cell)
    packed = fields.get("answers")
    if isinstance(packed, str) and packed.strip():
        try:
            packed = json.loads(packed)
        except json.JSONDecodeError as exc:
            raise MTurkInputError(f"the `answers` field is not JSON ({exc.msg})") from None
    if packed:
        if not isinstance(packed, list) or not all(isinstance(a, dict) for a in packed):
            raise MTurkInputError("the `answers` field must be a JSON list of answers")
        return [_clean_answer(answer) for answer in packed]
    return _answers_from_fields(cell, fields)


def _answer_fields(cell: Mapping[str, str]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        key.removeprefix("Answer."): value
        for key, value in cell.items()
        if key.startswith("Answer.") and key != "Answer.taskAnswers"
    }
    task_answers = cell.get("Answer.taskAnswers", "")
    if task_answers:
        try:
            decoded = json.loads(task_answers)
        except json.JSONDecodeError as exc:
            raise MTurkInputError(f"Answer.taskAnswers is not JSON ({exc.msg})") from None
        if isinstance(decoded, list):  # crowd-form: one object per submission
            decoded = decoded[0] if decoded else {}
        if not isinstance(decoded, dict):
            raise MTurkInputError("Answer.taskAnswers must hold a JSON object of fields")
        fields.update(decoded)
    return fields


def _answers_from_fields(cell: Mapping[str, str], fields: Mapping[str, Any]) -> list[dict]:
    answers = []
    n = 1
    while f"Input.item_{n}" in cell:
        item = cell[f"Input.item_{n}"]
        if item:
            level = _chosen(fields.get(f"level_{n}"))
            why = [code for code in SHORTCOMINGS if _truthy(fields.get(f"why_{n}_{code}"))]
            concepts = [c for c in WRONG_CONCEPTS if _truthy(fields.get(f"concept_{n}_{c}"))]
            other = _text(fields.get(f"other_{n}"))
            answers.append(
                _clean_answer(
                    {
                        "item": item,
                        "level": level,
                        "shortcomings": why,
                        "wrong_concepts": concepts,
                        "other_text": other if "other" in concepts else "",
                    }
                )
            )
        n += 1
    if not answers:
        raise MTurkInputError("no answers: neither an `answers` field nor `level_N` fields")
    return answers


def _chosen(value: Any) -> str | None:
    """Return a radio group's choice, as plain HTML forms or crowd-form serialize it."""
    if isinstance(value, dict):  # {"yes": true, "no": false} or {"label": "yes"}
        if isinstance(value.get("label"), str):
            return value["label"]
        chosen = [key for key, on in value.items() if _truthy(on)]
        return chosen[0] if len(chosen) == 1 else None
    text = _text(value)
    return text or None


def _truthy(value: Any) -> bool:
    if isinstance(value, dict):  # crowd-form: {"on": true}
        return any(_truthy(v) for v in value.values())
    if isinstance(value, bool):
        return value
    return str(value or "").strip().lower() in ("on", "true", "1", "yes", "checked")


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _clean_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """Return one answer in submit format, refusing values of the wrong type or size."""
    raw_item = answer.get("item")
    try:
        if isinstance(raw_item, bool):
            raise TypeError
        item = int(raw_item)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise MTurkInputError(f"answer for item {raw_item!r}: not an item id") from None
    level = answer.get("level")
    if not isinstance(level, str) or level not in {lv.value for lv in Level}:
        raise MTurkInputError(f"item {item}: no answer chosen (got {level!r})")
    other_text = answer.get("other_text")
    if other_text is not None and not isinstance(other_text, str):
        raise MTurkInputError(f"item {item}: `other_text` must be text (got {other_text!r})")
    return {
        "item": item,
        "level": level,
        "shortcomings": _codes(answer.get("shortcomings"), item, "shortcomings"),
        "wrong_concepts": _codes(answer.get("wrong_concepts"), item, "wrong_concepts"),
        "other_text": other_text or "",
        "elapsed_ms": _elapsed_ms(answer.get("elapsed_ms"), item),
    }


def _codes(value: Any, item: int, name: str) -> list[str]:
    """Return a list of reason codes; anything but a list of strings is refused."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(code, str) for code in value):
        raise MTurkInputError(f"item {item}: `{name}` must be a list of codes (got {value!r})")
    return list(value)


def _elapsed_ms(value: Any, item: int) -> int:
    """Return a time in whole milliseconds (0 when missing); NaN and infinity are refused."""
    if value is None or value == "":
        return 0
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value) if isinstance(value, str) else value
        elapsed = int(number)  # OverflowError for ±inf, ValueError for NaN
    except (TypeError, ValueError, OverflowError):
        raise MTurkInputError(
            f"item {item}: `elapsed_ms` must be a number of milliseconds (got {value!r})"
        ) from None
    return max(0, elapsed)


_TZ_OFFSETS = {"UTC": 0, "GMT": 0, "PST": -8, "PDT": -7, "EST": -5, "EDT": -4}


def parse_mturk_time(text: str) -> datetime | None:
    """Parse a results-CSV time like `Thu Oct 09 07:30:20 PDT 2025`; None when unreadable."""
    parts = text.split()
    if len(parts) != 6 or parts[4] not in _TZ_OFFSETS:
        return None
    try:
        naive = datetime.strptime(" ".join(parts[:4] + parts[5:]), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
    offset = _TZ_OFFSETS[parts[4]]
    zone = UTC if offset == 0 else timezone(timedelta(hours=offset))
    return naive.replace(tzinfo=zone).astimezone(UTC)


def decisions_csv(text: str, decisions: Mapping[str, tuple[bool, str] | None]) -> str:
    """Return the results CSV with its `Approve`/`Reject` columns filled in, for re-upload.

    MTurk's web UI approves a row with an `x` under `Approve` and rejects it with the
    feedback under `Reject`; rows without a decision (work that waits for a person) stay
    empty.
    """
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = list(reader.fieldnames or [])
    for column in ("Approve", "Reject"):
        if column not in header:
            header.append(column)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\r\n")
    writer.writeheader()
    for row in reader:
        decision = decisions.get((row.get("AssignmentId") or "").strip())
        row["Approve"], row["Reject"] = "", ""
        if decision is not None:
            approve, feedback = decision
            if approve:
                row["Approve"] = "x"
            else:
                row["Reject"] = _truncate(feedback, FEEDBACK_MAX)
        writer.writerow(row)
    return out.getvalue()
