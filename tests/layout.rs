//! The dependency rules of docs/ARCHITECTURE.md, checked on the sources: they point down only,
//! each top-level module importing from its own floor and those below (`FLOORS`), never above.
//! The command line (`src/main.rs`, `src/cli.rs`, `src/commands/`) and the test helper binary
//! (`src/bin/`) are the only code that may use clap or the clap structs; the analysis never
//! imports the sampler, the commands or the command line, does no I/O and starts no threads of
//! its own (it takes samples: `impure`), and builds no text but its data (it decides values,
//! `render/` words them: `ANALYSIS_DATA_TEXT`); exit codes are chosen in `commands/` only (the core
//! says what kind of failure an error is, `exit::Class`, never which code it ends with). And the
//! shipped binary carries no test helpers.

use crate::util::*;
use predicates::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Every `.rs` file under `dir`, recursively, in a stable order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// A file's code without its comments (`//` to the end of the line), line by line.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("").to_string()))
        .collect()
}

/// A pattern for a line that uses the path `word` (`clap`, `cli`, `sampler`...) as a crate or
/// module.
fn uses(word: &str) -> regex::Regex {
    regex::Regex::new(&format!(
        r"(\b(crate|memmon|super)::({word})\b)|(\buse\s+{word}\b)|(\b{word}::)|(\bmod\s+{word}\b)"
    ))
    .unwrap()
}

/// What the analysis may take from `format/`: the data a reader hands over (the metadata,
/// `ReadInfo`, and `Sink`, the trait a reader hands it through), never a reader, a writer or an
/// input to open.
const ANALYSIS_MAY_USE_FROM_FORMAT: [&str; 3] = ["meta", "ReadInfo", "Sink"];

/// Why a line of `analysis/` breaks its purity (pure functions over samples: no I/O, no
/// threads), or `None`. It may not name `std::fs`, `std::io`, `std::net`, `std::os`,
/// `std::process` or `std::thread`, and may name from `format::` only
/// `ANALYSIS_MAY_USE_FROM_FORMAT` (so none of format's readers, which open files).
fn impure(line: &str) -> Option<String> {
    static STD_IO: OnceLock<regex::Regex> = OnceLock::new();
    static FORMAT: OnceLock<regex::Regex> = OnceLock::new();
    let std_io = STD_IO
        .get_or_init(|| regex::Regex::new(r"\bstd::(fs|io|net|os|process|thread)\b").unwrap());
    if let Some(m) = std_io.captures(line) {
        return Some(format!("`std::{}`", &m[1]));
    }
    let format = FORMAT.get_or_init(|| regex::Regex::new(r"\bformat::(\{[^}]*\}?|\w+)").unwrap());
    for m in format.captures_iter(line) {
        for name in m[1].trim_matches(|c| c == '{' || c == '}').split(',') {
            let first = name.trim().split("::").next().unwrap_or("").trim();
            if !first.is_empty() && !ANALYSIS_MAY_USE_FROM_FORMAT.contains(&first) {
                return Some(format!("`format::{first}`"));
            }
        }
    }
    None
}

/// The broken rules in the source tree under `src`, one line each (file:line: rule).
fn violations(src: &Path) -> Vec<String> {
    // anyhow too: a core error is typed, with its class (src/error.rs); the command line adds
    // context with anyhow.
    let core_may_not: Vec<(&str, regex::Regex)> = ["clap", "cli", "commands", "anyhow"]
        .into_iter()
        .map(|w| (w, uses(w)))
        .collect();
    let sampler = uses("sampler");
    let exit_code = regex::Regex::new(r"\bExitCode\b|process::exit\b").unwrap();
    let mut found = Vec::new();
    for file in rust_files(src) {
        let rel = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let command_line = rel == "main.rs"
            || rel == "cli.rs"
            || rel.starts_with("commands/")
            || rel.starts_with("bin/");
        let analysis = rel.starts_with("analysis/");
        // The tests' helper binary (`bin/`) is a program of its own.
        let chooses_exit =
            rel == "main.rs" || rel.starts_with("commands/") || rel.starts_with("bin/");
        for (n, line) in code_lines(&file) {
            if !chooses_exit && exit_code.is_match(&line) {
                found.push(format!(
                    "src/{rel}:{n}: an exit code chosen outside commands/ (give the error a class: exit::Class)"
                ));
            }
            if !command_line {
                for (word, re) in &core_may_not {
                    if re.is_match(&line) {
                        found.push(format!(
                            "src/{rel}:{n}: the core uses `{word}` (only main.rs, cli.rs, commands/ may)"
                        ));
                    }
                }
            }
            if analysis && sampler.is_match(&line) {
                found.push(format!(
                    "src/{rel}:{n}: the analysis imports the sampler (it reads recordings only)"
                ));
            }
            if let Some(what) = impure(&line).filter(|_| analysis) {
                found.push(format!(
                    "src/{rel}:{n}: the analysis uses {what} (it takes samples, it does no I/O and starts no threads)"
                ));
            }
        }
    }
    found
}

