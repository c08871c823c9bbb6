# OpenEnv's layout (openenv.yaml `validation.execution.dockerfile`): the environment server on port 8000.
# Unbuilt on the development machine (no Docker daemon there): `openenv validate --skip-build .` checks the
# manifest; the runtime and semantic properties are the project's own tests (docs/integrations.md#openenv-validation).
#   docker build -t shopsim-openenv . && docker run -p 8000:8000 shopsim-openenv
FROM python:3.11-slim

LABEL org.opencontainers.image.title="shopsim" \
      org.opencontainers.image.description="ShopSimRL: a deterministic simulated shop for LLM shopping agents (OpenEnv server)" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.source="https://github.com/shopsimrl/shopsimrl"

ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 SHOPSIM_DATA=/app/data/default SHOPSIM_SLOTS=8

WORKDIR /app/env
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install ".[openenv]"

# The default catalog (generator version and seed as openenv.yaml's task_distribution pins), built into the image
# so the container needs no network at run time (network: no-network).
RUN shopsimrl data build-default --out /app/data/default

RUN useradd --create-home shopsim && chown -R shopsim /app/data
USER shopsim
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)" || exit 1

# --host 0.0.0.0 inside the container; the edge still checks Host/Origin (docs/service.md)
CMD ["shopsimrl", "serve-openenv", "--data", "/app/data/default", "--host", "0.0.0.0", "--port", "8000"]
