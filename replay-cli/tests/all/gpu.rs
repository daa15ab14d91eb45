//! `gpu` through the binary: a hand-written log of a renderer's resources, with every
//! figure worked out below; VMA and D3D12MA dumps (the fixtures of the report crate);
//! bad input.
//!
//! The log (stream 1, "main"; `vram` is GPU-local, 256 MiB; `vram.buffers` sub-allocates
//! inside it):
//!
//! ```text
//! Renderer:targets [1]  vram 0x1000_0000  8,323,072  render target 1920x1080 RGBA8_UNORM "albedo"
//!                  [2]  vram 0x1100_0000  8,323,072  depth 1920x1080 D32_FLOAT "depth"
//!                  [3]  vram 0x1200_0000  4,194,304  render target 960x540 RGBA16_FLOAT "bloom"
//! Assets:ui        [4]  vram 0x1300_0000  3,211,264  texture 1000x600 RGBA8_UNORM, 10 mips "atlas"
//!                  [5]  vram 0x1400_0000  1,048,576  texture 640x480 NV12 "video" (a format the table lacks)
//!                  [6]  vram 0x1500_0000  2,097,152  texture 1024x1024 BC7_UNORM, 1 mip "lightmap"
//! (no context)     [7]  vram 0x1600_0000  1,048,576  no descriptor: a block
//! Renderer:targets [8]  vram.buffers 0x1600_0000   4,096  buffer "constants"
//!                  [9]  vram.buffers 0x1601_0000     256  buffer "lights"
//!                 [10]  vram 0x1700_0000     65,536  buffer "temp"
//! label "loaded" [11] at 2 ms; [12] free 0x1700_0000 at 3 ms
//! ```
//!
//! Texel data: albedo and depth 8,294,400 (padding 28,672 each), bloom 4,147,200 (47,104),
//! atlas 3,199,588 (11,676; its sides rounded down to 512x512 hold 1,398,100 bytes, up to
//! 1024x1024 5,592,400), lightmap 1,048,576 (1,048,576). vram peaks at [10]: 28,311,552
//! bytes in 8 allocations; at the end it holds 28,246,016 in 7.

use std::path::PathBuf;

use crate::common::{self, cli, stderr, stdout, temp_in, write_log};
use memreplay_format::{DomainKind, Event, ResourceDesc, ResourceKind};
use serde_json::Value;

const VRAM: u32 = 1;
const BUFFERS: u32 = 2;

fn temp(name: &str) -> PathBuf {
    temp_in("gpu", name)
}

