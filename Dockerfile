# pp-offline in a minimal image: one static binary (CGO_ENABLED=0,
# -tags nocuda: no CUDA binding, no dynamic loader), CA certificates for
# the hub, a /tmp, nothing else. Runs on the CPU (AVX2 / AVX-512 kernels on
# amd64, chosen at run time). For NVIDIA GPUs see Dockerfile.cuda.
#
#   docker build -t pp-offline --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker run --rm -v "$PWD/testdata:/data:ro" -v "$PWD/out:/out" pp-offline \
#     --input-wav /data/tiny/input.wav ... --output-wav /out/out.wav --output-text /out/out.json
#
# The model: mount a Hugging Face cache and set HF_HOME (e.g.
# -v /models:/models -e HF_HOME=/models/hf), or pass the files with their
# flags. The image runs as user 65532: the output folder must be writable
# by it.
#
# This build pulls golang:1.26 from a registry. Without one,
# scripts/build-image.sh builds the same final image from a binary built
# on the host (FROM scratch, no registry).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=0.1.0-dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags nocuda \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/usr/local/bin/pp-offline . \
 && mkdir -p /out/tmp /out/etc/ssl/certs \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/

FROM scratch
COPY --from=build /out/ /
ENV PATH=/usr/local/bin HOME=/tmp
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/pp-offline"]
