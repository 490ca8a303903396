"""What each configured model endpoint can really do, found with tiny real requests.

``vidscope models --check`` calls :func:`check_roles`: for every role it loads the backend and,
for chat-like roles, sends a few requests of a handful of tokens each: a plain answer, a tool call
(planner, chat), one image and then as many images as the backend would send at most (vlm,
captioner, and chat when it is the one looking at frames). Each role becomes one
:class:`RoleCheck` line; a server that is down, slow or refuses something gives a short reason,
never a traceback. Probes bypass the response cache (an answer from the cache proves nothing) and
use a short timeout with no retries, so a dead server costs seconds, not minutes.

A role fails (``ok`` False, and ``vidscope models --check`` exits 1) when any probe it needs
fails or times out; the line names that probe and the option that fixes it. Only two answers are
facts rather than failures: a chat model serving as the vision model that refuses images (it is
text-only; frame tools will say there is no vision model) and a tool call written as text where
vidscope reads it anyway.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

from vidscope.core.errors import ImagesNotSupported
from vidscope.core.settings import Settings
from vidscope.models import registry
from vidscope.models.protocols.chat import ChatMessage, ChatModel, ToolSpec

#: The tool the tool-calling probe offers.
PROBE_TOOL = ToolSpec(
    name="report_colour",
    description="Report a colour name.",
    parameters={
        "type": "object",
        "properties": {"colour": {"type": "string", "description": "A colour name."}},
        "required": ["colour"],
    },
)

#: Output tokens per probe (a reasoning model's ``reasoning_tokens`` come on top).
PROBE_TOKENS = 32

#: vLLM's refusal over ``--limit-mm-per-prompt`` ("At most 4 image(s) may be provided ...").
_IMAGE_LIMIT = re.compile(r"at most (\d+) image", re.IGNORECASE)

#: Roles whose chat model is probed, and what is asked of it: (tools, images).
_CHAT_PROBES: dict[str, tuple[bool, bool]] = {
    "chat": (True, True),
    "planner": (True, False),  # never sent images, so their support is not asked
    "vlm": (False, True),
}


@dataclass
class RoleCheck:
    """One role's verdict: ``ok`` is None for a role that is not configured or served by another."""

    role: str
    spec: str | None
    ok: bool | None
    summary: str


def probe_settings(settings: Settings, timeout_s: float) -> Settings:
    """``settings`` with the OpenAI-compatible backend set for probing: ``timeout_s`` per request,
    no retries, no response cache (also in every role's sub-table, which would override them)."""
    copied = settings.model_copy(deep=True)
    table = copied.models.options.setdefault("openai", {})
    overrides = {"timeout_s": float(timeout_s), "max_retries": 0, "cache": False}
    table.update(overrides)
    for key, value in table.items():
        if key in registry.ROLES and isinstance(value, dict):  # not prices, sampling, extra_body
            value.update(overrides)
    return copied


def _reason(exc: BaseException) -> str:
    """An exception as one short line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, TimeoutError):  # the probe's own limit is --timeout, not timeout_s
        text += " (probe limit: vidscope models --check --timeout SECONDS)"
    return text if len(text) <= 300 else text[:297] + "..."


def _table(model: ChatModel) -> str:
    """The options table that configures ``model`` (its role's sub-table: it overrides the rest)."""
    return f"[models.options.openai.{getattr(model, 'role', 'chat')}]"


def _tiny_jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (220, 30, 30)).save(buf, "JPEG")
    return buf.getvalue()


def _ask(model: ChatModel, prompt: str, images: list[bytes] | None = None, **kw: Any) -> Any:
    message = ChatMessage(role="user", content=prompt, images=images or [])
    return model.chat([message], max_tokens=PROBE_TOKENS, **kw)


