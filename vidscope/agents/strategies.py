"""The answering strategies, each declared once: name, scopes, tools, planner, help and run.

A :class:`Strategy` is everything the rest of vidscope needs to know about one way of answering:
``ask``, ``compare`` and ``ask --library`` offer the strategies of their :data:`Scope`; ``eval``,
the simulator's rollouts and GRPO training offer all of them; the CLI, the HTTP API, the MCP
server and the web page read the names and help from here. Every strategy answers through one
signature, :data:`StrategyRun` — ``run(ctx, request) -> Answer`` — and :func:`answer` is the one
place that sets up a run: the strategy's tools for the context's environment (real or
simulated), and the extractive answerer when no planner is configured.

Adding a strategy is two places: its package under ``agents/`` (a function with the
:data:`StrategyRun` signature, over the shared runtime in :mod:`vidscope.agents.runtime`, and any
tools of its own) and one :func:`register` call below (``docs/architecture.md`` walks through an
example).

The run function and the tool factories are named by import path (``"module:function"``) so that
reading the names and help — every CLI start does — imports no strategy: SAMA's and AgentCVR's
perception tools load models and libraries a DVD answer never needs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

if TYPE_CHECKING:
    from vidscope.agents.runtime import Answer, StepCallback, TraceStep
    from vidscope.agents.tools import ToolContext, ToolRegistry

#: What a question is about: one video (``ask``), several (``compare``), or the whole library
#: (``ask --library``).
Scope = Literal["video", "videos", "library"]
SCOPES: tuple[Scope, ...] = get_args(Scope)


@dataclass(frozen=True)
class StrategyRequest:
    """One question for a strategy: what every strategy reads, whoever asks (a command, an
    evaluation item, a rollout sample)."""

    question: str
    video_ids: Sequence[str]
    scope: Scope = "video"
    options: Sequence[str] | None = None
    #: Data shown before the question (an evaluation item's quoted subtitles); not part of the
    #: question a search runs with.
    context: str = ""
    #: Parts of a strategy switched off for an ablation (:class:`Ablation` parts: SAMA's ``skills``
    #: and ``conflict_check``, AVI's ``review``, a tool's name); a strategy ignores names it does
    #: not know.
    ablations: frozenset[str] = field(default_factory=frozenset)
    on_step: StepCallback | None = None
    #: The benchmark task the question belongs to (AgentCVR's CrossVid task codes: BU, FSA, ...),
    #: for strategies with a prompt per task; others ignore it.
    task: str | None = None
    #: The question takes several option letters (CrossVid BU, "1-3 correct choices"): its choice
    #: is the set of letters, not one.
    multi_select: bool = False

    @property
    def prompt(self) -> str:
        """The question as the planner is asked it: the context (if any), then the question."""
        return f"{self.context}\n\n{self.question}" if self.context else self.question


#: The one signature every strategy answers with. ``ctx.registry`` holds the strategy's tools.
StrategyRun = Callable[["ToolContext", StrategyRequest], "Answer"]
#: A function building a strategy's tool allow-list.
ToolsFactory = Callable[[], "ToolRegistry"]

T = TypeVar("T")


def load(ref: Callable[..., T] | str) -> Callable[..., T]:
    """The function ``ref`` names (``"module:function"``), or ``ref`` itself when it is one."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    loaded: Callable[..., T] = getattr(importlib.import_module(module), name)
    return loaded


@dataclass(frozen=True)
class Ablation:
    """A part of a strategy that an evaluation can switch off (``vidscope eval --ablation``).

    Its name on the command line is ``<strategy>:no-<part>`` (``avi:no-review``). The part goes into
    :attr:`StrategyRequest.ablations` for the run function to honour, and the ``tools`` it lists
    are taken out of the strategy's allow-list before the run, so the model is never offered them.
    """

    part: str
    help: str
    tools: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Strategy:
    """One way of answering, declared once."""

    name: str
    #: How answers and help name it ("Deep Video Discovery", "AVI").
    title: str
    help: str
    #: The commands that offer it; ``eval`` offers every strategy, rollouts every one that
    #: needs a planner and has simulated tools.
    scopes: frozenset[Scope]
    #: Its run function, or that function's import path ``"package.module:function"``.
    run: StrategyRun | str
    #: Its tools over the real store, and answered by the script simulator (factories, or their
    #: import paths); ``None``: it does not run in that environment. Library questions use the
    #: library's tools instead.
    tools: ToolsFactory | str | None = None
    sim_tools: ToolsFactory | str | None = None
    #: Whether it needs a planner (chat) model; without one the extractive answerer stands in.
    needs_planner: bool = True
    #: The parts an evaluation can switch off, for the paper's ablations.
    ablations: tuple[Ablation, ...] = ()

    def tool_registry(self, *, simulated: bool) -> ToolRegistry:
        """The strategy's tools in the real or the simulated environment."""
        factory = self.sim_tools if simulated else self.tools
        if factory is None:
            where = "the simulator" if simulated else "the real environment"
            raise ValueError(f"the {self.name} strategy has no tools in {where}")
        return load(factory)()


