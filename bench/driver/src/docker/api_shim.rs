//! The Docker API version shim: testcontainers 0.28 (bollard 0.21) always
//! speaks Docker API 1.53 and never negotiates, while Docker Engine 20.10
//! answers 1.41 at most and refuses newer clients. When the engine is older, a
//! tiny proxy on a private unix socket rewrites the version in each request
//! line, and `DOCKER_HOST` points testcontainers at it ([`engine`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use testcontainers::bollard::Docker;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::error::{DockerError, ProbeError};

/// The engine client testcontainers uses, set up once per process: if the
/// engine's API is older than the one testcontainers speaks, the API shim is
/// started and `DOCKER_HOST` points at it.
pub async fn engine() -> Result<Docker, DockerError> {
    static SETUP: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SETUP.get_or_try_init(setup_engine).await?;
    ensure_shim_listening()?;
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .map_err(|detail| DockerError::Unreachable { detail })?;
    docker
        .ping()
        .await
        .map_err(|detail| DockerError::NoAnswer { detail })?;
    Ok(docker)
}

/// The engine's unix socket: `DOCKER_HOST=unix://PATH`, else `/var/run/docker.sock`;
/// `None` when `DOCKER_HOST` names something else (tcp://, ssh://), which is used as it is.
fn engine_socket() -> Option<PathBuf> {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if !h.is_empty() => h.strip_prefix("unix://").map(PathBuf::from),
        _ => Some(PathBuf::from("/var/run/docker.sock")),
    }
}

async fn setup_engine() -> Result<(), DockerError> {
    let Some(socket) = engine_socket() else {
        return Ok(());
    };
    let engine = match engine_api_version(&socket).await {
        Ok(v) => v,
        Err(source) => return Err(DockerError::EngineVersion { socket, source }),
    };
    let ours = testcontainers::bollard::API_DEFAULT_VERSION;
    if engine >= (ours.major_version, ours.minor_version) {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("fencepost-docker-api-{}", std::process::id()));
    let shim = dir.join("docker.sock");
    *SHIM.lock().unwrap_or_else(|e| e.into_inner()) = Some(Shim {
        path: shim.clone(),
        upstream: socket,
        engine,
    });
    ensure_shim_listening()?;
    tracing::info!(
        engine = %format!("{}.{}", engine.0, engine.1),
        client = %ours,
        shim = %shim.display(),
        "Docker engine is older than testcontainers' API; rewriting the API version"
    );
    // SAFETY: set once per process, before the first testcontainers call and
    // before any cell's workers exist. Rust's own env access is serialised by
    // std; the remaining hazard, C code calling getenv concurrently, does not
    // arise here (the tokio workers are idle; reqwest is given IP URLs).
    unsafe { std::env::set_var("DOCKER_HOST", format!("unix://{}", shim.display())) };
    Ok(())
}

/// `GET /version` (unversioned) on the engine's socket → its `ApiVersion`, as (major, minor).
async fn engine_api_version(socket: &Path) -> Result<(usize, usize), ProbeError> {
    let mut s = tokio::time::timeout(Duration::from_secs(5), UnixStream::connect(socket)).await??;
    s.write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")
        .await?;
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut reply)).await??;
    let text = String::from_utf8_lossy(&reply);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|source| ProbeError::NotJson {
            reply: text.to_string(),
            source,
        })?;
    let api = v["ApiVersion"]
        .as_str()
        .ok_or_else(|| ProbeError::NoApiVersion { body: body.into() })?;
    parse_version(api).ok_or_else(|| ProbeError::BadApiVersion { api: api.into() })
}

