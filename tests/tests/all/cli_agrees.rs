//! `replay-cli info` (through its library) on real demo logs: whole, truncated, corrupted.

use memreplay_demo::{expected, Options, ENTITY_POOL, LABELS, VRAM_LOCAL, VRAM_SYSTEM};
use memreplay_report::Info;
use memreplay_tests::{open, run_demo, temp_log};

const DEMO: &str = env!("CARGO_BIN_EXE_demo-runner");

fn demo_log(name: &str, args: &[&str]) -> std::path::PathBuf {
    let path = temp_log(name);
    let mut all = vec![path.to_str().unwrap()];
    all.extend_from_slice(args);
    run_demo(DEMO, &all);
    path
}

/// `info` of the log at `path`, read a block at a time as the command does.
fn read_info(name: &str, path: &std::path::Path) -> Info {
    Info::read(name, std::fs::File::open(path).unwrap()).unwrap()
}

#[test]
fn info_agrees_with_the_demo() {
    let path = demo_log("info.mrl", &["--textures", "5", "--frames", "20"]);
    let exp = expected(&Options { textures: 5, frames: 20, ..Options::default() });
    let log = open(&path);
    let info = read_info("info.mrl", &path);

    assert!(info.integrity.complete && info.integrity.clean);
    assert_eq!((info.integrity.bytes_lost, info.integrity.events_lost), (0, 0));
    assert_eq!(info.header.format_version, format!("1.{}", memreplay_format::VERSION_MINOR));
    // The writer samples process memory as it starts and as it stops, at least.
    assert!(info.events.process_memory >= 2, "{} samples", info.events.process_memory);
    assert!(info.header.callstacks_on_alloc && info.header.callstacks_on_free && info.header.usage_changes);
    assert_eq!(info.labels.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), LABELS);
    // Labels are timed and in time order.
    let times: Vec<u64> = info.labels.iter().map(|l| l.time_ns.expect("a clock reading precedes each label")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(info.totals.duration_ns >= *times.last().unwrap());
    assert_eq!(info.frames, exp.frames);
    assert_eq!(info.events.frame_start, exp.frames);
    assert_eq!(info.totals.events, log.report.end.unwrap().events);
    assert_eq!(info.totals.bytes, std::fs::metadata(&path).unwrap().len());

    for name in exp.threads {
        assert!(info.threads.iter().any(|t| t.name.as_deref() == Some(name)), "thread {name}");
    }
    let domain = |name: &str| info.domains.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(domain(VRAM_LOCAL).alloc_bytes, exp.vram_local_bytes);
    assert_eq!(domain(VRAM_LOCAL).kind, "gpu-local");
    assert_eq!(domain(VRAM_LOCAL).allocs, domain(VRAM_LOCAL).frees);
    assert_eq!(domain(VRAM_SYSTEM).alloc_bytes, exp.vram_system_bytes);
    assert_eq!(domain(ENTITY_POOL).allocs, exp.entity_allocs);
    assert_eq!(domain(ENTITY_POOL).parent, Some(0));
    let texture = info.context_types.iter().find(|c| c.name == "Texture").unwrap();
    assert_eq!((texture.pushes, texture.instances), (5, 5));
    assert_eq!(info.events.attach_push, info.events.attach_pop);
    assert_eq!(info.events.context_push, info.events.context_pop);
    assert_eq!(info.events.domain_alloc, info.domains.iter().map(|d| d.allocs).sum::<u64>());

    // The text and JSON renderings say the same.
    let text = info.to_text();
    assert!(text.contains("complete (end-of-log record present, no damage)"), "{text}");
    assert!(text.contains("asset streaming") && text.contains("level unloaded"));
    let json: serde_json::Value = serde_json::from_str(&info.to_json()).unwrap();
    assert_eq!(json["frames"], 20);
    assert_eq!(json["labels"][1]["name"], "level loaded");

    assert!(info.integrity.clean, "what `info --strict` passes");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn info_on_a_cut_off_demo_log() {
    let path = demo_log("cut.mrl", &["--frames", "10"]);
    let bytes = std::fs::read(&path).unwrap();
    let whole = read_info("whole", &path);
    // Cut inside the last event block: the end record and part of a block are gone.
    let cut_at = bytes.len() - 60 - 10;
    std::fs::write(&path, &bytes[..cut_at]).unwrap();

    let info = read_info("cut", &path);
    assert!(!info.integrity.complete && !info.integrity.clean);
    assert!(info.integrity.bytes_lost > 0);
    assert!(info.totals.events < whole.totals.events);
    assert!(info.totals.duration_is_lower_bound);
    let text = info.to_text();
    assert!(text.contains("TRUNCATED"), "{text}");
    assert!(text.contains(&format!("{} bytes / ", info.integrity.bytes_lost)), "{text}");

    let json: serde_json::Value = serde_json::from_str(&info.to_json()).unwrap();
    assert_eq!(json["integrity"]["clean"], false, "what `info --strict` fails");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn info_on_a_corrupted_demo_log() {
    let path = demo_log("corrupt.mrl", &["--textures", "2", "--frames", "3"]);
    let mut bytes = std::fs::read(&path).unwrap();
    let whole = open(&path);
    // Flip a byte in the middle of the first block's payload (after its 48-byte frame).
    let first = whole.blocks[0].offset as usize;
    bytes[first + 48 + 4] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let info = read_info("corrupt", &path);
    assert!(info.integrity.complete && !info.integrity.clean);
    assert_eq!(info.integrity.damage.len(), 1, "{:?}", info.integrity.damage);
    assert!(info.integrity.events_in_bad_blocks > 0);
    assert_eq!(info.integrity.events_lost, info.integrity.events_in_bad_blocks);
    assert_eq!(info.totals.events + info.integrity.events_lost, whole.report.end.unwrap().events);
    assert!(info.to_text().contains("complete but DAMAGED"));
    let _ = std::fs::remove_file(&path);
}
