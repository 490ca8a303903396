"""Code named by import path (``"vidscope.module:name"``) is checked, since no type checker reads
strings (issue 43): every such string in the product imports; a strategy's run function has the
one strategy signature and its tool factories build registries; a query's Prefect flow takes the
same parameters as the work function it wraps; every stage entry is the stage it names."""

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
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
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
    assert {"vidscope/agents/strategies.py", "vidscope/tasks/stages.py", "vidscope/flows/answer.py"} <= places
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


def _run_query_calls() -> list[tuple[str, str, str]]:
    """(file, flow reference, work function name) of every ``run_query(kind, settings, flow,
    work, ...)`` call; a flow given as a local name is read from its assignment."""
    calls = []
    for path in _product_files():
        tree = ast.parse(path.read_text(), str(path))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            assigned = {
                target.id: node.value.value
                for node in ast.walk(function)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            for node in ast.walk(function):
                # flows.runs.run_query(kind, settings, flow, work, *args); the CLI's SQL helper
                # imported under the same name takes two arguments.
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "run_query"
                    and len(node.args) >= 4
                ):
                    flow, work = node.args[2], node.args[3]
                    reference = flow.value if isinstance(flow, ast.Constant) else assigned[flow.id]
                    assert isinstance(work, ast.Name), ast.dump(work)
                    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
                    calls.append((module, reference, work.id))
    return calls


def test_each_query_flow_takes_what_its_work_function_takes() -> None:
    calls = _run_query_calls()
    assert len(calls) >= 5  # ask, ask-library, compare, search, search-moments
    for module, reference, work_name in calls:
        flow = _resolve(reference)
        work = getattr(importlib.import_module(module), work_name)
        wrapped = getattr(flow, "fn", flow)  # a Prefect flow keeps its function as .fn
        expected = list(inspect.signature(work).parameters)
        assert list(inspect.signature(wrapped).parameters) == expected, f"{reference} vs {module}.{work_name}"


def test_every_stage_entry_is_the_stage_it_names() -> None:
    from vidscope.tasks.stages import STAGES, stages

    declared = stages()  # checks each entry against its declaration's name and order
    assert [s.name for s in declared] == [name for name, _ in STAGES]