fn write(name: &str) -> PathBuf {
    let path = temp(name);
    let s = |id: u32, text: &str| Event::DefineString { id, text: text.into() };
    let alloc =
        |seq: u64, domain: u32, addr: u64, size: u64| Event::Alloc { seq, domain, addr, size, align_log2: 8, stack: 0 };
    let resource = |domain: u32, addr: u64, kind: ResourceKind, w: u32, h: u32, mips: u32, format: u32, name: u32| {
        Event::Resource {
            domain,
            addr,
            desc: ResourceDesc { kind, width: w, height: h, depth_or_layers: 1, mip_levels: mips, format, name },
        }
    };
    use ResourceKind::{Buffer, DepthStencil, RenderTarget, Texture};
    let meta = vec![
        s(1, "main"),
        s(2, "Renderer"),
        s(3, "targets"),
        s(4, "Assets"),
        s(5, "ui"),
        s(6, "vram"),
        s(7, "vram.buffers"),
        s(8, "RGBA8_UNORM"),
        s(9, "D32_FLOAT"),
        s(10, "RGBA16_FLOAT"),
        s(11, "BC7_UNORM"),
        s(12, "NV12"),
        s(13, "albedo"),
        s(14, "depth"),
        s(15, "bloom"),
        s(16, "atlas"),
        s(17, "video"),
        s(18, "lightmap"),
        s(19, "constants"),
        s(20, "lights"),
        s(21, "loaded"),
        s(22, "temp"),
        Event::DefineContextType { id: 1, name: 2 },
        Event::DefineContextType { id: 2, name: 4 },
        Event::DefineDomain { id: VRAM, name: 6, kind: DomainKind::GpuLocal, capacity: 256 << 20, parent: None },
        Event::DefineDomain { id: BUFFERS, name: 7, kind: DomainKind::GpuLocal, capacity: 0, parent: Some(VRAM) },
    ];
    let push = |ty: u32, name: u32| Event::ContextPush { ty, name, flags: 0 };
    let main = vec![
        Event::Time { ns: 1_000_000 },
        Event::ThreadInfo { os_tid: 100, name: 1 },
        push(1, 3),
        alloc(1, VRAM, 0x1000_0000, 8_323_072),
        resource(VRAM, 0x1000_0000, RenderTarget, 1920, 1080, 1, 8, 13),
        alloc(2, VRAM, 0x1100_0000, 8_323_072),
        resource(VRAM, 0x1100_0000, DepthStencil, 1920, 1080, 1, 9, 14),
        alloc(3, VRAM, 0x1200_0000, 4_194_304),
        resource(VRAM, 0x1200_0000, RenderTarget, 960, 540, 1, 10, 15),
        Event::ContextPop,
        push(2, 5),
        alloc(4, VRAM, 0x1300_0000, 3_211_264),
        resource(VRAM, 0x1300_0000, Texture, 1000, 600, 10, 8, 16),
        alloc(5, VRAM, 0x1400_0000, 1_048_576),
        resource(VRAM, 0x1400_0000, Texture, 640, 480, 1, 12, 17),
        alloc(6, VRAM, 0x1500_0000, 2_097_152),
        resource(VRAM, 0x1500_0000, Texture, 1024, 1024, 1, 11, 18),
        Event::ContextPop,
        alloc(7, VRAM, 0x1600_0000, 1_048_576),
        push(1, 3),
        alloc(8, BUFFERS, 0x1600_0000, 4096),
        resource(BUFFERS, 0x1600_0000, Buffer, 4096, 1, 1, 0, 19),
        alloc(9, BUFFERS, 0x1601_0000, 256),
        resource(BUFFERS, 0x1601_0000, Buffer, 256, 1, 1, 0, 20),
        alloc(10, VRAM, 0x1700_0000, 65_536),
        resource(VRAM, 0x1700_0000, Buffer, 65_536, 1, 1, 0, 22),
        Event::ContextPop,
        Event::Time { ns: 2_000_000 },
        Event::Label { seq: 11, name: 21 },
        Event::Time { ns: 3_000_000 },
        Event::Free { seq: 12, domain: VRAM, addr: 0x1700_0000, stack: 0 },
    ];
    write_log(&path, &common::game_header(), &[(0, meta), (1, main)], None);
    path
}

