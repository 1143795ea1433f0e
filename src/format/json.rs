//! The JSON documents memmon writes for scripts: `summary --json`, `compare --json` and
//! `bench --export-json`. Each opens with its kind and the version of its schema (`format`,
//! `schema_version`), declared here once. docs/FORMAT.md ("JSON outputs") says what changes a
//! version: a key removed or renamed, a value whose meaning, unit or type changed; a key added
//! does not. `docs/json/FORMAT.keys` lists every key of each document as its unit tests build
//! it, and those tests fail when a key goes without a new version, or comes without the list.

use serde::Serialize;

/// One kind of JSON document and the version of its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Document {
    /// `memmon-summary`, `memmon-comparison`, `memmon-bench`.
    pub format: &'static str,
    pub schema_version: u32,
}

/// `summary --json`: one recording's summary (an array of them for several files).
pub const SUMMARY: Document = Document {
    format: "memmon-summary",
    schema_version: 1,
};

/// `compare --json`: both sides, the deltas, the gates and budgets.
pub const COMPARISON: Document = Document {
    format: "memmon-comparison",
    schema_version: 1,
};

/// `bench --export-json`: the runs, their statistics, the leak check and the notes.
pub const BENCH: Document = Document {
    format: "memmon-bench",
    schema_version: 1,
};

/// `bench --export-json` of a sweep (`--parameter-list`, `--parameter-scan`): each
/// configuration's row, the Pareto front, and each configuration's bench (a `memmon-bench`
/// body).
pub const SWEEP: Document = Document {
    format: "memmon-sweep",
    schema_version: 1,
};

/// `compare --json` of two sweeps: each configuration both measured, its changes, the gates.
pub const SWEEP_COMPARISON: Document = Document {
    format: "memmon-sweep-comparison",
    schema_version: 1,
};

/// A document's body with its kind and version first.
#[derive(Serialize)]
pub struct Versioned<'a, T: Serialize> {
    format: &'static str,
    schema_version: u32,
    #[serde(flatten)]
    body: &'a T,
}

impl Document {
    /// `body` as this document: its keys after `format` and `schema_version`.
    pub fn of<T: Serialize>(self, body: &T) -> Versioned<'_, T> {
        Versioned {
            format: self.format,
            schema_version: self.schema_version,
            body,
        }
    }
}

