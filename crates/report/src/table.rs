//! Aligned text tables and human-readable figures for the reports' text output.
//!
//! Tables print sizes human-readable (B, KiB, MiB, GiB with one decimal); the JSON
//! output always carries the exact integers.

/// How a column aligns its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A text table: a header row and rows of cells, printed with every column as wide as
/// its widest cell, two spaces apart. The cells are kept in one string (a tree of a
/// million contexts is a million rows): a row costs its text and a word per cell.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<(String, Align)>,
    /// Every cell's text, one after the other.
    text: String,
    /// Where each cell ends in `text`.
    cell_ends: Vec<usize>,
    /// Where each row's cells start in `cell_ends`.
    row_starts: Vec<usize>,
}

impl Table {
    /// A table with these columns (header text, alignment).
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns.iter().map(|&(h, a)| (h.to_owned(), a)).collect(),
            text: String::new(),
            cell_ends: Vec::new(),
            row_starts: Vec::new(),
        }
    }

    /// Adds a row; missing cells print empty, extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        self.row_starts.push(self.cell_ends.len());
        for cell in cells.iter().take(self.columns.len()) {
            self.text.push_str(cell);
            self.cell_ends.push(self.text.len());
        }
    }

    /// The cells of row `i`.
    fn cells(&self, i: usize) -> impl Iterator<Item = &str> {
        let from = self.row_starts[i];
        let to = self.row_starts.get(i + 1).copied().unwrap_or(self.cell_ends.len());
        (from..to).map(move |c| {
            let start = if c == 0 { 0 } else { self.cell_ends[c - 1] };
            &self.text[start..self.cell_ends[c]]
        })
    }

    /// The table, each line starting with `indent` spaces and ending with a newline.
    pub fn render(&self, indent: usize) -> String {
        let n = self.columns.len();
        let mut widths: Vec<usize> = self.columns.iter().map(|(h, _)| width(h)).collect();
        for row in 0..self.row_starts.len() {
            for (w, cell) in widths.iter_mut().zip(self.cells(row)) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        let header: Vec<&str> = self.columns.iter().map(|(h, _)| h.as_str()).collect();
        let lines = std::iter::once(header).chain((0..self.row_starts.len()).map(|r| self.cells(r).collect()));
        for cells in lines {
            let mut line = " ".repeat(indent);
            for (i, (_, align)) in self.columns.iter().enumerate() {
                let cell = cells.get(i).copied().unwrap_or("");
                let pad = widths[i].saturating_sub(width(cell));
                match align {
                    Align::Right => {
                        line.push_str(&" ".repeat(pad));
                        line.push_str(cell);
                    }
                    Align::Left => {
                        line.push_str(cell);
                        if i + 1 < n {
                            line.push_str(&" ".repeat(pad));
                        }
                    }
                }
                if i + 1 < n {
                    line.push_str("  ");
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Display width of a cell (one column per character).
fn width(s: &str) -> usize {
    s.chars().count()
}

const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];

/// A byte count, human-readable: `512 B`, `75.9 KiB`, `4.0 MiB`, `1.2 GiB`.
pub fn size(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Move up a unit when the value would print as 1024.0 of this one.
    while (value * 10.0).round() >= 1024.0 * 10.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A fractional byte count (an average), human-readable like [`size`].
pub fn size_f(bytes: f64) -> String {
    if bytes < 1024.0 {
        format!("{:.1} B", bytes)
    } else {
        size(bytes.round() as u64)
    }
}

/// A ratio as a percentage with one decimal: `0.1%`, `87.5%`; `-` for none.
pub fn percent(ratio: Option<f64>) -> String {
    ratio.map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0))
}

/// `n` things, singular or plural: `1 allocation`, `3 allocations`.
pub fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A `ratio = part / whole`, or `None` when `whole` is zero.
pub fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1024), "1.0 KiB");
        assert_eq!(size(77_777), "76.0 KiB");
        assert_eq!(size(1_048_575), "1.0 MiB");
        assert_eq!(size(4 << 20), "4.0 MiB");
        assert_eq!(size(3 << 30), "3.0 GiB");
        assert_eq!(size_f(337_920.0), "330.0 KiB");
        assert_eq!(size_f(12.25), "12.2 B");
        assert_eq!(percent(Some(0.001)), "0.1%");
        assert_eq!(percent(None), "-");
        assert_eq!(plural(1, "allocation"), "1 allocation");
        assert_eq!(plural(2, "allocation"), "2 allocations");
    }

    #[test]
    fn tables_align() {
        let mut t = Table::new(&[("name", Align::Left), ("bytes", Align::Right)]);
        t.row(vec!["a".into(), "1 B".into()]);
        t.row(vec!["longer".into(), "10.0 KiB".into()]);
        assert_eq!(t.render(2), "  name       bytes\n  a            1 B\n  longer  10.0 KiB\n");
    }
}
