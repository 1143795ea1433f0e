//! Inputs that are damaged, endless, compressed or not files at all: every reading subcommand
//! (summary, compare, plot, report) ends with the same exit code and a message naming the file
//! (and line) at fault. The corpus is tests/data/bad/, listed in its MANIFEST.tsv; inputs that
//! are large or not plain files are made here at run time.

use crate::util::{memmon, tempdir};
use std::io::Write;
use std::path::{Path, PathBuf};

const READERS: [&str; 4] = ["summary", "compare", "plot", "report"];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad")
}

/// A recording that reads fine, for `compare`'s other side.
fn good() -> PathBuf {
    corpus().join("crlf.csv")
}

/// Runs `sub` on `input` (its output, if any, into `dir`): exit code, stdout, stderr.
fn run(sub: &str, input: &Path, dir: &Path) -> (i32, String, String) {
    let mut cmd = memmon();
    cmd.arg(sub).arg(input);
    match sub {
        "compare" => {
            cmd.arg(good());
        }
        "plot" => {
            cmd.arg("--force").arg("-o").arg(dir.join("plot.svg"));
        }
        "report" => {
            cmd.arg("--force").arg("-o").arg(dir.join("report.html"));
        }
        _ => {}
    }
    let out = cmd
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts that every reading subcommand fails on `input` with exit 2 and `fragment`.
fn all_refuse(input: &Path, fragment: &str) {
    let dir = tempdir();
    for sub in READERS {
        let (code, _, err) = run(sub, input, dir.path());
        assert_eq!(code, 2, "{sub} {}: {err}", input.display());
        assert!(
            err.contains(fragment),
            "{sub}: expected '{fragment}' in: {err}"
        );
    }
}

#[test]
fn every_file_of_the_bad_input_corpus_ends_as_its_manifest_says() {
    let manifest = std::fs::read_to_string(corpus().join("MANIFEST.tsv")).unwrap();
    let mut listed = std::collections::BTreeSet::new();
    let dir = tempdir();
    let mut checked = 0;
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        let [file, subs, code, fragment] = f[..] else {
            panic!("MANIFEST.tsv: 4 tab-separated fields expected in '{line}'");
        };
        listed.insert(file.to_string());
        let subs: Vec<&str> = match subs {
            "all" => READERS.to_vec(),
            s => s.split(',').collect(),
        };
        for sub in subs {
            let (got, out, err) = run(sub, &corpus().join(file), dir.path());
            assert_eq!(got.to_string(), code, "{sub} {file}: {err}");
            let text = if got == 0 { out + &err } else { err };
            assert!(
                fragment == "-" || text.contains(fragment),
                "{sub} {file}: expected '{fragment}' in: {text}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 80, "{checked} runs");
    // Every file of the corpus is listed (a sidecar goes with its recording).
    for entry in std::fs::read_dir(corpus()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let owner = name.strip_suffix(".meta.json").unwrap_or(&name);
        assert!(
            name == "MANIFEST.tsv" || listed.contains(owner),
            "{name} is in tests/data/bad but not in its MANIFEST.tsv"
        );
    }
}

/// The header and `rows` rows, one a millisecond from the start of the recording
/// tests/data/fuzz_sidecar.meta.json describes, with a marker label of `label_len` bytes on
/// the rows listed.
fn recording(rows: usize, long_rows: &[usize], label_len: usize) -> Vec<u8> {
    let header = "unix_ms,elapsed_s,rss_bytes,anon_bytes,file_bytes,shmem_bytes,swap_bytes,locked_bytes,pinned_bytes,processes,top_pid,top_rss_bytes,hwm_bytes,hwm_sum_bytes,pss_bytes,missed_ticks,event\n";
    let mut v = header.as_bytes().to_vec();
    for i in 0..rows {
        let rss = (1 + i % 1000) << 20;
        write!(
            v,
            "{},{}.000000,{rss},0,0,0,0,0,0,1,42,{rss},{rss},{rss},,0,",
            1_771_372_328_313u64 + i as u64,
            i
        )
        .unwrap();
        if long_rows.contains(&i) {
            v.extend_from_slice(b"mark:");
            v.extend(std::iter::repeat_n(b'x', label_len));
        }
        v.push(b'\n');
    }
    v
}

#[test]
fn a_line_past_the_1_mib_cap_is_refused_at_its_line_by_every_subcommand() {
    let dir = tempdir();
    let p = dir.path().join("long.csv");
    // Row 500 (line 502) holds a 3 MiB marker label: memmon writes labels of at most 200
    // characters, so this is damage.
    std::fs::write(&p, recording(1000, &[500], 3 << 20)).unwrap();
    all_refuse(&p, "long.csv:502: the line is longer than 1 MiB");
}

#[test]
fn rows_after_long_lines_below_the_cap_are_all_read() {
    // Lines of 900 KiB, on both sides of the reader's 1 MiB chunk boundaries: every row comes
    // back (the parallel reader used to drop the rows after a line longer than its buffer).
    let dir = tempdir();
    let p = dir.path().join("labels.csv");
    std::fs::write(
        &p,
        recording(60_000, &[3, 4, 20_000, 20_001, 59_998], 900 << 10),
    )
    .unwrap();
    let s = crate::util::summary_json(&p);
    assert_eq!(s["samples"], 60_000, "{s}");
    assert_eq!(s["sampled_peak_rss_bytes"], 1000u64 << 20);
}

#[test]
fn an_input_that_never_ends_a_line_is_refused_without_reading_it_all() {
    let dir = tempdir();
    // A CSV whose header never ends, and a JSON Lines record that never does.
    let header = dir.path().join("endless.csv");
    std::fs::write(&header, vec![b'a'; 5 << 20]).unwrap();
    let jsonl = dir.path().join("endless.jsonl");
    let mut v = b"{".to_vec();
    v.extend(std::iter::repeat_n(b' ', 3 << 20));
    std::fs::write(&jsonl, v).unwrap();
    all_refuse(&jsonl, "endless.jsonl:1: the line is longer than 1 MiB");
    all_refuse(
        &header,
        "endless.csv:1: the first line is longer than 64 KiB",
    );
    // /dev/zero never ends at all: refused from its first 64 KiB, or its first MiB when an
    // importer is named.
    all_refuse(
        Path::new("/dev/zero"),
        "/dev/zero:1: the first line is longer than 64 KiB",
    );
    memmon()
        .args(["summary", "--input-format", "psrecord", "/dev/zero"])
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "/dev/zero:1: the line is longer than 1 MiB",
        ));
}

#[test]
fn a_directory_is_refused_by_name() {
    let dir = tempdir();
    let d = dir.path().join("runs");
    std::fs::create_dir(&d).unwrap();
    all_refuse(&d, "runs: it is a directory, not a recording");
    // A sidecar that is a directory is reported, not ignored.
    let p = dir.path().join("run.csv");
    std::fs::copy(good(), &p).unwrap();
    std::fs::create_dir(dir.path().join("run.csv.meta.json")).unwrap();
    all_refuse(
        &p,
        "run.csv.meta.json: it is a directory, not a metadata sidecar",
    );
}

#[test]
fn a_sidecar_of_another_recording_is_refused_by_every_reader() {
    let dir = tempdir();
    let p = dir.path().join("w.csv");
    std::fs::write(&p, recording(100, &[], 0)).unwrap();
    let side = dir.path().join("w.csv.meta.json");
    let sidecar_counting = |shift_ms: i64, samples: u64| {
        let mut m = fuzz_sidecar(samples);
        let shift = |t: &serde_json::Value| serde_json::Value::from(t.as_i64().unwrap() + shift_ms);
        m["started_unix_ms"] = shift(&m["started_unix_ms"]);
        m["end"]["ended_unix_ms"] = shift(&m["end"]["ended_unix_ms"]);
        std::fs::write(&side, serde_json::to_string(&m).unwrap()).unwrap();
    };
    let sidecar = |shift_ms: i64| sidecar_counting(shift_ms, 100);
    // Its own sidecar reads.
    sidecar(0);
    let (code, _, err) = run("summary", &p, dir.path());
    assert_eq!(code, 0, "{err}");
    // One made five minutes before the rows (another recording's, copied beside them).
    sidecar(-300_000);
    all_refuse(&p, "w.csv.meta.json: does not describe ");
    let (_, _, err) = run("summary", &p, dir.path());
    assert!(
        err.contains("its recording ran from 2026-02-17 23:47:08.300 UTC to 2026-02-17 23:47:12.300 UTC, the rows from 2026-02-17 23:52:08.313 UTC to 2026-02-17 23:52:08.412 UTC, all after it ended; move the sidecar away to read the rows alone"),
        "{err}"
    );
    // One made an hour after them.
    sidecar(3_600_000);
    all_refuse(&p, "all before it began");
    // One of a recording made within seconds of these rows (the clock cannot tell them apart),
    // whose recorder wrote fewer rows than the file holds.
    sidecar_counting(0, 99);
    all_refuse(&p, "w.csv.meta.json: does not describe ");
    let (_, _, err) = run("summary", &p, dir.path());
    assert!(
        err.contains(
            "its end records count 99 rows, the file holds 100 rows, more than its recorder wrote"
        ),
        "{err}"
    );
}

/// tests/data/fuzz_sidecar.meta.json, its end record counting `samples` rows.
fn fuzz_sidecar(samples: u64) -> serde_json::Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz_sidecar.meta.json"),
    )
    .unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["end"]["samples"] = samples.into();
    m
}