/// Every key path of `v`, one a line: `peak.bytes`, `runs[].peak.source` (an array's elements
/// as `[]`), sorted and each once.
#[cfg(test)]
pub(crate) fn key_paths(v: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, at: &str, out: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let path = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    out.insert(path.clone());
                    walk(v, &path, out);
                }
            }
            serde_json::Value::Array(a) => {
                for v in a {
                    walk(v, &format!("{at}[]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(v, "", &mut out);
    out.into_iter().collect()
}

/// Holds the keys of `doc` as a unit test builds it against `docs/json/FORMAT.keys`, whose first
/// line names the schema version it lists: a key gone (removed, renamed) fails unless the version
/// went up, and a new key or version fails until the list is written again
/// (`MEMMON_BLESS=1 cargo test json_keys` writes it).
#[cfg(test)]
pub(crate) fn check_keys(doc: Document, v: &serde_json::Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/json")
        .join(format!("{}.keys", doc.format));
    let head = format!("# {} schema_version {}", doc.format, doc.schema_version);
    let keys = key_paths(v);
    assert_eq!(v["format"], doc.format);
    assert_eq!(v["schema_version"], doc.schema_version);
    if std::env::var_os("MEMMON_BLESS").is_some() {
        std::fs::write(&path, format!("{head}\n{}\n", keys.join("\n"))).unwrap();
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut lines = text.lines();
    let listed_head = lines.next().unwrap_or_default();
    let listed: Vec<&str> = lines.collect();
    let gone: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|k| !keys.iter().any(|have| have == k))
        .collect();
    let new: Vec<&String> = keys
        .iter()
        .filter(|k| !listed.contains(&k.as_str()))
        .collect();
    assert!(
        gone.is_empty() || listed_head != head,
        "{}: keys gone from {} without a new schema version: {gone:?}. Scripts read them: keep \
         them, or raise its schema_version in src/format/json.rs and say what changed in \
         docs/FORMAT.md (\"JSON outputs\"); then MEMMON_BLESS=1 cargo test json_keys",
        path.display(),
        doc.format
    );
    assert!(
        new.is_empty() && listed_head == head,
        "{}: not the keys of {head} (new: {new:?}, gone: {gone:?}); a key added keeps the \
         version: write the list with MEMMON_BLESS=1 cargo test json_keys",
        path.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{Comparison, Gate, Measure, Measured, Metric};
    use crate::analysis::SummaryBuilder;
    use crate::format::meta::{CgroupEnd, CgroupMeta, EndInfo, Meta, EXIT_RECORDS_READ};
    use crate::format::{ReadInfo, Sink};
    use crate::model::sample::{Event, Sample};

    const MIB: u64 = 1 << 20;

    /// A launched command in memmon's own cgroup, peaking at `peak` MiB, with two phases and a
    /// PSS read: its metadata, rows and end record.
    fn recording(peak: u64) -> (Meta, Vec<Sample>, EndInfo) {
        let row = |t: f64, mib: u64, event: Option<Event>| Sample {
            unix_ms: 1_000_000 + (t * 1000.0) as u64,
            elapsed_s: t,
            rss_bytes: mib * MIB,
            top_rss_bytes: mib * MIB,
            hwm_bytes: peak * MIB,
            hwm_sum_bytes: peak * MIB,
            processes: 1,
            top_pid: 1,
            event,
            ..Sample::default()
        };
        let meta = Meta {
            cgroup: Some(CgroupMeta::example_own()),
            ..Meta::example("command")
        };
        let rows = vec![
            Sample {
                pss_bytes: Some(10 * MIB),
                ..row(0.0, 10, Some(Event::Start))
            },
            row(0.5, 40, Some(Event::Mark("load".into()))),
            row(1.0, peak, None),
            row(1.5, 60, Some(Event::Mark("prove".into()))),
            row(2.0, 60, None),
        ];
        let end = EndInfo {
            command_wall_s: Some(2.1),
            ended_unix_ms: 1_002_100,
            exit_code: Some(0),
            rusage_maxrss_bytes: Some(peak * MIB),
            command_maxrss_bytes: Some(peak * MIB),
            exit_records: Some(EXIT_RECORDS_READ.into()),
            cgroup: Some(CgroupEnd::example_own((peak + 2) * MIB)),
            ..EndInfo::default()
        };
        (meta, rows, end)
    }

    /// `summary --json`'s keys, for `recording`: those docs/json/memmon-summary.keys lists for
    /// its schema version.
    #[test]
    fn summary_json_keys_are_those_listed_for_its_schema_version() {
        let (meta, rows, end) = recording(80);
        let mut b = SummaryBuilder::new();
        b.session(&meta);
        rows.iter().for_each(|r| b.push(r));
        b.session_end(&end);
        let summary = b.finish(Some("run.csv".into()), None);
        check_keys(
            SUMMARY,
            &serde_json::to_value(SUMMARY.of(&summary)).unwrap(),
        );
    }

    /// `compare --json`'s keys, for two recordings against one, with a gate and a budget:
    /// those docs/json/memmon-comparison.keys lists for its schema version.
    #[test]
    fn comparison_json_keys_are_those_listed_for_its_schema_version() {
        let measured = |file: &str, peak: u64| {
            let (meta, rows, end) = recording(peak);
            let mut m = Measure::new(Some(50 * MIB), false);
            m.session(&meta);
            rows.iter().for_each(|r| m.sample(r));
            m.session_end(&end);
            let info = ReadInfo {
                meta: Some(meta),
                end: Some(end),
                ..ReadInfo::default()
            };
            m.finish(file.into(), &info).unwrap()
        };
        let (b1, b2, n) = (
            measured("b1.csv", 80),
            measured("b2.csv", 82),
            measured("n.csv", 120),
        );
        let gates = [Gate {
            flag: "--max-peak-increase",
            metric: Metric::Peak,
            limit: crate::analysis::compare::parse_size_limit("2%").unwrap(),
        }];
        let runs = |m: &[&Measured]| m.iter().flat_map(|m| m.runs.clone()).collect();
        let mut c = Comparison::new(runs(&[&b1, &b2]), runs(&[&n]), Some(50 * MIB), 1.0, &gates)
            .with_recordings(vec![b1.recording, b2.recording], vec![n.recording]);
        c.judge_budgets(&crate::analysis::budget::Budgets {
            max_peak: Some(100 * MIB),
            ..Default::default()
        });
        assert_eq!(c.budgets.len(), 1);
        assert!(!c.passed);
        check_keys(
            COMPARISON,
            &serde_json::to_value(COMPARISON.of(&c)).unwrap(),
        );
    }

    #[test]
    fn a_document_opens_with_its_kind_and_version_and_keeps_its_keys() {
        #[derive(Serialize)]
        struct Body {
            peak: u64,
            runs: Vec<serde_json::Value>,
        }
        let body = Body {
            peak: 7,
            runs: vec![
                serde_json::json!({"a": {"b": 1}}),
                serde_json::json!({"c": 2}),
            ],
        };
        let text = serde_json::to_string(&SUMMARY.of(&body)).unwrap();
        assert!(
            text.starts_with(r#"{"format":"memmon-summary","schema_version":1,"peak":7"#),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            key_paths(&v),
            [
                "format",
                "peak",
                "runs",
                "runs[].a",
                "runs[].a.b",
                "runs[].c",
                "schema_version"
            ]
        );
    }
}
