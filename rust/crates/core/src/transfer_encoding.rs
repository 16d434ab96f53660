//! The Content-Transfer-Encoding of a text attachment, chosen from its content (RFC 2045).
//!
//! Base64 around plain ASCII text hides nothing and looks like evasion to spam filters (rspamd's
//! MIME_BASE64_TEXT_BOGUS), so a `text/*` attachment is written as readers and filters expect,
//! much as Thunderbird chooses: as it is when it already fits 7bit, quoted-printable when it
//! needs a little escaping, base64 when most of it would need escaping. Content with NUL or
//! other control characters is not text whatever its label, and keeps its exact bytes in base64.
//! Other media types are always base64: their bytes must arrive exactly and no reader looks
//! inside them.
//!
//! Line breaks: in a text part they are CRLF in canonical form (RFC 2046 section 4.1.1, RFC 2045
//! section 6.8), so a text attachment's bare CR and bare LF become CRLF, whichever encoding
//! carries it. Binary content is never touched.

use std::borrow::Cow;

use memchr::{memchr, memchr2_iter};

/// RFC 5322 section 2.1.1 (and RFC 2045 section 2.7 for 7bit): at most 998 octets a line.
const MAX_7BIT_LINE: usize = 998;

/// How a `text/*` attachment travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextEncoding {
    /// ASCII with lines of at most 998 octets: written as it is (line breaks made CRLF).
    SevenBit,
    /// A little non-ASCII or `=`, or lines too long for 7bit: quoted-printable, which is
    /// smaller than base64 while at most one octet in six needs escaping.
    QuotedPrintable,
    /// Mostly non-ASCII (most scripts but Latin): base64 of the text, line breaks made CRLF.
    Base64,
    /// NUL or another control character but TAB, CR and LF: not text, base64 of the bytes as
    /// given.
    Binary,
}

impl TextEncoding {
    /// Whether the content is text, whose line breaks are made CRLF before encoding.
    pub fn is_text(self) -> bool {
        self != TextEncoding::Binary
    }
}

/// Chooses the encoding of a `text/*` attachment's content. Pure.
pub fn choose_text_encoding(content: &[u8]) -> TextEncoding {
    let mut escaped = 0usize; // octets quoted-printable writes as `=XX`
    let mut non_ascii = false;
    // Blocks whose inner loop has no branch, so that it vectorises: a text attachment is read
    // at close to memory speed.
    for block in content.chunks(512) {
        let (mut controls, mut high, mut equals) = (0u32, 0u32, 0u32);
        for &byte in block {
            let line_or_tab = (byte == b'\t') | (byte == b'\r') | (byte == b'\n');
            controls |= u32::from((byte < 0x20) & !line_or_tab);
            high += u32::from(byte >= 0x7f);
            equals += u32::from(byte == b'=');
        }
        if controls != 0 {
            return TextEncoding::Binary;
        }
        non_ascii |= high != 0;
        escaped += (high + equals) as usize;
    }
    if !non_ascii && longest_line(content) <= MAX_7BIT_LINE {
        TextEncoding::SevenBit
    } else if escaped * 6 <= content.len() {
        TextEncoding::QuotedPrintable
    } else {
        TextEncoding::Base64
    }
}

/// The longest line's length, a bare CR, a bare LF and CRLF each ending one.
fn longest_line(content: &[u8]) -> usize {
    let (mut longest, mut start) = (0, 0);
    for at in memchr2_iter(b'\r', b'\n', content) {
        longest = longest.max(at - start); // 0 for the LF of a CRLF
        start = at + 1;
    }
    longest.max(content.len() - start)
}