#[test]
fn a_recording_with_a_header_and_no_row_is_refused_by_every_reader() {
    // summary said "no samples" and exited 0 where the others exited 2: a CI step passed on a
    // recorder that wrote nothing.
    let dir = tempdir();
    let p = dir.path().join("header.csv");
    std::fs::write(&p, recording(0, &[], 0)).unwrap();
    all_refuse(&p, "holds no samples");
}

#[test]
fn stdin_given_twice_is_refused_by_every_reader() {
    // The stream was split between the two readers, and each blamed its half as damaged.
    let dir = tempdir();
    let data = std::fs::read(good()).unwrap();
    for (sub, out) in [
        ("summary", None),
        ("compare", None),
        ("plot", Some("p.svg")),
        ("report", Some("r.html")),
    ] {
        let mut cmd = memmon();
        cmd.current_dir(dir.path()).args([sub, "-", "-"]);
        if let Some(o) = out {
            cmd.args(["-o", o]);
        }
        cmd.write_stdin(data.clone())
            .assert()
            .code(2)
            .stderr(predicates::str::contains(
                "`-` (stdin) is given 2 times: stdin can be read once",
            ));
    }
}

#[test]
fn a_missing_input_exits_2_from_every_subcommand() {
    all_refuse(
        Path::new("/nonexistent/run.csv"),
        "cannot read /nonexistent/run.csv",
    );
}

