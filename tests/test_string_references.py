"""Code named by import path (``"vidscope.module:name"``) is checked, since no type checker reads
strings (issue 43): every such string in the product imports; a strategy's run function has the
one strategy signature and its tool factories build registries; a query's Prefect flow runs its
work function itself and is found where a deployment's entry point looks; every stage entry is the
stage it names."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from vidscope.agents import strategies
from vidscope.agents.answers import Answer
from vidscope.agents.strategies import StrategyRequest
from vidscope.agents.tools import ToolContext, ToolRegistry

REPO = Path(__file__).resolve().parents[1]
#: Where product code lives: every layer is a real folder of the package (the top-level links,
#: ``agents -> vidscope/agents``, are the same files).
PRODUCT = REPO / "vidscope"
REFERENCE = re.compile(r"vidscope(\.[a-z_][a-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*")


def _product_files() -> Iterator[Path]:
    yield from sorted(PRODUCT.rglob("*.py"))


def _string_references() -> list[tuple[str, str]]:
    found = []
    for path in _product_files():
        source = path.read_text()
        if not REFERENCE.search(source):  # most files name none: parse only those that may
            continue
        for node in ast.walk(ast.parse(source, str(path))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and REFERENCE.fullmatch(node.value)
            ):
                found.append((str(path.relative_to(REPO)), node.value))
    return found


def _resolve(reference: str) -> Any:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


REFERENCES = _string_references()


def test_the_references_are_found() -> None:
    # The registries name their code this way; a scan that finds none is broken, not clean.
    places = {place for place, _ in REFERENCES}
    registries = ("agents/strategies.py", "tasks/stages.py", "deployments/deploy.py")
    assert {f"vidscope/{name}" for name in registries} <= places
    assert len(REFERENCES) >= 30


@pytest.mark.parametrize("place, reference", REFERENCES, ids=[r for _, r in REFERENCES])
def test_every_reference_imports(place: str, reference: str) -> None:
    assert _resolve(reference) is not None, f"{place}: {reference}"


def _hints(function: Any) -> tuple[list[Any], Any]:
    hints = get_type_hints(function)
    parameters = [hints.get(name) for name in inspect.signature(function).parameters]
    return parameters, hints.get("return")


@pytest.mark.parametrize("name", list(strategies.STRATEGIES))
def test_each_strategy_runs_with_the_one_strategy_signature(name: str) -> None:
    strategy = strategies.get(name)
    run = strategies.load(strategy.run)
    parameters, returned = _hints(run)
    # StrategyRun = Callable[[ToolContext, StrategyRequest], Answer]
    assert parameters == [ToolContext, StrategyRequest], f"{name}: run{inspect.signature(run)}"
    assert returned is Answer, f"{name}: run returns {returned}"
    for factory in (strategy.tools, strategy.sim_tools):
        if factory is not None:
            built = strategies.load(factory)()
            assert isinstance(built, ToolRegistry), f"{name}: {factory} built {type(built)}"


#: The modules of the query kinds: each holds its work, its flows and its entry points.
QUERY_MODULES = ("vidscope.flows.ask", "vidscope.flows.search", "vidscope.flows.compare")


def test_each_query_flow_runs_its_work_and_is_where_a_deployment_looks() -> None:
    from prefect import Flow
    from prefect.utilities.importtools import import_object

    from vidscope.flows.runs import QueryFlow

    declared = [
        (module, value)
        for module in map(importlib.import_module, QUERY_MODULES)
        for value in vars(module).values()
        if isinstance(value, QueryFlow)
    ]
    names = sorted(q.name for _, q in declared)
    assert names == ["ask", "ask-library", "compare", "search", "search-moments"]
    for module, query in declared:
        flow = getattr(module, query.attribute)
        # The flow is the work function itself, so their parameters cannot drift apart.
        assert isinstance(flow, Flow) and flow.fn is query.work and flow.name == query.name
        # A module-path deployment records "<module>.<name>"; a worker loads the flow back from it.
        assert import_object(f"{flow.__module__}.{flow.__name__}") is flow, query.name
    from vidscope.deployments.deploy import DEPLOYMENTS

    for spec in DEPLOYMENTS:
        assert isinstance(_resolve(spec.flow), Flow), spec.flow


def test_every_stage_entry_is_the_stage_it_names() -> None:
    from vidscope.tasks.stages import STAGES, stages

    declared = stages()  # checks each entry against its declaration's name and order
    assert [s.name for s in declared] == [name for name, _ in STAGES]
