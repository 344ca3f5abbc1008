# One image for every Ariane component: `ariane namesrv | broker | operator | admin`.
# Non-root (uid 10001) and read-only-root friendly: nothing is written outside the mounted store
# (/var/lib/ariane/store), the config mount (/etc/ariane, read-only) and /tmp.
# Check: tests/test_dockerfile.py runs hadolint over this file.

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[operator]"

FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
RUN groupadd --system --gid 10001 ariane \
    && useradd --system --uid 10001 --gid ariane --home-dir /nonexistent --no-create-home \
       --shell /usr/sbin/nologin ariane
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "ariane[operator]==0.1.0" \
    && rm -rf /wheels \
    && mkdir -p /var/lib/ariane/store /etc/ariane \
    && chown 10001:10001 /var/lib/ariane/store
USER 10001:10001
WORKDIR /var/lib/ariane
# broker gRPC, name server gRPC, metrics
EXPOSE 8081 9876 5557
ENTRYPOINT ["ariane"]
CMD ["--help"]
