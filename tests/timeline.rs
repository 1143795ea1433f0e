//! One time axis for a recording (src/analysis/timeline.rs): `memmon plot` and `memmon report`
//! place the samples of an `--append`ed recording at the same times, the second session after
//! the wall-clock gap.

use crate::util::*;
use memmon::format::InputSpec;
use memmon::render::plot::{load, PlotOptions};

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

#[test]
fn plot_and_report_put_an_appended_recording_on_the_same_time_axis() {
    let dir = tempdir();
    let rec = dir.path().join("two.csv");
    record_workload(&rec, &["-q", "-i", "50ms", "--append"], &["hold:300ms"])
        .assert()
        .success();
    // At least this much wall-clock time passes between the two sessions.
    let gap_s = 1.5;
    std::thread::sleep(std::time::Duration::from_secs_f64(gap_s));
    record_workload(&rec, &["-q", "-i", "50ms", "--append"], &["hold:300ms"])
        .assert()
        .success();
    let recorded_s = summary_json(&rec)["duration_s"].as_f64().unwrap();

    let trace = load(&rec, &InputSpec::default(), &PlotOptions::default()).unwrap();
    let plot_last = *trace.xs().last().unwrap();

    let html = dir.path().join("two.html");
    memmon()
        .args(["report", "-o"])
        .arg(&html)
        .arg(&rec)
        .assert()
        .success();
    let t = report_times(&std::fs::read_to_string(&html).unwrap());
    let report_last = *t.last().unwrap();

    // The report rounds to the millisecond.
    assert!(
        (plot_last - report_last).abs() <= 0.0005 + 1e-9,
        "plot ends at {plot_last} s, the report at {report_last} s"
    );
    // Both leave the gap between the sessions in: the last sample lies past the time recorded
    // in the sessions plus the gap (the summary's duration leaves the gap out).
    assert!(
        plot_last >= recorded_s + gap_s - 0.05,
        "last sample at {plot_last} s; {recorded_s} s recorded, {gap_s} s between the sessions"
    );
    // And the axis never goes back.
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "{t:?}");
    assert!(trace.xs().windows(2).all(|w| w[0] <= w[1]));
}
