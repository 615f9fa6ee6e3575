# fencepost rail-stub (C2) in an empty image: one static-pie binary built by
# scripts/build-images.sh with `-C target-feature=+crt-static`, plus the
# std-only `healthcheck` probe (scratch has no shell or curl). The build
# context is the staging directory the script fills; nothing is pulled.
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="fencepost rail-stub" \
      org.opencontainers.image.description="Payout ledger and payment rail with both fences and the must-be-zero counters (fencepost C2)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      fencepost.component="rail-stub"
COPY rail-stub /rail-stub
COPY healthcheck /healthcheck
# The default ledger (`rail-ledger.sqlite`) lives in $XDG_STATE_HOME/fencepost: a
# directory of its own, a volume, so it survives a restart of the container.
COPY --chown=65534:65534 tmp/ /tmp/
COPY --chown=65534:65534 tmp/ /var/lib/fencepost/
ENV XDG_STATE_HOME=/var/lib
VOLUME ["/var/lib/fencepost"]
USER 65534:65534
ENV RAIL_LISTEN=0.0.0.0:7080
EXPOSE 7080
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/healthcheck", "http://127.0.0.1:7080/healthz"]
ENTRYPOINT ["/rail-stub"]
