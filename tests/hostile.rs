//! Hostile programs. Names a recorded program chooses reach no output raw (`outside.rs`): a memfd, a
//! function's symbol and a process name made of escape sequences (tests/hostile-names.c: a
//! terminal's title set, the screen cleared, a carriage return, the cursor moved up, a line
//! erased, a forged new line) print as escapes in summary, compare, bench, the folded stacks and
//! the report, whose flame graph stays valid XML. A mapped file whose unwind section claims
//! 1.5 GiB (a sparse file) costs the ledger nothing, and the summary says its stacks end there.

use crate::util::*;
use std::path::{Path, PathBuf};

/// tests/hostile-names.c built into `dir`.
fn build_hostile(dir: &Path) -> PathBuf {
    // -w: the assembler warns of the control bytes in the symbol's quoted name.
    build_c_program("hostile-names", dir, &["-w"])
}

/// Fails when `text` (what `what` printed) holds a control character other than a line end or
/// a tab, or a line that begins with the forged text.
fn assert_no_raw_controls(what: &str, text: &str) {
    if let Some(c) = text
        .chars()
        .find(|&c| c.is_control() && c != '\n' && c != '\t')
    {
        panic!("{what} printed the control character {c:?} raw:\n{text}");
    }
    assert!(
        !text.lines().any(|l| l.starts_with("LINE")),
        "{what} printed the forged line:\n{text}"
    );
}

fn run(cmd: &mut std::process::Command) -> (String, String) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_programs_hostile_names_print_as_escapes_in_every_output() {
    let dir = tempdir();
    let exe = build_hostile(dir.path());
    let rec = dir.path().join("r.csv");
    let socket = dir.path().join("rec.sock");
    let go = dir.path().join("go");
    // The program maps once the recording has its idle floor: marker `idle`, answered after its
    // row and the anatomy of the phase it ends are read, then the go file.
    let recorder = std::process::Command::new(memmon_path())
        .args(["record", "-i", "20ms", "--anatomy", "--socket"])
        .arg(&socket)
        .arg("-o")
        .arg(&rec)
        .arg("--")
        .arg(&exe)
        .arg(&go)
        .arg("300")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for(60.0, || socket.exists()),
        "the recorder's socket never came"
    );
    memmon()
        .args(["mark", "--socket"])
        .arg(&socket)
        .arg("idle")
        .assert()
        .success();
    std::fs::write(&go, "").unwrap();
    let out = recorder.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_no_raw_controls("record's messages", &String::from_utf8_lossy(&out.stderr));

    let (text, err) = run(std::process::Command::new(memmon_path())
        .arg("summary")
        .arg(&rec));
    assert_no_raw_controls("summary", &text);
    assert_no_raw_controls("summary's messages", &err);
    assert!(
        text.contains(r"memfd '\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\x0d\x1b[1A\x1b[KFAKE"),
        "{text}"
    );
    let ledger = text.contains("by stack");
    if ledger {
        assert!(
            text.contains(r"evil\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\x0d\x1b[1A\x1b[KFAKE <- main"),
            "{text}"
        );
        let (folded, _) = run(std::process::Command::new(memmon_path())
            .args(["summary", "--folded", "-"])
            .arg(&rec));
        assert_no_raw_controls("the folded stacks", &folded);
        assert!(folded.contains(r"main;evil\x1b]0:PWNED\x07"), "{folded}");
    } else {
        println!("the ledger is off here: the symbol's name is not shown, the memfd's is");
    }

    // Against a baseline without them, the hostile mappings are what grew.
    let base = dir.path().join("base.csv");
    record_workload(
        &base,
        &["-q", "-i", "20ms", "--anatomy"],
        &["alloc:8MiB", "hold:200ms"],
    )
    .assert()
    .success();
    let (text, err) = run(std::process::Command::new(memmon_path())
        .arg("compare")
        .arg(&base)
        .arg(&rec));
    assert_no_raw_controls("compare", &text);
    assert_no_raw_controls("compare's messages", &err);
    assert!(text.contains(r"memfd '\x1b]0;PWNED\x07"), "{text}");

    let html = dir.path().join("r.html");
    run(std::process::Command::new(memmon_path())
        .args(["report", "-o"])
        .arg(&html)
        .arg(&rec));
    let html = std::fs::read_to_string(&html).unwrap();
    assert_no_raw_controls("report", &html);
    if ledger {
        let svg = report_flame_graph(&html);
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        };
        let doc = roxmltree::Document::parse_with_options(&svg, opts)
            .expect("the flame graph is valid XML");
        assert!(
            doc.descendants()
                .any(|n| n.text().is_some_and(|t| t.contains(r"evil\x1b]0:PWNED"))),
            "the hostile frame is not drawn"
        );
    }

    // Against the program as a daemon: its process name (escape sequences too) in the table.
    let mut daemon = std::process::Command::new(&exe)
        .arg(&go)
        .arg("60000")
        .spawn()
        .unwrap();
    wait_for_rss(daemon.id(), 40 << 20);
    let (table, err) = run(std::process::Command::new(memmon_path())
        .args(["bench", "-n", "1", "--anatomy", "--pid"])
        .arg(daemon.id().to_string())
        .args(["--", "sleep", "0.05"]));
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert_no_raw_controls("bench", &table);
    assert_no_raw_controls("bench's messages", &err);
    assert!(table.contains(r"(\x1b[2J\x1b]0;X\x07\x0a)"), "{table}");
}

