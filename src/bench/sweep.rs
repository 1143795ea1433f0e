//! A sweep of configurations (`bench --parameter-list NAME V1,V2`, `--parameter-scan NAME MIN
//! MAX`): the bench run once per configuration, `{NAME}` replaced by its value in the client, in
//! `--prepare` and in the `--daemon` command; then one row per configuration — throughput,
//! latencies, exact peak, idle floor, the peak above it per run in flight — and the Pareto front
//! of throughput against peak: the configurations no other beats on both.

use super::window::Latency;
use super::BenchReport;
use crate::model::peak::{Peak, PeakBasis};
use serde::Serialize;

/// The most configurations a sweep runs (a grid grows as the product of its lists).
pub const MAX_CONFIGURATIONS: usize = 10_000;

/// One parameter and the values it takes, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub values: Vec<String>,
}

/// Why a sweep cannot be made as asked.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SweepError {
    #[error("--parameter-list {name}: no value (give them as V1,V2,...)")]
    EmptyList { name: String },
    #[error("--parameter-list {name}: the value {value:?} comes twice")]
    Repeated { name: String, value: String },
    #[error("the parameter {name} is given twice (each name once, by --parameter-list or --parameter-scan)")]
    NameTwice { name: String },
    #[error("the parameter name {name:?} is not a name: letters, digits and _ (it is written {{{name}}} where it is replaced)")]
    BadName { name: String },
    #[error("--parameter-scan {name}: {what} {value:?} is not a number")]
    NotANumber {
        name: String,
        what: &'static str,
        value: String,
    },
    #[error("--parameter-scan {name}: MIN {min} is above MAX {max}")]
    Backwards {
        name: String,
        min: String,
        max: String,
    },
    #[error("--parameter-step-size {step}: a step must be above 0")]
    Step { step: String },
    #[error("the sweep would run {count} configurations, more than {MAX_CONFIGURATIONS}")]
    TooMany { count: u128 },
}

impl crate::error::Classified for SweepError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

impl Parameter {
    /// `--parameter-list NAME V1,V2,...`.
    pub fn list(name: &str, values: &str) -> Result<Parameter, SweepError> {
        check_name(name)?;
        let values: Vec<String> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(String::from)
            .collect();
        if values.is_empty() {
            return Err(SweepError::EmptyList { name: name.into() });
        }
        if let Some(v) = values
            .iter()
            .enumerate()
            .find(|(i, v)| values[..*i].contains(v))
        {
            return Err(SweepError::Repeated {
                name: name.into(),
                value: v.1.clone(),
            });
        }
        Ok(Parameter {
            name: name.into(),
            values,
        })
    }

    /// `--parameter-scan NAME MIN MAX` with `--parameter-step-size STEP` (1 by default): MIN,
    /// MIN + STEP, ... up to MAX. Whole numbers stay whole; with decimals, each value is written
    /// with as many decimals as MIN, MAX and STEP have at most.
    pub fn scan(name: &str, min: &str, max: &str, step: &str) -> Result<Parameter, SweepError> {
        check_name(name)?;
        let num = |what: &'static str, v: &str| -> Result<f64, SweepError> {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| SweepError::NotANumber {
                    name: name.into(),
                    what,
                    value: v.into(),
                })
        };
        let (lo, hi, st) = (num("MIN", min)?, num("MAX", max)?, num("STEP", step)?);
        if st <= 0.0 {
            return Err(SweepError::Step { step: step.into() });
        }
        if lo > hi {
            return Err(SweepError::Backwards {
                name: name.into(),
                min: min.into(),
                max: max.into(),
            });
        }
        let decimals = [min, max, step]
            .iter()
            .map(|v| v.trim().split_once('.').map_or(0, |(_, d)| d.len()))
            .max()
            .unwrap_or(0);
        let count = ((hi - lo) / st + 1e-9).floor() as u128 + 1;
        if count > MAX_CONFIGURATIONS as u128 {
            return Err(SweepError::TooMany { count });
        }
        let values = (0..count as u64)
            .map(|i| format!("{:.decimals$}", lo + st * i as f64))
            .collect();
        Ok(Parameter {
            name: name.into(),
            values,
        })
    }
}

