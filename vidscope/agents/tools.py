"""Tools for agents: declared once from typed functions, executed with vidscope's own result cache.

A tool is written once, as a typed Python function whose parameters are ``Annotated`` with their
description; :func:`tool` turns it into a :class:`Tool` whose JSON schema is generated from that
signature (pydantic) and whose arguments are validated against it. :func:`execute_tool` runs a call
cached on (tool, normalised arguments, the store version of the videos it reads, the models and the
``[agent]`` settings that tool declares it reads), in :mod:`.tool_cache`'s files under the data dir,
so asking the same question twice costs no tool work. A failing tool yields an error outcome, never
an exception. The lookup, the run and its retries are the same with and without a Prefect server;
inside a flow run they happen in a Prefect task that only records the call (no Prefect caching or
result persistence), so every call still shows in the Prefect UI.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
import sys
import time
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from vidscope.agents import tool_cache
from vidscope.agents.answers import Support
from vidscope.core.hashing import stable_hash
from vidscope.core.settings import AgentSettings, Settings
from vidscope.models import registry as model_registry
from vidscope.models.protocols.chat import ChatModel, ToolSpec, Usage
from vidscope.models.protocols.text_embedder import TextEmbedder
from vidscope.storage.store import Store
from vidscope.storage.videos import VideoRecord

# ============================================================================ configuration


#: The agent's limits live in the settings (``[agent]`` in vidscope.toml).
AgentConfig = AgentSettings


class UndeclaredSetting(RuntimeError):
    """A cached tool read an ``[agent]`` setting it does not declare (a bug in the tool's
    declaration: its cached results would not be invalidated when that setting changes)."""


#: The tool whose cached call runs in this context (its declared settings are all it may read).
_running_tool: contextvars.ContextVar[Tool | None] = contextvars.ContextVar("vidscope_tool", default=None)


class _DeclaredSettings:
    """A read-only view of :class:`AgentSettings` that lets a tool read only the fields it declares."""

    def __init__(self, config: AgentSettings, tool: Tool) -> None:
        self._config = config
        self._tool = tool

    def __getattr__(self, name: str) -> Any:
        if name in AgentSettings.model_fields and name not in self._tool.settings:
            raise UndeclaredSetting(
                f"tool {self._tool.name} reads [agent] {name} but does not declare it "
                f"(@tool(settings=(..., {name!r}))): its cached results would outlive a change of it"
            )
        return getattr(self._config, name)


# ============================================================================ tool declaration


class ToolError(RuntimeError):
    """An expected tool failure (bad range, missing model, unknown video): reported, not retried."""


class ToolContext:
    """What tools may use: settings, the store (read-only by convention), models, configuration.

    ``chat`` is the planner the agent loop talks to (it may be text-only); ``vlm`` is the model
    frame tools send images to. Without ``vlm``, :meth:`vision_model` loads the registry's vision
    model (``models.vlm``, else ``models.chat``); ``chat`` serves only while no separate planner is
    configured, so a text-only planner is never sent frames.

    Deliberately a plain class (not a model or dataclass) so Prefect never walks into it when it
    inspects task parameters.
    """

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        chat: ChatModel | None = None,
        vlm: ChatModel | None = None,
        embedder: TextEmbedder | None = None,
        config: AgentConfig | None = None,
        registry: ToolRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.chat = chat
        self.vlm = vlm
        self._embedder = embedder
        self.config = config or AgentConfig()
        self.registry = registry
        self._videos: dict[str, VideoRecord] = {}

    @property
    def config(self) -> AgentConfig:
        """The ``[agent]`` settings. Inside a cached tool call only the fields that tool declares
        (``tool(settings=...)``) may be read: they are what its cache key holds, so reading another
        one would let a stale result survive a change of it (:class:`UndeclaredSetting`)."""
        running = _running_tool.get()
        if running is None:
            return self._config
        return cast(AgentConfig, _DeclaredSettings(self._config, running))

    @config.setter
    def config(self, value: AgentConfig) -> None:
        self._config = value

    @property
    def cache_dir(self) -> Path:
        """Where tool results are cached (:func:`vidscope.agents.tool_cache.cache_dir`)."""
        return tool_cache.cache_dir(self.settings.data_dir)

    def embedder(self) -> TextEmbedder:
        """The configured text embedder, loaded once per process by the registry."""
        if self._embedder is None:
            loaded = model_registry.text_embedder(self.settings)
            if loaded is None:
                raise ToolError("no text embedder is configured (models.text_embedder)")
            self._embedder = loaded
        return self._embedder

    def vision_model(self) -> ChatModel | None:
        """The model that looks at frames: ``vlm``, else ``models.vlm``, else the chat model, never
        a separately configured planner (it may be text-only: docs/models.md); ``None`` when no
        model can, or when the one there refused images earlier in this process.

        ``chat`` serves only while no planner is configured: then it is the chat model (or a model
        the caller gave for both roles). Loaded lazily (by the first frame tool), so a
        misconfigured vlm fails that tool call with a message the agent reads instead of failing
        the whole question up front.
        """
        if self.vlm is None and (self.settings.models.vlm or self.settings.models.planner):
            self.vlm = model_registry.vision_model(self.settings)
        model = self.vlm if self.vlm is not None or self.settings.models.planner else self.chat
        # A backend that learned its model refuses images says so (openai: accepts_images).
        return model if model is not None and getattr(model, "accepts_images", True) else None

    def may_see(self) -> bool:
        """Whether a model may look at frames, known from the configuration without loading one
        (:meth:`vision_model` loads it): a ``vlm``, else a chat model that is not only a planner.
        A model that turns out to refuse images is still found out by the first frame tool."""
        if self.vlm is not None or self.settings.models.vlm:
            return True
        if self.settings.models.planner:
            return bool(self.settings.models.chat)
        return self.chat is not None

    def video(self, video_id: str) -> VideoRecord:
        """The ``videos`` row of ``video_id``; a :class:`ToolError` naming known ids if absent."""
        if video_id not in self._videos:
            record = self.store.video_record(video_id)
            if record is None:
                known = (
                    self.store.rows(self.store.videos, columns=["video_id"]).column("video_id").to_pylist()
                )
                raise ToolError(
                    f"unknown video_id {video_id!r}; known videos: {', '.join(known[:10]) or 'none'}"
                )
            self._videos[video_id] = record
        return self._videos[video_id]

    def clip_count(self, video_id: str) -> int:
        """How many clips ``video_id`` has (what the opening prompt lists)."""
        return self.store.count(self.store.clips, video_id)

    def model_fingerprint(self, *, chat: bool, embedder: bool, roles: Sequence[str] = ()) -> str:
        """A hash of the model configuration a tool depends on (part of its cache key): the
        planner (``chat``) and/or text embedder, plus any other model ``roles`` (``vlm``,
        ``object_detector``, …), each by the spec that really serves it (its fallback's if unset).
        An unset planner hashes as the chat model did, so existing cache entries stay valid."""
        settings = self.settings
        parts: list[Any] = []
        for used, role in ((chat, "planner"), (embedder, "text_embedder")):
            if used:
                spec = model_registry.effective_spec(settings, role)
                parts.append([spec, model_registry.backend_options(settings, spec)])
        for role in roles:
            spec = model_registry.effective_spec(settings, role)
            parts.append([role, spec, model_registry.backend_options(settings, spec)])
        return stable_hash(parts)


class ToolResult(BaseModel):
    """Base of every tool result: knows the time ranges it showed the model, and its summary."""

    # Validators are built at a result type's first use, not at import: a question calls a tool or
    # two of the dozens declared (issue 44, the cold question).
    model_config = ConfigDict(frozen=False, defer_build=True)

    def support(self) -> list[Support]:
        """The time ranges this result supports, each with its evidence level and what was found
        there (see :mod:`vidscope.agents.citations`): where a hit, a text line, a detection or a
        look that saw something lies. A result that found nothing, refused, or only points at
        ranges (hints, overviews, the model's own ranges) supports them as ``echoed`` at most."""
        return []

    def summary(self) -> str:
        """A one-line description for traces."""
        return type(self).__name__

    def model_usage(self) -> Usage | None:
        """What the tool spent on model calls, if it made any."""
        return None

    def for_model(self) -> dict[str, Any]:
        """The JSON-able payload shown to the model (defaults to every field)."""
        return self.model_dump(mode="json")


class ToolFailure(ToolResult):
    """What a tool call yields instead of raising a :class:`ToolError` (cached like a result)."""

    error: str


@dataclass(frozen=True)
class Tool:
    """A tool declared from a typed function: its schema, validator and implementation."""

    name: str
    description: str
    func: Callable[..., Any]
    args_model: type[BaseModel]
    version: int = 1
    #: The tool calls the planner (``ctx.chat``): its spec is part of the cache key.
    uses_chat: bool = False
    uses_embedder: bool = False
    terminal: bool = False
    context_param: str | None = None
    #: Further model roles whose configuration changes the result (part of the cache key).
    uses_models: tuple[str, ...] = ()
    #: Reads the whole library (no ``video_id``): the clip and video tables' versions are keyed.
    uses_library: bool = False
    #: The ``[agent]`` settings the tool reads (their values are part of its cache key, and only
    #: theirs: changing ``cvr_frames`` leaves ``frame_inspect``'s cached results valid).
    settings: tuple[str, ...] = ()
    #: The result model (what a cached result is rebuilt as).
    result_type: type[ToolResult] = ToolResult

    @functools.cached_property
    def result_schema(self) -> str:
        """Hash of the result model's schema: a changed result type never reads an old cached
        result. Computed at the tool's first call, not at import: a question calls one or two of
        the tools declared (DVD's four result schemas took ~20 ms to build; issue 44)."""
        return stable_hash(self.result_type.__qualname__, self.result_type.model_json_schema())

    def spec(self) -> ToolSpec:
        """The :class:`ToolSpec` offered to a chat model (JSON schema from the signature)."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=_clean_schema(self.args_model.model_json_schema()),
        )

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Arguments checked and coerced against the signature; raises ``ValidationError``.

        An argument the tool does not take, given as null, is taken as not given: the real 1.5B
        model's SAMA calls carried ``"time_range": null, "lines": null`` (other tools' arguments)
        and were refused three turns running (tests/real_model, compare-sama, 2026-11-29). So is
        one named as a field of this tool's own result: data pasted back (the same planner's next
        call carried the previous result's ``"lines": [...]`` and was refused every other turn).
        Any other argument the tool does not take is still refused."""
        taken = self.args_model.model_fields
        pasted = set(self.result_type.model_fields) - set(taken)
        given = {
            key: value
            for key, value in arguments.items()
            if key in taken or (value is not None and key not in pasted)
        }
        return self.args_model.model_validate(given)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)


def tool(
    *,
    version: int = 1,
    uses_chat: bool = False,
    uses_embedder: bool = False,
    terminal: bool = False,
    uses_models: Sequence[str] = (),
    uses_library: bool = False,
    settings: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], Tool]:
    """Declare a tool from a typed function.

    Parameters are ``Annotated[type, "description"]`` (or ``Annotated[type, Field(...)]``); a
    parameter annotated :class:`ToolContext` receives the context and is hidden from the model.
    The docstring is the description the model reads. ``version`` is part of the cache key: bump
    it when the tool's output changes. ``uses_chat`` says the tool calls the planner;
    ``uses_models`` names further model roles (``vlm`` for tools that send frames, a detector, …)
    whose configuration is part of the cache key. A tool that searches the whole library rather
    than one video sets ``uses_library``: any ingestion then invalidates its cached results.
    ``settings`` names the ``[agent]`` fields the tool reads (``max_frames``, ``cvr_frames``, …):
    their values are part of its cache key, and a cached call that reads an undeclared one fails.
    """
    unknown = sorted(set(settings) - set(AgentSettings.model_fields))
    if unknown:
        raise TypeError(f"tool(settings=...): {unknown} are not [agent] settings")

    def wrap(func: Callable[..., Any]) -> Tool:
        hints = typing.get_type_hints(func, include_extras=True)
        fields: dict[str, Any] = {}
        context_param = None
        for name, param in inspect.signature(func).parameters.items():
            annotation = hints.get(name, Any)
            if annotation is ToolContext:
                context_param = name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            base, info, validators = annotation, None, []
            if typing.get_origin(annotation) is Annotated:
                base, *extras = typing.get_args(annotation)
                for extra in extras:
                    if isinstance(extra, FieldInfo):
                        info = extra
                    elif isinstance(extra, str):
                        info = Field(description=extra)
                    else:  # pydantic validators (BeforeValidator…) keep working
                        validators.append(extra)
            if info is None:
                raise TypeError(f"tool {func.__name__}: parameter {name!r} needs an Annotated description")
            fields[name] = (Annotated[(base, info, *validators)], default)
        args_model = create_model(
            f"{func.__name__}_arguments", __config__=ConfigDict(extra="forbid", defer_build=True), **fields
        )
        doc = inspect.getdoc(func)
        if not doc:
            raise TypeError(f"tool {func.__name__} needs a docstring (the model reads it)")
        returns = hints.get("return")
        if not (isinstance(returns, type) and issubclass(returns, ToolResult)):
            raise TypeError(f"tool {func.__name__} must be annotated to return a ToolResult model")
        return Tool(
            func.__name__,
            doc,
            func,
            args_model,
            version,
            uses_chat,
            uses_embedder,
            terminal,
            context_param,
            tuple(uses_models),
            uses_library,
            tuple(sorted(set(settings))),
            returns,
        )

    return wrap


