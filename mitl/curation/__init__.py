"""Adaptive curation: which pairs to judge next, how many positives remain, the budget.

Pure modules (no Django): `rankings` (every annotator's ranking of a query and their
reciprocal-rank fusion), `policies` (adjudication: bandit over annotators, depth on a
fused ranking, and `learned`, a logistic fusion refit every round), `design` (the random
sample of unjudged pairs, stratified by the fusion's predictions), `estimate` (the
inverse-probability estimate of the positives not found and its interval), `budget` (how
many HITs a round may buy). The ORM edge is `pipeline.curation`.
"""
