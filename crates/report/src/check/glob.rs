//! Context-path globs for budget rules: `Level:*/Textures`, `**/Texture:*.dds`.
//!
//! A pattern is `/`-separated segments, matched against a context path level by level
//! from the outermost context:
//!
//! - `**` matches any number of levels, none included (`**` alone matches the whole
//!   domain, the root of the tree);
//! - a segment with a `:` matches a level's `Type:name` (names may hold `:` themselves);
//!   a segment without one matches its type alone, whatever its name (`Textures` is
//!   `Textures:*`);
//! - within a segment, `*` matches any run of characters and `?` one character.
//!
//! `[`, `]`, `{` and `}` are reserved (no character classes or alternatives), `**` must
//! be a whole segment, and segments cannot be empty.

/// A parsed context-path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextGlob {
    text: String,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of levels.
    AnyDepth,
    /// One level: `pattern` is matched against `Type:name` if `whole`, else the type.
    Level { pattern: Vec<char>, whole: bool },
}

impl ContextGlob {
    /// Parses a pattern; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<ContextGlob, String> {
        if text.is_empty() {
            return Err("an empty context pattern (use `**` for every context)".into());
        }
        if let Some(c) = text.chars().find(|c| matches!(c, '[' | ']' | '{' | '}')) {
            return Err(format!("`{text}`: `{c}` is reserved in context patterns (only `*`, `?` and `**`)"));
        }
        let mut segments = Vec::new();
        for seg in text.split('/') {
            if seg.is_empty() {
                return Err(format!("`{text}`: an empty segment (two `/` in a row, or one at an end)"));
            }
            if seg == "**" {
                // `**/**` is the same as `**`.
                if segments.last() != Some(&Segment::AnyDepth) {
                    segments.push(Segment::AnyDepth);
                }
                continue;
            }
            if seg.contains("**") {
                return Err(format!("`{text}`: `**` must be a whole segment (`a/**/b`), not part of `{seg}`"));
            }
            segments.push(Segment::Level { pattern: seg.chars().collect(), whole: seg.contains(':') });
        }
        Ok(ContextGlob { text: text.to_owned(), segments })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the context at `path` ((type, name) per level, outermost first; empty for
    /// the root) matches.
    pub fn matches<S: AsRef<str>>(&self, path: &[(S, S)]) -> bool {
        matches_from(&self.segments, path)
    }
}

impl std::fmt::Display for ContextGlob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn matches_from<S: AsRef<str>>(segments: &[Segment], path: &[(S, S)]) -> bool {
    match segments.split_first() {
        None => path.is_empty(),
        Some((Segment::AnyDepth, rest)) => (0..=path.len()).any(|skip| matches_from(rest, &path[skip..])),
        Some((Segment::Level { pattern, whole }, rest)) => match path.split_first() {
            None => false,
            Some(((ty, name), tail)) => {
                let ok = if *whole {
                    let text: Vec<char> = ty.as_ref().chars().chain([':']).chain(name.as_ref().chars()).collect();
                    wildcard(pattern, &text)
                } else {
                    wildcard(pattern, &ty.as_ref().chars().collect::<Vec<_>>())
                };
                ok && matches_from(rest, tail)
            }
        },
    }
}

/// `*` (any run) and `?` (one character) against the whole of `text`.
fn wildcard(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it currently swallows up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` swallow one more character.
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Vec<(String, String)> {
        if s.is_empty() {
            return Vec::new();
        }
        s.split('/')
            .map(|l| {
                let (t, n) = l.split_once(':').unwrap();
                (t.to_owned(), n.to_owned())
            })
            .collect()
    }

    fn m(pattern: &str, p: &str) -> bool {
        ContextGlob::parse(pattern).unwrap().matches(&path(p))
    }

    #[test]
    fn wildcards_within_a_segment() {
        assert!(wildcard(&['*'], &[]));
        assert!(wildcard(&"a*c".chars().collect::<Vec<_>>(), &"abbbc".chars().collect::<Vec<_>>()));
        assert!(wildcard(&"a?c".chars().collect::<Vec<_>>(), &"abc".chars().collect::<Vec<_>>()));
        assert!(!wildcard(&"a?c".chars().collect::<Vec<_>>(), &"ac".chars().collect::<Vec<_>>()));
        assert!(wildcard(&"*.dds".chars().collect::<Vec<_>>(), &"rock.dds.dds".chars().collect::<Vec<_>>()));
        assert!(!wildcard(&"*.dds".chars().collect::<Vec<_>>(), &"rock.png".chars().collect::<Vec<_>>()));
        assert!(wildcard(&"*a*b*".chars().collect::<Vec<_>>(), &"xxaxxbxx".chars().collect::<Vec<_>>()));
        assert!(!wildcard(&"*a*b".chars().collect::<Vec<_>>(), &"xxbxxa".chars().collect::<Vec<_>>()));
    }

    #[test]
    fn types_names_and_levels() {
        // A segment without `:` matches the type, whatever the name.
        assert!(m("Level", "Level:Forest"));
        assert!(!m("Level", "Level:Forest/Textures:Forest"), "one level only");
        assert!(m("Level/Textures", "Level:Forest/Textures:Forest"));
        assert!(m("Level:Forest/Textures:*", "Level:Forest/Textures:Forest"));
        assert!(!m("Level:Desert/Textures", "Level:Forest/Textures:Forest"));
        assert!(m("Level/*/Textures", "Level:Forest/Streaming:pack 1/Textures:Forest"));
        assert!(!m("Level/*/Textures", "Level:Forest/Textures:Forest"), "`*` is exactly one level");
        assert!(m("Level:F*/Textures:?orest", "Level:Forest/Textures:Forest"));
        // Names may hold `:`: the segment's `:` splits type from name once.
        assert!(m("Shader:vs:*", "Shader:vs:main"));
        assert!(!m("Texture", "Textures:Forest"));
    }

    #[test]
    fn any_depth() {
        assert!(m("**", ""), "the root: the whole domain");
        assert!(m("**", "Level:Forest/Textures:Forest"));
        assert!(m("**/Texture", "Level:Forest/Textures:Forest/Texture:rock.dds"));
        assert!(m("**/Texture", "Texture:rock.dds"), "`**` may match no level");
        assert!(!m("**/Texture", "Level:Forest/Textures:Forest"));
        assert!(m("Level/**/Texture:*.dds", "Level:Forest/Textures:Forest/Texture:rock.dds"));
        assert!(m("Level/**", "Level:Forest"));
        assert!(!m("Level/**", "UI:main menu"));
        assert!(m("**/Textures/**", "Level:Forest/Textures:Forest/Texture:rock.dds/Mip:0"));
        assert!(m("**/**/Texture", "Texture:a"));
        assert!(!m("Level", ""));
    }

    #[test]
    fn bad_patterns() {
        for (bad, why) in [
            ("", "empty"),
            ("Level//Textures", "empty segment"),
            ("/Level", "empty segment"),
            ("Level/", "empty segment"),
            ("Level/a**", "whole segment"),
            ("Level/[ab]", "reserved"),
            ("Level/{a,b}", "reserved"),
        ] {
            let err = ContextGlob::parse(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
