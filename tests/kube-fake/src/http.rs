//! [`FakeApi`] over HTTP/1.1 on loopback, for tests that run a binary against it.
//!
//! Every request has its own connection. The server reads the request's `Content-Type`, its
//! bearer token and its body ([`crate::api::Call`]), so that writes are answered
//! ([`FakeApi::handle`]) and users without RBAC refused. A watch (`?watch=true`) is answered with a chunked
//! stream of the events after its `resourceVersion` as they come ([`ApiServer::put`] changes an
//! object while the binary runs), until its `timeoutSeconds`, the client going away or the
//! server stopping.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::api::{Call, FakeApi, Seen, is_watch, seen};

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
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "Error",
    }
}

/// The head of an answer with `body`: a `Status` or object is JSON, anything else (the 404 of
/// a path nothing is served at) plain text, as a real server sends them.
fn head(code: u16, body: &[u8]) -> String {
    let content_type = if body.first() == Some(&b'{') {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(code),
        body.len()
    )
}

/// Reads a body of `Content-Length` bytes, or chunked.
fn read_body(
    reader: &mut BufReader<TcpStream>,
    length: Option<usize>,
    chunked: bool,
) -> Option<Vec<u8>> {
    use std::io::Read;
    if chunked {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                return Some(body);
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    let mut body = vec![0; length.unwrap_or(0)];
    reader.read_exact(&mut body).ok()?;
    Some(body)
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
        let _ = stream.write_all(head(code, &body).as_bytes());
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
    let (mut content_type, mut token, mut length, mut chunked) = (String::new(), None, None, false);
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => return,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = value.to_owned(),
            "content-length" => length = value.parse().ok(),
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "authorization" => {
                token = value.strip_prefix("Bearer ").map(|t| t.trim().to_owned());
            }
            _ => {}
        }
    }
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return;
    };
    let Some(body) = read_body(&mut reader, length, chunked) else {
        return;
    };
    let call = Call {
        seen: seen(method, target),
        content_type,
        token,
        body,
    };
    log.lock().unwrap().push(call.seen.clone());
    let mut stream = reader.into_inner();
    if is_watch(&call.seen) {
        let refused = api.0.lock().unwrap().authorize(&call);
        if let Err((code, body)) = refused {
            let _ = stream.write_all(head(code, &body).as_bytes());
            let _ = stream.write_all(&body);
            return;
        }
        stream_watch(stream, &call.seen, api, stop);
        return;
    }
    let (code, body) = {
        let (lock, changed) = &**api;
        let answer = lock.lock().unwrap().handle(&call);
        // A write is an event for the watches.
        changed.notify_all();
        answer
    };
    let _ = stream.write_all(head(code, &body).as_bytes());
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
