//! DKIM (RFC 6376) key generation and signing: RSA-SHA256 and Ed25519-SHA256 (RFC 8463),
//! relaxed/relaxed canonicalization.
//!
//! mail-auth canonicalizes, aws-lc signs (about twice ring's RSA speed, which is what mail-auth
//! would use). We do not use mail-auth's `DkimSigner::sign` either: it lists
//! absent headers in `h=` as well, reads the clock itself, and folds its header past 78 columns.
//! So we choose the headers, take `t=` from the caller and write the header ourselves.

use aws_lc_rs::digest::{self, SHA256};
use aws_lc_rs::error::KeyRejected;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _, RsaKeyPair, RSA_PKCS1_SHA256};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use mail_auth::common::headers::Writable as _;
use mail_auth::common::headers::Writer;
use mail_auth::dkim::Canonicalization;
use rsa::pkcs1::DecodeRsaPrivateKey as _;
use rsa::pkcs8::der::pem::{self, LineEnding};
use rsa::pkcs8::{
    DecodePrivateKey as _, EncodePrivateKey as _, EncodePublicKey as _, ObjectIdentifier,
    PrivateKeyInfo,
};
use rsa::traits::PublicKeyParts as _;
use rsa::{Pkcs1v15Sign, RsaPrivateKey, RsaPublicKey};

/// Headers we sign when present, in the order `h=` lists them. RFC 6376 requires From.
pub const SIGNED_HEADERS: [&str; 11] = [
    "from",
    "to",
    "cc",
    "reply-to",
    "subject",
    "date",
    "message-id",
    "mime-version",
    "content-type",
    "list-unsubscribe",
    "list-unsubscribe-post",
];

/// RSA modulus sizes we generate and sign with (RFC 8301: at least 1024; verifiers need only
/// handle up to 4096).
pub const RSA_MIN_BITS: usize = 1024;
pub const RSA_MAX_BITS: usize = 4096;
pub const RSA_DEFAULT_BITS: usize = 2048;

/// aws-lc's (and ring's) private-key floor; smaller RSA keys are signed by the `rsa` crate.
const AWS_LC_RSA_MIN_BITS: usize = 2048;

const ED25519_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

/// DER `DigestInfo` prefix of a SHA-256 hash, for PKCS#1 v1.5 signatures (RFC 8017 §9.2).
const SHA256_DIGEST_INFO: [u8; 19] = [
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05,
    0x00, 0x04, 0x20,
];

#[derive(Debug, thiserror::Error)]
pub enum DkimError {
    /// The private key cannot be parsed or is of a kind DKIM cannot use.
    #[error("invalid DKIM private key: {0}")]
    Key(String),
    /// A key of the asked kind or size cannot be generated.
    #[error("cannot generate DKIM key: {0}")]
    Generate(String),
    /// The domain or selector cannot go into a DKIM-Signature.
    #[error("invalid DKIM {what}: {value:?} is not an ASCII DNS name (write IDNs as punycode)")]
    Name { what: &'static str, value: String },
    /// The message cannot be signed as it is.
    #[error("cannot DKIM-sign message: {0}")]
    Message(String),
    /// The cryptographic operation itself failed.
    #[error("DKIM signing failed: {0}")]
    Sign(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Rsa,
    Ed25519,
}

impl KeyKind {
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Rsa => "rsa",
            KeyKind::Ed25519 => "ed25519",
        }
    }

    /// Parses `"rsa"` or `"ed25519"` (the DNS record's `k=` values).
    pub fn parse(name: &str) -> Result<Self, DkimError> {
        match name {
            "rsa" => Ok(KeyKind::Rsa),
            "ed25519" => Ok(KeyKind::Ed25519),
            _ => Err(DkimError::Generate(format!(
                "unknown key kind {name:?} (expected \"rsa\" or \"ed25519\")"
            ))),
        }
    }
}

/// A fresh key pair: the private key to keep and the TXT value to publish at
/// `<selector>._domainkey.<domain>`.
#[derive(Debug, Clone)]
pub struct GeneratedKey {
    pub kind: KeyKind,
    /// PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), LF line endings.
    pub private_key_pem: String,
    /// `v=DKIM1; k=rsa; p=...` or `v=DKIM1; k=ed25519; p=...`.
    pub dns_txt: String,
}