fn check_name(name: &str) -> Result<(), SweepError> {
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(SweepError::BadName { name: name.into() })
    }
}

/// One configuration: a value for each parameter, in the parameters' order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Configuration {
    pub values: Vec<(String, String)>,
}

impl Configuration {
    /// `text` with each `{NAME}` replaced by its value.
    pub fn substitute(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.values {
            out = out.replace(&format!("{{{name}}}"), value);
        }
        out
    }

    /// `-o`'s destination for this configuration: a file's name with its `{NAME}`s replaced.
    pub fn output(&self, d: &crate::output::Dest) -> crate::output::Dest {
        match d {
            crate::output::Dest::File(p) => {
                crate::output::Dest::File(self.substitute(&p.to_string_lossy()).into())
            }
            other => other.clone(),
        }
    }

    /// `size=50 threads=4`; `as given` without parameters (`--daemon` alone).
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return "as given".into();
        }
        self.values
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Every configuration of the parameters, the first parameter varying slowest (a grid where
/// several are given).
pub fn configurations(params: &[Parameter]) -> Result<Vec<Configuration>, SweepError> {
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name == p.name) {
            return Err(SweepError::NameTwice {
                name: p.name.clone(),
            });
        }
    }
    let count = params
        .iter()
        .map(|p| p.values.len() as u128)
        .try_fold(1u128, |a, n| a.checked_mul(n))
        .unwrap_or(u128::MAX);
    if count > MAX_CONFIGURATIONS as u128 {
        return Err(SweepError::TooMany { count });
    }
    let mut out = vec![Configuration { values: Vec::new() }];
    for p in params {
        out = out
            .into_iter()
            .flat_map(|c| {
                p.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.values.push((p.name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    Ok(out)
}

/// How the daemon memmon started for a configuration (`--daemon`) came up and went down.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DaemonLife {
    pub pid: i32,
    /// The memory cgroup memmon made for it, where it could.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Seconds from its start until it was ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<f64>,
    /// How it was stopped: `SIGTERM` or `SIGKILL` (SIGTERM did not end it in time), or
    /// `exited` when it had ended by itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<&'static str>,
    /// Seconds from the stop signal until it was gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
}

/// A configuration's numbers, from its bench: one row of the sweep's table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Runs completed per hour: the window's throughput (`--concurrency`), else the runs'
    /// count over their summed time.
    pub throughput_per_hour: f64,
    /// The runs' latencies (each client's time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_s: Option<Latency>,
    /// The window's peak, or the highest of the runs' peaks (on the bench's basis).
    pub peak: Peak,
    /// The daemon's memory before the window (before the first run), in the peak's counter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_bytes: Option<u64>,
    /// The peak above the floor per run in flight (one at a time: the highest run's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_over_floor_per_run_in_flight_bytes: Option<u64>,
    /// Runs in flight at once.
    pub concurrency: u32,
}

impl Row {
    /// The row of a finished bench (`BenchReport::finish` done); `None` when no run was
    /// measured.
    pub fn of(report: &BenchReport) -> Option<Row> {
        if let Some(w) = &report.window {
            if w.runs == 0 {
                return None;
            }
            return Some(Row {
                throughput_per_hour: w.throughput_per_hour,
                latency_s: w.latency_s,
                peak: w.peak,
                floor_bytes: Some(w.floor_bytes),
                peak_over_floor_per_run_in_flight_bytes: Some(
                    w.peak_over_floor_per_run_in_flight_bytes,
                ),
                concurrency: w.concurrency,
            });
        }
        let basis = report.peak_basis;
        let top = report.runs.iter().max_by_key(|r| r.peak_on(basis).bytes)?;
        let walls: Vec<f64> = report.runs.iter().map(|r| r.wall_s).collect();
        let total: f64 = walls.iter().sum();
        let floor = report.runs.first().and_then(|r| match basis {
            PeakBasis::Cgroup => r.cgroup_before_bytes,
            _ => r.rss_before_bytes,
        });
        Some(Row {
            throughput_per_hour: if total > 0.0 {
                walls.len() as f64 * 3600.0 / total
            } else {
                0.0
            },
            latency_s: Latency::of(&walls),
            peak: top.peak_on(basis),
            floor_bytes: floor,
            peak_over_floor_per_run_in_flight_bytes: report
                .runs
                .iter()
                .filter_map(|r| r.peak_over_floor_bytes)
                .max(),
            concurrency: 1,
        })
    }
}

/// The Pareto front of throughput (higher is better) against peak (lower is better): for
/// each row, whether no other row is at least as good on both and better on one. `None` rows
/// (no run measured) are never on it.
pub fn front(rows: &[Option<(f64, u64)>]) -> Vec<bool> {
    rows.iter()
        .map(|r| {
            let Some((t, p)) = *r else { return false };
            !rows
                .iter()
                .flatten()
                .any(|&(t2, p2)| t2 >= t && p2 <= p && (t2 > t || p2 < p))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_make_a_grid_the_first_varying_slowest() {
        let a = Parameter::list("size", "50,100").unwrap();
        let b = Parameter::list("threads", "1, 4").unwrap();
        let c = configurations(&[a, b]).unwrap();
        let labels: Vec<String> = c.iter().map(Configuration::label).collect();
        assert_eq!(
            labels,
            [
                "size=50 threads=1",
                "size=50 threads=4",
                "size=100 threads=1",
                "size=100 threads=4"
            ]
        );
        assert_eq!(
            c[3].substitute("--size {size}MiB --threads {threads} {other}"),
            "--size 100MiB --threads 4 {other}"
        );
        assert_eq!(configurations(&[]).unwrap().len(), 1);
    }

    #[test]
    fn scans_step_from_min_to_max_keeping_decimals() {
        let s = Parameter::scan("n", "1", "4", "1").unwrap();
        assert_eq!(s.values, ["1", "2", "3", "4"]);
        let s = Parameter::scan("f", "0.5", "1.5", "0.25").unwrap();
        assert_eq!(s.values, ["0.50", "0.75", "1.00", "1.25", "1.50"]);
        // A step that does not land on MAX stops below it.
        let s = Parameter::scan("n", "0", "10", "4").unwrap();
        assert_eq!(s.values, ["0", "4", "8"]);
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_eq!(
            Parameter::scan("n", "5", "1", "1"),
            Err(SweepError::Backwards {
                name: "n".into(),
                min: "5".into(),
                max: "1".into()
            })
        );
        assert!(matches!(
            Parameter::scan("n", "a", "1", "1"),
            Err(SweepError::NotANumber { what: "MIN", .. })
        ));
        assert!(matches!(
            Parameter::scan("n", "1", "2", "0"),
            Err(SweepError::Step { .. })
        ));
        assert!(matches!(
            Parameter::list("n", " , "),
            Err(SweepError::EmptyList { .. })
        ));
        assert!(matches!(
            Parameter::list("n", "1,2,1"),
            Err(SweepError::Repeated { .. })
        ));
        assert!(matches!(
            Parameter::list("a-b", "1"),
            Err(SweepError::BadName { .. })
        ));
        let a = Parameter::list("n", "1").unwrap();
        assert!(matches!(
            configurations(&[a.clone(), a]),
            Err(SweepError::NameTwice { .. })
        ));
        assert!(matches!(
            Parameter::scan("n", "0", "1e9", "1"),
            Err(SweepError::TooMany { .. })
        ));
    }

    /// `bench --export-json` of a sweep: the keys docs/json/memmon-sweep.keys lists, of two
    /// configurations, one measured (its bench as `memmon-bench` writes it) and one whose
    /// daemon failed.
    #[test]
    fn sweep_json_keys_are_those_listed_for_its_schema_version() {
        let span = crate::analysis::span::SpanAcc::open(&Default::default()).close(
            String::new(),
            None,
            false,
            &Default::default(),
        );
        let mut run = crate::bench::RunResult::of_span(1, 0, 1.0, &span);
        run.rss_before_bytes = Some(1 << 20);
        let mut bench = BenchReport::example(vec![run]);
        bench.finish();
        let configs = configurations(&[Parameter::list("size", "50,100").unwrap()]).unwrap();
        let measured = ConfigReport {
            label: configs[0].label(),
            parameters: configs[0].clone(),
            row: Row::of(&bench),
            on_front: false,
            over_budget: vec!["--max-peak".into()],
            failed: None,
            daemon: Some(DaemonLife {
                pid: 7,
                cgroup: Some("/memmon-1-daemon-0".into()),
                ready_s: Some(0.5),
                stopped_by: Some("SIGTERM"),
                stop_s: Some(0.1),
            }),
            bench: Some(bench),
        };
        let failed = ConfigReport {
            label: configs[1].label(),
            parameters: configs[1].clone(),
            row: None,
            on_front: false,
            over_budget: Vec::new(),
            failed: Some("the daemon exited".into()),
            daemon: None,
            bench: None,
        };
        let mut s = SweepReport {
            memmon_version: "0".into(),
            client: "c".into(),
            daemon_command: Some("d".into()),
            parameters: vec!["size".into()],
            runs: 1,
            concurrency: 1,
            configurations: vec![measured, failed],
            complete: false,
            stopped: Some("interrupted by SIGINT".into()),
        };
        s.finish(|_| vec!["--max-peak".into()]);
        assert!(s.configurations[0].on_front && !s.configurations[1].on_front);
        let doc = crate::format::json::SWEEP;
        let v = serde_json::to_value(doc.of(&s)).unwrap();
        assert_eq!(v["configurations"][0]["parameters"]["size"], "50");
        // The bench inside is `memmon-bench`'s body: its own keys, listed there.
        let mut v = v;
        v["configurations"][0]["bench"] = serde_json::json!({});
        crate::format::json::check_keys(doc, &v);
    }

    #[test]
    fn the_front_holds_what_no_other_beats_on_both() {
        // (throughput, peak): b beats a on both; c is faster and bigger than b; d equals c.
        let rows = [
            Some((100.0, 300)),
            Some((200.0, 250)),
            Some((300.0, 400)),
            Some((300.0, 400)),
            None,
            Some((50.0, 100)),
        ];
        assert_eq!(front(&rows), [false, true, true, true, false, true]);
    }
}

/// The whole sweep, as exported: each configuration's row, whether it is on the front or over
/// a budget, and its bench.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    pub memmon_version: String,
    /// The client as given, its `{NAME}`s not replaced.
    pub client: String,
    /// `--daemon`, as given: the daemon memmon started for each configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon_command: Option<String>,
    pub parameters: Vec<String>,
    pub runs: u32,
    pub concurrency: u32,
    pub configurations: Vec<ConfigReport>,
    /// False when a stop signal ended the sweep before its last configuration.
    pub complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// One configuration of a sweep.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigReport {
    /// Each parameter's value, by name.
    #[serde(serialize_with = "values_as_map")]
    pub parameters: Configuration,
    /// `size=50 threads=4`.
    pub label: String,
    /// Its numbers; absent where no run was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row: Option<Row>,
    /// No other configuration has a throughput at least as high and a peak at least as low,
    /// and one of them better.
    pub on_front: bool,
    /// The budgets (`--max-peak`, `--max-cgroup`, `--max-gpu`) its peak broke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub over_budget: Vec<String>,
    /// Why it failed: its daemon never became ready or died, its client failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daemon: Option<DaemonLife>,
    /// Its whole bench (the `memmon-bench` document's body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchReport>,
}

fn values_as_map<S: serde::Serializer>(c: &Configuration, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(c.values.len()))?;
    for (k, v) in &c.values {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

impl SweepReport {
    /// Marks the front among the configurations' rows, and each configuration's broken budgets
    /// (`over`: the flags a configuration's bench broke, by index).
    pub fn finish(&mut self, over: impl Fn(&BenchReport) -> Vec<String>) {
        let points: Vec<Option<(f64, u64)>> = self
            .configurations
            .iter()
            .map(|c| {
                c.row
                    .as_ref()
                    .map(|r| (r.throughput_per_hour, r.peak.bytes))
            })
            .collect();
        for (c, on) in self.configurations.iter_mut().zip(front(&points)) {
            c.on_front = on;
            c.over_budget = c.bench.as_ref().map(&over).unwrap_or_default();
        }
    }
}
