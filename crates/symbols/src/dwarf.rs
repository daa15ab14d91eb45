//! Looking addresses up in DWARF, parsing only the units they fall in.
//!
//! This is `addr2line`'s lookup (version 0.25: its `Context::find_frames` and
//! `find_location`, without split DWARF, as `skip_all_loads` leaves them), with one
//! change: `addr2line` builds, for every unit of the file, its abbreviations and its
//! line-program header when the context is made, and keeps them (12 MiB for a 1,079-unit
//! Rust program, 23 MiB for libc's 2,063 units). Here making the index parses each unit
//! the same way but keeps only its offset, language and address ranges; a unit is parsed
//! again, and kept, when an address falls in it or a name in another unit refers into it.
//! Everything else follows `addr2line` step for step, so that the frames are the same
//! (the tests compare them with an `addr2line::Context` over the same file): which units
//! cover an address and in what order, how a unit's ranges are found (`DW_AT_ranges`,
//! then `.debug_aranges`, then `DW_AT_low_pc`/`DW_AT_high_pc`, then its line sequences),
//! which unit a cross-unit reference lands in, and how functions, inlined calls, names
//! and lines are read.

use std::cell::OnceCell;
use std::cmp::Ordering;

use gimli::Reader as _;

use crate::reader::Reader;

type Error = gimli::Error;
type Offset = usize;

/// A frame as `addr2line` gives it: the raw (mangled) function name with its unit's
/// language, and the location.
pub struct Frame<'a> {
    pub function: Option<(Reader, Option<gimli::DwLang>)>,
    pub location: Option<Location<'a>>,
}

/// A source location.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location<'a> {
    pub file: Option<&'a str>,
    pub line: Option<u32>,
}

/// One address range of a unit, in the index.
struct UnitRange {
    range: gimli::Range,
    unit: usize,
    /// The lowest `range.begin` of this entry and every later one (sorted by end).
    min_begin: u64,
}

/// A unit of the index: what making the index kept, and the unit once parsed again.
struct IndexedUnit {
    offset: gimli::DebugInfoOffset<Offset>,
    lang: Option<gimli::DwLang>,
    parsed: OnceCell<Result<Box<ParsedUnit>, Error>>,
}

/// A unit parsed for a lookup: `addr2line`'s `ResUnit`.
struct ParsedUnit {
    dw_unit: gimli::Unit<Reader>,
    /// `Err` when the unit names a split DWARF file whose name cannot be read.
    dwo: Result<(), Error>,
    lines: OnceCell<Result<Lines, Error>>,
    functions: OnceCell<Result<Functions, Error>>,
}

/// The DWARF of one file, its units indexed by address and parsed on demand.
pub struct LazyDwarf {
    sections: gimli::Dwarf<Reader>,
    /// Sorted by `range.end`, as `addr2line` sorts them.
    ranges: Box<[UnitRange]>,
    /// The units that parse, by offset.
    units: Box<[IndexedUnit]>,
}