#[test]
fn stdin_and_a_fifo_are_read_like_the_file() {
    let data = recording(2000, &[], 0);
    let dir = tempdir();
    let file = dir.path().join("run.csv");
    std::fs::write(&file, &data).unwrap();
    let plain = crate::util::summary_json(&file);

    let out = memmon()
        .args(["summary", "--json", "-"])
        .write_stdin(data.clone())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let piped: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(piped["samples"], plain["samples"]);
    assert_eq!(
        piped["sampled_peak_rss_bytes"],
        plain["sampled_peak_rss_bytes"]
    );

    let fifo = dir.path().join("run.fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for sub in ["summary", "plot"] {
        let writer = {
            let (fifo, data) = (fifo.clone(), data.clone());
            std::thread::spawn(move || std::fs::write(fifo, data).unwrap())
        };
        let (code, out, err) = run(sub, &fifo, dir.path());
        writer.join().unwrap();
        assert_eq!(code, 0, "{sub} on a FIFO: {err}");
        assert!(!err.contains("Illegal seek"), "{err}");
        match sub {
            // The largest row of `recording`: 1000 MiB.
            "summary" => assert!(out.contains("(1048576000 bytes)"), "{out}"),
            _ => assert!(dir.path().join("plot.svg").exists()),
        }
    }
}

