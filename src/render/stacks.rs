//! The ledger's stacks said to people: the code that made a stack's mappings in words
//! (`site_words`: the allocating frames, `analysis::ledger::allocating_frames`), the live
//! mappings by stack at a span's highest anatomy and how they changed (text lines for `summary`,
//! `bench` and `compare`, a table for `report`), the folded stacks of an anatomy (the format
//! flame graph tools read) and its flame graph (inferno's SVG).

use crate::analysis::ledger::{allocating_range, StackChange};
use crate::model::ledger::{Call, Frame, LedgerAt, StackGroup, TouchAt};
use crate::outside::shown;
use crate::render::table::Table;
use crate::units::{fmt_bytes, fmt_bytes_signed};
use std::borrow::Cow;
use std::fmt::Write as _;

/// The most stacks a text list shows; the rest are summed on one line.
pub const STACK_LINES: usize = 8;

/// The most frames `site_words` names.
const SITE_FRAMES: usize = 4;

/// Why an anatomy taken with the ledger running has no stacks.
pub const UNANSWERED: &str = "the ledger's thread did not answer within 10 s (busy unwinding a flood of stacks, or ended); the anatomy's mappings are read, their stacks are not";

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
    // The address space beside it where a tenth or more of it is not resident (an arena's
    // reserve, a thread's unused stack).
    if g.resident_bytes
        .is_some_and(|r| r.saturating_mul(10) < g.bytes.saturating_mul(9))
    {
        let _ = write!(w, ", {} mapped", fmt_bytes(g.bytes));
    }
    w
}

/// What a stack's mappings are, where the anatomy took them for a structure of the runtime:
/// `malloc arenas made by `, `threads' stacks made by `.
fn kind_words(g: &StackGroup) -> &'static str {
    use crate::model::anatomy::GroupKind;
    match g.kind {
        Some(GroupKind::Arenas) => "malloc arenas, made by ",
        Some(GroupKind::ThreadStacks) => "threads' stacks, made by ",
        Some(GroupKind::Heap) if g.call != Call::Brk => "the heap, made by ",
        _ => "",
    }
}

/// Resident where smaps gave it, else mapped: the word for what a stack's bytes are.
fn weighed(l: &LedgerAt) -> &'static str {
    if l.stacks.iter().all(|g| g.resident_bytes.is_some()) {
        "resident"
    } else {
        "mapped"
    }
}

/// The heading of the live mappings by stack at an anatomy.
pub fn live_heading(l: &LedgerAt) -> String {
    let n: u64 = l.stacks.iter().map(|s| s.mappings).sum();
    let resident: Option<u64> = l.stacks.iter().map(|g| g.resident_bytes).sum();
    let lost = if l.lost > 0 {
        format!(
            "; the kernel dropped {} of its records (a ring buffer full): some may be missing",
            l.lost
        )
    } else {
        String::new()
    };
    let bytes = match resident {
        Some(r) => format!(
            "{} resident of {} mapped",
            fmt_bytes(r),
            fmt_bytes(l.bytes())
        ),
        None => format!("{} mapped", fmt_bytes(l.bytes())),
    };
    format!(
        "{bytes} in {} the ledger saw made, by the code that made them{lost}",
        crate::units::count(n, "mapping")
    )
}

/// The heading of the memory credited to the code that touched it (`TouchAt`): how much of the
/// data mappings' resident bytes, from how many samples, and the rest; where rewrites are
/// tracked, since when (`at_unix_ms`: the anatomy's moment).
pub fn touch_heading(t: &TouchAt, attached: bool, lost: u64, at_unix_ms: u64) -> String {
    let credited: u64 = t.stacks.iter().map(|s| s.resident_bytes).sum();
    let present: u64 = t.stacks.iter().map(|s| s.samples).sum();
    let before = if attached {
        "resident before the ledger began (attached) or"
    } else {
        "in mappings"
    };
    // What the unsampled memory is, where there is some: `(parameters 120.0 MiB, heap 8.00 MiB)`.
    let kinds: Vec<String> = t
        .unsampled_by_kind
        .iter()
        .take(4)
        .map(|(k, b)| format!("{} {}", k.key(), fmt_bytes(*b)))
        .collect();
    let kinds = if kinds.is_empty() || t.unsampled_bytes == 0 {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    };
    let lost = if lost > 0 {
        format!(
            "; the kernel dropped {} (a ring buffer full): samples are missing",
            crate::units::count(lost, "record")
        )
    } else {
        String::new()
    };
    // Every huge page faulted in is sampled: a stack's huge pages are counted, not estimated.
    let (every_huge, huge) = if t.huge_samples > 0 {
        (
            ", and every transparent huge page faulted in",
            format!(", {} of them huge pages", t.huge_samples),
        )
    } else {
        ("", String::new())
    };
    format!(
        "{} of {} resident in data mappings, {} (one page fault in {} sampled{every_huge}: {} present{huge}; a stack of n samples is within about 100/sqrt(n) %); {}{kinds} {before} too small for a sample{lost}",
        fmt_bytes(credited),
        fmt_bytes(t.resident_bytes),
        touch_whose(t, at_unix_ms),
        t.every,
        crate::units::count(present, "sample"),
        fmt_bytes(t.unsampled_bytes),
    )
}

