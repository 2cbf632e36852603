# syntax=docker/dockerfile:1
# audit-trail: one image for every role (`serve --roles ...`), migrations and the key CLI.

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The customer portal's browser code and the API reference page, built into dist/portal and dist/api-reference by the same build.
COPY portal ./portal
COPY scripts/build-portal.ts scripts/build-api-reference.ts ./scripts/
RUN npm run build

FROM node:24-bookworm-slim AS runtime
# tini as PID 1: forwards SIGTERM to Node (which drains requests and deliveries) and reaps zombies.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# Production dependencies only; no install scripts run.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
# A numeric non-root user, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8080 8081
# A young generation of 2 × 32 MB: left to itself on a large node V8 reserves 128 MB for it, which was
# most of the api's memory under load (bench/list.ts: peak RSS 322 MB against 258-269 MB, at the same
# throughput). The benchmarks start the service with the flags written here.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "--max-semi-space-size=32", "/app/dist/cli.js"]
CMD ["serve"]