impl LazyDwarf {
    /// Indexes the units of `sections`: each is parsed (and dropped) to find its address
    /// ranges. Fails where `addr2line::Context::from_dwarf` fails.
    pub fn new(mut sections: gimli::Dwarf<Reader>) -> Result<LazyDwarf, Error> {
        // A table shared by several units (all of a fat-LTO program's) is parsed once.
        sections.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        // What follows is `addr2line`'s `ResUnits::parse`, keeping no parsed unit.
        let mut aranges = Vec::new();
        let mut headers = sections.debug_aranges.headers();
        while let Some(header) = headers.next()? {
            aranges.push((header.debug_info_offset(), header.offset()));
        }
        aranges.sort_by_key(|i| i.0);

        let mut unit_ranges = Vec::new();
        let mut units = Vec::new();
        let mut headers = sections.units();
        while let Some(header) = headers.next()? {
            let unit = units.len();
            let Some(offset) = header.offset().as_debug_info_offset() else { continue };
            // Compile units for addresses, partial ones only as targets of references;
            // type units are never needed.
            let mut need_unit_range = match header.type_() {
                gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => continue,
                gimli::UnitType::Partial => false,
                _ => true,
            };
            let Ok(dw_unit) = sections.unit(header) else { continue };
            let dw_unit_ref = gimli::UnitRef::new(&sections, &dw_unit);

            let mut lang = None;
            if need_unit_range {
                let mut entries = dw_unit_ref.entries_raw(None)?;
                let Some(abbrev) = entries.read_abbreviation()? else { continue };
                let mut ranges = RangeAttributes::default();
                for spec in abbrev.attributes() {
                    let attr = entries.read_attribute(*spec)?;
                    match attr.name() {
                        gimli::DW_AT_low_pc => match attr.value() {
                            gimli::AttributeValue::Addr(val) => ranges.low_pc = Some(val),
                            gimli::AttributeValue::DebugAddrIndex(index) => {
                                ranges.low_pc = Some(dw_unit_ref.address(index)?);
                            }
                            _ => {}
                        },
                        gimli::DW_AT_high_pc => match attr.value() {
                            gimli::AttributeValue::Addr(val) => ranges.high_pc = Some(val),
                            gimli::AttributeValue::DebugAddrIndex(index) => {
                                ranges.high_pc = Some(dw_unit_ref.address(index)?);
                            }
                            gimli::AttributeValue::Udata(val) => ranges.size = Some(val),
                            _ => {}
                        },
                        gimli::DW_AT_ranges => {
                            ranges.ranges_offset = dw_unit_ref.attr_ranges_offset(attr.value())?;
                        }
                        gimli::DW_AT_language => {
                            if let gimli::AttributeValue::Language(val) = attr.value() {
                                lang = Some(val);
                            }
                        }
                        _ => {}
                    }
                }
                // In order of preference: DW_AT_ranges, .debug_aranges, low/high pc.
                let i = match ranges.ranges_offset {
                    Some(_) => None,
                    None => aranges.binary_search_by_key(&offset, |x| x.0).ok(),
                };
                if let Some(mut i) = i {
                    // Several sets for one unit happen (a compiler bug): all are used.
                    while i > 0 && aranges[i - 1].0 == offset {
                        i -= 1;
                    }
                    for (_, aranges_offset) in aranges[i..].iter().take_while(|x| x.0 == offset) {
                        let aranges_header = sections.debug_aranges.header(*aranges_offset)?;
                        let mut entries = aranges_header.entries();
                        while let Some(arange) = entries.next().transpose() {
                            // Invalid entries (an address overflow) are skipped.
                            let Ok(arange) = arange else { continue };
                            if arange.length() != 0 {
                                unit_ranges.push(UnitRange { range: arange.range(), unit, min_begin: 0 });
                                need_unit_range = false;
                            }
                        }
                    }
                }
                if need_unit_range {
                    need_unit_range = !ranges.for_each_range(dw_unit_ref, |range| {
                        unit_ranges.push(UnitRange { range, unit, min_begin: 0 });
                    })?;
                }
            }
            if need_unit_range {
                // No ranges declared: those of the line program's sequences.
                if let Some(ilnp) = &dw_unit_ref.line_program {
                    if let Ok(lines) = Lines::parse(dw_unit_ref, ilnp.clone()) {
                        for range in lines.ranges() {
                            unit_ranges.push(UnitRange { range, unit, min_begin: 0 });
                        }
                    }
                }
            }
            units.push(IndexedUnit { offset, lang, parsed: OnceCell::new() });
        }

        // Stable: units with the same end stay in file order, as in `addr2line`.
        unit_ranges.sort_by_key(|i| i.range.end);
        let mut min = !0;
        for i in unit_ranges.iter_mut().rev() {
            min = min.min(i.range.begin);
            i.min_begin = min;
        }
        Ok(LazyDwarf { sections, ranges: unit_ranges.into_boxed_slice(), units: units.into_boxed_slice() })
    }

