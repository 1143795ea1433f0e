//! The benchmark's table for the terminal, hyperfine-like: one line per run (time, exit status,
//! peak with its source, sampled peak, peak over the idle floor, RSS before and after), then the
//! statistics.

use super::{BenchReport, RunResult};
use crate::units::{fmt_bytes, fmt_bytes_signed};
use std::fmt::Write as _;

/// Wall time with a precision that suits it: `12.3 ms`, `1.234 s`, `95.0 s`.
pub fn fmt_wall(secs: f64) -> String {
    if secs < 1.0 {
        format!("{:.1} ms", secs * 1e3)
    } else if secs < 60.0 {
        format!("{secs:.3} s")
    } else {
        format!("{secs:.1} s")
    }
}

/// The CPU time of a run, user / system: the daemon's (`0.12 s / 0.03 s`, in clock ticks), or
/// without a daemon the command's (`0.123 s / 0.031 s`, from wait4); `-` when not known.
pub fn cpu_cell(r: &RunResult) -> String {
    match (
        r.daemon_user_s,
        r.daemon_system_s,
        r.command_user_s,
        r.command_system_s,
    ) {
        (Some(u), Some(s), _, _) => format!("{u:.2} s / {s:.2} s"),
        (_, _, Some(u), Some(s)) => format!("{u:.3} s / {s:.3} s"),
        _ => "-".into(),
    }
}

/// A run's peak: `≥ 3.08 MiB` when it is a lower bound (processes left the tree with no exit
/// record read), else the number.
pub fn peak_cell(r: &RunResult) -> String {
    if r.peak_source.is_kernel() && r.kernel_peak_scope.is_partial() {
        format!("≥ {}", fmt_bytes(r.peak_rss_bytes))
    } else {
        fmt_bytes(r.peak_rss_bytes)
    }
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map(fmt_bytes).unwrap_or_else(|| "-".into())
}

fn exit_text(r: &RunResult) -> String {
    match (r.exit_code, r.exit_signal) {
        (Some(c), _) => c.to_string(),
        (None, Some(s)) => crate::sampler::signals::name(s),
        _ => "?".into(),
    }
}

/// A run's PSS: the largest read, `*` when the reads do not make it a peak (one read, or
/// reads only near the run's start).
pub fn pss_cell(r: &RunResult) -> String {
    match &r.pss {
        Some(p) if p.is_peak => fmt_bytes(p.largest_bytes),
        Some(p) => format!("{} *", fmt_bytes(p.largest_bytes)),
        None => "-".into(),
    }
}

/// For runs of several processes: which columns are RSS sums that count a shared page in each
/// process, and which count it once.
pub fn shared_pages_note(report: &BenchReport) -> Option<String> {
    let most = report.runs.iter().map(|r| r.processes).max().unwrap_or(0);
    if most <= 1 {
        return None;
    }
    let mut once = Vec::new();
    if report.runs.iter().any(|r| r.pss.is_some()) {
        once.push("PSS (sum of PSS; * where fewer than 2 reads cover the run: not a peak)");
    }
    if report.runs.iter().any(|r| r.cgroup_peak_bytes.is_some()) {
        once.push(if report.daemon.is_some() {
            "Cgroup peak (the daemon's own cgroup)"
        } else {
            "Cgroup peak (each run's tree in a cgroup of memmon's own: its exact peak)"
        });
    }
    let sampled_peak = report
        .runs
        .iter()
        .any(|r| r.peak_source == super::PeakSource::Sampled);
    Some(format!(
        "Sampled{}{}: RSS sums over up to {most} processes, shared pages counted in each{}",
        if sampled_peak {
            ", Peak where sampled"
        } else {
            ""
        },
        if report.daemon.is_some() {
            ", Over floor, RSS before and after"
        } else {
            ""
        },
        if once.is_empty() {
            " (--pss for a sum that counts them once)".to_string()
        } else {
            format!("; counted once: {}", once.join(", "))
        }
    ))
}

