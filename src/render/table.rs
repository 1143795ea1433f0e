//! A table of a summary (phases, runs, phases by label, a tree's largest processes) as data: its
//! title, the notes that say what its columns hold, its cells. `memmon summary` writes it as
//! text ([`Table::write_text`]) and `memmon report` as HTML ([`Table::write_html`]), so the two
//! show the same columns and the same words.

use crate::outside::markup as esc;
use crate::outside::shown;
use std::fmt::Write as _;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// `phases (peaks exact for all; peak: …; * exact)`.
    pub title: String,
    /// What the columns hold, a sentence each, before the table.
    pub notes: Vec<String>,
    pub head: Vec<String>,
    /// One cell per column of `head`.
    pub rows: Vec<Vec<String>>,
    /// What the table leaves out, after it (`and 12 more phases not listed …`).
    pub footer: Vec<String>,
}

/// How many terminal columns `s` takes: a CJK character or an emoji takes two, a combining
/// accent none. Every text table pads its cells by this, so a marker's label, a command name or
/// a file name in another script keeps the columns after it aligned.
pub fn text_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

impl Table {
    /// The table as the summary prints it: the title indented two spaces, notes and rows
    /// four, the columns right-aligned but the first.
    pub fn write_text(&self, o: &mut String) {
        let _ = writeln!(o, "  {}", self.title);
        for n in &self.notes {
            let _ = writeln!(o, "    {n}");
        }
        // A cell is one line: a label or a process name with a control character in it shows
        // it escaped (`render::outside`), and is measured so.
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| shown(c).into_owned()).collect())
            .collect();
        let widths: Vec<usize> = (0..self.head.len())
            .map(|i| {
                rows.iter()
                    .map(|r| text_width(&r[i]))
                    .chain([text_width(&self.head[i])])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut l = String::from("   ");
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i] - text_width(c);
                if i == 0 {
                    let _ = write!(l, " {c}{}", " ".repeat(pad));
                } else {
                    let _ = write!(l, "  {}{c}", " ".repeat(pad));
                }
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(o, "{}", line(&self.head));
        for r in &rows {
            let _ = writeln!(o, "{}", line(r));
        }
        for f in &self.footer {
            let _ = writeln!(o, "    {f}");
        }
    }

    /// The table as the report shows it: a heading, the notes, a `<table>` whose cells but the
    /// first column's are right-aligned (class `num`), the footer. Every text is escaped.
    pub fn write_html(&self, o: &mut String) {
        let _ = writeln!(o, "<h3>{}</h3>", esc(&self.title));
        for n in &self.notes {
            let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(n));
        }
        o.push_str("<div class=\"scroll\"><table class=\"spans\">\n<thead><tr>");
        for h in &self.head {
            let _ = write!(o, "<th>{}</th>", esc(h));
        }
        o.push_str("</tr></thead>\n<tbody>\n");
        for r in &self.rows {
            o.push_str("<tr>");
            for (i, c) in r.iter().enumerate() {
                let class = if i == 0 { "" } else { " class=\"num\"" };
                let _ = write!(o, "<td{class}>{}</td>", esc(c));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody></table></div>\n");
        for f in &self.footer {
            let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table {
            title: "phases (* exact)".into(),
            notes: vec!["tree: bounds".into()],
            head: vec!["label".into(), "peak".into()],
            rows: vec![
                vec!["prove".into(), "1.00 GiB *".into()],
                vec!["<idle>".into(), "12.0 MiB".into()],
            ],
            footer: vec!["and 3 more phases not listed".into()],
        }
    }

    #[test]
    fn text_aligns_columns_under_the_title() {
        let mut o = String::new();
        table().write_text(&mut o);
        assert_eq!(
            o,
            "  phases (* exact)\n    tree: bounds\n    label         peak\n    prove   1.00 GiB *\n    <idle>    12.0 MiB\n    and 3 more phases not listed\n"
        );
    }

    #[test]
    fn a_label_in_a_wide_script_keeps_the_columns_after_it_aligned() {
        let mut t = table();
        // Two CJK characters take four columns, an emoji two, a combining accent none.
        t.rows[0][0] = "証明".into();
        t.rows.push(vec!["🔥 hot".into(), "3.00 MiB".into()]);
        t.rows.push(vec!["cafe\u{301}".into(), "1.00 MiB".into()]);
        let mut o = String::new();
        t.write_text(&mut o);
        let rows: Vec<&str> = o.lines().skip(2).take(5).collect();
        assert_eq!(
            rows,
            [
                "    label         peak",
                "    証明    1.00 GiB *",
                "    <idle>    12.0 MiB",
                "    🔥 hot    3.00 MiB",
                "    cafe\u{301}      1.00 MiB",
            ]
        );
        // Every row ends in the same terminal column.
        let ends: Vec<usize> = rows.iter().map(|r| text_width(r)).collect();
        assert!(ends.iter().all(|&e| e == ends[0]), "{ends:?}");
    }

    #[test]
    fn html_has_the_same_cells_escaped() {
        let mut o = String::new();
        table().write_html(&mut o);
        assert!(o.contains("<h3>phases (* exact)</h3>"));
        assert!(o.contains("<th>label</th><th>peak</th>"));
        assert!(o.contains("<td>&lt;idle&gt;</td><td class=\"num\">12.0 MiB</td>"));
        assert!(o.contains("<p class=\"note\">and 3 more phases not listed</p>"));
        assert!(!o.contains("<idle>"));
    }
}
