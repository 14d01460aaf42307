//! The saved plan's text layout (`docs/plan-format.md`, "Layout"): serde_json's two-space
//! indentation, except that an object or list holding no object or list — a source span, a
//! score, a list of names — is written on one line when that line is short:
//!
//! ```json
//! "requirement": {"file": "workloads.berth", "line": 63, "column": 10, "start": 1504, "end": 1506},
//! ```
//!
//! A plan is read back as JSON, so the layout is free to change; it is kept because a plan is
//! reviewed (and diffed in git) line by line, and because a span on seven lines made a dense
//! fleet's plan twice as long as its content. The plan id is computed on the compact form and
//! does not depend on the layout.
//!
//! [`ShortLeaves`] rewrites serde_json's pretty output as it streams through, holding only the
//! innermost open object or list while it may still be a leaf; it never buffers the plan.

use std::io::{self, Write};

/// The longest leaf written on one line, in bytes, without its indentation.
const ONE_LINE_MAX: usize = 120;

/// Where the text written so far stands with respect to JSON strings.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InString {
    No,
    Yes,
    /// Just after a backslash inside a string: the next byte is escaped.
    Escaped,
}

impl InString {
    /// The state after `byte`, read inside a string (`Yes` or `Escaped`).
    fn inside_after(self, byte: u8) -> InString {
        match (self, byte) {
            (InString::Escaped, _) => InString::Yes,
            (_, b'\\') => InString::Escaped,
            (_, b'"') => InString::No,
            _ => InString::Yes,
        }
    }
}

/// An [`io::Write`] adapter over serde_json's pretty output: see the module documentation.
/// Call [`ShortLeaves::finish`] at the end of the document.
pub struct ShortLeaves<W: Write> {
    inner: W,
    /// The innermost open object or list, from its opening bracket, while it holds no object
    /// or list (`None` outside one, or once it has shown a nested one: then its text has gone
    /// to `inner` as it was).
    leaf: Option<Vec<u8>>,
    string: InString,
    /// Text bound for `inner`, written in blocks.
    out: Vec<u8>,
}

impl<W: Write> ShortLeaves<W> {
    pub fn new(inner: W) -> Self {
        ShortLeaves {
            inner,
            leaf: None,
            string: InString::No,
            out: Vec::with_capacity(1 << 16),
        }
    }

    /// Writes what is held (an unfinished leaf as it was written) and flushes `inner`.
    pub fn finish(mut self) -> io::Result<W> {
        if let Some(leaf) = self.leaf.take() {
            self.out.extend_from_slice(&leaf);
        }
        self.inner.write_all(&self.out)?;
        self.out.clear();
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn keep(&mut self, byte: u8) {
        match &mut self.leaf {
            Some(leaf) => leaf.push(byte),
            None => self.out.push(byte),
        }
    }

    fn close_leaf(&mut self, leaf: Vec<u8>) {
        let line = one_line(&leaf);
        if line.len() <= ONE_LINE_MAX {
            self.out.extend_from_slice(&line);
        } else {
            self.out.extend_from_slice(&leaf);
        }
    }
}

impl<W: Write> Write for ShortLeaves<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for &byte in buf {
            match self.string {
                InString::Yes | InString::Escaped => {
                    self.keep(byte);
                    self.string = self.string.inside_after(byte);
                }
                InString::No => match byte {
                    b'"' => {
                        self.keep(byte);
                        self.string = InString::Yes;
                    }
                    b'{' | b'[' => {
                        // The enclosing container holds one: it is not a leaf.
                        if let Some(outer) = self.leaf.take() {
                            self.out.extend_from_slice(&outer);
                        }
                        self.leaf = Some(vec![byte]);
                    }
                    b'}' | b']' => match self.leaf.take() {
                        Some(mut leaf) => {
                            leaf.push(byte);
                            self.close_leaf(leaf);
                        }
                        None => self.out.push(byte),
                    },
                    _ => self.keep(byte),
                },
            }
        }
        if self.out.len() >= 1 << 16 {
            self.inner.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(buf.len())
    }

