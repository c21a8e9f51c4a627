"""The batch wizard (staff): configure a batch, see what it will cost as you type, launch it.

The browser computes the estimate live (wizard.js) with the formulas of `mitl/costs.py`;
the server computes it again at submit and refuses a configuration that
`parse_batch_config` or `batch_create` rejects, with their messages on the form, and a
posted field the wizard does not have (`known_fields`).
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from annotation.eligible import workers_eligible
from annotation.errors import ServiceError
from annotation.models import Batch, Dataset, MachineAnnotator
from mitl.aggregation import RULES as AGGREGATION_RULES
from mitl.config import (
    ADJUDICATIONS,
    GOLDEN_POLICIES,
    BatchConfig,
    ConfigError,
    parse_batch_config,
)
from mitl.costs import (
    COMMISSION,
    COMMISSION_LARGE,
    LARGE_HIT_ASSIGNMENTS,
    CostEstimate,
    cost_estimate,
)
from mitl.relevance.proxies import PROXIES
from pipeline.launch import batch_create_with_queries, batch_launch
from pipeline.plan import Plan, config_plan

from .access import staff_required
from .known_fields import KnownFieldsForm, form_field_names
from .wizard_instructions import InstructionsExamplesForm

logger = logging.getLogger(__name__)
DEFAULTS = BatchConfig(annotators=("-",))  # the configuration's defaults, for the form
DEFAULT_REWARD = Decimal("0.10")
ID_SEPARATORS = re.compile(r"[\s,;]+")


def _number(value: int, *, low: int, help_text: str = "", label: str | None = None):
    return forms.IntegerField(
        initial=value,
        label=label,
        help_text=help_text,
        # Ranges are checked by parse_batch_config (its messages say how to fix them); the
        # browser only gets a lower bound to stop typos early.
        widget=forms.NumberInput(attrs={"min": low, "step": 1}),
    )


class IdListField(forms.CharField):
    """Dataset ids separated by spaces, commas or new lines."""

    widget = forms.Textarea(attrs={"rows": 2})

    def to_python(self, value: Any) -> list[int]:
        text = super().to_python(value)
        ids = []
        for token in filter(None, ID_SEPARATORS.split(text)):
            if not (token.isascii() and token.isdigit()):
                raise forms.ValidationError(f"{token!r} is not an id: write whole numbers only.")
            ids.append(int(token))
        return list(dict.fromkeys(ids))


class BatchWizardForm(KnownFieldsForm):
    name = forms.CharField(
        max_length=200, help_text="A name people recognise, e.g. coco5k round 1."
    )
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.order_by("name"))
    annotators = forms.ModelMultipleChoiceField(
        queryset=MachineAnnotator.objects.order_by("name"),
        to_field_name="name",
        widget=forms.CheckboxSelectMultiple,
        help_text="The retrieval models that propose candidate pairs; diverse models miss less.",
    )
    query_mode = forms.ChoiceField(
        choices=[("sample", "Sample queries at random"), ("list", "Use these queries")],
        initial="sample",
        widget=forms.RadioSelect,
        label="Which queries",
    )
    n_image_queries = _number(DEFAULTS.n_image_queries, low=0, label="Image queries")
    n_caption_queries = _number(DEFAULTS.n_caption_queries, low=0, label="Caption queries")
    image_ids = IdListField(required=False, label="Image ids")
    caption_ids = IdListField(required=False, label="Caption ids")
    k = _number(DEFAULTS.k, low=1, label="k", help_text="Candidates per query and annotator.")
    hit_size = _number(DEFAULTS.hit_size, low=1, label="Pairs to judge per HIT")
    golden_tp = _number(DEFAULTS.golden_tp, low=0, label="Golden positives per HIT")
    golden_tn = _number(DEFAULTS.golden_tn, low=0, label="Golden negatives per HIT")
    assignments_per_hit = _number(
        DEFAULTS.assignments_per_hit,
        low=1,
        label="Assignments per HIT",
        help_text="Workers per HIT.",
    )
    reward = forms.DecimalField(
        initial=DEFAULT_REWARD,
        max_digits=7,
        decimal_places=2,
        label="Reward per assignment ($)",
        widget=forms.NumberInput(attrs={"min": "0.01", "step": "0.01"}),
    )
    strategy = forms.ChoiceField(
        choices=[
            ("fixed", "Fixed: every annotator's top k, judged once"),
            ("adaptive", "Adaptive: rounds until the budget is spent"),
        ],
        initial=DEFAULTS.strategy,
        required=False,  # left out: fixed
        widget=forms.RadioSelect,
        help_text="Adaptive rounds judge where positives keep being found and estimate how "
        "many remain (docs/curation.md).",
    )
    adjudication = forms.ChoiceField(
        choices=[(name, name) for name in ADJUDICATIONS],
        initial="learned",
        required=False,
        help_text="How a round chooses its pairs: bandit (annotators as arms), depth (per query, "
        "on the fused ranking), learned (a model of the judgements so far).",
    )
    budget_judgements = forms.IntegerField(
        initial=0,
        required=False,
        label="Budget (judgements)",
        help_text="Every answer to one pair, golden pairs and re-posted work included.",
        widget=forms.NumberInput(attrs={"min": 0, "step": 1}),
    )
    target_recall = forms.FloatField(
        initial=0,
        required=False,
        min_value=0,
        label="Target recall",
        help_text="Stop the rounds once every direction's lower 95% bound of the estimated "
        "recall reaches it (e.g. 0.8); 0 = spend the budget. The plan predicts what it takes.",
        widget=forms.NumberInput(attrs={"min": 0, "max": 0.99, "step": 0.05}),
    )
    golden_negative_depth = _number(
        DEFAULTS.golden_negative_depth,
        low=1,
        help_text="Golden negatives come from outside every annotator's top N (N ≥ k).",
    )
    aggregation = forms.ChoiceField(
        choices=[(rule, rule) for rule in AGGREGATION_RULES], initial=DEFAULTS.aggregation
    )
    golden_policy = forms.ChoiceField(
        choices=[(policy, policy) for policy in GOLDEN_POLICIES], initial=DEFAULTS.golden_policy
    )
    seed = _number(DEFAULTS.seed, low=0, help_text="The same seed draws the same queries.")
    relevance = forms.MultipleChoiceField(
        choices=[(name, f"{name}: {spec.summary}") for name, spec in PROXIES.items() if spec.cheap],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Graded qrels in the release",
        help_text="Caption proxies whose graded qrels the release carries and whose nDCG, NCS "
        "and semantic recall the leaderboard adds (docs/relevance.md). The dataset's relevance "
        "calibration says which agree best with people.",
    )
    simulated_crowd = forms.BooleanField(
        required=False,
        label="Simulated crowd (demos and tests)",
        help_text="Simulated workers judge every HIT once it is built; the batch is then "
        "aggregated and released without people.",
    )
    few_workers_ok = forms.BooleanField(
        required=False,
        label="Create it anyway: MTurk workers or accounts added later will do the rest",
    )

    def __init__(self, *args: Any, eligible_workers: int = 0, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        self.eligible_workers = eligible_workers

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("query_mode") == "list" and not (
            data.get("image_ids") or data.get("caption_ids")
        ):
            self.add_error("image_ids", "List at least one image id or caption id.")
        problem = self.workers_problem()
        if problem and not data.get("few_workers_ok"):
            self.add_error("assignments_per_hit", problem)
        return data

    def workers_problem(self) -> str | None:
        """Say why the platform's annotators cannot complete the batch, if they cannot.

        A batch for people here (annotator accounts exist, no simulated crowd) needs as
        many eligible accounts as assignments per HIT: one worker does a HIT once.
        """
        wanted = self.cleaned_data.get("assignments_per_hit")
        eligible = self.eligible_workers
        if self.cleaned_data.get("simulated_crowd") or not eligible or not wanted:
            return None
        if wanted <= eligible:
            return None
        return (
            f"{wanted} assignments per HIT but only {eligible} annotator "
            f"account{'s' if eligible != 1 else ''} can take HITs here (active, not staff, "
            "not blocked): no HIT would get all its work. Lower the assignments per HIT, add "
            "accounts, or create it anyway if MTurk workers will judge."
        )

    def raw_config(self) -> dict[str, Any]:
        """Return the batch configuration as `parse_batch_config` reads it."""
        data = self.cleaned_data
        keys = (
            "k",
            "hit_size",
            "golden_tp",
            "golden_tn",
            "assignments_per_hit",
            "golden_negative_depth",
            "aggregation",
            "golden_policy",
            "seed",
        )
        raw = {key: data[key] for key in keys}
        raw["annotators"] = [annotator.name for annotator in data["annotators"]]
        if data.get("relevance"):
            raw["relevance"] = list(data["relevance"])
        if data.get("strategy") == "adaptive":
            raw.update(
                strategy="adaptive",
                adjudication=data.get("adjudication") or "learned",
                budget_judgements=data.get("budget_judgements") or 0,
            )
            if data.get("target_recall"):
                raw["target_recall"] = data["target_recall"]
        if data["query_mode"] == "list":
            raw["n_image_queries"] = len(data["image_ids"])
            raw["n_caption_queries"] = len(data["caption_ids"])
        else:
            raw["n_image_queries"] = data["n_image_queries"]
            raw["n_caption_queries"] = data["n_caption_queries"]
        return raw

    def add_config_error(self, error: ConfigError) -> None:
        """Put a configuration message beside the field of its key, or above the form."""
        self.add_error(error.key if error.key in self.fields else None, str(error))


def _initial_estimate(form: BatchWizardForm) -> dict[str, str] | None:
    """The estimate shown before any typing (the browser takes over from there)."""
    values = {name: form[name].value() for name in form.fields}
    listed = values["query_mode"] == "list"
    try:
        config = BatchConfig(
            annotators=tuple(values["annotators"] or ()),
            n_image_queries=_count_ids(values["image_ids"])
            if listed
            else int(values["n_image_queries"]),
            n_caption_queries=_count_ids(values["caption_ids"])
            if listed
            else int(values["n_caption_queries"]),
            k=int(values["k"]),
            hit_size=int(values["hit_size"]),
            golden_tp=int(values["golden_tp"]),
            golden_tn=int(values["golden_tn"]),
            assignments_per_hit=int(values["assignments_per_hit"]),
        )
        estimate = cost_estimate(
            config=config, reward_per_assignment=Decimal(str(values["reward"]))
        )
    except (TypeError, ValueError, ArithmeticError):
        return None
    queries = config.n_image_queries + config.n_caption_queries
    return estimate_display(estimate.cost, queries=queries, candidates=estimate.candidates_at_most)


def estimate_display(estimate: CostEstimate, *, queries: int, candidates: int) -> dict[str, str]:
    """Format an estimate as wizard.js writes it: 1,234 and $1,234.56."""
    return {
        "queries": f"{queries:,}",
        "candidates": f"{candidates:,}",
        "hits": f"{estimate.hits:,}",
        "assignments": f"{estimate.assignments:,}",
        "judgements": f"{estimate.judgements:,}",
        "rewards": f"${estimate.rewards:,.2f}",
        "commission": f"${estimate.commission:,.2f}",
        "rate": f"{estimate.commission_rate * 100:.0f}%",
        "total": f"${estimate.total:,.2f}",
    }


def _count_ids(text: str | None) -> int:
    return len(
        {
            int(token)
            for token in ID_SEPARATORS.split(text or "")
            if (token.isascii() and token.isdigit())
        }
    )


@staff_required
@require_http_methods(["GET", "POST"])
def batch_new(request: HttpRequest) -> HttpResponse:
    """Show the wizard; on POST, validate, estimate, create and start the batch."""
    status = 200
    eligible = workers_eligible().count
    if request.method == "POST":
        examples_form = InstructionsExamplesForm(request.POST)
        # One POST carries both forms: the wizard's knows the examples' fields too.
        form = BatchWizardForm(
            request.POST, eligible_workers=eligible, also_known=form_field_names(examples_form)
        )
        valid = form.is_valid() & examples_form.is_valid()  # both, so both show their errors
        batch = _create_from(form, examples_form, request.user) if valid else None
        if batch is not None:
            _launch(request, batch, simulated_crowd=form.cleaned_data["simulated_crowd"])
            return redirect("frontend:batch", batch_id=batch.pk)
        status = 400
    else:
        form = BatchWizardForm(
            initial={"dataset": request.GET.get("dataset")}, eligible_workers=eligible
        )
        examples_form = InstructionsExamplesForm()
    context = {
        "form": form,
        "examples_form": examples_form,
        "initial": _initial_estimate(form),
        "commission": int(COMMISSION * 100),
        "commission_large": int(COMMISSION_LARGE * 100),
        "large_hit_assignments": LARGE_HIT_ASSIGNMENTS,
        "has_annotators": MachineAnnotator.objects.exists(),
        "eligible_workers": eligible,
    }
    return render(request, "frontend/batch_new.html", context, status=status)


def _create_from(
    form: BatchWizardForm, examples_form: InstructionsExamplesForm, user: AbstractBaseUser
) -> Batch | None:
    """Create the draft batch, or put every problem on the forms and return None."""
    data = form.cleaned_data
    try:
        config = parse_batch_config(form.raw_config())
        estimate = cost_estimate(config=config, reward_per_assignment=data["reward"]).cost
    except ConfigError as exc:
        form.add_config_error(exc)
        return None
    except ValueError as exc:  # mturk_cost: the reward is below MTurk's minimum
        form.add_error("reward", str(exc))
        return None
    listed = data["query_mode"] == "list"
    try:
        return batch_create_with_queries(
            dataset=data["dataset"],
            name=data["name"],
            raw_config=config.to_json(),
            image_ids=data["image_ids"] if listed else None,
            caption_ids=data["caption_ids"] if listed else None,
            # The reward lives with the HIT type settings: every page, estimate and
            # publication reads it there (annotation.mturk.hit_settings.batch_reward).
            mturk={
                "settings": {"reward": str(data["reward"])},
                "estimate": {**estimate.to_json(), "hits_at_most": True},
            },
            instructions_examples=examples_form.examples(),
            user=user,
        )
    except ConfigError as exc:
        form.add_config_error(exc)
    except ServiceError as exc:
        (examples_form if exc.field == "instructions" else form).add_error(None, str(exc))
    return None


def _launch(request: HttpRequest, batch: Batch, *, simulated_crowd: bool) -> None:
    estimate = batch.mturk["estimate"]
    try:
        batch_launch(batch=batch, simulated_crowd=simulated_crowd)
    except Exception as exc:
        # With no broker the stages run inside this request; a stage that fails has stored
        # its error on the batch, whose page shows it (and the stage can run again).
        logger.exception("batch %s: a stage failed while starting", batch.pk)
        messages.error(request, f"Batch {batch.pk} was created but a stage failed: {exc}")
        return
    messages.success(
        request,
        f"Batch {batch.pk} started: at most {estimate['hits']:,} HITs, "
        f"{estimate['judgements']:,} judgements, ${Decimal(estimate['total']):,.2f} on MTurk.",
    )


@staff_required
@require_http_methods(["GET"])
def batch_plan_preview(request: HttpRequest) -> HttpResponse:
    """The wizard's plan panel: what the typed config would buy per strategy and budget.

    Before retrieval, from each annotator's rank slots and the yields of earlier batches on
    the dataset (`pipeline.plan.config_plan`); a config the wizard would refuse says
    why instead.
    """
    # wizard.js sends the whole wizard, the examples' rows and the CSRF token included.
    form = BatchWizardForm(request.GET, also_known=form_field_names(InstructionsExamplesForm()))
    problem = None
    plan = None
    if not form.is_valid():
        problem = "; ".join(
            f"{name}: {' '.join(errors)}" if name != "__all__" else " ".join(errors)
            for name, errors in form.errors.items()
        )
    else:
        try:
            config = parse_batch_config(form.raw_config())
            plan = config_plan(dataset=form.cleaned_data["dataset"], config=config)
        except (ConfigError, ServiceError) as exc:
            problem = str(exc)
    context = {
        "problem": problem,
        "plan": None if plan is None else {"svg": mark_safe(plan.chart_svg()), **plan.to_json()},
        "target_money": plan and _target_money(plan, config, form.cleaned_data["reward"]),
    }
    return render(request, "frontend/plan_panel.html", context, status=200 if plan else 400)


def _target_money(plan: Plan, config: BatchConfig, reward: Any) -> str | None:
    """What the HITs up to a predicted `target_recall` cost on MTurk, at the typed reward."""
    target = plan.target.plan if plan.target else None
    rounds = target and (target.cost if target.reached else target.beyond_reached and target.beyond)
    if not rounds:
        return None
    try:
        cost = cost_estimate(config=config, reward_per_assignment=reward, hits=rounds.hits)
    except ValueError:  # a reward below MTurk's minimum: the estimate beside the form says so
        return None
    return f"${cost.cost.total:,.2f}"
