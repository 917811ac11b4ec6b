# syntax=docker/dockerfile:1
# Build: Node 22 (LTS) plus a Rust toolchain for the native engine.
FROM node:22-bookworm AS build
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
ENV PATH=/root/.cargo/bin:$PATH
WORKDIR /app
COPY . .
RUN npm ci && npm prune --omit=dev

# Run: no compiler, no dev dependencies.
FROM node:22-bookworm-slim
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/native ./native
COPY --from=build /app/queues ./queues
RUN mkdir -p /data && chown node:node /data
USER node
ENV DATA_DIR=/data QUEUE_CONFIG_DIR=/app/queues GRPC_PORT=9001 HTTP_PORT=8080 SHUTDOWN_DRAIN_MS=5000
VOLUME /data
EXPOSE 9001 8080
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:8080/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/cli.js", "serve"]
