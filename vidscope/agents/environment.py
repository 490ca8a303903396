"""Where an agent's tool calls are answered: the real store and models, or a script simulator.

One setting decides: ``[agent] environment = "real" | "sim"`` (with ``[agent] script`` naming the
script JSON for ``sim``). The tool names and specs are the same in both, so a strategy (its prompt,
loop and allow-lists) runs unchanged; only the context and the registries it is handed differ
(each strategy names both, :class:`~vidscope.agents.strategies.Strategy`).
"""

from __future__ import annotations

from vidscope.agents.tools import AgentConfig, ToolContext
from vidscope.core.settings import Settings
from vidscope.models.protocols.chat import ChatModel
from vidscope.storage.store import Store


def is_simulated(config: AgentConfig) -> bool:
    """Whether ``config`` asks for the script simulator."""
    return config.environment == "sim"


def tool_context(
    settings: Settings,
    store: Store | None,
    *,
    chat: ChatModel | None,
    config: AgentConfig,
    phraser: ChatModel | None = None,
) -> ToolContext:
    """The context tools run in: over ``store`` (real) or over ``config.script`` (sim; ``phraser``
    optionally rewords the simulator's answers; with ``sim_phrasing`` it is the vlm, else the chat,
    else the planner model). ``store`` may be None only for ``sim``. It has no
    tools yet: :func:`~vidscope.agents.strategies.answer` gives it the answering strategy's."""
    if is_simulated(config):
        from vidscope.agents.simulator.script import load_script
        from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext

        assert config.script is not None  # AgentSettings refuses sim without a script
        if phraser is None and config.sim_phrasing:
            from vidscope.models import registry

            # Phrasing is text in, text out: a text-only setup (only ``models.planner``) phrases too.
            phraser = registry.vision_model(settings) or registry.planner_model(settings)
        simulator = ScriptSimulator(
            load_script(config.script),
            clip_seconds=settings.ingest.clip_seconds,
            phraser=phraser,
            temperature=config.temperature,
        )
        return SimContext(settings, simulator, chat=chat, config=config)
    if store is None:
        raise ValueError("the real environment needs the store")
    return ToolContext(settings, store, chat=chat, config=config)
