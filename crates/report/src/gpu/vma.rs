//! VMA (`vmaBuildStatsString`) and D3D12MA (`BuildStatsString`) JSON dumps read into a
//! [`GpuView`], and two dumps compared ([`diff_dumps`]).
//!
//! # The formats read
//!
//! The reader follows the dump format that GpuMemDumpVis draws and that its schema
//! (`tools/GpuMemDumpVis/GpuMemDump.schema.json` in both repositories) describes:
//!
//! - **VMA 3.x** (Vulkan Memory Allocator 3.0 and later): `vmaBuildStatsString(allocator,
//!   &str, VK_TRUE)`. `"General"."API"` is `"Vulkan"`; `"MemoryInfo"` holds `"Heap <n>"`
//!   objects (`"Flags"`, `"Size"`, `"Budget"`, `"Stats"`, and `"MemoryPools"` naming the
//!   heap's memory types `"Type <m>"`); `"DefaultPools"` holds one `"Type <m>"` object per
//!   memory type and `"CustomPools"` an array of pools per memory type, each with
//!   `"Blocks"` (by block id) and `"DedicatedAllocations"`.
//! - **D3D12MA 2.x** (D3D12 Memory Allocator 2.0 and later): `Allocator::BuildStatsString
//!   (&str, TRUE)`. `"General"."API"` is `"Direct3D 12"`; `"MemoryInfo"` holds the memory
//!   segment groups `"L0"` (system memory) and `"L1"` (video memory; absent on UMA
//!   adapters); `"DefaultPools"` is keyed by heap type (`"DEFAULT"`, `"UPLOAD"`,
//!   `"READBACK"`, `"GPU_UPLOAD"`, or `"DEFAULT - Buffers"` and so on on resource heap
//!   tier 1) and `"CustomPools"` by heap type (`"CUSTOM"` among them).
//!
//! VMA 2.x dumps (a `"Total"` with `"Blocks"`, heaps at the top level) and dumps built
//! without the detailed map (no `"DefaultPools"`) are refused with a message saying so.
//! The file may be UTF-8 (with or without a byte-order mark) or UTF-16 with a byte-order
//! mark, as D3D12MA's wide string is when written out unchanged.
//!
//! # How a dump maps onto the view
//!
//! - Each memory heap (VMA heap, D3D12 memory segment group) is a top-level domain, ids
//!   from 0 in the dump's order (VMA: by heap index; D3D12: `L0`, then `L1`). Its kind is
//!   `gpu-local` for a `DEVICE_LOCAL` heap (VMA) or video memory (D3D12 `L1`, or `L0` on a
//!   UMA adapter), else `gpu-shared`. Its capacity is the heap's `"Size"` (VMA) or the
//!   adapter's memory from `"General"` (D3D12: `DedicatedVideoMemory` for `L1`,
//!   `SharedSystemMemory` for `L0`, their sum for a UMA `L0`; 0 when absent). Its budget is
//!   the dump's one `"Budget"` sample (taken at time 0; over budget when the usage exceeds
//!   it).
//! - Each memory type's default pool (D3D12: each heap type's default pool) and each custom
//!   pool that has blocks is a sub-allocating domain of kind `pool` whose parent is its
//!   heap, numbered after the heaps. Its capacity is the sum of its blocks' sizes. D3D12
//!   heap types lie where D3D12MA counts them: `DEFAULT` and `GPU_UPLOAD` in `L1`, `UPLOAD`
//!   and `READBACK` in `L0`, a `CUSTOM` pool in `L1` when its flags say `MEMORY_POOL_L1`
//!   and in `L0` otherwise; everything in `L0` on a UMA adapter. On resource heap tier 1
//!   D3D12MA lists a heap type's committed resources under each of its three sub-types:
//!   they are read from the first only.
//! - Each block is a [`GpuBlock`] of the heap domain, with the pool domain as its
//!   `sub_domain` and its non-`FREE` sub-allocations as [`SubAllocation`]s; its name is
//!   `Block <id>` with the dump's block id.
//! - A dump carries no addresses, so the heap's allocations (blocks and dedicated
//!   allocations) are given synthetic ones: laid end to end from 0 in the order the dump
//!   lists them (pools in type order, each pool's blocks by id, then its dedicated
//!   allocations).
//! - Every sub-allocation is a [`GpuResource`] of its pool domain, its `addr` its offset in
//!   its block. A dedicated allocation (VMA) or committed resource (D3D12MA) is device
//!   memory of its own, which both allocators count as a block of the heap: it is a
//!   [`GpuResource`] of the heap domain itself, at its synthetic address.
//! - Kinds: `BUFFER` is a buffer; an image (`IMAGE_OPTIMAL`, `IMAGE_LINEAR`,
//!   `IMAGE_UNKNOWN`; D3D12 `TEXTURE1D/2D/3D`) is a depth-stencil target when its usage
//!   flags allow depth-stencil attachment (`VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT`,
//!   `D3D12_RESOURCE_FLAG_ALLOW_DEPTH_STENCIL`), a render target when they allow colour
//!   attachment (`VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT`,
//!   `D3D12_RESOURCE_FLAG_ALLOW_RENDER_TARGET`), else a texture; `UNKNOWN` or a type this
//!   reader does not know is unknown.
//! - Dumps carry no dimensions or formats: width, height, depth-or-layers and mip levels
//!   are 0 and the format is empty. The name is `"Name"`, else the `"CustomData"` string
//!   (VMA and D3D12MA write the user-data pointer there), else empty. No context.
//! - A heap domain's live bytes and count are its blocks and dedicated allocations (the
//!   dump's heap `"BlockBytes"` / `"BlockCount"`); a pool domain's are its
//!   sub-allocations.
//!
//! After reading, the dump's own figures are checked: each block's `"Allocations"` and
//! `"UnusedBytes"` against its sub-allocations, and `"Total"` (block and allocation counts
//! and bytes, unused range count and bytes, smallest and largest allocation where given)
//! against the sums of the blocks and dedicated allocations. A dump that disagrees with
//! itself (hand-edited, or not from these allocators) is refused, naming the field and
//! both numbers.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use super::model::{
    GpuBlock, GpuBudget, GpuDomain, GpuKind, GpuResource, GpuSource, GpuView, OverBudget, SubAllocation,
};
use crate::table::{size, Align, Table};

/// Why a dump could not be read: the file (when read from one), the JSON field, and what
/// is wrong with it. Displays as `dump.json: "DefaultPools"."Type 1"."Blocks"."0"
/// ."Suballocations"[3]: "Size" is missing`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpError {
    file: Option<String>,
    field: String,
    problem: String,
}

impl DumpError {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> DumpError {
        DumpError { file: None, field: field.into(), problem: problem.into() }
    }

    /// The file the dump was read from, if it was read from one.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// The JSON field at fault, as a path (`"Total"`, `"DefaultPools"."Type 0"`); empty
    /// when the fault is the file or the whole text.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong, in words.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}: ")?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}", self.problem)
    }
}

impl std::error::Error for DumpError {}

type Result<T> = std::result::Result<T, DumpError>;

/// Reads a VMA or D3D12MA JSON dump from a file into a view (see the module's
/// documentation). Errors name the file.
pub fn read_dump(path: &Path) -> std::result::Result<GpuView, DumpError> {
    let shown = path.display().to_string();
    let with_file = |mut e: DumpError| {
        e.file = Some(shown.clone());
        e
    };
    let bytes = std::fs::read(path).map_err(|e| with_file(DumpError::new("", format!("cannot read the dump: {e}"))))?;
    let text = decode(&bytes).map_err(with_file)?;
    let mut view = parse_dump(&text).map_err(with_file)?;
    if let GpuSource::Dump { path: p, .. } = &mut view.source {
        *p = shown;
    }
    Ok(view)
}

/// The file's text: UTF-8 (a byte-order mark dropped) or UTF-16 with a byte-order mark.
fn decode(bytes: &[u8]) -> Result<String> {
    let utf16 = |big: bool| -> Result<String> {
        let body = &bytes[2..];
        if body.len() % 2 != 0 {
            return Err(DumpError::new("", "the UTF-16 text has an odd number of bytes"));
        }
        let units = body.chunks_exact(2).map(|c| {
            if big {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_le_bytes([c[0], c[1]])
            }
        });
        char::decode_utf16(units)
            .collect::<std::result::Result<String, _>>()
            .map_err(|e| DumpError::new("", format!("the UTF-16 text is not valid: {e}")))
    };
    match bytes {
        [0xFF, 0xFE, ..] => utf16(false),
        [0xFE, 0xFF, ..] => utf16(true),
        _ => String::from_utf8(bytes.to_vec())
            .map_err(|e| DumpError::new("", format!("the dump is not UTF-8 text: {e}"))),
    }
}

/// Reads a VMA or D3D12MA JSON dump's text into a view (see the module's documentation);
/// the view's source path is empty ([`read_dump`] fills it in).
pub fn parse_dump(text: &str) -> std::result::Result<GpuView, DumpError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let root: Value = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() { "the JSON ends early (a truncated dump?)" } else { "not valid JSON" };
        DumpError::new("", format!("{what}: {e}"))
    })?;
    let dump = read_any(&root)?;
    dump.check()?;
    Ok(dump.into_view())
}

// ---------------------------------------------------------------------------------------
// Walking the JSON with the path of every value, for the errors.