fn parse_version(v: &str) -> Option<(usize, usize)> {
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The API shim of this process, if the engine needs one.
struct Shim {
    /// The socket `DOCKER_HOST` names (in a 0700 temp directory).
    path: PathBuf,
    /// The engine's own socket.
    upstream: PathBuf,
    /// The engine's API version.
    engine: (usize, usize),
}

/// Set once by `setup_engine`; [`RunCleanup`] removes the socket file at the end
/// of a run and the next run's [`engine`] call binds it again.
static SHIM: Mutex<Option<Shim>> = Mutex::new(None);

/// Binds the shim's socket if it is not there (first use, or after a run's cleanup removed it).
fn ensure_shim_listening() -> Result<(), DockerError> {
    let guard = SHIM.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(shim) if !shim.path.exists() => {
            start_api_shim(&shim.path, shim.upstream.clone(), shim.engine)
        }
        _ => Ok(()),
    }
}

/// The engine's own address for the `docker` CLI: `DOCKER_HOST` of this process
/// names the shim once it is set up, and child processes inherit it.
pub fn engine_docker_host() -> Option<String> {
    let guard = SHIM.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .as_ref()
        .map(|s| format!("unix://{}", s.upstream.display()))
}

/// Removes the shim's socket and directory (the serving thread stays idle until the process exits).
pub(super) fn remove_shim_socket() {
    if let Some(shim) = SHIM.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let _ = std::fs::remove_file(&shim.path);
        if let Some(dir) = shim.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Starts the API shim on a private unix socket, served by a thread of its
/// own (testcontainers' Drop blocks a runtime thread while it removes
/// containers; the shim must not depend on that runtime).
fn start_api_shim(
    path: &Path,
    upstream: PathBuf,
    engine: (usize, usize),
) -> Result<(), DockerError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().ok_or_else(|| DockerError::ShimNoDirectory {
        path: path.to_path_buf(),
    })?;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let _ = std::fs::remove_file(path);
    let std_listener =
        std::os::unix::net::UnixListener::bind(path).map_err(|source| DockerError::ShimListen {
            path: path.to_path_buf(),
            source,
        })?;
    std_listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("docker-api-shim".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("shim runtime");
            rt.block_on(async move {
                let listener = UnixListener::from_std(std_listener).expect("shim listener");
                while let Ok((client, _)) = listener.accept().await {
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        if let Ok(engine_conn) = UnixStream::connect(&upstream).await {
                            let _ = shim_connection(client, engine_conn, engine).await;
                        }
                    });
                }
            });
        })?;
    Ok(())
}

/// Relays one client connection: requests go through [`forward_requests`],
/// replies (including streamed logs and upgraded connections) are copied as they are.
async fn shim_connection(
    client: UnixStream,
    engine_conn: UnixStream,
    engine: (usize, usize),
) -> std::io::Result<()> {
    let (client_r, mut client_w) = client.into_split();
    let (engine_r, mut engine_w) = engine_conn.into_split();
    let up = async {
        let r = forward_requests(BufReader::new(client_r), &mut engine_w, engine).await;
        let _ = engine_w.shutdown().await;
        r
    };
    let down = async {
        let mut engine_r = engine_r;
        let r = tokio::io::copy(&mut engine_r, &mut client_w)
            .await
            .map(|_| ());
        let _ = client_w.shutdown().await;
        r
    };
    let (a, b) = tokio::join!(up, down);
    a.and(b)
}