/// Whose memory a `TouchAt` credits: the code that wrote it last where the kernel's soft-dirty
/// bits were cleared before it (`rearms`), since when, else the code that first touched it.
fn touch_whose(t: &TouchAt, at_unix_ms: u64) -> String {
    match t.rearmed_unix_ms {
        Some(cleared) if t.rearms > 0 => format!(
            "by the code that wrote it last (written since the soft-dirty bits were cleared at the span's start, {} before this anatomy: its writer's then; `before`: not written since, its earlier writer's; {} given up to a rewrite)",
            crate::units::fmt_seconds(at_unix_ms.saturating_sub(cleared) as f64 / 1000.0),
            crate::units::count(t.samples_rewritten, "earlier sample")
        ),
        _ => "by the code that first touched it".into(),
    }
}

/// The memory credited to the code that touched it, a line per site (stacks that differ only
/// inside the allocator are one), largest first (at most `STACK_LINES`, the rest summed):
/// `62.0 MiB  grow_heap <- run via malloc (250 samples)`, and where some of it is from before
/// the span (`TouchGroup::before_bytes`), `(250 samples; 8.00 MiB before)`.
pub fn touch_lines(o: &mut String, t: &TouchAt) {
    let sites = touch_sites(t);
    let shown = sites.len().min(STACK_LINES);
    for (site, credit, samples) in &sites[..shown] {
        let before = if credit.before > 0 {
            format!("; {} before", fmt_bytes(credit.before))
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "                {:>11}  {site} ({}{before})",
            fmt_bytes(credit.bytes),
            crate::units::count(*samples, "sample")
        );
    }
    let rest = &sites[shown..];
    if !rest.is_empty() {
        let _ = writeln!(
            o,
            "                {:>11}  in {} other sites",
            fmt_bytes(rest.iter().map(|s| s.1.bytes).sum()),
            rest.len()
        );
    }
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
            Some(c) => format!(" ({})", fmt_bytes_signed(c.delta_bytes)),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "                {:>11}  {}{}: {}{tag}",
            fmt_bytes(g.weight()),
            kind_words(g),
            site_words(&g.frames, g.truncated, g.call),
            group_words(g)
        );
    }
    let rest = &l.stacks[shown..];
    if !rest.is_empty() {
        let _ = writeln!(
            o,
            "                {:>11}  in {} other stacks",
            fmt_bytes(rest.iter().map(StackGroup::weight).sum()),
            rest.len()
        );
    }
}

/// The words of the code that first touched memory: its site, without a `via` frame that no
/// symbol names (a memset or memcpy inside libc, at whichever offset the fault came).
fn touch_site(frames: &[Frame], truncated: bool) -> String {
    let w = site_words(frames, truncated, Call::Mmap);
    match w.find(" via [") {
        Some(at) => {
            let rest = &w[at + 6..];
            let tail = rest.find(']').map_or("", |e| &rest[e + 1..]);
            format!("{}{tail}", &w[..at])
        }
        None => w,
    }
}

/// The credited memory by site (its words: stacks that differ only inside the allocator are
/// one), with its samples, largest first.
fn touch_sites(t: &TouchAt) -> Vec<(String, Credit, u64)> {
    let mut sites = by_site(t.stacks.iter().map(|g| {
        let credit = Credit {
            bytes: g.resident_bytes,
            before: g.before_bytes,
        };
        (touch_site(&g.frames, g.truncated), credit, g.samples)
    }));
    sites.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then_with(|| a.0.cmp(&b.0)));
    sites
}