/// A JSON value and where it is in the dump.
#[derive(Clone, Copy)]
struct At<'a> {
    value: &'a Value,
    /// The value's path as a chain of steps on the stack of the calls walking down to it
    /// (`None` for the root), so that a path is only written out for an error.
    node: Option<&'a PathNode<'a>>,
}

/// The last step of a path, and the path before it.
struct PathNode<'a> {
    parent: Option<&'a PathNode<'a>>,
    step: Step<'a>,
}

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn path_text(node: Option<&PathNode<'_>>) -> String {
    let mut steps = Vec::new();
    let mut at = node;
    while let Some(n) = at {
        steps.push(&n.step);
        at = n.parent;
    }
    let mut out = String::new();
    for step in steps.iter().rev() {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&format!("\"{k}\""));
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// What a JSON value is, for an error: `the string "12"`, `an array`.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => {
            let shown: String = s.chars().take(40).collect();
            let more = if shown.len() < s.len() { "..." } else { "" };
            format!("the string \"{shown}{more}\"")
        }
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// An object's entries with their path nodes, which this owns for the `At`s it lends.
struct Entries<'a> {
    nodes: Vec<(&'a str, PathNode<'a>, &'a Value)>,
}

impl Entries<'_> {
    fn iter(&self) -> impl Iterator<Item = (&str, At<'_>)> {
        self.nodes.iter().map(|(key, node, value)| (*key, At { value, node: Some(node) }))
    }
}

impl<'a> At<'a> {
    fn path(&self) -> String {
        path_text(self.node)
    }

    fn fail(&self, problem: impl Into<String>) -> DumpError {
        DumpError::new(self.path(), problem)
    }

    fn wrong(&self, expected: &str) -> DumpError {
        self.fail(format!("expected {expected}, found {}", describe(self.value)))
    }

    fn object(&self) -> Result<&'a Map<String, Value>> {
        self.value.as_object().ok_or_else(|| self.wrong("an object"))
    }

    fn array(&self) -> Result<&'a Vec<Value>> {
        self.value.as_array().ok_or_else(|| self.wrong("an array"))
    }

    fn u64(&self) -> Result<u64> {
        self.value.as_u64().ok_or_else(|| self.wrong("a non-negative integer"))
    }

    fn str(&self) -> Result<&'a str> {
        self.value.as_str().ok_or_else(|| self.wrong("a string"))
    }

    /// The path node of the field `key`, to build its `At` from.
    fn key_node<'k>(&self, key: &'k str) -> PathNode<'k>
    where
        'a: 'k,
    {
        PathNode { parent: self.node, step: Step::Key(key) }
    }

    /// The object's field `key`, or `None`; an error when this is not an object.
    fn get(&self, key: &str) -> Result<Option<&'a Value>> {
        Ok(self.object()?.get(key))
    }

    /// The object's field `key`, with a "missing" error naming it.
    fn need(&self, key: &str) -> Result<&'a Value> {
        self.get(key)?.ok_or_else(|| self.fail(format!("\"{key}\" is missing")))
    }
}

/// The field `key` as an integer; errors name the field.
fn field_u64(at: &At<'_>, key: &str) -> Result<u64> {
    with_field(at, key, |field| field.u64())
}

fn opt_field_u64(at: &At<'_>, key: &str) -> Result<Option<u64>> {
    match at.get(key)? {
        None => Ok(None),
        Some(_) => field_u64(at, key).map(Some),
    }
}

/// The field `key` as a string; errors name the field.
fn field_str(at: &At<'_>, key: &str) -> Result<String> {
    with_field(at, key, |field| field.str().map(str::to_owned))
}

fn opt_field_str(at: &At<'_>, key: &str) -> Result<Option<String>> {
    match at.get(key)? {
        None => Ok(None),
        Some(_) => field_str(at, key).map(Some),
    }
}

/// A `"Flags"` array's string items (numbers, which the allocators write for flags they do
/// not name, are skipped); empty when absent.
fn field_flags(at: &At<'_>, key: &str) -> Result<Vec<String>> {
    let Some(value) = at.get(key)? else {
        return Ok(Vec::new());
    };
    let node = at.key_node(key);
    let list = At { value, node: Some(&node) };
    let mut flags = Vec::new();
    for (i, item) in list.array()?.iter().enumerate() {
        match item {
            Value::String(s) => flags.push(s.clone()),
            Value::Number(_) => {}
            other => {
                let item_node = PathNode { parent: Some(&node), step: Step::Index(i) };
                return Err(At { value: other, node: Some(&item_node) }.wrong("a flag name or number"));
            }
        }
    }
    Ok(flags)
}

/// Calls `f` with the field `key` (which must be there).
fn with_field<T>(at: &At<'_>, key: &str, f: impl FnOnce(At<'_>) -> Result<T>) -> Result<T> {
    let value = at.need(key)?;
    let node = at.key_node(key);
    f(At { value, node: Some(&node) })
}

/// Calls `f` with the field `key`, or returns `None` when it is absent.
fn with_opt_field<T>(at: &At<'_>, key: &str, f: impl FnOnce(At<'_>) -> Result<T>) -> Result<Option<T>> {
    match at.get(key)? {
        None => Ok(None),
        Some(_) => with_field(at, key, f).map(Some),
    }
}

/// The entries of the object `at`.
fn entries<'a>(at: &At<'a>) -> Result<Entries<'a>> {
    let map = at.object()?;
    Ok(Entries { nodes: map.iter().map(|(k, v)| (k.as_str(), at.key_node(k.as_str()), v)).collect() })
}

/// Calls `f` on each item of the array `at`.
fn each_item(at: &At<'_>, mut f: impl FnMut(At<'_>) -> Result<()>) -> Result<()> {
    for (i, value) in at.array()?.iter().enumerate() {
        let node = PathNode { parent: at.node, step: Step::Index(i) };
        f(At { value, node: Some(&node) })?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The dump as read, before it becomes a view.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Vma,
    D3d12ma,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Vma => "vma",
            Format::D3d12ma => "d3d12ma",
        }
    }
}

/// One `"Stats"` object's figures (the `"Total"` one here).
#[derive(Debug, Default)]
struct Stats {
    block_count: u64,
    block_bytes: u64,
    allocation_count: u64,
    allocation_bytes: u64,
    unused_range_count: u64,
    allocation_size_min: Option<u64>,
    allocation_size_max: Option<u64>,
}

fn read_stats(at: &At<'_>) -> Result<Stats> {
    Ok(Stats {
        block_count: field_u64(at, "BlockCount")?,
        block_bytes: field_u64(at, "BlockBytes")?,
        allocation_count: field_u64(at, "AllocationCount")?,
        allocation_bytes: field_u64(at, "AllocationBytes")?,
        unused_range_count: field_u64(at, "UnusedRangeCount")?,
        allocation_size_min: opt_field_u64(at, "AllocationSizeMin")?,
        allocation_size_max: opt_field_u64(at, "AllocationSizeMax")?,
    })
}

#[derive(Debug)]
struct Heap {
    name: String,
    kind: &'static str,
    capacity: u64,
    /// `"BudgetBytes"` and `"UsageBytes"`.
    budget: Option<(u64, u64)>,
}

#[derive(Debug)]
struct Alloc {
    offset: u64,
    size: u64,
    kind: GpuKind,
    name: String,
}

#[derive(Debug)]
struct Block {
    id: u64,
    size: u64,
    unused_bytes: u64,
    unused_ranges: u64,
    allocations: Vec<Alloc>,
}

#[derive(Debug)]
struct Pool {
    name: String,
    heap: usize,
    blocks: Vec<Block>,
    dedicated: Vec<Alloc>,
}

#[derive(Debug)]
struct Dump {
    format: Format,
    heaps: Vec<Heap>,
    pools: Vec<Pool>,
    total: Stats,
}

fn read_any(root: &Value) -> Result<Dump> {
    let at = At { value: root, node: None };
    let Some(map) = root.as_object() else {
        return Err(DumpError::new(
            "",
            format!("not a VMA or D3D12MA dump: the JSON is {}, not an object", describe(root)),
        ));
    };
    if !map.contains_key("General") {
        let vma2 = map.contains_key("Heap 0")
            || map.get("Total").and_then(Value::as_object).is_some_and(|t| t.contains_key("Blocks"));
        let problem = if vma2 {
            "a VMA 2.x dump (from vk_mem_alloc.h before 3.0), which this reader does not read: write it with VMA 3.x"
        } else {
            "neither a VMA nor a D3D12MA dump: \"General\" is missing (a dump has \"General\", \"Total\" and \
             \"MemoryInfo\")"
        };
        return Err(DumpError::new("", problem));
    }
    let api = with_field(&at, "General", |g| field_str(&g, "API"))?;
    let format = match api.as_str() {
        "Vulkan" => Format::Vma,
        "Direct3D 12" => Format::D3d12ma,
        other => {
            return Err(DumpError::new(
                "\"General\"",
                format!("\"API\" is \"{other}\": neither a VMA dump (\"Vulkan\") nor a D3D12MA one (\"Direct3D 12\")"),
            ))
        }
    };
    let total = with_field(&at, "Total", |t| read_stats(&t))?;
    if !map.contains_key("DefaultPools") {
        let call = match format {
            Format::Vma => "vmaBuildStatsString(allocator, &str, VK_TRUE)",
            Format::D3d12ma => "Allocator::BuildStatsString(&str, TRUE)",
        };
        return Err(DumpError::new(
            "",
            format!("the dump has no detailed map (\"DefaultPools\" is missing): write it with {call}"),
        ));
    }
    match format {
        Format::Vma => read_vma(&at, total),
        Format::D3d12ma => read_d3d12ma(&at, total),
    }
}

