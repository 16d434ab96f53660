//! MIME assembly: one validated [`MessageSpec`] in, the bytes of an RFC 5322 message out.
//!
//! `mail-builder` does the encoding (RFC 2047 words, RFC 2231 parameters, quoted-printable or
//! base64 bodies) and the folding. This module owns what it does not: refusing header injection
//! and malformed fields, the MIME tree, IDN domains, the transfer encoding of attachments (see
//! [`crate::transfer_encoding`]), and the nondeterministic parts (Date, Message-ID, boundaries),
//! which callers may inject so tests can compare golden bytes.
//!
//! Tree: `text` and `html` together make `multipart/alternative`; parts with a content id sit
//! in `multipart/related` with the html (`alternative[text, related[html, inline...]]`); other
//! attachments (and inline parts when there is no html to refer to them) make the message
//! `multipart/mixed`. Boundaries are `{seed}_{n}`, numbered from the outermost part.

use std::borrow::Cow;
use std::fmt;

use mail_builder::encoders::QuotedPrintableEncoder;
use mail_builder::headers::address::Address;
use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::date::Date as RfcDate;
use mail_builder::headers::message_id::MessageId;
use mail_builder::headers::raw::Raw;
use mail_builder::headers::text::Text;
use mail_builder::headers::HeaderType;
use mail_builder::mime::{BodyPart, MimePart};
use mail_builder::MessageBuilder;
use rand::RngCore;

use crate::transfer_encoding::{choose_text_encoding, crlf_line_breaks, TextEncoding};

#[derive(Debug, thiserror::Error)]
pub enum MimeError {
    /// A field holds CR, LF or NUL: written as is, it would start a new header or body.
    #[error("header injection refused: {0}")]
    HeaderInjection(String),
    #[error("invalid message: {0}")]
    Invalid(String),
}

/// A display name (optional) and an address, as in `To: Name <local@domain>`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mailbox<'a> {
    pub name: Option<&'a str>,
    pub email: &'a str,
}

impl<'a> Mailbox<'a> {
    pub fn new(name: Option<&'a str>, email: &'a str) -> Self {
        Self { name, email }
    }
}

/// A file carried by the message. With a `content_id` it is an inline part that the html can
/// refer to as `cid:...`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Attachment<'a> {
    pub content: &'a [u8],
    pub filename: Option<&'a str>,
    /// `type/subtype`; guessed from the filename's extension when `None`.
    pub content_type: Option<&'a str>,
    pub content_id: Option<&'a str>,
}

/// The Date header: seconds since the Unix epoch, shown at a UTC offset in minutes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Date {
    pub unix: i64,
    pub utc_offset_minutes: i32,
}

impl Date {
    /// The current time, shown at `utc_offset_minutes`.
    pub fn now(utc_offset_minutes: i32) -> Self {
        Self {
            unix: crate::clock::unix_seconds() as i64,
            utc_offset_minutes,
        }
    }
}

/// Everything a message is built from. Borrowed, so large bodies are not copied on the way in.
#[derive(Debug, Clone, Default)]
pub struct MessageSpec<'a> {
    pub sender: Mailbox<'a>,
    pub to: Vec<Mailbox<'a>>,
    pub cc: Vec<Mailbox<'a>>,
    /// Validated like the others and never written: the envelope carries Bcc recipients.
    pub bcc: Vec<Mailbox<'a>>,
    pub reply_to: Vec<Mailbox<'a>>,
    pub subject: &'a str,
    pub text: Option<&'a str>,
    pub html: Option<&'a str>,
    pub attachments: Vec<Attachment<'a>>,
    /// Written in order after the structural headers, which they may not name.
    pub headers: Vec<(&'a str, &'a str)>,
    /// With or without the angle brackets; `<uuid@sender-domain>` when `None`.
    pub message_id: Option<&'a str>,
    /// The current time (UTC) when `None`.
    pub date: Option<Date>,
    /// Every boundary is `{seed}_{n}`; a random seed when `None`.
    pub boundary_seed: Option<&'a str>,
}

/// Header names a custom header may not use, because the builder writes them from the spec
/// (a second copy would contradict the first, or break the MIME structure).
pub const RESERVED_HEADERS: [&str; 11] = [
    "From",
    "To",
    "Cc",
    "Bcc",
    "Reply-To",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
    "Content-Type",
    "Content-Transfer-Encoding",
];

// RFC 5322 section 2.1.1: lines are at most 998 octets before the CRLF.
const MAX_LINE: usize = 998;
// RFC 5321 section 4.5.3.1: local part and path limits; an address longer cannot be delivered.
const MAX_LOCAL_PART: usize = 64;
const MAX_EMAIL: usize = 254;
// Caps that keep each unfoldable token of a part header well inside a line.
const MAX_TOKEN: usize = 255;
// RFC 2046 section 5.1.1: boundaries are at most 70 characters; room is left for `_{n}`.
const MAX_SEED: usize = 60;
// RFC 6838 section 4.2: type and subtype names are at most 127 characters each.
const MAX_MEDIA_NAME: usize = 127;
// Year 9999, the last a four-digit RFC 5322 date can show.
const MAX_UNIX: i64 = 253_402_300_799;
const MAX_OFFSET_MINUTES: i32 = 24 * 60 - 1;

/// Names the field an error is about, in the caller's terms (`to[1] address`).
enum Field<'a> {
    Plain(&'static str),
    Indexed(&'static str, usize, &'static str),
    HeaderValue(&'a str),
}

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Plain(what) => f.write_str(what),
            Field::Indexed(list, index, what) => write!(f, "{list}[{index}] {what}"),
            Field::HeaderValue(name) => write!(f, "header {name} value"),
        }
    }
}

fn invalid(message: String) -> MimeError {
    MimeError::Invalid(message)
}

/// Refuses CR, LF and NUL (injection), and the other ASCII controls but TAB, which RFC 5322
/// header text does not allow either.
fn check_text(value: &str, field: &Field<'_>) -> Result<(), MimeError> {
    let is_control = |b: &u8| (*b < 0x20 && *b != b'\t') || *b == 0x7f;
    if !value.as_bytes().iter().any(is_control) {
        return Ok(());
    }
    // Injection wins over the milder error when a value holds both.
    for (byte, what) in [
        (b'\r', "a carriage return (CR)"),
        (b'\n', "a line feed (LF)"),
        (0, "a NUL byte"),
    ] {
        if value.as_bytes().contains(&byte) {
            return Err(MimeError::HeaderInjection(format!(
                "{field} contains {what}"
            )));
        }
    }
    let byte = value
        .as_bytes()
        .iter()
        .copied()
        .find(is_control)
        .unwrap_or(0);
    Err(invalid(format!(
        "{field} contains the control character {byte:#04x}"
    )))
}