    /// Units in the index.
    #[cfg(test)]
    pub fn unit_count(&self) -> usize {
        self.units.len()
    }

    /// Units parsed so far.
    #[cfg(test)]
    pub fn parsed_count(&self) -> usize {
        self.units.iter().filter(|u| u.parsed.get().is_some()).count()
    }

    /// Unit `index`, parsed on first use.
    fn parsed(&self, index: usize) -> Result<&ParsedUnit, Error> {
        let u = &self.units[index];
        let parsed = u.parsed.get_or_init(|| {
            let header = self.sections.debug_info.header_from_offset(u.offset)?;
            let dw_unit = self.sections.unit(header)?;
            // `addr2line` with `skip_all_loads`: a split unit is read as its skeleton, unless
            // the split file's name cannot be read.
            let dwo = match dw_unit.dwo_id {
                None => Ok(()),
                Some(_) => {
                    let unit = gimli::UnitRef::new(&self.sections, &dw_unit);
                    unit.dwo_name().and_then(|name| name.map(|s| unit.attr_string(s)).transpose()).map(|_| ())
                }
            };
            Ok(Box::new(ParsedUnit { dw_unit, dwo, lines: OnceCell::new(), functions: OnceCell::new() }))
        });
        parsed.as_deref().map_err(|e| *e)
    }

    fn unit_ref<'a>(&'a self, p: &'a ParsedUnit) -> gimli::UnitRef<'a, Reader> {
        gimli::UnitRef::new(&self.sections, &p.dw_unit)
    }

