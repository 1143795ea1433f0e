//! A mutation fuzzer over every reader of recordings and imported files: valid inputs are
//! damaged (bit flips, cuts, duplicated or dropped lines, long lines, numeric extremes, a
//! byte-order mark, CRLF, compression) and each reader must give samples or a clean error:
//! no panic, no hang, memory bounded by the line cap.
//!
//! `cargo test fuzz` runs a fixed seed and a bounded number of cases; a longer run:
//! `MEMMON_FUZZ_CASES=1000000 MEMMON_FUZZ_SEED=7 cargo test --release fuzz` (BENCHMARKS.md).

use super::input::{self, MAX_LINE_BYTES};
use super::read::read_from;
use super::{InputFormat, InputSpec, ReadError};
use crate::model::sample::{Event, Sample};
use std::path::Path;

/// xorshift64*: small, deterministic, enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Valid inputs of every format a reader takes, with the spec that reads each.
fn seeds() -> Vec<(&'static str, Vec<u8>, InputSpec)> {
    let auto = InputSpec::default();
    let mut csv = Vec::new();
    let mut jsonl = Vec::new();
    {
        use super::RowSink;
        let mut c = super::csv::CsvWriter::new(&mut csv, true).unwrap();
        let mut j = super::jsonl::JsonlWriter::new(&mut jsonl);
        for i in 0..40u64 {
            let s = Sample {
                unix_ms: 1_771_372_328_313 + i * 100,
                elapsed_s: i as f64 / 10.0,
                rss_bytes: (i + 1) << 20,
                anon_bytes: i << 19,
                processes: 1 + (i % 3) as u32,
                top_pid: 4242,
                top_rss_bytes: i << 20,
                hwm_bytes: (i + 2) << 20,
                pss_bytes: (i % 2 == 0).then_some(i << 18),
                event: match i % 10 {
                    0 => Some(Event::Start),
                    3 => Some(Event::Mark("phase, \"one\"".into())),
                    7 => Some(Event::Restart(77)),
                    _ => None,
                },
                ..Sample::default()
            };
            c.write_sample(&s).unwrap();
            j.write_sample(&s).unwrap();
        }
    }
    let columns = InputSpec {
        format: InputFormat::Columns,
        columns: Some("unix_ms,rss_kb,-".into()),
    };
    let monitor = include_bytes!("../../tests/data/monitor.csv").to_vec();
    vec![
        ("csv", csv, auto.clone()),
        ("jsonl", jsonl, auto.clone()),
        (
            "psrecord plain",
            include_bytes!("../../tests/data/psrecord_plain.txt").to_vec(),
            auto.clone(),
        ),
        (
            "psrecord csv",
            include_bytes!("../../tests/data/psrecord_children.csv").to_vec(),
            auto.clone(),
        ),
        (
            "mprof",
            include_bytes!("../../tests/data/mprof_children.dat").to_vec(),
            auto,
        ),
        ("columns", monitor, columns),
    ]
}

const EXTREMES: &[&str] = &[
    "18446744073709551616",
    "99999999999999999999999",
    "4294967297",
    "-1",
    "-0",
    "NaN",
    "inf",
    "-inf",
    "1e309",
    "1e-400",
    "",
    "0x10",
    " 12",
];

/// Damages `data` in one of several ways.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    let pick = rng.below(12);
    let at = rng.below(data.len() + 1);
    match pick {
        0 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] ^= 1 << rng.below(8);
        }
        1 if !data.is_empty() => {
            let i = rng.below(data.len());
            data[i] = *b"\n\r,\"-.e{}:\0\xff 0"
                .get(rng.below(14))
                .expect("in range");
        }
        2 => data.truncate(at),
        3 | 4 => {
            // Duplicate or drop a line.
            let lines: Vec<&[u8]> = data.split_inclusive(|&b| b == b'\n').collect();
            if lines.is_empty() {
                return;
            }
            let i = rng.below(lines.len());
            let mut out = Vec::with_capacity(data.len() * 2);
            for (k, l) in lines.iter().enumerate() {
                if k != i || pick == 3 {
                    out.extend_from_slice(l);
                }
                if k == i && pick == 3 {
                    for _ in 0..=rng.below(3) {
                        out.extend_from_slice(l);
                    }
                }
            }
            *data = out;
        }
        5 => {
            // A long line: short, near the cap, or past it (rarely: it costs memory and time).
            let len = match rng.below(20) {
                0 => MAX_LINE_BYTES + rng.below(3),
                1 => MAX_LINE_BYTES - rng.below(3),
                2 => input::HEAD_BYTES + rng.below(3) - 1,
                _ => rng.below(5000),
            };
            let fill = *b"x,9\" ".get(rng.below(5)).expect("in range");
            let mut line = vec![fill; len];
            if rng.below(2) == 0 {
                line.push(b'\n');
            }
            data.splice(at..at, line);
        }
        6 | 7 => {
            // A number replaced by an extreme.
            let starts: Vec<usize> = (0..data.len())
                .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
                .collect();
            if starts.is_empty() {
                return;
            }
            let s = starts[rng.below(starts.len())];
            let e = (s..data.len())
                .find(|&i| !data[i].is_ascii_digit() && data[i] != b'.')
                .unwrap_or(data.len());
            let x = EXTREMES[rng.below(EXTREMES.len())].as_bytes();
            data.splice(s..e, x.iter().copied());
        }
        8 => {
            data.splice(0..0, *b"\xef\xbb\xbf");
        }
        9 => {
            let crlf: Vec<u8> = data
                .iter()
                .flat_map(|&b| {
                    if b == b'\n' {
                        vec![b'\r', b'\n']
                    } else {
                        vec![b]
                    }
                })
                .collect();
            *data = crlf;
        }
        10 => {
            use std::io::Write;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(data).unwrap();
            *data = gz.finish().unwrap();
        }
        11 => {
            *data = zstd::encode_all(&data[..], 1).unwrap();
        }
        _ => {}
    }
}

