//! The ledger's stacks said to people: the code that made a stack's mappings in words
//! (`site_words`: the allocating frames, `analysis::ledger::allocating_frames`), the live
//! mappings by stack at a span's highest anatomy and how they changed (text lines for `summary`,
//! `bench` and `compare`, a table for `report`), the folded stacks of an anatomy (the format
//! flame graph tools read) and its flame graph (inferno's SVG).

use crate::analysis::ledger::{allocating_range, StackChange};
use crate::model::ledger::{Call, Frame, LedgerAt, StackGroup};
use crate::render::outside::shown;
use crate::render::summary::signed;
use crate::render::table::Table;
use crate::units::fmt_bytes;
use std::borrow::Cow;
use std::fmt::Write as _;

/// The most stacks a text list shows; the rest are summed on one line.
pub const STACK_LINES: usize = 8;

/// The most frames `site_words` names.
const SITE_FRAMES: usize = 4;

/// The code that made a stack's mappings: its allocating frames, innermost first, at most
/// four (`alloc_partition <- synthesize <- main`, `... <- main` when cut), and the call of the
/// allocator or library they went through (`via malloc`, `via pthread_create`); a stack cut
/// short says so. A brk raise too small to be given a stack says that.
pub fn site_words(frames: &[Frame], truncated: bool, call: Call) -> String {
    if frames.is_empty() {
        return match call {
            Call::Brk => "the heap's brk raises (brk is counted, not unwound)".into(),
            _ => "(no stack)".into(),
        };
    }
    let range = allocating_range(frames);
    // Rust's standard library between the program's own frames (iterators, closures' shims)
    // says nothing of where the memory went: left out of the words (the folded stacks keep it).
    let site: Vec<&Frame> = frames[range.clone()]
        .iter()
        .filter(|f| !is_std(&f.function))
        .collect();
    let site = if site.is_empty() {
        frames[range.clone()].iter().collect()
    } else {
        site
    };
    // The allocator's or library's call the code went through: the frame just inside it.
    let via = range.start.checked_sub(1).map(|i| &frames[i]);
    let names: Vec<Cow<str>> = site
        .iter()
        .take(SITE_FRAMES)
        .map(|f| shown(&f.function))
        .collect();
    let mut w = names.join(" <- ");
    if site.len() > SITE_FRAMES {
        w.push_str(" <- ...");
    }
    if let Some(v) = via {
        let _ = write!(w, " via {}", shown(&v.function));
    }
    if truncated {
        w.push_str(" (stack cut short)");
    }
    if call != Call::Mmap {
        let _ = write!(w, " [{}]", call.key());
    }
    w
}

/// A frame of Rust's standard library (`core::`, `alloc::`, `std::`, and their trait impls).
fn is_std(function: &str) -> bool {
    let f = function.trim_start_matches('<');
    ["core::", "alloc::", "std::"]
        .iter()
        .any(|p| f.starts_with(p))
}

/// `10 mappings of 60.00 MiB`, `3 mappings of 1.00 MiB to 4.00 MiB`.
pub fn mappings_words(n: u64, min: u64, max: u64) -> String {
    let sizes = if min == max {
        fmt_bytes(max)
    } else {
        format!("{} to {}", fmt_bytes(min), fmt_bytes(max))
    };
    if n == 1 {
        format!("1 mapping of {sizes}")
    } else {
        format!("{n} mappings of {sizes}")
    }
}

fn group_words(g: &StackGroup) -> String {
    let mut w = mappings_words(g.mappings, g.min_mapping_bytes, g.max_mapping_bytes);
    if g.processes > 1 {
        let _ = write!(w, " in {} processes", g.processes);
    }
    w
}

/// The heading of the live mappings by stack at an anatomy.
pub fn live_heading(l: &LedgerAt) -> String {
    let n: u64 = l.stacks.iter().map(|s| s.mappings).sum();
    let lost = if l.lost > 0 {
        format!(
            "; the kernel dropped {} of its records (a ring buffer full): some may be missing",
            l.lost
        )
    } else {
        String::new()
    };
    format!(
        "{} live in {} the ledger saw made, by the code that made them{lost}",
        fmt_bytes(l.bytes()),
        crate::units::count(n, "mapping")
    )
}

/// The live mappings by stack (`l`), a line each, largest first (at most `STACK_LINES`, the
/// rest summed), each with its change since `since` where the diff has one (`(new)`,
/// `+48.00 MiB`).
pub fn live_lines(o: &mut String, l: &LedgerAt, since: &[StackChange]) {
    let shown = l.stacks.len().min(STACK_LINES);
    for g in &l.stacks[..shown] {
        let change = since
            .iter()
            .find(|c| c.frames == g.frames && c.call == g.call && c.truncated == g.truncated);
        let tag = match change {
            Some(c) if c.new => " (new)".to_string(),
            Some(c) => format!(" ({})", signed(c.delta_bytes)),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "                {:>11}  {}: {}{tag}",
            fmt_bytes(g.bytes),
            site_words(&g.frames, g.truncated, g.call),
            group_words(g)
        );
    }
    let rest = &l.stacks[shown..];
    if !rest.is_empty() {
        let _ = writeln!(
            o,
            "                {:>11}  in {} other stacks",
            fmt_bytes(rest.iter().map(|g| g.bytes).sum()),
            rest.len()
        );
    }
}