    /// The units whose ranges cover `probe`, in `addr2line`'s order.
    fn find(&self, probe: u64) -> impl Iterator<Item = usize> + '_ {
        // The ranges holding `probe .. probe + 1` (none for the last address: no range
        // ends after it).
        let high = probe.saturating_add(1);
        let pos = match self.ranges.binary_search_by_key(&probe, |i| i.range.end) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        // Past an entry whose `min_begin` is above the probe, no range holds it.
        self.ranges[pos..]
            .iter()
            .take_while(move |i| high > i.min_begin)
            .filter(move |i| probe < i.range.end && high > i.range.begin)
            .map(|i| i.unit)
    }

    /// The unit holding the entry at `offset`, and the entry's offset in it.
    fn find_unit(
        &self,
        offset: gimli::DebugInfoOffset<Offset>,
    ) -> Result<(&ParsedUnit, gimli::UnitOffset<Offset>), Error> {
        let index = match self.units.binary_search_by_key(&offset.0, |u| u.offset.0) {
            // There is never an entry at a unit's offset, nor before the first unit.
            Ok(_) | Err(0) => return Err(Error::NoEntryAtGivenOffset),
            Err(i) => i - 1,
        };
        let p = self.parsed(index)?;
        let unit_offset = offset.to_unit_offset(&p.dw_unit.header).ok_or(Error::NoEntryAtGivenOffset)?;
        Ok((p, unit_offset))
    }

    fn lines<'a>(&'a self, p: &'a ParsedUnit) -> Result<Option<&'a Lines>, Error> {
        let Some(ilnp) = &p.dw_unit.line_program else { return Ok(None) };
        p.lines.get_or_init(|| Lines::parse(self.unit_ref(p), ilnp.clone())).as_ref().map(Some).map_err(|e| *e)
    }

    fn functions<'a>(&'a self, p: &'a ParsedUnit) -> Result<&'a Functions, Error> {
        p.dwo?;
        p.functions.get_or_init(|| Functions::parse(self.unit_ref(p))).as_ref().map_err(|e| *e)
    }

    fn find_location_in<'a>(&'a self, p: &'a ParsedUnit, probe: u64) -> Result<Option<Location<'a>>, Error> {
        match self.lines(p)? {
            Some(lines) => Ok(lines.find_location(probe)),
            None => Ok(None),
        }
    }

    /// The source location of `probe`: `addr2line`'s `Context::find_location`.
    pub fn find_location(&self, probe: u64) -> Result<Option<Location<'_>>, Error> {
        for unit in self.find(probe) {
            if let Some(location) = self.find_location_in(self.parsed(unit)?, probe)? {
                return Ok(Some(location));
            }
        }
        Ok(None)
    }

    /// The frames of `probe`, innermost (inlined) first: `addr2line`'s
    /// `Context::find_frames` read to its end.
    pub fn find_frames(&self, probe: u64) -> Result<Vec<Frame<'_>>, Error> {
        for unit in self.find(probe) {
            let p = self.parsed(unit)?;
            let lang = self.units[unit].lang;
            let functions = self.functions(p)?;
            let function = match functions.find_address(probe) {
                Some(address) => {
                    let lazy = &functions.functions[functions.addresses[address].function];
                    Some(
                        lazy.function
                            .get_or_init(|| Function::parse(lazy.offset, self.unit_ref(p), self))
                            .as_ref()
                            .map_err(|e| *e)?,
                    )
                }
                None => None,
            };
            let location = self.find_location_in(p, probe)?;
            match (function, location) {
                (Some(function), location) => {
                    let mut frames = Vec::new();
                    let mut next = location;
                    // Innermost first: each inlined call's location is where it was called
                    // from, which is the location of the frame outside it.
                    for f in function.find_inlined_functions(probe).into_iter().rev() {
                        let mut call = Location { file: None, line: (f.call_line != 0).then_some(f.call_line) };
                        if let Some(call_file) = f.call_file {
                            if let Some(lines) = self.lines(p)? {
                                call.file = lines.file(call_file);
                            }
                        }
                        frames.push(Frame { function: f.name.clone().map(|n| (n, lang)), location: next });
                        next = Some(call);
                    }
                    frames.push(Frame { function: function.name.clone().map(|n| (n, lang)), location: next });
                    return Ok(frames);
                }
                (None, Some(location)) => return Ok(vec![Frame { function: None, location: Some(location) }]),
                (None, None) => continue,
            }
        }
        Ok(Vec::new())
    }
}

/// A unit's line table: `addr2line`'s `Lines`.
struct Lines {
    files: Box<[String]>,
    sequences: Box<[LineSequence]>,
}

struct LineSequence {
    start: u64,
    end: u64,
    rows: Box<[LineRow]>,
}

struct LineRow {
    address: u64,
    file_index: u64,
    line: u32,
}

impl Lines {
    fn parse(
        dw_unit: gimli::UnitRef<'_, Reader>,
        ilnp: gimli::IncompleteLineProgram<Reader, Offset>,
    ) -> Result<Lines, Error> {
        let mut sequences = Vec::new();
        let mut sequence_rows = Vec::<LineRow>::new();
        let mut rows = ilnp.rows();
        while let Some((_, row)) = rows.next_row()? {
            if row.end_sequence() {
                if let Some(start) = sequence_rows.first().map(|x| x.address) {
                    let end = row.address();
                    let rows = std::mem::take(&mut sequence_rows);
                    sequences.push(LineSequence { start, end, rows: rows.into_boxed_slice() });
                }
                continue;
            }
            let address = row.address();
            let file_index = row.file_index();
            let line = row.line().map(std::num::NonZeroU64::get).unwrap_or(0) as u32;
            if let Some(last_row) = sequence_rows.last_mut() {
                if last_row.address == address {
                    last_row.file_index = file_index;
                    last_row.line = line;
                    continue;
                }
            }
            sequence_rows.push(LineRow { address, file_index, line });
        }
        sequences.sort_by_key(|x| x.start);

        let mut files = Vec::new();
        let header = rows.header();
        match header.file(0) {
            Some(file) => files.push(render_file(dw_unit, file, header)?),
            // DWARF 4 and older may have no file 0.
            None => files.push(String::new()),
        }
        let mut index = 1;
        while let Some(file) = header.file(index) {
            files.push(render_file(dw_unit, file, header)?);
            index += 1;
        }
        Ok(Lines { files: files.into_boxed_slice(), sequences: sequences.into_boxed_slice() })
    }

