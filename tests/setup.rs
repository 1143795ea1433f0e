//! The newcomer's path stays true: README's first commands, `.ci/run` and the list of outside
//! programs agree with each other, and the documents (README.md, docs/guide/*.md) name what the
//! list holds.

use crate::util::*;
use std::path::Path;

fn read(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(name)).unwrap()
}

#[test]
fn ci_runs_the_test_command_that_readme_gives_first() {
    let readme = read("README.md");
    let quick: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .take(4)
        .collect();
    assert!(
        quick
            .iter()
            .any(|l| l.starts_with("cargo run --release -- demo")),
        "{quick:?}"
    );
    assert!(
        quick.iter().any(|l| l.starts_with("./scripts/test")),
        "{quick:?}"
    );
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l.trim() == "exec ./scripts/test"),
        "{ci}"
    );
    // And strict: a skip where the machine has what the test needs fails there.
    assert!(
        ci.lines()
            .any(|l| l.trim() == "export MEMMON_TEST_STRICT=1"),
        "{ci}"
    );
}

#[test]
fn every_outside_program_has_a_package_and_is_named_in_the_documents() {
    let list = read("tests/outside-programs.txt");
    let docs = crate::readme::doc_files();
    let rows: Vec<(usize, Vec<&str>)> = list
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| (i + 1, l.split_whitespace().collect()))
        .collect();
    assert!(rows.len() >= 3);
    for (line, f) in &rows {
        assert!(
            f.len() >= 4,
            "tests/outside-programs.txt line {line}: program, how found, package, used by: {f:?}"
        );
        assert!(
            docs.iter().any(|(_, d)| d.contains(&format!("`{}`", f[2]))),
            "tests/outside-programs.txt line {line}: no document (README.md, docs/guide/*.md) names the package `{}`",
            f[2]
        );
    }
    assert!(
        docs[0].1.contains("tests/outside-programs.txt"),
        "README.md does not name tests/outside-programs.txt"
    );
}

#[test]
fn the_listed_programs_are_found_where_the_list_says() {
    // On a machine where scripts/test ran, every program is there; this is what the server and
    // report tests call, so a broken pattern fails here with the program's name.
    let list = read("tests/outside-programs.txt");
    let names = list
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next());
    for name in names {
        let path = outside_program(name);
        assert!(path.is_file(), "{name}: {}", path.display());
    }
}

#[test]
fn cargo_run_knows_which_binary_is_memmon() {
    // With the tests' helper binary beside memmon, `cargo run -- demo` needs a default.
    let manifest = read("Cargo.toml");
    let bins = manifest.matches("[[bin]]").count();
    assert!(
        bins <= 1 || manifest.contains("default-run = \"memmon\""),
        "Cargo.toml has {bins} binaries and no default-run = \"memmon\": README's `cargo run --release -- demo` would fail"
    );
}

#[test]
fn cargo_test_at_the_root_tests_every_member_of_the_workspace() {
    // `./scripts/test` (CI) is `cargo test` at the root, which tests the default members only.
    let manifest = read("Cargo.toml");
    let list = |key: &str| -> Vec<String> {
        let line = manifest
            .lines()
            .find(|l| l.starts_with(&format!("{key} = [")))
            .unwrap_or_else(|| panic!("Cargo.toml has no {key}"));
        let mut v: Vec<String> = line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()]
            .split(',')
            .map(|m| m.trim().trim_matches('"').to_string())
            .filter(|m| !m.is_empty())
            .collect();
        v.sort();
        v
    };
    let members = list("members");
    assert!(
        members.contains(&"crates/memmon-mark".to_string()),
        "{members:?}"
    );
    assert_eq!(list("default-members"), members);
}

