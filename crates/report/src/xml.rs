//! XML escaping for the documents the analyzer writes (JUnit, SVG).

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
