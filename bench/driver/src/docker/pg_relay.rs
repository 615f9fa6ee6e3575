//! The PostgreSQL relay of the docker runtime: the cell's containers sit on a
//! private network, while the PostgreSQL the bench is given (`--pg-url`) is
//! usually reachable only from the host. A TCP relay in the bench listens on
//! the network's gateway address (a host address on that bridge) and forwards
//! every connection to it; the lock-server's store URL is rewritten to name
//! the relay's IP and port, so no name resolution happens in the container.

use std::net::{IpAddr, SocketAddr};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use super::error::DockerError;

/// The `host:port` of a `postgres://[user[:pass]@]host[:port][/db][?opts]` URL, resolved by the bench.
pub(crate) async fn pg_addr(url: &str) -> Result<SocketAddr, DockerError> {
    let (_, authority, _) = split_pg_url(url)?;
    let hostport = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    let hostport = if hostport.ends_with(']') || !hostport.contains(':') {
        format!("{hostport}:5432")
    } else {
        hostport.to_string()
    };
    let mut addrs = match tokio::net::lookup_host(hostport.clone()).await {
        Ok(addrs) => addrs,
        Err(source) => return Err(DockerError::PgResolve { hostport, source }),
    };
    addrs.next().ok_or(DockerError::PgNoAddress { hostport })
}

/// Splits a PostgreSQL URL into (scheme with `://`, authority, rest from the first `/` or `?`).
fn split_pg_url(url: &str) -> Result<(&str, &str, &str), DockerError> {
    let scheme_end = ["postgres://", "postgresql://"]
        .iter()
        .find(|s| url.starts_with(*s))
        .map(|s| s.len())
        .ok_or_else(|| DockerError::PgUrl { url: url.into() })?;
    let rest = &url[scheme_end..];
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Ok((&url[..scheme_end], &rest[..end], &rest[end..]))
}

/// The store URL the lock-server container uses: `url` with its host and port replaced by the relay's.
pub fn rewrite_pg_url(url: &str, relay: SocketAddr) -> Result<String, DockerError> {
    let (scheme, authority, rest) = split_pg_url(url)?;
    let userinfo = authority
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    Ok(format!("{scheme}{userinfo}{relay}{rest}"))
}

/// Listens on `bind:0` and forwards every connection to `upstream`; the task owns its connections.
pub(super) async fn pg_relay(
    bind: IpAddr,
    upstream: SocketAddr,
) -> Result<(SocketAddr, JoinHandle<()>), DockerError> {
    let listener = TcpListener::bind((bind, 0))
        .await
        .map_err(|source| DockerError::RelayListen { bind, source })?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        // Dropped with the task, which aborts every connection still open.
        let mut conns = JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            conns.spawn(async move {
                match TcpStream::connect(upstream).await {
                    Ok(mut out) => {
                        // No Nagle on either side: PostgreSQL's extended
                        // protocol sends a query as several small writes, and
                        // a relay that holds the second until the first is
                        // acknowledged meets the server's delayed ACK — about
                        // 40 ms added to every statement.
                        let _ = inbound.set_nodelay(true);
                        let _ = out.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                    Err(e) => {
                        tracing::warn!(%upstream, error = %e, "PostgreSQL relay: upstream refused")
                    }
                }
            });
            while conns.try_join_next().is_some() {}
        }
    });
    Ok((addr, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_url_points_at_the_relay_and_keeps_user_database_and_options() {
        let relay: SocketAddr = "172.18.0.1:40000".parse().unwrap();
        assert_eq!(
            rewrite_pg_url("postgres://postgres@127.0.0.1:54329/fencepost", relay).unwrap(),
            "postgres://postgres@172.18.0.1:40000/fencepost"
        );
        assert_eq!(
            rewrite_pg_url("postgresql://u:p@db.example:5432/x?sslmode=disable", relay).unwrap(),
            "postgresql://u:p@172.18.0.1:40000/x?sslmode=disable"
        );
        assert_eq!(
            rewrite_pg_url("postgres://localhost", relay).unwrap(),
            "postgres://172.18.0.1:40000"
        );
        let e = rewrite_pg_url("mysql://x", relay).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"--pg-url "mysql://x": expected postgres://USER[:PASS]@HOST[:PORT]/DB"#
        );
    }
}
