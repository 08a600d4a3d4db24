# A small static image of planrun: the binary, CA certificates and time
# zone data on distroless, running as the unprivileged uid 65532.
#
#   docker build -t registry.example/planrun:1.0.0 --build-arg VERSION=1.0.0 .
#   docker push registry.example/planrun:1.0.0
#
# Workers and conductor must run the same build: a worker refuses a
# conductor of another version, so tag every build with its own VERSION.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/planrun .

# distroless/static: no shell, no package manager; CA certificates for TLS
# to brokers, /etc/passwd with the nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/planrun /usr/local/bin/planrun
COPY --from=build /src/plans /plans
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/planrun"]
CMD ["help"]
