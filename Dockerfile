# syntax=docker/dockerfile:1
#
# erpsync image: both static binaries on distroless, non-root.
#
#   docker build -t erpsync:local .
#   docker run --rm erpsync:local help
#   docker run --rm --entrypoint /erpmock erpsync:local --addr 0.0.0.0:8090
#
# Needs BuildKit (the default builder of current Docker and of `docker compose
# build`) for the cache mounts and the cross-compiling FROM --platform.

# The builder's Go must be >= the `go` line of go.mod: the official golang
# images set GOTOOLCHAIN=local, so an older patch release fails with "go.mod
# requires go >= ...". The 1.26 tag follows the newest 1.26.x patch; pin a
# full tag (golang:1.26.8-bookworm) or a digest for reproducible builds.
ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

# ---------------------------------------------------------------------------
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS builder

WORKDIR /src

# Modules first, so editing the code does not invalidate the download layer.
# go.mod replaces one module with the directory of internal/regexshim,
# whose go.mod the download reads.
COPY go.mod go.sum ./
COPY internal/regexshim/go.mod internal/regexshim/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .

# Cross-compile for the target platform (docker buildx --platform ...).
# Empty TARGETOS/TARGETARCH (a builder that does not set them) mean the
# builder's own platform.
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    set -eux; \
    export CGO_ENABLED=0 GOOS="${TARGETOS}" GOARCH="${TARGETARCH}" GOFLAGS=-mod=readonly; \
    mkdir -p /out; \
    go build -trimpath -tags nodemo -ldflags "-s -w" -o /out/erpsync ./cmd/erpsync; \
    go build -trimpath -ldflags "-s -w" -o /out/erpmock ./cmd/erpmock

# ---------------------------------------------------------------------------
# distroless/static: CA certificates, tzdata and /etc/passwd with nonroot
# (65532), no shell, no libc, no package manager. The SQL migrations are
# embedded in the erpsync binary (migrations/migrations.go), so nothing else
# is copied.
FROM ${RUNTIME_IMAGE}

LABEL org.opencontainers.image.title="erpsync" \
      org.opencontainers.image.description="Copies an ERP's memberships into MySQL under Redis locks" \
      org.opencontainers.image.source="https://github.com/erpsync/erpsync"

# Owned by root, so user 65532 cannot replace them.
COPY --from=builder /out/erpsync /erpsync
COPY --from=builder /out/erpmock /erpmock

# Numeric so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 65532:65532

# `erpsync schedule --http-addr :9090` serves /metrics, /healthz, /readyz.
EXPOSE 9090

ENTRYPOINT ["/erpsync"]
# Without arguments the image prints the usage. Compose and Kubernetes pass
# the command (migrate, run, backfill, schedule, verify, ...).
CMD ["help"]