#[test]
fn dependencies_point_down_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check has something to look at: the core and the commands are where it expects.
    assert!(src.join("analysis/summary.rs").exists() && src.join("commands/mod.rs").exists());
}

#[test]
fn the_layout_check_catches_a_core_file_using_clap_or_the_cli_and_an_analysis_using_the_sampler() {
    let dir = tempdir();
    let src = dir.path();
    for d in ["format", "analysis", "commands"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write("cli.rs", "use clap::Args;\n");
    write("commands/record.rs", "use crate::cli::RecordArgs;\n");
    write(
        "format/mod.rs",
        "// clap:: in a comment is fine\n#[derive(clap::ValueEnum)]\npub enum F { A }\n",
    );
    write("analysis/summary.rs", "use crate::sampler::signals;\n");
    write("record.rs", "fn f(a: &crate::cli::RecordArgs) {}\n");
    write(
        "format/errors.rs",
        "fn f() -> anyhow::Result<()> { Ok(()) }\n",
    );
    write(
        "commands/exit.rs",
        "fn f() -> ExitCode { ExitCode::Usage }\n",
    );
    write(
        "format/out.rs",
        "// ExitCode in a comment is fine\nfn f() { std::process::exit(2) }\n",
    );
    let found = violations(src);
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(found[0].starts_with("src/analysis/summary.rs:1: the analysis imports the sampler"));
    assert!(found[1].starts_with("src/format/errors.rs:1: the core uses `anyhow`"));
    assert!(found[2].starts_with("src/format/mod.rs:2: the core uses `clap`"));
    assert!(found[3].starts_with("src/format/out.rs:2: an exit code chosen outside commands/"));
    assert!(found[4].starts_with("src/record.rs:1: the core uses `cli`"));
}

#[test]
fn the_layout_check_catches_an_analysis_that_opens_files_or_starts_threads() {
    let dir = tempdir();
    let src = dir.path();
    std::fs::create_dir_all(src.join("analysis")).unwrap();
    std::fs::create_dir_all(src.join("render")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write(
        "analysis/ok.rs",
        "use crate::format::meta::{EndInfo, Meta};\nuse crate::format::{ReadInfo};\n\
         use std::fmt::Write as _;\n// std::fs in a comment is fine\nfn f() { format!(\"x\"); }\n",
    );
    write(
        "analysis/bad.rs",
        "use crate::format::{ReadInfo, read_input};\nfn f() { std::thread::scope(|_| {}); }\n\
         fn g() { let _ = std::fs::read(\"x\"); }\nuse crate::format::input::open;\n\
         use crate::format::many::read_parallel;\n",
    );
    // Outside analysis/, reading files is what the code is for.
    write(
        "render/read.rs",
        "use crate::format::read_input;\nuse std::fs;\n",
    );
    let found = violations(src);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(" (").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "src/analysis/bad.rs:1: the analysis uses `format::read_input`",
            "src/analysis/bad.rs:2: the analysis uses `std::thread`",
            "src/analysis/bad.rs:3: the analysis uses `std::fs`",
            "src/analysis/bad.rs:4: the analysis uses `format::input`",
            "src/analysis/bad.rs:5: the analysis uses `format::many`",
        ],
        "{found:#?}"
    );
}

/// The text the analysis may build: data, not words, each kept with why (the file, the literal
/// on the line that builds it, and why it is data). Everything said to people is `render/`'s
/// (docs/ARCHITECTURE.md): the analysis decides values, render words them.
const ANALYSIS_DATA_TEXT: [(&str, &str, &str); 7] = [
    (
        "analysis/phases.rs",
        r#""run {n}""#,
        "a bench run's label, by which every table, plot, report, comparison and budget names and finds the run",
    ),
    (
        "analysis/phases.rs",
        r#""s{k} {run}""#,
        "the same label of a run of session K, where the runs come from several sessions",
    ),
    (
        "analysis/budget.rs",
        r#""{of}#phase {}""#,
        "a budget's unit, `FILE#phase LABEL`: the JSON's `of`, by which a check is known",
    ),
    (
        "analysis/budget.rs",
        r#""{of}#{}{incomplete}""#,
        "a budget's unit, `FILE#run N`: the JSON's `of`, by which a check is known",
    ),
    (
        "analysis/compare.rs",
        r#""{}#{label}""#,
        "a compared run's name, `FILE#run N`: the JSON's `file`, by which budgets and reports name it",
    ),
    (
        "analysis/gpu.rs",
        r#""{} {} {}""#,
        "a GPU as the metadata names it, `index uuid model`: an identifier in the JSON's `gpus`",
    ),
    (
        "analysis/ledger.rs",
        "[other stacks: past memmon's",
        "the frame of the stack every stack past the cap counts in: folded and compared like any other frame",
    ),
];

