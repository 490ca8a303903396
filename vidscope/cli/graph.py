"""``vidscope graph VIDEO``: the entity graph of a video — top entities, relations, super-nodes —
and its export as GraphML or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from vidscope.cli.common import app, console, errors, find, safe, settings, timestamp

if TYPE_CHECKING:
    import networkx as nx

#: ``--export`` values that mean "this format, at the default place under the data dir".
EXPORT_FORMATS = {"graphml": ".graphml", "json": ".json"}


def _scalar_attributes(attrs: dict[str, Any]) -> dict[str, Any]:
    """GraphML holds scalars only: lists and structs become JSON text, embeddings and None go."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if key == "name_embedding" or value is None:
            continue
        out[key] = json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else value
    return out


def graph_document(graph: nx.MultiDiGraph, importance: dict[str, float]) -> dict[str, Any]:
    """The JSON export: nodes (with importance, without embeddings), edges and super-nodes."""
    nodes = []
    for node_id, attrs in graph.nodes(data=True):
        row = {k: v for k, v in attrs.items() if k != "name_embedding"}
        row["importance"] = round(importance.get(node_id, 0.0), 6)
        nodes.append(row)
    nodes.sort(key=lambda r: -r["importance"])
    edges = [
        {"edge_id": key, "source": s, "target": t, **attrs}
        for s, t, key, attrs in graph.edges(keys=True, data=True)
    ]
    edges.sort(key=lambda e: (e["t_start"], e["source"]))
    return {
        "video_id": graph.graph.get("video_id"),
        "nodes": nodes,
        "edges": edges,
        "supernodes": graph.graph.get("supernodes", []),
    }


def write_export(graph: nx.MultiDiGraph, importance: dict[str, float], path: Path) -> Path:
    """Write ``graph`` to ``path`` as GraphML (``.graphml``) or JSON (``.json``)."""
    import networkx as nx

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        path.write_text(
            json.dumps(graph_document(graph, importance), indent=2, ensure_ascii=False, default=str)
        )
        return path
    if path.suffix.lower() != ".graphml":
        raise ValueError(f"cannot tell the export format of {path}: use a .graphml or .json file name")
    out = nx.MultiDiGraph()
    for node_id, attrs in graph.nodes(data=True):
        out.add_node(node_id, **_scalar_attributes(attrs), importance=importance.get(node_id, 0.0))
    for s, t, key, attrs in graph.edges(keys=True, data=True):
        out.add_edge(s, t, key=key, **_scalar_attributes(attrs))
    out.graph["video_id"] = graph.graph.get("video_id", "")
    out.graph["supernodes"] = json.dumps(graph.graph.get("supernodes", []), default=str)
    nx.write_graphml(out, path)
    return path


def _export_path(export: str, data_dir: Path, video_id: str, file_name: str) -> Path:
    from vidscope.storage.files import managed_dir

    if export.lower() in EXPORT_FORMATS:
        stem = Path(file_name).stem or "video"
        return (
            managed_dir(data_dir, "exports") / f"{stem}-{video_id[:12]}-graph{EXPORT_FORMATS[export.lower()]}"
        )
    return Path(export).expanduser()


def _why_empty(store: Any, video_id: str) -> str:
    from vidscope.tasks.stage import ledger_rows

    row = ledger_rows(store, video_id).get("graph")
    if row is None:
        return "the graph stage has not run (run `vidscope ingest` with a chat model configured)"
    reason = row["error"] or json.loads(row["details_json"] or "{}").get("reason", "")
    return f"graph stage {row['status']}" + (f": {reason}" if reason else "")


def _failed_clips(store: Any, video_id: str) -> int:
    from vidscope.tasks.stage import ledger_rows

    row = ledger_rows(store, video_id).get("graph")
    if row is None or not row["details_json"]:
        return 0
    return int(json.loads(row["details_json"]).get("failed_clips", 0))


def _query_vector(query: str) -> list[float] | None:
    """``query`` embedded by the configured text embedder (None, with a warning, without one)."""
    from vidscope.models import registry

    embedder = registry.text_embedder(settings())
    if embedder is None:
        errors.print("[yellow]no text embedder configured: --query is ignored[/yellow]")
        return None
    return [float(x) for x in embedder.embed([query])[0]]