def probe_chat(
    model: ChatModel, *, tools: bool, images: bool, images_required: bool = True
) -> tuple[bool, str]:
    """(whether every probe passed, a summary of what works) from tiny real requests.

    ``images_required``: the model is the configured vision model, so refusing images is a
    failure; otherwise (the chat model standing in for an unset vlm) it is reported as a fact.
    """
    facts: list[str] = []
    try:
        reply = _ask(model, "Reply with the single word: ok")
    except Exception as exc:  # down, slow, refused: the rest would fail the same way
        return False, f"chat: no ({_reason(exc)})"
    facts.append("chat: yes" + (" (reasoning seen)" if reply.reasoning else ""))
    ok = True
    if tools:
        try:
            reply = _ask(model, "Call report_colour with colour red.", tools=[PROBE_TOOL])
            called = any(c.name == PROBE_TOOL.name for c in reply.tool_calls)
            facts.append("tools: yes" if called else "tools: no (answered in text)")
        except Exception as exc:
            ok = False
            hint = ""
            if "tool" in str(exc).lower() and "HTTP 400" in str(exc):
                hint = f'; set tool_calling = "json" in {_table(model)}'
            facts.append(f"tools probe failed: {_reason(exc)}{hint}")
    if images:
        passed, fact = _probe_images(model, images_required)
        ok = ok and passed
        facts.append(fact)
    return ok, "; ".join(facts)


def _probe_images(model: ChatModel, required: bool) -> tuple[bool, str]:
    """Whether the model takes one image, then whether it takes as many as vidscope would send."""
    jpeg = _tiny_jpeg()
    try:
        _ask(model, "What colour is this image? One word.", [jpeg])
    except ImagesNotSupported as exc:
        if required:
            return False, f"image probe failed: the model refuses images ({_reason(exc)})"
        # The backend now remembers the model as text-only, as it would during a question.
        return True, (
            f"images: no, text-only ({_reason(exc)}); frame tools will say there is no vision "
            "model: set models.vlm to look at frames"
        )
    except Exception as exc:
        return False, f"image probe failed: {_reason(exc)}"
    most = int(getattr(model, "max_images", 1))
    if most <= 1:
        return True, "images: 1 per request"
    try:
        _ask(model, f"How many images are there? ({most} identical squares) One number.", [jpeg] * most)
    except Exception as exc:
        limit = _IMAGE_LIMIT.search(str(exc))
        if limit:
            return False, (
                f"images probe failed: at most {limit.group(1)} per request (server limit), "
                f"{most} sent; set max_images = {limit.group(1)} in {_table(model)} or raise "
                "the server's limit (vLLM --limit-mm-per-prompt)"
            )
        return False, f"images probe failed: 1 works, {most} refused ({_reason(exc)})"
    return True, f"images: yes, {most} per request (max_images)"


def check_role(settings: Settings, role: str) -> RoleCheck:
    """Load ``role``'s backend and probe what it can do (see the module docstring)."""
    spec = getattr(settings.models, role)
    if not spec:
        served_by = registry.FALLBACKS.get(role)
        if served_by and registry.effective_spec(settings, role):
            return RoleCheck(role, None, None, f"served by {served_by} (not set)")
        return RoleCheck(role, None, None, "not configured")
    try:
        backend = registry.LOADERS[role](settings)
        if role in _CHAT_PROBES and isinstance(backend, ChatModel):
            tools, images = _CHAT_PROBES[role]
            # chat looks at frames only while no vlm is set
            images = images and not (role == "chat" and settings.models.vlm)
            ok, summary = probe_chat(backend, tools=tools, images=images, images_required=role == "vlm")
            return RoleCheck(role, spec, ok, summary)
        inner = getattr(backend, "chat_model", None)
        if role == "captioner" and inner is not None and callable(getattr(inner, "chat", None)):
            ok, summary = probe_chat(inner, tools=False, images=True)
            return RoleCheck(role, spec, ok, summary)
        load = getattr(backend, "load", None)
        if callable(load):  # backends that load lazily: make the check real
            load()
        embed = getattr(backend, "embed", None)
        if callable(embed):
            vectors = embed(["probe"])
            return RoleCheck(role, spec, True, f"embeddings: yes, {vectors.shape[1]}-d")
        return RoleCheck(role, spec, True, f"loads ({getattr(backend, 'name', spec)})")
    except Exception as exc:  # a probe reports; it never raises
        return RoleCheck(role, spec, False, _reason(exc))


def check_roles(settings: Settings, timeout_s: float = 20.0) -> list[RoleCheck]:
    """Every role, in ``vidscope models`` order, probed with ``timeout_s`` per request."""
    probing = probe_settings(settings, timeout_s)
    return [check_role(probing, role) for role in registry.ROLES]
