//! zstd input, decoded by the reference decoder (libzstd, through the `zstd` crate): every frame
//! in turn (a file of several frames, `pzstd`'s output; skippable frames are skipped), each
//! frame's window capped at [`MAX_WINDOW_BYTES`] so that memory stays bounded whatever a file
//! declares, and every failure said in words with the compressed byte where its frame began.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use zstd::zstd_safe::{self, zstd_sys::ZSTD_ErrorCode, DCtx, DParameter, InBuffer, OutBuffer};

/// The largest window a frame may declare, as a power of two: 2^27 bytes, 128 MiB, the limit the
/// zstd tool itself keeps unless given `--long` or `--memory`. Decoding a frame holds about its
/// window in memory (libzstd keeps the window and two 128 KiB blocks), so this is the bound on
/// what decompression costs.
pub const MAX_WINDOW_LOG: u32 = 27;
pub const MAX_WINDOW_BYTES: u64 = 1 << MAX_WINDOW_LOG;

/// The largest window the zstd tool decodes at all (`--long=31`): 2 GiB.
const TOOL_MAX_WINDOW_LOG: u32 = 31;

/// The longest zstd frame header: magic, descriptor, window, dictionary ID, content size.
const HEADER_MAX: usize = 18;

/// A zstd stream as the bytes it decodes to.
pub struct ZstdReader<R> {
    src: R,
    ctx: DCtx<'static>,
    input: Box<[u8]>,
    /// `input[pos..len]` is not yet given to the decoder.
    pos: usize,
    len: usize,
    src_done: bool,
    /// Compressed bytes given to the decoder so far, and where the current frame began.
    consumed: u64,
    frame_at: u64,
    /// The current frame's first bytes (its header is at most 18), to name its window.
    header: Vec<u8>,
    /// The decoder is inside a frame (its last answer asked for more input).
    in_frame: bool,
    /// The file's name, for the command that gets past the window cap.
    path: PathBuf,
    /// An error is final: later reads give it again, not what follows it.
    failed: Option<(io::ErrorKind, String)>,
}

