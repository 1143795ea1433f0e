//! memmon's marker protocol on the wire: one connection per marker, one JSON line each way
//! (docs/FORMAT.md, "The marker socket"). Written and read here without a JSON library: the
//! request has two fields, and of the reply only `ok` and `error` are read.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The longest label the recorder keeps, in characters (it cuts longer ones the same way).
pub const MAX_LABEL_CHARS: usize = 200;
/// The longest reply read.
const MAX_REPLY_BYTES: usize = 64 * 1024;
/// How long a request may take to write (the recorder wants it whole within 2 s).
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a queued marker's reply may take: the recorder answers it at once, after handing
/// it to its sampler; this is room for a loaded machine.
pub const QUEUED_REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a marker that waits for its row may take (`memmon mark` waits as long).
pub const ROW_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// The request line: `{"mark":"LABEL","at_unix_us":N}` for a marker queued without waiting for
/// its row (its row's lag counts from N), `{"mark":"LABEL"}` for one that waits for its row.
pub fn request(label: &str, at_unix_us: Option<u64>) -> String {
    let mut line = String::with_capacity(label.len() + 48);
    line.push_str("{\"mark\":\"");
    for c in label.chars() {
        match c {
            '"' => line.push_str("\\\""),
            '\\' => line.push_str("\\\\"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\t' => line.push_str("\\t"),
            c if (c as u32) < 0x20 => line.push_str(&format!("\\u{:04x}", c as u32)),
            c => line.push(c),
        }
    }
    line.push('"');
    if let Some(at) = at_unix_us {
        line.push_str(",\"at_unix_us\":");
        line.push_str(&at.to_string());
    }
    line.push_str("}\n");
    line
}

/// `label` cut to the characters the recorder keeps.
pub fn cut(label: &str) -> &str {
    match label.char_indices().nth(MAX_LABEL_CHARS) {
        Some((i, _)) => &label[..i],
        None => label,
    }
}

/// What went wrong sending one marker.
#[derive(Debug)]
pub enum SendError {
    /// Nobody listens on the socket any more (the recorder ended): look for another one.
    Gone(std::io::Error),
    /// The recorder did not answer in time, or the connection broke.
    NoReply(String),
}

/// The recorder's answer: taken (or queued), or refused with its reason.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Ok,
    Refused(String),
}

/// Sends one request line to the recorder on `path` and reads its reply line.
pub fn send(path: &Path, line: &str, reply_timeout: Duration) -> Result<Reply, SendError> {
    let stream = UnixStream::connect(path).map_err(SendError::Gone)?;
    let broken = |what: &str, e: std::io::Error| SendError::NoReply(format!("{what}: {e}"));
    stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(|e| broken("cannot send", e))?;
    (&stream)
        .write_all(line.as_bytes())
        .map_err(|e| broken("cannot send", e))?;
    let deadline = Instant::now() + reply_timeout;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            buf.truncate(end);
            break;
        }
        if buf.len() > MAX_REPLY_BYTES {
            return Err(SendError::NoReply("the reply is too long".into()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(SendError::NoReply(format!(
                "none within {} s",
                reply_timeout.as_secs()
            )));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| broken("cannot read the reply", e))?;
        match (&stream).read(&mut chunk) {
            Ok(0) if buf.is_empty() => {
                return Err(SendError::NoReply("the connection was closed".into()))
            }
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(broken("cannot read the reply", e)),
        }
    }
    Ok(parse_reply(&String::from_utf8_lossy(&buf)))
}

/// The recorder writes `ok` first: `{"ok":true,...}` or `{"ok":false,...,"error":"WHY"}`.
pub fn parse_reply(line: &str) -> Reply {
    if line.trim_start().starts_with("{\"ok\":true") {
        return Reply::Ok;
    }
    let why = string_field(line, "error").unwrap_or_else(|| format!("an unreadable reply: {line}"));
    Reply::Refused(why)
}

/// The string value of `"name":"..."` in a JSON line, unescaped.
fn string_field(line: &str, name: &str) -> Option<String> {
    let key = format!("\"{name}\":\"");
    let start = line.find(&key)? + key.len();
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(
                        u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .unwrap_or('\u{fffd}'),
                    );
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_one_json_line_with_the_label_escaped() {
        assert_eq!(
            request("synthesis", Some(1_700_000_000_123_456)),
            "{\"mark\":\"synthesis\",\"at_unix_us\":1700000000123456}\n"
        );
        assert_eq!(
            request("a \"b\"\\c\nd\u{1}é", None),
            "{\"mark\":\"a \\\"b\\\"\\\\c\\nd\\u0001é\"}\n"
        );
    }

    #[test]
    fn labels_are_cut_at_the_recorders_length_on_a_character_boundary() {
        let long = "é".repeat(300);
        assert_eq!(cut(&long).chars().count(), MAX_LABEL_CHARS);
        assert_eq!(cut("short"), "short");
    }

    #[test]
    fn replies_say_ok_or_why_not() {
        assert_eq!(
            parse_reply("{\"ok\":true,\"label\":\"x\",\"queued\":true}"),
            Reply::Ok
        );
        assert_eq!(
            parse_reply("{\"ok\":false,\"label\":\"\",\"elapsed_s\":0.0,\"error\":\"the \\\"recording\\\" has ended\"}"),
            Reply::Refused("the \"recording\" has ended".into())
        );
        assert!(matches!(parse_reply("garbage"), Reply::Refused(w) if w.contains("garbage")));
    }
}
