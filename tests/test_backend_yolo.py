"""The ultralytics YOLO detector and ByteTrack tracker on real video frames, with random weights.

Random weights find nothing, so the test raises the class-score biases of a random YOLOv8n before
saving it as a ``.pt``: every anchor then scores ~0.73 and the full decode, NMS and tracking paths
run on many boxes. The boxes mean nothing; the test checks types, geometry and id bookkeeping only.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from vidscope.core.errors import BackendUnavailable
from vidscope.core.settings import Settings, disable_telemetry
from vidscope.models import registry
from vidscope.models.protocols.object_detector import Detection, ObjectDetector

disable_telemetry()
os.environ.setdefault("YOLO_OFFLINE", "1")

# batch_size 2: three frames take two forward passes, so chunking is exercised too.
OPTIONS = {"imgsz": 320, "conf": 0.5, "max_det": 40, "batch_size": 2}


@pytest.fixture(scope="module")
def video_frames(shared_videos: Path) -> list[np.ndarray]:
    """The first 10 frames (768x432) of the CC BY 4.0 car-detection sample, as RGB arrays."""
    import av

    out = []
    with av.open(str(shared_videos / "car-detection.mp4")) as container:
        for frame in container.decode(video=0):
            out.append(frame.to_ndarray(format="rgb24"))
            if len(out) == 10:
                break
    return out


@pytest.fixture(scope="module")
def eager_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from ultralytics import YOLO

    torch.manual_seed(0)
    model = YOLO("yolov8n.yaml")
    with torch.no_grad():
        for branch in model.model.model[-1].cv3:  # the class-score branch of each detection scale
            branch[-1].bias.fill_(1.0)
    path = tmp_path_factory.mktemp("yolo") / "eager-yolov8n.pt"
    model.save(path)
    return path


@pytest.fixture(scope="module")
def detector(eager_weights: Path):
    from vidscope.models import yolo

    return yolo.from_spec("object_detector", str(eager_weights), OPTIONS, Path("unused"))


def assert_valid(detections: list[Detection], height: int, width: int, names: set[str]) -> None:
    for d in detections:
        assert isinstance(d, Detection)
        x1, y1, x2, y2 = d.box
        assert all(isinstance(v, float) for v in d.box)
        assert -1 <= x1 <= x2 <= width + 1 and -1 <= y1 <= y2 <= height + 1
        assert 0.5 <= d.score <= 1.0  # the conf option is applied
        assert d.label in names


def test_detect_on_video_frames(detector, video_frames) -> None:
    assert isinstance(detector, ObjectDetector)
    height, width = video_frames[0].shape[:2]
    names = {str(n) for n in detector.model.names.values()}
    results = detector.detect(video_frames[:3])
    assert len(results) == 3
    assert all(0 < len(r) <= OPTIONS["max_det"] for r in results)
    for r in results:
        assert_valid(r, height, width, names)
        assert all(d.track_id is None for d in r)
    assert detector.detect([]) == []


def test_track_over_ten_consecutive_frames_gives_persistent_int_ids(detector, video_frames) -> None:
    height, width = video_frames[0].shape[:2]
    names = {str(n) for n in detector.model.names.values()}
    results = detector.detect(video_frames, track=True)
    assert len(results) == 10
    seen: list[set[int]] = []
    for frame_detections in results:
        assert_valid(frame_detections, height, width, names)
        ids = [d.track_id for d in frame_detections]
        # Within one frame, either all are tracked (ints) or none are.
        assert all(isinstance(i, int) for i in ids) or all(i is None for i in ids)
        tracked = [i for i in ids if i is not None]
        assert len(tracked) == len(set(tracked))  # one box per track per frame
        seen.append(set(tracked))
    assert any(seen), "ByteTrack confirmed no track in 10 frames"
    assert seen[-1] & seen[-2], "no track id carried over between consecutive frames"
    # A new call starts a new sequence: ids restart rather than continuing the previous video.
    first_again = detector.detect(video_frames[:2], track=True)
    ids_again = {d.track_id for frame in first_again for d in frame if d.track_id is not None}
    assert ids_again and min(ids_again) == 1
    assert all(i == j for i, j in zip(sorted(ids_again), range(1, len(ids_again) + 1), strict=False))


def test_prompts_need_open_vocabulary_weights(detector, video_frames) -> None:
    with pytest.raises(ValueError, match="fixed classes.*YOLO-World or YOLOE"):
        detector.detect(video_frames[:1], prompts=["red car"])


def test_classes_option_filters_by_name_or_index(eager_weights: Path, video_frames) -> None:
    from vidscope.models import yolo

    names = yolo.from_spec("object_detector", str(eager_weights), OPTIONS, Path("unused")).model.names
    keep = [str(names[0]), 5]
    filtered = yolo.from_spec(
        "object_detector", str(eager_weights), {**OPTIONS, "classes": keep}, Path("unused")
    )
    assert filtered.class_ids == [0, 5]
    labels = {d.label for d in filtered.detect(video_frames[:1])[0]}
    assert labels <= {str(names[0]), str(names[5])}
    with pytest.raises(ValueError, match="'zebra-unicorn' is not a class"):
        yolo.from_spec("object_detector", str(eager_weights), {"classes": ["zebra-unicorn"]}, Path("unused"))


def test_random_yaml_model_through_the_registry(tmp_path: Path, video_frames) -> None:
    settings = Settings(
        data_dir=tmp_path,
        models={
            "object_detector": "yolo:yolov8n.yaml",
            "options": {"yolo": {"imgsz": 320, "conf": 0.001}},
        },
    )
    registry.clear_cache()
    try:
        detector = registry.object_detector(settings)
    finally:
        registry.clear_cache()
    assert detector.name == "yolo:yolov8n.yaml" and detector.imgsz == 320
    results = detector.detect(video_frames[:2])
    assert len(results) == 2 and all(isinstance(r, list) for r in results)


def test_missing_weights_file_is_refused_before_any_download(tmp_path: Path) -> None:
    from vidscope.models import yolo

    missing = tmp_path / "yolo11n.pt"
    with pytest.raises(BackendUnavailable) as info:
        yolo.from_spec("object_detector", str(missing), {}, tmp_path)
    assert str(missing) in str(info.value) and "never downloads" in str(info.value)
    assert not missing.exists()


def test_open_vocabulary_weights_accept_prompts_or_name_the_missing_text_encoder(
    tmp_path: Path, video_frames
) -> None:
    from vidscope.models import yolo

    world = yolo.from_spec("object_detector", "yolov8s-worldv2.yaml", OPTIONS, tmp_path)
    assert world.open_vocabulary
    try:
        results = world.detect(video_frames[:1], prompts=["red car", "traffic light"])
    except BackendUnavailable as exc:  # offline: the CLIP text encoder package/weights are absent
        assert "text encoder" in str(exc) and "red car" in str(exc)
    else:
        assert all(d.label in {"red car", "traffic light"} for d in results[0])


def test_tracks_continue_across_calls_with_new_sequence_false(detector, video_frames) -> None:
    def ids(frame: list[Detection]) -> list[int | None]:
        return sorted((d.track_id for d in frame), key=lambda i: -1 if i is None else i)

    reference = detector.detect(video_frames[:7], track=True)  # one uninterrupted sequence
    detector.detect(video_frames[:5], track=True)
    continued = detector.detect(video_frames[5:7], track=True, new_sequence=False)
    assert [ids(f) for f in continued] == [ids(f) for f in reference[5:7]]
    restarted = detector.detect(video_frames[5:7], track=True)
    assert ids(restarted[0]) != ids(reference[5])
