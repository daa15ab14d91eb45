//! What each command that takes the shared options ([`ReportOptions`]) does with them: the
//! ones it reads, and why it takes none of the others. The `run_*` functions check the
//! options given against these ([`Takes::check`]) before replaying, so an option is
//! honoured or refused, never accepted and ignored.
//!
//! [`ReportOptions`]: crate::ReportOptions

use crate::select::SharedOption::{self, At, Depth, Domain, Json, Limit, MinBytes, Sort, Thread};
use crate::select::Takes;

const ALL: &[SharedOption] = &SharedOption::ALL;

pub const SUMMARIZE: Takes = Takes { command: "summarize", reads: ALL, why_not: &[] };

pub const TREE: Takes = Takes {
    command: "tree",
    reads: &[Domain, Thread, At, Json, Depth, MinBytes, Sort],
    why_not: &[(Limit, "it shows every context; cut the tree with --depth or --min-bytes")],
};

pub const LEAKS: Takes = Takes {
    command: "leaks",
    reads: &[Domain, Thread, Json, Depth, MinBytes, Sort, Limit],
    why_not: &[(At, "leaks are the allocations live at the end of the log")],
};

pub const EFFICIENCY: Takes = Takes { command: "efficiency", reads: ALL, why_not: &[] };

pub const INSTANCES: Takes = Takes { command: "instances", reads: ALL, why_not: &[] };

/// `report`, the HTML page (`--json`: its data).
pub const REPORT: Takes = Takes { command: "report", reads: ALL, why_not: &[] };

pub const TIMELINE: Takes = Takes {
    command: "timeline",
    reads: &[Domain],
    why_not: &[
        (Thread, "it covers every thread"),
        (At, "it covers the whole recording"),
        (Json, "it draws SVG (or PNG); use `export --format json` for the series"),
        (Depth, "it draws the domains, or with --by context the top-level contexts of one"),
        (MinBytes, "it draws memory over time, not rows to cut"),
        (Sort, "it draws memory over time, not rows to order"),
        (Limit, "it draws memory over time, not rows to cut"),
    ],
};

const FORMAT_PICKS: &str = "--format picks what it writes (`--format json` for JSON)";

pub const EXPORT_JSON: Takes = Takes {
    command: "export --format json",
    reads: &[Domain, Thread, At, Depth, MinBytes, Sort],
    why_not: &[
        (Json, "it writes JSON already"),
        (Limit, "it writes the whole tree; cut it with --depth or --min-bytes"),
    ],
};

pub const EXPORT_CSV: Takes = Takes {
    command: "export --format csv",
    reads: &[Domain, Thread, At, Depth, MinBytes],
    why_not: &[
        (Json, FORMAT_PICKS),
        (Sort, "its rows are in tree order, each context after its parent"),
        (Limit, "it writes a row per context; cut them with --depth or --min-bytes"),
    ],
};

pub const EXPORT_CHROME_TRACE: Takes = Takes {
    command: "export --format chrome-trace",
    reads: &[Domain],
    why_not: &[
        (Thread, "the trace covers every thread"),
        (At, "the trace covers the whole recording"),
        (Json, FORMAT_PICKS),
        (Depth, "its counters are the domains and their top-level contexts"),
        (MinBytes, "it writes memory over time, not rows to cut"),
        (Sort, "it writes memory over time, not rows to order"),
        (Limit, "it writes memory over time, not rows to cut"),
    ],
};

pub const EXPORT_PPROF: Takes = Takes {
    command: "export --format pprof",
    reads: &[Domain],
    why_not: &[
        (Thread, "the profile covers every thread"),
        (At, "the profile covers the whole recording"),
        (Json, FORMAT_PICKS),
        (Depth, "the profile holds allocation callstacks, not contexts"),
        (MinBytes, "the profile holds every allocation site; pprof's views cut it"),
        (Sort, "the profile holds every allocation site; pprof's views order it"),
        (Limit, "the profile holds every allocation site; pprof's views cut it"),
    ],
};

/// Every declaration, for the tests.
#[cfg(test)]
const EVERY: [Takes; 11] = [
    SUMMARIZE,
    TREE,
    LEAKS,
    EFFICIENCY,
    INSTANCES,
    REPORT,
    TIMELINE,
    EXPORT_JSON,
    EXPORT_CSV,
    EXPORT_CHROME_TRACE,
    EXPORT_PPROF,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_is_read_or_refused_with_a_reason() {
        for t in EVERY {
            for o in SharedOption::ALL {
                let read = t.reads.contains(&o);
                let refused = t.why_not.iter().filter(|(w, _)| *w == o).count();
                assert!(read != (refused == 1), "{}: {} read {read}, refused {refused} times", t.command, o.flag());
            }
        }
    }
}