/// The whole table, ending with a newline.
pub fn render(report: &BenchReport) -> String {
    let mut o = String::new();
    let against = match &report.daemon {
        Some(d) => format!(" against PID {} ({})", d.pid, d.comm),
        None => String::new(),
    };
    let _ = writeln!(
        o,
        "Benchmark: {} of {} runs of {}{against}, interval {}",
        report.runs.len(),
        report.runs_requested,
        report.client,
        report.interval
    );
    if report.runs.is_empty() {
        let _ = writeln!(o, "  no run was measured");
    } else {
        let daemon = report.daemon.is_some();
        let cgroup = report.runs.iter().any(|r| r.cgroup_peak_bytes.is_some());
        let mut head = format!(
            "  {:>4}  {:>11}  {:>7}  {:>11}  {:<7}  {:>11}",
            "Run", "Time", "Exit", "Peak", "Source", "Sampled"
        );
        if daemon {
            head += &format!(
                "  {:>11}  {:>11}  {:>11}  {:>15}",
                "Over floor", "RSS before", "RSS after", "Daemon CPU u/s"
            );
        } else {
            head += &format!("  {:>19}", "CPU u/s");
        }
        if cgroup {
            head += &format!("  {:>11}", "Cgroup peak");
        }
        let pss = report.runs.iter().any(|r| r.pss.is_some());
        if pss {
            head += &format!("  {:>11}", "PSS");
        }
        let gpu = report.runs.iter().any(|r| r.peak_gpu_bytes.is_some());
        if gpu {
            head += &format!("  {:>11}", "GPU peak");
        }
        if let Some(note) = shared_pages_note(report) {
            let _ = writeln!(o, "  {note}");
        }
        let _ = writeln!(o, "{head}");
        for r in &report.runs {
            let mut line = format!(
                "  {:>4}  {:>11}  {:>7}  {:>11}  {:<7}  {:>11}",
                r.run,
                fmt_wall(r.wall_s),
                exit_text(r),
                peak_cell(r),
                r.peak_source.key(),
                fmt_bytes(r.sampled_peak_bytes)
            );
            if daemon {
                line += &format!(
                    "  {:>11}  {:>11}  {:>11}  {:>15}",
                    r.peak_over_floor_bytes
                        .map(|b| fmt_bytes_signed(b as i64))
                        .unwrap_or_else(|| "-".into()),
                    opt_bytes(r.rss_before_bytes),
                    opt_bytes(r.rss_after_bytes),
                    cpu_cell(r)
                );
            } else {
                line += &format!("  {:>19}", cpu_cell(r));
            }
            if cgroup {
                line += &format!("  {:>11}", opt_bytes(r.cgroup_peak_bytes));
            }
            if pss {
                line += &format!("  {:>11}", pss_cell(r));
            }
            if gpu {
                line += &format!("  {:>11}", opt_bytes(r.peak_gpu_bytes));
            }
            let _ = writeln!(o, "{line}");
        }
        if let Some(st) = &report.stats {
            let _ = writeln!(o);
            let w = &st.wall_s;
            let _ = writeln!(
                o,
                "  Time        mean {} ± {}   [min {}, max {}]",
                fmt_wall(w.mean),
                fmt_wall(w.stddev),
                fmt_wall(w.min),
                fmt_wall(w.max)
            );
            let b = fmt_bytes;
            let p = &st.peak_rss_bytes;
            let _ = writeln!(
                o,
                "  Peak        mean {} ± {}   [min {}, max {}]",
                b(p.mean),
                b(p.stddev),
                b(p.min),
                b(p.max)
            );
            if let Some(f) = &st.peak_over_floor_bytes {
                let _ = writeln!(
                    o,
                    "  Over floor  mean {} ± {}   [min {}, max {}]",
                    b(f.mean),
                    b(f.stddev),
                    b(f.min),
                    b(f.max)
                );
            }
        }
        if report
            .runs
            .iter()
            .any(|r| r.peak_source.is_kernel() && !r.kernel_peak_scope.is_partial())
        {
            let _ = writeln!(
                o,
                "  note: kernel peaks are {} (the kernel counts RSS in per-CPU batches; {} CPUs)",
                crate::model::peak::exact_within(Some(
                    crate::model::peak::local_batching_bound_bytes()
                )),
                crate::model::peak::online_cpus()
            );
        }
        if report
            .runs
            .iter()
            .any(|r| r.kernel_peak_scope == crate::model::peak::PeakScope::LargestProcess)
        {
            let _ = writeln!(
                o,
                "  note: the tree had several processes: a kernel peak is the exact peak of its largest process, a lower bound of the tree's"
            );
        }
        let partial: Vec<String> = report
            .runs
            .iter()
            .filter(|r| r.peak_source.is_kernel() && r.kernel_peak_scope.is_partial())
            .map(|r| format!("run {} ({} left)", r.run, r.departed))
            .collect();
        if !partial.is_empty() {
            let _ = writeln!(
                o,
                "  warning: ≥: processes left the tree during {} with no exit record read: the peak is the largest VmHWM the samples saw, and a process that peaked after its last sample, or a child born and gone between two samples, is not in it (memmon reads exit records as root or with CAP_NET_ADMIN)",
                partial.join(", ")
            );
        }
    }
    if let Some(l) = &report.leak {
        let _ = writeln!(o, "  {}", l.message);
    }
    for n in &report.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    if let Some(s) = &report.stopped {
        let _ = writeln!(o, "  stopped: {s}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_times_keep_their_precision() {
        assert_eq!(fmt_wall(0.0123), "12.3 ms");
        assert_eq!(fmt_wall(1.2345), "1.234 s");
        assert_eq!(fmt_wall(95.04), "95.0 s");
    }
}