/// Reads `data` as `spec` says; any outcome but a panic is fine, and a success must be sane.
fn read_case(data: &[u8], spec: &InputSpec, path: &Path) -> Result<usize, ReadError> {
    let input = input::from_reader(path, Box::new(std::io::Cursor::new(data.to_vec())), false)?;
    let mut n = 0usize;
    let info = read_from(input, spec, &mut |s: &crate::model::sample::Sample| {
        assert!(s.elapsed_s.is_finite() && s.elapsed_s >= 0.0, "{s:?}");
        assert!(s.unix_ms <= super::MAX_UNIX_MS);
        n += 1;
    })?;
    // Each sample comes from a line of its own.
    assert!(
        n as u64 <= info.bytes,
        "{n} samples from {} bytes",
        info.bytes
    );
    Ok(n)
}

/// How many cases, and the seed: `MEMMON_FUZZ_CASES`, `MEMMON_FUZZ_SEED`.
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn fuzz_every_reader_with_damaged_inputs() {
    let cases = setting("MEMMON_FUZZ_CASES", 1000);
    let mut rng = Rng(setting("MEMMON_FUZZ_SEED", 0x6d65_6d6d_6f6e) | 1);
    let dir = tempfile::tempdir().unwrap();
    // No sidecar is beside it: the sidecar reader is fuzzed on its own below.
    let path = dir.path().join("fuzz-input");
    let seeds = seeds();
    let (mut ok, mut refused) = (0u64, 0u64);
    // Per seed: reads that gave samples, and reads refused.
    let mut by_seed = vec![(0u64, 0u64); seeds.len()];
    for case in 0..cases {
        let (name, seed, spec) = &seeds[case as usize % seeds.len()];
        let mut data = seed.clone();
        for _ in 0..=rng.below(4) {
            mutate(&mut rng, &mut data);
        }
        // Auto-detection, and the importer the seed is for, each read the damaged bytes.
        for spec in [spec, &InputSpec::default()] {
            let outcome = std::panic::catch_unwind(|| read_case(&data, spec, &path));
            match outcome {
                Ok(Ok(_)) => {
                    ok += 1;
                    by_seed[case as usize % seeds.len()].0 += 1;
                }
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    assert!(!msg.is_empty());
                    refused += 1;
                    by_seed[case as usize % seeds.len()].1 += 1;
                }
                Err(_) => panic!(
                    "case {case} ({name}, seed {}) panicked on {} bytes: {:?}",
                    setting("MEMMON_FUZZ_SEED", 0x6d65_6d6d_6f6e),
                    data.len(),
                    String::from_utf8_lossy(&data[..data.len().min(300)])
                ),
            }
        }
    }
    eprintln!("fuzz: {cases} cases, {ok} reads gave samples, {refused} refused cleanly");
    for ((name, ..), (ok, refused)) in seeds.iter().zip(&by_seed) {
        eprintln!("fuzz: {name}: {ok} read, {refused} refused");
    }
    assert!(
        ok > 0 && refused > 0,
        "the mutations should both keep and break inputs"
    );
}

#[test]
fn fuzz_the_sidecar_reader() {
    let cases = setting("MEMMON_FUZZ_CASES", 1000) / 4;
    let mut rng = Rng(setting("MEMMON_FUZZ_SEED", 0x6d65_6d6d_6f6e) | 1);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run.csv");
    std::fs::write(&run, &seeds()[0].1).unwrap();
    let side = super::sidecar_path(&run);
    let meta = include_str!("../../tests/data/fuzz_sidecar.meta.json");
    for _ in 0..cases {
        let mut data = meta.as_bytes().to_vec();
        for _ in 0..=rng.below(3) {
            mutate(&mut rng, &mut data);
        }
        std::fs::write(&side, &data).unwrap();
        // A damaged sidecar is an error naming the sidecar, never a panic and never ignored.
        match super::read_recording(&run, |_| {}) {
            Ok(info) => assert!(info.meta.is_some()),
            Err(e) => assert!(e.to_string().contains("meta.json"), "{e}"),
        }
    }
}