def _print_entities(ranked: list[dict[str, Any]], importance: dict[str, float]) -> None:
    """The entities in ``ranked`` order with their importance, kind, clips, screen time, actions."""
    table = Table(title="top entities")
    for column in ("importance", "entity", "kind", "clips", "seen", "actions"):
        table.add_column(column, overflow="fold")
    for n in ranked:
        table.add_row(
            f"{importance[n['node_id']]:.3f}",
            safe(n["name"]),
            safe(n.get("kind") or ""),
            str(n.get("clip_count") or 0),
            f"{n.get('appearance_seconds') or 0:.1f}s",
            safe("; ".join((n.get("actions") or [])[:3])),
        )
    console.print(table)


def _print_relations(
    edges: list[dict[str, Any]], names: dict[str, str], importance: dict[str, float], top: int
) -> None:
    """The ``top`` relations: between the most important entities first, then by time."""
    relations = sorted(
        edges,
        key=lambda e: (
            -(importance.get(e["source"], 0.0) + importance.get(e["target"], 0.0)),
            e["t_start"],
            safe(names[e["source"]]),
            safe(e["relation"]),
            safe(names[e["target"]]),
        ),
    )
    table = Table(title="relations")
    for column in ("when", "source", "relation", "target"):
        table.add_column(column, overflow="fold")
    for e in relations[:top]:
        table.add_row(
            f"{timestamp(e['t_start'])}–{timestamp(e['t_end'])}",
            safe(names[e["source"]]),
            safe(e["relation"]),
            safe(names[e["target"]]),
        )
    console.print(table)


@app.command()
def graph(
    video: Annotated[str, typer.Argument(help="Video id (prefix), path or file name.")],
    top: Annotated[int, typer.Option(help="Entities and relations to list.", min=1)] = 15,
    query: Annotated[
        str | None, typer.Option(help="Rank entities by relevance to this text too (query_rel).")
    ] = None,
    export: Annotated[
        str | None,
        typer.Option(
            help="Write the graph to PATH.graphml or PATH.json; the bare word 'graphml' or 'json' "
            "writes it under <data-dir>/exports/."
        ),
    ] = None,
) -> None:
    """The entity graph of a video: its most important entities, their relations, super-nodes."""
    from vidscope.agents.graph_importance import load_graph, node_importance

    store, record = find(video)
    entity_graph = load_graph(store, record.video_id)
    if entity_graph.number_of_nodes() == 0:
        errors.print(
            f"[yellow]{safe(record.file_name)} has no entity graph:[/yellow] "
            f"{safe(_why_empty(store, record.video_id))}"
        )
        raise typer.Exit(1)
    query_vector = _query_vector(query) if query else None
    nodes = [dict(attrs) for _, attrs in entity_graph.nodes(data=True)]
    edges = [{"source": s, "target": t, **attrs} for s, t, attrs in entity_graph.edges(data=True)]
    importance = node_importance(
        nodes, edges, store.count(store.clips, record.video_id), query_embedding=query_vector
    )
    ranked = sorted(nodes, key=lambda n: -importance[n["node_id"]])

    console.print(
        f"[bold]{safe(record.file_name)}[/bold]  {record.video_id[:12]}  "
        f"{len(nodes)} entities, {len(edges)} relations, "
        f"{len(entity_graph.graph['supernodes'])} super-nodes"
    )
    _print_entities(ranked[:top], importance)
    _print_relations(edges, {n["node_id"]: n["name"] for n in nodes}, importance, top)
    for s in entity_graph.graph["supernodes"]:
        spans = ", ".join(f"{timestamp(p['start'])}–{timestamp(p['end'])}" for p in s["spans"][:4])
        console.print(
            f"[bold]super-node {s['supernode_index']}[/bold] {safe(s['label'])} "
            f"({len(s['members'])} entities; {spans})"
        )
    failed = _failed_clips(store, record.video_id)
    if failed:
        errors.print(
            f"[yellow]{failed} clip(s) could not be extracted and are missing from the graph "
            f"(vidscope status {record.video_id[:12]})[/yellow]"
        )
    if export:
        path = _export_path(export, settings().data_dir, record.video_id, record.file_name)
        try:
            written = write_export(entity_graph, importance, path)
        except (ValueError, OSError) as exc:
            errors.print(f"[red]export failed:[/red] {safe(exc)}")
            raise typer.Exit(1) from exc
        console.print(f"exported to {safe(written)}")