impl<R: Read> ZstdReader<R> {
    /// A reader of the zstd stream `src` (its first bytes included), named `path` in messages.
    pub fn new(src: R, path: &Path) -> io::Result<ZstdReader<R>> {
        let mut ctx = DCtx::try_create()
            .ok_or_else(|| io::Error::other("cannot make a zstd decoder (out of memory?)"))?;
        ctx.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))
            .map_err(|code| io::Error::other(zstd_safe::get_error_name(code)))?;
        Ok(ZstdReader {
            src,
            ctx,
            input: vec![0u8; DCtx::in_size()].into_boxed_slice(),
            pos: 0,
            len: 0,
            src_done: false,
            consumed: 0,
            frame_at: 0,
            header: Vec::with_capacity(HEADER_MAX),
            in_frame: false,
            path: path.to_path_buf(),
            failed: None,
        })
    }

    fn refill(&mut self) -> io::Result<()> {
        loop {
            match self.src.read(&mut self.input) {
                Ok(n) => {
                    self.pos = 0;
                    self.len = n;
                    self.src_done = n == 0;
                    self.keep_header();
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Adds to `header` what it lacks of the current frame's first bytes from `input[pos..]`
    /// (the frame began at `pos`, or `header` holds what came before it).
    fn keep_header(&mut self) {
        let need = HEADER_MAX - self.header.len();
        let end = self.len.min(self.pos + need);
        self.header.extend_from_slice(&self.input[self.pos..end]);
    }

    /// The error for a libzstd error `code`, in words.
    fn error(&self, code: usize) -> io::Error {
        let at = format!("the zstd frame at compressed byte {}", self.frame_at);
        let kind = |k: ZSTD_ErrorCode| zstd_safe::is_error_kind(code, k);
        let msg = if kind(ZSTD_ErrorCode::ZSTD_error_frameParameter_windowTooLarge) {
            self.window_message(&at, declared_window(&self.header))
        } else if kind(ZSTD_ErrorCode::ZSTD_error_prefix_unknown) {
            format!(
                "compressed byte {}: what follows is not a zstd frame (the file is damaged, or other data was appended to it)",
                self.frame_at
            )
        } else if kind(ZSTD_ErrorCode::ZSTD_error_dictionary_wrong) {
            format!(
                "{at} was compressed with a dictionary (zstd -D), which memmon does not have: \
                 decompress it with `zstd -d -D DICTIONARY {}` and read the result",
                self.path.display()
            )
        } else if kind(ZSTD_ErrorCode::ZSTD_error_checksum_wrong) {
            format!("{at} decodes to data that does not match its checksum: the file is damaged")
        } else if kind(ZSTD_ErrorCode::ZSTD_error_memory_allocation) {
            format!("out of memory while decompressing {at}")
        } else {
            format!(
                "{at} is damaged: it cannot be decompressed (zstd: {})",
                zstd_safe::get_error_name(code)
            )
        };
        io::Error::new(io::ErrorKind::InvalidData, msg)
    }

    fn window_message(&self, at: &str, declared: Option<u64>) -> String {
        let cap = fmt_window(MAX_WINDOW_BYTES);
        let Some(window) = declared else {
            return format!(
                "{at} needs a window larger than the {cap} memmon decompresses (the zstd tool's \
                 own default limit): decompress it first, e.g. `zstd -d --long=31 {}`, and read the result",
                self.path.display()
            );
        };
        let log = 64 - (window - 1).leading_zeros();
        if log > TOOL_MAX_WINDOW_LOG {
            return format!(
                "{at} declares a window of {}, more than zstd decodes at all ({}): the file is damaged or was not made by zstd",
                fmt_window(window),
                fmt_window(1 << TOOL_MAX_WINDOW_LOG)
            );
        }
        format!(
            "{at} declares a window of {}, more than the {cap} memmon decompresses (the zstd \
             tool's own default limit): decompress it first with `zstd -d --long={log} {}` and read the result",
            fmt_window(window),
            self.path.display()
        )
    }

    fn fail(&mut self, e: io::Error) -> io::Error {
        self.failed = Some((e.kind(), e.to_string()));
        e
    }
}

impl<R: Read> Read for ZstdReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some((kind, msg)) = &self.failed {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.pos == self.len && !self.src_done {
                if let Err(e) = self.refill() {
                    return Err(self.fail(e));
                }
            }
            let at_end = self.pos == self.len && self.src_done;
            let mut input = InBuffer::around(&self.input[self.pos..self.len]);
            let mut output = OutBuffer::around(&mut *buf);
            let hint = match self.ctx.decompress_stream(&mut output, &mut input) {
                Ok(hint) => hint,
                Err(code) => {
                    let e = self.error(code);
                    return Err(self.fail(e));
                }
            };
            let (read, written) = (input.pos(), output.pos());
            self.pos += read;
            self.consumed += read as u64;
            if hint == 0 {
                // A frame (or a skippable frame) ended here: the next begins at this byte.
                self.in_frame = false;
                self.frame_at = self.consumed;
                self.header.clear();
                self.keep_header();
            } else if read > 0 {
                // (Asked for input with none given, the decoder still answers that it wants a
                // frame header: only input taken starts a frame.)
                self.in_frame = true;
            }
            if written > 0 {
                return Ok(written);
            }
            if at_end {
                if self.in_frame {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the zstd stream ends inside the frame at compressed byte {}: the file is truncated",
                            self.frame_at
                        ),
                    );
                    return Err(self.fail(e));
                }
                return Ok(0);
            }
        }
    }
}

/// A window size as exactly as it is: `128 MiB`, `2.25 GiB`, else with its bytes.
fn fmt_window(bytes: u64) -> String {
    for (unit, name) in [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ] {
        // Exact in at most two decimals (a Window_Descriptor's mantissa is in eighths).
        // In u128: a declared window may be near 2^64, and 100 times it is not a u64.
        if bytes >= unit && (u128::from(bytes) * 100) % u128::from(unit) == 0 {
            let text = format!("{:.2}", bytes as f64 / unit as f64);
            return format!(
                "{} {name}",
                text.trim_end_matches('0').trim_end_matches('.')
            );
        }
    }
    format!("{} ({bytes} bytes)", crate::units::fmt_bytes(bytes))
}