/// `"Type 3"` → 3 (also `"Heap 1"`); an error naming the object and the key otherwise.
fn numbered(key: &str, prefix: &str, within: &At<'_>, what: &str) -> Result<u64> {
    key.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| within.fail(format!("\"{key}\" is not a {what} (\"{prefix}<n>\")")))
}

fn read_vma(at: &At<'_>, total: Stats) -> Result<Dump> {
    // Heaps by index, and each memory type's heap.
    let mut heaps: BTreeMap<u64, Heap> = BTreeMap::new();
    let mut type_heap: BTreeMap<u64, u64> = BTreeMap::new();
    with_field(at, "MemoryInfo", |info| {
        for (key, heap) in entries(&info)?.iter() {
            let index = numbered(key, "Heap ", &info, "memory heap")?;
            let flags = field_flags(&heap, "Flags")?;
            let local = flags.iter().any(|f| f == "DEVICE_LOCAL");
            let budget =
                with_opt_field(&heap, "Budget", |b| Ok((field_u64(&b, "BudgetBytes")?, field_u64(&b, "UsageBytes")?)))?;
            with_opt_field(&heap, "MemoryPools", |pools| {
                for (type_key, _) in entries(&pools)?.iter() {
                    let t = numbered(type_key, "Type ", &pools, "memory type")?;
                    type_heap.insert(t, index);
                }
                Ok(())
            })?;
            let name =
                if flags.is_empty() { format!("Heap {index}") } else { format!("Heap {index} ({})", flags.join(", ")) };
            heaps.insert(
                index,
                Heap {
                    name,
                    kind: if local { "gpu-local" } else { "gpu-shared" },
                    capacity: field_u64(&heap, "Size")?,
                    budget,
                },
            );
        }
        Ok(())
    })?;
    let heap_slot: BTreeMap<u64, usize> = heaps.keys().enumerate().map(|(slot, &index)| (index, slot)).collect();
    let heap_of = |t: u64, within: &At<'_>, key: &str| -> Result<(u64, usize)> {
        let heap = type_heap.get(&t).copied().ok_or_else(|| {
            within.fail(format!("\"{key}\": memory type {t} is in no heap's \"MemoryPools\" in \"MemoryInfo\""))
        })?;
        Ok((heap, heap_slot[&heap]))
    };

    // Pools: default ones by memory type, then custom ones by memory type.
    let mut default: BTreeMap<u64, Pool> = BTreeMap::new();
    with_field(at, "DefaultPools", |pools| {
        for (key, pool) in entries(&pools)?.iter() {
            let t = numbered(key, "Type ", &pools, "memory type")?;
            let (heap, slot) = heap_of(t, &pools, key)?;
            let mut p = Pool {
                name: format!("Type {t} in heap {heap}"),
                heap: slot,
                blocks: Vec::new(),
                dedicated: Vec::new(),
            };
            read_pool_contents(&pool, Format::Vma, &mut p)?;
            default.insert(t, p);
        }
        Ok(())
    })?;
    let mut custom: BTreeMap<u64, Vec<Pool>> = BTreeMap::new();
    with_opt_field(at, "CustomPools", |pools| {
        for (key, list) in entries(&pools)?.iter() {
            let t = numbered(key, "Type ", &pools, "memory type")?;
            let (heap, slot) = heap_of(t, &pools, key)?;
            let mut read = Vec::new();
            each_item(&list, |pool| {
                let label = match opt_field_str(&pool, "Name")? {
                    Some(n) => n,
                    None => read.len().to_string(),
                };
                let mut p = Pool {
                    name: format!("Pool {label} (type {t} in heap {heap})"),
                    heap: slot,
                    blocks: Vec::new(),
                    dedicated: Vec::new(),
                };
                read_pool_contents(&pool, Format::Vma, &mut p)?;
                read.push(p);
                Ok(())
            })?;
            custom.insert(t, read);
        }
        Ok(())
    })?;
    let pools = default.into_values().chain(custom.into_values().flatten()).collect();
    Ok(Dump { format: Format::Vma, heaps: heaps.into_values().collect(), pools, total })
}

/// D3D12MA's heap types, in its order (`HeapTypeNames`), with the memory segment group a
/// standard one lives in on a non-UMA adapter (`None`: custom, given by the pool's flags).
const D3D12_HEAP_TYPES: [(&str, Option<D3d12Segment>); 5] = [
    ("DEFAULT", Some(D3d12Segment::L1)),
    ("UPLOAD", Some(D3d12Segment::L0)),
    ("READBACK", Some(D3d12Segment::L0)),
    ("CUSTOM", None),
    ("GPU_UPLOAD", Some(D3d12Segment::L1)),
];

/// The sub-types a resource heap tier 1 adapter splits a default pool into.
const D3D12_SUB_TYPES: [&str; 3] = [" - Buffers", " - Textures", " - Textures RT/DS"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum D3d12Segment {
    L0,
    L1,
}

/// A D3D12MA pool key (`"DEFAULT"`, `"DEFAULT - Textures"`) → (heap type index, sub-type
/// index).
fn d3d12_heap_type(key: &str) -> Option<(usize, usize)> {
    D3D12_HEAP_TYPES.iter().enumerate().find_map(|(i, (name, _))| {
        let rest = key.strip_prefix(name)?;
        if rest.is_empty() {
            Some((i, 0))
        } else {
            D3D12_SUB_TYPES.iter().position(|s| *s == rest).map(|sub| (i, sub + 1))
        }
    })
}

fn read_d3d12ma(at: &At<'_>, total: Stats) -> Result<Dump> {
    let (dedicated_video, shared_system, uma) = with_field(at, "General", |general| {
        let uma = with_opt_field(&general, "UMA", |uma| uma.value.as_bool().ok_or_else(|| uma.wrong("true or false")))?;
        Ok((opt_field_u64(&general, "DedicatedVideoMemory")?, opt_field_u64(&general, "SharedSystemMemory")?, uma))
    })?;
    let mut found = [None, None];
    with_field(at, "MemoryInfo", |info| {
        for (key, group) in entries(&info)?.iter() {
            let slot = match key {
                "L0" => 0,
                "L1" => 1,
                other => return Err(info.fail(format!("\"{other}\" is not a memory segment group (\"L0\" or \"L1\")"))),
            };
            let budget = with_opt_field(&group, "Budget", |b| {
                Ok((field_u64(&b, "BudgetBytes")?, field_u64(&b, "UsageBytes")?))
            })?;
            found[slot] = Some(budget);
        }
        Ok(())
    })?;
    let has_l1 = found[1].is_some();
    // Older dumps do not say: a UMA adapter has no L1.
    let uma = uma.unwrap_or(!has_l1);
    if found[0].is_none() || (!uma && !has_l1) {
        let missing = if found[0].is_none() { "L0" } else { "L1" };
        return Err(DumpError::new("\"MemoryInfo\"", format!("\"{missing}\" is missing")));
    }
    let mut heaps = Vec::new();
    let mut slot_of = [0usize; 2];
    for (segment, budget) in found.iter().enumerate() {
        let Some(budget) = budget else { continue };
        let (name, kind, capacity) = match (segment, uma) {
            (0, true) => (
                "L0 (unified memory)",
                "gpu-local",
                dedicated_video.unwrap_or(0).saturating_add(shared_system.unwrap_or(0)),
            ),
            (0, false) => ("L0 (system memory)", "gpu-shared", shared_system.unwrap_or(0)),
            _ => ("L1 (video memory)", "gpu-local", dedicated_video.unwrap_or(0)),
        };
        slot_of[segment] = heaps.len();
        heaps.push(Heap { name: name.to_owned(), kind, capacity, budget: *budget });
    }
    let segment_slot = |segment: D3d12Segment| -> usize {
        if uma {
            slot_of[0]
        } else {
            match segment {
                D3d12Segment::L0 => slot_of[0],
                D3d12Segment::L1 => slot_of[1],
            }
        }
    };
    let heap_name = |slot: usize| if heaps.len() == 1 || slot == slot_of[0] { "L0" } else { "L1" };

    // Default pools by (heap type, sub-type). On resource heap tier 1 each sub-type lists
    // its heap type's committed allocations again: they are taken from the first only.
    let mut default: BTreeMap<(usize, usize), Pool> = BTreeMap::new();
    with_field(at, "DefaultPools", |pools| {
        for (key, pool) in entries(&pools)?.iter() {
            let Some((ty, sub)) = d3d12_heap_type(key).filter(|&(ty, _)| D3D12_HEAP_TYPES[ty].1.is_some()) else {
                return Err(pools.fail(format!(
                    "\"{key}\" is not a D3D12MA default heap type (\"DEFAULT\", \"UPLOAD\", \"READBACK\", \
                     \"GPU_UPLOAD\", possibly with \" - Buffers\", \" - Textures\" or \" - Textures RT/DS\")"
                )));
            };
            let slot = segment_slot(D3D12_HEAP_TYPES[ty].1.unwrap_or(D3d12Segment::L0));
            let mut p = Pool {
                name: format!("{key} in {}", heap_name(slot)),
                heap: slot,
                blocks: Vec::new(),
                dedicated: Vec::new(),
            };
            read_pool_contents(&pool, Format::D3d12ma, &mut p)?;
            default.insert((ty, sub), p);
        }
        Ok(())
    })?;
    let mut seen_committed = [false; 5];
    for ((ty, _), pool) in default.iter_mut() {
        if seen_committed[*ty] {
            pool.dedicated.clear();
        }
        seen_committed[*ty] = true;
    }
    let mut custom: BTreeMap<usize, Vec<Pool>> = BTreeMap::new();
    with_opt_field(at, "CustomPools", |pools| {
        for (key, list) in entries(&pools)?.iter() {
            let Some((ty, 0)) = d3d12_heap_type(key) else {
                return Err(pools.fail(format!(
                    "\"{key}\" is not a D3D12MA heap type (\"DEFAULT\", \"UPLOAD\", \"READBACK\", \"CUSTOM\", \
                     \"GPU_UPLOAD\")"
                )));
            };
            let mut read = Vec::new();
            each_item(&list, |pool| {
                let flags = field_flags(&pool, "Flags")?;
                let segment = match D3D12_HEAP_TYPES[ty].1 {
                    Some(s) => s,
                    None if flags.iter().any(|f| f == "MEMORY_POOL_L1") => D3d12Segment::L1,
                    None => D3d12Segment::L0,
                };
                let slot = segment_slot(segment);
                let label = match opt_field_str(&pool, "Name")? {
                    Some(n) => n,
                    None => read.len().to_string(),
                };
                let mut p = Pool {
                    name: format!("Pool {label} ({key} in {})", heap_name(slot)),
                    heap: slot,
                    blocks: Vec::new(),
                    dedicated: Vec::new(),
                };
                read_pool_contents(&pool, Format::D3d12ma, &mut p)?;
                read.push(p);
                Ok(())
            })?;
            custom.insert(ty, read);
        }
        Ok(())
    })?;
    let pools = default.into_values().chain(custom.into_values().flatten()).collect();
    Ok(Dump { format: Format::D3d12ma, heaps, pools, total })
}

/// Reads a pool's `"Blocks"` and `"DedicatedAllocations"` into `pool`.
fn read_pool_contents(at: &At<'_>, format: Format, pool: &mut Pool) -> Result<()> {
    let read_blocks = |blocks: At<'_>| -> Result<Vec<Block>> {
        let mut read = Vec::new();
        for (key, block) in entries(&blocks)?.iter() {
            let id: u64 = key.parse().map_err(|_| blocks.fail(format!("block id \"{key}\" is not a number")))?;
            read.push(read_block(&block, id, format)?);
        }
        read.sort_by_key(|b| b.id);
        Ok(read)
    };
    pool.blocks = with_opt_field(at, "Blocks", read_blocks)?.unwrap_or_default();
    with_opt_field(at, "DedicatedAllocations", |list| {
        each_item(&list, |alloc| {
            let (kind, name) = read_kind_and_name(&alloc, format)?;
            pool.dedicated.push(Alloc { offset: 0, size: field_u64(&alloc, "Size")?, kind, name });
            Ok(())
        })
    })?;
    Ok(())
}

