# diag serve: the chat-ops bot and HTTP API.
#   docker build -t diag .
#   docker run -p 8787:8787 -e SLACK_BOT_TOKEN=xoxb-... -e SLACK_SIGNING_SECRET=... diag
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY diag ./diag
COPY rules ./rules
RUN pip install ".[serve]" \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin diag

USER 10001
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=4)"]
CMD ["diag", "serve", "--host", "0.0.0.0", "--port", "8787"]
