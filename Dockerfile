# syntax=docker/dockerfile:1
#
# mecatl-drivers: the mecatl.driver.v1 storage services, as one image.
#
#   docker build -t mecatl-drivers .
#   docker run --rm -p 50051:50051 -v mecatl-data:/var/lib/mecatl-drivers mecatl-drivers
#
# The image runs `mecatl-drivers serve` (every service on 0.0.0.0:50051, SQLite under
# /var/lib/mecatl-drivers, metrics on :9464) as the unprivileged user `node`. Arguments
# replace the default command: `docker run mecatl-drivers serve --store redis://...`,
# `docker run mecatl-drivers sessions list`. deploy/compose.yaml runs it over Redis;
# deploy/kubernetes/ has the manifests. The test that keeps this file honest is
# test/deploy/dockerfile.test.ts.

ARG NODE_IMAGE=node:20-bookworm-slim

# --- build: compile TypeScript and the SQLite module, then drop dev dependencies ---
FROM ${NODE_IMAGE} AS build
# better-sqlite3 is compiled from source (prebuild-install is told not to download a
# binary): node-gyp needs python3, make and g++, and the Node headers the image ships
# under /usr/local.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
ENV npm_config_nodedir=/usr/local \
    npm_config_build_from_source=true
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: no `prepare` build before the sources are here, no install scripts of
# other packages; then the one native module is built.
RUN npm ci --ignore-scripts \
 && npm rebuild better-sqlite3
COPY tsconfig.json ./
COPY common ./common
COPY gen ./gen
COPY services ./services
COPY clients ./clients
# Then only production dependencies stay, and of the SQLite module only the compiled
# library (its C sources and object files are about 25 MB of the 60 MB left).
RUN npm run build \
 && npm prune --omit=dev \
 && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/src \
 && find node_modules/better-sqlite3/build -type f ! -name better_sqlite3.node -delete \
 && chmod 0755 dist/services/server/main.js

# --- runtime: production dependencies, the compiled code, a non-root user ---
FROM ${NODE_IMAGE}
# After a burst of large calls glibc keeps the memory their HTTP/2 chunks took (reused by
# the next burst). `-e MALLOC_MMAP_THRESHOLD_=16384` gives it back to the kernel for about
# 1.5x the CPU per large call; it is not set here (README "Serving", bench/RESULTS.md).
ENV NODE_ENV=production \
    MECATL_DRIVERS_TARGET=127.0.0.1:50051
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
RUN ln -s /app/dist/services/server/main.js /usr/local/bin/mecatl-drivers \
 && mkdir -p /var/lib/mecatl-drivers \
 && chown node:node /var/lib/mecatl-drivers
USER node
VOLUME ["/var/lib/mecatl-drivers"]
EXPOSE 50051 9464
# Every service of `serve all` must answer SERVING on the gRPC port (MECATL_DRIVERS_TARGET).
# Serving one service per container, or TLS on the listener? Override it, e.g.
# `mecatl-drivers health --event-log-url 127.0.0.1:50051` (Kubernetes uses its own gRPC
# probes instead: deploy/kubernetes/deployment.yaml).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["mecatl-drivers", "health"]
ENTRYPOINT ["mecatl-drivers"]
# Cleartext on 0.0.0.0 needs --insecure-listen: keep the port on a private network, or give
# --tls-cert/--tls-key (and drop --insecure-listen).
CMD ["serve", "--listen", "0.0.0.0:50051", "--insecure-listen", "--store", "sqlite:/var/lib/mecatl-drivers/mecatl-drivers.sqlite", "--metrics-listen", "0.0.0.0:9464"]