fn read_block(at: &At<'_>, id: u64, format: Format) -> Result<Block> {
    let size = field_u64(at, "TotalBytes")?;
    let unused_bytes = field_u64(at, "UnusedBytes")?;
    let declared = field_u64(at, "Allocations")?;
    let unused_ranges = field_u64(at, "UnusedRanges")?;
    let mut allocations = Vec::new();
    with_opt_field(at, "Suballocations", |list| {
        each_item(&list, |sub| {
            let offset = field_u64(&sub, "Offset")?;
            let ty = field_str(&sub, "Type")?;
            let len = field_u64(&sub, "Size")?;
            if offset.checked_add(len).is_none_or(|end| end > size) {
                return Err(sub.fail(format!(
                    "\"Offset\" {offset} + \"Size\" {len} is past the block's end (\"TotalBytes\" {size})"
                )));
            }
            if ty == "FREE" {
                return Ok(());
            }
            let (kind, name) = read_kind_and_name(&sub, format)?;
            allocations.push(Alloc { offset, size: len, kind, name });
            Ok(())
        })
    })?;
    allocations.sort_by_key(|a| a.offset);
    for pair in allocations.windows(2) {
        // In the block (checked above), so the end does not overflow.
        if pair[1].offset < pair[0].offset + pair[0].size {
            return Err(at.fail(format!(
                "the allocations at offsets {} ({} bytes) and {} overlap",
                pair[0].offset, pair[0].size, pair[1].offset
            )));
        }
    }
    let listed = allocations.len() as u64;
    if listed != declared {
        return Err(
            at.fail(format!("\"Allocations\" is {declared}, but \"Suballocations\" lists {listed} allocations"))
        );
    }
    // Apart and in the block, so they add up to no more than its size.
    let used: u64 = allocations.iter().map(|a| a.size).sum();
    if size - used != unused_bytes {
        return Err(at.fail(format!(
            "\"UnusedBytes\" is {unused_bytes}, but \"TotalBytes\" {size} less the allocations' {used} bytes is {}",
            size - used
        )));
    }
    Ok(Block { id, size, unused_bytes, unused_ranges, allocations })
}

/// An allocation's kind (from `"Type"` and `"Usage"`) and name (`"Name"`, else
/// `"CustomData"`).
fn read_kind_and_name(at: &At<'_>, format: Format) -> Result<(GpuKind, String)> {
    let ty = field_str(at, "Type")?;
    let usage = opt_field_u64(at, "Usage")?.unwrap_or(0);
    let kind = match (format, ty.as_str()) {
        (_, "BUFFER") => GpuKind::Buffer,
        (Format::Vma, "IMAGE_OPTIMAL" | "IMAGE_LINEAR" | "IMAGE_UNKNOWN") => {
            // VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT, VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT.
            image_kind(usage & 0x20 != 0, usage & 0x10 != 0)
        }
        (Format::D3d12ma, "TEXTURE1D" | "TEXTURE2D" | "TEXTURE3D") => {
            // D3D12_RESOURCE_FLAG_ALLOW_DEPTH_STENCIL, D3D12_RESOURCE_FLAG_ALLOW_RENDER_TARGET.
            image_kind(usage & 0x2 != 0, usage & 0x1 != 0)
        }
        _ => GpuKind::Unknown,
    };
    let name = match opt_field_str(at, "Name")? {
        Some(name) => name,
        None => match at.get("CustomData")? {
            None => String::new(),
            // D3D12MA's virtual blocks write it as a number.
            Some(Value::Number(n)) => n.to_string(),
            Some(_) => field_str(at, "CustomData")?,
        },
    };
    Ok((kind, name))
}

fn image_kind(depth_stencil: bool, colour: bool) -> GpuKind {
    if depth_stencil {
        GpuKind::DepthStencil
    } else if colour {
        GpuKind::RenderTarget
    } else {
        GpuKind::Texture
    }
}

impl Dump {
    /// Checks `"Total"` against the sums of the blocks and dedicated allocations.
    fn check(&self) -> Result<()> {
        let mut sums = Stats::default();
        let mut unused_bytes = 0u64;
        let note = |sums: &mut Stats, size: u64| {
            sums.allocation_count += 1;
            sums.allocation_bytes = sums.allocation_bytes.saturating_add(size);
            sums.allocation_size_min = Some(sums.allocation_size_min.map_or(size, |m| m.min(size)));
            sums.allocation_size_max = Some(sums.allocation_size_max.map_or(size, |m| m.max(size)));
        };
        for pool in &self.pools {
            for block in &pool.blocks {
                sums.block_count += 1;
                sums.block_bytes = sums.block_bytes.saturating_add(block.size);
                sums.unused_range_count = sums.unused_range_count.saturating_add(block.unused_ranges);
                unused_bytes = unused_bytes.saturating_add(block.unused_bytes);
                for a in &block.allocations {
                    note(&mut sums, a.size);
                }
            }
            for a in &pool.dedicated {
                sums.block_count += 1;
                sums.block_bytes = sums.block_bytes.saturating_add(a.size);
                note(&mut sums, a.size);
            }
        }
        let total = &self.total;
        let mismatch = |field: &str, dumped: u64, summed: u64, what: &str| -> Result<()> {
            if dumped == summed {
                Ok(())
            } else {
                Err(DumpError::new("\"Total\"", format!("\"{field}\" is {dumped}, but {what} {summed}")))
            }
        };
        let blocks = "the dump's blocks and dedicated allocations come to";
        let allocations = "the dump's allocations (in blocks and dedicated) come to";
        mismatch("BlockCount", total.block_count, sums.block_count, blocks)?;
        mismatch("BlockBytes", total.block_bytes, sums.block_bytes, blocks)?;
        mismatch("AllocationCount", total.allocation_count, sums.allocation_count, allocations)?;
        mismatch("AllocationBytes", total.allocation_bytes, sums.allocation_bytes, allocations)?;
        mismatch(
            "UnusedRangeCount",
            total.unused_range_count,
            sums.unused_range_count,
            "the blocks' \"UnusedRanges\" come to",
        )?;
        // Every block byte is allocated or unused, so the total's unused bytes are its
        // block bytes less its allocation bytes.
        mismatch(
            "BlockBytes\" - \"AllocationBytes",
            total.block_bytes.saturating_sub(total.allocation_bytes),
            unused_bytes,
            "the blocks' \"UnusedBytes\" come to",
        )?;
        if let (Some(dumped), Some(summed)) = (total.allocation_size_min, sums.allocation_size_min) {
            mismatch("AllocationSizeMin", dumped, summed, "the smallest allocation is")?;
        }
        if let (Some(dumped), Some(summed)) = (total.allocation_size_max, sums.allocation_size_max) {
            mismatch("AllocationSizeMax", dumped, summed, "the largest allocation is")?;
        }
        Ok(())
    }

