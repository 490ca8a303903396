"""``GET /api/strategies``: the answering strategies, as :mod:`vidscope.agents.strategies` declares
them (the page fills its agent menus from this list)."""

from __future__ import annotations

from vidscope.agents import strategies
from vidscope.api.models import StrategyOut
from vidscope.api.routes import guarded_router

router = guarded_router()


@router.get("/strategies", response_model=list[StrategyOut], tags=["questions"])
def list_strategies() -> list[StrategyOut]:
    """Every registered strategy: its name, help, scopes (video, videos, library) and defaults."""
    out = []
    for s in strategies.STRATEGIES.values():
        scopes = sorted(s.scopes, key=strategies.SCOPES.index)
        defaults = [scope for scope in scopes if strategies.default(scope) == s.name]
        out.append(
            StrategyOut(
                name=s.name,
                title=s.title,
                help=s.help,
                scopes=scopes,
                needs_planner=s.needs_planner,
                default_for=defaults,
            )
        )
    return out
