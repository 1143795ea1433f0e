//! Text that came from outside memmon (a name a recorded program chose: a memfd's, a symbol's, a
//! process's; a mapping's path, a command line, a label, a cgroup's path) as people are shown it:
//! one rule, here, for every human output. A control character never reaches a terminal, a
//! folded file or an SVG raw: it is written as an escape (`\x1b`, `\u{85}`), as are the
//! characters that reorder a line's display (bidi overrides and isolates).
//!
//! Three entries: [`shown`] for a name (nothing in it may end a line: a name with `\n` stays one
//! line) and [`guard`] for a whole text memmon wrote (its own line ends and tabs kept, any other
//! control character escaped), the last step before a terminal, wherever a name was missed; and
//! [`markup`] for text in an HTML page or an SVG.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A name from outside, fit for one line of human output: every control character (line ends
/// and tabs too) and every display-reordering character escaped.
pub fn shown(text: &str) -> Cow<'_, str> {
    escape(text, |_| false)
}

/// A text memmon made, fit for a terminal or a file people read: its line ends and tabs kept,
/// every other control character (ESC, BEL, CR, backspace...) and every display-reordering
/// character escaped.
pub fn guard(text: &str) -> Cow<'_, str> {
    escape(text, |c| c == '\n' || c == '\t')
}

/// Text for an HTML page or an SVG: guarded (`guard`), then `&`, `<`, `>` and quotes as entities.
pub fn markup(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    // Control characters as escapes (`guard`): a name a program chose never puts one XML
    // forbids into the page or its SVG.
    for c in guard(text).chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}

/// Whether `c` is one that must not reach a reader raw: a control character (C0, DEL, C1), a
/// bidi embedding, override or isolate, or a line or paragraph separator.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
                | '\u{2028}' | '\u{2029}'
        )
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let must = |c: char| is_unsafe(c) && !keep(c);
    if !text.chars().any(must) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !must(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memfd name a hostile program chose (issue 44): title, clear screen, colour, carriage
    /// return, cursor up, erase line, a forged new line.
    const HOSTILE: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{1b}[31mRED\r\u{1b}[1A\u{1b}[KFAKE\nLINE";

    #[test]
    fn a_hostile_name_is_one_line_of_escapes() {
        let s = shown(HOSTILE);
        assert_eq!(
            s,
            "\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mRED\\x0d\\x1b[1A\\x1b[KFAKE\\x0aLINE"
        );
        assert!(!s.chars().any(char::is_control));
    }

    #[test]
    fn a_guarded_text_keeps_its_own_lines_and_tabs_and_nothing_else() {
        let text = format!("peak\t1 MiB\nname {HOSTILE}\n");
        let g = guard(&text);
        assert_eq!(g.lines().count(), 3, "{g}");
        assert!(g.contains("peak\t1 MiB\n"));
        assert!(!g.contains('\u{1b}') && !g.contains('\r') && !g.contains('\u{7}'));
    }

    #[test]
    fn bidi_overrides_and_c1_controls_are_escaped_and_plain_text_is_borrowed() {
        assert_eq!(
            shown("a\u{202e}b\u{85}c\u{2066}"),
            "a\\u{202e}b\\u{85}c\\u{2066}"
        );
        assert_eq!(shown("\u{7f}"), "\\x7f");
        assert!(matches!(shown("héllo wörld 名前"), Cow::Borrowed(_)));
        assert!(matches!(guard("a\tb\n"), Cow::Borrowed(_)));
    }
}
