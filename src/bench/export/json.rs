//! The JSON export: the whole report (runs, statistics, leak check, notes), sizes in bytes and
//! times in seconds, as the field names say; its kind and schema version first
//! (`format::json::BENCH`).

use super::Exporter;
use crate::bench::BenchReport;

pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, report: &BenchReport) -> Result<Vec<u8>, super::ExportError> {
        let mut v = serde_json::to_vec_pretty(&crate::format::json::BENCH.of(report))?;
        v.push(b'\n');
        Ok(v)
    }

    fn serialize_sweep(
        &self,
        sweep: &crate::bench::sweep::SweepReport,
    ) -> Result<Vec<u8>, super::ExportError> {
        let mut v = serde_json::to_vec_pretty(&crate::format::json::SWEEP.of(sweep))?;
        v.push(b'\n');
        Ok(v)
    }
}
