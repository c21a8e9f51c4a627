"""The floors hold: imports run only downward, no cycle, none hidden inside a function.

mitl/ (pure) < annotation/ (models, crowd work) < pipeline/ (stage edge, tasks, commands)
< api/ and frontend/ (pages); config/ wires them together (docs/architecture.md).
"""

from __future__ import annotations

import pytest

from tests.import_graph import ImportEdge, cycles, import_edges, module_files, third_party_imports

FLOORS = {"mitl": 0, "annotation": 1, "pipeline": 2, "api": 3, "frontend": 3}
# The Celery app object: product-free, so any floor may name it (the API's health check does).
SHARED_BASE = {"config.celery"}
# Libraries the pure floor may use: the standard library and numeric/text packages, no web
# framework, no ORM, no task queue.
FRAMEWORKS = {"django", "rest_framework", "celery", "drf_spectacular", "django_filters", "boto3"}
# Libraries too heavy to load with the web process (DESIGN.md): a module that loads one may
# be imported inside the function that needs it.
HEAVY = {"torch", "torchvision", "open_clip", "sentence_transformers", "transformers"}
HEAVY |= {"matplotlib", "nltk", "pycocoevalcap", "sklearn", "scipy"}


@pytest.fixture(scope="module")
def edges() -> list[ImportEdge]:
    return import_edges()


def _floor(module: str) -> int | None:
    return FLOORS.get(module.split(".")[0])


def _describe(edge: ImportEdge) -> str:
    where = "inside a function" if edge.local else "at module level"
    return f"{edge.source} (line {edge.line}) imports {edge.target} {where}"


def test_imports_only_run_downward(edges):
    upward = [
        _describe(edge)
        for edge in edges
        if edge.target not in SHARED_BASE
        and None not in (_floor(edge.source), _floor(edge.target))
        and _floor(edge.target) > _floor(edge.source)
    ]
    assert upward == []


def test_the_pure_floor_loads_no_framework():
    pure = [name for name in module_files() if name.split(".")[0] == "mitl"]
    framed = {name: sorted(third_party_imports(name) & FRAMEWORKS) for name in pure}
    assert {name: libs for name, libs in framed.items() if libs} == {}


def test_no_module_cycle_even_through_imports_inside_functions(edges):
    assert cycles(edges) == []


def _loads_heavy_library(module: str, edges: list[ImportEdge], seen: set[str]) -> bool:
    """Whether loading `module` loads a heavy library, itself or through its imports."""
    if module in seen:
        return False
    seen.add(module)
    if third_party_imports(module) & HEAVY:
        return True
    loaded = {edge.target for edge in edges if edge.source == module and not edge.local}
    return any(_loads_heavy_library(target, edges, seen) for target in loaded)


def test_a_product_import_inside_a_function_only_defers_a_heavy_library(edges):
    # Django's AppConfig.ready() is where checks are registered, once the models are loaded.
    deferred = [edge for edge in edges if edge.local and not edge.source.endswith(".apps")]
    needless = [
        _describe(edge) for edge in deferred if not _loads_heavy_library(edge.target, edges, set())
    ]
    assert needless == []


def test_the_graph_sees_a_cycle_and_an_upward_import():
    """The checks above can fail: a made-up pair of edges is caught by both."""
    made_up = [
        ImportEdge("annotation.a", "pipeline.b", 1, local=True),
        ImportEdge("pipeline.b", "annotation.a", 1, local=False),
    ]
    assert cycles(made_up) == [["annotation.a", "pipeline.b"]]
    assert _floor("pipeline.b") > _floor("annotation.a")
