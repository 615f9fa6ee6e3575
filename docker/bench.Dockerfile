# fencepost bench (the load driver) in an empty image, for compose's `bench`
# profile (--runtime external against the lock-server and rail-stub services).
# Built only by `scripts/build-images.sh --with-bench` (a static release build
# of bench takes several minutes). Results go to /data (mount a volume there).
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="fencepost bench" \
      org.opencontainers.image.description="fencepost's load driver: bench run, sweep, report, triggers (C4)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      fencepost.component="bench"
COPY bench /bench
COPY --chown=65534:65534 tmp/ /tmp/
COPY --chown=65534:65534 tmp/ /data/
USER 65534:65534
WORKDIR /data
ENTRYPOINT ["/bench"]