/// A site's credit: its resident bytes, and those of them from before the span
/// (`TouchGroup::before_bytes`).
#[derive(Debug, Clone, Copy)]
struct Credit {
    bytes: u64,
    before: u64,
}

impl std::ops::AddAssign for Credit {
    fn add_assign(&mut self, o: Credit) {
        self.bytes += o.bytes;
        self.before += o.before;
    }
}

/// (site, bytes, samples) summed by site, in the order each site first comes.
fn by_site<B: std::ops::AddAssign + Copy>(
    rows: impl Iterator<Item = (String, B, u64)>,
) -> Vec<(String, B, u64)> {
    let mut sites: Vec<(String, B, u64)> = Vec::new();
    for (site, bytes, samples) in rows {
        match sites.iter_mut().find(|s| s.0 == site) {
            Some(s) => {
                s.1 += bytes;
                s.2 += samples;
            }
            None => sites.push((site, bytes, samples)),
        }
    }
    sites
}

/// How the memory credited to the code that first touched it changed, a line per site (stacks
/// that differ only inside the allocator are one), the largest change first (at most `max`, the
/// rest summed), after a heading line that says how much of the change the named code holds.
pub fn touch_change_lines(
    o: &mut String,
    changes: &[crate::analysis::ledger::TouchChange],
    max: usize,
) {
    let mut sites = by_site(
        changes
            .iter()
            .map(|c| (touch_site(&c.frames, c.truncated), c.delta_bytes, c.samples)),
    );
    sites.retain(|s| s.1 != 0);
    sites.sort_by(|a, b| {
        b.1.unsigned_abs()
            .cmp(&a.1.unsigned_abs())
            .then_with(|| a.0.cmp(&b.0))
    });
    let shown = sites.len().min(max);
    for (site, delta, samples) in &sites[..shown] {
        let _ = writeln!(
            o,
            "                {:>11}  {site} ({})",
            fmt_bytes_signed(*delta),
            crate::units::count(*samples, "sample")
        );
    }
    let rest = &sites[shown..];
    if !rest.is_empty() {
        let _ = writeln!(
            o,
            "                {:>11}  in {} other sites",
            fmt_bytes_signed(rest.iter().map(|s| s.1).sum()),
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
            fmt_bytes_signed(c.delta_bytes),
            change_words(c)
        );
    }
    let rest = &changes[shown..];
    if !rest.is_empty() {
        let _ = writeln!(
            o,
            "                {:>11}  in {} other stacks",
            fmt_bytes_signed(rest.iter().map(|c| c.delta_bytes).sum()),
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
        head: [weighed(l), "made by", "mappings", "since the idle floor"]
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
                    fmt_bytes(g.weight()),
                    format!(
                        "{}{}",
                        kind_words(g),
                        site_words(&g.frames, g.truncated, g.call)
                    ),
                    group_words(g),
                    match change {
                        Some(c) if c.new => "new".into(),
                        Some(c) => fmt_bytes_signed(c.delta_bytes),
                        None => "-".into(),
                    },
                ]
            })
            .collect(),
        footer: Vec::new(),
    }
}

