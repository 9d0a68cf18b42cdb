# ha-bot container action: slim Python, the CPU build of torch, pinned versions.
FROM python:3.11-slim-bookworm

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DEBIAN_FRONTEND=noninteractive

# git: merge-base and worktrees of the checked-out repository
RUN apt-get update \
    && apt-get install -y --no-install-recommends git=1:2.39.* \
    && rm -rf /var/lib/apt/lists/*

# CPU-only torch from PyTorch's CPU index: no multi-GB CUDA build in the image
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0

WORKDIR /opt/ha-bot
COPY pyproject.toml README.md ./
COPY ha_bot ./ha_bot
RUN pip install . \
    "fvcore==0.1.5.post20221221" "onnx==1.23.2" "onnxruntime==1.32.0" "ruamel.yaml==0.19.1" \
    "PyGithub==2.10.0" "anthropic==2.14.0"

ENTRYPOINT ["ha-bot"]
CMD ["action"]
