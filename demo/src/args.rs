//! The command line, parsed by hand (std only).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::{Options, MAX_FRAMES, MAX_TEXTURES};

/// The full help text.
pub const USAGE: &str = "\
memreplay-demo: plays a tiny deterministic game and records its memory with memreplay

USAGE:
    memreplay-demo [OUT.mrl] [OPTIONS]

ARGS:
    OUT.mrl            the log to write [default: demo.mrl]

OPTIONS:
    --textures N       textures the level loads, 1..=256 [default: 8]
    --frames N         frames of gameplay, 0..=100000 [default: 60]
    --extra-leak       add a second deliberate leak (31337 bytes, shader permutations)
    --options LIST     recorder settings as in MEMREPLAY_OPTIONS, e.g. depth=32,unwind=unwinder
    -h, --help         print this help
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(Options),
    Help,
}

/// A command line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ArgError {}

/// Parses the arguments (without the program name). Flags take their value as the next
/// argument or after `=`; `--` ends the flags.
pub fn parse_args<I>(args: I) -> Result<Command, ArgError>
where
    I: IntoIterator<Item = OsString>,
{
    let mut opts = Options::default();
    let mut out: Option<PathBuf> = None;
    let mut args = args.into_iter();
    let mut flags_done = false;
    while let Some(arg) = args.next() {
        let text = arg.to_str();
        let is_flag = !flags_done && text.is_some_and(|t| t.starts_with('-') && t != "-");
        if !is_flag {
            if text == Some("--") && !flags_done {
                flags_done = true;
                continue;
            }
            if out.is_some() {
                return Err(ArgError(format!("unexpected argument `{}`: only one log path", arg.to_string_lossy())));
            }
            out = Some(PathBuf::from(arg));
            continue;
        }
        let text = text.unwrap_or_default();
        if text == "--" {
            flags_done = true;
            continue;
        }
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (text, None),
        };
        let mut value = |what: &str| -> Result<String, ArgError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            match args.next() {
                Some(v) => v.into_string().map_err(|_| ArgError(format!("{name} takes {what}, not a non-UTF-8 value"))),
                None => Err(ArgError(format!("{name} takes {what}"))),
            }
        };
        match name {
            "-h" | "--help" => return Ok(Command::Help),
            "--textures" => opts.textures = number(name, &value("a number")?, 1, MAX_TEXTURES as u64)? as usize,
            "--frames" => opts.frames = number(name, &value("a number")?, 0, MAX_FRAMES)?,
            "--options" => opts.recorder_options = value("a list of key=value")?,
            "--extra-leak" => {
                if inline.is_some() {
                    return Err(ArgError("--extra-leak takes no value".into()));
                }
                opts.extra_leak = true;
            }
            _ => return Err(ArgError(format!("unknown option `{name}`"))),
        }
    }
    if let Some(out) = out {
        opts.out = out;
    }
    Ok(Command::Run(opts))
}

fn number(flag: &str, value: &str, min: u64, max: u64) -> Result<u64, ArgError> {
    let n: u64 = value.trim().parse().map_err(|_| ArgError(format!("{flag} takes a number, not `{value}`")))?;
    if n < min || n > max {
        return Err(ArgError(format!("{flag} must be {min}..={max}, got {n}")));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, ArgError> {
        parse_args(args.iter().map(OsString::from))
    }

    #[test]
    fn defaults() {
        assert_eq!(parse(&[]).unwrap(), Command::Run(Options::default()));
    }

    #[test]
    fn everything() {
        let Command::Run(o) =
            parse(&["x.mrl", "--textures", "12", "--frames=5", "--extra-leak", "--options", "depth=8"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(o.out, PathBuf::from("x.mrl"));
        assert_eq!((o.textures, o.frames, o.extra_leak), (12, 5, true));
        assert_eq!(o.recorder_options, "depth=8");
        let Command::Run(o) = parse(&["--frames", "0", "--", "--weird.mrl"]).unwrap() else { panic!() };
        assert_eq!(o.out, PathBuf::from("--weird.mrl"));
        assert_eq!(o.frames, 0);
        assert_eq!(parse(&["-h"]).unwrap(), Command::Help);
    }

    #[test]
    fn errors() {
        for bad in [
            &["--textures"][..],
            &["--textures", "0"],
            &["--textures", "257"],
            &["--textures", "many"],
            &["--frames", "-3"],
            &["--bogus"],
            &["a.mrl", "b.mrl"],
            &["--extra-leak=yes"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse(&["--frames", "x"]).unwrap_err().to_string(), "--frames takes a number, not `x`");
    }
}
