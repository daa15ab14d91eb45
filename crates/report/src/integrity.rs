//! Whether a log is whole: the one place where what the reader found ([`ReadReport`],
//! [`Damage`]) and what the recorder itself reported lost (`Lost` records, the
//! end-of-log record's count) become facts. `info`, `summarize`, the warning every
//! report prints, `check` and `diff` all read them from here.

use memreplay_format::{Damage, ReadReport};
use serde::Serialize;

use crate::table::{plural, size};
use crate::time::format_ms;

/// A kind of damage, as named in `check`'s budget (`[integrity] allow`) and
/// `--allow-damage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DamageKind {
    /// No end-of-log record: the recording was not stopped cleanly or the file was cut
    /// short (with, possibly, an incomplete block at the end).
    Truncated,
    /// Bytes without a valid block frame, skipped.
    Corrupt,
    /// Blocks whose payload failed its checksum or did not decode: their events are lost.
    BadBlocks,
    /// Blocks of a kind this reader does not know, skipped.
    UnknownBlocks,
    /// Bytes after the end-of-log record.
    TrailingBytes,
    /// Events the recorder itself could not record (`Lost` records).
    LostEvents,
}

impl DamageKind {
    /// Every kind, in the order messages list them.
    pub const ALL: [DamageKind; 6] = [
        DamageKind::Truncated,
        DamageKind::Corrupt,
        DamageKind::BadBlocks,
        DamageKind::UnknownBlocks,
        DamageKind::TrailingBytes,
        DamageKind::LostEvents,
    ];

    /// The kind as budgets and `--allow-damage` name it: `bad-blocks`.
    pub fn name(self) -> &'static str {
        match self {
            DamageKind::Truncated => "truncated",
            DamageKind::Corrupt => "corrupt",
            DamageKind::BadBlocks => "bad-blocks",
            DamageKind::UnknownBlocks => "unknown-blocks",
            DamageKind::TrailingBytes => "trailing-bytes",
            DamageKind::LostEvents => "lost-events",
        }
    }

    /// A kind by its name; the error lists the kinds.
    pub fn parse(name: &str) -> Result<DamageKind, String> {
        DamageKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<&str> = DamageKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown kind of damage `{name}`; kinds: {}", names.join(", "))
        })
    }

    fn of(d: &Damage) -> DamageKind {
        match d {
            Damage::TruncatedTail { .. } => DamageKind::Truncated,
            Damage::CorruptRegion { .. } => DamageKind::Corrupt,
            Damage::BadBlock { .. } => DamageKind::BadBlocks,
            Damage::UnknownBlockKind { .. } => DamageKind::UnknownBlocks,
            Damage::TrailingBytes { .. } => DamageKind::TrailingBytes,
        }
    }
}

impl Serialize for DamageKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One damaged place of the file, as the reader found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DamageEntry {
    pub kind: DamageKind,
    /// Byte offset in the file where it starts.
    pub offset: u64,
    /// Bytes lost there (0 for a whole block skipped: its events are what is lost).
    pub bytes: u64,
    /// Events known lost there (a damaged block's count).
    pub events: u64,
    /// The damage in words (as `info` prints it).
    pub what: String,
}

impl DamageEntry {
    fn new(d: &Damage) -> DamageEntry {
        let (offset, bytes, events) = match *d {
            Damage::TruncatedTail { offset, bytes }
            | Damage::CorruptRegion { offset, bytes }
            | Damage::TrailingBytes { offset, bytes } => (offset, bytes, 0),
            Damage::BadBlock { offset, events, .. } => (offset, 0, u64::from(events)),
            Damage::UnknownBlockKind { offset, .. } => (offset, 0, 0),
        };
        DamageEntry { kind: DamageKind::of(d), offset, bytes, events, what: d.to_string() }
    }
}

/// Whether a log is whole, and what was lost if not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogIntegrity {
    /// Nothing lost: the end-of-log record is present, the reader found no damage and
    /// the recorder reported no lost events.
    pub clean: bool,
    /// The end-of-log record is present.
    pub complete: bool,
    /// The kinds of damage found, each once, in the order of [`DamageKind::ALL`].
    pub kinds: Vec<DamageKind>,
    /// Bytes read, header included: for a truncated log, where it ends.
    pub bytes_read: u64,
    /// Nanoseconds since the start of the last clock reading read, for a log without
    /// its end-of-log record (events after it are missing); else null.
    pub read_until_ns: Option<u64>,
    /// Bytes lost to truncation and corruption.
    pub bytes_lost: u64,
    /// Blocks skipped: those that failed to decode and those of an unknown kind.
    pub blocks_lost: u64,
    /// Events in blocks that failed to decode.
    pub events_in_bad_blocks: u64,
    /// Events the recorder itself could not record.
    pub recorder_lost_events: u64,
    /// Every damaged place, in file order.
    pub damage: Vec<DamageEntry>,
}

/// Whether a replayed log is whole, and what was lost if not.
pub fn of(replay: &memreplay_replay::Replay) -> LogIntegrity {
    LogIntegrity::new(&replay.report, replay.state.lost_events, replay.last_clock_ns())
}