/// RFC 5322 `atext`, the characters of a dot-atom local part besides `.`.
fn is_atext(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&byte)
}

/// Checks an address and returns it with an internationalized domain converted to its ASCII
/// (punycode) form. A non-ASCII local part is kept as UTF-8 (RFC 6532; delivery needs SMTPUTF8).
fn normalize_email<'a>(email: &'a str, field: &Field<'_>) -> Result<Cow<'a, str>, MimeError> {
    check_text(email, field)?;
    let (local, domain) = match email.split_once('@') {
        Some((local, domain)) if !domain.contains('@') => (local, domain),
        _ => {
            return Err(invalid(format!(
                "{field} {email:?} must contain exactly one '@'"
            )))
        }
    };
    check_local_part(local, email, field)?;
    let domain = normalize_domain(domain, email, field)?;
    let normalized = match domain {
        Cow::Borrowed(_) => Cow::Borrowed(email),
        Cow::Owned(domain) => Cow::Owned(format!("{local}@{domain}")),
    };
    if normalized.len() > MAX_EMAIL {
        return Err(invalid(format!(
            "{field} is longer than {MAX_EMAIL} octets"
        )));
    }
    Ok(normalized)
}

fn check_local_part(local: &str, email: &str, field: &Field<'_>) -> Result<(), MimeError> {
    if local.is_empty() || local.len() > MAX_LOCAL_PART {
        return Err(invalid(format!(
            "{field} {email:?} needs a local part of 1 to {MAX_LOCAL_PART} octets"
        )));
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Err(invalid(format!(
            "{field} {email:?} has a misplaced '.' in its local part"
        )));
    }
    // Quoted local parts are legal but vanishingly rare and a classic parser-confusion vector.
    let bad = local.chars().find(|&c| {
        if c.is_ascii() {
            !(is_atext(c as u8) || c == '.')
        } else {
            c.is_control() || c.is_whitespace()
        }
    });
    match bad {
        Some(c) => Err(invalid(format!(
            "{field} {email:?} has {c:?} in its local part (only dot-atom local parts are supported)"
        ))),
        None => Ok(()),
    }
}

fn normalize_domain<'a>(
    domain: &'a str,
    email: &str,
    field: &Field<'_>,
) -> Result<Cow<'a, str>, MimeError> {
    if let Some(literal) = domain.strip_prefix('[') {
        // An address literal such as [192.0.2.1] or [IPv6:2001:db8::1].
        let ok = literal.strip_suffix(']').is_some_and(|inner| {
            !inner.is_empty()
                && inner
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".:-".contains(&b))
        });
        return if ok {
            Ok(Cow::Borrowed(domain))
        } else {
            Err(invalid(format!(
                "{field} {email:?} has a malformed address literal"
            )))
        };
    }
    let ascii: Cow<'a, str> = if domain.is_ascii() {
        Cow::Borrowed(domain)
    } else {
        Cow::Owned(idna::domain_to_ascii(domain).map_err(|_| {
            invalid(format!(
                "{field} {email:?} has a domain that is not a valid IDN"
            ))
        })?)
    };
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if ascii.is_empty() || ascii.len() > 253 || !ascii.split('.').all(label_ok) {
        return Err(invalid(format!("{field} {email:?} has an invalid domain")));
    }
    Ok(ascii)
}

fn build_mailbox<'a>(
    mailbox: &Mailbox<'a>,
    field: &Field<'_>,
    name_field: &Field<'_>,
) -> Result<Address<'a>, MimeError> {
    let email = normalize_email(mailbox.email, field)?;
    let name = match mailbox.name {
        Some(name) if !name.is_empty() => {
            check_text(name, name_field)?;
            Some(Cow::Borrowed(name))
        }
        _ => None,
    };
    Ok(Address::Address(
        mail_builder::headers::address::EmailAddress { name, email },
    ))
}

/// `None` when the list is empty (the header is then left out).
fn build_address_list<'a>(
    list: &[Mailbox<'a>],
    list_name: &'static str,
) -> Result<Option<Address<'a>>, MimeError> {
    let mut addresses = Vec::with_capacity(list.len());
    for (index, mailbox) in list.iter().enumerate() {
        addresses.push(build_mailbox(
            mailbox,
            &Field::Indexed(list_name, index, "address"),
            &Field::Indexed(list_name, index, "display name"),
        )?);
    }
    Ok(match addresses.len() {
        0 => None,
        1 => addresses.pop(),
        _ => Some(Address::new_list(addresses)),
    })
}

/// RFC 5322 `ftext`: printable ASCII except `:` (and so no space either).
fn check_header_name(name: &str, index: usize) -> Result<(), MimeError> {
    let field = Field::Indexed("headers", index, "name");
    check_text(name, &field)?;
    if name.is_empty() || !name.bytes().all(|b| (33..=126).contains(&b) && b != b':') {
        return Err(invalid(format!(
            "{field} {name:?} is not a valid header name (printable ASCII without ':' or space)"
        )));
    }
    if let Some(reserved) = RESERVED_HEADERS
        .iter()
        .find(|reserved| reserved.eq_ignore_ascii_case(name))
    {
        return Err(invalid(format!(
            "{field}: {reserved} is written from the message's own fields and cannot be set as a custom header"
        )));
    }
    Ok(())
}

/// An unstructured header value: ASCII is written as given (folded at whitespace), non-ASCII
/// as RFC 2047 encoded words. A literal value keeps structured headers (List-Unsubscribe, ...)
/// intact, which encoded words would not.
fn unstructured(value: &str) -> HeaderType<'_> {
    if value.is_ascii() {
        Raw::new(value).into()
    } else {
        Text::new(value).into()
    }
}

/// The subject is unstructured text in every reader, so words too long to fold are better
/// written as encoded words (which split) than refused.
fn subject_value(subject: &str) -> HeaderType<'_> {
    let longest_word = subject.split([' ', '\t']).map(str::len).max().unwrap_or(0);
    if subject.is_ascii() && longest_word + "Subject: ".len() <= 78 {
        Raw::new(subject).into()
    } else {
        Text::new(subject).into()
    }
}

