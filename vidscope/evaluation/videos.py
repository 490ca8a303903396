"""Find a benchmark's videos under a user-given root, by the names the benchmark uses.

Releases lay videos out differently (MLVU one folder per task, Video-MME ``data/``, ActivityNet
files with or without their ``v_`` prefix), so the root is indexed once, recursively, by file name
and by stem; a video is found by its name as given, or by its stem with a common video extension.
Videos that are not found are listed, never raised: a partial download still evaluates what it has.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vidscope.evaluation.items import BenchmarkItem, unusable

#: Extensions tried when a benchmark names a video by id only, in order of preference.
VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", ".mpg", ".mpeg")


@dataclass
class VideoIndex:
    """Every file under ``root`` by name and (for video files) by stem; the first found wins."""

    root: Path
    by_name: dict[str, Path] = field(default_factory=dict)
    by_stem: dict[str, Path] = field(default_factory=dict)

    @classmethod
    def build(cls, root: Path | str) -> VideoIndex:
        """Index ``root`` recursively (sorted, so which duplicate wins does not depend on the disk)."""
        index = cls(Path(root).expanduser().resolve())
        if not index.root.is_dir():
            return index
        for path in sorted(p for p in index.root.rglob("*") if p.is_file()):
            index.by_name.setdefault(path.name, path)
            if path.suffix.lower() in VIDEO_EXTENSIONS:
                # Prefer the earlier extension of VIDEO_EXTENSIONS when a stem has several files.
                known = index.by_stem.get(path.stem)
                if known is None or _rank(path) < _rank(known):
                    index.by_stem[path.stem] = path
        return index

    def find(self, name: str, aliases: Sequence[str] = ()) -> Path | None:
        """The file for a benchmark's video ``name`` (or one of its ``aliases``), or None."""
        for candidate in (name, *aliases):
            base = Path(candidate).name  # annotation paths like "videos/x.mp4" name the file last
            if base in self.by_name and Path(base).suffix.lower() in VIDEO_EXTENSIONS:
                return self.by_name[base]
            stem = Path(base).stem if Path(base).suffix.lower() in VIDEO_EXTENSIONS else base
            if stem in self.by_stem:
                return self.by_stem[stem]
        return None

    def find_file(self, name: str) -> Path | None:
        """Any file by exact name (subtitles, for instance)."""
        return self.by_name.get(Path(name).name)


def _rank(path: Path) -> int:
    return VIDEO_EXTENSIONS.index(path.suffix.lower())


#: A benchmark's other names for a video (ActivityNet: ``v_abc`` is also ``abc``).
Aliases = Callable[[str], Sequence[str]]


def no_aliases(name: str) -> Sequence[str]:
    """The default: a video has only the name the benchmark gives it."""
    return ()


@dataclass
class VideoLookup:
    """Where each needed video is, and which are missing (by the benchmark's names)."""

    found: dict[str, Path]
    missing: list[str]
    missing_subtitles: list[str] = field(default_factory=list)
    #: Subtitle files found, by the name the items give them.
    subtitles: dict[str, Path] = field(default_factory=dict)

    def items_ready(self, items: Iterable[BenchmarkItem]) -> list[BenchmarkItem]:
        """The items whose every video was found (an unusable item never is)."""
        return [i for i in items if not unusable(i) and all(v in self.found for v in i.video_ids)]


def locate_videos(
    items: Iterable[BenchmarkItem], root: Path | str, aliases: Aliases = no_aliases
) -> VideoLookup:
    """Find every video the items need under ``root``; missing videos and subtitles are listed."""
    index = VideoIndex.build(root)
    found: dict[str, Path] = {}
    missing: list[str] = []
    missing_subtitles: list[str] = []
    subtitles: dict[str, Path] = {}
    for item in items:
        for name in item.video_ids:
            if name in found or name in missing:
                continue
            path = index.find(name, aliases(name))
            if path is None:
                missing.append(name)
            else:
                found[name] = path
        subtitle = item.subtitles
        if subtitle and subtitle not in subtitles and subtitle not in missing_subtitles:
            path = index.find_file(subtitle)
            if path is None:
                missing_subtitles.append(subtitle)
            else:
                subtitles[subtitle] = path
    return VideoLookup(found=found, missing=missing, missing_subtitles=missing_subtitles, subtitles=subtitles)


def read_subtitles(path: Path | str) -> str:
    """The spoken text of a subtitle file, one cue per line: ``.srt`` (Video-MME) or a JSON list of
    cues with a ``line`` or ``text`` field (LongVideoBench); other files are read as plain text."""
    path = Path(path)
    if path.suffix.lower() == ".srt":
        from vidscope.evaluation.loaders.videomme import read_srt

        return read_srt(path)
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if path.suffix.lower() == ".json":
        try:
            cues = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(cues, list):
            lines = [str(c.get("line") or c.get("text") or "").strip() for c in cues if isinstance(c, dict)]
            return "\n".join(line for line in lines if line)
    return text
