//! Structure-aware: the bytes choose events (well framed, checksummed, decodable), so the
//! fuzzer reaches the replay and the reports instead of stopping at a checksum. The events
//! make as little sense as bytes can make them: sequence numbers repeat and run backwards,
//! frees and pops come without allocations and pushes, sizes and times reach `u64::MAX`,
//! ids name nothing, contexts nest deep. The blocks are stored with a method the input
//! chooses (so the analyzer's decoder of field columns sees the same events). The log is
//! replayed and every report on the replay state is built; nothing may panic.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use memreplay_format::{
    header_flags, DomainKind, Event, EventEncoder, FileHeader, LogWriter, LossReason, PayloadCompression, ResourceDesc,
    ResourceKind,
};
use memreplay_report::{self as report, build_efficiency, build_instances, build_leaks, build_summary, build_tree};
use memreplay_report::{Progress, ReportOptions};

/// The fuzzer's bytes, read as choices; past the end every choice is 0.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn u8(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |v, _| v << 8 | self.u8() as u64)
    }

    /// Mostly small, so that ids, addresses and sequence numbers meet; sometimes at the
    /// edges of the type.
    fn number(&mut self) -> u64 {
        match self.u8() % 8 {
            0..=3 => (self.u8() % 8) as u64,
            4 => self.u8() as u64 * 64,
            5 => u64::MAX - (self.u8() % 4) as u64,
            6 => (1 << 32) - 2 + (self.u8() % 4) as u64,
            _ => self.u64(),
        }
    }

    fn id(&mut self) -> u32 {
        match self.u8() % 8 {
            0..=5 => (self.u8() % 6) as u32,
            6 => u32::MAX,
            _ => self.u64() as u32,
        }
    }

    fn addr(&mut self) -> u64 {
        match self.u8() % 8 {
            0..=5 => 0x1000 + (self.u8() % 12) as u64 * 0x40,
            6 => u64::MAX - (self.u8() % 8) as u64,
            _ => self.u64(),
        }
    }

    fn event(&mut self) -> Event {
        match self.u8() % 20 {
            0..=3 => Event::Alloc {
                seq: self.number(),
                domain: self.id() % 4,
                addr: self.addr(),
                size: self.number(),
                align_log2: self.u8() % 70,
                stack: self.id(),
            },
            4..=6 => Event::Free { seq: self.number(), domain: self.id() % 4, addr: self.addr(), stack: self.id() },
            7 => Event::Realloc {
                free_seq: self.number(),
                seq: self.number(),
                old_addr: self.addr(),
                new_addr: self.addr(),
                new_size: self.number(),
                align_log2: self.u8() % 70,
                stack: self.id(),
            },
            8 => Event::Usage { seq: self.number(), addr: self.addr(), used: self.number() },
            9 => Event::ContextPush { ty: self.id(), name: self.id(), flags: self.u8() },
            10 => Event::ContextPop,
            11 => Event::AttachPush { seq: self.number(), addr: self.addr() },
            12 => Event::AttachPop,
            13 => Event::Time { ns: self.number() },
            14 => Event::FrameStart { seq: self.number(), frame: self.number() },
            15 => Event::Label { seq: self.number(), name: self.id() },
            16 => match self.u8() % 4 {
                0 => Event::DefineString {
                    id: self.id(),
                    text: ["", "a", "Level", "x/y"][self.u8() as usize % 4].into(),
                },
                1 => Event::DefineStack { id: self.id(), frames: (0..self.u8() % 5).map(|_| self.addr()).collect() },
                2 => Event::DefineContextType { id: self.id(), name: self.id() },
                _ => Event::ThreadInfo { os_tid: self.number(), name: self.id() },
            },
            17 => Event::DefineDomain {
                id: self.id() % 5,
                name: self.id(),
                kind: [
                    DomainKind::Heap,
                    DomainKind::Pool,
                    DomainKind::GpuLocal,
                    DomainKind::GpuShared,
                    DomainKind::Other,
                ][self.u8() as usize % 5],
                capacity: self.number(),
                parent: (self.u8() % 2 == 0).then(|| self.id() % 5),
            },
            18 => Event::Resource {
                domain: self.id() % 4,
                addr: self.addr(),
                desc: ResourceDesc {
                    kind: ResourceKind::from_byte(self.u8()),
                    width: self.id(),
                    height: self.id(),
                    depth_or_layers: self.id(),
                    mip_levels: self.id(),
                    format: self.id(),
                    name: self.id(),
                },
            },
            _ => match self.u8() % 5 {
                0 => Event::Lost { events: self.number(), bytes: self.number(), reason: LossReason::WriteError },
                1 => Event::ProcessMemory { time: self.number(), resident: self.number(), committed: self.number() },
                2 => Event::Budget {
                    domain: self.id() % 5,
                    time: self.number(),
                    budget: self.number(),
                    usage: self.number(),
                },
                3 => Event::Display { width: self.id(), height: self.id() },
                _ => Event::BeforeStart {
                    allocations: self.number(),
                    frees: self.number(),
                    reallocs: self.number(),
                    bytes: self.number(),
                    live: self.number(),
                    untracked: self.number(),
                },
            },
        }
    }
}

fn header() -> FileHeader {
    FileHeader {
        flags: header_flags::CALLSTACKS_ON_ALLOC | header_flags::USAGE_CHANGES,
        exe_path: "/fuzz".into(),
        recorder: "fuzz".into(),
        ..memreplay_fixtures::header()
    }
}

/// One log file per fuzzing process, rewritten for each input.
fn log_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| std::env::temp_dir().join(format!("memreplay-fuzz-{}.mrl", std::process::id())))
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices(data);
    let path = log_path();
    // Every way a block may be stored: the analyzer reads columns straight from them.
    let method = [
        PayloadCompression::Lz4,
        PayloadCompression::Zstd { level: 1 },
        PayloadCompression::Lz4Columns,
        PayloadCompression::ZstdColumns { level: 1 },
    ][(c.u8() % 4) as usize];
    let mut w = LogWriter::compressed_with(std::fs::File::create(path).unwrap(), &header(), method).unwrap();
    for _ in 0..1 + c.u8() % 8 {
        let thread = (c.u8() % 4) as u32;
        let mut enc = EventEncoder::new();
        for _ in 0..c.u8() % 64 {
            enc.push(&c.event());
        }
        w.write_block(thread, &mut enc).unwrap();
    }
    if c.u8() % 4 != 0 {
        w.finish(c.number(), c.number()).unwrap();
    }
    if let Ok(loaded) = report::load(&ReportOptions::new(path.clone()), Progress::Hidden) {
        let _ = build_summary(&loaded);
        let _ = build_tree(&loaded);
        let _ = build_leaks(&loaded);
        let _ = build_efficiency(&loaded);
        let _ = build_instances(&loaded);
    }
});