    fn file(&self, index: u64) -> Option<&str> {
        self.files.get(index as usize).map(String::as_str)
    }

    fn ranges(&self) -> impl Iterator<Item = gimli::Range> + '_ {
        self.sequences.iter().map(|s| gimli::Range { begin: s.start, end: s.end })
    }

    fn find_location(&self, probe: u64) -> Option<Location<'_>> {
        let seq = self
            .sequences
            .binary_search_by(|s| {
                if probe < s.start {
                    Ordering::Greater
                } else if probe >= s.end {
                    Ordering::Less
                } else {
                    Ordering::Equal
                }
            })
            .ok()?;
        let rows = &self.sequences[seq].rows;
        let row = match rows.binary_search_by(|row| row.address.cmp(&probe)) {
            Ok(x) => &rows[x],
            Err(0) => return None,
            Err(x) => &rows[x - 1],
        };
        Some(Location {
            file: self.files.get(row.file_index as usize).map(String::as_str),
            line: (row.line != 0).then_some(row.line),
        })
    }
}

fn render_file(
    dw_unit: gimli::UnitRef<'_, Reader>,
    file: &gimli::FileEntry<Reader, Offset>,
    header: &gimli::LineProgramHeader<Reader, Offset>,
) -> Result<String, Error> {
    let mut path = match &dw_unit.comp_dir {
        Some(comp_dir) => comp_dir.to_string_lossy()?.into_owned(),
        None => String::new(),
    };
    // Directory 0 is the compilation directory.
    if file.directory_index() != 0 {
        if let Some(directory) = file.directory(header) {
            path_push(&mut path, dw_unit.attr_string(directory)?.to_string_lossy()?.as_ref());
        }
    }
    path_push(&mut path, dw_unit.attr_string(file.path_name())?.to_string_lossy()?.as_ref());
    Ok(path)
}

fn path_push(path: &mut String, p: &str) {
    let has_forward_slash_root = |p: &str| p.starts_with('/') || p.get(1..3) == Some(":/");
    let has_backward_slash_root = |p: &str| p.starts_with('\\') || p.get(1..3) == Some(":\\");
    if has_forward_slash_root(p) || has_backward_slash_root(p) {
        *path = p.to_owned();
    } else {
        let separator = if has_backward_slash_root(path) { '\\' } else { '/' };
        if !path.is_empty() && !path.ends_with(separator) {
            path.push(separator);
        }
        *path += p;
    }
}

/// A unit's functions: `addr2line`'s `Functions`.
struct Functions {
    functions: Box<[LazyFunction]>,
    /// Sorted by `range.begin`.
    addresses: Box<[FunctionAddress]>,
}

struct FunctionAddress {
    range: gimli::Range,
    /// Index in `Functions::functions`.
    function: usize,
}

struct LazyFunction {
    offset: gimli::UnitOffset<Offset>,
    function: OnceCell<Result<Function, Error>>,
}

struct Function {
    name: Option<Reader>,
    inlined_functions: Box<[InlinedFunction]>,
    /// Sorted by call depth, then `range.begin`.
    inlined_addresses: Box<[InlinedFunctionAddress]>,
}

struct InlinedFunctionAddress {
    range: gimli::Range,
    call_depth: usize,
    /// Index in `Function::inlined_functions`.
    function: usize,
}

struct InlinedFunction {
    name: Option<Reader>,
    call_file: Option<u64>,
    call_line: u32,
}

