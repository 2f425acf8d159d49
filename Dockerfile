# Build: a static binary, so that the final image needs no libc.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/slotwheel .

# Run: distroless carries CA certificates (for rediss:// and WeChat's HTTPS
# API) and nothing an intruder could use, not even a shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/slotwheel /slotwheel
# Embedded mode writes ./data/slotwheel.db and ./data/secrets.json; the
# nonroot user can write only to its home.
WORKDIR /home/nonroot
USER nonroot
EXPOSE 8080
# Without SLOTWHEEL_MYSQL_DSN and SLOTWHEEL_REDIS_URL the binary runs in
# embedded mode, which listens on 127.0.0.1 because dev log-in is on; set
# SLOTWHEEL_HTTP_ADDR=:8080 only if exposing a trial instance is intended.
ENTRYPOINT ["/slotwheel"]
CMD ["all"]
