//! A `.npy` header's own checks, before `npyz` parses it: its length, its nesting and its shape
//! (each refused in time linear in the header's length), and the parser's error as one line.

use std::io::Read;

/// The longest header read, as NumPy's own reader allows (`np.load`'s `max_header_size`).
pub(super) const MAX_HEADER_LEN: u64 = 10_000;

/// How deep brackets nest in the header of a plain float array: the dictionary and the shape's
/// tuple. Deeper nesting is a structured dtype (refused anyway), and is refused here before a
/// parser sees it: parsers of Python literals backtrack, and their time grows exponentially
/// with the depth.
pub(super) const MAX_HEADER_DEPTH: usize = 2;

/// The header's text, read and checked in time linear in its length: the magic string, a
/// length that the file holds and that is at most [`MAX_HEADER_LEN`], UTF-8, and brackets
/// nested at most [`MAX_HEADER_DEPTH`] deep outside quotes. The error says what is wrong, to
/// follow the file's name.
pub(super) fn header_text(reader: &mut impl Read, file_len: u64) -> Result<String, String> {
    let invalid = || "is not a valid .npy file (or its header is cut off)".to_string();
    let mut pre = [0u8; 12];
    reader.read_exact(&mut pre[..10]).map_err(|_| invalid())?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(invalid());
    }
    // Version 1 stores the header's length in 2 bytes, versions 2 and 3 in 4.
    let len = if pre[6] == 1 {
        u64::from(u16::from_le_bytes([pre[8], pre[9]]))
    } else {
        reader.read_exact(&mut pre[10..]).map_err(|_| invalid())?;
        u64::from(u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]))
    };
    if len > MAX_HEADER_LEN {
        return Err(format!(
            "has a header of {len} bytes; a float32 or float64 array's header is under \
             {MAX_HEADER_LEN} (NumPy's own limit)"
        ));
    }
    if len > file_len {
        return Err(invalid());
    }
    let mut bytes = vec![0u8; len as usize];
    reader.read_exact(&mut bytes).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (mut depth, mut quote, mut escaped) = (0usize, None, false);
    for c in text.chars() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                if depth > MAX_HEADER_DEPTH {
                    return Err(format!(
                        "has a header nested more than {MAX_HEADER_DEPTH} brackets deep (a \
                         structured dtype); fused-mh reads float32 or float64"
                    ));
                }
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            (None, _) => {}
        }
    }
    Ok(text)
}

/// The shape in a `.npy` header, read on its own: `npyz` multiplies the dimensions without
/// checking for overflow, so a shape whose product overflows is caught here first. `None`
/// where the header is not readable (`npyz` then says why).
pub(super) fn raw_shape(text: &str) -> Option<Vec<u64>> {
    let dict: py_literal::Value = text.trim().parse().ok()?;
    let py_literal::Value::Dict(entries) = dict else {
        return None;
    };
    let (_, shape) = entries
        .iter()
        .find(|(k, _)| matches!(k, py_literal::Value::String(s) if s == "shape"))?;
    let (py_literal::Value::Tuple(dims) | py_literal::Value::List(dims)) = shape else {
        return None;
    };
    dims.iter()
        .map(|d| match d {
            py_literal::Value::Integer(n) => u64::try_from(n).ok(),
            _ => None,
        })
        .collect()
}

/// `npyz`'s error for a header it could not parse, said in one line: the Python-literal
/// parser draws a multi-line picture of where it stopped (`--> 1:57`, the header, a caret,
/// `= expected value`), which becomes "at column 57 of the header: expected value". Any other
/// message is returned as it is (the program's error printer puts every message on one line,
/// `console::one_line`; this only keeps the picture readable there).
pub(super) fn parse_error_line(message: &str) -> String {
    let lines: Vec<&str> = message.lines().map(str::trim).collect();
    let (Some((head, position)), Some(expected)) = (
        lines.first().and_then(|l| l.split_once("-->")),
        lines.iter().find_map(|l| l.strip_prefix("= ")),
    ) else {
        return message.to_string();
    };
    let head = head.trim().trim_end_matches(':');
    // The header is one line of text, so the parser's `line:column` is `1:column`.
    let column = position.trim().rsplit(':').next().unwrap_or("?");
    format!("{head} at column {column} of the header: {expected}")
}

#[cfg(test)]
pub(super) mod tests {
    use std::io::Cursor;

    use npyz::NpyHeader;

    use super::*;

    /// The bytes of a version-1 `.npy` header holding `dict`, padded as NumPy pads it (also
    /// the start of `npy/mod.rs`'s hand-made test files).
    pub(in crate::npy) fn header_bytes(dict: &str) -> Vec<u8> {
        let mut f = b"\x93NUMPY\x01\x00".to_vec();
        let pad = 64 - (10 + dict.len() + 1) % 64;
        f.extend_from_slice(&((dict.len() + pad + 1) as u16).to_le_bytes());
        f.extend_from_slice(dict.as_bytes());
        f.extend(std::iter::repeat_n(b' ', pad));
        f.push(b'\n');
        f
    }

    /// `npyz`'s own message for headers its parser stops on (a tuple left open, a stray
    /// letter after the shape) becomes one line that keeps the position and the expectation.
    #[test]
    fn parser_errors_become_one_line() {
        let cases = [
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4,3, }",
                57,
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3),D}",
                58,
            ),
        ];
        for (dict, column) in cases {
            let Err(e) = NpyHeader::from_reader(Cursor::new(header_bytes(dict))) else {
                panic!("the parser took {dict}");
            };
            let raw = e.to_string();
            assert!(
                raw.lines().count() > 1,
                "npyz's message is one line now: {raw}"
            );
            let line = parse_error_line(&raw);
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.starts_with("could not parse Python expression: syntax error at column ")
                    && line.contains(&format!("column {column} of the header: expected ")),
                "{line}"
            );
        }
        // Any other message stays as it is.
        assert_eq!(
            parse_error_line("dimension must be an integer"),
            "dimension must be an integer"
        );
    }
}