impl Functions {
    fn parse(unit: gimli::UnitRef<'_, Reader>) -> Result<Functions, Error> {
        let mut functions = Vec::new();
        let mut addresses = Vec::new();
        let mut entries = unit.entries_raw(None)?;
        while !entries.is_empty() {
            let offset = entries.next_offset();
            if let Some(abbrev) = entries.read_abbreviation()? {
                if abbrev.tag() == gimli::DW_TAG_subprogram {
                    let mut ranges = RangeAttributes::default();
                    for spec in abbrev.attributes() {
                        let attr = entries.read_attribute(*spec)?;
                        ranges.read(unit, &attr)?;
                    }
                    let function = functions.len();
                    let has_address = ranges.for_each_range(unit, |range| {
                        addresses.push(FunctionAddress { range, function });
                    })?;
                    if has_address {
                        functions.push(LazyFunction { offset, function: OnceCell::new() });
                    }
                } else {
                    entries.skip_attributes(abbrev.attributes())?;
                }
            }
        }
        // Functions with the same range (identical code folded) stay in an unspecified
        // order, as in `addr2line`; overlapping ranges are not expected.
        addresses.sort_by_key(|x| x.range.begin);
        Ok(Functions { functions: functions.into_boxed_slice(), addresses: addresses.into_boxed_slice() })
    }

    fn find_address(&self, probe: u64) -> Option<usize> {
        self.addresses
            .binary_search_by(|a| {
                if probe < a.range.begin {
                    Ordering::Greater
                } else if probe >= a.range.end {
                    Ordering::Less
                } else {
                    Ordering::Equal
                }
            })
            .ok()
    }
}

impl Function {
    fn parse(
        offset: gimli::UnitOffset<Offset>,
        unit: gimli::UnitRef<'_, Reader>,
        ctx: &LazyDwarf,
    ) -> Result<Function, Error> {
        let mut entries = unit.entries_raw(Some(offset))?;
        let depth = entries.next_depth();
        let abbrev = entries.read_abbreviation()?.ok_or(Error::NoEntryAtGivenOffset)?;
        let mut name = None;
        for spec in abbrev.attributes() {
            read_name(&entries.read_attribute(*spec)?, unit, ctx, &mut name)?;
        }
        let mut state = InlinedState { entries, functions: Vec::new(), addresses: Vec::new(), unit, ctx };
        Function::parse_children(&mut state, depth, 0)?;
        // Breadth first (by depth, then address), so that a binary search finds the range
        // holding an address at each depth.
        state.addresses.sort_by(|a, b| a.call_depth.cmp(&b.call_depth).then(a.range.begin.cmp(&b.range.begin)));
        Ok(Function {
            name: name.map(Reader::detached),
            inlined_functions: state.functions.into_boxed_slice(),
            inlined_addresses: state.addresses.into_boxed_slice(),
        })
    }

    fn parse_children(state: &mut InlinedState<'_>, depth: isize, inlined_depth: usize) -> Result<(), Error> {
        loop {
            let next_depth = state.entries.next_depth();
            if next_depth <= depth {
                return Ok(());
            }
            if let Some(abbrev) = state.entries.read_abbreviation()? {
                match abbrev.tag() {
                    gimli::DW_TAG_subprogram => Function::skip(&mut state.entries, abbrev, next_depth)?,
                    gimli::DW_TAG_inlined_subroutine => {
                        InlinedFunction::parse(state, abbrev, next_depth, inlined_depth)?
                    }
                    _ => state.entries.skip_attributes(abbrev.attributes())?,
                }
            }
        }
    }

    fn skip(
        entries: &mut gimli::EntriesRaw<'_, '_, Reader>,
        abbrev: &gimli::Abbreviation,
        depth: isize,
    ) -> Result<(), Error> {
        entries.skip_attributes(abbrev.attributes())?;
        while entries.next_depth() > depth {
            if let Some(abbrev) = entries.read_abbreviation()? {
                entries.skip_attributes(abbrev.attributes())?;
            }
        }
        Ok(())
    }