/// Rewrites every line break that is not CRLF as CRLF: each bare CR, and each bare LF when
/// `bare_lf`. Content without one is borrowed.
pub fn crlf_line_breaks(content: &[u8], bare_lf: bool) -> Cow<'_, [u8]> {
    if !bare_lf && memchr(b'\r', content).is_none() {
        return Cow::Borrowed(content);
    }
    let is_bare = |at: usize| match content[at] {
        b'\r' => content.get(at + 1) != Some(&b'\n'),
        _ => bare_lf && (at == 0 || content[at - 1] != b'\r'),
    };
    let Some(first) = memchr2_iter(b'\r', b'\n', content).find(|&at| is_bare(at)) else {
        return Cow::Borrowed(content);
    };
    let mut fixed = Vec::with_capacity(content.len() + content.len() / 32 + 2);
    let mut start = 0;
    for at in memchr2_iter(b'\r', b'\n', &content[first..]).map(|at| at + first) {
        if !is_bare(at) {
            continue;
        }
        fixed.extend_from_slice(&content[start..at]);
        fixed.extend_from_slice(b"\r\n");
        start = at + 1;
    }
    fixed.extend_from_slice(&content[start..]);
    Cow::Owned(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_encoding_table() {
        use TextEncoding::{Base64, Binary, QuotedPrintable, SevenBit};
        let long_ascii = format!("{}\n", "a".repeat(999));
        let longest_7bit = format!("{}\r\nshort\n", "a".repeat(998));
        let latin = "Grüße aus München, the report is attached.\n".repeat(3);
        let cyrillic = "Отчёт во вложении.\n".repeat(3);
        let latin_1 = b"caf\xe9 au lait, s'il vous pla\xeet\n";
        let cases: [(&str, &[u8], TextEncoding); 17] = [
            ("empty", b"", SevenBit),
            ("csv with LF", b"a,b\n1,2\n", SevenBit),
            ("CRLF lines", b"one\r\ntwo\r\n", SevenBit),
            ("bare CR", b"one\rtwo", SevenBit),
            ("tab", b"a\tb\n", SevenBit),
            ("'=' is fine in 7bit", b"a=b\n", SevenBit),
            ("998-octet line", longest_7bit.as_bytes(), SevenBit),
            ("999-octet line", long_ascii.as_bytes(), QuotedPrintable),
            ("some Latin", latin.as_bytes(), QuotedPrintable),
            ("Latin-1 bytes", latin_1, QuotedPrintable),
            ("DEL", b"rubout \x7f here", QuotedPrintable),
            ("mostly Cyrillic", cyrillic.as_bytes(), Base64),
            ("all high", b"\xe9\xe9\xe9\xe9", Base64),
            ("NUL", b"a\0b\n", Binary),
            ("form feed", b"page\x0cnext\n", Binary),
            ("UTF-16", b"\xff\xfeh\0i\0", Binary),
            ("escape", b"\x1b[1mbold\n", Binary),
        ];
        for (what, content, expected) in cases {
            assert_eq!(choose_text_encoding(content), expected, "{what}");
        }
        // '=' counts towards quoted-printable's size once the text has to be encoded.
        let mut equals_and_high = "a=b\n".repeat(10).into_bytes();
        equals_and_high.push(0xe9);
        assert_eq!(choose_text_encoding(&equals_and_high), Base64);
        assert!(!Binary.is_text() && Base64.is_text());
    }

    #[test]
    fn crlf_line_breaks_table() {
        let cases: [(&[u8], bool, &[u8]); 9] = [
            (b"", true, b""),
            (b"a\r\nb\r\n", true, b"a\r\nb\r\n"),
            (b"a\nb\n", true, b"a\r\nb\r\n"),
            (b"a\nb\n", false, b"a\nb\n"),
            (b"a\rb\r", true, b"a\r\nb\r\n"),
            (b"a\rb\r", false, b"a\r\nb\r\n"),
            (b"\n\r\r\n\n\r", true, b"\r\n\r\n\r\n\r\n\r\n"),
            (b"x\r.\r\n", false, b"x\r\n.\r\n"),
            (b"\r\n\n", false, b"\r\n\n"),
        ];
        for (content, bare_lf, expected) in cases {
            assert_eq!(
                crlf_line_breaks(content, bare_lf).as_ref(),
                expected,
                "{content:?} bare_lf={bare_lf}"
            );
        }
        assert!(matches!(
            crlf_line_breaks(b"a\r\nb\n", false),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            crlf_line_breaks(b"a\r\nb", true),
            Cow::Borrowed(_)
        ));
    }
}
