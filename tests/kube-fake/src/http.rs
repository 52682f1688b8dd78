//! [`FakeApi`] over HTTP/1.1 on loopback, for tests that run a binary against it.
//!
//! Every request has its own connection. A watch (`?watch=true`) is answered with a chunked
//! stream of the events after its `resourceVersion` as they come ([`ApiServer::put`] changes an
//! object while the binary runs), until its `timeoutSeconds`, the client going away or the
//! server stopping.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::api::{FakeApi, Seen, is_watch, seen};

/// The API and a condition variable that [`ApiServer::put`] signals.
type Shared = Arc<(Mutex<FakeApi>, Condvar)>;

/// [`FakeApi`] answering HTTP/1.1 on 127.0.0.1 (one request per connection); stops when dropped.
pub struct ApiServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    api: Shared,
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Error",
    }
}

/// Streams the events `request` sees as chunks, from its `resourceVersion` on.
fn stream_watch(mut stream: TcpStream, request: &Seen, api: &Shared, stop: &AtomicBool) {
    let mut after: u64 = request
        .query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let until = request
        .query
        .get("timeoutSeconds")
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(300), Duration::from_secs);
    let deadline = Instant::now() + until;
    let (lock, changed) = &**api;
    let first = lock.lock().unwrap().watch_events(request, after);
    if let Err((code, body)) = first {
        let head = format!(
            "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            reason(code),
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body);
        return;
    }
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() || stream.flush().is_err() {
        return;
    }
    while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
        let events = {
            let guard = lock.lock().unwrap();
            let (guard, _) = changed
                .wait_timeout_while(guard, Duration::from_millis(100), |api| {
                    api.revision() <= after
                })
                .unwrap();
            guard.watch_events(request, after).unwrap_or_default()
        };
        for (revision, mut line) in events {
            line.push(b'\n');
            let chunk = [
                format!("{:x}\r\n", line.len()).as_bytes(),
                &line,
                b"\r\n".as_slice(),
            ]
            .concat();
            if stream.write_all(&chunk).is_err() || stream.flush().is_err() {
                return;
            }
            after = after.max(revision);
        }
        // Events of other types or objects move the resource version on too.
        after = after.max(lock.lock().unwrap().revision());
    }
    let _ = stream.write_all(b"0\r\n\r\n");
}

fn answer(stream: TcpStream, api: &Shared, log: &Mutex<Vec<Seen>>, stop: &AtomicBool) {
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
    log.lock().unwrap().push(request.clone());
    let mut stream = reader.into_inner();
    if is_watch(&request) {
        stream_watch(stream, &request, api, stop);
        return;
    }
    let (code, body) = api.0.lock().unwrap().respond(&request);
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
        let api: Shared = Arc::new((Mutex::new(api), Condvar::new()));
        let (log, stopped, served) = (Arc::clone(&seen), Arc::clone(&stop), Arc::clone(&api));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (api, log, stop) =
                    (Arc::clone(&served), Arc::clone(&log), Arc::clone(&stopped));
                std::thread::spawn(move || answer(stream, &api, &log, &stop));
            }
        });
        Self {
            url: format!("http://{address}"),
            address,
            seen,
            stop,
            api,
        }
    }

    /// Changes an object while the server runs ([`FakeApi::put`]): watches see the event.
    pub fn put(&self, object: Value) {
        let (lock, changed) = &*self.api;
        lock.lock().unwrap().put(object);
        changed.notify_all();
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