    /// The inlined calls that hold `probe`, outermost first.
    fn find_inlined_functions(&self, probe: u64) -> Vec<&InlinedFunction> {
        let mut found = Vec::new();
        let mut addresses = &self.inlined_addresses[..];
        loop {
            let depth = found.len();
            let search = addresses.binary_search_by(|a| {
                if a.call_depth > depth {
                    Ordering::Greater
                } else if a.call_depth < depth {
                    Ordering::Less
                } else if a.range.begin > probe {
                    Ordering::Greater
                } else if a.range.end <= probe {
                    Ordering::Less
                } else {
                    Ordering::Equal
                }
            });
            let Ok(index) = search else { return found };
            found.push(&self.inlined_functions[addresses[index].function]);
            addresses = &addresses[index + 1..];
        }
    }
}

struct InlinedState<'a> {
    entries: gimli::EntriesRaw<'a, 'a, Reader>,
    functions: Vec<InlinedFunction>,
    addresses: Vec<InlinedFunctionAddress>,
    unit: gimli::UnitRef<'a, Reader>,
    ctx: &'a LazyDwarf,
}

impl InlinedFunction {
    fn parse(
        state: &mut InlinedState<'_>,
        abbrev: &gimli::Abbreviation,
        depth: isize,
        inlined_depth: usize,
    ) -> Result<(), Error> {
        let unit = state.unit;
        let mut ranges = RangeAttributes::default();
        let mut name = None;
        let mut call_file = None;
        let mut call_line = 0;
        for spec in abbrev.attributes() {
            let attr = state.entries.read_attribute(*spec)?;
            ranges.read(unit, &attr)?;
            read_name(&attr, unit, state.ctx, &mut name)?;
            match attr.name() {
                gimli::DW_AT_call_file => {
                    // DWARF 5 numbers files from 0; before, 0 meant none.
                    if let gimli::AttributeValue::FileIndex(fi) = attr.value() {
                        if fi > 0 || unit.header.version() >= 5 {
                            call_file = Some(fi);
                        }
                    }
                }
                gimli::DW_AT_call_line => call_line = attr.udata_value().unwrap_or(0) as u32,
                _ => {}
            }
        }
        let function = state.functions.len();
        state.functions.push(InlinedFunction { name: name.map(Reader::detached), call_file, call_line });
        ranges.for_each_range(unit, |range| {
            state.addresses.push(InlinedFunctionAddress { range, call_depth: inlined_depth, function });
        })?;
        Function::parse_children(state, depth, inlined_depth + 1)
    }
}

/// What a function's or an inlined call's attribute says of its name: a linkage name wins,
/// then `DW_AT_name`, then the name its abstract origin or specification leads to.
fn read_name(
    attr: &gimli::Attribute<Reader>,
    unit: gimli::UnitRef<'_, Reader>,
    ctx: &LazyDwarf,
    name: &mut Option<Reader>,
) -> Result<(), Error> {
    match attr.name() {
        gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
            if let Ok(val) = unit.attr_string(attr.value()) {
                *name = Some(val);
            }
        }
        gimli::DW_AT_name if name.is_none() => *name = unit.attr_string(attr.value()).ok(),
        gimli::DW_AT_abstract_origin | gimli::DW_AT_specification if name.is_none() => {
            *name = name_attr(attr.value(), unit, ctx, 16)?;
        }
        _ => {}
    }
    Ok(())
}