fn json(args: &[&str]) -> Value {
    let o = cli(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

fn names(rows: &Value, key: &str) -> Vec<String> {
    rows.as_array().unwrap().iter().map(|r| r[key].as_str().unwrap().to_owned()).collect()
}

#[test]
fn the_pivots_of_a_renderers_resources() {
    let log = write("pivots.mrl");
    let log = log.to_str().unwrap();
    let j = json(&["gpu", log, "--screen", "1920x1080", "--json"]);
    assert_eq!(j["source"]["point"], "at the end");
    assert_eq!(j["screen"], serde_json::json!([1920, 1080]));
    assert_eq!(j["screen_source"], "option");
    let vram = &j["domains"][0];
    assert_eq!(
        (vram["name"].as_str(), vram["live_bytes"].as_u64(), vram["live_count"].as_u64()),
        (Some("vram"), Some(28_246_016), Some(7))
    );
    assert_eq!((vram["peak"]["bytes"].as_u64(), vram["peak"]["count"].as_u64()), (Some(28_311_552), Some(8)));
    assert_eq!(vram["peak"]["after_label"], Value::Null, "the peak comes before the label");
    assert_eq!(j["domains"][1]["parent"], 1);
    let p = &j["pivots"];
    // Everything but the block: 6 in vram, 2 buffers inside the block.
    assert_eq!((p["total"]["count"].as_u64(), p["total"]["bytes"].as_u64()), (Some(8), Some(27_201_792)));
    let kinds: Vec<(String, u64, u64)> = p["by_kind"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["kind"].as_str().unwrap().to_owned(), r["count"].as_u64().unwrap(), r["bytes"].as_u64().unwrap()))
        .collect();
    let kind = |k: &str, n: u64, b: u64| (k.to_owned(), n, b);
    assert_eq!(
        kinds,
        [
            kind("render-target", 2, 12_517_376),
            kind("depth-stencil", 1, 8_323_072),
            kind("texture", 3, 6_356_992),
            kind("buffer", 2, 4352)
        ]
    );
    assert_eq!(p["by_kind"][0]["owners"][0]["context"], "Renderer:targets");
    assert_eq!(p["by_kind"][0]["share_ppm"], 460_167); // 12,517,376 / 27,201,792, in millionths
                                                       // By dimensions: 1920x1080 holds two resources of two kinds.
    assert_eq!(
        (p["by_dimensions"][0]["width"].as_u64(), p["by_dimensions"][0]["count"].as_u64()),
        (Some(1920), Some(2))
    );
    assert_eq!(p["by_dimensions"][0]["kinds"], serde_json::json!(["render-target", "depth-stencil"]));
    assert_eq!(p["dimensions_total"], 5);
    // Screen-sized: the two full-size targets, then bloom at half of each side.
    assert_eq!(names(&p["screen_sized"], "name"), ["albedo", "depth", "bloom"]);
    assert_eq!(names(&p["screen_sized"], "fraction"), ["1", "1", "1/2"]);
    assert_eq!(p["screen_sized_total"]["bytes"], 20_840_448);
    // The atlas: not a power of two, with mips.
    assert_eq!(names(&p["npot"], "name"), ["atlas"]);
    let atlas = &p["npot"][0];
    assert_eq!(atlas["texel_bytes"], 3_199_588);
    assert_eq!((atlas["down"]["width"].as_u64(), atlas["down"]["delta"].as_u64()), (Some(512), Some(1_801_488)));
    assert_eq!((atlas["up"]["width"].as_u64(), atlas["up"]["delta"].as_u64()), (Some(1024), Some(2_392_812)));
    assert_eq!((p["npot_save"].as_u64(), p["npot_cost"].as_u64()), (Some(1_801_488), Some(2_392_812)));
    // Small: the two buffers.
    assert_eq!((p["small"]["total"]["count"].as_u64(), p["small"]["total"]["bytes"].as_u64()), (Some(2), Some(4352)));
    // Padding, largest first; the NV12 video is not guessed.
    assert_eq!(names(&p["padding"], "name"), ["lightmap", "bloom", "albedo", "depth", "atlas"]);
    let pads: Vec<u64> = p["padding"].as_array().unwrap().iter().map(|r| r["padding"].as_u64().unwrap()).collect();
    assert_eq!(pads, [1_048_576, 47_104, 28_672, 28_672, 11_676]);
    assert_eq!((p["padding_total"]["count"].as_u64(), p["padding_bytes"].as_u64()), (Some(5), Some(1_164_700)));
    assert_eq!(
        (p["unchecked"]["unknown_format"]["count"].as_u64(), p["unchecked"]["unknown_format"]["bytes"].as_u64()),
        (Some(1), Some(1_048_576))
    );
    // The block map: one block of 1 MiB, two buffers in it, two free ranges.
    assert_eq!(j["blocks"].as_array().unwrap().len(), 1);
    let b = &j["block_figures"][0];
    assert_eq!(
        (
            b["used_bytes"].as_u64(),
            b["free_bytes"].as_u64(),
            b["free_ranges"].as_u64(),
            b["largest_free_range"].as_u64()
        ),
        (Some(4352), Some(1_044_224), Some(2), Some(982_784))
    );
    assert_eq!(j["blocks"][0]["allocations"][1]["offset"], 65_536);
    assert_eq!(j["blocks"][0]["allocations"][1]["context"], "Renderer:targets");

    // The text: the same figures, the video's format said to be unknown.
    let text = stdout(&cli(&["gpu", log, "--screen", "1920x1080"]));
    for line in [
        "Screen-sized targets (screen 1920x1080, --screen): 19.9 MiB in 3 targets",
        "Padding (allocated beyond the texel data of format, size, layers and mips): 1.1 MiB over 5 resources",
        "1 resource (1.0 MiB) with an unknown format (or none), not checked",
        "Small resources (under 64.0 KiB): 4.2 KiB in 2 resources",
        "vram.buffers in vram: 1 block",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

#[test]
fn at_the_peak_at_a_label_and_in_one_context() {
    let log = write("points.mrl");
    let log = log.to_str().unwrap();
    // At its peak vram also holds the temp buffer, with its descriptor (its RESOURCE comes
    // after the allocation that reached the peak).
    let j = json(&["gpu", log, "--at", "peak", "--json"]);
    assert_eq!(j["domains"][0]["live_bytes"], 28_311_552);
    assert!(j["resources"].as_array().unwrap().iter().any(|r| r["name"] == "temp" && r["kind"] == "buffer"));
    let j = json(&["gpu", log, "--at", "loaded", "--json"]);
    assert_eq!(j["source"]["point"], "at label \"loaded\" (2.000 ms)");
    assert_eq!(j["pivots"]["total"]["count"], 9);
    // Only what the UI assets hold; the screen unknown.
    let j = json(&["gpu", log, "--context", "Assets:ui", "--json"]);
    assert_eq!(names(&j["resources"], "name"), ["atlas", "video", "lightmap"]);
    assert_eq!(j["screen_source"], "unknown");
    assert_eq!(j["pivots"]["screen_sized"], serde_json::json!([]));
    // Only the sub-allocating domain: its parent stays for the blocks.
    let j = json(&["gpu", log, "--domain", "vram.buffers", "--json"]);
    assert_eq!(names(&j["resources"], "name"), ["constants", "lights"]);
    assert_eq!(names(&j["domains"], "name"), ["vram", "vram.buffers"]);
}

#[test]
fn the_block_map_svg_and_the_dumps() {
    let log = write("svg.mrl");
    let svg = temp("map.svg");
    let o = cli(&["gpu", log.to_str().unwrap(), "--svg", svg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(drawn.starts_with("<svg") && drawn.contains("constants") && drawn.trim_end().ends_with("</svg>"));

    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/report/tests/data/gpu/");
    let vma = format!("{data}vma3.json");
    let j = json(&["gpu", "--vma", &vma, "--json"]);
    assert_eq!(j["source"], serde_json::json!({"kind": "dump", "path": vma, "format": "vma"}));
    assert!(!j["blocks"].as_array().unwrap().is_empty());
    let after = format!("{data}vma3-after-resize.json");
    let diff = stdout(&cli(&["gpu", "--vma", &vma, "--vma", &after]));
    assert!(diff.contains("total") && diff.contains("6 -> 7"), "{diff}");
    let d3d12 = format!("{data}d3d12ma2.json");
    assert_eq!(json(&["gpu", "--vma", &d3d12, "--json"])["source"]["format"], "d3d12ma");
}

#[test]
fn bad_input_is_refused_with_a_reason() {
    let log = write("bad.mrl");
    let log = log.to_str().unwrap();
    let foreign = temp("foreign.json");
    std::fs::write(&foreign, "{\"foo\": 1}").unwrap();
    let truncated = temp("truncated.json");
    std::fs::write(&truncated, "{\"General\": {\"API\": \"Vulkan\"").unwrap();
    for (args, says) in [
        (
            vec!["gpu", log, "--domain", "heap"],
            "no GPU domain \"heap\" in the log; GPU domains: \"vram\", \"vram.buffers\"",
        ),
        (vec!["gpu", log, "--at", "nowhere"], "no label \"nowhere\""),
        (vec!["gpu", log, "--screen", "1920"], "is not a screen size"),
        (vec!["gpu", log, "--context", "Nope:x"], "no context \"Nope:x\""),
        (vec!["gpu", log, "--svg", "/no/such/dir/map.svg"], "no directory /no/such/dir"),
        (vec!["gpu", "--vma", foreign.to_str().unwrap()], "neither a VMA nor a D3D12MA dump"),
        (vec!["gpu", "--vma", truncated.to_str().unwrap()], "truncated.json"),
        (vec!["gpu", "--vma", foreign.to_str().unwrap(), "--at", "peak"], "--at"),
        (vec!["gpu", "--vma", "/no/such.json"], "/no/such.json"),
        (vec!["gpu", log, "--vma", foreign.to_str().unwrap()], "cannot be used with"),
    ] {
        let o = cli(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}
