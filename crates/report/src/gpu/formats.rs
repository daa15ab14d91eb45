//! Bytes per texel (or per compressed block) of the common GPU formats, and the size a
//! texture's texel data takes: what `gpu`'s padding and power-of-two pivots compare an
//! allocation against.
//!
//! Names are matched as Vulkan (`VK_FORMAT_BC7_UNORM_BLOCK`), DXGI
//! (`DXGI_FORMAT_R8G8B8A8_UNORM_SRGB`), wgpu (`Rgba8UnormSrgb`, `Bc7RgbaUnorm`,
//! `Depth24PlusStencil8`) and plain (`BC7`, `RGBA8`) spellings write them. A name none of
//! the rules knows is "unknown format": never guessed.

/// How a format stores texels: `bytes` per block of `block_w` × `block_h` texels (1 × 1
/// for uncompressed formats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatInfo {
    /// Bytes per block.
    pub bytes: u32,
    /// Block width in texels.
    pub block_w: u32,
    /// Block height in texels.
    pub block_h: u32,
}

impl FormatInfo {
    const fn texel(bytes: u32) -> FormatInfo {
        FormatInfo { bytes, block_w: 1, block_h: 1 }
    }

    const fn block(bytes: u32, w: u32, h: u32) -> FormatInfo {
        FormatInfo { bytes, block_w: w, block_h: h }
    }

    /// Bytes of one `width` × `height` image (partial blocks round up).
    pub fn image_bytes(&self, width: u32, height: u32) -> u64 {
        let bw = u64::from(width.max(1)).div_ceil(u64::from(self.block_w));
        let bh = u64::from(height.max(1)).div_ceil(u64::from(self.block_h));
        // Saturating: a hostile descriptor (4G x 4G texels) must not overflow.
        bw.saturating_mul(bh).saturating_mul(u64::from(self.bytes))
    }

    /// Bytes of texel data of a `width` × `height` texture with `layers` layers and `mips`
    /// mip levels (each half the last, at least 1 × 1; 0 mips counts as 1). Depth is
    /// counted as array layers: a 3D texture's smaller mips are over-counted.
    pub fn texture_bytes(&self, width: u32, height: u32, layers: u32, mips: u32) -> u64 {
        let mut total = 0u64;
        for m in 0..mips.clamp(1, 32) {
            let w = (width >> m).max(1);
            let h = (height >> m).max(1);
            total = total.saturating_add(self.image_bytes(w, h));
            if w == 1 && h == 1 {
                break;
            }
        }
        total.saturating_mul(u64::from(layers.max(1)))
    }
}

/// The layout of the format named `name`, or `None` when it is not one this table knows.
pub fn format_info(name: &str) -> Option<FormatInfo> {
    let key = normalize(name);
    if key.is_empty() {
        return None;
    }
    named(&key).or_else(|| channels(&key))
}

/// Upper case, letters and digits only, without API prefixes and numeric-type suffixes:
/// `VK_FORMAT_R8G8B8A8_UNORM` → `R8G8B8A8`, `Rgba8UnormSrgb` → `RGBA8`,
/// `DXGI_FORMAT_BC7_UNORM_SRGB` → `BC7`, `Depth24PlusStencil8` → `DEPTH24PLUSSTENCIL8`.
fn normalize(name: &str) -> String {
    let mut s: String = name.trim().to_ascii_uppercase();
    for prefix in ["VK_FORMAT_", "DXGI_FORMAT_", "WGPU_TEXTURE_FORMAT_", "TEXTUREFORMAT::", "FORMAT_"] {
        if let Some(rest) = s.strip_prefix(prefix) {
            s = rest.to_owned();
        }
    }
    let mut s: String = s.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    // Numeric types and colour spaces say nothing about size; strip them from the end,
    // longest first, as often as they stack (`UNORMSRGB`, `UNORMBLOCK`, `SFLOATPACK32`).
    const SUFFIXES: [&str; 16] = [
        "PACK32", "PACK16", "PACK8", "BLOCK", "SRGB", "UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "UFLOAT",
        "SFLOAT", "FLOAT", "TYPELESS", "RGBA",
    ];
    loop {
        let before = s.len();
        for suffix in SUFFIXES {
            // Keep `BC7RGBA` → `BC7`, but never strip a whole name (`RGBA` alone).
            if s.len() > suffix.len() && s.ends_with(suffix) {
                if suffix == "RGBA" && !s.starts_with("BC") {
                    continue;
                }
                s.truncate(s.len() - suffix.len());
                break;
            }
        }
        if s.len() == before {
            return s;
        }
    }
}

