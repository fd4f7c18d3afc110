# Build stage: compile the release binary (templates and static assets are compiled in).
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY templates ./templates
COPY static ./static
RUN cargo build --release --locked

# Runtime stage: the binary and the knowledge base, nothing else.
FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin errbook
WORKDIR /app
COPY --from=build /src/target/release/errbook /usr/local/bin/errbook
COPY kb ./kb
ENV ERRBOOK_KB=/app/kb ERRBOOK_INDEX_CACHE=/var/cache/errbook
# Index the entries now (`check` stores the indexes it builds), so that a container
# starts by opening them; the server may store new ones after a reload.
RUN errbook check && chown -R errbook /var/cache/errbook
USER errbook
EXPOSE 8080
CMD ["errbook", "serve", "--addr", "0.0.0.0:8080"]