/// The lines of `analysis/` under `src`, test code aside (`#[cfg(test)]` items and test module
/// files), that build text (`format!`, `write!`, `writeln!`, `push_str`), one each
/// (file:line): all but those `data` lists (file, a literal on the line, why).
fn analysis_text(src: &Path, data: &[(&str, &str, &str)]) -> Vec<String> {
    let builds = regex::Regex::new(r"\b(format|write|writeln)!|\.push_str\s*\(").unwrap();
    let files: Vec<String> = rust_files(&src.join("analysis"))
        .iter()
        .map(|p| p.strip_prefix(src).unwrap().display().to_string())
        .collect();
    let tests = test_module_paths(src, &files);
    let mut found = Vec::new();
    for rel in files
        .iter()
        .filter(|r| !tests.iter().any(|t| r.starts_with(t.as_str())))
    {
        for (n, line) in non_test_lines(&src.join(rel)) {
            let Some(m) = builds.find(&line) else {
                continue;
            };
            if data
                .iter()
                .any(|(f, literal, _)| f == rel && line.contains(literal))
            {
                continue;
            }
            found.push(format!(
                "src/{rel}:{n}: `{}` (the analysis decides values: say them in render/, or list data in ANALYSIS_DATA_TEXT)",
                m.as_str().trim_end_matches(['(', ' '])
            ));
        }
    }
    found
}

#[test]
fn the_analysis_builds_no_text_but_its_data() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = analysis_text(&src, &ANALYSIS_DATA_TEXT);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check sees them: without the list, it finds each listed line and no other.
    assert_eq!(
        analysis_text(&src, &[]).len(),
        ANALYSIS_DATA_TEXT.len(),
        "{:#?}",
        analysis_text(&src, &[])
    );
}