/// Generates a key. `bits` is the RSA modulus size (default 2048, 1024..=4096); it must be
/// `None` for Ed25519, whose size is fixed.
pub fn generate_key(kind: KeyKind, bits: Option<usize>) -> Result<GeneratedKey, DkimError> {
    let generate_err = |e: &dyn std::fmt::Display| DkimError::Generate(e.to_string());
    match kind {
        KeyKind::Rsa => {
            let bits = bits.unwrap_or(RSA_DEFAULT_BITS);
            if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
                return Err(DkimError::Generate(format!(
                    "RSA key size {bits} is outside {RSA_MIN_BITS}..={RSA_MAX_BITS} bits"
                )));
            }
            // The `rsa` crate generates any size; aws-lc only 2048, 3072, 4096 and 8192.
            let key =
                RsaPrivateKey::new(&mut rand::thread_rng(), bits).map_err(|e| generate_err(&e))?;
            let pem = key
                .to_pkcs8_pem(LineEnding::LF)
                .map_err(|e| generate_err(&e))?;
            let dns_txt = rsa_dns_txt(&RsaPublicKey::from(&key))?;
            Ok(GeneratedKey {
                kind,
                private_key_pem: pem.to_string(),
                dns_txt,
            })
        }
        KeyKind::Ed25519 => {
            if let Some(bits) = bits {
                return Err(DkimError::Generate(format!(
                    "Ed25519 keys have a fixed size; got bits={bits}, which applies to RSA only"
                )));
            }
            let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
                .map_err(|e| generate_err(&e))?;
            let pair = Ed25519KeyPair::from_pkcs8(der.as_ref()).map_err(|e| generate_err(&e))?;
            let pem = pem::encode_string("PRIVATE KEY", LineEnding::LF, der.as_ref())
                .map_err(|e| generate_err(&e))?;
            Ok(GeneratedKey {
                kind,
                private_key_pem: pem,
                dns_txt: ed25519_dns_txt(pair.public_key().as_ref()),
            })
        }
    }
}

fn rsa_dns_txt(public: &RsaPublicKey) -> Result<String, DkimError> {
    // p= is the DER SubjectPublicKeyInfo, as OpenDKIM and dkimpy publish it.
    let spki = public
        .to_public_key_der()
        .map_err(|e| DkimError::Key(e.to_string()))?;
    Ok(format!(
        "v=DKIM1; k=rsa; p={}",
        BASE64.encode(spki.as_bytes())
    ))
}

fn ed25519_dns_txt(public: &[u8]) -> String {
    // RFC 8463: p= is the raw 32-byte public key, not a SubjectPublicKeyInfo.
    format!("v=DKIM1; k=ed25519; p={}", BASE64.encode(public))
}

enum SigningKey {
    Rsa(RsaKeyPair),
    /// 1024..2047-bit RSA: aws-lc refuses these, so the `rsa` crate signs them (slower, and not
    /// constant-time; such keys are for legacy DNS setups only).
    SmallRsa(Box<RsaPrivateKey>),
    Ed25519(Ed25519KeyPair),
}

/// A parsed key bound to a domain and selector. Parse once, sign many messages; `sign` takes
/// `&self` and is safe to call from several threads at once.
pub struct Signer {
    key: SigningKey,
    rng: SystemRandom,
    domain: String,
    selector: String,
    dns_txt: String,
}

impl Signer {
    /// Parses a PEM private key (PKCS#8 `PRIVATE KEY` for RSA or Ed25519, or PKCS#1
    /// `RSA PRIVATE KEY`) and checks `domain` and `selector`.
    pub fn new(private_key_pem: &str, domain: &str, selector: &str) -> Result<Self, DkimError> {
        check_dns_name("domain", domain)?;
        check_dns_name("selector", selector)?;
        let (key, dns_txt) = parse_private_key(private_key_pem)?;
        Ok(Signer {
            key,
            rng: SystemRandom::new(),
            domain: domain.to_string(),
            selector: selector.to_string(),
            dns_txt,
        })
    }

