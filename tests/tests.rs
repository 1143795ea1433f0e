//! Integration tests: the real memmon binary against real processes whose memory is known.
//! One test binary (one link) with a module per subcommand.

mod util;

mod bench;
mod compare;
mod import;
mod layout;
mod marks;
mod plot;
mod record;
mod report;
mod summary;