/// Compressed, depth and packed formats, by normalized name.
fn named(key: &str) -> Option<FormatInfo> {
    let block8 = FormatInfo::block(8, 4, 4);
    let block16 = FormatInfo::block(16, 4, 4);
    Some(match key {
        // BC (S3TC / DXT, RGTC, BPTC): wgpu writes Bc1RgbaUnorm, Bc4RUnorm, Bc5RgUnorm, Bc6hRgbUfloat.
        "BC1" | "BC1RGB" | "BC1RGBA" | "DXT1" | "BC4" | "BC4R" => block8,
        "BC2" | "DXT3" | "BC3" | "DXT5" | "BC5" | "BC5RG" | "BC6H" | "BC6HRGB" | "BC6HUF16" | "BC6HSF16" | "BC7" => {
            block16
        }
        // ETC2 / EAC.
        "ETC2R8G8B8" | "ETC2RGB8" | "ETC2R8G8B8A1" | "ETC2RGB8A1" | "EACR11" | "ETC1" => block8,
        "ETC2R8G8B8A8" | "ETC2RGBA8" | "EACR11G11" | "EACRG11" => block16,
        // Depth and stencil (the sizes D3D12 and Vulkan drivers allocate).
        "D16" | "DEPTH16" => FormatInfo::texel(2),
        "D24S8" | "D24UNORMS8" | "X8D24" | "D24X8" | "DEPTH24PLUS" | "DEPTH24PLUSSTENCIL8" | "R24G8" => {
            FormatInfo::texel(4)
        }
        "D32" | "DEPTH32" | "D32S8" | "D32SFLOATS8" | "D32FLOATS8X24" | "R32G8X24" | "DEPTH32STENCIL8" => {
            // D32 alone is 4; with stencil, 8 (D3D12's D32_FLOAT_S8X24 layout).
            if key.contains('S') || key.contains("G8") {
                FormatInfo::texel(8)
            } else {
                FormatInfo::texel(4)
            }
        }
        "S8" | "STENCIL8" => FormatInfo::texel(1),
        // Packed formats whose names do not add up channel by channel.
        "R11G11B10" | "B10G11R11" | "RG11B10" | "A2B10G10R10" | "A2R10G10B10" | "R10G10B10A2" | "RGB10A2"
        | "RGB9E5" | "E5B9G9R9" | "R9G9B9E5" | "RGB9E5U" => FormatInfo::texel(4),
        "R5G6B5" | "B5G6R5" | "B5G5R5A1" | "R5G5B5A1" | "A1R5G5B5" | "B4G4R4A4" | "R4G4B4A4" | "A4R4G4B4" => {
            FormatInfo::texel(2)
        }
        _ => return astc(key),
    })
}

/// ASTC: 16 bytes per block of the size the name gives (`ASTC4X4`, `ASTC10X8`).
fn astc(key: &str) -> Option<FormatInfo> {
    let dims = key.strip_prefix("ASTC")?;
    let (w, h) = dims.split_once('X')?;
    let h: String = h.chars().take_while(char::is_ascii_digit).collect();
    let (w, h) = (w.parse::<u32>().ok()?, h.parse::<u32>().ok()?);
    (4..=12).contains(&w).then_some(())?;
    (4..=12).contains(&h).then_some(())?;
    Some(FormatInfo::block(16, w, h))
}