    fn into_view(self) -> GpuView {
        let heap_count = self.heaps.len();
        let mut domains: Vec<GpuDomain> = self
            .heaps
            .iter()
            .enumerate()
            .map(|(id, heap)| GpuDomain {
                id: id as u32,
                name: heap.name.clone(),
                kind: heap.kind.to_owned(),
                capacity: heap.capacity,
                parent: None,
                live_bytes: 0,
                live_count: 0,
                peak: None,
                budget: heap.budget.map(|(budget, usage)| GpuBudget {
                    budget,
                    usage,
                    min_budget: budget,
                    peak_usage: usage,
                    peak_usage_time_ns: 0,
                    samples: 1,
                    over_budget: if usage > budget {
                        vec![OverBudget { from_ns: 0, to_ns: 0, max_excess: usage - budget, after_label: None }]
                    } else {
                        Vec::new()
                    },
                }),
            })
            .collect();
        let mut resources = Vec::new();
        let mut blocks = Vec::new();
        // The next synthetic address in each heap.
        let mut cursor = vec![0u64; heap_count];
        for pool in self.pools {
            let heap = pool.heap;
            let heap_id = heap as u32;
            if !pool.blocks.is_empty() {
                let id = domains.len() as u32;
                let mut domain = GpuDomain {
                    id,
                    name: pool.name.clone(),
                    kind: "pool".to_owned(),
                    capacity: 0,
                    parent: Some(heap_id),
                    live_bytes: 0,
                    live_count: 0,
                    peak: None,
                    budget: None,
                };
                for block in pool.blocks {
                    let addr = cursor[heap];
                    cursor[heap] = cursor[heap].saturating_add(block.size);
                    domain.capacity = domain.capacity.saturating_add(block.size);
                    domains[heap].live_bytes = domains[heap].live_bytes.saturating_add(block.size);
                    domains[heap].live_count += 1;
                    let mut subs = Vec::with_capacity(block.allocations.len());
                    for a in block.allocations {
                        domain.live_bytes = domain.live_bytes.saturating_add(a.size);
                        domain.live_count += 1;
                        resources.push(resource(id, a.offset, a.size, a.kind, a.name.clone()));
                        subs.push(SubAllocation {
                            offset: a.offset,
                            size: a.size,
                            kind: a.kind,
                            name: a.name,
                            context: String::new(),
                        });
                    }
                    blocks.push(GpuBlock {
                        domain: heap_id,
                        sub_domain: id,
                        addr,
                        size: block.size,
                        name: format!("Block {}", block.id),
                        context: String::new(),
                        allocations: subs,
                    });
                }
                domains.push(domain);
            }
            for a in pool.dedicated {
                let addr = cursor[heap];
                cursor[heap] = cursor[heap].saturating_add(a.size);
                domains[heap].live_bytes = domains[heap].live_bytes.saturating_add(a.size);
                domains[heap].live_count += 1;
                resources.push(resource(heap_id, addr, a.size, a.kind, a.name));
            }
        }
        resources.sort_by_key(|r| (r.domain, r.addr));
        blocks.sort_by_key(|b| (b.domain, b.addr));
        GpuView {
            source: GpuSource::Dump { path: String::new(), format: self.format.name().to_owned() },
            domains,
            resources,
            blocks,
            screen: None,
        }
    }
}

fn resource(domain: u32, addr: u64, size: u64, kind: GpuKind, name: String) -> GpuResource {
    GpuResource {
        domain,
        addr,
        size,
        kind,
        width: 0,
        height: 0,
        depth_or_layers: 0,
        mip_levels: 0,
        format: String::new(),
        name,
        context: String::new(),
    }
}

// ---------------------------------------------------------------------------------------
// Two dumps compared.

/// A figure before and after, and the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Change {
    /// In the first dump.
    pub before: u64,
    /// In the second dump.
    pub after: u64,
    /// `after - before`.
    pub delta: i64,
}

impl Change {
    fn new(before: u64, after: u64) -> Change {
        // Clamped: only a forged dump has figures past 2^63.
        let delta = (i128::from(after) - i128::from(before)).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        Change { before, after, delta }
    }
}

/// One domain's (or the totals') figures in both dumps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainChange {
    /// The domain's name, which matches the two dumps' domains ("Type 0 in heap 1");
    /// `total` for the totals.
    pub name: String,
    /// Its kind (`gpu-local`, `gpu-shared`, `pool`), from the dump that has it.
    pub kind: String,
    /// Memory blocks: for a heap, its blocks and dedicated allocations (each its own device
    /// memory, as the allocators count them); for a pool, its blocks.
    pub blocks: Change,
    /// Those blocks' bytes.
    pub block_bytes: Change,
    /// Allocations: for a heap, those in its blocks and its dedicated ones; for a pool,
    /// those in its blocks.
    pub allocations: Change,
    /// Those allocations' bytes.
    pub allocation_bytes: Change,
}

impl DomainChange {
    /// Whether any figure changed.
    pub fn changed(&self) -> bool {
        [self.blocks, self.block_bytes, self.allocations, self.allocation_bytes].iter().any(|c| c.delta != 0)
    }
}

/// Two dumps (or any two views) compared domain by domain, matched by name: where the
/// memory went between them ("the map grows after every swap-chain resize").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DumpDiff {
    /// The first view's source path.
    pub before: String,
    /// The second view's source path.
    pub after: String,
    /// Each domain in either view: the second view's in its order, then those only the
    /// first has. A domain missing from a view counts zero there.
    pub domains: Vec<DomainChange>,
    /// The sums over the heaps (the top-level domains): the dumps' `"Total"` figures.
    pub total: DomainChange,
}

/// One domain's figures in one view: blocks, block bytes, allocations, allocation bytes.
fn figures(view: &GpuView, domain: &GpuDomain) -> [u64; 4] {
    let id = domain.id;
    if domain.parent.is_none() {
        let children: Vec<u32> = view.domains.iter().filter(|d| d.parent == Some(id)).map(|d| d.id).collect();
        let (mut blocks, mut block_bytes) = (0u64, 0u64);
        for b in view.blocks.iter().filter(|b| b.domain == id) {
            blocks += 1;
            block_bytes = block_bytes.saturating_add(b.size);
        }
        let (mut allocations, mut allocation_bytes) = (0u64, 0u64);
        for r in &view.resources {
            if r.domain == id {
                blocks += 1;
                block_bytes = block_bytes.saturating_add(r.size);
            }
            if r.domain == id || children.contains(&r.domain) {
                allocations += 1;
                allocation_bytes = allocation_bytes.saturating_add(r.size);
            }
        }
        [blocks, block_bytes, allocations, allocation_bytes]
    } else {
        let (mut blocks, mut block_bytes) = (0u64, 0u64);
        for b in view.blocks.iter().filter(|b| b.sub_domain == id) {
            blocks += 1;
            block_bytes = block_bytes.saturating_add(b.size);
        }
        let (mut allocations, mut allocation_bytes) = (0u64, 0u64);
        for r in view.resources.iter().filter(|r| r.domain == id) {
            allocations += 1;
            allocation_bytes = allocation_bytes.saturating_add(r.size);
        }
        [blocks, block_bytes, allocations, allocation_bytes]
    }
}

fn source_path(view: &GpuView) -> String {
    match &view.source {
        GpuSource::Log { path, .. } | GpuSource::Dump { path, .. } => path.clone(),
    }
}

fn change(name: String, kind: String, before: [u64; 4], after: [u64; 4]) -> DomainChange {
    DomainChange {
        name,
        kind,
        blocks: Change::new(before[0], after[0]),
        block_bytes: Change::new(before[1], after[1]),
        allocations: Change::new(before[2], after[2]),
        allocation_bytes: Change::new(before[3], after[3]),
    }
}

/// Compares two dumps domain by domain (matched by name), with the totals over the heaps.
pub fn diff_dumps(before: &GpuView, after: &GpuView) -> DumpDiff {
    let find = |view: &GpuView, name: &str| view.domains.iter().find(|d| d.name == name).map(|d| figures(view, d));
    let mut domains = Vec::new();
    let mut total_before = [0u64; 4];
    let mut total_after = [0u64; 4];
    let add = |total: &mut [u64; 4], f: [u64; 4]| {
        for (t, v) in total.iter_mut().zip(f) {
            *t = t.saturating_add(v);
        }
    };
    for d in &after.domains {
        let a = figures(after, d);
        let b = find(before, &d.name).unwrap_or_default();
        if d.parent.is_none() {
            add(&mut total_after, a);
        }
        domains.push(change(d.name.clone(), d.kind.clone(), b, a));
    }
    for d in &before.domains {
        if d.parent.is_none() {
            add(&mut total_before, figures(before, d));
        }
        if !after.domains.iter().any(|a| a.name == d.name) {
            domains.push(change(d.name.clone(), d.kind.clone(), figures(before, d), [0; 4]));
        }
    }
    DumpDiff {
        before: source_path(before),
        after: source_path(after),
        domains,
        total: change("total".to_owned(), String::new(), total_before, total_after),
    }
}

