//! One time axis for a recording (src/analysis/timeline.rs): `memmon plot` and `memmon report`
//! place the samples of an `--append`ed recording at the same times, the second session after
//! the wall-clock gap.

use crate::util::*;
use memmon::format::InputSpec;
use memmon::render::plot::{load, PlotOptions};
use std::path::Path;

/// The `t` of the report's first series, from the data the page embeds.
fn report_times(html: &str) -> Vec<f64> {
    let open = "<script type=\"application/json\" id=\"memmon-data\">";
    let start = html.find(open).expect("the report embeds its data") + open.len();
    let len = html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..start + len]).unwrap();
    data["series"][0]["t"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect()
}

/// `memmon COMMAND -o DIR/NAME REC` (plot, report), which must succeed: what it wrote.
fn written(dir: &Path, command: &str, name: &str, rec: &Path) -> String {
    let out = dir.join(name);
    memmon()
        .args([command, "-o"])
        .arg(&out)
        .arg(rec)
        .assert()
        .success();
    std::fs::read_to_string(&out).unwrap()
}

/// Records the workload `first` into `rec`, waits `gap_s`, and appends a session of `second`
/// (`record -q -i 50ms --append`).
fn two_sessions(rec: &Path, first: &[&str], gap_s: f64, second: &[&str]) {
    for (i, steps) in [first, second].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_secs_f64(gap_s));
        }
        record_workload(rec, &["-q", "-i", "50ms", "--append"], steps)
            .assert()
            .success();
    }
}

#[test]
fn plot_and_report_put_an_appended_recording_on_the_same_time_axis() {
    let dir = tempdir();
    let rec = dir.path().join("two.csv");
    // At least this much wall-clock time passes between the two sessions.
    let gap_s = 1.5;
    two_sessions(&rec, &["hold:300ms"], gap_s, &["hold:300ms"]);
    let recorded_s = summary_json(&rec)["duration_s"].as_f64().unwrap();

    let trace = load(&rec, &InputSpec::default(), &PlotOptions::default()).unwrap();
    let plot_last = *trace.xs().last().unwrap();

    let t = report_times(&written(dir.path(), "report", "two.html", &rec));
    let report_last = *t.last().unwrap();

    // The report rounds to the millisecond.
    assert!(
        (plot_last - report_last).abs() <= 0.0005 + 1e-9,
        "plot ends at {plot_last} s, the report at {report_last} s"
    );
    // Both leave the gap between the sessions in: the last sample lies past the time recorded
    // in the sessions plus the gap (the summary's duration leaves the gap out). A session of a
    // launched command lasts as long as the command, up to an interval past its last sample.
    assert!(
        plot_last >= recorded_s + gap_s - 2.0 * 0.05 - 0.05,
        "last sample at {plot_last} s; {recorded_s} s recorded, {gap_s} s between the sessions"
    );
    // And the axis never goes back.
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    assert!(trace.xs().windows(2).all(|w| w[0] <= w[1]));
}