/// Channel formats: `R8G8B8A8`, `B8G8R8A8`, `R16G16`, `R32G32B32A32` (bits per channel
/// named), and wgpu's `RGBA8`, `RG16`, `R32` (one width for every channel). Bits must add
/// up to whole bytes.
fn channels(key: &str) -> Option<FormatInfo> {
    let mut bits = 0u32;
    let mut letters = 0u32;
    let mut pending = 0u32;
    let mut digits = String::new();
    for c in key.chars() {
        match c {
            'R' | 'G' | 'B' | 'A' | 'X' | 'L' => {
                if !digits.is_empty() {
                    bits += digits.parse::<u32>().ok()? * pending;
                    digits.clear();
                    pending = 0;
                }
                letters += 1;
                pending += 1;
            }
            '0'..='9' => {
                if pending == 0 {
                    return None;
                }
                digits.push(c);
            }
            _ => return None,
        }
    }
    if digits.is_empty() || letters == 0 || letters > 4 {
        return None;
    }
    bits += digits.parse::<u32>().ok()? * pending;
    (bits % 8 == 0 && bits > 0 && bits <= 128).then(|| FormatInfo::texel(bits / 8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(name: &str) -> Option<(u32, u32, u32)> {
        format_info(name).map(|f| (f.bytes, f.block_w, f.block_h))
    }

    #[test]
    fn the_spellings_of_each_api_name_the_same_layout() {
        for name in [
            "VK_FORMAT_R8G8B8A8_UNORM",
            "DXGI_FORMAT_R8G8B8A8_UNORM_SRGB",
            "Rgba8UnormSrgb",
            "RGBA8",
            "B8G8R8A8_SRGB",
            "Bgra8Unorm",
        ] {
            assert_eq!(bytes(name), Some((4, 1, 1)), "{name}");
        }
        for name in [
            "VK_FORMAT_BC7_SRGB_BLOCK",
            "DXGI_FORMAT_BC7_UNORM",
            "Bc7RgbaUnormSrgb",
            "BC7_UNORM",
            "BC3",
            "Bc6hRgbUfloat",
            "BC5_SNORM",
            "Bc5RgUnorm",
        ] {
            assert_eq!(bytes(name), Some((16, 4, 4)), "{name}");
        }
        for name in ["BC1_UNORM", "Bc1RgbaUnorm", "VK_FORMAT_BC1_RGB_UNORM_BLOCK", "BC4_UNORM", "Bc4RUnorm", "DXT1"] {
            assert_eq!(bytes(name), Some((8, 4, 4)), "{name}");
        }
        assert_eq!(bytes("VK_FORMAT_R16G16B16A16_SFLOAT"), Some((8, 1, 1)));
        assert_eq!(bytes("Rgba16Float"), Some((8, 1, 1)));
        assert_eq!(bytes("DXGI_FORMAT_R32G32B32A32_FLOAT"), Some((16, 1, 1)));
        assert_eq!(bytes("R32_FLOAT"), Some((4, 1, 1)));
        assert_eq!(bytes("Rg11b10Ufloat"), Some((4, 1, 1)));
        assert_eq!(bytes("VK_FORMAT_B10G11R11_UFLOAT_PACK32"), Some((4, 1, 1)));
        assert_eq!(bytes("VK_FORMAT_A2B10G10R10_UNORM_PACK32"), Some((4, 1, 1)));
        assert_eq!(bytes("R8_UNORM"), Some((1, 1, 1)));
        assert_eq!(bytes("VK_FORMAT_D24_UNORM_S8_UINT"), Some((4, 1, 1)));
        assert_eq!(bytes("Depth24PlusStencil8"), Some((4, 1, 1)));
        assert_eq!(bytes("D32_FLOAT"), Some((4, 1, 1)));
        assert_eq!(bytes("Depth32Float"), Some((4, 1, 1)));
        assert_eq!(bytes("DXGI_FORMAT_D32_FLOAT_S8X24_UINT"), Some((8, 1, 1)));
        assert_eq!(bytes("VK_FORMAT_D16_UNORM"), Some((2, 1, 1)));
        assert_eq!(bytes("VK_FORMAT_ASTC_8x6_UNORM_BLOCK"), Some((16, 8, 6)));
        assert_eq!(bytes("ASTC_4x4"), Some((16, 4, 4)));
    }

    #[test]
    fn unknown_names_are_not_guessed() {
        for name in ["", "R7G3", "ASTC_3x3", "NV12", "whatever", "RGBA", "UNORM", "R8G8B8A8G8"] {
            assert_eq!(format_info(name), None, "{name}");
        }
    }

    #[test]
    fn texel_data_counts_every_mip_and_layer_with_partial_blocks_rounded_up() {
        let rgba8 = format_info("RGBA8").unwrap();
        // 256², 128², ..., 1²: 4/3 of the top level, minus a little.
        assert_eq!(rgba8.texture_bytes(256, 256, 1, 9), (0..9).map(|m| 4u64 * (256 >> m) * (256 >> m)).sum::<u64>());
        assert_eq!(rgba8.texture_bytes(1920, 1080, 1, 1), 1920 * 1080 * 4);
        assert_eq!(rgba8.texture_bytes(4, 4, 6, 1), 4 * 4 * 4 * 6);
        let bc7 = format_info("BC7").unwrap();
        // 10 × 6 texels: 3 × 2 blocks; 5 × 3: 2 × 1; 2 × 1: 1 block; 1 × 1: 1 block.
        assert_eq!(bc7.texture_bytes(10, 6, 1, 4), 16 * (6 + 2 + 1 + 1));
        // More mips than the chain has stop at 1 × 1.
        assert_eq!(bc7.texture_bytes(4, 4, 1, 12), 16 * 3);
        assert_eq!(rgba8.texture_bytes(8, 8, 1, 0), 256);
    }
}
