"""Chat, captioning and text embedding through any OpenAI-compatible HTTP server.

vLLM, Ollama, llama.cpp's server, SGLang, OpenAI and Azure OpenAI all speak this protocol, so one
backend reaches them all. Options come from ``[models.options.openai]`` in vidscope.toml; a
sub-table named after a role (``[models.options.openai.text_embedder]``) overrides them for that
role, e.g. to embed with another server than the one that chats::

    [models]
    chat = "openai:qwen2.5-vl-7b"
    [models.options.openai]
    base_url = "http://gpu-box:8000/v1"
    api_key_env = "VLLM_API_KEY"
    tool_calling = "native"         # or "json" for models without native tool calls
    prices = { "gpt-4o-mini" = { input_per_mtok = 0.15, output_per_mtok = 0.6 } }

The roles ``planner`` and ``vlm`` take sub-tables too, so a reasoning planner and a vision model can
live on two servers with their own sampling::

    [models.options.openai.planner]
    base_url = "http://gpu-box:8001/v1"
    sampling = { temperature = 0.6, top_p = 0.95 }   # sent instead of the caller's temperature
    reasoning_tokens = 4096                          # added to each call's output limit
    max_tokens_param = "max_completion_tokens"       # OpenAI's reasoning models want this name

OpenAI's reasoning models (o1, o3, o4-mini, gpt-5…, by name) get both by default: 4,096 thinking
tokens on top of every limit and ``max_completion_tokens``; set them to override.

Sampling: without ``sampling`` the caller's temperature is sent, as always; with it exactly its
keys are sent (``sampling = {}`` sends none, for servers that reject ``temperature``). What a
server refuses is learned once and kept for the process per endpoint and model
(:mod:`vidscope.models.endpoint_facts`), each fix said once in the log: HTTP 400 naming a sampling
parameter (o-series: "Unsupported value: 'temperature' ...") is answered by sending the request
once more without it; HTTP 400 naming ``max_tokens`` by sending ``max_completion_tokens``; an
error naming images (llama.cpp's HTTP 500 "image input is not supported") is not retried, raises
:class:`~vidscope.core.errors.ImagesNotSupported`, and later requests with images raise it without
being sent (:attr:`OpenAIChat.accepts_images` turns False).

Reasoning: ``<think>`` blocks and ``reasoning_content``/``reasoning`` fields go to
:attr:`ChatReply.reasoning`, never into the parsed text; a reply cut off at the output limit
(``finish_reason == "length"``) is asked for again once with twice the limit and a request to be
brief, never parsed, unless it stopped because the context filled (short of its output
limit, or prompt plus reply at the context window): then :class:`~vidscope.core.errors.ContextFull`;
HTTP 400 naming the context window raises :class:`~vidscope.core.errors.ContextLengthExceeded`
(the agent runtime trims and retries on both).

Retries are done here with tenacity, not by the client (its ``max_retries`` is 0), so they are
uniform, tested and counted (every attempt is a request in the usage log), and an error retrying
cannot fix (a model without vision, a full context) stops at once: 429, 5xx, timeouts and
connection errors back off exponentially with jitter and honour a small ``Retry-After``. Replies
that cannot be used (malformed tool-call JSON, an empty answer, the wrong format) are parsed
leniently, else re-asked once with the problem stated, else :class:`ModelOutputError`. Every call
is logged and identical requests are answered from a persistent cache (see
:mod:`vidscope.models.usage`).
"""

from __future__ import annotations

import base64
import email.utils
import io
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import tenacity

from vidscope.core.errors import (
    BackendUnavailable,
    ContextFull,
    ContextLengthExceeded,
    ImagesNotSupported,
    ModelOutputError,
    OutputCutOff,
)
from vidscope.core.tls import httpx_tls
from vidscope.models import endpoint_facts, usage
from vidscope.models.call_stream import read_until_call
from vidscope.models.captioning import (
    DEFAULT_CAPTION_PROMPT,
    REGISTRY_INSTRUCTIONS,
    caption_request_text,
    clean_caption,
    parse_registry_reply,
    registry_request_text,
)

# loads_lenient stays importable from here too: it lived here before json_tools existed.
from vidscope.models.json_tools import (
    TOOL_REPLY_FORMAT,
    UnusableReply,
    check_offered,
    loads_lenient,
    parse_tool_reply,
    read_tool_reply,
    tool_instructions,
    written_call,
)
from vidscope.models.protocols.captioner import RegistryCaption
from vidscope.models.protocols.chat import ChatMessage, ChatReply, ToolCall, ToolSpec, Usage
from vidscope.models.protocols.image import Image

log = logging.getLogger(__name__)

T = TypeVar("T")

KIND = "openai"
ROLES = ("chat", "planner", "vlm", "captioner", "text_embedder", "judge")

#: Option -> default. ``None`` means "not set".
DEFAULTS: dict[str, Any] = {
    "base_url": None,
    "api_key_env": "OPENAI_API_KEY",
    "timeout_s": 60.0,
    "max_retries": 3,
    "max_concurrency": 4,
    "max_images": 32,
    # Longest side of an image sent. 1280 lets frame_inspect's 720p frames (1280x720) through
    # whole; every other sender makes smaller images (stored frames are 640 px).
    "max_image_side": 1280,
    "azure_api_version": None,
    "tool_calling": "native",
    "cache": True,
    "prices": None,
    "dim": None,
    "retry_base_s": 0.5,  # first backoff delay; doubles per attempt
    "retry_after_max_s": 30.0,  # a longer Retry-After is not waited for; normal backoff applies
    "response_format": True,  # send response_format=json_object when JSON output is asked for
    # OpenAI's reasoning models want "max_completion_tokens" (the default for them: see
    # reasoning_defaults); None: "max_tokens" for every other model.
    "max_tokens_param": None,
    "embed_batch": 64,
    "caption_prompt": None,
    "caption_frames": 10,  # every 2 fps frame of a 5 s clip, as DVD sends (before near-duplicates go)
    # A detailed narration (60-150 words) plus the clip's subject registry entries as JSON.
    "caption_max_tokens": 768,
    # Reasoning models (see the module docstring).
    "sampling": None,  # a table of sampling parameters sent instead of the caller's temperature
    "reasoning_effort": None,  # "low" | "medium" | "high", for servers/models that take it
    # Output tokens added to every limit, for the model's thinking; None: REASONING_BUDGET for
    # OpenAI's reasoning models (o1, o3, o4-mini, gpt-5…), else 0 (see reasoning_defaults).
    "reasoning_tokens": None,
    "extra_body": None,  # a table merged into each request body (server-specific fields)
    # The model's context window in tokens, to tell a full context from an output limit; unset,
    # it is asked of the server (llama.cpp's /props n_ctx, vLLM's /models max_model_len).
    "context_tokens": None,
    # Once the model has written a tool call in its text instead of calling natively, stream its
    # turns with tools and stop each as soon as a whole call is written: what follows a written
    # call is dropped anyway (json_tools.written_call), so the conversation is the same.
    "stop_after_call": True,
}

