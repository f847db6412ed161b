# hookwise as a container: a non-root user, the state in a volume, a health check on /readyz,
# signals forwarded by tini (SIGTERM drains and stops, SIGHUP reloads the rules).
#
#   podman build --format docker -t hookwise .   (docker build -t hookwise .; OCI format drops HEALTHCHECK)
#   podman run -d -p 127.0.0.1:8787:8787 -v hookwise-state:/var/lib/hookwise \
#     -v ./hookwise.yaml:/etc/hookwise/hookwise.yaml:ro hookwise
#
# BASE: any Debian-based image with Python 3.11+ (python3 in PATH); the default is the official
# slim image. Debian's own (python3 + python3-venv from bookworm) works too.
ARG BASE=docker.io/library/python:3.12-slim-bookworm

FROM ${BASE} AS build
RUN if ! python3 -c "import ensurepip, venv" 2>/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends python3-venv \
      && rm -rf /var/lib/apt/lists/*; fi
COPY . /src
RUN python3 -m venv /opt/hookwise \
 && /opt/hookwise/bin/pip install --no-cache-dir "/src[postgres]" /src/plugins/hookwise-mattermost \
 && /opt/hookwise/bin/hookwise --version

FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/hookwise --shell /usr/sbin/nologin hookwise \
 && mkdir -p /var/lib/hookwise /etc/hookwise \
 && chown hookwise:hookwise /var/lib/hookwise
COPY --from=build /opt/hookwise /opt/hookwise
ENV PATH=/opt/hookwise/bin:$PATH \
    HOOKWISE_CONFIG=/etc/hookwise/hookwise.yaml \
    PYTHONUNBUFFERED=1
USER hookwise
WORKDIR /var/lib/hookwise
VOLUME ["/var/lib/hookwise"]
EXPOSE 8787
# /readyz: the store answers and the gateway accepts; python's urllib, as the image has no curl
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python3", "-c", "import sys, urllib.request as u; sys.exit(0 if u.urlopen('http://127.0.0.1:8787/readyz', timeout=4).status == 200 else 1)"]
# tini is PID 1: it forwards SIGTERM/SIGINT/SIGHUP to hookwise and reaps children
# (the `command` model provider's processes)
ENTRYPOINT ["/usr/bin/tini", "--", "hookwise"]
# 0.0.0.0 inside the container only; publish the port on 127.0.0.1 (or a proxy's network)
CMD ["serve", "--host", "0.0.0.0", "--port", "8787", "--state-dir", "/var/lib/hookwise"]