    /// Writes what is complete; a leaf still open stays held (it may yet become one line).
    fn flush(&mut self) -> io::Result<()> {
        self.inner.write_all(&self.out)?;
        self.out.clear();
        self.inner.flush()
    }
}

/// A leaf's pretty text on one line: line breaks and indentation dropped, one space after each
/// `,` and `:` outside strings.
fn one_line(pretty: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(pretty.len());
    let mut string = InString::No;
    for &byte in pretty {
        match string {
            InString::Yes | InString::Escaped => {
                line.push(byte);
                string = string.inside_after(byte);
            }
            InString::No => match byte {
                b' ' | b'\n' => {}
                b',' | b':' => line.extend_from_slice(&[byte, b' ']),
                b'"' => {
                    line.push(byte);
                    string = InString::Yes;
                }
                _ => line.push(byte),
            },
        }
    }
    line
}

/// `value` as serde_json's pretty text in this layout, with a final newline.
pub fn to_writer<T: serde::Serialize + ?Sized>(out: impl Write, value: &T) -> io::Result<()> {
    let mut layout = ShortLeaves::new(out);
    serde_json::to_writer_pretty(&mut layout, value).map_err(io::Error::other)?;
    layout.write_all(b"\n")?;
    layout.finish().map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn laid_out(value: &Value) -> String {
        let mut out = Vec::new();
        to_writer(&mut out, value).expect("written to memory");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn leaves_go_on_one_line_and_the_rest_keeps_its_indentation() {
        let plan = json!({
            "format": "berth.plan/v3",
            // (Keys in byte order: serde_json's map here sorts them.)
            "workloads": [{
                "approval": null,
                "data": [],
                "fallback": ["t1", "t2"],
                "long": ["x".repeat(60), "y".repeat(60)],
                "requirement": {"column": 10, "end": 2, "file": "a.berth", "line": 3, "start": 1},
                "score": [{"objective": "cost", "value": 4}],
                "workload": "w",
            }],
        });
        let expected = format!(
            r#"{{
  "format": "berth.plan/v3",
  "workloads": [
    {{
      "approval": null,
      "data": [],
      "fallback": ["t1", "t2"],
      "long": [
        "{}",
        "{}"
      ],
      "requirement": {{"column": 10, "end": 2, "file": "a.berth", "line": 3, "start": 1}},
      "score": [
        {{"objective": "cost", "value": 4}}
      ],
      "workload": "w"
    }}
  ]
}}
"#,
            "x".repeat(60),
            "y".repeat(60)
        );
        assert_eq!(laid_out(&plan), expected);
    }

    #[test]
    fn brackets_quotes_and_escapes_inside_strings_are_text() {
        let value = json!({"m": {"a": "{[\"x\", \\]}", "b": "a: b, c\nd"}, "n": ["]", "\\"]});
        let text = laid_out(&value);
        assert_eq!(
            text,
            "{\n  \"m\": {\"a\": \"{[\\\"x\\\", \\\\]}\", \"b\": \"a: b, c\\nd\"},\n  \"n\": [\"]\", \"\\\\\"]\n}\n"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).expect("json"), value);
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z{}\\[\\]\",:\\\\ \n\t\u{e9}]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\":{]{1,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The layout changes whitespace only: the text reads back as the same value, and
        /// without whitespace outside strings it is serde_json's compact text.
        #[test]
        fn the_layout_is_whitespace_only(value in any_json()) {
            let text = laid_out(&value);
            prop_assert_eq!(&serde_json::from_str::<Value>(&text).expect("json"), &value);
            let pretty = serde_json::to_string_pretty(&value).expect("json") + "\n";
            prop_assert_eq!(one_line(text.as_bytes()), one_line(pretty.as_bytes()));
            prop_assert!(text.len() <= pretty.len());
        }
    }
}
