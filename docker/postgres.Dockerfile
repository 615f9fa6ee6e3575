# PostgreSQL for the docker runtime's chaos (`experiments chaos --runtime
# docker`), on a machine that can pull no image: Debian's own PostgreSQL
# server binary with the shared libraries it links (as `ldd` lists them), its
# share/ and lib/ directories, and a data directory made by `initdb` at build
# time (trust authentication: a throwaway database on a private network,
# never a production one). scripts/build-postgres-image.sh fills the context.
FROM scratch
ARG PG_MAJOR=15
ARG PG_UID=101
ARG PG_GID=104
LABEL org.opencontainers.image.title="fencepost test PostgreSQL" \
      org.opencontainers.image.description="Debian's PostgreSQL in an empty image, for fencepost's container chaos (trust auth; not for production)" \
      fencepost.component="postgres"
COPY root/ /
COPY --chown=${PG_UID}:${PG_GID} pgdata/ /var/lib/postgresql/
USER ${PG_UID}:${PG_GID}
EXPOSE 5432
WORKDIR /var/lib/postgresql
# The binary's path carries the major version; /usr/local/bin/postgres links to it.
ENTRYPOINT ["/usr/local/bin/postgres", "-D", "/var/lib/postgresql/data"]