#[test]
fn the_text_check_catches_an_analysis_that_words_a_value_but_not_its_data_or_its_tests() {
    let dir = tempdir();
    let src = dir.path();
    std::fs::create_dir_all(src.join("analysis")).unwrap();
    std::fs::create_dir_all(src.join("render")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write(
        "analysis/mod.rs",
        "pub mod peak;\npub mod other;\n#[cfg(test)]\nmod fixtures;\n",
    );
    write(
        "analysis/peak.rs",
        "// format!(\"in a comment\") is fine\nfn f(b: u64) -> String { format!(\"{b} bytes\") }\n\
         fn g(o: &mut String) { let _ = write!(o, \"x\"); let _ = writeln!(o); }\n\
         fn h(o: &mut String) { o.push_str(\"peak\"); }\n\
         fn label(n: u32) -> String { format!(\"run {n}\") }\n\
         fn k(o: &mut String) { o.push('x'); let _ = format_args!(\"y\"); }\n\
         #[cfg(test)]\nmod tests {\n    fn t() -> String { format!(\"z\") }\n}\n\
         fn after(o: &mut String) { let _ = writeln!(o, \"w\"); }\n",
    );
    // The data listed is that file's only.
    write(
        "analysis/other.rs",
        "fn label(n: u32) -> String { format!(\"run {n}\") }\n",
    );
    write(
        "analysis/fixtures.rs",
        "fn f() -> String { format!(\"test data\") }\n",
    );
    // Outside analysis/, saying things is what the code is for.
    write(
        "render/peak.rs",
        "fn f(b: u64) -> String { format!(\"{b} bytes\") }\n",
    );
    let found = analysis_text(src, &[("analysis/peak.rs", r#""run {n}""#, "a label")]);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(" (").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "src/analysis/other.rs:1: `format!`",
            "src/analysis/peak.rs:2: `format!`",
            "src/analysis/peak.rs:3: `write!`",
            "src/analysis/peak.rs:4: `.push_str`",
            "src/analysis/peak.rs:11: `writeln!`",
        ],
        "{found:#?}"
    );
}

/// The floors of the program, bottom to top: a top-level module of src/ (a file, or a folder
/// with its `mod.rs`) imports (`crate::...`) only from its own floor and those below it, so the
/// modules form no circle and each can be read knowing only what is under it. `outside` (text
/// from outside, escaped) is below `units`, whose `printable` uses it; `output` (every file
/// written) is below `format`, whose writers are built on it; `render` is below `sampler` and
/// `bench`, which say their tables and pictures with it. The command line (`cli.rs`,
/// `commands/`, `main.rs`) is a crate of its own above the core; `lib.rs` (the root) and the
/// tests' helper binary (`bin/`, a crate of its own) are not floors.
const FLOORS: [&str; 21] = [
    "exit", "error", "sys", "outside", "units", "reporter", "model", "probe", "output", "format",
    "analysis", "render", "sampler", "marks", "export", "bench", "workload", "demo", "cli",
    "commands", "main",
];

/// The files of `files` (relative to `src`) that are test modules of their own, declared under
/// `#[cfg(test)]` (`#[cfg(test)] mod fuzz;` in `format/mod.rs` makes `format/fuzz.rs` one): each
/// as the file's path and the folder of its own children.
fn test_module_paths(src: &Path, files: &[String]) -> Vec<String> {
    let decl = regex::Regex::new(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;").unwrap();
    let mut out = Vec::new();
    for rel in files {
        let lines = code_lines(&src.join(rel));
        // Where its children are: beside a `mod.rs` (or the root), in a folder named after
        // any other file.
        let file = rel.rsplit('/').next().unwrap();
        let dir = if ["mod.rs", "lib.rs", "main.rs"].contains(&file) {
            rel.rsplit_once('/').map_or("", |(d, _)| d).to_string()
        } else {
            rel.trim_end_matches(".rs").to_string()
        };
        for w in lines.windows(2) {
            if w[0].1.trim() != "#[cfg(test)]" {
                continue;
            }
            if let Some(m) = decl.captures(&w[1].1) {
                let child = if dir.is_empty() {
                    m[1].to_string()
                } else {
                    format!("{dir}/{}", &m[1])
                };
                out.push(format!("{child}.rs"));
                out.push(format!("{child}/"));
            }
        }
    }
    out
}

/// A file's code outside its test-only items, one line each with its number, comments cut: an
/// item under `#[cfg(test)]` (a `mod tests { ... }`, a helper `fn` or `impl`) is left out up to
/// the `}` at its own indent, and the code after it is kept.
fn non_test_lines(path: &Path) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut lines = code_lines(path).into_iter();
    while let Some((n, line)) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push((n, line));
            continue;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let close = format!("{indent}}}");
        // The item's first line, past any other attributes: one line long, or up to its `}`.
        let first = lines.by_ref().find(|(_, l)| !l.trim().starts_with("#["));
        let one_line = first.is_none_or(|(_, l)| {
            let l = l.trim_end();
            l.ends_with(';') || l.ends_with('}')
        });
        if !one_line {
            lines.by_ref().find(|(_, l)| l.trim_end() == close);
        }
    }
    out
}

/// The top-level modules `code` names through `crate::` paths (`crate::probe::ProcFs`,
/// `use crate::{model::peak, units::{count, fmt_bytes}}`), each with the byte offset it is
/// named at.
fn named_modules(code: &str) -> Vec<(usize, String)> {
    let path = regex::Regex::new(r"\bcrate\s*::\s*(\w+|\{)").unwrap();
    let mut out = Vec::new();
    for m in path.captures_iter(code) {
        let at = m.get(1).unwrap();
        if &m[1] != "{" {
            out.push((at.start(), m[1].to_string()));
            continue;
        }
        // A group: its items at the group's own depth, each's first segment where it begins.
        let mut depth = 0;
        let mut items: Vec<(usize, String)> = vec![(at.end(), String::new())];
        for (i, c) in code[at.end()..].char_indices() {
            let i = at.end() + i;
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => items.push((i + 1, String::new())),
                _ if depth == 0 => {
                    let (start, item) = items.last_mut().unwrap();
                    if item.trim().is_empty() {
                        *start = i;
                    }
                    item.push(c);
                }
                _ => {}
            }
        }
        for (start, item) in items {
            let first = item.split("::").next().unwrap_or("").trim();
            if !first.is_empty() && first != "self" && first != "*" {
                out.push((start, first.to_string()));
            }
        }
    }
    out
}

/// Every import under `src` that goes up a floor (`FLOORS`), and every top-level module without
/// a floor, one line each: `src/model/peak.rs:9: model imports probe, a floor above it`. Test
/// code (`#[cfg(test)]` items and test module files) may reach any floor.
fn upward_imports(src: &Path) -> Vec<String> {
    let files: Vec<String> = rust_files(src)
        .iter()
        .map(|p| p.strip_prefix(src).unwrap().display().to_string())
        .filter(|rel| !rel.starts_with("bin/"))
        .collect();
    let tests = test_module_paths(src, &files);
    let floor = |m: &str| FLOORS.iter().position(|f| *f == m);
    let mut found = Vec::new();
    for rel in files
        .iter()
        .filter(|r| *r != "lib.rs" && !tests.iter().any(|t| r.starts_with(t.as_str())))
    {
        let module = rel.split('/').next().unwrap().trim_end_matches(".rs");
        let Some(own) = floor(module) else {
            found.push(format!(
                "src/{rel}: {module} has no floor (add it to FLOORS)"
            ));
            continue;
        };
        let lines = non_test_lines(&src.join(rel));
        let mut code = String::new();
        let mut starts = Vec::new();
        for (n, line) in &lines {
            starts.push((code.len(), *n));
            code.push_str(line);
            code.push('\n');
        }
        for (at, other) in named_modules(&code) {
            if other == module || floor(&other).is_some_and(|f| f <= own) {
                continue;
            }
            let n = starts
                .iter()
                .rev()
                .find(|(s, _)| *s <= at)
                .map_or(0, |(_, n)| *n);
            found.push(match floor(&other) {
                Some(_) => format!("src/{rel}:{n}: {module} imports {other}, a floor above it"),
                None => format!("src/{rel}:{n}: {module} imports {other}, which has no floor"),
            });
        }
    }
    found
}