/// How each stack's live mappings changed, a line each, largest first (at most `max`, the rest
/// summed): `+240.0 MiB  alloc_partition <- synthesize: 4 mappings of 60.00 MiB (new)`.
pub fn change_lines(o: &mut String, changes: &[StackChange], max: usize) {
    let shown = changes.len().min(max);
    for c in &changes[..shown] {
        let _ = writeln!(
            o,
            "                {:>11}  {}",
            signed(c.delta_bytes),
            change_words(c)
        );
    }
    let rest = &changes[shown..];
    if !rest.is_empty() {
        let _ = writeln!(
            o,
            "                {:>11}  in {} other stacks",
            signed(rest.iter().map(|c| c.delta_bytes).sum()),
            rest.len()
        );
    }
}

/// One stack's change in words: its site, its mappings at the second moment (or the first,
/// when gone), new or gone.
fn change_words(c: &StackChange) -> String {
    let n = if c.gone {
        c.from_mappings
    } else {
        c.to_mappings
    };
    let tag = if c.new {
        " (new)"
    } else if c.gone {
        " (gone)"
    } else {
        ""
    };
    format!(
        "{}: {}{tag}",
        site_words(&c.frames, c.truncated, c.call),
        mappings_words(n, c.min_mapping_bytes, c.max_mapping_bytes)
    )
}

/// The live mappings by stack as a table (`report`).
pub fn live_table(title: String, l: &LedgerAt, since: &[StackChange]) -> Table {
    Table {
        title,
        notes: vec![live_heading(l)],
        head: ["mapped", "made by", "mappings", "since the idle floor"]
            .map(String::from)
            .to_vec(),
        rows: l
            .stacks
            .iter()
            .map(|g| {
                let change = since.iter().find(|c| {
                    c.frames == g.frames && c.call == g.call && c.truncated == g.truncated
                });
                vec![
                    fmt_bytes(g.bytes),
                    site_words(&g.frames, g.truncated, g.call),
                    group_words(g),
                    match change {
                        Some(c) if c.new => "new".into(),
                        Some(c) => signed(c.delta_bytes),
                        None => "-".into(),
                    },
                ]
            })
            .collect(),
        footer: Vec::new(),
    }
}

/// A frame as one element of a folded stack: `;` (the separator) becomes `:`, control
/// characters escapes (`render::outside`): the folded file and the flame graph drawn from it
/// (XML, which forbids most of them) hold none.
fn folded_frame(f: &Frame) -> String {
    shown(&f.function).replace(';', ":")
}

/// The folded stacks of the live mappings (`l`): a line per stack, its frames outermost first
/// joined by `;`, then a space and its mapped bytes; a stack without frames is
/// `[brk raises under the threshold]`. The format flame graph tools (inferno, flamegraph.pl)
/// and speedscope read.
pub fn folded(l: &LedgerAt) -> String {
    let mut o = String::new();
    for g in &l.stacks {
        let frames: Vec<String> = if g.frames.is_empty() {
            vec![format!("[{} raises under the threshold]", g.call.key())]
        } else {
            g.frames.iter().rev().map(folded_frame).collect()
        };
        let _ = writeln!(o, "{} {}", frames.join(";"), g.bytes);
    }
    o
}

/// The flame graph of the live mappings (`l`) as SVG (inferno's, interactive when opened on its
/// own or through an `<object>`): each frame as wide as the bytes its stacks hold mapped.
/// `None` when there are none.
pub fn flame_graph_svg(l: &LedgerAt, title: &str) -> Option<String> {
    if l.stacks.is_empty() {
        return None;
    }
    let text = folded(l);
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "bytes".into();
    opts.name_type = "Function:".into();
    opts.hash = true;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut svg).ok()?;
    String::from_utf8(svg).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn f(function: &str, module: &str) -> Frame {
        Frame {
            function: function.into(),
            module: module.into(),
        }
    }

    fn partitions() -> StackGroup {
        StackGroup {
            frames: vec![
                f("mmap64", "libc.so.6"),
                f("alloc_partition", "prover"),
                f("synthesize", "prover"),
                f("main", "prover"),
                f("__libc_start_main", "libc.so.6"),
                f("_start", "prover"),
            ],
            call: Call::Mmap,
            truncated: false,
            processes: 1,
            mappings: 10,
            bytes: 600 * MIB,
            min_mapping_bytes: 60 * MIB,
            max_mapping_bytes: 60 * MIB,
        }
    }

    fn at(stacks: Vec<StackGroup>) -> LedgerAt {
        LedgerAt {
            stacks,
            at_unix_ms: 0,
            calls: 11,
            lost: 0,
        }
    }

    #[test]
    fn a_site_names_the_allocating_functions_innermost_first() {
        let p = partitions();
        assert_eq!(
            site_words(&p.frames, false, Call::Mmap),
            "alloc_partition <- synthesize <- main via mmap64"
        );
        assert_eq!(
            site_words(&p.frames[..3], true, Call::Mremap),
            "alloc_partition <- synthesize via mmap64 (stack cut short) [mremap]"
        );
        assert!(site_words(&[], false, Call::Brk).contains("not unwound"));
    }

    #[test]
    fn the_ten_partitions_are_one_line_and_folded_outermost_first() {
        let l = at(vec![partitions()]);
        let mut o = String::new();
        live_lines(&mut o, &l, &[]);
        assert_eq!(
            o,
            "                  600.0 MiB  alloc_partition <- synthesize <- main via mmap64: 10 mappings of 60.00 MiB\n"
        );
        assert_eq!(
            folded(&l),
            "_start;__libc_start_main;main;synthesize;alloc_partition;mmap64 629145600\n"
        );
        let svg = flame_graph_svg(&l, "at the peak").unwrap();
        assert!(
            svg.contains("alloc_partition") && svg.contains("<svg"),
            "{svg}"
        );
        assert!(flame_graph_svg(&at(Vec::new()), "x").is_none());
    }
}
