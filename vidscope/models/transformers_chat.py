"""Text chat models run in-process with transformers: a trained agent policy, as a ``ChatModel``.

``transformers-chat:<dir>`` loads ``AutoTokenizer`` + ``AutoModelForCausalLM`` from a local
directory (what ``vidscope train grpo`` saves) — or, for a vision-language checkpoint such as
AgentCVR's Qwen3-VL masters, which no causal-LM class takes, ``AutoModelForImageTextToText``
(the master reads and writes text only, so the vision tower is loaded and left unused) — or,
when the directory holds a LoRA adapter (``adapter_config.json``), its base model
(``base_model_name_or_path``, a local directory or the local Hugging Face cache) with the adapter
applied through ``peft``. Nothing is downloaded. The conversation is rendered with the tokenizer's
chat template, the reply sampled with ``generate``.

Offered tools are described in the system message (:func:`~vidscope.models.json_tools.tool_instructions`)
and the call the model writes is read back with :func:`~vidscope.models.json_tools.read_tool_reply`;
AgentCVR's master offers none (its JSON action protocol is in its own prompt).

Options (``[models.options.transformers-chat]``): ``device`` and ``dtype`` (``auto``, as
transformers-vlm), ``max_new_tokens`` (512).

:class:`TransformersChat` also serves GRPO rollouts (:mod:`vidscope.flows.training.train`): the
trainer's model generates through the same :meth:`TransformersChat.generate`, so the trained
policy is sampled in training exactly as it is deployed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidscope.core.errors import BackendUnavailable, install_extra
from vidscope.models.json_tools import read_tool_reply, tool_instructions
from vidscope.models.protocols.chat import ChatMessage, ChatReply, ToolSpec, Usage

KIND = "transformers-chat"


def template_messages(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] | None
) -> list[dict[str, str]]:
    """Messages as the chat-template dicts (text only); offered tools described in the system one."""
    rows = [{"role": m.role if m.role != "tool" else "user", "content": m.content or ""} for m in messages]
    if tools:
        offer = tool_instructions(tools)
        if rows and rows[0]["role"] == "system":
            rows[0] = {"role": "system", "content": f"{rows[0]['content']}\n\n{offer}"}
        else:
            rows.insert(0, {"role": "system", "content": offer})
    return rows


class TransformersChat:
    """A causal language model and its tokenizer answering chat turns (see ``ChatModel``)."""

    def __init__(self, model: Any, tokenizer: Any, *, name: str, max_new_tokens: int = 512) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.max_new_tokens = max_new_tokens
        #: A chat template to render with instead of the tokenizer's (GRPO: its prefix-preserving twin).
        self.chat_template: str | None = None

    def render(self, rows: list[dict[str, str]], *, generation_prompt: bool = True) -> str:
        """The conversation as the text the model reads (its chat template)."""
        extra = {"chat_template": self.chat_template} if self.chat_template else {}
        return str(
            self.tokenizer.apply_chat_template(
                rows, tokenize=False, add_generation_prompt=generation_prompt, **extra
            )
        )

    def encode(self, text: str) -> list[int]:
        """Token ids of rendered text (the template already holds the special tokens)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, ids: list[int], *, max_new_tokens: int, temperature: float) -> list[int]:
        """New token ids after ``ids``: sampled at ``temperature``, greedy at 0."""
        import torch

        device = next(self.model.parameters()).device
        sampling: dict[str, Any] = {"do_sample": True, "temperature": temperature} if temperature > 0 else {}
        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([ids], device=device),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
                max_new_tokens=max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                **sampling,
            )
        return [int(t) for t in out[0, len(ids) :].tolist()]

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        json_output: bool = False,
    ) -> ChatReply:
        """One turn (see ``ChatModel``): the reply text, and the call it writes to an offered tool."""
        started = time.perf_counter()
        ids = self.encode(self.render(template_messages(messages, tools)))
        new = self.generate(ids, max_new_tokens=max_tokens or self.max_new_tokens, temperature=temperature)
        text = str(self.tokenizer.decode(new, skip_special_tokens=True)).strip()
        finished = bool(new) and new[-1] == self.tokenizer.eos_token_id
        usage = Usage(input_tokens=len(ids), output_tokens=len(new), latency_s=time.perf_counter() - started)
        if tools:
            said, calls = read_tool_reply(text, {t.name for t in tools}, tools)
            return ChatReply(text=said, tool_calls=calls, model=self.name, finish_reason="stop", usage=usage)
        return ChatReply(
            text=text, model=self.name, finish_reason="stop" if finished else "length", usage=usage
        )