/// The x pixel coordinates of each `<polyline>` drawn in `stroke` with `stroke-width="2"` at
/// full opacity: the RSS lines of a one-file plot (the legend's sample is one of them).
fn svg_lines(svg: &str, stroke: &str) -> Vec<Vec<f64>> {
    let head = format!(
        "<polyline fill=\"none\" opacity=\"1\" stroke=\"{stroke}\" stroke-width=\"2\" points=\""
    );
    svg.match_indices(&head)
        .map(|(at, _)| {
            let rest = &svg[at + head.len()..];
            let points = &rest[..rest.find('"').unwrap()];
            points
                .split_whitespace()
                .map(|p| p.split(',').next().unwrap().parse().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn an_appended_recording_over_budget_fails_and_is_drawn_with_its_gap() {
    let dir = tempdir();
    let rec = dir.path().join("two.csv");
    // The first session holds 96 MiB, the second 8 MiB: the second's peak alone is under the
    // budget, the recording's is not.
    two_sessions(
        &rec,
        &["alloc:96MiB", "hold:300ms"],
        2.0,
        &["alloc:8MiB", "hold:600ms"],
    );

    let r = memmon()
        .args(["summary", "--max-peak", "50MiB"])
        .arg(&rec)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{out}{err}");
    assert!(err.contains("--max-peak 50.00 MiB exceeded"), "{err}");
    assert!(
        out.contains("2 (--append)") && out.contains("every number above covers all"),
        "{out}"
    );
    let s = summary_json(&rec);
    assert_eq!(s["sessions"].as_array().unwrap().len(), 2, "{s:#}");
    assert!(s["peak"]["bytes"].as_u64().unwrap() >= 96 << 20, "{s:#}");

    // The report does not join the last point of the first session to the first of the next.
    let html = written(dir.path(), "report", "two.html", &rec);
    let t = report_times(&html);
    let open = "<script type=\"application/json\" id=\"memmon-data\">";
    let start = html.find(open).unwrap() + open.len();
    let len = html[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&html[start..start + len]).unwrap();
    let breaks: Vec<usize> = data["series"][0]["breaks"]
        .as_array()
        .expect("the report marks where the second session begins")
        .iter()
        .map(|b| b.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(breaks.len(), 1, "{breaks:?}");
    let b = breaks[0];
    assert!(
        t[b] - t[b - 1] >= 1.9,
        "the break lies at the gap: {:?}",
        &t[b - 1..=b]
    );

    // The plot draws two lines of RSS, the second starting right of where the first ends.
    let lines = svg_lines(&written(dir.path(), "plot", "two.svg", &rec), "#1F77B4");
    // Without the legend's sample, a level stroke 18 pixels wide (a session may have few
    // points on a loaded machine, so length does not tell them apart).
    let lines: Vec<&Vec<f64>> = lines
        .iter()
        .filter(|l| !(l.len() == 2 && (l[1] - l[0] - 18.0).abs() < 0.5))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let first_end = lines[0].iter().cloned().fold(f64::MIN, f64::max);
    let second_start = lines[1].iter().cloned().fold(f64::MAX, f64::min);
    assert!(
        second_start > first_end + 100.0,
        "{first_end} then {second_start}"
    );
}

#[test]
fn summary_plot_and_report_place_an_appended_recordings_peak_alike() {
    let dir = tempdir();
    let rec = dir.path().join("two.csv");
    // The peak is in the second session, whose own clock starts again near 0.
    two_sessions(&rec, &["hold:300ms"], 1.0, &["alloc:40M", "hold:300ms"]);

    let s = summary_json(&rec);
    assert_eq!(s["sampled_peak_session"], 2, "{s}");
    let elapsed = s["sampled_peak_elapsed_s"].as_f64().unwrap();
    let x = s["sampled_peak_x_s"].as_f64().unwrap();
    // Past the 1 s gap on the axis (the session's own clock may start well before its first
    // row on a busy machine, so x - elapsed may be less than the gap).
    assert!(
        x >= 1.0 && x > elapsed,
        "the peak lies after the 1 s gap on the axis: {s}"
    );

    // The plot draws the peak where the summary says, and the summary's words name both clocks.
    let trace = load(&rec, &InputSpec::default(), &PlotOptions::default()).unwrap();
    assert_eq!(trace.summary.sampled_peak_x_s, x);
    let at = memmon::units::fmt_seconds(x);
    let drawn = written(dir.path(), "plot", "two.svg", &rec);
    assert!(
        drawn.contains(&format!(" at {at}")),
        "no 'at {at}' in the plot"
    );
    let text = summary_text(&rec);
    let words = format!(
        "(+{} into session 2; {at} on the plot's time axis)",
        memmon::units::fmt_seconds(elapsed)
    );
    assert!(text.contains(&words), "no {words:?} in:\n{text}");

    // The report's sampled peak cell says the same (its apostrophe escaped).
    let page = written(dir.path(), "report", "two.html", &rec);
    let words = words.replace('\'', "&#39;");
    assert!(page.contains(&words), "no {words:?} in the report");
}
