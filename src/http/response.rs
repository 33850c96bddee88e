//! Responses: status, headers, a full body or a stream.

use std::io;

/// A streaming body writer: gets the connection (with a write deadline per write) and
/// writes until it returns. The connection closes afterwards.
pub type StreamFn = Box<dyn FnOnce(&mut dyn io::Write) -> io::Result<()> + Send>;

pub enum Body {
    Full(Vec<u8>),
    Stream(StreamFn),
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: Body::Full(body),
        }
    }

    /// A JSON response from a serialisable value. Encoding failure becomes a 500.
    pub fn json<T: serde::Serialize + ?Sized>(status: u16, value: &T) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::new(status, "application/json", body),
            Err(e) => Response::error(500, &format!("response could not be encoded: {e}")),
        }
    }

    /// As [`Response::json`], encoding into a buffer of `capacity` bytes reserved at once: a
    /// body of known size (the status snapshot, about 10 KB) is not regrown and copied about
    /// seven times on its way from 128 bytes.
    pub fn json_with_capacity<T: serde::Serialize + ?Sized>(
        status: u16,
        value: &T,
        capacity: usize,
    ) -> Response {
        let mut body = Vec::with_capacity(capacity);
        match serde_json::to_writer(&mut body, value) {
            Ok(()) => Response::new(status, "application/json", body),
            Err(e) => Response::error(500, &format!("response could not be encoded: {e}")),
        }
    }

    /// `{"error": message}` with the given status.
    pub fn error(status: u16, message: &str) -> Response {
        let body = serde_json::to_vec(&serde_json::json!({ "error": message }))
            .unwrap_or_else(|_| b"{\"error\":\"internal error\"}".to_vec());
        Response::new(status, "application/json", body)
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    pub fn is_stream(&self) -> bool {
        matches!(self.body, Body::Stream(_))
    }

    /// The status line and headers. `keep_alive` decides the Connection header; streams
    /// always close.
    pub fn head_bytes(&self, keep_alive: bool) -> Vec<u8> {
        let mut h = Vec::with_capacity(256);
        h.extend_from_slice(b"HTTP/1.1 ");
        h.extend_from_slice(self.status.to_string().as_bytes());
        h.push(b' ');
        h.extend_from_slice(reason(self.status).as_bytes());
        h.extend_from_slice(b"\r\n");
        for (n, v) in &self.headers {
            h.extend_from_slice(n.as_bytes());
            h.extend_from_slice(b": ");
            // Header values never carry CR or LF (response splitting).
            h.extend(v.bytes().filter(|&b| b != b'\r' && b != b'\n'));
            h.extend_from_slice(b"\r\n");
        }
        h.extend_from_slice(
            b"X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nStrict-Transport-Security: max-age=31536000\r\n",
        );
        match &self.body {
            Body::Full(b) => {
                h.extend_from_slice(b"Content-Length: ");
                h.extend_from_slice(b.len().to_string().as_bytes());
                h.extend_from_slice(b"\r\n");
                if keep_alive {
                    h.extend_from_slice(b"Connection: keep-alive\r\n");
                } else {
                    h.extend_from_slice(b"Connection: close\r\n");
                }
            }
            Body::Stream(_) => h.extend_from_slice(b"Connection: close\r\n"),
        }
        h.extend_from_slice(b"\r\n");
        h
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        302 => "Found",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: &Response) -> &[u8] {
        match &r.body {
            Body::Full(b) => b,
            Body::Stream(_) => panic!("not a full body"),
        }
    }

    #[test]
    fn a_reserved_buffer_encodes_the_same_bytes() {
        let value = serde_json::json!({ "a": [1, 2, 3], "b": "x\"y\n", "c": { "d": null } });
        let plain = Response::json(200, &value);
        for capacity in [0, 1, 16, 4096] {
            let sized = Response::json_with_capacity(200, &value, capacity);
            assert_eq!(sized.status, 200);
            assert_eq!(body(&sized), body(&plain));
            assert_eq!(sized.head_bytes(true), plain.head_bytes(true));
        }
        // Exactly what was reserved: the body was not regrown.
        let sized = Response::json_with_capacity(200, &value, 4096);
        match &sized.body {
            Body::Full(b) => assert_eq!(b.capacity(), 4096),
            Body::Stream(_) => unreachable!(),
        }
    }
}
