//! Tests of `memmon report`: a report of real recordings, loaded in real headless Chromium,
//! draws every series without a script error and shows a hover tooltip with units.
//! Chromium is required (tests/outside-programs.txt; `./scripts/test` installs it): without it these tests fail.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Two recordings made once: a ramp, and a hold with a short spike.
fn recordings() -> &'static (PathBuf, PathBuf) {
    static R: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    R.get_or_init(|| {
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("ramp.csv");
        let b = dir.join("spike.csv");
        let children: Vec<_> = [
            (
                &a,
                vec!["ramp:80MiB:400ms", "hold:200ms", "free-all", "hold:150ms"],
            ),
            (
                &b,
                vec![
                    "alloc:30MiB",
                    "hold:200ms",
                    "spike:90MiB:150ms",
                    "hold:250ms",
                ],
            ),
        ]
        .into_iter()
        .map(|(path, steps)| {
            Command::new(memmon_path())
                .args(["record", "-q", "-i", "20ms", "-o"])
                .arg(path)
                .arg("--")
                .args(workload(&steps))
                .spawn()
                .unwrap()
        })
        .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "a recording failed");
        }
        (a, b)
    })
}

/// Writes a report of `files` (memmon report ARGS... -o OUT) and returns its path.
fn report(name: &str, args: &[&PathBuf]) -> PathBuf {
    let (a, _) = recordings();
    let out = a.parent().unwrap().join(name);
    let _ = std::fs::remove_file(&out);
    let o = memmon()
        .arg("report")
        .arg("-o")
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Runs headless Chromium on `page` with `extra` flags; fails the test when it is absent.
pub(crate) fn chromium(page: &Path, extra: &[&str]) -> Output {
    let bin = outside_program("chromium");
    let profile = tempdir();
    let url = format!("file://{}#selftest", page.display());
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes on threads so that a full pipe cannot stall Chromium.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).ok();
        v
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
    }
}

/// The value of attribute `name` on the dumped `<body>`.
pub(crate) fn body_attr(dom: &str, name: &str) -> Option<String> {
    let start = dom.find("<body")?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let key = format!("{name}=\"");
    let i = tag.find(&key)? + key.len();
    Some(tag[i..i + tag[i..].find('"')?].to_string())
}

/// The text inside the element with `id`.
fn element_text(dom: &str, id: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let open_end = start + dom[start..].find('>')? + 1;
    let close = open_end + dom[open_end..].find("</div>")?;
    Some(dom[open_end..close].to_string())
}

/// Console messages from the page itself (Chromium logs them as `INFO:CONSOLE`).
fn page_console_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") && l.contains("file://"))
        .collect()
}

#[test]
fn the_report_draws_every_series_without_errors_and_hovers_with_units() {
    let (a, b) = recordings();
    let page = report("two.html", &[a, b]);
    let out = chromium(&page, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {stderr}");
    assert_eq!(
        body_attr(&dom, "data-errors").as_deref(),
        Some("0"),
        "script errors: {:?}",
        body_attr(&dom, "data-last-error")
    );
    assert_eq!(
        page_console_lines(&stderr),
        Vec::<&str>::new(),
        "the page wrote to the console"
    );
    assert_eq!(body_attr(&dom, "data-series").as_deref(), Some("2"));
    assert_eq!(body_attr(&dom, "data-selftest").as_deref(), Some("done"));
    let hover = element_text(&dom, "selftest-hover").unwrap();
    assert!(hover.contains("t = "), "hover: {hover}");
    assert!(hover.contains("ramp.csv: "), "hover: {hover}");
    let has_size = hover
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[0].parse::<f64>().is_ok() && ["B", "KiB", "MiB", "GiB", "TiB"].contains(&w[1]));
    assert!(has_size, "no size with a unit in the hover text: {hover}");
}

#[test]
fn the_report_screenshot_is_written_under_target() {
    let (a, b) = recordings();
    let page = report("shot.html", &[a, b]);
    // The target directory (CARGO_TARGET_TMPDIR is its tmp/), wherever CARGO_TARGET_DIR puts it.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    std::fs::create_dir_all(target).unwrap();
    let shot = target.join("report-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let arg = format!("--screenshot={}", shot.display());
    let out = chromium(&page, &[&arg, "--window-size=1200,800"]);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let reader = decoder.read_info().unwrap();
    let info = reader.info();
    assert_eq!((info.width, info.height), (1200, 800));
}

#[test]
fn two_reports_compare_baseline_and_candidate() {
    let (a, b) = recordings();
    let page = report("cmp.html", &[a, b]);
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("Comparison: candidate against baseline"));
    assert!(
        html.contains("peak rose") || html.contains("peak fell"),
        "no verdict sentence"
    );
}

#[test]
fn the_reports_comparison_names_a_run_whose_better_peak_was_not_compared() {
    // Another tool's log has only a sampled peak, so both sides are held on it; the memmon
    // recording's own exact peak is named, as `compare` names it.
    let (a, _) = recordings();
    let log = a.parent().unwrap().join("psrecord.txt");
    std::fs::write(
        &log,
        "# Elapsed time   CPU (%)     Real (MB)   Virtual (MB)\n       0.000        0.000       10.000       90.000\n",
    )
    .unwrap();
    let html = std::fs::read_to_string(report("kinds.html", &[a, &log])).unwrap();
    let compare = memmon().arg("compare").arg(a).arg(&log).output().unwrap();
    let text = String::from_utf8_lossy(&compare.stdout);
    let named = text
        .split(" (")
        .find(|part| part.contains("also had"))
        .and_then(|part| part.split(')').next())
        .unwrap_or_else(|| panic!("compare names no run above the basis:\n{text}"))
        .to_string();
    assert!(
        html.contains(&named.replace('\'', "&#39;")),
        "the report lacks {named:?}"
    );
}

#[test]
fn the_report_is_self_contained() {
    let (a, _) = recordings();
    let html = std::fs::read_to_string(report("one.html", &[a])).unwrap();
    for needle in ["http://", "https://", "<link", "src=\""] {
        assert!(!html.contains(needle), "the report references {needle}");
    }
    assert!(
        !html.contains("Comparison"),
        "one recording has nothing to compare"
    );
}

#[test]
fn an_existing_report_is_not_overwritten_without_force() {
    let (a, _) = recordings();
    let page = report("keep.html", &[a]);
    std::fs::write(&page, "precious").unwrap();
    let o = memmon()
        .arg("report")
        .arg("-o")
        .arg(&page)
        .arg(a)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "precious");
}