/// Message-ID or Content-ID: `<...>` stripped, then printable ASCII with no specials that
/// would end the angle-bracketed form or start a comment.
fn normalize_id<'a>(id: &'a str, field: &Field<'_>, needs_at: bool) -> Result<&'a str, MimeError> {
    check_text(id, field)?;
    let bare = id
        .strip_prefix('<')
        .and_then(|rest| rest.strip_suffix('>'))
        .unwrap_or(id);
    let ok_char = |b: u8| (33..=126).contains(&b) && !b"<>()\"\\,;:".contains(&b);
    if bare.is_empty() || bare.len() > MAX_TOKEN || !bare.bytes().all(ok_char) {
        return Err(invalid(format!(
            "{field} {id:?} must be 1 to {MAX_TOKEN} printable ASCII characters without spaces or <>()\",;:\\"
        )));
    }
    if needs_at {
        let at = bare.bytes().filter(|&b| b == b'@').count();
        if at != 1 || bare.starts_with('@') || bare.ends_with('@') {
            return Err(invalid(format!(
                "{field} {id:?} must have the form left@right"
            )));
        }
    }
    Ok(bare)
}

fn format_date(date: Date) -> Result<String, MimeError> {
    if !(0..=MAX_UNIX).contains(&date.unix) {
        return Err(invalid(format!(
            "date {} is outside 1970-01-01 .. 9999-12-31",
            date.unix
        )));
    }
    let offset = date.utc_offset_minutes;
    if !(-MAX_OFFSET_MINUTES..=MAX_OFFSET_MINUTES).contains(&offset) {
        return Err(invalid(format!(
            "utc offset {offset} minutes is outside -1439 .. 1439"
        )));
    }
    // mail-builder formats UTC only: format the local wall time and replace its "+0000".
    let mut text = RfcDate::new(date.unix + i64::from(offset) * 60).to_rfc822();
    text.truncate(text.len().saturating_sub(5));
    let sign = if offset < 0 { '-' } else { '+' };
    let abs = offset.unsigned_abs();
    text.push_str(&format!("{sign}{:02}{:02}", abs / 60, abs % 60));
    Ok(text)
}

/// Characters of a boundary that need no escaping anywhere (a subset of RFC 2046 `bchars`);
/// `=` is left out so quoted-printable bodies can never produce a boundary line.
fn check_seed(seed: &str) -> Result<(), MimeError> {
    let field = Field::Plain("boundary_seed");
    check_text(seed, &field)?;
    let ok = |b: u8| b.is_ascii_alphanumeric() || b"._-".contains(&b);
    if seed.is_empty() || seed.len() > MAX_SEED || !seed.bytes().all(ok) {
        return Err(invalid(format!(
            "{field} {seed:?} must be 1 to {MAX_SEED} characters of A-Z a-z 0-9 . _ -"
        )));
    }
    Ok(())
}

/// 128 random bits in hex: a collision with content is not a practical concern.
fn random_seed() -> String {
    let mut raw = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut raw);
    format!("{:032x}", u128::from_le_bytes(raw))
}

fn check_media_type<'a>(
    content_type: &'a str,
    field: &Field<'_>,
) -> Result<Cow<'a, str>, MimeError> {
    check_text(content_type, field)?;
    // RFC 2045 token: printable ASCII except space and tspecials.
    let token = |part: &str| {
        (1..=MAX_MEDIA_NAME).contains(&part.len())
            && part
                .bytes()
                .all(|b| (33..=126).contains(&b) && !b"()<>@,;:\\\"/[]?=".contains(&b))
    };
    let ok = content_type
        .split_once('/')
        .is_some_and(|(kind, sub)| token(kind) && token(sub));
    if !ok {
        return Err(invalid(format!(
            "{field} {content_type:?} must be type/subtype without parameters"
        )));
    }
    let lower = if content_type.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(content_type.to_ascii_lowercase())
    } else {
        Cow::Borrowed(content_type)
    };
    if lower.starts_with("multipart/") {
        return Err(invalid(format!(
            "{field} {content_type:?}: an attachment cannot be multipart"
        )));
    }
    Ok(lower)
}

/// The media type for a filename's extension; `application/octet-stream` when unknown.
pub fn guess_content_type(filename: &str) -> &'static str {
    let Some((_, extension)) = filename.rsplit_once('.') else {
        return "application/octet-stream";
    };
    match extension.to_ascii_lowercase().as_str() {
        "txt" | "text" | "log" => "text/plain",
        "htm" | "html" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "ics" => "text/calendar",
        "md" => "text/markdown",
        "vcf" => "text/vcard",
        "xml" => "application/xml",
        "json" => "application/json",
        "js" => "text/javascript",
        "pdf" => "application/pdf",
        "rtf" => "application/rtf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "7z" => "application/x-7z-compressed",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls" => "application/vnd.ms-excel",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt" => "application/vnd.ms-powerpoint",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt" => "application/vnd.oasis.opendocument.text",
        "ods" => "application/vnd.oasis.opendocument.spreadsheet",
        "eml" => "message/rfc822",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "bmp" => "image/bmp",
        "ico" => "image/vnd.microsoft.icon",
        "tif" | "tiff" => "image/tiff",
        "avif" => "image/avif",
        "heic" => "image/heic",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mov" => "video/quicktime",
        _ => "application/octet-stream",
    }
}

fn build_attachment<'a>(
    attachment: &Attachment<'a>,
    index: usize,
) -> Result<MimePart<'a>, MimeError> {
    let filename = match attachment.filename {
        Some(name) if !name.is_empty() => {
            let field = Field::Indexed("attachments", index, "filename");
            check_text(name, &field)?;
            if name.len() > MAX_TOKEN {
                return Err(invalid(format!(
                    "{field} is longer than {MAX_TOKEN} octets"
                )));
            }
            Some(name)
        }
        _ => None,
    };
    let content_type = match attachment.content_type {
        Some(given) => {
            check_media_type(given, &Field::Indexed("attachments", index, "content type"))?
        }
        None => Cow::Borrowed(filename.map_or("application/octet-stream", guess_content_type)),
    };
    let content_id = attachment
        .content_id
        .map(|cid| {
            normalize_id(
                cid,
                &Field::Indexed("attachments", index, "content id"),
                false,
            )
        })
        .transpose()?;

    let mut disposition = ContentType::new(if content_id.is_some() {
        "inline"
    } else {
        "attachment"
    });
    if let Some(name) = filename {
        disposition = disposition.attribute("filename", name);
    }
    let (body, transfer_encoding) = encode_attachment(attachment.content, &content_type);
    let mut part = MimePart::raw(BodyPart::Binary(body))
        .header("Content-Type", Raw::new(content_type))
        .header("Content-Disposition", disposition);
    if let Some(cid) = content_id {
        part = part.header("Content-ID", MessageId::new(cid));
    }
    if let Some(transfer_encoding) = transfer_encoding {
        part = part.header("Content-Transfer-Encoding", Raw::new(transfer_encoding));
    }
    Ok(part)
}

