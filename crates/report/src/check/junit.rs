//! JUnit XML for `check --junit`: one test suite (the budget), one test case per rule,
//! a `<failure>` for each broken rule, so CI dashboards list every rule as a test.

use std::fmt::Write as _;

use super::CheckReport;
use crate::xml::escape;

/// The report as a JUnit XML document.
///
/// A damaged log (or baseline) adds a test case of its own, `integrity of the log`,
/// failed unless the damage is allowed.
pub fn render(r: &CheckReport) -> String {
    let mut o = String::new();
    let damaged: Vec<_> = r.integrity.damaged().collect();
    let tests = r.rules + damaged.len() as u64;
    let failures = r.failed + damaged.iter().filter(|s| !s.passed).count() as u64;
    let _ = writeln!(o, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(o, r#"<testsuites name="memreplay budget" tests="{tests}" failures="{failures}">"#);
    let _ = writeln!(
        o,
        r#"  <testsuite name="{}" tests="{}" failures="{}" errors="0" skipped="0">"#,
        escape(&format!("{} ({})", r.budget, r.path)),
        tests,
        failures
    );
    let _ = writeln!(o, "    <properties>");
    let _ = writeln!(o, r#"      <property name="log" value="{}"/>"#, escape(&r.path));
    let _ = writeln!(o, r#"      <property name="budget" value="{}"/>"#, escape(&r.budget));
    if let Some(b) = &r.baseline {
        let _ = writeln!(o, r#"      <property name="baseline" value="{}"/>"#, escape(b));
    }
    let _ = writeln!(o, "    </properties>");
    for side in damaged {
        let open = format!(
            r#"    <testcase classname="memreplay.integrity" name="{}" file="{}""#,
            escape(&format!("integrity of {}", side.which)),
            escape(&r.budget)
        );
        if side.passed {
            let _ = writeln!(o, "{open}/>");
        } else {
            let _ = writeln!(o, "{open}>");
            let m = escape(&side.message);
            let body = match &r.integrity.unmeasured {
                Some(why) => escape(&format!("{}\nthe rules could not be measured: {why}", side.message)),
                None => m.clone(),
            };
            let _ = writeln!(o, r#"      <failure message="{m}" type="damaged">{body}</failure>"#);
            let _ = writeln!(o, "    </testcase>");
        }
    }
    for t in &r.results {
        let open = format!(
            r#"    <testcase classname="{}" name="{}" file="{}" line="{}""#,
            escape(&format!("memreplay.budget.{}", t.table)),
            escape(&t.rule),
            escape(&r.budget),
            t.line
        );
        if t.passed {
            let _ = writeln!(o, "{open}/>");
        } else {
            let _ = writeln!(o, "{open}>");
            let _ = writeln!(
                o,
                r#"      <failure message="{}" type="budget">{}</failure>"#,
                escape(&t.message),
                escape(&t.message)
            );
            let _ = writeln!(o, "    </testcase>");
        }
    }
    let _ = writeln!(o, "  </testsuite>");
    let _ = writeln!(o, "</testsuites>");
    o
}