/// Makes the section `name` of the ELF file at `path` claim `size` bytes at the file's end, and
/// grows the file to hold them as a hole (a sparse file: no disk, no page cache). The program
/// still runs: the loader reads segments, not sections.
fn claim_sparse_section(path: &Path, name: &str, size: u64) {
    let mut elf = std::fs::read(path).unwrap();
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(&elf, 0x28),
        u16_at(&elf, 0x3a),
        u16_at(&elf, 0x3c),
        u16_at(&elf, 0x3e),
    );
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(&elf, header(shstrndx) + 0x18);
    let end = elf.len() as u64;
    let i = (0..shnum)
        .find(|&i| {
            let at = strtab + u32_at(&elf, header(i));
            elf[at..].starts_with(name.as_bytes()) && elf[at + name.len()] == 0
        })
        .unwrap_or_else(|| panic!("no section {name}"));
    elf[header(i) + 0x18..header(i) + 0x20].copy_from_slice(&end.to_le_bytes());
    elf[header(i) + 0x20..header(i) + 0x28].copy_from_slice(&size.to_le_bytes());
    std::fs::write(path, &elf).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(end + size).unwrap();
}

#[test]
fn an_unwind_section_claiming_gigabytes_is_not_read_and_the_summary_says_so() {
    let dir = tempdir();
    let exe = build_hostile(dir.path());
    claim_sparse_section(&exe, ".eh_frame", 3 << 29);
    let rec = dir.path().join("r.csv");
    let (code, err, rss) = memmon_under_time(&[
        "record".as_ref(),
        "-q".as_ref(),
        "-i".as_ref(),
        "20ms".as_ref(),
        "--anatomy".as_ref(),
        "-o".as_ref(),
        rec.as_os_str(),
        "--".as_ref(),
        exe.as_os_str(),
        dir.path().as_os_str(),
        "300".as_ref(),
    ]);
    assert_eq!(code, 0, "{err}");
    // memmon itself, not the 1.5 GiB the header claims (before: 3.0 GiB and 27.7 s).
    assert!(rss < 100 << 20, "memmon's peak RSS {rss} bytes");
    let text = summary_text(&rec);
    if text.contains("  ledger ") {
        assert!(
            text.contains("the unwind sections of 1 file were not read (each over 64.00 MiB"),
            "{text}"
        );
        assert!(text.contains("hostile-names"), "{text}");
    }
    // The end's anatomy is there all the same.
    assert!(text.contains("what grew"), "{text}");
}