impl LogIntegrity {
    /// The facts of a log read into `report`, whose events hold `lost_records` events
    /// reported lost by `Lost` records (the end-of-log record's count wins if higher),
    /// and whose last clock reading is `last_clock_ns`.
    pub fn new(report: &ReadReport, lost_records: u64, last_clock_ns: u64) -> LogIntegrity {
        let recorder_lost_events = lost_records.max(report.end.map_or(0, |e| e.lost_events));
        let damage: Vec<DamageEntry> = report.damage.iter().map(DamageEntry::new).collect();
        let complete = report.end.is_some();
        let kinds: Vec<DamageKind> = DamageKind::ALL
            .into_iter()
            .filter(|k| match k {
                DamageKind::Truncated => !complete || damage.iter().any(|d| d.kind == *k),
                DamageKind::LostEvents => recorder_lost_events > 0,
                _ => damage.iter().any(|d| d.kind == *k),
            })
            .collect();
        LogIntegrity {
            clean: kinds.is_empty(),
            complete,
            kinds,
            bytes_read: report.bytes,
            read_until_ns: (!complete).then_some(last_clock_ns),
            bytes_lost: report.bytes_lost(),
            blocks_lost: damage
                .iter()
                .filter(|d| matches!(d.kind, DamageKind::BadBlocks | DamageKind::UnknownBlocks))
                .count() as u64,
            events_in_bad_blocks: report.events_in_bad_blocks(),
            recorder_lost_events,
            damage,
        }
    }

    /// The reader found nothing wrong (what `info` and `summarize` call clean): the
    /// end-of-log record is present and nothing is damaged, whatever the recorder lost.
    pub fn undamaged(&self) -> bool {
        self.complete && self.damage.is_empty()
    }

    /// The damage descriptions, as `info` and `summarize` list them.
    pub fn damage_text(&self) -> Vec<String> {
        self.damage.iter().map(|d| d.what.clone()).collect()
    }

    /// What was lost, in one line: `truncated (no end-of-log record: read to byte 600,
    /// last clock reading at 1.000 ms), 6.6 KiB lost, 83 events in 1 damaged block`.
    /// Empty for a clean log.
    pub fn summary(&self) -> String {
        let mut what = Vec::new();
        if !self.complete {
            let at =
                self.read_until_ns.map_or_else(String::new, |t| format!(", events after {} missing", format_ms(t)));
            what.push(format!("truncated (no end-of-log record: read to byte {}{at})", self.bytes_read));
        }
        let others: Vec<&str> = self
            .kinds
            .iter()
            .filter(|k| !matches!(k, DamageKind::Truncated | DamageKind::LostEvents))
            .map(|k| k.name())
            .collect();
        if !others.is_empty() {
            what.push(others.join(", "));
        }
        if self.bytes_lost > 0 {
            what.push(format!("{} lost", size(self.bytes_lost)));
        }
        if self.blocks_lost > 0 {
            what.push(format!(
                "{} in {} skipped",
                plural(self.events_in_bad_blocks, "event"),
                plural(self.blocks_lost, "block")
            ));
        }
        if self.recorder_lost_events > 0 {
            what.push(format!("{} lost by the recorder", plural(self.recorder_lost_events, "event")));
        }
        what.join(", ")
    }

    /// The line a report prints before its figures for a damaged log (`which`: `before`,
    /// `after`, `the log`); `None` for a clean one.
    pub fn damaged_line(&self, which: &str) -> Option<String> {
        (!self.clean)
            .then(|| format!("  {which} is DAMAGED: {}; its figures cover only what could be read", self.summary()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name() {
        for k in DamageKind::ALL {
            assert_eq!(DamageKind::parse(k.name()), Ok(k));
        }
        assert_eq!(
            DamageKind::parse("cut"),
            Err("unknown kind of damage `cut`; kinds: truncated, corrupt, bad-blocks, unknown-blocks, trailing-bytes, lost-events".into())
        );
    }

    #[test]
    fn a_clean_report_with_recorder_losses_is_undamaged_but_not_clean() {
        let report = ReadReport {
            end: Some(memreplay_format::EndOfLog { blocks: 1, events: 10, lost_events: 3, end_ns: 5 }),
            blocks: 1,
            bytes: 100,
            damage: Vec::new(),
        };
        let i = LogIntegrity::new(&report, 2, 5);
        assert!(i.undamaged() && !i.clean);
        assert_eq!((i.kinds.clone(), i.recorder_lost_events, i.read_until_ns), (vec![DamageKind::LostEvents], 3, None));
        assert_eq!(i.summary(), "3 events lost by the recorder");
        let cut = ReadReport { end: None, damage: vec![Damage::TruncatedTail { offset: 90, bytes: 10 }], ..report };
        let i = LogIntegrity::new(&cut, 0, 2_000_000);
        assert_eq!(i.kinds, vec![DamageKind::Truncated]);
        assert_eq!(
            i.summary(),
            "truncated (no end-of-log record: read to byte 100, events after 2.000 ms missing), 10 B lost"
        );
    }
}
