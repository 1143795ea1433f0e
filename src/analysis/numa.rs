//! Memory per NUMA node over a span: the largest of each node's bytes on the rows of the NUMA
//! table (the recorded cgroup's `memory.numa_stat`, format/numa.rs) that fall in it. Pure: the
//! table's rows are handed in; `render::span::numa_cell` says them.

use serde::Serialize;

/// One node's most memory in a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodePeak {
    pub node: u32,
    pub peak_bytes: u64,
}

/// The largest bytes of each of `nodes` over the `rows` (`unix_ms`, bytes per node in `nodes`'
/// order) from `from_ms` to `to_ms`, both included; empty when no row falls there.
pub fn peaks(nodes: &[u32], rows: &[(u64, Vec<u64>)], from_ms: u64, to_ms: u64) -> Vec<NodePeak> {
    let mut peak: Option<Vec<u64>> = None;
    for (t, bytes) in rows {
        if *t < from_ms || *t > to_ms {
            continue;
        }
        let p = peak.get_or_insert_with(|| vec![0; nodes.len()]);
        for (m, b) in p.iter_mut().zip(bytes) {
            *m = (*m).max(*b);
        }
    }
    peak.map(|p| {
        nodes
            .iter()
            .zip(p)
            .map(|(&node, peak_bytes)| NodePeak { node, peak_bytes })
            .collect()
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::span::numa_cell;

    #[test]
    fn each_node_takes_its_largest_over_the_rows_of_the_span() {
        let rows = vec![
            (1000, vec![10, 100]),
            (1100, vec![30, 50]),
            (1200, vec![20, 400]),
        ];
        assert_eq!(
            peaks(&[0, 1], &rows, 1000, 1100),
            [
                NodePeak {
                    node: 0,
                    peak_bytes: 30
                },
                NodePeak {
                    node: 1,
                    peak_bytes: 100
                }
            ]
        );
        assert_eq!(peaks(&[0, 1], &rows, 1150, 1300)[1].peak_bytes, 400);
        assert!(peaks(&[0, 1], &rows, 2000, 3000).is_empty());
        assert_eq!(
            numa_cell(&peaks(&[0, 1], &rows, 1200, 1200)),
            "node 0 20 B, node 1 400 B"
        );
        assert_eq!(numa_cell(&[]), "-");
    }
}
