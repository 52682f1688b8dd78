//! Helpers of the process tests: the fake API server over HTTP on loopback, a kubeconfig that
//! points at it, and running `mcsctl`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod fake_api;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fake_api::{FakeApi, Seen, objects_of, seen};

/// The recorded objects of member cluster east.
pub fn fixture() -> Vec<serde_json::Value> {
    objects_of(include_str!("../fixtures/cluster-east.yaml"))
}

/// [`FakeApi`] answering HTTP/1.1 on 127.0.0.1 (one request per connection); stops when dropped.
pub struct ApiServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Error",
    }
}

fn answer(stream: TcpStream, api: &FakeApi, log: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    let request = seen(method, target);
    let (code, body) = api.respond(&request);
    log.lock().unwrap().push(request);
    let mut stream = reader.into_inner();
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(code),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
    let _ = stream.flush();
}

impl ApiServer {
    /// Starts answering with `api`.
    pub fn start(api: FakeApi) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopped) = (Arc::clone(&seen), Arc::clone(&stop));
        let api = Arc::new(api);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (api, log) = (Arc::clone(&api), Arc::clone(&log));
                std::thread::spawn(move || answer(stream, &api, &log));
            }
        });
        Self {
            url: format!("http://{address}"),
            address,
            seen,
            stop,
        }
    }

    /// The requests so far as sorted `GET /path?query` lines.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.seen.lock().unwrap().iter().map(Seen::line).collect();
        lines.sort();
        lines
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

/// Writes a kubeconfig with contexts `east` (namespace rook-ceph, current) and `shop`
/// (namespace shop), both on `server`.
pub fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: east
  cluster: {{server: '{server}'}}
users:
- name: me
  user: {{token: not-a-secret}}
contexts:
- name: east
  context: {{cluster: east, user: me, namespace: rook-ceph}}
- name: shop
  context: {{cluster: east, user: me, namespace: shop}}
current-context: east
"
        ),
    )
    .unwrap();
    path
}

/// Runs mcsctl with `args`, without the caller's KUBECONFIG, colour or CI settings.
pub fn mcsctl(args: &[&str]) -> Output {
    mcsctl_with(args, &[])
}

/// Runs mcsctl with `args` and extra environment variables.
pub fn mcsctl_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcsctl"));
    command.args(args);
    for variable in [
        "KUBECONFIG",
        "KUBERNETES_SERVICE_HOST",
        "NO_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
    ] {
        command.env_remove(variable);
    }
    command.envs(env.iter().copied());
    command.output().unwrap()
}

/// stdout of a run, as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// stderr of a run, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}
