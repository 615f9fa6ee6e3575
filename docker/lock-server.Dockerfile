# fencepost lock-server (C1) in an empty image: one static-pie binary built by
# scripts/build-images.sh with `-C target-feature=+crt-static`, plus the
# std-only `healthcheck` probe (scratch has no shell or curl). The build
# context is the staging directory the script fills; nothing is pulled.
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="fencepost lock-server" \
      org.opencontainers.image.description="Sessions, leases, fencing tokens and grace over SQLite or PostgreSQL (fencepost C1)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      fencepost.component="lock-server"
COPY lock-server /lock-server
COPY healthcheck /healthcheck
# The default lock store (`lock.sqlite`) lives in $XDG_STATE_HOME/fencepost: a
# directory of its own, a volume, so it survives a restart of the container.
COPY --chown=65534:65534 tmp/ /tmp/
COPY --chown=65534:65534 tmp/ /var/lib/fencepost/
ENV XDG_STATE_HOME=/var/lib
VOLUME ["/var/lib/fencepost"]
USER 65534:65534
# Listen on every address of the container's own network namespace.
ENV LOCK_LISTEN=0.0.0.0:7070
EXPOSE 7070
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/healthcheck", "http://127.0.0.1:7070/readyz"]
ENTRYPOINT ["/lock-server"]