/// Copies HTTP/1.1 requests from `from` to `to`, rewriting each request line's
/// `/vX.Y/` down to the engine's version and framing bodies by
/// `Content-Length` or chunked encoding; after an `Upgrade` request (attach,
/// exec) it copies raw bytes.
async fn forward_requests<R, W>(
    mut from: BufReader<R>,
    to: &mut W,
    engine: (usize, usize),
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let mut head = Vec::new();
        let mut first = true;
        let (mut content_length, mut chunked, mut upgrade) = (0u64, false, false);
        loop {
            let mut line = Vec::new();
            if from.read_until(b'\n', &mut line).await? == 0 {
                to.write_all(&head).await?;
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            if first {
                head.extend_from_slice(rewrite_request_line(&text, engine).as_bytes());
                first = false;
                continue;
            }
            head.extend_from_slice(&line);
            if text == "\r\n" || text == "\n" {
                break;
            }
            if let Some((name, value)) = text.split_once(':') {
                let (name, value) = (
                    name.trim().to_ascii_lowercase(),
                    value.trim().to_ascii_lowercase(),
                );
                match name.as_str() {
                    "content-length" => content_length = value.parse().unwrap_or(0),
                    "transfer-encoding" => chunked = value.contains("chunked"),
                    "upgrade" => upgrade = true,
                    _ => {}
                }
            }
        }
        to.write_all(&head).await?;
        if chunked {
            loop {
                let mut size_line = Vec::new();
                if from.read_until(b'\n', &mut size_line).await? == 0 {
                    return Ok(());
                }
                to.write_all(&size_line).await?;
                let size_text = String::from_utf8_lossy(&size_line);
                let size =
                    u64::from_str_radix(size_text.trim().split(';').next().unwrap_or("0"), 16)
                        .unwrap_or(0);
                if size == 0 {
                    // Trailers, up to the empty line.
                    loop {
                        let mut t = Vec::new();
                        if from.read_until(b'\n', &mut t).await? == 0 {
                            return Ok(());
                        }
                        to.write_all(&t).await?;
                        if t == b"\r\n" || t == b"\n" {
                            break;
                        }
                    }
                    break;
                }
                tokio::io::copy(&mut (&mut from).take(size + 2), to).await?;
            }
        } else if content_length > 0 {
            tokio::io::copy(&mut (&mut from).take(content_length), to).await?;
        }
        to.flush().await?;
        if upgrade {
            tokio::io::copy(&mut from, to).await?;
            return Ok(());
        }
    }
}

/// `POST /v1.53/containers/create HTTP/1.1` → `POST /v1.41/containers/create HTTP/1.1`
/// when the engine speaks 1.41; lines without a newer version are unchanged.
fn rewrite_request_line(line: &str, engine: (usize, usize)) -> String {
    let Some(start) = line.find(" /v") else {
        return line.to_string();
    };
    let after = &line[start + 3..];
    let Some(end) = after.find('/') else {
        return line.to_string();
    };
    match parse_version(&after[..end]) {
        Some(v) if v > engine => format!(
            "{} /v{}.{}{}",
            &line[..start],
            engine.0,
            engine.1,
            &after[end..]
        ),
        _ => line.to_string(),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_newer_than_the_engine_are_rewritten_down() {
        assert_eq!(
            rewrite_request_line("POST /v1.53/containers/create?name=x HTTP/1.1\r\n", (1, 41)),
            "POST /v1.41/containers/create?name=x HTTP/1.1\r\n"
        );
        assert_eq!(
            rewrite_request_line("GET /v1.40/_ping HTTP/1.1\r\n", (1, 41)),
            "GET /v1.40/_ping HTTP/1.1\r\n"
        );
        assert_eq!(
            rewrite_request_line("GET /version HTTP/1.1\r\n", (1, 41)),
            "GET /version HTTP/1.1\r\n"
        );
    }

    #[tokio::test]
    async fn forwarding_keeps_bodies_and_rewrites_every_request_of_a_connection() {
        let input = b"POST /v1.53/a HTTP/1.1\r\nContent-Length: 20\r\n\r\nGET /v1.53/x HTTP/1.1\
POST /v1.53/b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n/v1.5\r\n0\r\n\r\n\
GET /v1.53/c HTTP/1.1\r\n\r\n";
        let mut out = Vec::new();
        forward_requests(BufReader::new(&input[..]), &mut out, (1, 41))
            .await
            .unwrap();
        let expected = b"POST /v1.41/a HTTP/1.1\r\nContent-Length: 20\r\n\r\nGET /v1.53/x HTTP/1.1\
POST /v1.41/b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n/v1.5\r\n0\r\n\r\n\
GET /v1.41/c HTTP/1.1\r\n\r\n";
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(expected)
        );
    }
}