#[test]
fn every_module_imports_only_from_its_floor_and_those_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = upward_imports(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check sees imports: the tree's of the probes.
    let tree: Vec<String> = non_test_lines(&src.join("sampler/tree.rs"))
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert!(named_modules(&tree.join("\n"))
        .iter()
        .any(|(_, m)| m == "probe"));
    // No floor is left without its module.
    for f in FLOORS {
        assert!(
            src.join(format!("{f}.rs")).exists() || src.join(f).join("mod.rs").exists(),
            "FLOORS names {f}, which src/ has not"
        );
    }
}

#[test]
fn the_floor_check_catches_an_import_from_above_in_a_path_or_a_group_but_not_in_tests() {
    let dir = tempdir();
    let src = dir.path();
    for d in ["model", "probe", "format"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write(
        "model/peak.rs",
        "use crate::units::fmt_bytes;\nfn f() -> u64 { crate::probe::proc::ProcFs::page_size() }\n\
         // crate::demo in a comment is fine\n",
    );
    write(
        "model/mod.rs",
        "pub mod peak;\nuse crate::{\n    model::peak::Peak,\n    units::{count, plural},\n    sampler::tree,\n};\n\
         use super::x;\n",
    );
    write(
        "probe/mod.rs",
        "use crate::model::Sample;\n#[cfg(test)]\nmod fake;\n#[cfg(test)]\nfn helper() {\n    crate::demo::run();\n}\n\
         fn after() { crate::render::x(); }\n",
    );
    write("probe/fake.rs", "use crate::sampler::Tree;\n");
    write(
        "units.rs",
        "#[cfg(test)]\nmod tests {\n    use crate::render::x;\n}\n#[cfg(test)]\nuse crate::demo;\n",
    );
    write("format/mod.rs", "use crate::output::Place;\n");
    write("newmod.rs", "use crate::exit::Class;\n");
    let found = upward_imports(src);
    assert_eq!(
        found,
        [
            "src/model/mod.rs:5: model imports sampler, a floor above it",
            "src/model/peak.rs:2: model imports probe, a floor above it",
            "src/newmod.rs: newmod has no floor (add it to FLOORS)",
            "src/probe/mod.rs:8: probe imports render, a floor above it",
        ],
        "{found:#?}"
    );
}

/// The core prints nothing itself: what it has to say (the recorder's, the bench's, the
/// markers', the exporter's notes and warnings) goes to the one `Reporter` it is handed, and the
/// recorder's banner, samples and summary to a `RecordObserver`; the command line shows them.
/// Only the command line and these may write to the terminal, each for a reason of its own.
const MAY_PRINT: [(&str, &str); 3] = [
    (
        "workload.rs",
        "the workload's `say:` and `thp:` steps are its own stdout",
    ),
    ("format/fuzz.rs", "the fuzz test's report of what it tried"),
    (
        "bench/export/mod.rs",
        "an export to `-` is data on stdout, where the user said",
    ),
];

/// The core's files, relative to `src`: all but the command line and the test helper binary.
fn core_files(src: &Path) -> Vec<String> {
    rust_files(src)
        .iter()
        .map(|p| p.strip_prefix(src).unwrap().display().to_string())
        .filter(|rel| {
            !(rel.starts_with("commands/")
                || rel.starts_with("bin/")
                || rel == "main.rs"
                || rel == "cli.rs")
        })
        .collect()
}

/// The lines of `files` (relative to `src`) that write to the terminal, one each (file:line).
fn printing_lines(src: &Path, files: &[&str]) -> Vec<String> {
    // A handle to stderr may be passed on (a launched command's stdout); writing to it is printing.
    let print = regex::Regex::new(
        r"\b(e?print(ln)?!|(std::)?io::(stderr|stdout)\(\)\s*\.\s*(write\w*|lock)|write(ln)?!\s*\(\s*(std::)?io::std(err|out)\(\))",
    )
    .unwrap();
    let mut found = Vec::new();
    for rel in files {
        for (n, line) in code_lines(&src.join(rel)) {
            if let Some(m) = print.find(&line) {
                found.push(format!(
                    "src/{rel}:{n}: `{}` (this file hands what it has to say to its caller)",
                    m.as_str()
                ));
            }
        }
    }
    found
}

#[test]
fn the_core_prints_nothing_itself() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files: Vec<String> = core_files(&src)
        .into_iter()
        .filter(|f| MAY_PRINT.iter().all(|(m, _)| m != f))
        .collect();
    assert!(files.iter().any(|f| f == "sampler/record/mod.rs") && files.len() > 40);
    let refs: Vec<&str> = files.iter().map(String::as_str).collect();
    let found = printing_lines(&src, &refs);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_print_check_catches_a_print_and_a_write_to_stderr() {
    let dir = tempdir();
    let src = dir.path();
    std::fs::write(
        src.join("a.rs"),
        "// eprintln! in a comment is fine\nfn f() { eprintln!(\"x\"); }\n\
         fn g() { let _ = std::io::stderr().write_all(b\"x\"); }\nfn h() { print!(\"y\"); }\n\
         fn k() { format!(\"z\"); }\n\
         fn m() { let fd = std::io::stderr().as_fd().try_clone_to_owned(); }\n",
    )
    .unwrap();
    let found = printing_lines(src, &["a.rs"]);
    let lines: Vec<&str> = found
        .iter()
        .map(|f| f.split(" (").next().unwrap())
        .collect();
    assert_eq!(
        lines,
        [
            "src/a.rs:2: `eprintln!`",
            "src/a.rs:3: `std::io::stderr().write_all`",
            "src/a.rs:4: `print!`",
        ],
        "{found:#?}"
    );
}

#[test]
fn the_shipped_binary_has_no_test_helpers() {
    let help = memmon().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for helper in ["workload", "test-daemon", "test-client"] {
        assert!(
            !help.lines().any(|l| l.trim_start().starts_with(helper)),
            "--help lists {helper}: {help}"
        );
        memmon()
            .arg(helper)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("unrecognized subcommand"));
    }
    // They are in memmon-test, which cargo test builds beside memmon.
    let out = std::process::Command::new(memmon_test_path())
        .args(["workload", "alloc:1MiB", "exit:7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
}

/// Calls of `libc` functions outside `sys/raw.rs` and outside test modules, as `FILE:LINE`
/// (docs/ARCHITECTURE.md, "The system layer": the only hand-written libc calls are there).
/// Constants, types and the status macros (`libc::WIFEXITED`: upper case) are not calls.
fn libc_calls(src: &Path) -> Vec<String> {
    let call = regex::Regex::new(r"\blibc::[a-z_][a-z0-9_]*\s*\(").unwrap();
    let mut out = Vec::new();
    for path in rust_files(src) {
        let rel = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == "sys/raw.rs" {
            continue;
        }
        let lines = code_lines(&path);
        let mut cfg_test = false;
        for (n, line) in lines {
            let t = line.trim();
            if cfg_test && (t.starts_with("mod ") || t.starts_with("pub(crate) mod ")) {
                break;
            }
            cfg_test = t == "#[cfg(test)]";
            if call.is_match(&line) {
                out.push(format!("src/{rel}:{n}"));
            }
        }
    }
    out
}

#[test]
fn libc_is_called_only_in_the_system_layers_raw_file() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = libc_calls(&src);
    assert!(
        found.is_empty(),
        "libc called outside src/sys/raw.rs: {found:#?}"
    );
}

#[test]
fn the_libc_check_catches_a_call_but_not_a_constant_a_test_or_the_raw_file() {
    let dir = tempdir();
    let src = dir.path();
    std::fs::create_dir_all(src.join("sys")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write(
        "sys/raw.rs",
        "fn f() { unsafe { libc::wait4(1, p, 0, r) }; }\n",
    );
    write(
        "probe.rs",
        "const E: i32 = libc::EPERM;\nfn s(x: libc::c_int) -> bool { libc::WIFEXITED(x) }\n\
         // libc::kill(1, 0) in a comment is fine\nfn k() { unsafe { libc::kill(1, 0) }; }\n\
         #[cfg(test)]\nmod tests {\n    fn t() { unsafe { libc::getpid() }; }\n}\n",
    );
    assert_eq!(libc_calls(src), ["src/probe.rs:4"]);
}

/// The lines under `dirs` (relative to `src`) that fill one of `columns` by name: a struct
/// literal's field or an assignment (`rss_bytes: ...`, `s.rss_bytes = ...`, `+=`).
fn filling_lines(src: &Path, dirs: &[&str], columns: &[&str]) -> Vec<String> {
    let fills =
        regex::Regex::new(&format!(r"\b({})\s*(:[^:]|[+]?=[^=])", columns.join("|"))).unwrap();
    let mut found = Vec::new();
    for dir in dirs {
        for p in rust_files(&src.join(dir)) {
            let rel = p.strip_prefix(src).unwrap().display().to_string();
            // Unit tests spell rows out.
            let code: String = std::fs::read_to_string(&p).unwrap();
            let code = code.split("#[cfg(test)]").next().unwrap().to_string();
            for (n, line) in code.lines().enumerate() {
                let line = line.split("//").next().unwrap_or("");
                if let Some(m) = fills.find(line) {
                    found.push(format!("src/{rel}:{}: `{}`", n + 1, m.as_str().trim()));
                }
            }
        }
    }
    found
}

/// A /proc/PID/status column is declared once: its line in the column table routes the
/// members' values into it (`sum(F)` in `for_columns!`, summed by code generated from that
/// line); no code of the sampling path (the probes, the engine, the exporter) copies it by hand
/// on the way to a recording or to /metrics. (The high-water marks are also the tree's own:
/// departures raise them.)
#[test]
fn a_status_column_is_named_only_where_it_is_declared() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let status: Vec<&str> = memmon::model::sample::COLUMNS
        .iter()
        // (`threads` is also every thread count's name.)
        .filter(|c| c.source.starts_with("sum(") && !c.name.starts_with("hwm"))
        .filter(|c| c.name.ends_with("_bytes"))
        .map(|c| c.name)
        .collect();
    assert!(
        status.contains(&"rss_bytes") && status.len() >= 8,
        "{status:?}"
    );
    let found = filling_lines(&src, &["sampler", "export", "probe"], &status);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check sees a hand copy.
    let dir = tempdir();
    std::fs::create_dir_all(dir.path().join("sampler")).unwrap();
    std::fs::write(
        dir.path().join("sampler/copy.rs"),
        "fn f(t: &T) -> Sample {\n    Sample { rss_bytes: t.rss, ..Default::default() }\n}\nfn g(s: &mut Sample) { s.anon_bytes += 1; if s.rss_bytes == 0 {} }\n",
    )
    .unwrap();
    let found = filling_lines(dir.path(), &["sampler"], &status);
    assert_eq!(
        found,
        [
            "src/sampler/copy.rs:2: `rss_bytes:`",
            "src/sampler/copy.rs:4: `anon_bytes +=`"
        ]
    );
}

/// Reading is one-directional: `format/read.rs` recognises an input and hands it to one reader,
/// memmon's own (`format/recording.rs`) or an importer (`format/import/`); no reader calls
/// another, nor back into the dispatcher.
#[test]
fn readers_are_peers_that_never_call_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    let mut check = |p: &Path, bad: &regex::Regex, why: &str| {
        for (n, line) in code_lines(p) {
            if bad.is_match(&line) {
                let rel = p.strip_prefix(&src).unwrap().display();
                found.push(format!("src/{rel}:{n}: {why}"));
            }
        }
    };
    let importer_calls =
        regex::Regex::new(r"\b(recording::|read_recording|read::read_from|read_input)").unwrap();
    for p in rust_files(&src.join("format/import")) {
        check(
            &p,
            &importer_calls,
            "an importer calls memmon's reader or the dispatcher",
        );
    }
    let recording_calls = regex::Regex::new(r"\b(import::|read::read_from|read_input)").unwrap();
    check(
        &src.join("format/recording.rs"),
        &recording_calls,
        "memmon's reader calls an importer or the dispatcher",
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The error types defined under `src` (a `thiserror::Error` derive, or an `impl Error for`), as
/// `(file, path)`: `("probe/proc.rs", "crate::probe::proc::ProcError")`. Test modules (from a
/// `#[cfg(test)]` line on) and the tests' helper binary (`bin/`) are left out.
fn error_types(src: &Path) -> Vec<(String, String)> {
    let derive = regex::Regex::new(
        r"#\[derive\([^)]*\bthiserror::Error\b[^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*pub(?:\([^)]*\))?\s+(?:enum|struct)\s+(\w+)",
    )
    .unwrap();
    let hand = regex::Regex::new(r"\bimpl\s+(?:std::error::)?Error\s+for\s+(\w+)").unwrap();
    let mut out = Vec::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap().display().to_string();
        if rel.starts_with("bin/") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let module = rel
            .trim_end_matches(".rs")
            .trim_end_matches("/mod")
            .trim_end_matches("lib")
            .replace('/', "::");
        for name in derive
            .captures_iter(code)
            .chain(hand.captures_iter(code))
            .map(|c| c[1].to_string())
        {
            let path = if module.is_empty() {
                format!("crate::{name}")
            } else {
                format!("crate::{module}::{name}")
            };
            out.push((rel.clone(), path));
        }
    }
    out
}

/// The core's error types listed in `commands/classes.rs` (the types its `class_of` finds in a
/// chain), as written there (`memmon::probe::proc::ProcError`).
fn classified(src: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(src.join("commands/classes.rs")).unwrap();
    let list = text
        .split("\nclassified!(")
        .nth(1)
        .and_then(|rest| rest.split(");").next())
        .expect("commands/classes.rs has no classified!(...) list");
    list.split(',')
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The error types whose class no one knows: a core type not in `classified` (the list of
/// `commands/classes.rs`, `memmon::` or `crate::` paths), a command line type (`commands/`)
/// that `commands/exit.rs` does not look for. Such an error exits 1 whatever it is.
fn unclassified(src: &Path, classified: &[&str]) -> Vec<String> {
    let exit_rs = std::fs::read_to_string(src.join("commands/exit.rs")).unwrap_or_default();
    let listed: Vec<String> = classified
        .iter()
        .map(|t| t.replace(' ', "").replacen("memmon::", "crate::", 1))
        .collect();
    error_types(src)
        .into_iter()
        .filter(|(file, path)| {
            let name = path.rsplit("::").next().unwrap();
            if file.starts_with("commands/") {
                !exit_rs.contains(&format!("downcast_ref::<{name}>"))
            } else {
                !listed.contains(path)
            }
        })
        .map(|(file, path)| {
            format!(
                "src/{file}: {path} has no class: implement memmon::error::Classified for it and list it in src/commands/classes.rs (classified!), or it exits 1 whatever it is"
            )
        })
        .collect()
}

#[test]
fn every_error_type_has_a_class_that_the_exit_code_is_chosen_from() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let listed = classified(&src);
    let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
    let found = unclassified(&src, &listed);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check has something to look at.
    let all = error_types(&src);
    assert!(all.len() >= 30 && listed.len() >= 30, "{all:?}\n{listed:?}");
    assert!(listed.contains(&"memmon::sampler::error::RecordError"));
    assert!(all.contains(&(
        "sampler/error.rs".to_string(),
        "crate::sampler::error::RecordError".to_string()
    )));
}

#[test]
fn the_class_check_catches_a_new_error_type_in_the_core_and_in_the_commands() {
    let dir = tempdir();
    let src = dir.path();
    std::fs::create_dir_all(src.join("probe")).unwrap();
    std::fs::create_dir_all(src.join("commands")).unwrap();
    let write = |p: &str, text: &str| std::fs::write(src.join(p), text).unwrap();
    write(
        "probe/mod.rs",
        "#[derive(Debug, thiserror::Error)]\npub enum ProbeError { #[error(\"x\")] X }\n\
         #[derive(Debug, Clone, thiserror::Error)]\n#[error(\"y\")]\npub struct Listed;\n\
         pub struct Plain;\nimpl std::error::Error for Plain {}\n\
         #[cfg(test)]\nmod tests {\n#[derive(Debug, thiserror::Error)]\npub enum TestOnly {}\n}\n",
    );
    write(
        "commands/exit.rs",
        "#[derive(Debug, thiserror::Error)]\npub struct UsageError(String);\n\
         #[derive(Debug, thiserror::Error)]\npub struct Forgotten;\n\
         fn class(e: &dyn Error) { e.downcast_ref::<UsageError>(); }\n",
    );
    let found = unclassified(src, &["memmon::probe::Listed"]);
    let paths: Vec<&str> = found
        .iter()
        .map(|f| f.split(" has no class").next().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "src/commands/exit.rs: crate::commands::exit::Forgotten",
            "src/probe/mod.rs: crate::probe::ProbeError",
            "src/probe/mod.rs: crate::probe::Plain",
        ],
        "{found:#?}"
    );
}

/// Core functions whose error is a bare `String`, as `FILE:LINE` (test modules aside): a typed
/// error names what failed and carries its class (src/error.rs).
fn string_errors(src: &Path) -> Vec<String> {
    let re = regex::Regex::new(r"Result<.*,\s*String>").unwrap();
    let mut out = Vec::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap().display().to_string();
        let command_line = rel == "main.rs"
            || rel == "cli.rs"
            || rel.starts_with("commands/")
            || rel.starts_with("bin/");
        if command_line {
            continue;
        }
        for (n, line) in code_lines(&file) {
            if line.trim() == "#[cfg(test)]" {
                break;
            }
            if re.is_match(&line) {
                out.push(format!("src/{rel}:{n}"));
            }
        }
    }
    out
}