#: An HTTP 400 whose message says the request did not fit the model's context window: vLLM and
#: OpenAI ("maximum context length is N tokens", code context_length_exceeded), llama.cpp's server
#: ("exceeds the available context size"), others ("prompt is too long", "context window").
CONTEXT_ERROR = re.compile(
    r"context[ _](length|size|window)|maximum context|context_length_exceeded|prompt is too long"
    r"|too many tokens|exceeds? the (available )?context",
    re.IGNORECASE,
)

#: An error naming images as something this model cannot take: llama.cpp's server without
#: ``--mmproj`` (HTTP 500 "image input is not supported"), vLLM serving a text-only model ("... is
#: not a multimodal model"), OpenAI ("image_url is only supported by certain models"), Ollama
#: ("does not support images"). Not vLLM's per-request cap ("At most 4 image(s) ..."): that is a
#: limit, and ``max_images`` is the fix.
IMAGE_REFUSAL = re.compile(
    r"image input is not supported|does not support (image|vision|multi-?modal)"
    r"|not a multi-?modal model|(image|image_url|vision)\w*'? (input )?(is|are) (not supported|unsupported"
    r"|only supported)|at most 0 image|mmproj",
    re.IGNORECASE,
)

#: A refusal of a streamed request names streaming ("stream_options" unsupported, "streaming is
#: not supported"); any other error of a streamed request (a refused tool choice, a bad
#: parameter) is the request's own and is handled as it would be unstreamed. A word starting
#: with "stream", so a host such as "upstream-llm" in the error's URL does not count.
STREAM_REFUSAL = re.compile(r"(?<![a-z])stream", re.IGNORECASE)
#: An HTTP 400 naming ``max_tokens`` as unsupported (OpenAI's reasoning models: "Unsupported
#: parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.").
LIMIT_PARAM_REFUSAL = re.compile(r"max_tokens'? is not supported|use '?max_completion_tokens", re.IGNORECASE)

#: A reply stopped with prompt plus reply within this many tokens of the context window filled it.
CONTEXT_SLACK = 16
#: A "length" reply with fewer output tokens than this share of its limit did not stop at the limit.
SHORT_OF_LIMIT = 0.9

#: Said to the model after a reply was cut off at the output limit (it is then asked again once).
CUT_OFF_NOTE = (
    "Your previous reply was cut off at the output-token limit before it was complete. Reply "
    "again, briefly: keep any reasoning short and give the tool call or the answer directly."
)

#: HTTP statuses worth retrying besides 5xx.
RETRY_STATUSES = {408, 409, 429}
BACKOFF_CAP_S = 20.0


class EndpointError(RuntimeError):
    """The server answered with an error that retrying did not (or cannot) fix."""


class EndpointTimeout(EndpointError, TimeoutError):
    """The server did not answer within ``timeout_s`` on any attempt."""


# ---------------------------------------------------------------------------- options


#: OpenAI's reasoning models by name: they think before they answer, in output tokens that count
#: against the limit, and take ``max_completion_tokens``.
REASONING_MODEL = re.compile(r"^(?:o\d+(?:-[\w.-]+)?|gpt-5(?:[\w.-]*)?)$", re.IGNORECASE)
#: The thinking budget such a model gets by default: without it an agent's 384-1024-token limits
#: are spent on thinking and the reply is cut off before its tool call.
REASONING_BUDGET = 4096


