"""Transcribe speech (the ``speech`` stage) with the configured speech recogniser.

Silent videos are skipped, not failed; without a recogniser configured the stage is skipped and
drops any transcript an earlier config stored, so nothing downstream reads stale speech. When the
recogniser is configured but not installed (the embedded Whisper base is an optional extra), the
stage is marked unavailable with the fix, and the next run tries again.
"""

from __future__ import annotations

from vidscope.models import registry
from vidscope.models.protocols.speech_recognizer import SpeechRecognizer
from vidscope.tasks.decode import merge_ranges
from vidscope.tasks.stage import (
    Stage,
    StageContext,
    StageNotApplicable,
    StageOutcome,
    role_config,
)


def _run(ctx: StageContext) -> StageOutcome:
    if not ctx.video.has_audio:
        raise StageNotApplicable("the video has no audio track")
    recognizer: SpeechRecognizer | None = registry.speech_recognizer(ctx.settings)
    if recognizer is None:
        # A transcript made under an earlier config must not outlive it: the stages that read
        # speech re-run after this one and must find none (an evaluation without transcripts).
        ctx.store.replace_video_rows(ctx.store.transcripts, ctx.video.video_id, [])
        raise StageNotApplicable("no speech recogniser configured (models.speech_recognizer)")
    transcript = recognizer.transcribe(ctx.path)
    video_id = ctx.video.video_id
    rows = [
        {
            "video_id": video_id,
            "segment_index": i,
            "start": seg.start,
            "end": seg.end,
            "text": seg.text.strip(),
            "language": transcript.language,
            "avg_logprob": seg.avg_logprob,
            "words": [
                {"word": w.word, "start": w.start, "end": w.end, "probability": w.probability}
                for w in seg.words
            ],
        }
        for i, seg in enumerate(s for s in transcript.segments if s.text.strip())
    ]
    ctx.store.replace_video_rows(ctx.store.transcripts, video_id, rows)
    details: dict[str, object] = {"language": transcript.language, "recognizer": recognizer.name}
    lost = getattr(transcript, "lost", ())  # only backends that decode the audio themselves know
    if lost:
        ranges = merge_ranges(lost)
        details["lost"] = [[round(a, 2), round(b, 2)] for a, b in ranges]
        details["note"] = "corrupt audio skipped at " + ", ".join(f"{a:.1f}–{b:.1f} s" for a, b in ranges)
    return StageOutcome(rows=len(rows), details=details)


SPEECH = Stage(
    name="speech",
    version=1,
    run=_run,
    config=lambda s: role_config(s, "speech_recognizer", "recognizer"),
    needs=("probe",),
    description="speech to text with word timings (faster-whisper; VAD, language detection)",
)
