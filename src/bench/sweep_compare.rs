//! `memmon compare BASE.json NEW.json` of two sweeps (`bench --export-json` of a sweep): each
//! configuration of the baseline against the candidate's of the same values, on throughput and
//! exact peak, with the gates a sweep takes (`--max-peak-increase`, `--max-idle-increase`)
//! held against every configuration both have.

use crate::analysis::compare::Limit;
use crate::units::{fmt_bytes, fmt_bytes_signed};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a sweep document could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SweepReadError {
    #[error("cannot read {}", .0.display())]
    Io(PathBuf, #[source] std::io::Error),
    #[error("{}: not a memmon-sweep document (bench --export-json of a sweep): {why}", .path.display())]
    Malformed { path: PathBuf, why: String },
    #[error("{}: a memmon-sweep document of schema version {found}; this memmon reads version {reads}", .path.display())]
    Version {
        path: PathBuf,
        found: u64,
        reads: u32,
    },
}

impl crate::error::Classified for SweepReadError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::Usage
    }
}

/// What a comparison reads of a sweep document.
#[derive(Debug, Clone, Deserialize)]
struct Doc {
    configurations: Vec<DocConfig>,
}

#[derive(Debug, Clone, Deserialize)]
struct DocConfig {
    label: String,
    #[serde(default)]
    row: Option<DocRow>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct DocRow {
    throughput_per_hour: f64,
    peak: DocPeak,
    #[serde(default)]
    floor_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct DocPeak {
    bytes: u64,
    exact: bool,
}

/// True when `path` holds a `memmon-sweep` document (its first bytes say so): `compare`
/// then compares sweeps, not recordings.
pub fn is_sweep(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    String::from_utf8_lossy(&head[..n]).contains("\"format\": \"memmon-sweep\"")
}

fn read(path: &Path) -> Result<Doc, SweepReadError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| SweepReadError::Io(path.to_path_buf(), e))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| SweepReadError::Malformed {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
    let want = crate::format::json::SWEEP;
    if v["format"] != want.format {
        return Err(SweepReadError::Malformed {
            path: path.to_path_buf(),
            why: format!("its format is {}", v["format"]),
        });
    }
    let version = v["schema_version"].as_u64().unwrap_or(0);
    if version != u64::from(want.schema_version) {
        return Err(SweepReadError::Version {
            path: path.to_path_buf(),
            found: version,
            reads: want.schema_version,
        });
    }
    serde_json::from_value(v).map_err(|e| SweepReadError::Malformed {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// One configuration on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigChange {
    pub label: String,
    pub base_throughput_per_hour: f64,
    pub new_throughput_per_hour: f64,
    /// The candidate's throughput less the baseline's, in percent of the baseline's.
    pub throughput_change_pct: Option<f64>,
    pub base_peak_bytes: u64,
    pub new_peak_bytes: u64,
    /// Both peaks exact.
    pub peaks_exact: bool,
    pub peak_change_bytes: i64,
    pub peak_change_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_change_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_change_pct: Option<f64>,
}

/// A gate held against one configuration.
#[derive(Debug, Clone, Serialize)]
pub struct SweepGate {
    pub flag: &'static str,
    pub limit: String,
    pub label: String,
    pub passed: bool,
}

/// Two sweeps compared.
#[derive(Debug, Clone, Serialize)]
pub struct SweepComparison {
    pub base: String,
    pub new: String,
    pub configurations: Vec<ConfigChange>,
    /// Configurations measured on one side only (or failed on the other).
    pub only_in_base: Vec<String>,
    pub only_in_new: Vec<String>,
    pub gates: Vec<SweepGate>,
    pub passed: bool,
}

/// The gates a sweep comparison takes: the flag and its limit, on the peak or the floor.
#[derive(Debug, Clone, Copy)]
pub struct SweepGates {
    pub max_peak_increase: Option<Limit>,
    pub max_idle_increase: Option<Limit>,
}

fn pct(new: f64, base: f64) -> Option<f64> {
    (base != 0.0).then(|| (new - base) * 100.0 / base)
}

/// Whether a rise of `delta` bytes from `base` stays within `limit`.
fn within(limit: Limit, delta: i64, base: u64) -> bool {
    match limit {
        Limit::Percent(p) => base == 0 || delta as f64 * 100.0 / base as f64 <= p,
        Limit::Bytes(b) => delta <= b as i64,
        Limit::Seconds(_) => true,
    }
}

impl SweepComparison {
    pub fn of(base: &Path, new: &Path, gates: SweepGates) -> Result<Self, SweepReadError> {
        let (b, n) = (read(base)?, read(new)?);
        Ok(Self::between(
            base.display().to_string(),
            &b,
            new.display().to_string(),
            &n,
            gates,
        ))
    }

    fn between(base: String, b: &Doc, new: String, n: &Doc, gates: SweepGates) -> Self {
        let measured = |d: &Doc| -> Vec<(String, DocRow)> {
            d.configurations
                .iter()
                .filter_map(|c| c.row.map(|r| (c.label.clone(), r)))
                .collect()
        };
        let (bm, nm) = (measured(b), measured(n));
        let mut configurations = Vec::new();
        let mut checks = Vec::new();
        for (label, br) in &bm {
            let Some((_, nr)) = nm.iter().find(|(l, _)| l == label) else {
                continue;
            };
            let peak_delta = nr.peak.bytes as i64 - br.peak.bytes as i64;
            let floor_delta = br
                .floor_bytes
                .zip(nr.floor_bytes)
                .map(|(b, n)| n as i64 - b as i64);
            for (flag, limit, delta, from) in [
                (
                    "--max-peak-increase",
                    gates.max_peak_increase,
                    Some(peak_delta),
                    br.peak.bytes,
                ),
                (
                    "--max-idle-increase",
                    gates.max_idle_increase,
                    floor_delta,
                    br.floor_bytes.unwrap_or(0),
                ),
            ] {
                if let Some(limit) = limit {
                    checks.push(SweepGate {
                        flag,
                        limit: limit.text(),
                        label: label.clone(),
                        // A floor not measured on both sides cannot pass its gate.
                        passed: delta.is_some_and(|d| within(limit, d, from)),
                    });
                }
            }
            configurations.push(ConfigChange {
                label: label.clone(),
                base_throughput_per_hour: br.throughput_per_hour,
                new_throughput_per_hour: nr.throughput_per_hour,
                throughput_change_pct: pct(nr.throughput_per_hour, br.throughput_per_hour),
                base_peak_bytes: br.peak.bytes,
                new_peak_bytes: nr.peak.bytes,
                peaks_exact: br.peak.exact && nr.peak.exact,
                peak_change_bytes: peak_delta,
                peak_change_pct: pct(nr.peak.bytes as f64, br.peak.bytes as f64),
                floor_change_bytes: floor_delta,
                floor_change_pct: br
                    .floor_bytes
                    .zip(nr.floor_bytes)
                    .and_then(|(b, n)| pct(n as f64, b as f64)),
            });
        }
        let only = |a: &[(String, DocRow)], other: &[(String, DocRow)]| -> Vec<String> {
            a.iter()
                .filter(|(l, _)| !other.iter().any(|(m, _)| m == l))
                .map(|(l, _)| l.clone())
                .collect()
        };
        let passed = checks.iter().all(|g| g.passed);
        SweepComparison {
            only_in_base: only(&bm, &nm),
            only_in_new: only(&nm, &bm),
            base,
            new,
            configurations,
            gates: checks,
            passed,
        }
    }

    /// The table: a line per configuration both sweeps measured, then what one side lacks and
    /// the gates.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "Sweeps: {} (baseline) -> {} (candidate)",
            self.base, self.new
        );
        let rows: Vec<[String; 7]> = self
            .configurations
            .iter()
            .map(|c| {
                let signed_pct = |p: Option<f64>| p.map_or("-".into(), |p| format!("{p:+.1}%"));
                [
                    c.label.clone(),
                    format!("{:.0}", c.base_throughput_per_hour),
                    format!("{:.0}", c.new_throughput_per_hour),
                    signed_pct(c.throughput_change_pct),
                    fmt_bytes(c.base_peak_bytes),
                    fmt_bytes(c.new_peak_bytes),
                    format!(
                        "{} ({}){}",
                        fmt_bytes_signed(c.peak_change_bytes),
                        signed_pct(c.peak_change_pct),
                        if c.peaks_exact { "" } else { " ≥" }
                    ),
                ]
            })
            .collect();
        let heads = [
            "Configuration",
            "Runs/h base",
            "Runs/h new",
            "Change",
            "Peak base",
            "Peak new",
            "Peak change",
        ];
        let mut widths: Vec<usize> = heads.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut l = String::from(" ");
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                let pad = " ".repeat(w - c.chars().count());
                if i == 0 {
                    l.push_str(&format!(" {c}{pad} "));
                } else {
                    l.push_str(&format!(" {pad}{c} "));
                }
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(o, "{}", line(heads.to_vec()));
        for r in &rows {
            let _ = writeln!(o, "{}", line(r.iter().map(String::as_str).collect()));
        }
        if !self.only_in_base.is_empty() {
            let _ = writeln!(
                o,
                "  only measured in the baseline: {}",
                self.only_in_base.join(", ")
            );
        }
        if !self.only_in_new.is_empty() {
            let _ = writeln!(
                o,
                "  only measured in the candidate: {}",
                self.only_in_new.join(", ")
            );
        }
        if self.configurations.iter().any(|c| !c.peaks_exact) {
            let _ = writeln!(
                o,
                "  note: ≥: a side's peak was not exact there (a lower bound), so the change is not either"
            );
        }
        for g in &self.gates {
            let _ = writeln!(
                o,
                "  gate {} {}: {} {}",
                g.flag,
                g.limit,
                g.label,
                if g.passed { "passed" } else { "FAILED" }
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn doc(rows: &[(&str, Option<(f64, u64)>)]) -> Doc {
        Doc {
            configurations: rows
                .iter()
                .map(|(l, r)| DocConfig {
                    label: l.to_string(),
                    row: r.map(|(t, p)| DocRow {
                        throughput_per_hour: t,
                        peak: DocPeak {
                            bytes: p,
                            exact: true,
                        },
                        floor_bytes: Some(10 * MIB),
                    }),
                })
                .collect(),
        }
    }

    /// `compare --json` of two sweeps: the keys docs/json/memmon-sweep-comparison.keys lists.
    #[test]
    fn sweep_comparison_json_keys_are_those_listed_for_its_schema_version() {
        let base = doc(&[("n=1", Some((100.0, 100 * MIB))), ("n=2", Some((1.0, 1)))]);
        let new = doc(&[("n=1", Some((90.0, 99 * MIB))), ("n=3", Some((1.0, 1)))]);
        let gates = SweepGates {
            max_peak_increase: Some(Limit::Percent(2.0)),
            max_idle_increase: Some(Limit::Bytes(MIB)),
        };
        let c = SweepComparison::between("a".into(), &base, "b".into(), &new, gates);
        let doc = crate::format::json::SWEEP_COMPARISON;
        crate::format::json::check_keys(doc, &serde_json::to_value(doc.of(&c)).unwrap());
    }

    #[test]
    fn configurations_are_matched_by_their_values_and_each_is_gated() {
        let base = doc(&[
            ("n=1", Some((100.0, 100 * MIB))),
            ("n=2", Some((200.0, 200 * MIB))),
            ("n=3", None),
        ]);
        let new = doc(&[
            ("n=2", Some((220.0, 206 * MIB))),
            ("n=1", Some((100.0, 101 * MIB))),
            ("n=4", Some((1.0, 1))),
        ]);
        let gates = SweepGates {
            max_peak_increase: Some(Limit::Percent(2.0)),
            max_idle_increase: None,
        };
        let c = SweepComparison::between("a".into(), &base, "b".into(), &new, gates);
        let labels: Vec<&str> = c.configurations.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(labels, ["n=1", "n=2"]);
        assert_eq!(c.configurations[1].peak_change_bytes, 6 * MIB as i64);
        assert!((c.configurations[1].throughput_change_pct.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(c.only_in_new, ["n=4"]);
        assert!(c.only_in_base.is_empty(), "n=3 was not measured");
        let verdicts: Vec<(&str, bool)> = c
            .gates
            .iter()
            .map(|g| (g.label.as_str(), g.passed))
            .collect();
        assert_eq!(verdicts, [("n=1", true), ("n=2", false)]);
        assert!(!c.passed);
        let text = c.render();
        assert!(
            text.contains("gate --max-peak-increase 2%: n=2 FAILED"),
            "{text}"
        );
    }
}
