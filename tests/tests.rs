//! Integration tests: the real memmon binary against real processes whose memory is known.
//! One test binary (one link) with a module per subcommand.

mod util;

mod anatomy;
mod anatomy_spans;
mod bad_input;
mod bench;
mod bounds;
mod cgroup;
mod compare;
mod exit_codes;
mod export;
mod gpu;
mod health;
mod hostile;
mod hosts;
mod import;
mod layout;
mod ledger;
mod mark_crate;
mod marks;
mod output;
mod peak;
mod plot;
mod pss;
mod readme;
mod record;
mod report;
mod servers;
mod setup;
mod summary;
mod targets;
mod timeline;
