//! The report's stacked bar of the highest anatomy (the one taken at the highest RSS, which may
//! lie below the peak): each group of mappings a segment, as wide as its share, in resident
//! bytes where every process's smaps was read, else in virtual size (the legend says which). Inline SVG, no script: the page fetches nothing.

use crate::model::anatomy::{Anatomy, Group, GroupKind};
use crate::outside::markup as esc;
use crate::render::summary::group_words;
use crate::units::fmt_bytes;
use std::fmt::Write as _;

/// Segments drawn one by one; smaller groups share one more, `N other groups`.
const SEGMENTS: usize = 11;

/// Segment colours, in the order of the segments (largest first); the last one is the rest's.
const COLOURS: [&str; SEGMENTS + 1] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#86bcb6", "#d37295", "#bab0ac",
];

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 32.0;

/// One segment: what it is, its bytes.
struct Segment {
    words: String,
    bytes: u64,
}

/// The segments of `a`: its groups by size, largest first (no-access reservations left out:
/// address space, never memory), at most `SEGMENTS`, the rest summed in one.
fn segments(a: &Anatomy, resident: bool) -> Vec<Segment> {
    let bytes = |g: &Group| {
        if resident {
            g.resident.map_or(0, |r| r.resident_bytes())
        } else {
            g.virtual_bytes
        }
    };
    let mut groups: Vec<(&Group, u64)> = a
        .groups
        .iter()
        .filter(|g| g.key.kind != GroupKind::Reserved)
        .map(|g| (g, bytes(g)))
        .filter(|(_, b)| *b > 0)
        .collect();
    groups.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.key.cmp(&y.0.key)));
    let mut out: Vec<Segment> = groups
        .iter()
        .take(SEGMENTS)
        .map(|(g, b)| Segment {
            words: group_words(&g.key, Some(g)),
            bytes: *b,
        })
        .collect();
    let rest = &groups[groups.len().min(SEGMENTS)..];
    if !rest.is_empty() {
        out.push(Segment {
            words: format!("{} other groups", rest.len()),
            bytes: rest.iter().map(|(_, b)| b).sum(),
        });
    }
    out
}

/// The bar of the anatomy `a` taken at the highest RSS, with its legend, as HTML; `None` when
/// no group holds a byte.
pub fn bar_html(a: &Anatomy) -> Option<String> {
    let resident = a.resident_known();
    let segs = segments(a, resident);
    let total: u64 = segs.iter().map(|s| s.bytes).sum();
    if total == 0 {
        return None;
    }
    let measure = if resident {
        "resident bytes (smaps: Rss and hugetlbfs pages)"
    } else {
        "virtual size (maps: address space, not memory used; resident sizes need every process's smaps)"
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<h3>the highest anatomy: {} in {}</h3>\n<p class=\"note\">Taken at +{:.3} s (tree RSS {}); segments in {measure}; no-access reservations left out.</p>",
        fmt_bytes(total),
        crate::units::count(segs.len(), "segment"),
        a.elapsed_s,
        fmt_bytes(a.rss_bytes)
    );
    let _ = writeln!(
        o,
        "<svg class=\"anatomy-bar\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"the highest anatomy\">"
    );
    let mut x = 0.0;
    for (i, s) in segs.iter().enumerate() {
        let w = WIDTH * s.bytes as f64 / total as f64;
        let _ = writeln!(
            o,
            "<rect x=\"{x:.2}\" y=\"0\" width=\"{w:.2}\" height=\"{HEIGHT}\" fill=\"{}\"><title>{}: {}</title></rect>",
            COLOURS[i.min(SEGMENTS)],
            esc(&s.words),
            fmt_bytes(s.bytes)
        );
        x += w;
    }
    o.push_str("</svg>\n<ul class=\"anatomy-legend\">\n");
    for (i, s) in segs.iter().enumerate() {
        let _ = writeln!(
            o,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}: {} ({:.1}%)</li>",
            COLOURS[i.min(SEGMENTS)],
            esc(&s.words),
            fmt_bytes(s.bytes),
            100.0 * s.bytes as f64 / total as f64
        );
    }
    o.push_str("</ul>\n");
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::anatomy::{GroupKey, Taken, Trigger, Usage};

    const MIB: u64 = 1 << 20;

    fn group(kind: GroupKind, name: &str, mappings: u64, each: u64, rss: Option<u64>) -> Group {
        Group {
            key: GroupKey {
                kind,
                name: name.into(),
                size_class: None,
                rest: false,
            },
            processes: 1,
            mappings,
            virtual_bytes: mappings * each,
            min_mapping_bytes: each,
            max_mapping_bytes: each,
            resident: rss.map(|r| Usage {
                rss_bytes: r,
                ..Usage::default()
            }),
        }
    }

    fn anatomy(groups: Vec<Group>) -> Anatomy {
        let when = Taken {
            trigger: Trigger::NewHigh,
            unix_ms: 1,
            elapsed_s: 2.5,
            tree_rss: 300 * MIB,
        };
        Anatomy::new(when, (1, 1), 10, Vec::new(), groups)
    }

    #[test]
    fn segments_are_as_wide_as_their_share_largest_first_and_reservations_are_left_out() {
        let a = anatomy(vec![
            group(GroupKind::Memfd, "params", 1, 100 * MIB, Some(100 * MIB)),
            group(GroupKind::Anon, "", 10, 30 * MIB, Some(300 * MIB)),
            group(GroupKind::Reserved, "", 1, 1 << 40, Some(0)),
        ]);
        let html = bar_html(&a).unwrap();
        assert!(html.contains("400.0 MiB in 2 segments"), "{html}");
        assert!(html.contains("resident bytes"));
        // 300 of 400 MiB: 600 of 800 px, first; the memfd after it.
        let anon = html.find("width=\"600.00\"").unwrap();
        let memfd = html.find("x=\"600.00\" y=\"0\" width=\"200.00\"").unwrap();
        assert!(anon < memfd);
        assert!(html.contains("10 anonymous mappings of 30.00 MiB: 300.0 MiB"));
        assert!(html.contains("memfd &#39;params&#39; (1 mapping of 100.0 MiB): 100.0 MiB (25.0%)"));
        assert!(!html.contains("no-access reservation of"), "{html}");
    }

    #[test]
    fn without_every_smaps_the_bar_is_in_virtual_size_and_small_groups_are_summed() {
        let mut groups: Vec<Group> = (0..14)
            .map(|i| group(GroupKind::File, &format!("/f{i}"), 1, (i + 1) * MIB, None))
            .collect();
        groups.push(group(GroupKind::Heap, "", 1, 50 * MIB, Some(50 * MIB)));
        let html = bar_html(&anatomy(groups)).unwrap();
        assert!(html.contains("virtual size (maps"), "{html}");
        assert_eq!(html.matches("<rect").count(), SEGMENTS + 1);
        // The 4 smallest files (1 to 4 MiB) share the last segment.
        assert!(html.contains("4 other groups: 10.00 MiB"), "{html}");
        assert!(bar_html(&anatomy(Vec::new())).is_none());
    }
}
