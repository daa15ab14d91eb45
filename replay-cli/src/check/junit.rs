//! JUnit XML for `check --junit`: one test suite (the budget), one test case per rule,
//! a `<failure>` for each broken rule, so CI dashboards list every rule as a test.

use std::fmt::Write as _;

use super::CheckReport;

/// Escapes text for XML character data and attribute values. Characters XML 1.0 cannot
/// hold at all (most control characters) become U+FFFD.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' => o.push_str("&#9;"),
            '\n' => o.push_str("&#10;"),
            '\r' => o.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// The report as a JUnit XML document.
pub fn render(r: &CheckReport) -> String {
    let mut o = String::new();
    let _ = writeln!(o, r#"<?xml version="1.0" encoding="UTF-8"?>"#);
    let _ = writeln!(o, r#"<testsuites name="memreplay budget" tests="{}" failures="{}">"#, r.rules, r.failed);
    let _ = writeln!(
        o,
        r#"  <testsuite name="{}" tests="{}" failures="{}" errors="0" skipped="0">"#,
        escape(&format!("{} ({})", r.budget, r.path)),
        r.rules,
        r.failed
    );
    let _ = writeln!(o, "    <properties>");
    let _ = writeln!(o, r#"      <property name="log" value="{}"/>"#, escape(&r.path));
    let _ = writeln!(o, r#"      <property name="budget" value="{}"/>"#, escape(&r.budget));
    if let Some(b) = &r.baseline {
        let _ = writeln!(o, r#"      <property name="baseline" value="{}"/>"#, escape(b));
    }
    let _ = writeln!(o, "    </properties>");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_control_characters() {
        assert_eq!(escape(r#"a<b>&"c"'d'"#), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
        assert_eq!(escape("line\nnext\ttab"), "line&#10;next&#9;tab");
        assert_eq!(escape("bell\u{7}"), "bell\u{fffd}");
        assert_eq!(escape("Texture:rock.dds ✓"), "Texture:rock.dds ✓");
    }
}
