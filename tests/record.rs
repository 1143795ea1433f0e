//! Tests of `memmon record` against real processes.
