# One image for every Laredo service; docker-compose.yml picks the service by command:
#   laredo-ingest | laredo-fanout | laredo-query | laredo-oam  --config /etc/laredo/laredo.conf
# Build: docker build -t laredo:local .   (or docker compose build)

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/laredo
WORKDIR /src
# Only what pyproject.toml packages: the libs and the services' src trees (see [tool.setuptools.packages.find]).
COPY pyproject.toml README.md ./
COPY libs ./libs
COPY services ./services
RUN /opt/laredo/bin/pip install . \
 && /opt/laredo/bin/python -c "import laredo_ingest.main, laredo_fanout.main, laredo_query.main, laredo_oam.main"

FROM python:3.11-slim
ENV PATH=/opt/laredo/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LAREDO_CONFIG=/etc/laredo/laredo.conf
RUN groupadd --system --gid 10001 laredo \
 && useradd --system --uid 10001 --gid laredo --home-dir /var/lib/laredo --shell /usr/sbin/nologin laredo \
 && mkdir -p /etc/laredo /var/lib/laredo \
 && chown laredo:laredo /var/lib/laredo
COPY --from=build /opt/laredo /opt/laredo
USER laredo:laredo
WORKDIR /var/lib/laredo
# gRPC: OAM 4001, fan-out 4002, query 4003. HTTP health: ingest 8081, fan-out 8082, query 8083, OAM 8084.
EXPOSE 4001 4002 4003 8081 8082 8083 8084
CMD ["laredo-ingest", "--config", "/etc/laredo/laredo.conf"]
