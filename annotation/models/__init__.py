"""The data model, split by concept: datasets, batches (machine side), crowd work, results."""

from .batch import (
    Batch,
    BatchStageProgress,
    BatchState,
    Candidate,
    Direction,
    Embedding,
    MachineAnnotator,
    Modality,
    Proposal,
    Query,
    Ranking,
)
from .dataset import Caption, Dataset, Image, PositivePair, PositiveSet, PositiveSource
from .results import Release, Verdict
from .work import (
    HIT,
    Assignment,
    AssignmentStatus,
    HITItem,
    ItemRole,
    Judgement,
    Worker,
    WorkerSource,
)

__all__ = [
    "HIT",
    "Assignment",
    "AssignmentStatus",
    "Batch",
    "BatchStageProgress",
    "BatchState",
    "Candidate",
    "Caption",
    "Dataset",
    "Direction",
    "Embedding",
    "HITItem",
    "Image",
    "ItemRole",
    "Judgement",
    "MachineAnnotator",
    "Modality",
    "PositivePair",
    "PositiveSet",
    "PositiveSource",
    "Proposal",
    "Query",
    "Ranking",
    "Release",
    "Verdict",
    "Worker",
    "WorkerSource",
]