    /// The `a=` tag: `"rsa-sha256"` or `"ed25519-sha256"`.
    pub fn algorithm(&self) -> &'static str {
        match self.key {
            SigningKey::Ed25519(_) => "ed25519-sha256",
            SigningKey::Rsa(_) | SigningKey::SmallRsa(_) => "rsa-sha256",
        }
    }

    pub fn kind(&self) -> KeyKind {
        match self.key {
            SigningKey::Ed25519(_) => KeyKind::Ed25519,
            _ => KeyKind::Rsa,
        }
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// The TXT value that publishes this key's public half.
    pub fn dns_txt(&self) -> &str {
        &self.dns_txt
    }

    /// Signs `message` (the raw RFC 5322 bytes with CRLF line endings, 8-bit allowed) and returns
    /// the `DKIM-Signature: ...\r\n` header, folded, to prepend to it. `timestamp` (seconds since
    /// the Unix epoch) sets `t=`; `None` reads the clock.
    pub fn sign(&self, message: &[u8], timestamp: Option<u64>) -> Result<Vec<u8>, DkimError> {
        let (fields, body) = split_message(message);

        // h= in SIGNED_HEADERS order; repeated fields bottom-up, as verifiers pick them
        // (RFC 6376 §5.4.2).
        let mut signed: Vec<Field<'_>> = Vec::with_capacity(SIGNED_HEADERS.len() + 1);
        let mut names: Vec<&str> = Vec::with_capacity(SIGNED_HEADERS.len());
        for wanted in SIGNED_HEADERS {
            for &(name, value) in fields.iter().rev() {
                if name
                    .trim_ascii_end()
                    .eq_ignore_ascii_case(wanted.as_bytes())
                {
                    signed.push((name, value));
                    names.push(wanted);
                }
            }
        }
        if names.first() != Some(&"from") {
            return Err(DkimError::Message(
                "it has no From header, which DKIM must sign".into(),
            ));
        }

        let mut body_hash = Sha256Writer(digest::Context::new(&SHA256));
        Canonicalization::Relaxed
            .canonical_body(body, 0)
            .write(&mut body_hash);

        let timestamp = timestamp.unwrap_or_else(crate::clock::unix_seconds);
        let mut header = FoldedHeader::new("DKIM-Signature:");
        for tag in [
            "v=1;".to_string(),
            format!("a={};", self.algorithm()),
            "c=relaxed/relaxed;".to_string(),
            format!("d={};", self.domain),
            format!("s={};", self.selector),
            format!("t={timestamp};"),
        ] {
            header.push(b" ", tag.as_bytes());
        }
        // FWS may precede each ':' of h= (RFC 6376 §3.5), so the list folds between names.
        let last = names.len() - 1;
        for (i, name) in names.iter().enumerate() {
            let item = match (i, i == last) {
                (0, true) => format!("h={name};"),
                (0, false) => format!("h={name}"),
                (_, true) => format!(":{name};"),
                (_, false) => format!(":{name}"),
            };
            header.push(if i == 0 { b" " } else { b"" }, item.as_bytes());
        }
        let body_hash = BASE64.encode(body_hash.0.finish());
        header.push(b" ", format!("bh={body_hash};").as_bytes());
        header.push(b" ", b"b=");

        // The signature covers the signed headers, then this header with b= empty and no CRLF,
        // all relaxed-canonicalized (RFC 6376 §3.7).
        let value = &header.buf["DKIM-Signature:".len()..];
        signed.push((b"DKIM-Signature", value));
        let mut data = Vec::with_capacity(1024);
        Canonicalization::Relaxed.canonicalize_headers(signed.into_iter(), &mut data);
        let signature = self.sign_data(&data)?;

        // b= is removed before verification, so folding inside it changes nothing.
        header.push_split(BASE64.encode(signature).as_bytes());
        header.buf.extend_from_slice(b"\r\n");
        Ok(header.buf)
    }

    fn sign_data(&self, data: &[u8]) -> Result<Vec<u8>, DkimError> {
        let sign_err = |e: &dyn std::fmt::Display| DkimError::Sign(e.to_string());
        match &self.key {
            SigningKey::Rsa(pair) => {
                let mut out = vec![0; pair.public_modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &self.rng, data, &mut out)
                    .map_err(|e| sign_err(&e))?;
                Ok(out)
            }
            SigningKey::SmallRsa(key) => {
                let digest = digest::digest(&SHA256, data);
                let padding = Pkcs1v15Sign {
                    hash_len: Some(digest.as_ref().len()),
                    prefix: SHA256_DIGEST_INFO.into(),
                };
                // With an RNG the `rsa` crate blinds the private operation.
                key.sign_with_rng(&mut rand::thread_rng(), padding, digest.as_ref())
                    .map_err(|e| sign_err(&e))
            }
            // RFC 8463 signs the SHA-256 of the data with pure Ed25519.
            SigningKey::Ed25519(pair) => {
                let digest = digest::digest(&SHA256, data);
                Ok(pair.sign(digest.as_ref()).as_ref().to_vec())
            }
        }
    }
}