/// The body of an attachment part and its Content-Transfer-Encoding, or `None` for base64.
/// Text is written with CRLF line breaks, so a 7bit or quoted-printable part holds no bare CR
/// or LF. A part with a raw Content-Type (a validated token/token) and no Content-Transfer-Encoding
/// is base64-encoded by mail-builder, bytes as given.
fn encode_attachment<'a>(
    content: &'a [u8],
    content_type: &str,
) -> (Cow<'a, [u8]>, Option<&'static str>) {
    if !content_type.starts_with("text/") {
        return (Cow::Borrowed(content), None);
    }
    let encoding = choose_text_encoding(content);
    if !encoding.is_text() {
        return (Cow::Borrowed(content), None);
    }
    let text = crlf_line_breaks(content, true);
    match encoding {
        TextEncoding::SevenBit => (text, Some("7bit")),
        TextEncoding::QuotedPrintable => {
            let mut encoded = Vec::with_capacity(text.len() + text.len() / 4);
            QuotedPrintableEncoder::new()
                .preserve_line_breaks()
                .encode_into(&text, &mut encoded);
            (Cow::Owned(encoded), Some("quoted-printable"))
        }
        TextEncoding::Base64 | TextEncoding::Binary => (text, None),
    }
}

/// Refuses a caller's seed that already occurs in the content: a line `--{seed}_n` inside a
/// body or a 7bit or quoted-printable attachment would end the part early.
fn check_seed_absent(seed: &str, spec: &MessageSpec<'_>) -> Result<(), MimeError> {
    let marker = format!("--{seed}");
    let finder = memchr::memmem::Finder::new(marker.as_bytes());
    let bodies = [spec.text, spec.html]
        .into_iter()
        .flatten()
        .map(str::as_bytes);
    let attachments = spec.attachments.iter().map(|attachment| attachment.content);
    for body in bodies.chain(attachments) {
        if finder.find(body).is_some() {
            return Err(invalid(format!(
                "boundary_seed {seed:?} occurs in the message content; choose another"
            )));
        }
    }
    Ok(())
}

/// Turns every bare CR into CRLF. mail-builder already does so for bare LF, but would write a
/// lone CR as is in a 7bit body, and receivers that take it for a line end are open to SMTP
/// smuggling (`\r.\r`). Bodies without CR, nearly all of them, are borrowed.
fn crlf_bare_cr(body: &str) -> Cow<'_, str> {
    match crlf_line_breaks(body.as_bytes(), false) {
        Cow::Borrowed(_) => Cow::Borrowed(body),
        // Only ASCII LF is inserted, after an ASCII CR: still UTF-8.
        Cow::Owned(fixed) => Cow::Owned(String::from_utf8(fixed).expect("UTF-8 stays UTF-8")),
    }
}

fn multipart<'a>(kind: &'static str, boundary: String, parts: Vec<MimePart<'a>>) -> MimePart<'a> {
    MimePart::new(
        ContentType::new(kind).attribute("boundary", boundary),
        BodyPart::Multipart(parts),
    )
}

/// Checks the header section (up to the first blank line) against the 998-octet limit. Only
/// an unbreakable word in a custom header or display name can exceed it; bodies and part
/// headers are bounded by their encoders and by the caps above.
fn check_header_lines(message: &[u8]) -> Result<(), MimeError> {
    let mut name: &[u8] = b"";
    for line in message.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return Ok(());
        }
        if !matches!(line.first(), Some(b' ' | b'\t')) {
            name = line.split(|&b| b == b':').next().unwrap_or(b"");
        }
        if line.len() > MAX_LINE {
            return Err(invalid(format!(
                "header {} has a word too long to fold into a {MAX_LINE}-octet line",
                String::from_utf8_lossy(name)
            )));
        }
    }
    Ok(())
}

