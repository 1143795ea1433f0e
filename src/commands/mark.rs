//! `memmon mark LABEL`: sends the marker to the running recorder and says where it landed.

use super::exit::ExitCode;
use super::stderr::errln;
use crate::cli::MarkCommandArgs;
use memmon::units::{fmt_bytes, fmt_seconds};

pub fn run(args: MarkCommandArgs) -> anyhow::Result<ExitCode> {
    let (path, reply) = memmon::marks::request_mark(&args.label, args.socket.as_deref())?;
    errln!(
        "memmon: marker '{}' taken at +{} (RSS {}) in the recording on {}",
        reply.label,
        fmt_seconds(reply.elapsed_s),
        fmt_bytes(reply.rss_bytes),
        path.display()
    );
    Ok(ExitCode::Success)
}