/// Longest line we write, as RFC 5322 §2.1.1 recommends; only a single tag longer than that
/// (a domain of 70+ characters) makes a longer line.
const MAX_LINE: usize = 78;

/// A header being written with folding: a fold (CRLF TAB) replaces a separator when the next
/// piece would pass `MAX_LINE`.
struct FoldedHeader {
    buf: Vec<u8>,
    column: usize,
}

impl FoldedHeader {
    fn new(name: &str) -> Self {
        let mut buf = Vec::with_capacity(768);
        buf.extend_from_slice(name.as_bytes());
        FoldedHeader {
            buf,
            column: name.len(),
        }
    }

    fn fold(&mut self) {
        self.buf.extend_from_slice(b"\r\n\t");
        self.column = 1;
    }

    /// Appends `sep` then `piece`, or a fold then `piece`; `sep` must be where FWS is allowed.
    fn push(&mut self, sep: &[u8], piece: &[u8]) {
        if self.column + sep.len() + piece.len() > MAX_LINE && self.column > 1 {
            self.fold();
        } else {
            self.buf.extend_from_slice(sep);
            self.column += sep.len();
        }
        self.buf.extend_from_slice(piece);
        self.column += piece.len();
    }

    /// Appends `text` (base64, where FWS is allowed anywhere), folding it as lines fill.
    fn push_split(&mut self, mut text: &[u8]) {
        while !text.is_empty() {
            let room = MAX_LINE.saturating_sub(self.column);
            if room == 0 {
                self.fold();
                continue;
            }
            let (line, rest) = text.split_at(room.min(text.len()));
            self.buf.extend_from_slice(line);
            self.column += line.len();
            text = rest;
        }
    }
}

/// Lets mail-auth's canonicalizer feed an aws-lc hash (mail-auth implements `Writer` for ring's).
struct Sha256Writer(digest::Context);

impl Writer for Sha256Writer {
    fn write(&mut self, buf: &[u8]) {
        self.0.update(buf);
    }
}

fn check_dns_name(what: &'static str, value: &str) -> Result<(), DkimError> {
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if value.len() <= 253 && value.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(DkimError::Name {
            what,
            value: value.to_string(),
        })
    }
}

/// Parses the PEM and returns the key with its DNS TXT value.
fn parse_private_key(private_key_pem: &str) -> Result<(SigningKey, String), DkimError> {
    let key_err = |msg: String| DkimError::Key(msg);
    if !private_key_pem.contains("-----BEGIN ") {
        return Err(key_err(
            "not a PEM-encoded key (no \"-----BEGIN ...-----\" line)".into(),
        ));
    }
    let (label, der) = pem::decode_vec(private_key_pem.trim().as_bytes())
        .map_err(|e| key_err(format!("not a PEM-encoded key ({e})")))?;
    match label {
        "PRIVATE KEY" => {
            let info = PrivateKeyInfo::try_from(der.as_slice())
                .map_err(|e| key_err(format!("malformed PKCS#8 key ({e})")))?;
            if info.algorithm.oid == rsa::pkcs1::ALGORITHM_OID {
                let key = RsaPrivateKey::from_pkcs8_der(&der)
                    .map_err(|e| key_err(format!("malformed RSA key ({e})")))?;
                rsa_signing_key(key, || RsaKeyPair::from_pkcs8(&der))
            } else if info.algorithm.oid == ED25519_OID {
                // `maybe_unchecked` also takes PKCS#8 v1 (seed only), as OpenSSL writes it.
                let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
                    .map_err(|e| key_err(format!("malformed Ed25519 key ({e})")))?;
                let txt = ed25519_dns_txt(pair.public_key().as_ref());
                Ok((SigningKey::Ed25519(pair), txt))
            } else {
                Err(key_err(format!(
                    "unsupported key algorithm {}; DKIM keys are RSA or Ed25519",
                    info.algorithm.oid
                )))
            }
        }
        "RSA PRIVATE KEY" => {
            let key = RsaPrivateKey::from_pkcs1_der(&der)
                .map_err(|e| key_err(format!("malformed RSA key ({e})")))?;
            rsa_signing_key(key, || RsaKeyPair::from_der(&der))
        }
        "ENCRYPTED PRIVATE KEY" => Err(key_err(
            "the key is encrypted; give the unencrypted PEM".into(),
        )),
        "PUBLIC KEY" | "RSA PUBLIC KEY" => Err(key_err(
            "this is a public key; signing needs the private key".into(),
        )),
        "EC PRIVATE KEY" => Err(key_err(
            "EC keys are not used by DKIM; use RSA or Ed25519".into(),
        )),
        other => Err(key_err(format!(
            "unexpected PEM block {other:?}; expected \"PRIVATE KEY\" or \"RSA PRIVATE KEY\""
        ))),
    }
}