#[test]
fn gzip_and_zstd_recordings_read_as_the_plain_one_with_its_sidecar() {
    let dir = tempdir();
    let data = recording(3000, &[7], 100);
    let plain = dir.path().join("run.csv");
    std::fs::write(&plain, &data).unwrap();
    // The sidecar stays `run.csv.meta.json` when `run.csv` is compressed.
    std::fs::write(
        dir.path().join("run.csv.meta.json"),
        serde_json::to_string_pretty(&fuzz_sidecar(3000)).unwrap(),
    )
    .unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&data).unwrap();
    std::fs::write(dir.path().join("run.csv.gz"), gz.finish().unwrap()).unwrap();
    let zst = zstd::encode_all(&data[..], 1).unwrap();
    std::fs::write(dir.path().join("run.csv.zst"), &zst).unwrap();
    // Recognised by its first bytes, whatever the name.
    std::fs::write(dir.path().join("renamed.txt"), &zst).unwrap();

    let want = crate::util::summary_json(&plain);
    assert!(want["samples"] == 3000, "{want}");
    for name in ["run.csv.gz", "run.csv.zst", "renamed.txt"] {
        let got = crate::util::summary_json(&dir.path().join(name));
        for key in ["samples", "peak_rss_bytes", "duration_s"] {
            assert_eq!(got[key], want[key], "{name}: {key}");
        }
        // Metadata from the sidecar `run.csv.meta.json` (renamed.txt has none).
        if name != "renamed.txt" {
            for key in [
                "kernel_peak_rss_bytes",
                "rusage_maxrss_bytes",
                "interval",
                "target",
            ] {
                assert_eq!(got[key], want[key], "{name}: {key}");
            }
        }
    }
    assert_eq!(want["interval"], "50ms", "the sidecar is read: {want}");
    // A sidecar named after the compressed file comes first.
    let own = std::fs::read_to_string(dir.path().join("run.csv.meta.json"))
        .unwrap()
        .replace("\"interval\": \"50ms\"", "\"interval\": \"7s\"");
    std::fs::write(dir.path().join("run.csv.gz.meta.json"), own).unwrap();
    let got = crate::util::summary_json(&dir.path().join("run.csv.gz"));
    assert_eq!(got["interval"], "7s");
    // A compressed stream cut short is an error naming the file, not a shorter recording.
    for (name, whole) in [
        ("cut.csv.zst", zst),
        (
            "cut.csv.gz",
            std::fs::read(dir.path().join("run.csv.gz")).unwrap(),
        ),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, &whole[..whole.len() / 2]).unwrap();
        all_refuse(&p, &format!("cannot read {}", p.display()));
    }
}

/// A zstd frame of `data` at level 1.
fn zstd_frame(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 1).unwrap()
}