/// A signed byte count, human-readable: `+32.0 MiB`, `-512 B`, `0`.
fn signed_size(delta: i64) -> String {
    match delta.signum() {
        0 => "0".to_owned(),
        1 => format!("+{}", size(delta.unsigned_abs())),
        _ => format!("-{}", size(delta.unsigned_abs())),
    }
}

fn signed(delta: i64) -> String {
    if delta > 0 {
        format!("+{delta}")
    } else {
        delta.to_string()
    }
}

impl DumpDiff {
    /// The comparison as a plain aligned table: per domain, each figure before and after
    /// and its change, then the totals.
    pub fn to_text(&self) -> String {
        let shown = |path: &str, or: &'static str| if path.is_empty() { or.to_owned() } else { path.to_owned() };
        let mut out =
            format!("GPU dump diff: {} -> {}\n\n", shown(&self.before, "before"), shown(&self.after, "after"));
        let mut table = Table::new(&[
            ("domain", Align::Left),
            ("blocks", Align::Right),
            ("+/-", Align::Right),
            ("block bytes", Align::Right),
            ("+/-", Align::Right),
            ("allocations", Align::Right),
            ("+/-", Align::Right),
            ("allocation bytes", Align::Right),
            ("+/-", Align::Right),
        ]);
        let count = |c: &Change| (format!("{} -> {}", c.before, c.after), signed(c.delta));
        let bytes = |c: &Change| (format!("{} -> {}", size(c.before), size(c.after)), signed_size(c.delta));
        for d in self.domains.iter().chain(std::iter::once(&self.total)) {
            let (b, bd) = count(&d.blocks);
            let (bb, bbd) = bytes(&d.block_bytes);
            let (a, ad) = count(&d.allocations);
            let (ab, abd) = bytes(&d.allocation_bytes);
            table.row(vec![d.name.clone(), b, bd, bb, bbd, a, ad, ab, abd]);
        }
        out.push_str(&table.render(2));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A VMA 3.x dump written to the schema: 2 heaps, 3 memory types, a custom pool, FREE
    /// ranges, dedicated allocations.
    const VMA: &str = include_str!("../../tests/data/gpu/vma3.json");
    /// `VMA` after a swap-chain resize: one block and three allocations more.
    const VMA_AFTER: &str = include_str!("../../tests/data/gpu/vma3-after-resize.json");
    /// A D3D12MA 2.x dump written to the schema: L0 and L1, default, committed and custom.
    const D3D12MA: &str = include_str!("../../tests/data/gpu/d3d12ma2.json");
    /// `tools/GpuMemDumpVis/Sample.json` from GPUOpen-LibrariesAndSDKs/VulkanMemoryAllocator
    /// (MIT licence, Copyright (c) 2017-2026 Advanced Micro Devices, Inc.).
    const VMA_SAMPLE: &str = include_str!("../../tests/data/gpu/vma-sample.json");

    /// The view, one line per domain, block, sub-allocation and resource.
    fn snapshot(view: &GpuView) -> String {
        let mut out = String::new();
        for d in &view.domains {
            out.push_str(&format!(
                "domain {} {:?} {} cap={} parent={:?} live={}/{}",
                d.id, d.name, d.kind, d.capacity, d.parent, d.live_bytes, d.live_count
            ));
            if let Some(b) = &d.budget {
                out.push_str(&format!(" budget={} usage={} samples={}", b.budget, b.usage, b.samples));
                for o in &b.over_budget {
                    out.push_str(&format!(" over={}", o.max_excess));
                }
            }
            out.push('\n');
        }
        for b in &view.blocks {
            out.push_str(&format!(
                "block {:?} in {} for {} at {} size={}\n",
                b.name, b.domain, b.sub_domain, b.addr, b.size
            ));
            for a in &b.allocations {
                out.push_str(&format!("  +{} {} {} {:?}\n", a.offset, a.size, a.kind.name(), a.name));
            }
        }
        for r in &view.resources {
            out.push_str(&format!("resource {} @{} {} {} {:?}\n", r.domain, r.addr, r.size, r.kind.name(), r.name));
        }
        out
    }

    fn error(text: &str) -> String {
        parse_dump(text).expect_err("the dump should be refused").to_string()
    }

    /// The fixture with `edit` applied to its JSON.
    fn edited(text: &str, edit: impl FnOnce(&mut Value)) -> String {
        let mut value: Value = serde_json::from_str(text).unwrap();
        edit(&mut value);
        serde_json::to_string_pretty(&value).unwrap()
    }

    #[test]
    fn vma_dump_becomes_the_view() {
        let view = parse_dump(VMA).unwrap();
        assert_eq!(view.source, GpuSource::Dump { path: String::new(), format: "vma".into() });
        assert_eq!(view.screen, None);
        let expected = r#"domain 0 "Heap 0 (DEVICE_LOCAL)" gpu-local cap=8589934592 parent=None live=125829120/4 budget=7516192768 usage=178257920 samples=1
domain 1 "Heap 1" gpu-shared cap=17179869184 parent=None live=17825792/2 budget=12884901888 usage=22020096 samples=1
domain 2 "Type 0 in heap 0" pool cap=100663296 parent=Some(0) live=55640064/5
domain 3 "Type 1 in heap 1" pool cap=16777216 parent=Some(1) live=2101248/2
domain 4 "Pool 0 - Particles (type 0 in heap 0)" pool cap=16777216 parent=Some(0) live=1048576/2
block "Block 0" in 0 for 2 at 0 size=67108864
  +0 33554432 render-target "GBuffer albedo"
  +33554432 16777216 depth-stencil "Scene depth"
  +50331648 1048576 buffer "Terrain vertices"
block "Block 1" in 0 for 2 at 67108864 size=33554432
  +0 4194304 texture "000001F2A3B4C5D0"
  +8388608 65536 buffer "Index pool"
block "Block 0" in 0 for 4 at 109051904 size=16777216
  +0 524288 buffer "Particle state"
  +524288 524288 buffer "Particle state (previous)"
block "Block 0" in 1 for 3 at 0 size=16777216
  +0 2097152 buffer "Staging"
  +2097152 4096 unknown ""
resource 0 @100663296 8388608 render-target "HDR target"
resource 1 @16777216 1048576 buffer "Readback"
resource 2 @0 33554432 render-target "GBuffer albedo"
resource 2 @0 4194304 texture "000001F2A3B4C5D0"
resource 2 @8388608 65536 buffer "Index pool"
resource 2 @33554432 16777216 depth-stencil "Scene depth"
resource 2 @50331648 1048576 buffer "Terrain vertices"
resource 3 @0 2097152 buffer "Staging"
resource 3 @2097152 4096 unknown ""
resource 4 @0 524288 buffer "Particle state"
resource 4 @524288 524288 buffer "Particle state (previous)"
"#;
        assert_eq!(snapshot(&view), expected);
        // Dumps describe no dimensions or formats, and no contexts.
        for r in &view.resources {
            assert_eq!((r.width, r.height, r.depth_or_layers, r.mip_levels), (0, 0, 0, 0));
            assert!(r.format.is_empty() && r.context.is_empty());
        }
        for d in &view.domains {
            assert_eq!(d.peak, None);
            if let Some(b) = &d.budget {
                assert_eq!((b.min_budget, b.peak_usage, b.peak_usage_time_ns), (b.budget, b.usage, 0));
                assert!(b.over_budget.is_empty());
            }
        }
    }

    #[test]
    fn d3d12ma_dump_becomes_the_view() {
        let view = parse_dump(D3D12MA).unwrap();
        assert_eq!(view.source, GpuSource::Dump { path: String::new(), format: "d3d12ma".into() });
        let expected = r#"domain 0 "L0 (system memory)" gpu-shared cap=17163091968 parent=None live=4259840/2 budget=4294967296 usage=4400000000 samples=1 over=105032704
domain 1 "L1 (video memory)" gpu-local cap=8354004992 parent=None live=134217728/3 budget=7301444403 usage=612368384 samples=1
domain 2 "DEFAULT in L1" pool cap=67108864 parent=Some(1) live=46202880/5
domain 3 "UPLOAD in L0" pool cap=4194304 parent=Some(0) live=2097152/1
domain 4 "Pool 0 - Streaming (CUSTOM in L1)" pool cap=33554432 parent=Some(1) live=8388608/1
block "Block 0" in 0 for 3 at 0 size=4194304
  +0 2097152 buffer "Upload ring"
block "Block 0" in 1 for 2 at 0 size=67108864
  +0 16777216 render-target "Scene color"
  +16777216 16777216 depth-stencil "Scene depth"
  +33554432 4194304 buffer "Mesh vertices"
  +41943040 8388608 texture "Albedo atlas"
  +50331648 65536 texture "0000020A1B2C3D40"
block "Block 0" in 1 for 4 at 100663296 size=33554432
  +0 8388608 texture "Volumetric fog"
resource 0 @4194304 65536 buffer "Query readback"
resource 1 @67108864 33554432 render-target "Swap chain copy"
resource 2 @0 16777216 render-target "Scene color"
resource 2 @16777216 16777216 depth-stencil "Scene depth"
resource 2 @33554432 4194304 buffer "Mesh vertices"
resource 2 @41943040 8388608 texture "Albedo atlas"
resource 2 @50331648 65536 texture "0000020A1B2C3D40"
resource 3 @0 2097152 buffer "Upload ring"
resource 4 @0 8388608 texture "Volumetric fog"
"#;
        assert_eq!(snapshot(&view), expected);
        let over = &view.domains[0].budget.as_ref().unwrap().over_budget;
        assert_eq!(over, &vec![OverBudget { from_ns: 0, to_ns: 0, max_excess: 105_032_704, after_label: None }]);
    }

    #[test]
    fn vmas_own_sample_dump_passes_its_totals() {
        let view = parse_dump(VMA_SAMPLE).unwrap();
        let names: Vec<(&str, &str)> = view.domains.iter().map(|d| (d.name.as_str(), d.kind.as_str())).collect();
        assert_eq!(
            names,
            vec![
                ("Heap 0", "gpu-shared"),
                ("Heap 1 (DEVICE_LOCAL, MULTI_INSTANCE)", "gpu-local"),
                ("Type 0 in heap 1", "pool"),
                ("Type 1 in heap 0", "pool"),
                ("Type 3 in heap 0", "pool"),
                ("Pool 0 (type 0 in heap 1)", "pool"),
                ("Pool 0 (type 3 in heap 0)", "pool"),
            ]
        );
        // "Total": 69 blocks of 201392128 bytes (64 of them dedicated allocations), 132
        // allocations of 73401500 bytes.
        assert_eq!(view.blocks.len(), 5);
        assert_eq!(view.resources.len(), 132);
        let heap_bytes: u64 = view.domains.iter().filter(|d| d.parent.is_none()).map(|d| d.live_bytes).sum();
        let heap_count: u64 = view.domains.iter().filter(|d| d.parent.is_none()).map(|d| d.live_count).sum();
        assert_eq!((heap_bytes, heap_count), (201_392_128, 69));
        assert_eq!(view.resources.iter().map(|r| r.size).sum::<u64>(), 73_401_500);
        let of = |kind| view.resources.iter().filter(|r| r.kind == kind).count();
        assert_eq!(
            [of(GpuKind::Texture), of(GpuKind::Buffer), of(GpuKind::Unknown), of(GpuKind::DepthStencil)],
            [65, 34, 32, 1]
        );
        // Its heaps' own figures agree with the view's.
        assert_eq!((view.domains[0].live_bytes, view.domains[0].live_count), (117_473_280, 35));
    }

    #[test]
    fn an_edited_total_is_refused_naming_the_field_and_both_numbers() {
        let set = |field: &'static str, value: u64| edited(VMA, move |v| v["Total"][field] = Value::from(value));
        assert_eq!(
            error(&set("BlockBytes", 143_654_913)),
            "\"Total\": \"BlockBytes\" is 143654913, but the dump's blocks and dedicated allocations come to 143654912"
        );
        assert_eq!(
            error(&set("BlockCount", 5)),
            "\"Total\": \"BlockCount\" is 5, but the dump's blocks and dedicated allocations come to 6"
        );
        assert_eq!(
            error(&set("AllocationCount", 12)),
            "\"Total\": \"AllocationCount\" is 12, but the dump's allocations (in blocks and dedicated) come to 11"
        );
        assert_eq!(
            error(&set("AllocationBytes", 1)),
            "\"Total\": \"AllocationBytes\" is 1, but the dump's allocations (in blocks and dedicated) come to 68227072"
        );
        assert_eq!(
            error(&set("UnusedRangeCount", 4)),
            "\"Total\": \"UnusedRangeCount\" is 4, but the blocks' \"UnusedRanges\" come to 5"
        );
        assert_eq!(
            error(&set("AllocationSizeMax", 1 << 30)),
            "\"Total\": \"AllocationSizeMax\" is 1073741824, but the largest allocation is 33554432"
        );
        // The same dump as written is accepted: the check is not refusing everything.
        assert!(parse_dump(&edited(VMA, |_| {})).is_ok());
        // D3D12MA's totals are checked the same way.
        let d3d = edited(D3D12MA, |v| v["Total"]["BlockCount"] = Value::from(4));
        assert_eq!(
            error(&d3d),
            "\"Total\": \"BlockCount\" is 4, but the dump's blocks and dedicated allocations come to 5"
        );
    }

    #[test]
    fn a_block_that_disagrees_with_itself_is_refused() {
        let more_unused = edited(VMA, |v| v["DefaultPools"]["Type 0"]["Blocks"]["1"]["UnusedBytes"] = Value::from(1));
        assert_eq!(
            error(&more_unused),
            "\"DefaultPools\".\"Type 0\".\"Blocks\".\"1\": \"UnusedBytes\" is 1, but \"TotalBytes\" 33554432 less \
             the allocations' 4259840 bytes is 29294592"
        );
        let count = edited(VMA, |v| v["DefaultPools"]["Type 1"]["Blocks"]["0"]["Allocations"] = Value::from(3));
        assert_eq!(
            error(&count),
            "\"DefaultPools\".\"Type 1\".\"Blocks\".\"0\": \"Allocations\" is 3, but \"Suballocations\" lists 2 \
             allocations"
        );
        let past_end = edited(VMA, |v| {
            v["DefaultPools"]["Type 1"]["Blocks"]["0"]["Suballocations"][1]["Offset"] = Value::from(16_777_216u64)
        });
        let overlap = edited(VMA, |v| {
            v["DefaultPools"]["Type 1"]["Blocks"]["0"]["Suballocations"][1]["Offset"] = Value::from(4096)
        });
        assert_eq!(
            error(&overlap),
            "\"DefaultPools\".\"Type 1\".\"Blocks\".\"0\": the allocations at offsets 0 (2097152 bytes) and 4096 overlap"
        );
        assert_eq!(
            error(&past_end),
            "\"DefaultPools\".\"Type 1\".\"Blocks\".\"0\".\"Suballocations\"[1]: \"Offset\" 16777216 + \"Size\" 4096 \
             is past the block's end (\"TotalBytes\" 16777216)"
        );
    }

    #[test]
    fn figures_past_u64_are_refused_without_overflowing() {
        // Two blocks of nearly 2^64 bytes each: their sum does not fit in a u64.
        let huge = edited(VMA, |v| {
            for id in ["0", "1"] {
                let block = &mut v["DefaultPools"]["Type 0"]["Blocks"][id];
                let grow = u64::MAX - 1 - block["TotalBytes"].as_u64().unwrap();
                block["TotalBytes"] = Value::from(u64::MAX - 1);
                block["UnusedBytes"] = Value::from(block["UnusedBytes"].as_u64().unwrap() + grow);
            }
        });
        assert_eq!(
            error(&huge),
            "\"Total\": \"BlockBytes\" is 143654912, but the dump's blocks and dedicated allocations come to \
             18446744073709551615"
        );
        let change = Change::new(u64::MAX, 0);
        assert_eq!(change.delta, i64::MIN);
    }

    #[test]
    fn missing_fields_and_wrong_types_are_named() {
        let no_size = edited(VMA, |v| {
            v["DefaultPools"]["Type 1"]["Blocks"]["0"]["Suballocations"][1].as_object_mut().unwrap().remove("Size");
        });
        assert_eq!(
            error(&no_size),
            "\"DefaultPools\".\"Type 1\".\"Blocks\".\"0\".\"Suballocations\"[1]: \"Size\" is missing"
        );
        let string_size = edited(VMA, |v| {
            v["DefaultPools"]["Type 0"]["Blocks"]["0"]["Suballocations"][2]["Size"] = Value::from("1048576")
        });
        assert_eq!(
            error(&string_size),
            "\"DefaultPools\".\"Type 0\".\"Blocks\".\"0\".\"Suballocations\"[2].\"Size\": expected a non-negative \
             integer, found the string \"1048576\""
        );
        let negative = edited(VMA, |v| v["MemoryInfo"]["Heap 1"]["Size"] = Value::from(-1));
        assert_eq!(
            error(&negative),
            "\"MemoryInfo\".\"Heap 1\".\"Size\": expected a non-negative integer, found the number -1"
        );
        let blocks_array = edited(VMA, |v| v["DefaultPools"]["Type 2"]["Blocks"] = Value::Array(Vec::new()));
        assert_eq!(error(&blocks_array), "\"DefaultPools\".\"Type 2\".\"Blocks\": expected an object, found an array");
        let type_number =
            edited(D3D12MA, |v| v["DefaultPools"]["READBACK"]["DedicatedAllocations"][0]["Type"] = Value::from(1));
        assert_eq!(
            error(&type_number),
            "\"DefaultPools\".\"READBACK\".\"DedicatedAllocations\"[0].\"Type\": expected a string, found the \
             number 1"
        );
        let uma = edited(D3D12MA, |v| v["General"]["UMA"] = Value::from("no"));
        assert_eq!(error(&uma), "\"General\".\"UMA\": expected true or false, found the string \"no\"");
        let stray_type = edited(VMA, |v| {
            let pools = v["DefaultPools"].as_object_mut().unwrap();
            let pool = pools.remove("Type 2").unwrap();
            pools.insert("Type 7".into(), pool);
        });
        assert_eq!(
            error(&stray_type),
            "\"DefaultPools\": \"Type 7\": memory type 7 is in no heap's \"MemoryPools\" in \"MemoryInfo\""
        );
        let no_total = edited(VMA, |v| {
            v.as_object_mut().unwrap().remove("Total");
        });
        assert_eq!(error(&no_total), "\"Total\" is missing");
    }

    #[test]
    fn truncated_and_foreign_json_are_refused() {
        let truncated = &VMA[..VMA.len() / 2];
        let message = error(truncated);
        assert!(message.starts_with("the JSON ends early (a truncated dump?): EOF while parsing"), "{message}");
        assert!(error("{\"General\": 1,}").starts_with("not valid JSON: "));
        assert_eq!(
            error("{\"foo\": 1}"),
            "neither a VMA nor a D3D12MA dump: \"General\" is missing (a dump has \"General\", \"Total\" and \
             \"MemoryInfo\")"
        );
        assert_eq!(error("[1, 2]"), "not a VMA or D3D12MA dump: the JSON is an array, not an object");
        let metal = edited(VMA, |v| v["General"]["API"] = Value::from("Metal"));
        assert_eq!(
            error(&metal),
            "\"General\": \"API\" is \"Metal\": neither a VMA dump (\"Vulkan\") nor a D3D12MA one (\"Direct3D 12\")"
        );
        let vma2 = r#"{"Total": {"Blocks": 1, "Allocations": 2, "UnusedRanges": 0, "UsedBytes": 10, "UnusedBytes": 0},
                       "Heap 0": {"Size": 1024}}"#;
        assert!(error(vma2).starts_with("a VMA 2.x dump"));
        let no_map = edited(VMA, |v| {
            let root = v.as_object_mut().unwrap();
            root.remove("DefaultPools");
            root.remove("CustomPools");
        });
        assert_eq!(
            error(&no_map),
            "the dump has no detailed map (\"DefaultPools\" is missing): write it with \
             vmaBuildStatsString(allocator, &str, VK_TRUE)"
        );
    }