fn rsa_signing_key(
    key: RsaPrivateKey,
    aws_lc_pair: impl FnOnce() -> Result<RsaKeyPair, KeyRejected>,
) -> Result<(SigningKey, String), DkimError> {
    let bits = key.n().bits();
    if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
        return Err(DkimError::Key(format!(
            "RSA key is {bits} bits; DKIM signing supports {RSA_MIN_BITS} to {RSA_MAX_BITS}"
        )));
    }
    let txt = rsa_dns_txt(&RsaPublicKey::from(&key))?;
    if bits < AWS_LC_RSA_MIN_BITS {
        return Ok((SigningKey::SmallRsa(Box::new(key)), txt));
    }
    let pair = aws_lc_pair().map_err(|e| DkimError::Key(format!("RSA key rejected ({e})")))?;
    Ok((SigningKey::Rsa(pair), txt))
}

/// A header field as `(name, value)`, both raw slices of the message.
type Field<'a> = (&'a [u8], &'a [u8]);

/// Splits a message into its header fields and its body. Each field is `(name, value)` where
/// the value keeps its leading space, folds and final line break: mail-auth's relaxed
/// canonicalization expects exactly that. Lines without a colon cannot be signed and are
/// skipped. With no blank line the whole message is headers and the body is empty.
fn split_message(message: &[u8]) -> (Vec<Field<'_>>, &[u8]) {
    let mut fields = Vec::with_capacity(32);
    let mut pos = 0;
    while pos < message.len() {
        let rest = &message[pos..];
        if rest.starts_with(b"\r\n") {
            return (fields, &message[pos + 2..]);
        }
        if rest.starts_with(b"\n") {
            return (fields, &message[pos + 1..]);
        }
        // The field runs to the first line break not followed by a space or tab.
        let mut end = message.len();
        let mut scan = pos;
        while let Some(nl) = message[scan..].iter().position(|&b| b == b'\n') {
            let after = scan + nl + 1;
            if !matches!(message.get(after), Some(b' ' | b'\t')) {
                end = after;
                break;
            }
            scan = after;
        }
        let field = &message[pos..end];
        if let Some(colon) = field.iter().position(|&b| b == b':') {
            fields.push((&field[..colon], &field[colon + 1..]));
        }
        pos = end;
    }
    (fields, &message[message.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use mail_auth::common::parse::TxtRecordParser;
    use mail_auth::common::verify::DomainKey;
    use mail_auth::{
        AuthenticatedMessage, DkimResult, MessageAuthenticator, Parameters, ResolverCache, Txt,
    };
    use std::borrow::Borrow;
    use std::hash::Hash;
    use std::sync::OnceLock;
    use std::task::{Context, Poll, Waker};

    const MESSAGE: &[u8] = b"From: Alice <alice@example.com>\r\n\
        To: bob@example.org\r\n\
        Subject: Hello\r\n\
        Date: Fri, 21 Nov 2025 12:00:00 +0000\r\n\
        Message-ID: <1@example.com>\r\n\
        X-Mailer: test\r\n\
        \r\n\
        Hi Bob.\r\n";

    /// A TXT "cache" that answers every lookup with one key, so verification needs no DNS.
    struct OneKey(Txt);

    impl ResolverCache<Box<str>, Txt> for OneKey {
        fn get<Q>(&self, _: &Q) -> Option<Txt>
        where
            Box<str>: Borrow<Q>,
            Q: Hash + Eq + ?Sized,
        {
            Some(self.0.clone())
        }
        fn remove<Q>(&self, _: &Q) -> Option<Txt>
        where
            Box<str>: Borrow<Q>,
            Q: Hash + Eq + ?Sized,
        {
            None
        }
        fn insert(&self, _: Box<str>, _: Txt, _: std::time::Instant) {}
    }

    /// Runs a future that never waits (every lookup hits `OneKey`).
    fn run_now<F: std::future::Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("verification tried to reach DNS"),
        }
    }

    /// mail-auth's verifier result for `header + message` against `dns_txt`.
    fn verify(dns_txt: &str, header: &[u8], message: &[u8]) -> DkimResult {
        let signed = [header, message].concat();
        let parsed = AuthenticatedMessage::parse(&signed).expect("parseable message");
        let key = DomainKey::parse(dns_txt.as_bytes()).expect("parseable TXT");
        let cache = OneKey(Txt::from(key));
        let auth = MessageAuthenticator::new_cloudflare().unwrap();
        let params = Parameters::new(&parsed).with_txt_cache(&cache);
        let outputs = run_now(auth.verify_dkim(params));
        assert_eq!(outputs.len(), 1);
        outputs[0].result().clone()
    }

    fn rsa_key() -> &'static GeneratedKey {
        static KEY: OnceLock<GeneratedKey> = OnceLock::new();
        KEY.get_or_init(|| generate_key(KeyKind::Rsa, None).unwrap())
    }

    fn ed_key() -> &'static GeneratedKey {
        static KEY: OnceLock<GeneratedKey> = OnceLock::new();
        KEY.get_or_init(|| generate_key(KeyKind::Ed25519, None).unwrap())
    }

    fn tag<'a>(header: &'a str, name: &str) -> &'a str {
        let unfolded = header.split(';').map(str::trim);
        unfolded
            .into_iter()
            .find_map(|t| t.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}= in {header}"))
    }

    #[test]
    fn dkim_generated_keys_have_pem_and_txt() {
        for key in [rsa_key(), ed_key()] {
            assert!(key
                .private_key_pem
                .starts_with("-----BEGIN PRIVATE KEY-----\n"));
            let p = key.dns_txt.rsplit_once("p=").unwrap().1;
            let public = BASE64.decode(p).unwrap();
            match key.kind {
                KeyKind::Rsa => {
                    assert!(key.dns_txt.starts_with("v=DKIM1; k=rsa; p=MII"));
                    let public = rsa::pkcs8::DecodePublicKey::from_public_key_der(&public);
                    let public: RsaPublicKey = public.unwrap();
                    assert_eq!(public.n().bits(), 2048);
                }
                KeyKind::Ed25519 => {
                    assert!(key.dns_txt.starts_with("v=DKIM1; k=ed25519; p="));
                    assert_eq!(public.len(), 32);
                }
            }
            let signer = Signer::new(&key.private_key_pem, "example.com", "s1").unwrap();
            assert_eq!(signer.dns_txt(), key.dns_txt);
            assert_eq!(signer.kind(), key.kind);
        }
    }

    #[test]
    fn dkim_sign_verifies_with_mail_auth() {
        for (key, alg) in [(rsa_key(), "rsa-sha256"), (ed_key(), "ed25519-sha256")] {
            let signer = Signer::new(&key.private_key_pem, "example.com", "s1").unwrap();
            assert_eq!(signer.algorithm(), alg);
            let header = signer.sign(MESSAGE, None).unwrap();
            assert_eq!(verify(&key.dns_txt, &header, MESSAGE), DkimResult::Pass);

            let text = String::from_utf8(header.clone()).unwrap();
            assert!(text.starts_with("DKIM-Signature: v=1; a="));
            assert_well_folded(&text);
            assert_eq!(tag(&text, "a"), alg);
            assert_eq!(tag(&text, "c"), "relaxed/relaxed");
            assert_eq!(tag(&text, "d"), "example.com");
            assert_eq!(tag(&text, "s"), "s1");
            let h: String = tag(&text, "h").split_whitespace().collect();
            assert_eq!(h, "from:to:subject:date:message-id");

            let tampered = [&MESSAGE[..MESSAGE.len() - 2], b"!\r\n"].concat();
            assert!(matches!(
                verify(&key.dns_txt, &header, &tampered),
                DkimResult::Neutral(_) | DkimResult::Fail(_)
            ));
            let tampered = String::from_utf8_lossy(MESSAGE).replace("Hello", "Hullo");
            assert!(matches!(
                verify(&key.dns_txt, &header, tampered.as_bytes()),
                DkimResult::Fail(_)
            ));
        }
    }

    /// One header: CRLF-terminated, every inner line break a fold, no line past 78 columns.
    fn assert_well_folded(text: &str) {
        let body = text.strip_suffix("\r\n").expect("ends with CRLF");
        let lines: Vec<&str> = body.split("\r\n").collect();
        assert!(lines[1..].iter().all(|l| l.starts_with('\t')), "{text}");
        assert!(
            lines
                .iter()
                .all(|l| l.len() <= MAX_LINE && !l.contains('\n')),
            "{text}"
        );
    }

    #[test]
    fn dkim_long_names_and_keys_fold_within_78_columns() {
        let message = b"From: a@example.com\r\nTo: b@example.org\r\nCc: c@example.org\r\n\
            Reply-To: r@example.com\r\nSubject: s\r\nDate: d\r\nMessage-ID: <m@x>\r\n\
            MIME-Version: 1.0\r\nContent-Type: text/plain\r\nList-Unsubscribe: <u>\r\n\
            List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n\r\nbody\r\n";
        let domain = "mail.marketing-department.some-long-company-name.example";
        let selector = "postwire-2025-11-21-rotation";
        let big = generate_key(KeyKind::Rsa, Some(4096)).unwrap();
        for key in [rsa_key(), ed_key(), &big] {
            let signer = Signer::new(&key.private_key_pem, domain, selector).unwrap();
            let header = signer.sign(message, Some(1_763_726_400)).unwrap();
            let text = String::from_utf8(header.clone()).unwrap();
            assert_well_folded(&text);
            let h: String = tag(&text, "h").split_whitespace().collect();
            assert_eq!(h, SIGNED_HEADERS.join(":"));
            assert_eq!(verify(&key.dns_txt, &header, message), DkimResult::Pass);
        }
    }

    #[test]
    fn dkim_timestamp_is_injectable_and_signing_deterministic() {
        for key in [rsa_key(), ed_key()] {
            let signer = Signer::new(&key.private_key_pem, "example.com", "s1").unwrap();
            let a = signer.sign(MESSAGE, Some(1_700_000_000)).unwrap();
            let b = signer.sign(MESSAGE, Some(1_700_000_000)).unwrap();
            assert_eq!(a, b);
            assert_eq!(tag(std::str::from_utf8(&a).unwrap(), "t"), "1700000000");
        }
    }

    #[test]
    fn dkim_repeated_and_odd_headers_verify() {
        let message = b"Received: from x\r\n\
            TO: one@example.org\r\n\
            from:alice@example.com\r\n\
            Subject:  folded\r\n\
            \t subject   line \r\n\
            To: two@example.org\r\n\
            Content-Type: text/plain; charset=utf-8\r\n\
            \r\n\
            caf\xc3\xa9  \t \r\n\r\n\r\n";
        let key = rsa_key();
        let signer = Signer::new(&key.private_key_pem, "example.com", "s1").unwrap();
        let header = signer.sign(message, None).unwrap();
        assert_eq!(verify(&key.dns_txt, &header, message), DkimResult::Pass);
        let text = String::from_utf8(header).unwrap();
        let h: String = tag(&text, "h").split_whitespace().collect();
        assert_eq!(h, "from:to:to:subject:content-type");
    }

    #[test]
    fn dkim_message_without_body_or_from() {
        let key = ed_key();
        let signer = Signer::new(&key.private_key_pem, "example.com", "s1").unwrap();
        let headers_only = b"From: a@example.com\r\nSubject: x\r\n";
        let header = signer.sign(headers_only, None).unwrap();
        assert_eq!(
            verify(&key.dns_txt, &header, headers_only),
            DkimResult::Pass
        );

        let err = signer
            .sign(b"To: b@example.org\r\n\r\nbody\r\n", None)
            .unwrap_err();
        assert!(err.to_string().contains("no From header"), "{err}");
    }

    #[test]
    fn dkim_small_rsa_keys_sign_through_the_rsa_crate() {
        let key = generate_key(KeyKind::Rsa, Some(1024)).unwrap();
        let signer = Signer::new(&key.private_key_pem, "example.com", "s1").unwrap();
        assert!(matches!(signer.key, SigningKey::SmallRsa(_)));
        let header = signer.sign(MESSAGE, None).unwrap();
        assert_eq!(verify(&key.dns_txt, &header, MESSAGE), DkimResult::Pass);
    }

    #[test]
    fn dkim_pkcs1_pem_is_accepted() {
        let pkcs8 = rsa_key();
        let key = RsaPrivateKey::from_pkcs8_pem(&pkcs8.private_key_pem).unwrap();
        let pkcs1 = rsa::pkcs1::EncodeRsaPrivateKey::to_pkcs1_pem(&key, LineEnding::CRLF).unwrap();
        let signer = Signer::new(&pkcs1, "example.com", "s1").unwrap();
        assert!(matches!(signer.key, SigningKey::Rsa(_)));
        assert_eq!(signer.dns_txt(), pkcs8.dns_txt);
        let header = signer.sign(MESSAGE, None).unwrap();
        assert_eq!(verify(&pkcs8.dns_txt, &header, MESSAGE), DkimResult::Pass);
    }

    #[test]
    fn dkim_openssl_ed25519_pem_is_accepted() {
        // `openssl genpkey -algorithm ed25519` writes PKCS#8 v1 (seed only).
        let pem = "-----BEGIN PRIVATE KEY-----\n\
            MC4CAQAwBQYDK2VwBCIEIAwFUjEDUNhpSOEhd4OvWaZ10+V3K+JpZcMuodm6SpXo\n\
            -----END PRIVATE KEY-----\n";
        let signer = Signer::new(pem, "example.com", "ed").unwrap();
        assert_eq!(signer.algorithm(), "ed25519-sha256");
        let header = signer.sign(MESSAGE, None).unwrap();
        assert_eq!(verify(signer.dns_txt(), &header, MESSAGE), DkimResult::Pass);
    }

    #[test]
    fn dkim_generation_rejects_bad_parameters() {
        for bits in [512, 1023, 4097, 8192] {
            let err = generate_key(KeyKind::Rsa, Some(bits)).unwrap_err();
            assert!(err.to_string().contains("outside 1024..=4096"), "{err}");
        }
        assert!(generate_key(KeyKind::Ed25519, Some(256)).is_err());
        assert!(KeyKind::parse("dsa").is_err());
        assert_eq!(KeyKind::parse("ed25519").unwrap(), KeyKind::Ed25519);
    }

    #[test]
    fn dkim_bad_keys_and_names_are_rejected_clearly() {
        let expect = |pem: &str, needle: &str| {
            let err = Signer::new(pem, "example.com", "s1")
                .err()
                .expect("an error");
            assert!(matches!(err, DkimError::Key(_)));
            assert!(err.to_string().contains(needle), "{err}");
        };
        expect("not a key", "not a PEM-encoded key");
        expect(
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            "malformed PKCS#8",
        );
        let public = rsa_key().dns_txt.rsplit_once("p=").unwrap().1;
        let public_pem = pem::encode_string(
            "PUBLIC KEY",
            LineEnding::LF,
            &BASE64.decode(public).unwrap(),
        )
        .unwrap();
        expect(&public_pem, "public key");
        expect(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
            "encrypted",
        );
        // An EC P-256 key in PKCS#8 form (generated by OpenSSL).
        let ec = "-----BEGIN PRIVATE KEY-----\n\
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgt8nOH0/OvSoabsGA\n\
            iOblTPoEdNSMtvX2M1FZtwpbCpuhRANCAARj7RVuOSo/jvJW8suKd4NKqdMeCW0c\n\
            YWA3woGL69sYpli4A79fIhaCIAOmR0D6M8xcLu/vFTxLXTuZj1CpoWzQ\n\
            -----END PRIVATE KEY-----\n";
        expect(ec, "unsupported key algorithm 1.2.840.10045.2.1");

        let pem = &ed_key().private_key_pem;
        for (domain, selector) in [
            ("", "s1"),
            ("exa mple.com", "s1"),
            ("example.com", "s1;x=y"),
            ("bücher.example", "s1"),
            ("example.com", "s1\r\nBcc: x"),
            ("example..com", "s1"),
        ] {
            let err = Signer::new(pem, domain, selector).err().expect("an error");
            assert!(matches!(err, DkimError::Name { .. }), "{err}");
        }
    }

    #[test]
    fn dkim_split_message_keeps_folds_and_body() {
        let (fields, body) = split_message(b"A: 1\r\nB: 2\r\n 3\r\nnocolon\r\n\r\nbody");
        assert_eq!(
            fields,
            vec![
                (&b"A"[..], &b" 1\r\n"[..]),
                (&b"B"[..], &b" 2\r\n 3\r\n"[..])
            ]
        );
        assert_eq!(body, b"body");
        let (fields, body) = split_message(b"A: 1");
        assert_eq!(fields, vec![(&b"A"[..], &b" 1"[..])]);
        assert!(body.is_empty());
    }
}
