# Build stage: compile the release binary. The entries under kb/, the templates and the
# static assets are compiled in. `.ci/docker-context` builds exactly what these COPY
# lines and .dockerignore send, so a file missing here fails CI.
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY benches ./benches
COPY src ./src
COPY templates ./templates
COPY static ./static
COPY kb ./kb
RUN cargo build --release --locked --bin errbook

# Runtime stage: the binary, nothing else.
FROM debian:bookworm-slim
# A numeric USER lets Kubernetes check runAsNonRoot.
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin errbook
WORKDIR /app
COPY --from=build /src/target/release/errbook /usr/local/bin/errbook
ENV ERRBOOK_INDEX_CACHE=/var/cache/errbook
# The inbox's SQLite file (or a postgres:// URL in ERRBOOK_STORE): mount a volume here
# to keep it across containers.
ENV ERRBOOK_STORE=/var/lib/errbook/errbook.db
# Index the built-in entries now (`check` stores the indexes it builds), so that a
# container starts by opening them. The cache stays the server's to write: a team's
# folder (`ERRBOOK_KB`, mounted) gets its own indexes there.
RUN errbook check && mkdir -p /var/lib/errbook \
    && chown -R errbook /var/cache/errbook /var/lib/errbook
VOLUME /var/lib/errbook
USER 10001
EXPOSE 8080
# No curl in the image: bash asks /healthz itself.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
# The server is PID 1 and stops on SIGTERM within its grace period (8 s), under
# Docker's 10 s before SIGKILL.
STOPSIGNAL SIGTERM
CMD ["errbook", "serve", "--addr", "0.0.0.0:8080"]