#[test]
fn a_zstd_file_of_several_frames_is_read_to_its_last_frame() {
    // What `cat a.zst b.zst` and `zstd` of several inputs make: frames one after another.
    let dir = tempdir();
    let data = recording(290_000, &[], 0);
    let plain = dir.path().join("run.csv");
    std::fs::write(&plain, &data).unwrap();
    let cut = data.len() / 3;
    let cut = cut + data[cut..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut multi = zstd_frame(&data[..cut]);
    multi.extend(zstd_frame(&data[cut..]));
    let p = dir.path().join("multi.csv.zst");
    std::fs::write(&p, &multi).unwrap();
    let (got, want) = (
        crate::util::summary_json(&p),
        crate::util::summary_json(&plain),
    );
    assert_eq!(got["samples"], 290_000, "{got}");
    assert_eq!(got["duration_s"], want["duration_s"]);
    // The largest row of `recording`, 1000 MiB, is in the last frame's part too.
    assert!(got.to_string().contains("1048576000"), "{got}");
}

#[test]
fn a_pzstd_file_which_begins_with_a_skippable_frame_is_read_whole() {
    // pzstd writes each part as a skippable frame (magic 0x184D2A50, 4 bytes of length) holding
    // the compressed size of the zstd frame that follows it.
    let dir = tempdir();
    let data = recording(100_000, &[], 0);
    let mut pz = Vec::new();
    let mut parts = 0;
    for part in data.chunks(1 << 20) {
        let frame = zstd_frame(part);
        pz.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0]);
        pz.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        pz.extend_from_slice(&frame);
        parts += 1;
    }
    assert!(parts > 2, "several parts");
    let p = dir.path().join("run.csv.zst");
    std::fs::write(&p, &pz).unwrap();
    assert_eq!(crate::util::summary_json(&p)["samples"], 100_000);
    // Trailing bytes that are no frame are damage, said with their offset, not ignored.
    pz.extend_from_slice(b"garbage");
    std::fs::write(&p, &pz).unwrap();
    all_refuse(
        &p,
        &format!(
            "cannot read {}: compressed byte {}: what follows is not a zstd frame",
            p.display(),
            pz.len() - 7
        ),
    );
}

#[test]
fn a_sparse_2_gib_side_file_or_a_link_in_its_place_is_refused_before_it_is_read() {
    let dir = tempdir();
    let rec = dir.path().join("r.csv");
    crate::util::record_workload(
        &rec,
        &["-q", "-i", "20ms", "--anatomy"],
        &["alloc:8MiB", "hold:100ms"],
    )
    .assert()
    .success();
    let table = crate::anatomy::side(&rec);
    let sidecar = dir.path().join("r.csv.meta.json");
    let report = dir.path().join("r.html");
    let readers: [Vec<&std::ffi::OsStr>; 3] = [
        vec!["summary".as_ref(), rec.as_ref()],
        vec!["compare".as_ref(), rec.as_ref(), rec.as_ref()],
        vec![
            "report".as_ref(),
            "--force".as_ref(),
            "-o".as_ref(),
            report.as_ref(),
            rec.as_ref(),
        ],
    ];
    let refuse_all = |file: &Path, fragment: &str| {
        for args in &readers {
            let (code, err, rss) = crate::util::memmon_under_time(args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(
                err.contains(&file.display().to_string()) && err.contains(fragment),
                "{args:?}: expected {} and '{fragment}' in: {err}",
                file.display()
            );
            // Before: the whole table read first, 2.1 GB each.
            assert!(rss < 50 << 20, "{args:?} held {rss} bytes");
        }
    };
    let sparse = |path: &Path| {
        let f = std::fs::File::create(path).unwrap();
        f.set_len(2 << 30).unwrap();
    };

    let kept = dir.path().join("table.kept");
    std::fs::rename(&table, &kept).unwrap();
    sparse(&table);
    refuse_all(
        &table,
        "it is 2.00 GiB (2147483648 bytes), larger than 256.0 MiB (268435456 bytes), the most an anatomy table may be",
    );
    std::fs::remove_file(&table).unwrap();
    std::os::unix::fs::symlink(&kept, &table).unwrap();
    refuse_all(&table, "it is a symbolic link");
    std::fs::remove_file(&table).unwrap();
    std::fs::rename(&kept, &table).unwrap();

    let kept = dir.path().join("sidecar.kept");
    std::fs::rename(&sidecar, &kept).unwrap();
    sparse(&sidecar);
    refuse_all(
        &sidecar,
        "larger than 16.00 MiB (16777216 bytes), the most a metadata sidecar may be",
    );
    std::fs::remove_file(&sidecar).unwrap();
    std::os::unix::fs::symlink(&kept, &sidecar).unwrap();
    refuse_all(&sidecar, "it is a symbolic link");
}