def load(model_dir: Path, options: dict[str, Any], role: str = "chat") -> tuple[Any, Any]:
    """The model and tokenizer in ``model_dir``: a saved model, or a LoRA adapter on its base."""
    try:
        import torch  # noqa: F401  # transformers' models need it; say so before loading
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise BackendUnavailable(
            role,
            f"{KIND}:{model_dir}",
            "importing torch and transformers",
            f"Install them: {install_extra('vlm')}.",
        ) from exc

    from vidscope.models.transformers_vlm import pick_device_and_dtype

    device, dtype = pick_device_and_dtype(options)
    auto_model = model_class(model_dir, role)
    adapter = model_dir / "adapter_config.json"
    if adapter.is_file():
        try:
            from peft import PeftModel  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise BackendUnavailable(
                "chat", str(model_dir), "a LoRA adapter", "Loading an adapter needs peft: pip install peft."
            ) from exc
        base = str(json.loads(adapter.read_text())["base_model_name_or_path"])
        model = model_class(Path(base), role).from_pretrained(base, dtype=dtype, local_files_only=True)
        model = PeftModel.from_pretrained(model, str(model_dir))
        tokenizer_dir = model_dir if (model_dir / "tokenizer_config.json").is_file() else Path(base)
    else:
        model = auto_model.from_pretrained(str(model_dir), dtype=dtype, local_files_only=True)
        tokenizer_dir = model_dir
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    model.eval()
    model.to(device)  # a device name is accepted
    return model, tokenizer


def model_class(model_dir: Path, role: str = "chat") -> Any:
    """The transformers auto class that loads the checkpoint in ``model_dir`` for text chat: the
    causal-LM one, else the image-text-to-text one (Qwen3-VL and other vision-language models,
    whose configuration no causal-LM class takes); a :class:`BackendUnavailable` naming the
    model type and the installed transformers when neither knows it."""
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
    )

    if not (model_dir / "config.json").is_file():  # a Hub id in the local cache: let from_pretrained say
        return AutoModelForCausalLM
    try:
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    except (ValueError, KeyError) as exc:  # a model type this transformers does not know
        raise BackendUnavailable(
            role,
            f"{KIND}:{model_dir}",
            f"reading its config with transformers {transformers.__version__}",
            f"{str(exc).splitlines()[0][:200]} Upgrade transformers.",
        ) from None
    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
        return AutoModelForCausalLM
    if type(config) in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING:
        return AutoModelForImageTextToText
    raise BackendUnavailable(
        role,
        f"{KIND}:{model_dir}",
        f"a text-generating model class in transformers {transformers.__version__}",
        f"model type {config.model_type!r} is neither a causal LM nor an image-text-to-text model.",
    )


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> TransformersChat:
    """Load ``transformers-chat:<local dir>`` (a saved policy or a LoRA adapter) for a chat role."""
    model_dir = Path(target).expanduser()
    if not model_dir.is_dir():
        raise BackendUnavailable(
            role, f"{KIND}:{target}", "a local directory", "Name a model directory; nothing is downloaded."
        )
    model, tokenizer = load(model_dir, options, role)
    return TransformersChat(
        model, tokenizer, name=f"{KIND}:{target}", max_new_tokens=int(options.get("max_new_tokens", 512))
    )
