//! Tests of `memmon plot` and `memmon record --plot`: real recordings of workloads with known
//! memory, drawn to SVG (parsed as XML) and PNG (decoded), and the errors a user can make.

use crate::util::*;
use memmon::units::fmt_bytes;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

/// Records a workload at 50 ms into `dir/name` and returns the recording's path.
fn record(dir: &Path, name: &str, steps: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec![
        "record".to_string(),
        "-q".into(),
        "-i".into(),
        "50ms".into(),
    ];
    args.extend(["-o".to_string(), out.display().to_string(), "--".into()]);
    args.extend(workload(steps));
    memmon().args(&args).assert().success();
    out
}

/// Every text element of an SVG file, which must parse as XML.
fn svg_texts(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the plot is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

fn has_text(texts: &[String], needle: &str) -> bool {
    texts.iter().any(|t| t.contains(needle))
}

#[test]
fn an_svg_plot_parses_and_labels_the_peak_with_its_value() {
    let dir = tempdir();
    let rec = record(
        dir.path(),
        "run.csv",
        &["alloc:120MiB", "hold:300ms", "free", "hold:300ms"],
    );
    let svg = dir.path().join("run.svg");
    memmon()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(&rec)
        .assert()
        .success();
    let texts = svg_texts(&svg);
    let peak = summary_json(&rec)["sampled_peak_rss_bytes"]
        .as_u64()
        .unwrap();
    assert!(peak >= 120 * MIB, "peak {peak}");
    let label = format!("peak {}", fmt_bytes(peak));
    assert!(has_text(&texts, &label), "no '{label}' in {texts:?}");
}

#[test]
fn the_axes_state_their_units() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:60MiB", "hold:300ms"]);
    let svg = dir.path().join("run.svg");
    memmon()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(&rec)
        .assert()
        .success();
    let texts = svg_texts(&svg);
    assert!(has_text(&texts, "RSS (MiB, 2^20 bytes)"), "{texts:?}");
    assert!(has_text(&texts, "Time since start (s)"), "{texts:?}");
    // The recording's peak as the summary decides it: the cgroup's as root (memmon's own),
    // else the kernel's high-water mark.
    assert!(
        [
            "(VmHWM)",
            "(ru_maxrss)",
            "(memory.max_usage_in_bytes)",
            "(memory.peak)"
        ]
        .iter()
        .any(|c| texts.iter().any(|t| t.starts_with("peak") && t.contains(c))),
        "{texts:?}"
    );
    assert!(has_text(&texts, "idle floor"), "{texts:?}");
}

#[test]
fn a_png_plot_decodes_to_the_requested_size() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:40MiB", "hold:300ms"]);
    let png = dir.path().join("run.png");
    memmon()
        .args(["plot", "--width", "640", "--height", "360", "-o"])
        .arg(&png)
        .arg(&rec)
        .assert()
        .success();
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().expect("a valid PNG");
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut buf).expect("its pixels decode");
    assert_eq!((frame.width, frame.height), (640, 360));
    // Not a blank image: the drawing put several colours on it.
    let pixels = &buf[..frame.buffer_size()];
    let distinct: std::collections::HashSet<&[u8]> = pixels.chunks(3).collect();
    assert!(distinct.len() > 10, "only {} colours", distinct.len());
}

#[test]
fn several_files_overlaid_give_a_legend_with_each_files_name() {
    let dir = tempdir();
    let base = record(dir.path(), "baseline.csv", &["alloc:80MiB", "hold:300ms"]);
    let cand = record(dir.path(), "candidate.csv", &["alloc:40MiB", "hold:300ms"]);
    let svg = dir.path().join("both.svg");
    memmon()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(&base)
        .arg(&cand)
        .assert()
        .success();
    let texts = svg_texts(&svg);
    assert!(has_text(&texts, "baseline.csv RSS"), "{texts:?}");
    assert!(has_text(&texts, "candidate.csv RSS"), "{texts:?}");
    assert!(has_text(&texts, "baseline.csv: peak"), "{texts:?}");
    assert!(has_text(&texts, "candidate.csv: peak"), "{texts:?}");
}

#[test]
fn optional_series_appear_in_the_legend() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:40MiB", "hold:300ms"]);
    let svg = dir.path().join("run.svg");
    memmon()
        .args([
            "plot",
            "--parts",
            "--swap",
            "--series",
            "locked_bytes,hwm",
            "-o",
        ])
        .arg(&svg)
        .arg(&rec)
        .assert()
        .success();
    let texts = svg_texts(&svg);
    for label in [
        "anon (RssAnon)",
        "file (RssFile)",
        "shmem (RssShmem)",
        "swap (VmSwap)",
        "locked (VmLck)",
        "largest VmHWM",
    ] {
        assert!(has_text(&texts, label), "no '{label}' in {texts:?}");
    }
    assert!(has_text(&texts, "Memory (MiB, 2^20 bytes)"), "{texts:?}");
}