#: Every strategy by name, in registration order (the first of a scope is its default).
STRATEGIES: dict[str, Strategy] = {}
#: The answerer without a planner (the best evidence, cited); it stands in for the others then.
EXTRACTIVE = "extractive"


def register(strategy: Strategy) -> Strategy:
    """Make ``strategy`` available everywhere strategies are offered (the same name replaces)."""
    STRATEGIES[strategy.name] = strategy
    return strategy


def names(scope: Scope | None = None) -> tuple[str, ...]:
    """The strategies offered for ``scope`` (all of them without one), in registration order."""
    return tuple(s.name for s in STRATEGIES.values() if scope is None or scope in s.scopes)


def default(scope: Scope) -> str:
    """The strategy a command of ``scope`` uses when none is named: the first registered."""
    return names(scope)[0]


def get(name: str, scope: Scope | None = None) -> Strategy:
    """The strategy ``name`` (offered for ``scope``, when given); a one-line ``ValueError`` listing
    the choices otherwise."""
    known = names(scope)
    if name not in known:
        raise ValueError(f"unknown agent {name!r}; choose one of: {', '.join(known)}")
    return STRATEGIES[name]


def help_text(scope: Scope | None = None) -> str:
    """``name: help`` of each strategy of ``scope``, for option help and API descriptions."""
    return "; ".join(f"{s.name}: {s.help}" for s in STRATEGIES.values() if scope is None or scope in s.scopes)


def ablation_name(strategy: str, part: str) -> str:
    """How the command line names switching ``part`` of ``strategy`` off: ``avi:no-review``."""
    return f"{strategy}:no-{part.replace('_', '-')}"


def ablation_names(strategy: str | None = None) -> tuple[str, ...]:
    """Every ablation's command-line name (of ``strategy``, when given)."""
    return tuple(
        ablation_name(s.name, a.part)
        for s in STRATEGIES.values()
        if strategy is None or s.name == strategy
        for a in s.ablations
    )


def ablation_help() -> str:
    """``name: help`` of every ablation, for ``eval --help``."""
    return "; ".join(
        f"{ablation_name(s.name, a.part)}: {a.help}" for s in STRATEGIES.values() for a in s.ablations
    )


def parse_ablations(strategy: str, names: Sequence[str]) -> tuple[str, ...]:
    """The ablations ``names`` (repeated or comma-separated, ``-`` or ``_`` alike) of ``strategy``,
    in canonical form, without repeats; a one-line ``ValueError`` for a name that is not one of
    the strategy's."""
    known = ablation_names(strategy)
    found: dict[str, None] = {}
    for raw in names:
        for name in (n.strip() for n in raw.split(",")):
            if not name:
                continue
            head, colon, tail = name.partition(":")
            canonical = f"{head.strip().lower()}{colon}{tail.strip().lower().replace('_', '-')}"
            if canonical not in known:
                offered = ", ".join(known) or "none"
                raise ValueError(
                    f"unknown ablation {name[:60]!r} for agent {strategy!r}; its ablations: {offered}"
                )
            found[canonical] = None
    return tuple(found)


def ablation_parts(names: Sequence[str]) -> frozenset[str]:
    """The parts (``review``, ``frame_inspect``) that canonical ablation names switch off."""
    return frozenset(n.partition(":no-")[2].replace("-", "_") for n in names if ":no-" in n)


def _without(registry: ToolRegistry, strategy: Strategy, parts: frozenset[str]) -> ToolRegistry:
    """``registry`` less the tools of the strategy's ablations named in ``parts``."""
    dropped = {t for a in strategy.ablations if a.part in parts for t in a.tools}
    if not dropped:
        return registry
    from vidscope.agents.tools import ToolRegistry

    return ToolRegistry(registry.get(n) for n in registry.names if n not in dropped)


def in_simulator(ctx: ToolContext) -> bool:
    """Whether ``ctx`` is the script simulator's context (its tools are the simulated ones)."""
    # A simulated context exists only once its module is loaded: a real ask does not load it.
    simulator = sys.modules.get("vidscope.agents.simulator.simulator")
    return simulator is not None and isinstance(ctx, simulator.SimContext)


def answer(strategy: Strategy | str, ctx: ToolContext, request: StrategyRequest) -> Answer:
    """``request`` answered by ``strategy`` in ``ctx``.

    The one place a run is set up: without a planner (``ctx.chat`` is None) a strategy that needs
    one gives way to the extractive answerer (callers say so in their result's note); the tools
    are the library's for a library question, else the strategy's own for the context's
    environment, less the tools of the request's ablations; then the strategy's run function
    answers. A run that ends without an answer in words (``Answer.no_answer``: nothing stated, or
    only data) gets the floor under every agent: the extractive answer to the same question stands
    in, marked ``fallback`` (:func:`extractive_floor`), so a weak model never answers worse than
    no model. The simulator keeps the agent's own ending (training scores the policy, not the
    floor).
    """
    chosen = get(strategy) if isinstance(strategy, str) else strategy
    if chosen.needs_planner and ctx.chat is None:
        chosen = STRATEGIES[EXTRACTIVE]
    _use_tools(ctx, chosen, request)
    reached = load(chosen.run)(ctx, request)
    if reached.no_answer and chosen.needs_planner and not in_simulator(ctx):
        return extractive_floor(ctx, request, reached)
    return reached