/// The name an `DW_AT_abstract_origin` or `DW_AT_specification` leads to, following at
/// most `recursion_limit` of them.
fn name_attr(
    attr: gimli::AttributeValue<Reader>,
    unit: gimli::UnitRef<'_, Reader>,
    ctx: &LazyDwarf,
    recursion_limit: usize,
) -> Result<Option<Reader>, Error> {
    if recursion_limit == 0 {
        return Ok(None);
    }
    match attr {
        gimli::AttributeValue::UnitRef(offset) => name_entry(unit, offset, ctx, recursion_limit),
        gimli::AttributeValue::DebugInfoRef(dr) => {
            let (p, offset) = ctx.find_unit(dr)?;
            name_entry(ctx.unit_ref(p), offset, ctx, recursion_limit)
        }
        // No supplementary file is loaded.
        _ => Ok(None),
    }
}

fn name_entry(
    unit: gimli::UnitRef<'_, Reader>,
    offset: gimli::UnitOffset<Offset>,
    ctx: &LazyDwarf,
    recursion_limit: usize,
) -> Result<Option<Reader>, Error> {
    let mut entries = unit.entries_raw(Some(offset))?;
    let abbrev = entries.read_abbreviation()?.ok_or(Error::NoEntryAtGivenOffset)?;
    let mut name = None;
    let mut next = None;
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec)?;
        match attr.name() {
            gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                if let Ok(val) = unit.attr_string(attr.value()) {
                    return Ok(Some(val));
                }
            }
            gimli::DW_AT_name => {
                if let Ok(val) = unit.attr_string(attr.value()) {
                    name = Some(val);
                }
            }
            gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => next = Some(attr.value()),
            _ => {}
        }
    }
    if name.is_some() {
        return Ok(name);
    }
    match next {
        Some(next) => name_attr(next, unit, ctx, recursion_limit - 1),
        None => Ok(None),
    }
}

/// The address attributes of an entry.
#[derive(Default)]
struct RangeAttributes {
    low_pc: Option<u64>,
    high_pc: Option<u64>,
    size: Option<u64>,
    ranges_offset: Option<gimli::RangeListsOffset<Offset>>,
}

impl RangeAttributes {
    /// Takes `attr` if it is one of them.
    fn read(&mut self, unit: gimli::UnitRef<'_, Reader>, attr: &gimli::Attribute<Reader>) -> Result<(), Error> {
        match attr.name() {
            gimli::DW_AT_low_pc => match attr.value() {
                gimli::AttributeValue::Addr(val) => self.low_pc = Some(val),
                gimli::AttributeValue::DebugAddrIndex(index) => self.low_pc = Some(unit.address(index)?),
                _ => {}
            },
            gimli::DW_AT_high_pc => match attr.value() {
                gimli::AttributeValue::Addr(val) => self.high_pc = Some(val),
                gimli::AttributeValue::DebugAddrIndex(index) => self.high_pc = Some(unit.address(index)?),
                gimli::AttributeValue::Udata(val) => self.size = Some(val),
                _ => {}
            },
            gimli::DW_AT_ranges => self.ranges_offset = unit.attr_ranges_offset(attr.value())?,
            _ => {}
        }
        Ok(())
    }

    /// Calls `f` with each non-empty range; whether there was one.
    fn for_each_range(&self, unit: gimli::UnitRef<'_, Reader>, mut f: impl FnMut(gimli::Range)) -> Result<bool, Error> {
        let mut added_any = false;
        let mut add_range = |range: gimli::Range| {
            if range.begin < range.end {
                f(range);
                added_any = true
            }
        };
        if let Some(ranges_offset) = self.ranges_offset {
            let mut range_list = unit.ranges(ranges_offset)?;
            while let Some(range) = range_list.next()? {
                add_range(range);
            }
        } else if let (Some(begin), Some(end)) = (self.low_pc, self.high_pc) {
            add_range(gimli::Range { begin, end });
        } else if let (Some(begin), Some(size)) = (self.low_pc, self.size) {
            // A -1 tombstone overflows, and the range is dropped as empty.
            add_range(gimli::Range { begin, end: begin.wrapping_add(size) });
        }
        Ok(added_any)
    }
}
