"""AgentCVR's sub-agent actions over the real store: ``visual_query`` (the vision model over frames
sampled from several intervals of several videos, seen side by side; at most
:data:`~vidscope.agents.cvr.results.FRAME_BUDGET` frames in all) and ``audio_query``
(faster-whisper on exactly that interval).

The results are :mod:`vidscope.agents.cvr.results`' :class:`VisualQueryResult` /
:class:`AudioQueryResult`, which the simulated actions return too, so the master agent reads the
same shapes in the simulated and the real environment; the audio result adds the detected language.

Audio decoding follows the AgentCVR setup: beam 5, temperature 0, no conditioning on previous
text, no-speech threshold 0.6, language detected per interval (never fixed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import av
import numpy as np

from vidscope.agents import prompts
from vidscope.agents.cvr.results import (
    AudioQueryResult,
    HeardLine,
    LookedRange,
    VisualQueryResult,
    VisualTarget,
    frame_plan,
)
from vidscope.agents.frame_grid import fit_frames
from vidscope.agents.looks import read_look
from vidscope.agents.multi_video import no_vision_error, segment_frames, vision_model
from vidscope.agents.perception import checked_range, file_usable
from vidscope.agents.tools import ToolContext, ToolError, tool
from vidscope.core.errors import ImagesNotSupported
from vidscope.core.images import encode_jpeg
from vidscope.models import registry
from vidscope.models.protocols.chat import ChatMessage
from vidscope.models.whisper import SAMPLE_RATE, WhisperRecognizer

#: faster-whisper decoding options of the audio sub-agent (AgentCVR's settings).
AUDIO_DECODE = {
    "beam_size": 5,
    "temperature": 0.0,
    "condition_on_previous_text": False,
    "no_speech_threshold": 0.6,
    "language": None,  # detected on the interval itself
    "vad_filter": False,  # the interval is listened to whole, exactly as asked
}

NO_SPEECH = "no speech is heard in this interval"

#: What the master is told still works when visual_query cannot look (a text-only setup): with a
#: bare "no vision" note the real 1.5B master answered after one refused look, never listening.
HEAR_INSTEAD = (
    "audio_query still hears the videos: ask it for the intervals where what the question needs may be said."
)

VISUAL_SYSTEM = (
    "You are the visual sub-agent of a video question-answering system. You see frames sampled "
    "from one or more intervals of one or more videos, side by side, listed by video and time. "
    "Answer the focus question about them in a few plain sentences, naming the video and the time "
    'of what you see; say "no evidence" when the frames do not show it. ' + prompts.LOOK_FORMAT
)


@tool(
    # v3: several targets, frames per target, one look side by side; v4: a structured reply
    # (found, what, when) that says whether the look saw anything
    version=4,
    uses_models=("vlm",),
    settings=("cvr_frames", "cvr_frame_side", "max_tokens", "temperature"),
)
def visual_query(
    ctx: ToolContext,
    targets: Annotated[
        list[VisualTarget],
        "The ranges to look at side by side: [{video_id, t0, t1, frames}], at most 128 frames in all.",
    ],
    focus: Annotated[str, "What to look for (an action, object, person, colour, count...)."],
) -> VisualQueryResult:
    """Watch one or more intervals, of one or more videos, side by side and report what is seen
    there (actions, objects, people, text), each with its video and time, answering the focus.
    Says "no evidence" when nothing happens there."""
    model = vision_model(ctx, "visual_query", instead=HEAR_INSTEAD)
    side = ctx.config.cvr_frame_side
    checked, counts, note = frame_plan(targets, ctx.config.cvr_frames)
    looked: list[LookedRange] = []
    jpegs: list[bytes] = []
    times: list[float] = []
    lines: list[str] = []
    quality = ctx.settings.ingest.jpeg_quality
    for target, count in zip(checked, counts, strict=True):
        start, end, frames = segment_frames(
            ctx, target.video_id, target.t0, target.t1, budget=count, max_side=side
        )
        first = len(jpegs) + 1
        jpegs += [encode_jpeg(image, quality, max_side=side) for image in frames.images]
        times += [round(t, 2) for t in frames.times]
        looked.append(LookedRange(video_id=target.video_id, t0=start, t1=end, frames=len(frames.images)))
        lines.append(f"frames {first}-{len(jpegs)}: video {target.video_id}, {start:g}-{end:g} s")
    # More frames than the backend takes per request (its max_images) are stitched into labelled
    # grids, so the whole budget is still seen (as frame_inspect does).
    fitted = fit_frames(jpegs, times, int(getattr(model, "max_images", 0) or len(jpegs) or 1), quality)
    prompt = f"Focus: {focus}\n" + "\n".join(lines) + f"\n{fitted.describe()}"
    try:
        reply = model.chat(
            [
                ChatMessage(role="system", content=VISUAL_SYSTEM),
                ChatMessage(role="user", images=fitted.jpegs, content=prompt),
            ],
            max_tokens=ctx.config.max_tokens,
            temperature=ctx.config.temperature,
        )
    except ImagesNotSupported:  # learned on this call; the backend remembers it for the process
        raise ToolError(no_vision_error(ctx, "visual_query", HEAR_INSTEAD)) from None
    look = read_look(reply.text)
    return VisualQueryResult(
        targets=looked,
        focus=focus,
        answer=look.what or "no evidence",
        usage=reply.usage,
        note=note,
        found=look.found,
        seen_at=list(look.when),
    )


class HeardResult(AudioQueryResult):
    """What is heard in [t0, t1], with the language detected on that interval."""

    language: str | None = None
    language_probability: float | None = None
    source: str = ""

    def summary(self) -> str:
        return f"[{self.language or '?'}] {super().summary()}"


def interval_samples(path: Path, start: float, end: float) -> np.ndarray:
    """Mono float32 16 kHz samples of exactly [start, end] of the file's audio track."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    pieces: list[np.ndarray] = []
    with av.open(str(path)) as container:
        if not container.streams.audio:
            raise ToolError(f"{path.name} has no audio track")
        stream = container.streams.audio[0]
        container.seek(max(0, int((start - 1.0) * 1_000_000)))  # a second early: seeks land on packets
        first: float | None = None
        for frame in container.decode(stream):
            if frame.time is not None and first is None:
                first = float(frame.time)
            for out in resampler.resample(frame):
                pieces.append(out.to_ndarray().reshape(-1))
            if frame.time is not None and frame.time > end + 0.5:
                break
        for out in resampler.resample(None):
            pieces.append(out.to_ndarray().reshape(-1))
    samples = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    offset = first if first is not None else 0.0
    a = max(0, int(round((start - offset) * SAMPLE_RATE)))
    b = max(a, int(round((end - offset) * SAMPLE_RATE)))
    return samples[a:b].astype(np.float32, copy=False)