def reasoning_defaults(model: str, opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` with the unset reasoning options filled for ``model``: an OpenAI reasoning model
    gets :data:`REASONING_BUDGET` thinking tokens and ``max_completion_tokens``; any other model
    none and ``max_tokens``. Set values are kept."""
    thinks = REASONING_MODEL.match(model.rsplit("/", 1)[-1]) is not None
    filled = dict(opts)
    if filled["reasoning_tokens"] is None:
        filled["reasoning_tokens"] = REASONING_BUDGET if thinks else 0
    if filled["max_tokens_param"] is None:
        filled["max_tokens_param"] = "max_completion_tokens" if thinks else "max_tokens"
    return filled


def resolve_options(role: str, options: dict[str, Any]) -> dict[str, Any]:
    """Defaults, then the kind's options, then the role's sub-table; unknown keys are an error."""
    merged = dict(DEFAULTS)
    found = options.get(role)
    role_table: dict[str, Any] = found if isinstance(found, dict) else {}
    for source in (options, role_table):
        for key, value in source.items():
            if key in ROLES and isinstance(value, dict):
                continue
            if key not in DEFAULTS:
                raise ValueError(
                    f"unknown option '{key}' in [models.options.{KIND}] of vidscope.toml; "
                    f"known options: {', '.join(sorted(DEFAULTS))}"
                )
            merged[key] = value
    for key, default in DEFAULTS.items():
        if isinstance(default, bool):
            merged[key] = _switch(key, merged[key])
    for key in ("sampling", "extra_body"):
        if merged[key] is not None and not isinstance(merged[key], dict):
            raise ValueError(f"[models.options.{KIND}] {key} must be a table, got {merged[key]!r}")
    if merged["reasoning_tokens"] is not None and int(merged["reasoning_tokens"]) < 0:
        raise ValueError(f"[models.options.{KIND}] reasoning_tokens must be >= 0")
    if merged["tool_calling"] not in ("native", "json"):
        raise ValueError(
            f'[models.options.{KIND}] tool_calling must be "native" or "json", got {merged["tool_calling"]!r}'
        )
    return merged


#: How an on/off option may be written where only text exists (an environment variable such as
#: ``VIDSCOPE_MODELS__OPTIONS__OPENAI__CACHE=false``): "false" must not read as a true string.
_SWITCH_WORDS = {"true": True, "1": True, "yes": True, "on": True} | {
    "false": False,
    "0": False,
    "no": False,
    "off": False,
}


def _switch(key: str, value: Any) -> bool:
    """An on/off option as a bool: a TOML boolean, or one of :data:`_SWITCH_WORDS` (any case)."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word not in _SWITCH_WORDS:
        raise ValueError(f"[models.options.{KIND}] {key} must be true or false, got {value!r}")
    return _SWITCH_WORDS[word]


# ---------------------------------------------------------------------------- images


def prepare_jpeg(data: bytes, max_side: int) -> bytes:
    """JPEG bytes whose longer side is at most ``max_side`` (re-encoded only when needed)."""
    # PIL is imported when the first image is sent: text-only use never pays for it.
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    from vidscope.core.images import encode_jpeg

    try:
        with PILImage.open(io.BytesIO(data)) as img:
            if img.format == "JPEG" and max(img.size) <= max_side:
                return data
            if img.format == "JPEG":
                # Decode at a reduced DCT scale: a 4K frame decodes several times faster.
                img.draft("RGB", (max_side, max_side))
            rgb = img.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"an image attached to a chat message cannot be decoded: {exc}") from exc
    return encode_jpeg(rgb, max_side=max_side)


def frame_to_jpeg(frame: Image, max_side: int) -> bytes:
    """An RGB uint8 frame (H, W, 3) as JPEG bytes, downscaled to ``max_side``."""
    from vidscope.core.images import encode_jpeg

    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] != 3:
        raise ValueError(f"frames must be RGB arrays of shape (H, W, 3), got {array.shape}")
    return encode_jpeg(array.astype(np.uint8, copy=False), max_side=max_side)


def _data_url(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


# ---------------------------------------------------------------------------- endpoint

_semaphores: dict[str, threading.BoundedSemaphore] = {}
_semaphores_lock = threading.Lock()


def endpoint_semaphore(base_url: str, size: int) -> threading.BoundedSemaphore:
    """The semaphore limiting concurrent requests to ``base_url`` (the first size asked wins)."""
    key = base_url.rstrip("/")
    with _semaphores_lock:
        found = _semaphores.get(key)
        if found is None:
            found = _semaphores[key] = threading.BoundedSemaphore(max(1, int(size)))
        return found


@dataclass
class _Tally:
    """What one logical call spent across its HTTP requests."""

    requests: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    def add_usage(self, response: Any) -> None:
        found = getattr(response, "usage", None)
        if found is not None:
            self.input_tokens += int(getattr(found, "prompt_tokens", 0) or 0)
            self.output_tokens += int(getattr(found, "completion_tokens", 0) or 0)
            details = getattr(found, "prompt_tokens_details", None)
            if isinstance(details, dict):  # a server's extra field the client did not type
                self.cached_input_tokens += int(details.get("cached_tokens") or 0)
            elif details is not None:
                self.cached_input_tokens += int(getattr(details, "cached_tokens", 0) or 0)


@dataclass
class Endpoint:
    """One OpenAI-compatible server as seen by one model: client, retries, concurrency limit."""

    role: str
    model: str
    base_url: str
    api_key_env: str
    timeout_s: float
    max_retries: int
    retry_base_s: float
    retry_after_max_s: float
    max_concurrency: int
    azure_api_version: str | None = None
    client: Any = field(init=False, repr=False)
    semaphore: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        import openai

        self.base_url = self.base_url.rstrip("/")
        key = os.environ.get(self.api_key_env)
        hosted = "api.openai.com" in self.base_url or self.azure_api_version is not None
        if not key and hosted:
            raise BackendUnavailable(
                self.role,
                f"{KIND}:{self.model}",
                f"the API key in ${self.api_key_env}",
                f"Set the environment variable {self.api_key_env} (or api_key_env in "
                f"[models.options.{KIND}.{self.role}]) to your API key for {self.base_url}.",
            )
        # Local servers ignore the key, but the client insists on one.
        key = key or "not-needed"
        # max_retries=0: retries happen in call(), where they are uniform and counted.
        if self.azure_api_version:
            self.client = openai.AzureOpenAI(
                azure_endpoint=self.base_url,
                api_version=self.azure_api_version,
                api_key=key,
                timeout=self.timeout_s,
                max_retries=0,
            )
        else:
            self.client = openai.OpenAI(
                base_url=self.base_url, api_key=key, timeout=self.timeout_s, max_retries=0
            )
        self.semaphore = endpoint_semaphore(self.base_url, self.max_concurrency)

    def url(self, path: str) -> str:
        """The full URL of an API path, for messages."""
        return f"{self.base_url}/{path.lstrip('/')}"

    def _backoff(self, attempt: int) -> float:
        return min(BACKOFF_CAP_S, self.retry_base_s * 2**attempt) * random.uniform(0.5, 1.0)

    def _retry_after(self, exc: Any) -> float | None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        try:
            if headers.get("retry-after-ms") is not None:
                value = float(headers["retry-after-ms"]) / 1000
            elif headers.get("retry-after") is not None:
                raw = headers["retry-after"]
                try:
                    value = float(raw)
                except ValueError:
                    value = email.utils.parsedate_to_datetime(raw).timestamp() - time.time()
            else:
                return None
        except (TypeError, ValueError):
            return None
        return max(0.0, value) if value <= self.retry_after_max_s else None

    def call(self, path: str, request: Callable[[Any], T], tally: _Tally) -> T:
        """Run ``request(client)`` with retries; on failure raise a clear error naming the URL.

        tenacity runs the attempts: connection errors, timeouts, 408/409/429 and 5xx are retried
        after :meth:`_wait`; any other answer raises at once with its own message.
        """
        import openai

        attempts, made = self.max_retries + 1, 0

        def attempt() -> T:
            nonlocal made
            made += 1
            tally.requests += 1
            try:
                with self.semaphore:
                    return request(self.client)
            except openai.APIStatusError as exc:
                if exc.status_code >= 400 and IMAGE_REFUSAL.search(_describe(exc)):
                    # llama.cpp answers 500: retrying a model that has no vision only waits longer.
                    raise ImagesNotSupported(
                        f"POST {self.url(path)} (model '{self.model}') does not take images: {_describe(exc)}"
                    ) from exc
                if exc.status_code in (400, 413) and CONTEXT_ERROR.search(_describe(exc)):
                    raise ContextLengthExceeded(
                        f"POST {self.url(path)} (model '{self.model}'): the request does not fit "
                        f"the model's context window: {_describe(exc)}"
                    ) from exc
                if exc.status_code not in RETRY_STATUSES and exc.status_code < 500:
                    raise self._status_error(path, exc, made) from exc
                raise

        def log_retry(state: tenacity.RetryCallState) -> None:
            log.info(
                "%s %s: %s; retry %d/%d in %.2fs",
                self.model,
                self.url(path),
                _describe(state.outcome.exception() if state.outcome else None),
                state.attempt_number,
                self.max_retries,
                state.next_action.sleep if state.next_action else 0.0,
            )

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=self._wait,
            # APIConnectionError includes APITimeoutError; the statuses left are the retryable ones.
            retry=tenacity.retry_if_exception_type((openai.APIConnectionError, openai.APIStatusError)),
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except (openai.APIConnectionError, openai.APIStatusError) as exc:
            raise self._final_error(path, exc, attempts) from exc

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Seconds before the next attempt: a small ``Retry-After`` the server sent, else
        exponential backoff with jitter."""
        exc = state.outcome.exception() if state.outcome else None
        wait = self._retry_after(exc) if exc is not None else None
        return self._backoff(state.attempt_number - 1) if wait is None else wait

    def _status_error(self, path: str, exc: Any, attempts: int) -> EndpointError:
        code = exc.status_code
        detail = _describe(exc)
        where = f"POST {self.url(path)} (model '{self.model}')"
        if code in (401, 403):
            return EndpointError(
                f"{where} was refused: {detail}. Put a valid API key in the environment variable "
                f"{self.api_key_env} (api_key_env in [models.options.{KIND}.{self.role}])."
            )
        if code == 404:
            return EndpointError(
                f"{where}: {detail}. Check that the server serves model '{self.model}' "
                f"(GET {self.url('models')}) and that base_url ends in /v1."
            )
        hint = ""
        if code == 400 and "tool" in detail.lower():
            # vLLM without --enable-auto-tool-choice, and many small models, refuse native tools.
            hint = (
                f'; if the server or model lacks native tool calling, set tool_calling = "json" '
                f"in [models.options.{KIND}.{self.role}]"
            )
        return EndpointError(f"{where} failed after {attempts} attempt(s): {detail}{hint}")

    def _final_error(self, path: str, exc: Exception, attempts: int) -> Exception:
        import openai

        url = self.url(path)
        if isinstance(exc, openai.APITimeoutError):
            return EndpointTimeout(
                f"POST {url} (model '{self.model}') timed out after {self.timeout_s:g}s on each of "
                f"{attempts} attempt(s); raise timeout_s in [models.options.{KIND}.{self.role}] or "
                f"lighten the server's load"
            )
        if isinstance(exc, openai.APIConnectionError):
            return BackendUnavailable(
                self.role,
                f"{KIND}:{self.model}",
                f"POST {url}, {attempts} attempt(s): {_describe(exc)}",
                f"Start the OpenAI-compatible server at {self.base_url} or fix base_url in "
                f"[models.options.{KIND}.{self.role}] of vidscope.toml.",
            )
        return EndpointError(
            f"POST {url} (model '{self.model}') failed after {attempts} attempt(s): {_describe(exc)}"
        )


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no error"
    code = getattr(exc, "status_code", None)
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    cause = exc.__cause__ or exc.__context__
    text = message or str(exc)
    if code is None and cause is not None and str(cause):
        text = f"{text} ({type(cause).__name__}: {cause})"
    return f"HTTP {code}: {text}" if code else text


def server_context_window(endpoint: Endpoint, model: str) -> int | None:
    """The context window the server reports for ``model``, or ``None`` when it reports none.

    llama.cpp's server reports the per-slot context at ``GET /props``
    (``default_generation_settings.n_ctx``); vLLM reports ``max_model_len`` per model at ``GET
    /v1/models``; some servers put ``n_ctx`` in a model's ``meta``. Asked only after a reply
    stopped at ``finish_reason: "length"``, with a short timeout; any failure means unknown.
    """
    import httpx

    base = endpoint.base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    timeout = min(5.0, endpoint.timeout_s)
    headers = {"Authorization": f"Bearer {os.environ.get(endpoint.api_key_env) or 'not-needed'}"}

    def get(url: str) -> Any:
        try:
            response = httpx.get(url, timeout=timeout, headers=headers, verify=httpx_tls(url))
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    props = get(f"{root}/props")
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        for found in (settings.get("n_ctx") if isinstance(settings, dict) else None, props.get("n_ctx")):
            if isinstance(found, int) and found > 0:
                return found
    listed = get(f"{base}/models")
    entries = listed.get("data") if isinstance(listed, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("id") not in (model, None):
            continue
        raw_meta = entry.get("meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        for found in (entry.get("max_model_len"), meta.get("n_ctx")):
            if isinstance(found, int) and found > 0:
                return found
    return None


# ---------------------------------------------------------------------------- reasoning

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def split_reasoning(text: str | None) -> tuple[str | None, str | None]:
    """``text`` without its ``<think>`` reasoning, and that reasoning (``None`` if there was none).

    Besides whole blocks this handles the two partial forms servers produce: a lone closing tag
    (chat templates such as DeepSeek-R1's open ``<think>`` in the prompt, so the reply holds only
    the thought and ``</think>``) and a lone opening tag (cut off while thinking).
    """
    if not text:
        return text, None
    thoughts: list[str] = []

    def keep(match: re.Match[str]) -> str:
        thoughts.append(match.group(1).strip())
        return ""

    rest = _THINK_BLOCK.sub(keep, text)
    lower = rest.lower()
    close = lower.rfind(_THINK_CLOSE)
    if close >= 0:
        thoughts.insert(0, rest[:close].strip())
        rest = rest[close + len(_THINK_CLOSE) :]
    else:
        opened = lower.find(_THINK_OPEN)
        if opened >= 0:
            thoughts.append(rest[opened + len(_THINK_OPEN) :].strip())
            rest = rest[:opened]
    if not thoughts:
        return text, None
    return rest.strip(), "\n\n".join(t for t in thoughts if t) or None


def _field_reasoning(message: Any) -> str | None:
    """A reasoning field of a reply message: ``reasoning_content`` (vLLM's reasoning parsers,
    DeepSeek's API) or ``reasoning`` (newer vLLM, Ollama, OpenRouter)."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _reasoning(message: Any, thought: str | None) -> str | None:
    """All the reasoning of a reply: its reasoning field, then the ``<think>`` text of its content."""
    return "\n\n".join(r for r in (_field_reasoning(message), thought) if r) or None


# ---------------------------------------------------------------------------- chat


class OpenAIChat:
    """A chat model behind an OpenAI-compatible server; satisfies :class:`ChatModel`."""

    def __init__(
        self, role: str, model: str, opts: dict[str, Any], data_dir: Path, endpoint: Endpoint
    ) -> None:
        self.role = role
        self.model = model
        self.name = f"{KIND}:{model}"
        self.opts = reasoning_defaults(model, opts)
        self.data_dir = Path(data_dir)
        self.endpoint = endpoint
        self.max_images = int(opts["max_images"])
        self.max_image_side = int(opts["max_image_side"])
        self.json_tools = opts["tool_calling"] == "json"
        self.cache = usage.ResponseCache(self.data_dir) if opts["cache"] else None
        #: What the server taught this process about the model (shared by every backend object
        #: on the same endpoint and model): refused parameters, images, the context window.
        self.facts = endpoint_facts.facts(endpoint.base_url, model)

    @property
    def refused_sampling(self) -> set[str]:
        """Sampling parameters this server refused (HTTP 400 naming them): no longer sent."""
        return self.facts.refused_params

    @property
    def accepts_images(self) -> bool:
        """False once the server refused images in this process (then no image is sent again)."""
        return self.facts.images_refused is None

    def limit_param(self) -> str:
        """The output-limit parameter's name: what the server asked for, else ``max_tokens_param``."""
        return self.facts.max_tokens_param or str(self.opts["max_tokens_param"])

    def as_captioner(self) -> OpenAICaptioner:
        """This model as a clip captioner (its role's ``caption_*`` options): how a ``vlm``
        serves captioning when no captioner is configured."""
        return OpenAICaptioner(
            self,
            str(self.opts["caption_prompt"] or DEFAULT_CAPTION_PROMPT),
            int(self.opts["caption_frames"]),
            int(self.opts["caption_max_tokens"]),
        )

    def sampling(self, temperature: float) -> dict[str, Any]:
        """The sampling parameters to send: the configured table, else the caller's temperature,
        minus any the server refused."""
        configured = self.opts["sampling"]
        chosen = dict(configured) if configured is not None else {"temperature": temperature}
        return {k: v for k, v in chosen.items() if k not in self.refused_sampling}

    def output_limit(self, max_tokens: int | None) -> int | None:
        """The output-token limit sent: the caller's plus the reasoning budget (none if none)."""
        if max_tokens is None:
            return None
        return int(max_tokens) + int(self.opts["reasoning_tokens"])

    # -------------------------------------------------------------- request building

    def _convert(
        self, messages: Sequence[ChatMessage], images: list[list[bytes]], system_extra: str | None
    ) -> list[dict[str, Any]]:
        """Messages in the OpenAI wire format (with JSON-mode rewriting of tool traffic)."""
        out: list[dict[str, Any]] = []
        call_names: dict[str, str] = {}
        for message, jpegs in zip(messages, images, strict=True):
            for call in message.tool_calls:
                call_names[call.id] = call.name
            if message.role == "assistant" and message.tool_calls:
                if self.json_tools:
                    calls = [
                        json.dumps({"tool": c.name, "arguments": c.arguments}) for c in message.tool_calls
                    ]
                    text = "\n".join(([message.content] if message.content else []) + calls)
                    out.append({"role": "assistant", "content": text})
                else:
                    out.append(
                        {
                            "role": "assistant",
                            "content": message.content,
                            "tool_calls": [
                                {
                                    "id": c.id,
                                    "type": "function",
                                    "function": {
                                        "name": c.name,
                                        "arguments": json.dumps(c.arguments),
                                    },
                                }
                                for c in message.tool_calls
                            ],
                        }
                    )
                continue
            if message.role == "tool":
                if self.json_tools:
                    name = message.name or call_names.get(message.tool_call_id or "", "tool")
                    out.append(
                        {
                            "role": "user",
                            "content": f"Result of tool '{name}' (call {message.tool_call_id}):\n"
                            f"{message.content or ''}",
                        }
                    )
                else:
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": message.tool_call_id or "",
                            "content": message.content or "",
                        }
                    )
                continue
            if jpegs:
                parts: list[dict[str, Any]] = []
                if message.content:
                    parts.append({"type": "text", "text": message.content})
                parts.extend({"type": "image_url", "image_url": {"url": _data_url(j)}} for j in jpegs)
                out.append({"role": message.role, "content": parts})
            else:
                out.append({"role": message.role, "content": message.content or ""})
        if system_extra:
            if out and out[0]["role"] == "system" and isinstance(out[0]["content"], str):
                out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{system_extra}"}
            else:
                out.insert(0, {"role": "system", "content": system_extra})
        return out

    def _cache_key(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None,
        params: dict[str, Any],
    ) -> str:
        normalised = []
        for message in messages:
            dumped = message.model_dump(mode="json", exclude={"images"})
            dumped["images"] = [usage.image_digest(img) for img in message.images]
            normalised.append(dumped)
        request = {
            "messages": normalised,
            "tools": [t.model_dump(mode="json") for t in tools or ()],
            "params": params,
        }
        return usage.request_key(self.endpoint.base_url, self.model, "chat", request)

    # -------------------------------------------------------------- parsing

    def _parse(
        self, response: Any, tools: Sequence[ToolSpec] | None, json_output: bool
    ) -> tuple[str | None, list[ToolCall]]:
        """The reply's answer text and tool calls (reasoning already removed from the text)."""
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise UnusableReply("the reply had no choices", "Answer the last message.", None)
        message = choices[0].message
        text, _ = split_reasoning(message.content)
        names = {t.name for t in tools or ()}
        calls: list[ToolCall] = []
        if self.json_tools and tools:
            text, calls = parse_tool_reply(text, names, tools)
        else:
            for i, raw_call in enumerate(message.tool_calls or []):
                fn = raw_call.function
                raw_args = fn.arguments or ""
                echo = f"(called tool {fn.name} with arguments {raw_args})"
                try:
                    args = loads_lenient(raw_args) if raw_args.strip() else {}
                except ValueError as exc:
                    raise UnusableReply(
                        f"the arguments of tool call '{fn.name}' are not valid JSON: {exc}; "
                        f"they were: {raw_args}",
                        "Call the tool again with its arguments as one valid JSON object.",
                        echo,
                    ) from None
                if not isinstance(args, dict):
                    raise UnusableReply(
                        f"the arguments of tool call '{fn.name}' must be a JSON object, got: {raw_args}",
                        "Call the tool again with its arguments as one JSON object.",
                        echo,
                    )
                name = check_offered(fn.name, names, echo)
                calls.append(ToolCall(id=raw_call.id or f"call_{i}", name=name, arguments=args))
            if not calls and tools:
                # Servers without a tool-call parser hand the call back as text; accept it.
                text, calls = read_tool_reply(text, names, tools)
        if not calls and not (text or "").strip():
            raise UnusableReply(
                "the reply was empty",
                TOOL_REPLY_FORMAT if (self.json_tools and tools) else "Answer the last message.",
                None,
            )
        if json_output and not calls:
            try:
                text = json.dumps(loads_lenient(text))
            except ValueError as exc:
                raise UnusableReply(
                    f"the reply is not the JSON that was asked for: {exc}",
                    "Reply again with one valid JSON object and nothing else.",
                    text,
                ) from None
        return text, calls

    def _complete_call_before_cut(self, message: Any, tools: Sequence[ToolSpec] | None) -> ChatReply | None:
        """The reply of a cut-off ``message`` that wrote a whole call to an offered tool first.

        A real Qwen2.5-Coder 1.5B wrote its call as text and then made up the tool's result until
        the output limit; asking again with twice the limit cost two minutes a turn on 2 cores and
        ended the same way. The call closed before the cut, so it is whole: it is taken, and what
        followed it is dropped (:func:`written_call`). Calls the server parsed from a cut-off reply
        and anything short of a closed call are never used.
        """
        if not tools:
            return None
        text, thought = split_reasoning(message.content)
        found = written_call(text, {t.name for t in tools})
        if found is None:
            return None
        reasoning_text, call = found
        log.info(
            "%s: reply cut off at the output limit after a whole %s call; using it", self.name, call.name
        )
        return ChatReply(
            text=reasoning_text,
            tool_calls=[call],
            model=self.model,
            finish_reason="length",
            reasoning=_reasoning(message, thought),
        )

    # -------------------------------------------------------------- the call

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """One chat turn (see :class:`ChatModel`); raises ``ValueError`` beyond ``max_images``."""
        started = time.monotonic()
        messages = list(messages)
        n_images = sum(len(m.images) for m in messages)
        if n_images and not self.accepts_images:
            raise ImagesNotSupported(
                f"{self.name} at {self.endpoint.base_url} does not take images (it refused them "
                f"earlier in this process: {self.facts.images_refused})"
            )
        if n_images > self.max_images:
            raise ValueError(
                f"{self.name}: {n_images} images in one request, the limit is {self.max_images} "
                f"(max_images in [models.options.{KIND}.{self.role}]); send fewer frames"
            )
        params = {
            "max_tokens": self.output_limit(max_tokens),
            "sampling": self.sampling(temperature),
            "reasoning_effort": self.opts["reasoning_effort"],
            "extra_body": self.opts["extra_body"],
            "json_output": json_output,
            "tool_calling": self.opts["tool_calling"],
            "max_image_side": self.max_image_side,
        }
        key = self._cache_key(messages, tools, params) if self.cache else None
        if self.cache and key:
            cached = self.cache.get(key)
            if cached is not None:
                reply = ChatReply.model_validate(cached)
                latency = time.monotonic() - started
                reply.usage = Usage(images=n_images, latency_s=latency, cache_hit=True)
                self._record(_Tally(), n_images, latency, cache_hit=True)
                return reply

        tally = _Tally()
        try:
            reply = self._ask(messages, tools, max_tokens, temperature, json_output, tally)
        except Exception as exc:
            self._record(tally, n_images, time.monotonic() - started, error=f"{type(exc).__name__}: {exc}")
            raise
        latency = time.monotonic() - started
        reply.usage = Usage(
            input_tokens=tally.input_tokens,
            cached_input_tokens=tally.cached_input_tokens,
            output_tokens=tally.output_tokens,
            images=n_images,
            latency_s=latency,
        )
        self._record(tally, n_images, latency)
        if self.cache and key:
            self.cache.put(key, model=self.model, kind="chat", value=reply.model_dump(mode="json"))
        return reply

    def _ask(
        self,
        messages: list[ChatMessage],
        tools: Sequence[ToolSpec] | None,
        max_tokens: int | None,
        temperature: float,
        json_output: bool,
        tally: _Tally,
    ) -> ChatReply:
        images = [[prepare_jpeg(img, self.max_image_side) for img in m.images] for m in messages]
        extra: list[str] = []
        if tools and self.json_tools:
            extra.append(tool_instructions(tools))
        if json_output:
            extra.append("Answer with one valid JSON object and nothing else.")
        wire = self._convert(messages, images, "\n\n".join(extra) or None)
        kwargs: dict[str, Any] = {"model": self.model}
        limit_param = self.limit_param()
        limit = self.output_limit(max_tokens)
        if limit is not None:
            kwargs[limit_param] = limit
        if self.opts["reasoning_effort"]:
            kwargs["reasoning_effort"] = str(self.opts["reasoning_effort"])
        if tools and not self.json_tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in tools
            ]
        if json_output and self.opts["response_format"] and not (tools and self.json_tools):
            kwargs["response_format"] = {"type": "json_object"}

        problem: UnusableReply | None = None
        reasked = cut_off_retried = False
        #: Parameters already fixed after a refusal in this call: each is retried once only.
        fixed: set[str] = set()
        while True:
            sent = list(wire)  # a snapshot: corrections are appended to ``wire`` afterwards
            # Sampling goes in extra_body: the client refuses keyword arguments it does not
            # know (top_k, min_p), and servers read the body the same either way.
            body = {**(self.opts["extra_body"] or {}), **self.sampling(temperature)}

            request = {**kwargs, "messages": sent, "extra_body": body or None}
            # A turn with tools is streamed and stopped once its text holds a whole call.
            streamed = bool(tools) and self._stops_after_call(json_output)

            def create(client: Any, request: dict[str, Any] = request, streamed: bool = streamed) -> Any:
                if streamed:
                    return read_until_call(client, request, {t.name for t in tools or ()}, split_reasoning)
                return client.chat.completions.create(**request)

            try:
                response = self.endpoint.call("chat/completions", create, tally)
            except ImagesNotSupported as exc:
                self.facts.images_refused = str(exc)
                endpoint_facts.say_once(
                    self.facts,
                    "images",
                    "%s at %s refused images; it is treated as text-only for the rest of this "
                    "process (frame tools say there is no vision model). Point models.vlm at a "
                    "vision model, or start the server with the model's projector (llama.cpp "
                    "--mmproj).",
                    self.name,
                    self.endpoint.base_url,
                )
                raise
            except EndpointError as exc:
                if streamed and self.facts.stream_refused is None and STREAM_REFUSAL.search(str(exc)):
                    # A server that will not stream (or take stream_options): read replies whole.
                    self.facts.stream_refused = str(exc)
                    endpoint_facts.say_once(
                        self.facts,
                        "stream",
                        "%s at %s refused a streamed request (%s); replies are read whole from now on",
                        self.name,
                        self.endpoint.base_url,
                        exc,
                    )
                    continue
                changed = self._accept_refusal(str(exc), kwargs, body, temperature, fixed)
                if changed is None:
                    raise
                limit_param = changed
                continue
            tally.add_usage(response)
            choices = getattr(response, "choices", None) or []
            finish = getattr(choices[0], "finish_reason", None) if choices else None
            if finish == "length":
                self._raise_if_context_full(response, kwargs.get(limit_param))
                salvaged = self._complete_call_before_cut(choices[0].message, tools)
                if salvaged is not None:
                    return salvaged
                # Otherwise a reply cut off at the output limit is never parsed: truncated JSON
                # can look repairable and a half-thought can look like an answer.
                if cut_off_retried:
                    raise OutputCutOff(
                        f"{self.name} at {self.endpoint.url('chat/completions')} was cut off at the "
                        f"output limit ({kwargs.get(limit_param, 'the server default')} tokens) "
                        f"twice; raise [agent] max_tokens or reasoning_tokens in "
                        f"[models.options.{KIND}.{self.role}]"
                    )
                cut_off_retried = True
                if limit_param in kwargs:
                    kwargs[limit_param] = 2 * int(kwargs[limit_param])
                log.info("%s: reply cut off at the output limit; asking again", self.name)
                wire.append({"role": "user", "content": CUT_OFF_NOTE})
                continue
            try:
                text, calls = self._parse(response, tools, json_output)
            except UnusableReply as exc:
                problem = exc
                log.info(
                    "%s: unusable reply (%s)%s",
                    self.name,
                    exc.problem,
                    "" if reasked else "; re-asking",
                )
                if reasked:
                    break
                reasked = True
                if exc.echo:
                    wire.append({"role": "assistant", "content": exc.echo})
                wire.append(
                    {
                        "role": "user",
                        "content": f"Your previous reply could not be used: {exc.problem}. {exc.fix}",
                    }
                )
                continue
            message = choices[0].message
            if getattr(response, "stopped_after_call", False):
                log.info("%s: reply stopped after its written call", self.name)
            _, thought = split_reasoning(message.content)
            reasoning = _reasoning(message, thought)
            return ChatReply(
                text=text,
                tool_calls=calls,
                model=getattr(response, "model", None) or self.model,
                finish_reason=finish,
                reasoning=reasoning,
            )
        assert problem is not None
        raise ModelOutputError(
            f"{self.name} at {self.endpoint.url('chat/completions')} gave an unusable reply twice "
            f"(the second time after being told the problem): {problem.problem}"
        )

    # -------------------------------------------------------------- what servers refuse

    def _accept_refusal(
        self,
        error: str,
        kwargs: dict[str, Any],
        body: dict[str, Any],
        temperature: float,
        fixed: set[str],
    ) -> str | None:
        """After an HTTP 400 naming the output-limit parameter or a sampling parameter, change the
        request to the accepted form (``max_completion_tokens``; the sampling parameter dropped),
        remember it for this endpoint and model, and return the limit parameter's name now in
        use; ``None`` when the error is no such refusal or this call already fixed it once."""
        if "HTTP 400" not in error:
            return None
        limit_param = self.limit_param()
        if limit_param == "max_tokens" and "max_tokens" not in fixed and LIMIT_PARAM_REFUSAL.search(error):
            # OpenAI's o-series and newer models: same meaning, new name.
            fixed.add("max_tokens")
            self.facts.max_tokens_param = "max_completion_tokens"
            if "max_tokens" in kwargs:
                kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            endpoint_facts.say_once(
                self.facts,
                "max_tokens",
                "%s refused max_tokens; sending max_completion_tokens from now on (set "
                'max_tokens_param = "max_completion_tokens" in [models.options.%s.%s] to silence this)',
                self.name,
                KIND,
                self.role,
            )
            return "max_completion_tokens"
        sampling = self.sampling(temperature)
        refused = [k for k in body if k in sampling and k not in fixed and re.search(rf"\b{k}\b", error)]
        if not refused:
            return None
        # o-series and some reasoning servers reject temperature (or any value but the default):
        # drop what was named and stop sending it to this model, rather than fail every call.
        fixed.update(refused)
        self.facts.refused_params.update(refused)
        endpoint_facts.say_once(
            self.facts,
            "sampling:" + ",".join(sorted(refused)),
            "%s refused %s; sending requests without it from now on (set sampling = {} or the "
            "accepted values in [models.options.%s.%s] to silence this)",
            self.name,
            ", ".join(refused),
            KIND,
            self.role,
        )
        return limit_param

    # -------------------------------------------------------------- a full context

    def _stops_after_call(self, json_output: bool) -> bool:
        """Whether a turn with tools is streamed and stopped once a whole call is written
        (:mod:`vidscope.models.call_stream`): ``stop_after_call`` is on, the reply is not asked to
        be one JSON object, and the server has not refused a streamed request.

        Every such turn is streamed, the first one included: a small local model writes its first
        call in a plan and then goes on (the real 1.5B's first DVD turn: a ~250-token plan with the
        call, then ~130 made-up result tokens to its limit). A native call in a stream is read to
        its end, so a model that calls natively gets the same reply."""
        return bool(self.opts["stop_after_call"]) and not json_output and self.facts.stream_refused is None

    def _raise_if_context_full(self, response: Any, limit: Any) -> None:
        """Raise :class:`ContextFull` when a ``finish_reason: "length"`` reply stopped because the
        context window filled, not at the output limit.

        llama.cpp's server answers HTTP 200 with ``finish_reason: "length"`` both when the reply
        reached ``max_tokens`` and when prompt plus reply reached its context size (``-c``, per
        slot); only the second is cured by a shorter conversation. Two signs tell them apart: the
        reply stopped short of the output limit it was given, or prompt plus reply reached the
        context window (``context_tokens``, else the size the server reports).
        """
        found = getattr(response, "usage", None)
        prompt = int(getattr(found, "prompt_tokens", 0) or 0)
        completion = int(getattr(found, "completion_tokens", 0) or 0)
        if not prompt and not completion:
            return  # no usage reported: nothing to tell the two apart by
        # Servers count a reply cut at its limit as the whole limit; a little slack absorbs
        # accounting that leaves out a special token or two.
        short_of_limit = limit is not None and 0 < completion < SHORT_OF_LIMIT * int(limit)
        window = self.context_window()
        at_window = window is not None and prompt + completion >= window - CONTEXT_SLACK
        if not (short_of_limit or at_window):
            return
        size = f"{window} tokens" if window else "its size"
        raise ContextFull(
            f"{self.name} at {self.endpoint.base_url}: the conversation filled the context window "
            f"({prompt} prompt + {completion} reply tokens, window {size}); a larger max_tokens "
            f"would not help: shorten the conversation or raise the server's context (llama.cpp "
            f"-c, vLLM --max-model-len) and context_tokens in [models.options.{KIND}.{self.role}]",
            prompt_tokens=prompt,
            completion_tokens=completion,
            context_tokens=window,
        )

    def context_window(self) -> int | None:
        """The model's context window in tokens: the ``context_tokens`` option, else what the
        server reports (looked up once per endpoint and model), else ``None``."""
        if self.opts["context_tokens"]:
            return int(self.opts["context_tokens"])
        if self.facts.context_tokens is None:
            self.facts.context_tokens = server_context_window(self.endpoint, self.model) or 0
        return self.facts.context_tokens or None

    def _record(
        self,
        tally: _Tally,
        images: int,
        latency: float,
        *,
        cache_hit: bool = False,
        error: str | None = None,
    ) -> None:
        usage.record_call(
            self.data_dir,
            role=self.role,
            backend=KIND,
            model=self.model,
            endpoint=self.endpoint.base_url,
            input_tokens=tally.input_tokens,
            output_tokens=tally.output_tokens,
            images=images,
            latency_s=latency,
            cache_hit=cache_hit,
            requests=tally.requests,
            prices=self.opts["prices"],
            error=error,
        )


# ---------------------------------------------------------------------------- captioning


class OpenAICaptioner:
    """Captions clips with a vision-language chat model; satisfies :class:`RegistryCaptioner`."""

    def __init__(self, chat: OpenAIChat, prompt: str, max_frames: int, max_tokens: int) -> None:
        self.chat_model = chat
        self.name = chat.name
        self.prompt = prompt
        self.max_frames = max(1, min(int(max_frames), chat.max_images))
        self.max_tokens = int(max_tokens)

    def _jpegs(self, frames: Sequence[Image]) -> list[bytes]:
        if len(frames) > self.max_frames:
            # Evenly spaced, first and last included: the clip's span matters more than density.
            picks = np.linspace(0, len(frames) - 1, self.max_frames).round().astype(int)
            frames = [frames[i] for i in picks]
        side = self.chat_model.max_image_side
        return [frame_to_jpeg(f, side) for f in frames]

    def messages(self, frames: Sequence[Image], context: str) -> list[ChatMessage]:
        """The conversation sent for one clip (exposed so the prompt can be inspected)."""
        jpegs = self._jpegs(frames)
        return [
            ChatMessage(role="system", content=self.prompt),
            ChatMessage(role="user", content=caption_request_text(len(jpegs), context), images=jpegs),
        ]

    def registry_messages(
        self,
        frames: Sequence[Image],
        context: str,
        registry: list[dict[str, Any]],
        span: tuple[float, float],
    ) -> list[ChatMessage]:
        """The conversation of a registry-carrying caption call (exposed for inspection)."""
        jpegs = self._jpegs(frames)
        return [
            ChatMessage(role="system", content=f"{self.prompt}\n\n{REGISTRY_INSTRUCTIONS}"),
            ChatMessage(
                role="user",
                content=registry_request_text(len(jpegs), context, registry, span),
                images=jpegs,
            ),
        ]

    def caption(self, frames: Sequence[Image], context: str) -> str:
        """A detailed narration of the clip."""
        if not len(frames) and not (context or "").strip():
            raise ValueError(f"{self.name}: nothing to caption (no frames and no context)")
        reply = self.chat_model.chat(self.messages(frames, context), max_tokens=self.max_tokens)
        caption = clean_caption(reply.text or "")
        if not caption:
            raise ModelOutputError(f"{self.name} returned an empty caption")
        return caption

    def caption_with_registry(
        self,
        frames: Sequence[Image],
        context: str,
        registry: list[dict[str, Any]],
        span: tuple[float, float],
    ) -> RegistryCaption:
        """The narration plus the subjects of this clip (see :class:`RegistryCaptioner`).

        The reply is asked for as JSON in the prompt but not with ``json_output``: that would make
        the backend re-ask (sending every frame again) and then fail on a prose reply, whose
        narration is still worth keeping. It is read leniently instead.
        """
        if not len(frames) and not (context or "").strip():
            raise ValueError(f"{self.name}: nothing to caption (no frames and no context)")
        reply = self.chat_model.chat(
            self.registry_messages(frames, context, registry, span), max_tokens=self.max_tokens
        )
        return parse_registry_reply(reply.text)


# ---------------------------------------------------------------------------- embeddings


class OpenAIEmbedder:
    """Text embeddings from ``/embeddings``; satisfies :class:`TextEmbedder` (rows L2-normalised).

    ``dim`` comes from the ``dim`` option or is discovered with the first request (reading it
    before any :meth:`embed` sends one short probe request).
    """

    def __init__(self, model: str, opts: dict[str, Any], data_dir: Path, endpoint: Endpoint) -> None:
        self.role = "text_embedder"
        self.model = model
        self.name = f"{KIND}:{model}"
        self.opts = opts
        self.data_dir = Path(data_dir)
        self.endpoint = endpoint
        self.batch = max(1, int(opts["embed_batch"]))
        self._dim: int | None = int(opts["dim"]) if opts["dim"] else None
        self.cache = usage.ResponseCache(self.data_dir) if opts["cache"] else None

    @property
    def dim(self) -> int:
        """Vector size."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _batch(self, texts: list[str], tally: _Tally) -> tuple[list[list[float]], bool]:
        key = (
            usage.request_key(self.endpoint.base_url, self.model, "embeddings", texts) if self.cache else None
        )
        if self.cache and key:
            cached = self.cache.get(key)
            if cached is not None:
                return cached, True
        response = self.endpoint.call(
            "embeddings",
            lambda client: client.embeddings.create(model=self.model, input=texts),
            tally,
        )
        tally.add_usage(response)
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise ModelOutputError(
                f"{self.name} at {self.endpoint.url('embeddings')} returned {len(data)} vectors "
                f"for {len(texts)} texts"
            )
        vectors = [list(map(float, d.embedding)) for d in data]
        if self.cache and key:
            self.cache.put(key, model=self.model, kind="embeddings", value=vectors)
        return vectors, False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An array (len(texts), dim) of float32, rows L2-normalised."""
        items = [str(t) for t in texts]
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        started = time.monotonic()
        tally = _Tally()
        rows: list[list[float]] = []
        hits = 0
        batches = 0
        try:
            for i in range(0, len(items), self.batch):
                vectors, hit = self._batch(items[i : i + self.batch], tally)
                rows.extend(vectors)
                hits += hit
                batches += 1
            matrix = np.asarray(rows, dtype=np.float32)
            width = matrix.shape[1] if matrix.ndim == 2 else 0
            if matrix.ndim != 2 or width == 0:
                raise ModelOutputError(f"{self.name} returned vectors of inconsistent size")
            if self._dim is not None and width != self._dim:
                raise ModelOutputError(
                    f"{self.name} returned {width}-d vectors, but dim = {self._dim} is configured "
                    f"in [models.options.{KIND}]; fix dim or the model name"
                )
        except Exception as exc:
            self._record(tally, time.monotonic() - started, False, f"{type(exc).__name__}: {exc}")
            raise
        self._dim = width
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.maximum(norms, 1e-12)
        self._record(tally, time.monotonic() - started, hits == batches, None)
        return matrix

    def _record(self, tally: _Tally, latency: float, cache_hit: bool, error: str | None) -> None:
        usage.record_call(
            self.data_dir,
            role=self.role,
            backend=KIND,
            model=self.model,
            endpoint=self.endpoint.base_url,
            input_tokens=tally.input_tokens,
            output_tokens=0,
            latency_s=latency,
            cache_hit=cache_hit,
            requests=tally.requests,
            prices=self.opts["prices"],
            error=error,
        )


# ---------------------------------------------------------------------------- factory


def served_model(role: str, base_url: str, api_key_env: str, timeout_s: float) -> str:
    """The model a server serves (vLLM and llama.cpp serve one), for specs that name none."""
    import openai

    client = openai.OpenAI(
        base_url=base_url,
        api_key=os.environ.get(api_key_env) or "not-needed",
        timeout=timeout_s,
        max_retries=1,
    )
    url = f"{base_url.rstrip('/')}/models"
    try:
        models = [m.id for m in client.models.list()]
    except Exception as exc:  # connection refused, 404, auth: all mean "cannot discover"
        raise BackendUnavailable(
            role,
            f"{KIND}:",
            f"GET {url}",
            f"The server did not list its models ({type(exc).__name__}); name the model, e.g. "
            f'{role} = "{KIND}:qwen2.5-vl-7b".',
        ) from exc
    if not models:
        raise BackendUnavailable(
            role,
            f"{KIND}:",
            f"GET {url}",
            f'The server lists no model; name one, e.g. {role} = "{KIND}:<model>".',
        )
    return str(models[0])


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> Any:
    """The backend for ``role`` (chat, captioner or text_embedder) serving model ``target``.

    No request is made here when ``target`` names the model; an unreachable server shows up on
    the first call, as :class:`BackendUnavailable` naming the URL. An empty target (``openai:``,
    the ``server`` profile's default) asks the server which model it serves.
    """
    if role not in ROLES:
        raise BackendUnavailable(
            role,
            f"{KIND}:{target}",
            "the openai backend",
            f"The openai backend serves the roles {', '.join(ROLES)}; configure another backend for {role}.",
        )
    opts = resolve_options(role, options or {})
    base_url = opts["base_url"] or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise BackendUnavailable(
            role,
            f"{KIND}:{target}",
            "base_url",
            f"Set base_url in [models.options.{KIND}] of vidscope.toml "
            f"(e.g. http://localhost:8000/v1) "
            f"or the OPENAI_BASE_URL environment variable.",
        )
    if not target:
        target = served_model(role, str(base_url), str(opts["api_key_env"]), float(opts["timeout_s"]))
    endpoint = Endpoint(
        role=role,
        model=target,
        base_url=str(base_url),
        api_key_env=str(opts["api_key_env"]),
        timeout_s=float(opts["timeout_s"]),
        max_retries=max(0, int(opts["max_retries"])),
        retry_base_s=float(opts["retry_base_s"]),
        retry_after_max_s=float(opts["retry_after_max_s"]),
        max_concurrency=int(opts["max_concurrency"]),
        azure_api_version=opts["azure_api_version"],
    )
    if role == "text_embedder":
        return OpenAIEmbedder(target, opts, data_dir, endpoint)
    chat = OpenAIChat(role, target, opts, data_dir, endpoint)
    if role == "captioner":
        return OpenAICaptioner(
            chat,
            str(opts["caption_prompt"] or DEFAULT_CAPTION_PROMPT),
            int(opts["caption_frames"]),
            int(opts["caption_max_tokens"]),
        )
    return chat
