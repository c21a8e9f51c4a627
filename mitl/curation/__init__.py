"""Adaptive curation: which pairs to judge next, how many positives remain, the budget.

Pure modules (no Django): `policies` (adjudication: bandit over annotators, depth on a
fused ranking), `estimate` (stratified random sample of unjudged pairs and the
inverse-probability estimate of the positives not found), `budget` (how many HITs a round
may buy). The ORM edge is `pipeline.curation`.
"""