@tool(version=1, uses_models=("speech_recognizer",))
def audio_query(
    ctx: ToolContext,
    video_id: Annotated[str, "Id of the video."],
    t0: Annotated[float, "Start of the interval, in seconds."],
    t1: Annotated[float, "End of the interval, in seconds."],
) -> HeardResult:
    """Listen to [t0, t1] of a video and report what is said or heard there, with times. Says
    "no evidence" when nothing is heard there."""
    record = ctx.video(video_id)
    start, end = checked_range(record, [t0, t1], instant=False)
    recognizer = registry.speech_recognizer(ctx.settings)
    if isinstance(recognizer, WhisperRecognizer) and file_usable(record):
        samples = interval_samples(Path(record.path), start, end)
        heard = recognizer.transcribe_samples(samples, **AUDIO_DECODE)
        lines = [
            HeardLine(start=round(start + s.start, 2), end=round(min(end, start + s.end), 2), text=s.text)
            for s in heard.segments
            if s.text
        ]
        return HeardResult(
            video_id=video_id,
            t0=start,
            t1=end,
            answer=" ".join(line.text for line in lines) or NO_SPEECH,
            lines=lines,
            language=heard.language if lines else None,
            language_probability=heard.language_probability if lines else None,
            source=f"{recognizer.name} on the interval",
        )
    # No faster-whisper model, or the file is gone: the transcript stored at ingestion.
    rows = ctx.store.rows(
        ctx.store.transcripts,
        video_id=video_id,
        where=f"start < {end!r} AND `end` > {start!r}",
        columns=["start", "end", "text", "language"],
        order_by=["start"],
    ).to_pylist()
    if not rows and recognizer is None:
        raise ToolError(
            "audio_query needs a speech recogniser (models.speech_recognizer) or a stored transcript"
        )
    lines = [HeardLine(start=r["start"], end=r["end"], text=r["text"]) for r in rows]
    return HeardResult(
        video_id=video_id,
        t0=start,
        t1=end,
        answer=" ".join(line.text for line in lines) or NO_SPEECH,
        lines=lines,
        language=rows[0]["language"] if rows else None,
        source="stored transcript (speech stage)",
    )
