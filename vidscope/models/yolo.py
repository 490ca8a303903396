"""Object detection and tracking with ultralytics YOLO (YOLOv8/11/26, YOLO-World, YOLOE).

``yolo:<weights>`` loads a ``.pt`` (or exported) weights file the user supplies; a ``.yaml`` model
config builds the architecture with random weights (tests and smoke runs only). Inference runs on
CPU unless the ``device`` option says otherwise. ``detect(..., track=True)`` follows objects across
consecutive frames with ByteTrack and returns persistent track ids. Open-vocabulary ``prompts`` work
only with YOLO-World / YOLOE weights; fixed-class weights refuse them.

Options (``[models.options.yolo]``): ``conf`` (0.25), ``iou`` (0.7), ``imgsz`` (640), ``classes``
(class names or indices to keep), ``max_det`` (300), ``device`` (cpu), ``tracker``
(bytetrack.yaml), ``batch_size`` (frames per forward pass without tracking, 8).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidscope.core.errors import BackendUnavailable, install_extra
from vidscope.models.protocols.image import Image
from vidscope.models.protocols.object_detector import Detection

KIND = "yolo"
#: Config suffixes that build an untrained network instead of loading weights.
CONFIG_SUFFIXES = {".yaml", ".yml"}


def _import_yolo(role: str, spec: str) -> Any:
    # ultralytics checks for updates and sends telemetry on import unless told it is offline.
    os.environ.setdefault("YOLO_OFFLINE", "1")
    try:
        from ultralytics import YOLO
    except ImportError as exc:
        raise BackendUnavailable(
            role,
            spec,
            "importing ultralytics",
            f"Install it: {install_extra('yolo')}.",
        ) from exc
    return YOLO


def _resolve_weights(role: str, spec: str, target: str) -> str:
    """The weights path for ultralytics; a missing file is refused (it would try to download it)."""
    if not target:
        raise BackendUnavailable(
            role,
            spec,
            "an empty weights path",
            "Name a weights file, e.g. yolo:/models/yolo11n.pt.",
        )
    path = Path(target).expanduser()
    if path.suffix.lower() in CONFIG_SUFFIXES and not path.exists():
        # Bare config names (yolov8n.yaml) ship inside ultralytics and build random weights offline.
        return target
    if not path.exists():  # a file, or an exported model folder (OpenVINO, TF SavedModel)
        raise BackendUnavailable(
            role,
            spec,
            f"the weights file '{path}' (not found)",
            "Download YOLO weights (e.g. yolo11n.pt) on a machine with internet access and point "
            "the spec at the file; vidscope never downloads them.",
        )
    return str(path.resolve())


class YoloDetector:
    """An :class:`ObjectDetector` over one ultralytics model (calls are serialised)."""

    def __init__(self, role: str, target: str, options: dict[str, Any]) -> None:
        self.name = f"{KIND}:{target}"
        self.role = role
        yolo_cls = _import_yolo(role, self.name)
        weights = _resolve_weights(role, self.name, target)
        try:
            self.model = yolo_cls(weights)
        except Exception as exc:  # corrupt file, unknown config, wrong task
            raise BackendUnavailable(
                role,
                self.name,
                f"ultralytics.YOLO('{weights}') ({exc})",
                "Check that the file is an ultralytics detection model.",
            ) from exc
        if self.model.task not in ("detect", "segment", "obb", "pose"):
            raise BackendUnavailable(
                role,
                self.name,
                f"'{weights}' (task '{self.model.task}')",
                "Use detection weights; this model does not output boxes.",
            )
        self.conf = float(options.get("conf", 0.25))
        self.iou = float(options.get("iou", 0.7))
        self.imgsz = int(options.get("imgsz", 640))
        self.max_det = int(options.get("max_det", 300))
        self.batch_size = max(1, int(options.get("batch_size", 8)))
        self.device = str(options.get("device", "cpu"))
        self.tracker = str(options.get("tracker", "bytetrack.yaml"))
        self.class_ids = self._class_ids(options.get("classes"))
        self.open_vocabulary = hasattr(self.model, "set_classes")  # YOLOWorld / YOLOE wrappers only
        self._prompts: tuple[str, ...] | None = None
        self._lock = threading.Lock()

    def _class_ids(self, classes: Any) -> list[int] | None:
        """Indices for the ``classes`` option, which may name classes or give their indices."""
        if classes is None:
            return None
        if isinstance(classes, str | int):
            classes = [classes]
        by_name = {str(n).lower(): int(i) for i, n in self.model.names.items()}
        ids = []
        for item in classes:
            if isinstance(item, int) or str(item).isdigit():
                ids.append(int(item))
            elif str(item).lower() in by_name:
                ids.append(by_name[str(item).lower()])
            else:
                known = ", ".join(sorted(by_name)[:20])
                raise ValueError(
                    f"[models.options.yolo] classes: '{item}' is not a class of "
                    f"{self.name} (known: {known}, …)"
                )
        return ids

    def _use_prompts(self, prompts: Sequence[str] | None) -> None:
        if prompts is None:
            return
        if not self.open_vocabulary:
            raise ValueError(
                f"{self.name} has fixed classes ({len(self.model.names)}: e.g. "
                f"{', '.join(list(map(str, self.model.names.values()))[:5])}) and cannot take text "
                "prompts; use YOLO-World or YOLOE weights for open-vocabulary detection, or filter "
                "with the classes option."
            )
        wanted = tuple(str(p) for p in prompts)
        if not wanted:
            raise ValueError("prompts must name at least one class")
        if wanted != self._prompts:  # re-encoding prompts runs a text model; do it only on change
            try:
                self.model.set_classes(list(wanted))
            except Exception as exc:  # the text encoder is a separate package with its own weights
                raise BackendUnavailable(
                    self.role,
                    self.name,
                    f"encoding the prompts {list(wanted)} with the model's text encoder ({exc})",
                    "Open-vocabulary prompts need the text encoder ultralytics uses for this "
                    "model (its CLIP/MobileCLIP package and weights) installed locally; or call "
                    "detect without prompts.",
                ) from exc
            self._prompts = wanted

    def _arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "conf": self.conf,
            "iou": self.iou,
            "imgsz": self.imgsz,
            "max_det": self.max_det,
            "device": self.device,
            "verbose": False,
        }
        if self.class_ids is not None and self._prompts is None:
            args["classes"] = self.class_ids
        return args

    def _detections(self, result: Any) -> list[Detection]:
        boxes = result.boxes
        if boxes is None or len(boxes) == 0:
            return []
        xyxy = boxes.xyxy.cpu().numpy().astype(float)
        scores = boxes.conf.cpu().numpy().astype(float)
        classes = boxes.cls.cpu().numpy().astype(int)
        ids = boxes.id.cpu().numpy().astype(int).tolist() if boxes.id is not None else [None] * len(xyxy)
        names = result.names
        return [
            Detection(
                label=str(names.get(int(c), c)),
                box=(b[0], b[1], b[2], b[3]),
                score=float(s),
                track_id=None if t is None else int(t),
            )
            for b, s, c, t in zip(xyxy.tolist(), scores.tolist(), classes.tolist(), ids, strict=True)
        ]

    def detect(
        self,
        images: Sequence[Image],
        *,
        track: bool = False,
        prompts: Sequence[str] | None = None,
        new_sequence: bool = True,
    ) -> list[list[Detection]]:
        """Detections per image. With ``track`` the images are consecutive frames of one video.

        Track ids start afresh on each call; pass ``new_sequence=False`` to continue the previous
        call's tracks (a long video fed in chunks).
        """
        # ultralytics takes numpy images in OpenCV's BGR order; ours are RGB.
        frames = [np.ascontiguousarray(_check_image(i)[:, :, ::-1]) for i in images]
        if not frames:
            return []
        out: list[list[Detection]] = []
        with self._lock:
            self._use_prompts(prompts)
            args = self._arguments()
            if not track:
                # ultralytics stacks a whole list into one batch; chunk it to bound memory.
                for start in range(0, len(frames), self.batch_size):
                    chunk = frames[start : start + self.batch_size]
                    out.extend(self._detections(r) for r in self.model.predict(chunk, **args))
                return out
            for index, frame in enumerate(frames):
                # persist=False on the first frame builds fresh trackers, so ids restart at 1 and
                # never leak between videos; later frames keep them.
                persist = index > 0 or not new_sequence
                result = self.model.track(frame, persist=persist, tracker=self.tracker, **args)[0]
                out.append(self._detections(result))
            return out


def _check_image(image: Image) -> np.ndarray:
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise ValueError(f"expected an RGB uint8 image of shape (h, w, 3), got {array.shape} {array.dtype}")
    return array


def from_spec(role: str, target: str, options: dict[str, Any], data_dir: Path) -> YoloDetector:
    """Load ``yolo:<weights .pt | model .yaml>`` for the object_detector role."""
    return YoloDetector(role, target, options)
