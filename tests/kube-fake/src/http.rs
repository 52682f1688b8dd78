//! [`FakeApi`] over HTTP/1.1 on loopback, for tests that run a binary against it.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::api::{FakeApi, Seen, seen};

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