    #[test]
    fn d3d12ma_tier_1_lists_committed_allocations_once() {
        // On resource heap tier 1 D3D12MA writes each heap type's committed allocations
        // under each of its three sub-types; its totals count them once.
        let committed = r#"[{"Type": "TEXTURE2D", "Size": 65536, "Usage": 2, "Name": "Shadow map"}]"#;
        let text = format!(
            r#"{{"General": {{"API": "Direct3D 12", "GPU": "Test", "UMA": true, "DedicatedVideoMemory": 100,
                 "SharedSystemMemory": 900}},
              "Total": {{"BlockCount": 1, "BlockBytes": 65536, "AllocationCount": 1, "AllocationBytes": 65536,
                         "UnusedRangeCount": 0}},
              "MemoryInfo": {{"L0": {{"Budget": {{"BudgetBytes": 1000, "UsageBytes": 10}}, "Stats": {{}}}}}},
              "DefaultPools": {{
                "DEFAULT - Buffers": {{"Blocks": {{}}, "DedicatedAllocations": {committed}}},
                "DEFAULT - Textures": {{"Blocks": {{}}, "DedicatedAllocations": {committed}}},
                "DEFAULT - Textures RT/DS": {{"Blocks": {{}}, "DedicatedAllocations": {committed}}}}},
              "CustomPools": {{}}}}"#
        );
        let view = parse_dump(&text).unwrap();
        assert_eq!(
            snapshot(&view),
            "domain 0 \"L0 (unified memory)\" gpu-local cap=1000 parent=None live=65536/1 budget=1000 usage=10 \
             samples=1\nresource 0 @0 65536 depth-stencil \"Shadow map\"\n"
        );
    }

    #[test]
    fn read_dump_names_the_file_and_reads_utf16() {
        let dir = std::env::temp_dir().join(format!("memreplay-vma-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.json");
        let e = read_dump(&missing).unwrap_err();
        assert_eq!(e.file(), Some(missing.display().to_string().as_str()));
        assert!(e.to_string().starts_with(&format!("{}: cannot read the dump: ", missing.display())));

        // D3D12MA's string is UTF-16 with a byte-order mark.
        let wide = dir.join("d3d12.json");
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(D3D12MA.encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(&wide, bytes).unwrap();
        let view = read_dump(&wide).unwrap();
        assert_eq!(view.source, GpuSource::Dump { path: wide.display().to_string(), format: "d3d12ma".into() });
        assert_eq!(view.resources, parse_dump(D3D12MA).unwrap().resources);

        let bad = dir.join("bad.json");
        std::fs::write(&bad, edited(VMA, |v| v["Total"]["BlockCount"] = Value::from(7))).unwrap();
        let e = read_dump(&bad).unwrap_err();
        assert_eq!(e.field(), "\"Total\"");
        assert!(e.problem().starts_with("\"BlockCount\" is 7"));
        assert_eq!(
            e.to_string(),
            format!(
                "{}: \"Total\": \"BlockCount\" is 7, but the dump's blocks and dedicated allocations come to 6",
                bad.display()
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn diff_shows_the_resize_growth() {
        let mut before = parse_dump(VMA).unwrap();
        let mut after = parse_dump(VMA_AFTER).unwrap();
        before.source = GpuSource::Dump { path: "before.json".into(), format: "vma".into() };
        after.source = GpuSource::Dump { path: "after.json".into(), format: "vma".into() };
        let diff = diff_dumps(&before, &after);
        let rows: Vec<(&str, [u64; 8])> = diff
            .domains
            .iter()
            .chain(std::iter::once(&diff.total))
            .map(|d| {
                let c = [d.blocks, d.block_bytes, d.allocations, d.allocation_bytes];
                (
                    d.name.as_str(),
                    [
                        c[0].before,
                        c[0].after,
                        c[1].before,
                        c[1].after,
                        c[2].before,
                        c[2].after,
                        c[3].before,
                        c[3].after,
                    ],
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("Heap 0 (DEVICE_LOCAL)", [4, 5, 125_829_120, 159_383_552, 8, 10, 65_077_248, 77_660_160]),
                ("Heap 1", [2, 2, 17_825_792, 17_825_792, 3, 4, 3_149_824, 3_158_016]),
                ("Type 0 in heap 0", [2, 3, 100_663_296, 134_217_728, 5, 7, 55_640_064, 68_222_976]),
                ("Type 1 in heap 1", [1, 1, 16_777_216, 16_777_216, 2, 3, 2_101_248, 2_109_440]),
                ("Pool 0 - Particles (type 0 in heap 0)", [1, 1, 16_777_216, 16_777_216, 2, 2, 1_048_576, 1_048_576]),
                // The dumps' own "Total" sections.
                ("total", [6, 7, 143_654_912, 177_209_344, 11, 14, 68_227_072, 80_818_176]),
            ]
        );
        assert_eq!(diff.total.block_bytes, Change { before: 143_654_912, after: 177_209_344, delta: 33_554_432 });
        assert_eq!(diff.domains.iter().filter(|d| d.changed()).count(), 4);
        let json = serde_json::to_value(&diff).unwrap();
        assert_eq!(json["total"]["allocations"]["delta"], Value::from(3));
        assert_eq!(json["domains"][1]["allocation_bytes"]["delta"], Value::from(8192));

        // Compared the other way round, everything shrinks by as much.
        let back = diff_dumps(&after, &before);
        assert_eq!(back.total.allocation_bytes.delta, -12_591_104);
        // A domain only one dump has counts zero in the other.
        let mut fewer = before.clone();
        fewer.domains.retain(|d| d.name != "Type 1 in heap 1");
        let d = diff_dumps(&fewer, &before);
        let row = d.domains.iter().find(|r| r.name == "Type 1 in heap 1").unwrap();
        assert_eq!((row.blocks.before, row.blocks.after, row.allocations.delta), (0, 1, 2));
    }

    #[test]
    fn diff_text_is_an_aligned_table() {
        let before = parse_dump(VMA).unwrap();
        let mut after = parse_dump(VMA_AFTER).unwrap();
        after.source = GpuSource::Dump { path: "after.json".into(), format: "vma".into() };
        let text = diff_dumps(&before, &after).to_text();
        let expected = "\
GPU dump diff: before -> after.json

  domain                                 blocks  +/-             block bytes        +/-  allocations  +/-      allocation bytes        +/-
  Heap 0 (DEVICE_LOCAL)                  4 -> 5   +1  120.0 MiB -> 152.0 MiB  +32.0 MiB      8 -> 10   +2  62.1 MiB -> 74.1 MiB  +12.0 MiB
  Heap 1                                 2 -> 2    0    17.0 MiB -> 17.0 MiB          0       3 -> 4   +1    3.0 MiB -> 3.0 MiB   +8.0 KiB
  Type 0 in heap 0                       2 -> 3   +1   96.0 MiB -> 128.0 MiB  +32.0 MiB       5 -> 7   +2  53.1 MiB -> 65.1 MiB  +12.0 MiB
  Type 1 in heap 1                       1 -> 1    0    16.0 MiB -> 16.0 MiB          0       2 -> 3   +1    2.0 MiB -> 2.0 MiB   +8.0 KiB
  Pool 0 - Particles (type 0 in heap 0)  1 -> 1    0    16.0 MiB -> 16.0 MiB          0       2 -> 2    0    1.0 MiB -> 1.0 MiB          0
  total                                  6 -> 7   +1  137.0 MiB -> 169.0 MiB  +32.0 MiB     11 -> 14   +3  65.1 MiB -> 77.1 MiB  +12.0 MiB
";
        assert_eq!(text, expected);
    }
}
