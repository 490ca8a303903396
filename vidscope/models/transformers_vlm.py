"""Vision-language models run in-process with transformers (Qwen2.5-VL, Qwen3-VL, …).

``transformers-vlm:<dir or hub name>`` loads ``AutoProcessor`` + ``AutoModelForImageTextToText``
from a local directory or the local Hugging Face cache; nothing is ever downloaded. One loaded
model serves both the ``captioner`` role (batched clip captions) and the ``chat`` role. It has no
native tool-call output: when ``chat`` is offered tools they are described in the prompt (through
the chat template when it renders tools, as Qwen3-VL's does, else in the system message with the
reply format of :mod:`vidscope.models.json_tools`) and the model writes the call as JSON
text, which :func:`~vidscope.models.json_tools.read_tool_reply` turns into the reply's tool calls,
as for every :class:`~vidscope.models.protocols.chat.ChatModel`; a final ``{"answer": ...}`` object
comes back as its plain text.

Options (``[models.options.transformers-vlm]``): ``device`` (``auto``: cuda when available, else
cpu), ``dtype`` (``auto``: bfloat16 on cuda, float32 on cpu), ``max_new_tokens`` (captions, 768),
``chat_max_new_tokens`` (512), ``batch_size`` (clips per ``generate`` call, 4; used only when
``[ingest] caption_carry_subjects`` is off, as a carried registry makes captioning sequential),
``image_max_side`` (frames are shrunk to this longest side before the processor sees them, 640),
``caption_prompt``.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, install_extra
from vidscope.models import registry, usage
from vidscope.models.captioning import (
    DEFAULT_CAPTION_PROMPT,
    REGISTRY_INSTRUCTIONS,
    caption_request_text,
    clean_caption,
    parse_registry_reply,
    registry_request_text,
)
from vidscope.models.json_tools import read_tool_reply, tool_instructions
from vidscope.models.protocols.captioner import RegistryCaption
from vidscope.models.protocols.chat import ChatMessage, ChatReply, ToolCall, ToolSpec, Usage
from vidscope.models.protocols.image import Image

KIND = "transformers-vlm"


def resolve_local_model(role: str, spec: str, target: str) -> str:
    """A local directory holding ``target``: the directory itself, or its snapshot in the HF cache.

    Raises :class:`BackendUnavailable` naming what was tried; never touches the network.
    """
    if not target:
        raise BackendUnavailable(
            role,
            spec,
            "an empty model target",
            f"Name a model directory, e.g. {registry.parse_spec(spec)[0]}:/models/<model-name>.",
        )
    path = Path(target).expanduser()
    if path.is_dir():
        return str(path.resolve())
    # Hub ids look like "org/name"; anything else (absolute, ./, ~, more slashes) is a path.
    looks_like_path = target.startswith(("/", ".", "~")) or target.count("/") != 1 or path.exists()
    if looks_like_path:
        raise BackendUnavailable(
            role,
            spec,
            f"the directory '{path}' (it does not exist or is not a directory)",
            "Point the spec at a directory holding config.json and the weights (download it on a "
            "machine with hub access, e.g. `hf download <repo> --local-dir <dir>`).",
        )
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError as exc:  # transformers always brings it; be explicit anyway
        raise BackendUnavailable(
            role, spec, "huggingface_hub", f"Install it: {install_extra('vlm')}."
        ) from exc
    try:
        return str(snapshot_download(target, local_files_only=True))
    except Exception as exc:  # LocalEntryNotFoundError and friends; all mean "not cached"
        raise BackendUnavailable(
            role,
            spec,
            f"'{target}' as a local directory and in the Hugging Face cache ({HF_HUB_CACHE})",
            f"Download it where the hub is reachable (`hf download {target}`) and copy the cache "
            "over, or give the model's local directory instead.",
        ) from exc


def pick_device_and_dtype(options: dict[str, Any]) -> tuple[str, Any]:
    """``(device, torch dtype)`` from the ``device``/``dtype`` options (``auto`` by default)."""
    import torch

    device = str(options.get("device", "auto"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype_name = str(options.get("dtype", "auto"))
    if dtype_name == "auto":
        # bf16 halves memory on GPUs; on CPU it is slow and lossy, so stay in float32 there.
        return device, torch.bfloat16 if device.startswith("cuda") else torch.float32
    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(
            f"unknown dtype {dtype_name!r} in [models.options.{KIND}]; use auto, float32, bfloat16 or float16"
        )
    return device, dtype


def _to_pil(image: Image | bytes, max_side: int) -> Any:
    """An RGB PIL image from a uint8 array or encoded bytes, longest side shrunk to <= max_side."""
    from PIL import Image as PILImage

    if isinstance(image, bytes | bytearray):
        pil = PILImage.open(io.BytesIO(image)).convert("RGB")
    else:
        array = np.asarray(image)
        if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
            raise ValueError(
                f"expected an RGB uint8 image of shape (h, w, 3), got {array.shape} {array.dtype}"
            )
        pil = PILImage.fromarray(array)
    if max(pil.size) > max_side:
        pil.thumbnail((max_side, max_side))
    return pil


class TransformersVLM:
    """A local image-text-to-text model: a :class:`Captioner` and a :class:`ChatModel` in one."""

    supports_tools = False  # no native tool-call output: calls are read from the JSON text it writes
    model: Any
    processor: Any

    def __init__(
        self, name: str, model_dir: str, options: dict[str, Any], role: str, data_dir: Path | None = None
    ) -> None:
        try:
            import torch  # noqa: F401
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as exc:
            raise BackendUnavailable(
                role,
                name,
                "importing torch and transformers",
                f"Install them: {install_extra('vlm')}.",
            ) from exc
        self.name = name
        self.role = role
        self.model_dir = model_dir
        #: Where calls are logged (model_calls table); None (direct construction) logs nothing.
        self.data_dir = data_dir
        self.prices = options.get("prices")
        self.device, self.dtype = pick_device_and_dtype(options)
        # A detailed narration plus the clip's registry entries (see models/captioning.py).
        self.max_new_tokens = int(options.get("max_new_tokens", 768))
        self.chat_max_new_tokens = int(options.get("chat_max_new_tokens", 512))
        self.batch_size = max(1, int(options.get("batch_size", 4)))
        self.image_max_side = int(options.get("image_max_side", 640))
        self.caption_prompt = str(options.get("caption_prompt", DEFAULT_CAPTION_PROMPT))
        try:
            self.processor = AutoProcessor.from_pretrained(model_dir, local_files_only=True)
            self.model = AutoModelForImageTextToText.from_pretrained(
                model_dir, dtype=self.dtype, local_files_only=True
            )
        except Exception as exc:  # OSError, ValueError (unknown architecture), KeyError, …
            raise BackendUnavailable(
                role,
                name,
                f"AutoProcessor + AutoModelForImageTextToText from '{model_dir}' ({exc})",
                "Use an image-text-to-text checkpoint (e.g. Qwen2.5-VL-*-Instruct) and a "
                "transformers version that knows its architecture.",
            ) from exc
        if not getattr(self.processor, "chat_template", None):
            raise BackendUnavailable(
                role,
                name,
                f"the processor's chat template in '{model_dir}'",
                "This checkpoint has no chat template; use an instruction-tuned (-Instruct) model.",
            )
        # Templates that render a `tools` variable (Qwen2.5/3 families) describe tools the way the
        # model was trained on; others get our own instructions in the system message.
        self.template_renders_tools = "tools" in str(self.processor.chat_template)
        self.model.to(self.device).eval()
        self.tokenizer = self.processor.tokenizer
        # Decoder-only generation needs the prompt flush against the new tokens.
        self.tokenizer.padding_side = "left"
        self._stop_ids = self._collect_stop_ids()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ generation core

    def _collect_stop_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.model.config):
            value = getattr(source, "eos_token_id", None) if source is not None else None
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list | tuple):
                ids.update(int(v) for v in value)
        for token_id in (self.tokenizer.eos_token_id, self.tokenizer.pad_token_id):
            if token_id is not None:
                ids.add(int(token_id))
        return ids

    def _generate(
        self,
        conversations: list[list[dict[str, Any]]],
        images: list[list[Any]],
        max_new_tokens: int,
        temperature: float,
        tools: Sequence[ToolSpec] | None = None,
    ) -> list[tuple[str, int, int, bool]]:
        """One batched ``generate``; per conversation (text, input tokens, new tokens, stopped).

        ``images`` holds each conversation's images in order. They are passed nested, one list per
        conversation, which every processor accepts (Qwen flattens them; Idefics/SmolVLM need it).
        """
        import torch

        template_kwargs: dict[str, Any] = {}
        if tools and self.template_renders_tools:
            template_kwargs["tools"] = [
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
        texts = [
            self.processor.apply_chat_template(
                c, add_generation_prompt=True, tokenize=False, **template_kwargs
            )
            for c in conversations
        ]
        inputs = self.processor(
            text=texts, images=images if any(images) else None, padding=True, return_tensors="pt"
        )
        inputs = inputs.to(self.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": float(temperature)}
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = next(iter(self._stop_ids), 0)
        started = time.perf_counter()
        with self._lock, torch.inference_mode():
            output = self.model.generate(
                **inputs, max_new_tokens=max_new_tokens, pad_token_id=pad_id, **sampling
            )
        latency = time.perf_counter() - started
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output[:, prompt_len:].tolist()
        input_counts = inputs["attention_mask"].sum(dim=1).tolist()
        results = []
        for row, n_in in zip(new_tokens, input_counts, strict=True):
            used = row
            stopped = False
            for i, token in enumerate(row):
                if token in self._stop_ids:
                    used, stopped = row[:i], True
                    break
            text = self.tokenizer.decode(used, skip_special_tokens=True).strip()
            results.append((text, int(n_in), len(used), stopped))
        for (_, n_in, n_out, _), conversation_images in zip(results, images, strict=True):
            self._record(n_in, n_out, len(conversation_images), latency / len(results))
        return results

    def _record(self, input_tokens: int, output_tokens: int, images: int, latency_s: float) -> None:
        """Log one conversation of a ``generate`` call like every other model call."""
        if self.data_dir is None:
            return
        usage.record_call(
            self.data_dir,
            role=self.role,
            backend=KIND,
            model=self.name,
            endpoint=f"local:{self.model_dir}",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            images=images,
            latency_s=latency_s,
            requests=0,
            prices=self.prices,
        )

    # ------------------------------------------------------------------ Captioner

    def _caption_conversation(
        self, frames: Sequence[Image], text: str
    ) -> tuple[list[dict[str, Any]], list[Any]]:
        """One user turn: the frames, then the instructions and the request (as captioning always
        did here: not every chat template accepts a system turn)."""
        pil_frames = [_to_pil(f, self.image_max_side) for f in frames]
        content = [{"type": "image"} for _ in pil_frames] + [{"type": "text", "text": text}]
        return [{"role": "user", "content": content}], pil_frames

    def caption_batch(self, clips: Sequence[Sequence[Image]], contexts: Sequence[str]) -> list[str]:
        """One caption per clip; clips are run ``batch_size`` at a time through one ``generate``."""
        if len(clips) != len(contexts):
            raise ValueError(f"caption_batch got {len(clips)} clips but {len(contexts)} contexts")
        captions: list[str] = []
        for start in range(0, len(clips), self.batch_size):
            conversations: list[list[dict[str, Any]]] = []
            images: list[list[Any]] = []
            for frames, context in zip(
                clips[start : start + self.batch_size],
                contexts[start : start + self.batch_size],
                strict=True,
            ):
                text = f"{self.caption_prompt}\n\n{caption_request_text(len(frames), context)}"
                conversation, pil_frames = self._caption_conversation(frames, text)
                conversations.append(conversation)
                images.append(pil_frames)
            results = self._generate(conversations, images, self.max_new_tokens, 0.0)
            captions.extend(clean_caption(text) for text, *_ in results)
        return captions

    def caption(self, frames: Sequence[Image], context: str) -> str:
        """A caption for one clip from a few of its frames plus speech/on-screen text."""
        return self.caption_batch([frames], [context])[0]

    def caption_with_registry(
        self,
        frames: Sequence[Image],
        context: str,
        registry: list[dict[str, Any]],
        span: tuple[float, float],
    ) -> RegistryCaption:
        """The narration plus this clip's subjects (see :class:`RegistryCaptioner`): one clip per
        ``generate``, since each call needs the registry the previous one produced."""
        request = registry_request_text(len(frames), context, registry, span)
        text = f"{self.caption_prompt}\n\n{REGISTRY_INSTRUCTIONS}\n\n{request}"
        conversation, pil_frames = self._caption_conversation(frames, text)
        reply, *_ = self._generate([conversation], [pil_frames], self.max_new_tokens, 0.0)[0]
        return parse_registry_reply(reply)

    # ------------------------------------------------------------------ ChatModel

    def _template_messages(
        self,
        messages: Sequence[ChatMessage],
        json_output: bool,
        tools: Sequence[ToolSpec] | None = None,
    ) -> tuple[list[dict[str, Any]], list[Any]]:
        """Chat-template dicts plus the images they reference, in order.

        Tool results and assistant tool calls become plain text (calls in the JSON the model is
        asked to write), because chat templates disagree on (or reject) the ``tool`` role.
        """
        converted: list[dict[str, Any]] = []
        images: list[Any] = []
        for message in messages:
            role, text = message.role, message.content or ""
            if role == "tool":
                role = "user"
                text = f"Result of tool {message.name or message.tool_call_id or ''}:\n{text}"
            elif role == "assistant" and message.tool_calls:
                calls = [json.dumps({"tool": c.name, "arguments": c.arguments}) for c in message.tool_calls]
                text = "\n".join([text, *calls] if text else calls)
            content: list[dict[str, Any]] = []
            for blob in message.images:
                images.append(_to_pil(blob, self.image_max_side))
                content.append({"type": "image"})
            content.append({"type": "text", "text": text})
            converted.append({"role": role, "content": content})
        if tools and not self.template_renders_tools:
            instructions = tool_instructions(tools)
            if converted and converted[0]["role"] == "system":
                first = converted[0]["content"][-1]
                first["text"] = f"{first['text']}\n\n{instructions}".strip()
            else:
                converted.insert(0, {"role": "system", "content": [{"type": "text", "text": instructions}]})
        if json_output:
            for item in reversed(converted):
                if item["role"] == "user":
                    item["content"][-1]["text"] += "\n\nAnswer with a single JSON object and nothing else."
                    break
        return converted, images

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """One turn (see :class:`ChatModel`). Offered ``tools`` are described in the prompt; the
        call the model writes as JSON comes back in ``reply.tool_calls`` and an ``{"answer": ...}``
        reply as the plain answer."""
        started = time.perf_counter()
        conversation, images = self._template_messages(messages, json_output, tools)
        limit = int(max_tokens or self.chat_max_new_tokens)
        text, n_in, n_out, stopped = self._generate([conversation], [images], limit, temperature, tools)[0]
        reply_text: str | None = text
        calls: list[ToolCall] = []
        if tools:
            reply_text, calls = read_tool_reply(text, {t.name for t in tools}, tools)
        return ChatReply(
            text=reply_text,
            tool_calls=calls,
            model=self.name,
            finish_reason="stop" if stopped else "length",
            usage=Usage(
                input_tokens=n_in,
                output_tokens=n_out,
                images=len(images),
                latency_s=time.perf_counter() - started,
            ),
        )


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> TransformersVLM:
    """Load ``transformers-vlm:<dir or cached hub name>`` for the captioner or chat role."""
    spec = f"{KIND}:{target}"
    model_dir = resolve_local_model(role, spec, target)
    return TransformersVLM(spec, model_dir, options, role, data_dir)
