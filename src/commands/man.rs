//! `memmon man [SUBCOMMAND]`: a manual page in roff, generated from the clap structs of
//! `cli.rs` (clap_mangen), to stdout: memmon's own (`memmon man > memmon.1`), which lists the
//! subcommands, or one subcommand's with all its flags (`memmon man record > memmon-record.1`).

use super::exit::ExitCode;
use super::usage;
use crate::cli::{Cli, ManArgs};
use anyhow::Context;
use clap::CommandFactory;
use std::io::Write;

pub fn run(args: ManArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    // Every subcommand's flags are built on demand (`cli::Deferred`): a page needs them all.
    cmd.build();
    if let Some(dir) = &args.dir {
        return install(&cmd, dir, args.force);
    }
    let page = match &args.subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let names: Vec<&str> = cmd
                    .get_subcommands()
                    .map(|c| c.get_name())
                    .filter(|n| *n != "help")
                    .collect();
                return Err(usage(format!(
                    "no subcommand '{name}': give one of {}",
                    names.join(", ")
                )));
            }
        },
    };
    let roff = render(page)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&roff)
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
    Ok(ExitCode::Success)
}

/// A page in roff.
fn render(page: clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .source(format!("memmon {}", env!("CARGO_PKG_VERSION")))
        .render(&mut roff)
        .context("cannot render the manual page")?;
    Ok(roff)
}

/// `--dir DIR`: memmon.1 and memmon-SUB.1 for each subcommand, written into `dir` (made if
/// missing), each through memmon's one rule for files (refused when there, unless `force`).
fn install(cmd: &clap::Command, dir: &std::path::Path, force: bool) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|c| c.get_name() != "help" && !c.is_hide_set())
        .collect();
    let mut pages = vec![("memmon".to_string(), cmd.clone())];
    for sub in subs {
        // Named as memmon(1) refers to them: memmon-record(1).
        pages.push((format!("memmon-{}", sub.get_name()), sub.clone()));
    }
    // Every page checked before one is written: an existing one refuses them all (exit 2).
    let paths: Vec<std::path::PathBuf> = pages
        .iter()
        .map(|(name, _)| dir.join(format!("{name}.1")))
        .collect();
    let checked: Vec<(&std::path::Path, &str)> =
        paths.iter().map(|p| (p.as_path(), "--dir")).collect();
    memmon::output::check_outputs(&checked, force)?;
    for ((_, page), path) in pages.iter().zip(&paths) {
        // Its `.TH` is the display name clap gives a subcommand: memmon-record.
        let roff = render(page.clone())?;
        memmon::output::write_whole(path, &roff, force)
            .with_context(|| format!("cannot write {} (--force replaces it)", path.display()))?;
    }
    super::stderr::errln!(
        "memmon: wrote {} to {}",
        memmon::units::count(pages.len(), "manual page"),
        dir.display()
    );
    Ok(ExitCode::Success)
}