/// README's prerequisites name the Rust that Cargo.toml declares (`rust-version`).
#[test]
fn readmes_prerequisites_name_the_rust_version_cargo_declares() {
    let cargo = read("Cargo.toml");
    let version = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"'))
        .unwrap();
    let readme = read("README.md");
    let prerequisites = readme
        .split("\n## Prerequisites\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_else(|| panic!("README has no Prerequisites section"));
    assert!(
        prerequisites.contains(&format!("Rust {version} or later")),
        "{prerequisites}"
    );
}

/// `memmon completions SHELL` completes every subcommand and their flags, in each shell clap
/// knows.
#[test]
fn completions_cover_every_subcommand_and_its_flags_in_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = memmon().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in [
            "record",
            "summary",
            "bench",
            "export",
            "reset-peaks",
            "max-peak",
        ] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
    }
    memmon()
        .args(["completions", "tcsh"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("invalid value 'tcsh'"));
}

/// `memmon man` is memmon(1), naming each subcommand's page; `memmon man SUBCOMMAND` is that
/// page, with every flag; an unknown one is bad input naming those there are.
#[test]
fn man_pages_are_memmons_and_each_subcommands() {
    let page = |args: &[&str]| {
        let out = memmon().arg("man").args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let version = env!("CARGO_PKG_VERSION");
    let top = page(&[]);
    assert!(
        top.contains(&format!(".TH memmon 1  \"memmon {version}\"")),
        "{top}"
    );
    for sub in [
        "record",
        "summary",
        "compare",
        "bench",
        "export",
        "completions",
    ] {
        assert!(top.contains(&format!("memmon\\-{sub}(1)")), "{sub}: {top}");
    }
    let record = page(&["record"]);
    assert!(
        record.contains(&format!(".TH memmon-record 1  \"memmon {version}\"")),
        "{record}"
    );
    for flag in [
        "\\-\\-interval",
        "\\-\\-reset\\-peaks",
        "\\-\\-phase\\-peaks",
    ] {
        assert!(record.contains(flag), "{flag}: {record}");
    }
    memmon()
        .args(["man", "recrod"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "no subcommand 'recrod': give one of record, summary",
        ));
}

/// `memmon man --dir DIR` installs every page memmon(1) names, into a directory it makes, as man
/// finds them; a second time refuses (exit 2) unless --force, writing nothing.
#[test]
fn man_dir_installs_every_page_memmon_1_names() {
    let dir = tempdir();
    let man1 = dir.path().join("share/man/man1");
    memmon()
        .args(["man", "--dir"])
        .arg(&man1)
        .assert()
        .success()
        .stderr(predicates::str::contains("wrote 12 manual pages"));
    let top = std::fs::read_to_string(man1.join("memmon.1")).unwrap();
    for sub in [
        "record", "summary", "compare", "bench", "export", "report", "plot",
    ] {
        assert!(top.contains(&format!("memmon\\-{sub}(1)")), "{sub}: {top}");
        let page = std::fs::read_to_string(man1.join(format!("memmon-{sub}.1"))).unwrap();
        assert!(page.contains(&format!(".TH memmon-{sub} 1")), "{page}");
    }
    let before = std::fs::read(man1.join("memmon-record.1")).unwrap();
    memmon()
        .args(["man", "--dir"])
        .arg(&man1)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("already exists"));
    assert_eq!(std::fs::read(man1.join("memmon-record.1")).unwrap(), before);
    memmon()
        .args(["man", "--force", "--dir"])
        .arg(&man1)
        .assert()
        .success();
}

#[test]
fn a_strict_run_fails_a_test_that_skips_where_the_machine_has_what_it_needs() {
    let skips = |strict: bool, need: Need| {
        std::panic::catch_unwind(|| skip_as(strict, need, "a test's own reason")).is_ok()
    };
    // Not strict, a skip is a skip whatever the machine has.
    assert!(skips(false, Need::Root));
    // Strict, it stands only where the machine lacks the need.
    assert_eq!(skips(true, Need::Root), !is_root());
    assert_eq!(skips(true, Need::Perf), !Need::Perf.met());
    assert_eq!(
        skips(true, Need::RunAsNobody),
        !(is_root() && Path::new("/usr/bin/setpriv").exists())
    );
}