def _use_tools(ctx: ToolContext, chosen: Strategy, request: StrategyRequest) -> None:
    """Give ``ctx`` the tools ``chosen`` answers ``request`` with."""
    if request.scope == "library":
        from vidscope.agents.tools_library import library_registry

        ctx.registry = library_registry()
    else:
        ctx.registry = _without(chosen.tool_registry(simulated=in_simulator(ctx)), chosen, request.ablations)


def extractive_floor(ctx: ToolContext, request: StrategyRequest, reached: Answer) -> Answer:
    """The extractive answer to ``request`` in place of ``reached``, an agent's run that ended
    without an answer in words: the moments and their words, cited, after the agent's trace (its
    steps numbered on), marked ``fallback``, ``forced`` and ``extractive``."""
    from dataclasses import replace

    from vidscope.agents import extractive

    floor = STRATEGIES[EXTRACTIVE]
    offset = len(reached.trace)
    forward = request.on_step

    def shifted(step: TraceStep) -> None:
        step.index += offset
        if forward is not None:
            forward(step)

    _use_tools(ctx, floor, request)
    found = load(floor.run)(ctx, replace(request, on_step=shifted))
    said = found.answer.removeprefix(extractive.PREFIX).strip()
    usage = reached.usage.model_copy()
    usage.add(found.usage)
    return found.model_copy(
        update={
            "answer": f"{reached.answer} {extractive.FALLBACK_PREFIX}\n{said}",
            "trace": [*reached.trace, *found.trace],
            "usage": usage,
            "forced": True,
            "fallback": True,
        }
    )


# ============================================================================ the strategies
# Order matters: the first strategy of a scope is that scope's default.

register(
    Strategy(
        "dvd",
        "Deep Video Discovery",
        "Deep-Video-Discovery agent, one tool loop",
        frozenset({"video", "library"}),
        run="vidscope.agents.runtime:run_tool_loop",
        tools="vidscope.agents.dvd.tools:dvd_registry",
        sim_tools="vidscope.agents.simulator.tools:sim_dvd_registry",
        ablations=tuple(
            Ablation(tool, f"DVD without its {tool} tool", frozenset({tool}))
            for tool in ("global_browse", "clip_search", "frame_inspect")
        ),
    )
)
register(
    Strategy(
        "avi",
        "AVI",
        "three phases (retrieve, perceive, review); 'when' questions get a (start, end) interval",
        frozenset({"video"}),
        run="vidscope.agents.avi.agent:run",
        tools="vidscope.agents.avi.tools:avi_registry",
        sim_tools="vidscope.agents.simulator.tools:sim_avi_registry",
        ablations=(
            Ablation("review", "AVI without the Review phase: Perceive's findings answer directly"),
            Ablation(
                "graph", "AVI without the entity graph (no graph_retrieve)", frozenset({"graph_retrieve"})
            ),
        ),
    )
)
register(
    Strategy(
        "sama",
        "SAMA",
        "skill-guided planner with conflict checks and evidence memory",
        frozenset({"videos"}),
        run="vidscope.agents.sama.agent:run",
        tools="vidscope.agents.sama.agent:sama_registry",
        sim_tools="vidscope.agents.simulator.tools_sama:sim_sama_registry",
        ablations=(
            Ablation("skills", "SAMA without its skills (no skill guidance in the plan)"),
            Ablation("conflict_check", "SAMA without conflict checks (facts kept as they come)"),
            Ablation("chapters", "SAMA without the chapter overview of each video"),
        ),
    )
)
register(
    Strategy(
        "cvr",
        "AgentCVR",
        "master agent with parallel visual and audio sub-agents",
        frozenset({"videos"}),
        run="vidscope.agents.cvr.agent:run",
        tools="vidscope.agents.cvr.master:cvr_registry",
        sim_tools="vidscope.agents.simulator.tools_cvr:sim_cvr_agent_registry",
        ablations=(
            Ablation("audio", "AgentCVR visual-only: no audio sub-agent", frozenset({"audio_query"})),
            Ablation("visual", "AgentCVR audio-only: no visual sub-agent", frozenset({"visual_query"})),
            Ablation("multi_turn", "AgentCVR single-pass: one round of queries, then the answer"),
        ),
    )
)
register(
    Strategy(
        "actions",
        "AgentCVR actions",
        "one tool loop over AgentCVR's actions (visual_query, audio_query, clip_search, finish); "
        "native tool calls, simulator only (GRPO trains cvr)",
        frozenset(),
        run="vidscope.agents.runtime:run_tool_loop",
        sim_tools="vidscope.agents.simulator.tools:sim_cvr_registry",
    )
)
register(
    Strategy(
        EXTRACTIVE,
        "extractive",
        "no chat model: the best evidence clips answer",
        frozenset(),
        run="vidscope.agents.extractive:run",
        tools="vidscope.agents.dvd.tools:dvd_registry",
        sim_tools="vidscope.agents.simulator.tools:sim_dvd_registry",
        needs_planner=False,
    )
)
