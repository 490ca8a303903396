"""Print the house as the code draws it: vidscope's layers and the imports between them.

Reads the layers from ``.importlinter`` (the contract CI checks) and builds the import graph with
grimp, the library import-linter itself uses, so the arrows are the ones the contract is checked
against. Each layer is a folder of ``vidscope/`` (linked from the top of the repository); the script
prints how many modules grimp found per layer, which shows that it sees them all.

    PYTHONPATH=$PWD .venv/bin/python scripts/layers.py

An arrow ``a ──▶ b  (n)`` means n modules of layer a import from layer b (directly). Every arrow
points down the list; an upward one would be printed with ``UPWARD`` (and import-linter would fail).
"""

from __future__ import annotations

import configparser
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def layers() -> list[str]:
    """The layers of the contract, top first."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config["importlinter:contract:layers"]["layers"].split()


def layer_of(module: str, names: list[str]) -> str | None:
    """The layer ``module`` belongs to (the longest layer name it sits under), if any."""
    found = [n for n in names if module == n or module.startswith(n + ".")]
    return max(found, key=len) if found else None


def report() -> list[str]:
    """Each layer's module count, then every arrow between layers, as lines."""
    names = layers()
    graph = grimp.build_graph("vidscope")
    modules: dict[str, list[str]] = {n: [] for n in names}
    for module in graph.modules:
        layer = layer_of(module, names)
        if layer is not None:
            modules[layer].append(module)
    arrows: dict[tuple[str, str], set[str]] = {}
    for importer_layer, members in modules.items():
        for importer in members:
            for imported in graph.find_modules_directly_imported_by(importer):
                target = layer_of(imported, names)
                if target is not None and target != importer_layer:
                    arrows.setdefault((importer_layer, target), set()).add(importer)

    def short(name: str) -> str:
        return name.removeprefix("vidscope.")

    width = max(len(short(n)) for n in names)
    lines = ["layers, top first (modules grimp found):"]
    lines += [f"  {short(n):<{width}}  {len(modules[n]):>3}" for n in names]
    lines += ["", "imports between layers (number of importing modules):"]
    for name in names:
        for target in names:
            importers = arrows.get((name, target))
            if importers:
                upward = "  UPWARD" if names.index(target) < names.index(name) else ""
                lines.append(
                    f"  {short(name):<{width}} ──▶ {short(target):<{width}} ({len(importers)}){upward}"
                )
    return lines


def main() -> None:
    """Print the report."""
    print("\n".join(report()))


if __name__ == "__main__":
    main()