/// The window a zstd frame header declares (`bytes` from its magic number on), when the
/// header is whole in `bytes`: the Window_Descriptor's size, or the content size of a
/// single-segment frame.
pub fn declared_window(bytes: &[u8]) -> Option<u64> {
    if bytes.get(..4)? != [0x28, 0xb5, 0x2f, 0xfd] {
        return None;
    }
    let fhd = *bytes.get(4)?;
    let single_segment = fhd & 0x20 != 0;
    if !single_segment {
        let wd = *bytes.get(5)?;
        let log = 10 + u32::from(wd >> 3);
        let base = 1u64 << log;
        return Some(base + (base / 8) * u64::from(wd & 7));
    }
    let dict_bytes = [0usize, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_bytes = [1usize, 2, 4, 8][usize::from(fhd >> 6)];
    let at = 5 + dict_bytes;
    let field = bytes.get(at..at + fcs_bytes)?;
    let mut fcs = 0u64;
    for (i, b) in field.iter().enumerate() {
        fcs |= u64::from(*b) << (8 * i);
    }
    Some(if fcs_bytes == 2 { fcs + 256 } else { fcs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_near_2_pow_64_is_said_without_overflow() {
        // A damaged header may declare any window (under-load's proptest found one whose
        // hundredfold overflowed a u64: a panic in a debug build).
        assert_eq!(fmt_window(128 << 20), "128 MiB");
        assert_eq!(fmt_window(!((1u64 << 40) - 1)), "16777215 TiB");
        assert!(fmt_window(u64::MAX).ends_with("(18446744073709551615 bytes)"));
    }

    fn decode(data: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        ZstdReader::new(data, Path::new("x.zst"))?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn every_frame_is_read_and_skippable_frames_are_skipped() {
        let a = zstd::encode_all(&b"first frame\n"[..], 3).unwrap();
        let b = zstd::encode_all(&b"second frame\n"[..], 3).unwrap();
        let mut data = a.clone();
        // A skippable frame (magic 0x184D2A5?, a 4-byte length, that many bytes) between them.
        data.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 1, 2, 3]);
        data.extend_from_slice(&b);
        assert_eq!(decode(&data).unwrap(), b"first frame\nsecond frame\n");
    }

    #[test]
    fn a_stream_cut_inside_a_frame_is_an_error_naming_where_the_frame_began() {
        let a = zstd::encode_all(&b"first frame\n"[..], 3).unwrap();
        let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let b = zstd::encode_all(&big[..], 3).unwrap();
        let mut data = a.clone();
        data.extend_from_slice(&b[..b.len() / 2]);
        let e = decode(&data).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(
            e.to_string(),
            format!(
                "the zstd stream ends inside the frame at compressed byte {}: the file is truncated",
                a.len()
            )
        );
    }

    #[test]
    fn a_window_past_the_cap_is_refused_with_its_size_and_the_way_past_it() {
        // A frame header declaring a 2 GiB window (Window_Descriptor: exponent 21), then one
        // empty last raw block.
        let data = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3, 0x01, 0x00, 0x00];
        assert_eq!(declared_window(&data), Some(2 << 30));
        let msg = decode(&data).unwrap_err().to_string();
        assert_eq!(
            msg,
            "the zstd frame at compressed byte 0 declares a window of 2 GiB, more than the \
             128 MiB memmon decompresses (the zstd tool's own default limit): decompress it \
             first with `zstd -d --long=31 x.zst` and read the result"
        );
        // Past what zstd decodes at all.
        let data = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 30 << 3, 0x01, 0x00, 0x00];
        let msg = decode(&data).unwrap_err().to_string();
        assert!(msg.contains("more than zstd decodes at all"), "{msg}");
    }

    #[test]
    fn garbage_after_the_last_frame_is_named_by_its_byte() {
        let mut data = zstd::encode_all(&b"a\n"[..], 3).unwrap();
        let at = data.len();
        data.extend_from_slice(b"not zstd");
        let msg = decode(&data).unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!(
                "compressed byte {at}: what follows is not a zstd frame"
            )),
            "{msg}"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Cut or damaged anywhere, a stream of several frames decodes to something or to an
        /// error, never a panic; whole, to its data.
        #[test]
        fn a_cut_or_damaged_stream_never_panics(
            cut in 0usize..4000,
            flips in proptest::collection::vec((0usize..4000, 1u8..=255), 0..4),
        ) {
            let data: Vec<u8> = (0..30_000u32).flat_map(|i| format!("{i},{}\n", i % 97).into_bytes()).collect();
            let mut z = zstd::encode_all(&data[..10_000], 3).unwrap();
            z.extend_from_slice(&[0x5a, 0x2a, 0x4d, 0x18, 2, 0, 0, 0, 7, 7]);
            z.extend(zstd::encode_all(&data[10_000..], 3).unwrap());
            let cut = cut.min(z.len());
            let mut damaged = z[..z.len() - cut].to_vec();
            for (at, x) in flips {
                let n = damaged.len();
                if n > 0 {
                    damaged[at % n] ^= x;
                }
            }
            let out = decode(&damaged);
            if damaged == z {
                proptest::prop_assert_eq!(out.unwrap(), data);
            }
        }
    }

    #[test]
    fn a_single_segment_header_declares_its_content_size() {
        // FHD 0x20: single segment, a 1-byte content size.
        assert_eq!(
            declared_window(&[0x28, 0xb5, 0x2f, 0xfd, 0x20, 200]),
            Some(200)
        );
        // FHD 0x60: single segment, a 2-byte content size (plus 256).
        assert_eq!(
            declared_window(&[0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00, 0x01]),
            Some(512)
        );
        assert_eq!(declared_window(&[0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00]), None);
    }
}
