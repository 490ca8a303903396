"""The house drawn from the real tree: grimp (import-linter's graph) sees every layer through the
package's folders, and every arrow between layers points down."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "layers.py"


def test_the_layer_graph_sees_every_layer_and_only_downward_arrows() -> None:
    spec = importlib.util.spec_from_file_location("layers_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    lines = script.report()
    counts = {line.split()[0]: int(line.split()[1]) for line in lines[1 : lines.index("")]}
    assert set(counts) >= {
        "cli",
        "api",
        "flows",
        "agents",
        "evaluation",
        "tasks",
        "models",
        "storage",
        "core",
    }
    assert all(n > 0 for n in counts.values()), counts  # every layer's folder is walked
    arrows = lines[lines.index("") + 2 :]
    assert "  flows       ──▶ agents      " in "\n".join(arrows)
    assert not [a for a in arrows if "UPWARD" in a]
