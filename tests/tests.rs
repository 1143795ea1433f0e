//! Integration tests: the real memmon binary against real processes whose memory is known.
//! One test binary (one link) with a module per subcommand.

mod util;

mod record;
mod summary;
