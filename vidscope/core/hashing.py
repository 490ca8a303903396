"""Stable content hashes of settings, prompts and rows: the keys of every cache and version check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def stable_hash(*parts: Any) -> str:
    """SHA-256 (16 hex chars) of a JSON rendering of ``parts``; pydantic models are dumped first."""

    def render(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        if isinstance(value, Path):
            return str(value)
        return value

    payload = json.dumps([render(p) for p in parts], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