def simulates(real: Tool, *, version: int = 1) -> Callable[[Callable[..., Any]], Tool]:
    """Declare a simulated counterpart of the tool ``real`` from a typed function.

    The function is declared as :func:`tool` declares one, must take exactly ``real``'s arguments
    (same names, types, descriptions and defaults; a ``TypeError`` at import otherwise) and is then
    offered under ``real``'s name and description: a model sees the same tool spec in the
    simulated and the real environment and cannot tell them apart. Its docstring says, for the
    reader, how the simulation answers. Only the simulator imports this: the real tool never
    knows it is simulated.
    """

    def wrap(func: Callable[..., Any]) -> Tool:
        simulated = tool(version=version)(func)
        if simulated.spec().parameters != real.spec().parameters:
            raise TypeError(f"{func.__name__} does not take the arguments of the real {real.name}")
        return replace(simulated, name=real.name, description=real.description)

    return wrap


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's auto-generated titles: they cost tokens and tell the model nothing."""
    if isinstance(schema, dict):
        return {k: _clean_schema(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_clean_schema(v) for v in schema]
    return schema


class ToolRegistry:
    """The allow-list of tools an agent may call; anything else is refused."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = {t.name: t for t in tools}

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool:
        """The tool called ``name``; ``KeyError`` if it is not allowed."""
        return self._tools[name]

    @property
    def names(self) -> list[str]:
        """Allowed tool names, in declaration order."""
        return list(self._tools)

    def specs(self, only: Sequence[str] | None = None) -> list[ToolSpec]:
        """Tool specs for the model (all, or the named ones)."""
        return [t.spec() for n, t in self._tools.items() if only is None or n in only]


# ============================================================================ execution


class ToolOutcome(BaseModel):
    """One executed tool call: the typed result or an error message, and what it cost."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool: str
    arguments: dict[str, Any]
    result: ToolResult | None = None
    error: str | None = None
    cached: bool = False
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether the tool produced a result (else ``error`` says why not)."""
        return self.error is None


def _run_tool(tool_name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Run one validated tool call; an expected failure (``ToolError``) becomes a ToolFailure."""
    assert ctx.registry is not None
    spec = ctx.registry.get(tool_name)
    kwargs = dict(arguments)
    if spec.context_param:
        kwargs[spec.context_param] = ctx
    try:
        return spec.func(**kwargs)
    except ToolError as exc:
        # An expected failure is the tool's answer for these inputs and this video version: it is
        # returned (and cached) rather than raised, so it is neither retried nor logged as a crash.
        return ToolFailure(error=str(exc))


#: Errors that are the tool's considered answer or a bug in the call: never retried.
_NOT_TRANSIENT = (ToolError, ValidationError, ValueError, TypeError, KeyError, UndeclaredSetting)


def _cached_call(name: str, arguments: dict[str, Any], key: str, ctx: ToolContext) -> tuple[ToolResult, bool]:
    """``(result, cached)`` of one tool call: from vidscope's tool cache, else run and stored.

    Errors that may be transient are retried ``[agent] tool_retries`` times. This is the whole
    behaviour with or without a Prefect server; in a flow run it is the body of the recording task.
    """
    assert ctx.registry is not None
    spec = ctx.registry.get(name)
    kinds: dict[str, type[BaseModel]] = {tool_cache.RESULT: spec.result_type, tool_cache.FAILURE: ToolFailure}
    found = tool_cache.read(ctx.cache_dir, name, key, kinds)
    if found is not None:
        return cast(ToolResult, found), True
    attempt, retries = 0, ctx.config.tool_retries
    token = _running_tool.set(spec)
    try:
        while True:
            try:
                result = _run_tool(name, arguments, ctx)
                break
            except _NOT_TRANSIENT:
                raise
            except Exception:
                attempt += 1
                if attempt > retries:
                    raise
                time.sleep(0.2)
    finally:
        _running_tool.reset(token)
    kind = tool_cache.FAILURE if isinstance(result, ToolFailure) else tool_cache.RESULT
    tool_cache.write(ctx.cache_dir, name, spec.version, key, result, kind=kind)
    return result, False


@functools.lru_cache(maxsize=64)
def _recording_task(name: str) -> Any:
    """The Prefect task that records calls of tool ``name`` in a flow run (built once per tool).

    It caches and persists nothing and retries nothing: the call it wraps does all of that, the
    same way as outside Prefect; the task run is the call's entry in the Prefect UI.
    """
    from prefect import task
    from prefect.cache_policies import NO_CACHE

    return task(
        name=f"tool-{name}",
        task_run_name=name,
        cache_policy=NO_CACHE,
        persist_result=False,
        retries=0,
        log_prints=False,
    )(_cached_call)


def in_flow_run() -> bool:
    """Whether this thread runs inside a Prefect flow run (then tool calls are its task runs).

    Prefect is not imported to find out: a process that never imported it runs no flow.
    """
    context = sys.modules.get("prefect.context")
    return context is not None and context.FlowRunContext.get() is not None


def tool_cache_key(ctx: ToolContext, spec: Tool, arguments: dict[str, Any]) -> str:
    """(tool, version, result schema, normalised arguments, the store version of every video it
    reads — and the library's for a library tool —, the models it uses, the ``[agent]`` settings
    it declares) as a key. A setting no tool declares changes no key."""
    # Every video the call reads (``video_id``, ``other_video_id``, …) versions the key.
    video_version = [
        ctx.store.video_version(value)
        for key, value in sorted(arguments.items())
        if isinstance(value, str) and (key == "video_id" or key.endswith("_video_id"))
    ]
    if spec.uses_library:
        store = ctx.store
        video_version.append(
            f"library-{store.table_version(store.clips)}-{store.table_version(store.videos)}"
        )
    config = ctx._config  # the whole settings: the key is computed outside the tool's own call
    return "tool-" + stable_hash(
        spec.name,
        spec.version,
        spec.result_schema,
        json.dumps(arguments, sort_keys=True, default=str),
        video_version,
        ctx.model_fingerprint(chat=spec.uses_chat, embedder=spec.uses_embedder, roles=spec.uses_models),
        {name: getattr(config, name) for name in spec.settings},
    )


def execute_tool(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> ToolOutcome:
    """Validate and run one tool call through the tool cache; failures become error outcomes."""
    started = time.perf_counter()

    def failed(message: str) -> ToolOutcome:
        return ToolOutcome(
            tool=name, arguments=arguments, error=message, latency_s=time.perf_counter() - started
        )

    if ctx.registry is None or name not in ctx.registry:
        allowed = ", ".join(ctx.registry.names if ctx.registry else [])
        return failed(f"unknown tool {name!r}; the only tools are: {allowed}")
    spec = ctx.registry.get(name)
    if spec.terminal:
        return failed(f"{name} ends the conversation and is not executed as a tool")
    try:
        validated = spec.validate(arguments).model_dump(mode="json")
    except ValidationError as exc:
        return failed(validation_message(exc))
    try:
        for key, video_id in validated.items():
            if isinstance(video_id, str) and (key == "video_id" or key.endswith("_video_id")):
                ctx.video(video_id)  # unknown ids fail here, before anything is cached
        if not ctx.config.tool_cache:
            # Uncached: run in this thread, no Prefect task (rollouts, the simulator).
            direct = _run_tool(name, validated, ctx)
            if isinstance(direct, ToolFailure):
                return failed(direct.error)
            return ToolOutcome(
                tool=name, arguments=validated, result=direct, latency_s=time.perf_counter() - started
            )
        key = tool_cache_key(ctx, spec, validated)
        if not in_flow_run():
            result, cached = _cached_call(name, validated, key, ctx)
        else:
            # The same call inside a task run, so the flow run's page lists it.
            state = _recording_task(name)(name, validated, key, ctx, return_state=True)
            if state.is_failed() or state.is_crashed():
                try:
                    state.result()
                except Exception as exc:  # the task's own exception, re-raised by Prefect
                    return failed(f"{type(exc).__name__}: {exc}")
                return failed(state.message or "the tool failed")
            result, cached = state.result()
        if isinstance(result, ToolFailure):
            return ToolOutcome(
                tool=name,
                arguments=validated,
                error=result.error,
                cached=cached,
                latency_s=time.perf_counter() - started,
            )
    except ToolError as exc:
        return failed(str(exc))
    except Exception as exc:  # a tool bug must not crash the loop; the model sees the error
        return failed(f"{type(exc).__name__}: {exc}")
    return ToolOutcome(
        tool=name,
        arguments=validated,
        result=result,
        cached=cached,
        latency_s=time.perf_counter() - started,
    )


def validation_message(exc: ValidationError) -> str:
    """A pydantic validation error as one line the model can act on."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(problems)