#[test]
fn a_marker_in_the_recording_is_drawn_with_its_label() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:40MiB", "hold:400ms"]);
    // Label a middle row with a marker, as `memmon mark` would.
    let text = std::fs::read_to_string(&rec).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mid = lines.len() / 2;
    let row = lines[mid].rsplit_once(',').unwrap().0.to_string();
    lines[mid] = format!("{row},mark:prove-start");
    std::fs::write(&rec, lines.join("\n") + "\n").unwrap();
    let svg = dir.path().join("run.svg");
    memmon()
        .args(["plot", "-o"])
        .arg(&svg)
        .arg(&rec)
        .assert()
        .success();
    assert!(has_text(&svg_texts(&svg), "prove-start"));
}

#[test]
fn a_bad_output_extension_fails_with_exit_2_naming_the_flag() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:10MiB", "hold:100ms"]);
    memmon()
        .args(["plot", "-o"])
        .arg(dir.path().join("run.jpg"))
        .arg(&rec)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--output").and(predicate::str::contains(".svg or .png")));
    assert!(!dir.path().join("run.jpg").exists());
}

#[test]
fn an_unknown_series_fails_with_exit_2_naming_the_flag() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:10MiB", "hold:100ms"]);
    memmon()
        .args(["plot", "--series", "vram_bytes", "-o"])
        .arg(dir.path().join("run.svg"))
        .arg(&rec)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--series vram_bytes")
                .and(predicate::str::contains("locked_bytes")),
        );
}

#[test]
fn a_malformed_recording_fails_with_exit_2_naming_the_file_and_line() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:10MiB", "hold:100ms"]);
    let rows = read_csv(&rec).1.len();
    let mut text = std::fs::read_to_string(&rec).unwrap();
    text.push_str("12,not-a-row\n");
    std::fs::write(&rec, text).unwrap();
    let bad_line = format!("{}:{}:", rec.display(), rows + 2);
    memmon()
        .args(["plot", "-o"])
        .arg(dir.path().join("run.svg"))
        .arg(&rec)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(bad_line));
}

#[test]
fn a_missing_recording_fails_with_exit_2_naming_it() {
    let dir = tempdir();
    let missing = dir.path().join("nope.csv");
    memmon()
        .args(["plot", "-o"])
        .arg(dir.path().join("run.svg"))
        .arg(&missing)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(missing.display().to_string()));
}

#[test]
fn record_with_plot_writes_the_plot_when_the_recording_ends() {
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    let svg = dir.path().join("run.svg");
    let mut args = vec![
        "record".to_string(),
        "-i".into(),
        "50ms".into(),
        "-o".into(),
        out.display().to_string(),
    ];
    args.extend(["--plot".to_string(), svg.display().to_string(), "--".into()]);
    args.extend(workload(&["alloc:50MiB", "hold:300ms"]));
    memmon()
        .args(&args)
        .assert()
        .success()
        .stderr(predicate::str::contains("plot written to"));
    let peak = summary_json(&out)["sampled_peak_rss_bytes"]
        .as_u64()
        .unwrap();
    assert!(has_text(
        &svg_texts(&svg),
        &format!("peak {}", fmt_bytes(peak))
    ));
}

#[test]
fn record_with_plot_refuses_a_recording_on_stdout() {
    let dir = tempdir();
    let svg = dir.path().join("run.svg");
    let mut args = vec![
        "record".to_string(),
        "--plot".into(),
        svg.display().to_string(),
        "--".into(),
    ];
    args.extend(workload(&["hold:100ms"]));
    memmon()
        .args(&args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--plot needs the recording in a file",
        ));
}

#[test]
fn record_with_a_bad_plot_extension_fails_before_recording() {
    let dir = tempdir();
    let out = dir.path().join("run.csv");
    let mut args = vec!["record".to_string(), "-o".into(), out.display().to_string()];
    args.extend([
        "--plot".to_string(),
        dir.path().join("run.gif").display().to_string(),
        "--".into(),
    ]);
    args.extend(workload(&["hold:100ms"]));
    memmon()
        .args(&args)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--plot").and(predicate::str::contains(".svg or .png")));
    assert!(!out.exists(), "nothing was recorded");
}

#[test]
fn asking_for_pss_of_a_recording_without_it_fails_with_exit_2() {
    let dir = tempdir();
    let rec = record(dir.path(), "run.csv", &["alloc:10MiB", "hold:100ms"]);
    memmon()
        .args(["plot", "--pss", "-o"])
        .arg(dir.path().join("run.svg"))
        .arg(&rec)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("--pss: no PSS values")
                .and(predicate::str::contains("record --pss")),
        );
}

#[test]
fn pss_recorded_with_record_pss_is_drawn_as_a_series() {
    let dir = tempdir();
    let rec = dir.path().join("run.csv");
    let mut args = vec![
        "record".to_string(),
        "-q".into(),
        "-i".into(),
        "50ms".into(),
    ];
    args.extend(["--pss", "--pss-every", "100ms", "-o"].map(String::from));
    args.extend([rec.display().to_string(), "--".into()]);
    args.extend(workload(&["alloc:20MiB", "hold:400ms"]));
    memmon().args(&args).assert().success();
    let svg = dir.path().join("run.svg");
    memmon()
        .args(["plot", "--pss", "-o"])
        .arg(&svg)
        .arg(&rec)
        .assert()
        .success();
    assert!(has_text(&svg_texts(&svg), "PSS"));
}
