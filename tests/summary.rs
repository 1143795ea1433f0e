//! Tests of `memmon summary` over recordings.
