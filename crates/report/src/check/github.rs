//! GitHub Actions workflow commands for `check --github`: an `::error` annotation for a
//! damaged log or baseline (unless allowed) and for each broken rule, pointing to the
//! rule's line of the budget file, and a `::notice` with the totals.

use std::fmt::Write as _;

use super::CheckReport;

/// Escapes the message of a workflow command (`%`, CR, LF).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property value of a workflow command (also `:` and `,`).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The annotations, one per line.
pub fn annotations(r: &CheckReport) -> String {
    let mut o = String::new();
    for side in r.integrity.damaged().filter(|s| !s.passed) {
        let title = format!("memory budget: integrity of {}", side.which);
        let _ = writeln!(o, "::error title={}::{}", escape_property(&title), escape_data(&side.message));
    }
    for t in r.results.iter().filter(|t| !t.passed) {
        let _ = writeln!(
            o,
            "::error file={},line={},title={}::{}",
            escape_property(&r.budget),
            t.line,
            escape_property(&format!("memory budget: {}", t.rule)),
            escape_data(&t.message)
        );
    }
    let _ = writeln!(
        o,
        "::notice title={}::{} of {} rules hold ({} broken) for {}",
        escape_property("memory budget"),
        r.rules - r.failed,
        r.rules,
        r.failed,
        escape_data(&r.path)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(escape_data("50% of\r\nit"), "50%25 of%0D%0Ait");
        assert_eq!(escape_property("a: b, c"), "a%3A b%2C c");
    }
}