/// What may still say why in a `String`: the reason a cgroup does not hold a tree alone, which is
/// shown as it is (in the metadata's `not_the_tree` and the summary), never an error that ends
/// anything; and a cgroup file's key parser, whose message goes into `CgroupError::Parse`.
const STRING_REASONS: [&str; 3] = [
    "sampler/record/start.rs: holds_alone",
    "sampler/cgroup.rs: CgroupSource::existing",
    "probe/cgroup/mod.rs: strict_key_value",
];

#[test]
fn no_core_function_gives_a_bare_string_as_its_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = string_errors(&src);
    // The check sees them: the reasons kept as text are among what it finds.
    assert!(
        all.iter()
            .any(|a| a.starts_with("src/sampler/record/start.rs:")),
        "{all:?}"
    );
    let found: Vec<String> = all
        .into_iter()
        .filter(|at| {
            let (file, line) = at.trim_start_matches("src/").split_once(':').unwrap();
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            let line = text
                .lines()
                .nth(line.parse::<usize>().unwrap() - 1)
                .unwrap();
            !STRING_REASONS.iter().any(|r| {
                let (f, name) = r.split_once(": ").unwrap();
                f == file && line.contains(name.rsplit("::").next().unwrap())
            })
        })
        .collect();
    assert!(
        found.is_empty(),
        "a core function's error is a String (give it a typed error, thiserror, with its class): {found:#?}"
    );
}