/// The memory credited to the code that first touched it as a table (`report`), a row per
/// site.
pub fn touch_table(
    title: String,
    t: &TouchAt,
    attached: bool,
    lost: u64,
    at_unix_ms: u64,
) -> Table {
    let rewrites = t.rearms > 0;
    let mut head = vec![
        "resident".to_string(),
        if rewrites {
            "written last by"
        } else {
            "first touched by"
        }
        .into(),
        "samples".into(),
    ];
    if rewrites {
        head.insert(1, "of it before".into());
    }
    Table {
        title,
        notes: vec![touch_heading(t, attached, lost, at_unix_ms)],
        head,
        rows: touch_sites(t)
            .into_iter()
            .map(|(site, credit, samples)| {
                let mut row = vec![fmt_bytes(credit.bytes), site, samples.to_string()];
                if rewrites {
                    row.insert(1, fmt_bytes(credit.before));
                }
                row
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
/// joined by `;`, then a space and its bytes, resident where smaps gave them (else mapped); a
/// stack without frames is `[brk raises under the threshold]`. The format flame graph tools
/// (inferno, flamegraph.pl) and speedscope read.
pub fn folded(l: &LedgerAt) -> String {
    let mut o = String::new();
    for g in l.stacks.iter().filter(|g| g.weight() > 0) {
        let frames: Vec<String> = if g.frames.is_empty() {
            vec![format!("[{} raises under the threshold]", g.call.key())]
        } else {
            g.frames.iter().rev().map(folded_frame).collect()
        };
        let _ = writeln!(o, "{} {}", frames.join(";"), g.weight());
    }
    o
}

/// The folded stacks of the memory credited to the code that first touched it (`t`), as
/// `folded` writes them, and `[unsampled]` for the resident memory no sample fell in.
pub fn folded_touch(t: &TouchAt) -> String {
    let mut o = String::new();
    for g in t.stacks.iter().filter(|g| g.resident_bytes > 0) {
        let frames: Vec<String> = g.frames.iter().rev().map(folded_frame).collect();
        let _ = writeln!(o, "{} {}", frames.join(";"), g.resident_bytes);
    }
    for (k, b) in t.unsampled_by_kind.iter().filter(|(_, b)| *b > 0) {
        let _ = writeln!(o, "[unsampled];[{}] {b}", k.key());
    }
    o
}

/// The flame graph of folded stacks (`folded`, `folded_touch`) as SVG (inferno's, interactive
/// when opened on its own or through an `<object>`): each frame as wide as the bytes its
/// stacks hold. `None` when there are none.
pub fn flame_graph_svg(text: &str, title: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
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

    /// Rewrites tracked: the heading says whose memory and since when, each site what of it
    /// is from before (summed over stacks that differ inside the allocator), the table a
    /// column; without, the first toucher's words and no column.
    #[test]
    fn a_touch_credit_with_rewrites_says_since_when_and_what_is_from_before() {
        let group = |outer: &str, bytes: u64, before: u64| crate::model::ledger::TouchGroup {
            frames: vec![
                f("memset", "libc.so.6"),
                f("fill", "prog"),
                f("main", "prog"),
                f(outer, "libc.so.6"),
            ],
            truncated: false,
            resident_bytes: bytes,
            before_bytes: before,
            samples: bytes / MIB,
        };
        let mut t = TouchAt {
            every: 67,
            stacks: vec![
                group("__libc_start_main", 24 * MIB, 6 * MIB),
                group("__libc_start_call_main", 8 * MIB, 2 * MIB),
            ],
            resident_bytes: 33 * MIB,
            unsampled_bytes: MIB,
            unsampled_by_kind: Vec::new(),
            samples: 40,
            samples_gone: 0,
            huge_samples: 0,
            samples_rewritten: 12,
            rearms: 2,
            rearmed_unix_ms: Some(1_000_000),
        };
        let heading = touch_heading(&t, false, 0, 1_002_500);
        assert!(
            heading.contains("by the code that wrote it last")
                && heading.contains("2.50 s before this anatomy")
                && heading.contains("12 earlier samples"),
            "{heading}"
        );
        let mut o = String::new();
        touch_lines(&mut o, &t);
        assert!(
            o.contains("32.00 MiB  fill <- main via memset (32 samples; 8.00 MiB before)"),
            "{o}"
        );
        let table = touch_table(String::new(), &t, false, 0, 1_002_500);
        assert_eq!(table.head[1], "of it before");
        assert_eq!(table.rows[0][1], "8.00 MiB");
        t.rearms = 0;
        t.rearmed_unix_ms = None;
        assert!(
            touch_heading(&t, false, 0, 1_002_500).contains("by the code that first touched it")
        );
        assert_eq!(
            touch_table(String::new(), &t, false, 0, 0).head[1],
            "first touched by"
        );
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
            resident_bytes: None,
            kind: None,
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
            touch: None,
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
        let svg = flame_graph_svg(&folded(&l), "at the peak").unwrap();
        assert!(
            svg.contains("alloc_partition") && svg.contains("<svg"),
            "{svg}"
        );
        assert!(flame_graph_svg(&folded(&at(Vec::new())), "x").is_none());
    }
}