/// Builds the message. Validation happens before anything is written, so an error leaves
/// nothing half-built; every error names the field in the caller's terms.
pub fn build_message(spec: &MessageSpec<'_>) -> Result<Vec<u8>, MimeError> {
    let from = build_mailbox(
        &spec.sender,
        &Field::Plain("sender address"),
        &Field::Plain("sender display name"),
    )?;
    let to = build_address_list(&spec.to, "to")?;
    let cc = build_address_list(&spec.cc, "cc")?;
    build_address_list(&spec.bcc, "bcc")?;
    let reply_to = build_address_list(&spec.reply_to, "reply_to")?;
    check_text(spec.subject, &Field::Plain("subject"))?;

    for (index, (name, value)) in spec.headers.iter().enumerate() {
        check_header_name(name, index)?;
        check_text(value, &Field::HeaderValue(name))?;
    }

    let message_id = match spec.message_id {
        Some(id) => Cow::Borrowed(normalize_id(id, &Field::Plain("message_id"), true)?),
        None => {
            // The sender's domain is already validated and in ASCII form.
            let Address::Address(sender) = &from else {
                unreachable!("build_mailbox returns one address")
            };
            let domain = sender.email.rsplit_once('@').map_or("", |(_, d)| d);
            Cow::Owned(format!("{}@{domain}", crate::ids::new_id()))
        }
    };
    let date = format_date(spec.date.unwrap_or_else(|| Date::now(0)))?;
    let seed: Cow<'_, str> = match spec.boundary_seed {
        Some(seed) => {
            check_seed(seed)?;
            check_seed_absent(seed, spec)?;
            Cow::Borrowed(seed)
        }
        None => Cow::Owned(random_seed()),
    };

    let mut attachments = Vec::new();
    let mut inline = Vec::new();
    for (index, attachment) in spec.attachments.iter().enumerate() {
        let part = build_attachment(attachment, index)?;
        if attachment.content_id.is_some() {
            inline.push(part);
        } else {
            attachments.push(part);
        }
    }

    // 7bit and quoted-printable cannot carry NUL (RFC 2045 section 2.7).
    if [spec.text, spec.html]
        .into_iter()
        .flatten()
        .any(|body| body.contains('\0'))
    {
        return Err(invalid("text and html bodies cannot contain NUL".into()));
    }

    // Boundaries are numbered from the outermost multipart inwards.
    let has_related = spec.html.is_some() && !inline.is_empty();
    let has_alternative = spec.text.is_some() && spec.html.is_some();
    let has_mixed = !attachments.is_empty() || (!inline.is_empty() && spec.html.is_none());
    let mut next_boundary = {
        let mut n = 0;
        move || {
            n += 1;
            format!("{seed}_{n}")
        }
    };
    let mixed_boundary = has_mixed.then(&mut next_boundary);
    let alternative_boundary = has_alternative.then(&mut next_boundary);
    let related_boundary = has_related.then(&mut next_boundary);

    let text = spec
        .text
        .map(|text| MimePart::new("text/plain", BodyPart::Text(crlf_bare_cr(text))));
    let mut html = spec
        .html
        .map(|html| MimePart::new("text/html", BodyPart::Text(crlf_bare_cr(html))));
    if let Some(boundary) = related_boundary {
        let mut parts = Vec::with_capacity(inline.len() + 1);
        parts.extend(html.take());
        parts.append(&mut inline);
        html = Some(multipart("multipart/related", boundary, parts));
    }
    let body = match (text, html, alternative_boundary) {
        (Some(text), Some(html), Some(boundary)) => Some(multipart(
            "multipart/alternative",
            boundary,
            vec![text, html],
        )),
        (text, html, _) => text.or(html),
    };
    let root = match mixed_boundary {
        Some(boundary) => {
            let mut parts = Vec::with_capacity(1 + inline.len() + attachments.len());
            parts.extend(body);
            // Left over only when there is no html: shown as inline parts of the mixed message.
            parts.append(&mut inline);
            parts.append(&mut attachments);
            multipart("multipart/mixed", boundary, parts)
        }
        None => body.unwrap_or_else(|| MimePart::new("text/plain", BodyPart::Text("".into()))),
    };

    let mut headers: Vec<(Cow<'_, str>, HeaderType<'_>)> =
        Vec::with_capacity(8 + spec.headers.len());
    headers.push(("From".into(), from.into()));
    if let Some(to) = to {
        headers.push(("To".into(), to.into()));
    }
    if let Some(cc) = cc {
        headers.push(("Cc".into(), cc.into()));
    }
    if let Some(reply_to) = reply_to {
        headers.push(("Reply-To".into(), reply_to.into()));
    }
    headers.push(("Subject".into(), subject_value(spec.subject)));
    headers.push(("Date".into(), Raw::new(date).into()));
    headers.push(("Message-ID".into(), MessageId::new(message_id).into()));
    for (name, value) in &spec.headers {
        headers.push((Cow::Borrowed(*name), unstructured(value)));
    }
    headers.push(("MIME-Version".into(), Raw::new("1.0").into()));

    let mut builder = MessageBuilder::new().body(root);
    builder.headers = headers;
    let mut output = Vec::new();
    builder.serialize(&mut output);
    // SMTP DATA would add it anyway; ending in CRLF keeps what is spooled, signed and received
    // byte-identical.
    if !output.ends_with(b"\r\n") {
        output.extend_from_slice(b"\r\n");
    }
    check_header_lines(&output)?;
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOLDEN: &str = concat!(
        "From: =?utf-8?B?Sm9zw6kgUMOpcmV6?= <jose@example.com>\r\n",
        "To: \"Ann Lee\" <ann@example.org>, <bob@xn--bcher-kva.example>\r\n",
        "Cc: =?utf-8?B?5bGx55Sw5aSq6YOO?= <taro@example.jp>\r\n",
        "Reply-To: <replies@example.com>\r\n",
        "Subject: =?utf-8?B?UsOpc3Vtw6kgYXR0YWNoZWQ=?=\r\n",
        "Date: Tue, 14 Nov 2023 23:13:20 +0100\r\n",
        "Message-ID: <golden-1@example.com>\r\n",
        "X-Campaign: spring\r\n",
        "List-Unsubscribe: <https://example.com/u/1>\r\n",
        "MIME-Version: 1.0\r\n",
        "Content-Type: multipart/mixed; boundary=\"seed_1\"\r\n",
        "\r\n",
        "\r\n",
        "--seed_1\r\n",
        "Content-Type: multipart/alternative; boundary=\"seed_2\"\r\n",
        "\r\n",
        "\r\n",
        "--seed_2\r\n",
        "Content-Type: text/plain; charset=\"utf-8\"\r\n",
        "Content-Transfer-Encoding: 7bit\r\n",
        "\r\n",
        "Hello Ann,\r\n",
        "see attached.\r\n",
        "\r\n",
        "--seed_2\r\n",
        "Content-Type: multipart/related; boundary=\"seed_3\"\r\n",
        "\r\n",
        "\r\n",
        "--seed_3\r\n",
        "Content-Type: text/html; charset=\"utf-8\"\r\n",
        "Content-Transfer-Encoding: 7bit\r\n",
        "\r\n",
        "<p>Hello Ann,<img src=\"cid:logo\"></p>\r\n",
        "\r\n",
        "--seed_3\r\n",
        "Content-Type: image/png\r\n",
        "Content-Disposition: inline; filename=\"logo.png\"\r\n",
        "Content-ID: <logo>\r\n",
        "Content-Transfer-Encoding: base64\r\n",
        "\r\n",
        "iVBORw==\r\n",
        "\r\n",
        "--seed_3--\r\n",
        "\r\n",
        "--seed_2--\r\n",
        "\r\n",
        "--seed_1\r\n",
        "Content-Type: application/pdf\r\n",
        "Content-Disposition: attachment; filename=\"report.pdf\"\r\n",
        "Content-Transfer-Encoding: base64\r\n",
        "\r\n",
        "JVBERi0=\r\n",
        "\r\n",
        "--seed_1--\r\n",
    );

    fn golden_spec() -> MessageSpec<'static> {
        MessageSpec {
            sender: Mailbox::new(Some("José Pérez"), "jose@example.com"),
            to: vec![
                Mailbox::new(Some("Ann Lee"), "ann@example.org"),
                Mailbox::new(None, "bob@bücher.example"),
            ],
            cc: vec![Mailbox::new(Some("山田太郎"), "taro@example.jp")],
            bcc: vec![Mailbox::new(Some("Hidden"), "hidden@example.net")],
            reply_to: vec![Mailbox::new(None, "replies@example.com")],
            subject: "Résumé attached",
            text: Some("Hello Ann,\nsee attached.\n"),
            html: Some("<p>Hello Ann,<img src=\"cid:logo\"></p>\n"),
            attachments: vec![
                Attachment {
                    content: b"%PDF-",
                    filename: Some("report.pdf"),
                    content_type: None,
                    content_id: None,
                },
                Attachment {
                    content: b"\x89PNG",
                    filename: Some("logo.png"),
                    content_type: Some("image/png"),
                    content_id: Some("<logo>"),
                },
            ],
            headers: vec![
                ("X-Campaign", "spring"),
                ("List-Unsubscribe", "<https://example.com/u/1>"),
            ],
            message_id: Some("<golden-1@example.com>"),
            date: Some(Date {
                unix: 1_700_000_000,
                utc_offset_minutes: 60,
            }),
            boundary_seed: Some("seed"),
        }
    }

    fn simple_spec() -> MessageSpec<'static> {
        MessageSpec {
            sender: Mailbox::new(None, "a@example.com"),
            to: vec![Mailbox::new(None, "b@example.com")],
            subject: "hi",
            text: Some("hello\n"),
            ..MessageSpec::default()
        }
    }

    fn build(spec: &MessageSpec<'_>) -> String {
        String::from_utf8(build_message(spec).expect("builds")).expect("utf-8")
    }

    /// Every line ends in CRLF, none is longer than 998 octets, no bare CR or LF.
    fn assert_well_formed(message: &[u8]) {
        assert!(message.ends_with(b"\r\n"));
        for line in message.split(|&b| b == b'\n') {
            if line.is_empty() {
                continue;
            }
            assert!(line.ends_with(b"\r"), "line without CRLF: {line:?}");
            let line = &line[..line.len() - 1];
            assert!(!line.contains(&b'\r'), "bare CR in {line:?}");
            assert!(line.len() <= MAX_LINE, "line of {} octets", line.len());
        }
    }

    #[test]
    fn mime_golden_bytes() {
        let message = build(&golden_spec());
        assert_eq!(message, GOLDEN, "\n{message}");
        assert_well_formed(message.as_bytes());
    }

    #[test]
    fn mime_bcc_is_never_written() {
        let message = build(&golden_spec());
        assert!(!message.to_ascii_lowercase().contains("bcc"));
        assert!(!message.contains("hidden@example.net"));
        assert!(!message.contains("Hidden"));
    }

    #[test]
    fn mime_bcc_is_still_validated() {
        let mut spec = simple_spec();
        spec.bcc = vec![Mailbox::new(None, "x@y\r\nSubject: z")];
        assert!(matches!(
            build_message(&spec),
            Err(MimeError::HeaderInjection(m)) if m.contains("bcc[0] address")
        ));
    }

    fn injection_message(spec: &MessageSpec<'_>) -> String {
        match build_message(spec) {
            Err(MimeError::HeaderInjection(message)) => message,
            other => panic!("expected HeaderInjection, got {other:?}"),
        }
    }

    #[test]
    fn mime_injection_refused_in_every_field() {
        type Poison = fn(&mut MessageSpec<'static>, &'static str);
        let fields: Vec<(&str, Poison)> = vec![
            ("sender display name", |s, v| s.sender.name = Some(v)),
            ("sender address", |s, v| s.sender.email = v),
            ("to[0] display name", |s, v| s.to[0].name = Some(v)),
            ("to[1] address", |s, v| s.to[1].email = v),
            ("cc[0] display name", |s, v| s.cc[0].name = Some(v)),
            ("cc[0] address", |s, v| s.cc[0].email = v),
            ("bcc[0] display name", |s, v| s.bcc[0].name = Some(v)),
            ("bcc[0] address", |s, v| s.bcc[0].email = v),
            ("reply_to[0] display name", |s, v| {
                s.reply_to[0].name = Some(v)
            }),
            ("reply_to[0] address", |s, v| s.reply_to[0].email = v),
            ("subject", |s, v| s.subject = v),
            ("headers[0] name", |s, v| s.headers[0].0 = v),
            ("header X-Campaign value", |s, v| s.headers[0].1 = v),
            ("message_id", |s, v| s.message_id = Some(v)),
            ("boundary_seed", |s, v| s.boundary_seed = Some(v)),
            ("attachments[0] filename", |s, v| {
                s.attachments[0].filename = Some(v)
            }),
            ("attachments[1] content type", |s, v| {
                s.attachments[1].content_type = Some(v)
            }),
            ("attachments[1] content id", |s, v| {
                s.attachments[1].content_id = Some(v)
            }),
        ];
        let poisons: [(&'static str, &str); 5] = [
            ("x\r\nBcc: victim@example.net", "carriage return"),
            ("x\nBcc: victim@example.net", "line feed"),
            ("x\rBcc: victim@example.net", "carriage return"),
            ("x\0y", "NUL"),
            ("a@b.example\r\n", "carriage return"),
        ];
        for (field, poison) in &fields {
            for (value, what) in poisons {
                let mut spec = golden_spec();
                poison(&mut spec, value);
                let message = injection_message(&spec);
                assert!(
                    message.contains(field) && message.contains(what),
                    "{field} / {value:?}: {message}"
                );
            }
        }
    }

    #[test]
    fn mime_other_controls_are_invalid_not_injection() {
        let mut spec = simple_spec();
        spec.subject = "a\x01b";
        assert!(matches!(build_message(&spec), Err(MimeError::Invalid(_))));
        // A value holding both reports the injection.
        spec.subject = "a\x01b\nc";
        assert!(matches!(
            build_message(&spec),
            Err(MimeError::HeaderInjection(_))
        ));
        spec.subject = "tab\tis fine";
        assert!(build_message(&spec).is_ok());
    }

    #[test]
    fn mime_reserved_headers_are_refused() {
        for name in RESERVED_HEADERS
            .iter()
            .chain(&["content-type", "BCC", "message-id"])
        {
            let mut spec = simple_spec();
            spec.headers = vec![(name, "x")];
            match build_message(&spec) {
                Err(MimeError::Invalid(message)) => assert!(message.contains("headers[0]")),
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn mime_header_names_must_be_ftext() {
        for name in ["", "X Foo", "X:Foo", "Ünicode", "X-\x7f"] {
            let mut spec = simple_spec();
            spec.headers = vec![(name, "x")];
            assert!(
                matches!(build_message(&spec), Err(MimeError::Invalid(_))),
                "{name:?}"
            );
        }
    }

    #[test]
    fn mime_custom_headers_keep_their_order() {
        let mut spec = simple_spec();
        spec.headers = vec![("X-B", "2"), ("X-A", "1"), ("X-B", "3"), ("X-Ü", "x")];
        spec.headers.pop();
        spec.headers.push(("X-Note", "größe"));
        let message = build(&spec);
        let b2 = message.find("X-B: 2\r\n").unwrap();
        let a1 = message.find("X-A: 1\r\n").unwrap();
        let b3 = message.find("X-B: 3\r\n").unwrap();
        assert!(b2 < a1 && a1 < b3);
        assert!(message.contains("X-Note: =?utf-8?"));
    }

    #[test]
    fn mime_addresses_are_validated() {
        for email in [
            "",
            "plain",
            "a@b@c",
            "@example.com",
            "a@",
            "a b@example.com",
            "\"quoted\"@example.com",
            "a..b@example.com",
            ".a@example.com",
            "a<b>@example.com",
            "a@exa mple.com",
            "a@-example.com",
            "a@example..com",
            "a@[bad literal]",
        ] {
            let mut spec = simple_spec();
            spec.to = vec![Mailbox::new(None, email)];
            assert!(
                matches!(build_message(&spec), Err(MimeError::Invalid(_))),
                "{email:?}"
            );
        }
        let mut spec = simple_spec();
        let long_local = format!("{}@example.com", "a".repeat(65));
        spec.to = vec![Mailbox::new(None, &long_local)];
        assert!(build_message(&spec).is_err());
    }

    #[test]
    fn mime_idn_domain_is_punycoded_utf8_local_part_kept() {
        let mut spec = simple_spec();
        spec.to = vec![
            Mailbox::new(None, "info@münchen.example"),
            Mailbox::new(None, "用户@例子.example"),
            Mailbox::new(None, "ops@[192.0.2.1]"),
        ];
        let message = build(&spec);
        assert!(
            message.contains("<info@xn--mnchen-3ya.example>"),
            "{message}"
        );
        assert!(message.contains("<用户@xn--fsqu00a.example>"), "{message}");
        assert!(message.contains("<ops@[192.0.2.1]>"), "{message}");
    }

    #[test]
    fn mime_defaults_date_message_id_and_random_boundaries() {
        let mut spec = golden_spec();
        spec.message_id = None;
        spec.date = None;
        spec.boundary_seed = None;
        let first = build(&spec);
        let second = build(&spec);
        assert_ne!(first, second);
        let id_line = first
            .lines()
            .find(|l| l.starts_with("Message-ID: "))
            .unwrap();
        assert!(id_line.ends_with("@example.com>"), "{id_line}");
        let uuid = &id_line["Message-ID: <".len()..id_line.len() - "@example.com>".len()];
        assert_eq!(uuid::Uuid::parse_str(uuid).unwrap().get_version_num(), 7);
        let date_line = first.lines().find(|l| l.starts_with("Date: ")).unwrap();
        assert!(date_line.ends_with(" +0000"), "{date_line}");
        assert!(first.contains("boundary=\"") && first.contains("_3\""));
        assert_well_formed(first.as_bytes());
    }

    #[test]
    fn mime_message_id_forms() {
        let mut spec = simple_spec();
        spec.message_id = Some("abc@example.com");
        assert!(build(&spec).contains("Message-ID: <abc@example.com>\r\n"));
        for bad in [
            "", "<>", "no-at", "a@b@c", "a b@c", "<a@b", "a@b>c", "(a)@b",
        ] {
            spec.message_id = Some(bad);
            assert!(
                matches!(build_message(&spec), Err(MimeError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn mime_date_formats_offsets() {
        let cases = [
            (0, 0, "Thu, 1 Jan 1970 00:00:00 +0000"),
            (1_700_000_000, -330, "Tue, 14 Nov 2023 16:43:20 -0530"),
            (1_700_000_000, 0, "Tue, 14 Nov 2023 22:13:20 +0000"),
        ];
        for (unix, offset, expected) in cases {
            let text = format_date(Date {
                unix,
                utc_offset_minutes: offset,
            })
            .unwrap();
            assert_eq!(text, expected);
        }
        for (unix, offset) in [(-1, 0), (MAX_UNIX + 1, 0), (0, 1440), (0, -1440)] {
            assert!(format_date(Date {
                unix,
                utc_offset_minutes: offset
            })
            .is_err());
        }
    }

    #[test]
    fn mime_structures() {
        let png = Attachment {
            content: b"img",
            filename: Some("a.png"),
            content_type: None,
            content_id: Some("img1"),
        };
        let doc = Attachment {
            content: b"doc",
            filename: Some("a.bin"),
            content_type: None,
            content_id: None,
        };
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Vec<Attachment<'a>>,
            &'a str,
        );
        let cases: Vec<Case<'_>> = vec![
            (Some("t"), None, vec![], "Content-Type: text/plain"),
            (None, Some("h"), vec![], "Content-Type: text/html"),
            (
                Some("t"),
                Some("h"),
                vec![],
                "Content-Type: multipart/alternative; boundary=\"s_1\"",
            ),
            (
                None,
                Some("h"),
                vec![png],
                "Content-Type: multipart/related; boundary=\"s_1\"",
            ),
            (
                Some("t"),
                None,
                vec![png],
                "Content-Type: multipart/mixed; boundary=\"s_1\"",
            ),
            (
                None,
                None,
                vec![doc],
                "Content-Type: multipart/mixed; boundary=\"s_1\"",
            ),
            (None, None, vec![], "Content-Type: text/plain"),
        ];
        for (text, html, attachments, top) in cases {
            let mut spec = simple_spec();
            spec.text = text;
            spec.html = html;
            spec.attachments = attachments;
            spec.boundary_seed = Some("s");
            let message = build(&spec);
            let first_content_type = message
                .lines()
                .find(|l| l.starts_with("Content-Type:"))
                .unwrap();
            assert!(first_content_type.starts_with(top), "{message}");
            assert_well_formed(message.as_bytes());
        }
    }

    #[test]
    fn mime_content_types() {
        assert_eq!(guess_content_type("Report.PDF"), "application/pdf");
        assert_eq!(guess_content_type("noext"), "application/octet-stream");
        assert_eq!(guess_content_type("x.unknown"), "application/octet-stream");
        let mut spec = simple_spec();
        spec.attachments = vec![Attachment {
            content: b"x",
            filename: None,
            content_type: Some("Image/PNG"),
            content_id: None,
        }];
        let message = build(&spec);
        assert!(message.contains("Content-Type: image/png\r\n"));
        assert!(message.contains("Content-Disposition: attachment\r\n"));
        for bad in [
            "png",
            "image/png; name=x",
            "multipart/mixed",
            "a/b/c",
            "image/",
        ] {
            spec.attachments[0].content_type = Some(bad);
            assert!(
                matches!(build_message(&spec), Err(MimeError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn mime_seed_checks() {
        let mut spec = simple_spec();
        spec.boundary_seed = Some("has space");
        assert!(matches!(build_message(&spec), Err(MimeError::Invalid(_))));
        spec.boundary_seed = Some("x");
        spec.text = Some("a line\n--x_1\nmore\n");
        assert!(matches!(build_message(&spec), Err(MimeError::Invalid(_))));
        // A 7bit attachment holds its lines as they are.
        spec.text = Some("hello\n");
        spec.attachments = vec![Attachment {
            content: b"a line\n--x_1\n",
            filename: Some("a.txt"),
            content_type: None,
            content_id: None,
        }];
        assert!(matches!(build_message(&spec), Err(MimeError::Invalid(_))));
    }

    #[test]
    fn mime_bare_cr_in_bodies_becomes_crlf() {
        assert_eq!(crlf_bare_cr("a\rb\r\nc\r"), "a\r\nb\r\nc\r\n");
        assert!(matches!(crlf_bare_cr("a\r\nb\n"), Cow::Borrowed(_)));
        let mut spec = simple_spec();
        spec.text = Some("x\r.\rMAIL FROM:<evil@example.net>\r\n");
        spec.html = Some("<p>\r</p>");
        let message = build_message(&spec).unwrap();
        assert_well_formed(&message);
    }

    #[test]
    fn mime_text_attachments_are_encoded_by_content() {
        let latin = "Grüße aus München, the report is attached.\n";
        let cyrillic = "Отчёт во вложении\n";
        // (content, content type, transfer encoding, body as written)
        let cases: [(&[u8], &str, &str, &str); 6] = [
            (b"a,b\n1,2\n", "text/csv", "7bit", "a,b\r\n1,2\r\n"),
            (b"bare\rcr", "text/plain", "7bit", "bare\r\ncr"),
            (
                latin.as_bytes(),
                "text/plain",
                "quoted-printable",
                "Gr=C3=BC=C3=9Fe aus M=C3=BCnchen, the report is attached.\r\n",
            ),
            // Mostly non-ASCII: base64 of the text with its line break made CRLF.
            (
                cyrillic.as_bytes(),
                "text/plain",
                "base64",
                "0J7RgtGH0ZHRgiDQstC+INCy0LvQvtC20LXQvdC40LgNCg==\r\n",
            ),
            // NUL: not text, the bytes as given.
            (b"a\0b\n", "text/plain", "base64", "YQBiCg==\r\n"),
            // Not a text type: base64, the bytes as given.
            (
                b"plain ascii\n",
                "application/json",
                "base64",
                "cGxhaW4gYXNjaWkK\r\n",
            ),
        ];
        for (content, content_type, encoding, body) in cases {
            let mut spec = simple_spec();
            spec.boundary_seed = Some("s");
            spec.attachments = vec![Attachment {
                content,
                filename: Some("a"),
                content_type: Some(content_type),
                content_id: None,
            }];
            let message = build(&spec);
            let part = format!(
                "Content-Type: {content_type}\r\n\
                 Content-Disposition: attachment; filename=\"a\"\r\n\
                 Content-Transfer-Encoding: {encoding}\r\n\r\n{body}\r\n--s_1--\r\n"
            );
            assert!(
                message.ends_with(&part),
                "{content_type} {content:?}:\n{message}"
            );
            assert_well_formed(message.as_bytes());
        }
    }

    #[test]
    fn mime_text_attachment_with_long_lines_is_quoted_printable() {
        let content = format!("{}\n", "word ".repeat(400));
        let mut spec = simple_spec();
        spec.attachments = vec![Attachment {
            content: content.as_bytes(),
            filename: Some("notes.txt"),
            content_type: None,
            content_id: None,
        }];
        let message = build(&spec);
        assert!(message.contains("Content-Transfer-Encoding: quoted-printable\r\n"));
        assert!(
            message.contains("word=20\r\n"),
            "trailing space escaped: {message}"
        );
        assert_well_formed(message.as_bytes());
    }

    #[test]
    fn mime_text_attachments_with_controls_stay_base64() {
        let content = b"line\rbare cr\nbare lf\0nul\r\n";
        let mut spec = simple_spec();
        spec.attachments = vec![
            Attachment {
                content,
                filename: Some("a.txt"),
                content_type: None,
                content_id: None,
            },
            Attachment {
                content,
                filename: Some("b.txt"),
                content_type: Some("text/plain"),
                content_id: Some("b"),
            },
        ];
        let message = build(&spec);
        assert_eq!(message.matches("Content-Type: text/plain\r\n").count(), 2);
        assert_eq!(
            message
                .matches("Content-Transfer-Encoding: base64\r\n")
                .count(),
            2
        );
        assert_eq!(
            message
                .matches("bGluZQ1iYXJlIGNyCmJhcmUgbGYAbnVsDQo=")
                .count(),
            2
        );
        assert_well_formed(message.as_bytes());
    }

    #[test]
    fn mime_nul_in_body_is_refused() {
        let mut spec = simple_spec();
        spec.html = Some("<p>\0</p>");
        assert!(matches!(build_message(&spec), Err(MimeError::Invalid(_))));
    }

    #[test]
    fn mime_long_content_stays_within_998_octets() {
        let long_word = "x".repeat(3000);
        let long_text = format!("{long_word} {}\n", "word ".repeat(2000));
        let long_name = "Ü".repeat(600);
        let long_subject = format!("{long_word} é {long_word}");
        let long_filename = format!("{}.pdf", "ü".repeat(120));
        let mut spec = simple_spec();
        spec.sender.name = Some(&long_name);
        spec.subject = &long_subject;
        spec.text = Some(&long_text);
        spec.html = Some(&long_text);
        spec.headers = vec![("X-Long", "a b c ".repeat(400).leak())];
        spec.attachments = vec![Attachment {
            content: long_text.as_bytes(),
            filename: Some(&long_filename),
            content_type: Some("text/plain"),
            content_id: None,
        }];
        assert_well_formed(&build_message(&spec).unwrap());
        // An ASCII word too long to fold in a custom header cannot be written: refused.
        spec.headers = vec![("X-Long", &long_word)];
        match build_message(&spec) {
            Err(MimeError::Invalid(message)) => assert!(message.contains("X-Long"), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mime_binary_attachment_is_base64_wrapped() {
        let content: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut spec = simple_spec();
        spec.attachments = vec![Attachment {
            content: &content,
            filename: Some("blob.bin"),
            content_type: None,
            content_id: None,
        }];
        let message = build(&spec);
        assert!(message.contains("Content-Type: application/octet-stream\r\n"));
        assert!(message.contains("Content-Transfer-Encoding: base64\r\n"));
        assert_well_formed(message.as_bytes());
    }
}
