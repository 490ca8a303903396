"""Where an agent's tool calls are answered: the real store and models, or a script simulator.

One setting decides: ``[agent] environment = "real" | "sim"`` (with ``[agent] script`` naming the
script JSON for ``sim``). The tool names and specs are the same in both, so a strategy (its prompt,
loop and allow-lists) runs unchanged; only the context and the registries it is handed differ.
"""

from __future__ import annotations

from vidscope.agents.tools import AgentConfig, ToolContext, ToolRegistry
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
    optionally rewords the simulator's answers). ``store`` may be None only for ``sim``."""
    if is_simulated(config):
        from vidscope.agents.simulator.script import load_script
        from vidscope.agents.simulator.simulator import ScriptSimulator, SimContext

        assert config.script is not None  # AgentSettings refuses sim without a script
        simulator = ScriptSimulator(
            load_script(config.script),
            clip_seconds=settings.ingest.clip_seconds,
            phraser=phraser,
            temperature=config.temperature,
        )
        return SimContext(settings, simulator, chat=chat, config=config, registry=dvd_tools(config))
    if store is None:
        raise ValueError("the real environment needs the store")
    return ToolContext(settings, store, chat=chat, config=config, registry=dvd_tools(config))


def dvd_tools(config: AgentConfig) -> ToolRegistry:
    """The Deep-Video-Discovery agent's allow-list in ``config``'s environment."""
    if is_simulated(config):
        from vidscope.agents.simulator.tools import sim_dvd_registry

        return sim_dvd_registry()
    from vidscope.agents.tools_dvd import dvd_registry

    return dvd_registry()


def avi_tools(config: AgentConfig) -> tuple[ToolRegistry, ToolRegistry]:
    """The AVI agent's (retrieve, perceive) allow-lists in ``config``'s environment."""
    if is_simulated(config):
        from vidscope.agents.simulator.tools import sim_avi_registries

        return sim_avi_registries()
    from vidscope.agents.avi import avi_registries

    return avi_registries()


def sama_tools(config: AgentConfig) -> ToolRegistry:
    """SAMA's allow-list in ``config``'s environment."""
    if is_simulated(config):
        from vidscope.agents.simulator.tools_sama import sim_sama_registry

        return sim_sama_registry()
    from vidscope.agents.sama.agent import sama_registry

    return sama_registry()


def cvr_tools(config: AgentConfig) -> ToolRegistry:
    """AgentCVR's master-agent actions in ``config``'s environment."""
    if is_simulated(config):
        from vidscope.agents.simulator.tools_cvr import sim_cvr_agent_registry

        return sim_cvr_agent_registry()
    from vidscope.agents.cvr.agent import cvr_registry

    return cvr_registry()
