"""An adaptive batch with `crowd_learner`: the learner's ranking joins each round's inputs."""

from __future__ import annotations

import pytest

from annotation.models import Batch, Direction
from mitl.config import ConfigError, batch_config, parse_batch_config
from mitl.curation.crowd_learner import LEARNER_ID
from pipeline.curation import REPORT_KEY, curation_inputs
from pipeline.curation_learner import learner_rankings_add
from pipeline.demo import rounds_run
from pipeline.stages import batch_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def learner_config(small_config) -> dict:
    return {
        **small_config,
        "strategy": "adaptive",
        "adjudication": "learned",
        "budget_judgements": 400,
        "round_size": 100,
        "ranking_depth": 20,
        "estimate_share": 0.2,
        "crowd_learner": True,
    }


def test_the_learner_is_a_switch(small_config):
    assert parse_batch_config(small_config).crowd_learner is False
    with pytest.raises(ConfigError) as wrong:
        parse_batch_config({**small_config, "crowd_learner": "yes"})
    assert wrong.value.key == "crowd_learner"


def test_rounds_with_the_learner_add_its_ranking(dataset, annotators, learner_config):
    batch = batch_create(dataset=dataset, name="learner", raw_config=learner_config)

    rounds_run(batch, n_workers=6, seed=3)

    batch = Batch.objects.get(pk=batch.pk)
    records = batch.reports[REPORT_KEY]["rounds"]
    assert len(records) >= 2
    assert records[0]["learner"]["ranked"] is False  # nothing judged before the first round
    assert any(entry["learner"]["ranked"] for entry in records[1:])
    # What the next selection reads: every query ranked by the learner, its own item kept.
    config = batch_config(batch)
    inputs = curation_inputs(batch=batch, config=config)
    plain = {q.query_id: dict(q.lists) for q in inputs.rankings}
    record = learner_rankings_add(batch=batch, config=config, inputs=inputs)
    assert record is not None and record["ranked"] and record["judged_pairs"] > 0
    items = {q.pk: (q.direction, q.item_id) for q in inputs.queries}
    for query in inputs.rankings:
        ranked = query.lists[LEARNER_ID]
        assert len(ranked) == config.depth == len(query.scores[LEARNER_ID])
        direction, item = items[query.query_id]
        side = 0 if direction == Direction.I2T else 1
        assert all(pair[side] == item for pair in ranked)
        assert len(set(ranked)) == len(ranked)
        # The frozen annotators' rankings are left as they were.
        assert {a: list(p) for a, p in query.lists.items() if a != LEARNER_ID} == {
            a: list(p) for a, p in plain[query.query_id].items()
        }


def test_without_the_learner_rankings_stay_the_annotators(dataset, annotators, learner_config):
    batch = batch_create(
        dataset=dataset, name="plain", raw_config={**learner_config, "crowd_learner": False}
    )
    config = batch_config(batch)
    inputs = curation_inputs(batch=batch, config=config)
    assert learner_rankings_add(batch=batch, config=config, inputs=inputs) is None
    assert all(LEARNER_ID not in q.lists for q in inputs.rankings)
