//! Secrets in model answers: the one place where text is scrubbed of every configured secret
//! (SPEC §12 R4).
//!
//! Every [`ApiKey`](super::ApiKey) the process builds — the chat key, a pool server's key, a key
//! from a config file — is registered here. [`redact_secrets`] replaces each of them with
//! `***` in *any encoding a decoder would turn back into it*: the key as it is, any mix of its
//! characters written as JSON `\uXXXX` escapes (either case of hex, escaped more than once),
//! `\xXX`, `\/`, HTML character references or URL percent-encoding, and the base64 of the key
//! (standard or URL-safe alphabet, at any of the three byte alignments a longer encoded text
//! can put it at, itself in any of those encodings). So a key cannot survive by being spelled
//! so that the JSON decoder, a URL or a base64 decoder puts it back together.
//!
//! The HTTP backend runs it on every answer before it is parsed, streamed or stored, holding
//! back the end of a stream that could be the start of an encoded key
//! ([`secret_prefix_at_end`]); the prompt runner runs it again on every cleaned answer and the
//! dialogue on every string decoded from one (tool arguments included), whatever backend or
//! cache produced it.

use std::borrow::Cow;
use std::sync::{PoisonError, RwLock};

/// Secrets shorter than this are not searched for (they would match ordinary words).
pub const MIN_SECRET_BYTES: usize = 8;

/// What a secret becomes.
pub const REDACTED: &str = "***";

/// Backslashes before `u`/`x` accepted as one escape (`\\u0073` is `\u0073` after one decode).
const MAX_BACKSLASHES: usize = 8;

/// The longest encoding of one byte: backslashes, `u`, four hex digits (or `&#x` + six + `;`).
const MAX_UNIT_BYTES: usize = MAX_BACKSLASHES + 5;

/// One secret and its base64 spellings.
#[derive(Clone)]
struct Secret {
    /// The plain secret and the stable cores of its base64 encodings.
    forms: Vec<Vec<u8>>,
}

/// A set of secrets to redact. The process-wide set behind [`register_secret`] and
/// [`redact_secrets`] holds every configured key; an HTTP backend keeps one of its own key too,
/// to hold back the end of a stream only for what its server was sent.
#[derive(Clone, Default)]
pub struct Secrets(Vec<Secret>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} held)", self.0.len())
    }
}

static SECRETS: RwLock<Secrets> = RwLock::new(Secrets(Vec::new()));

/// Registers `secret` so that [`redact_secrets`] removes it from now on (secrets shorter than
/// [`MIN_SECRET_BYTES`] are ignored; registering one twice is harmless).
pub fn register_secret(secret: &str) {
    SECRETS
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .add(secret);
}

/// `text` with every registered secret, in any of the encodings the module docs list, replaced
/// by [`REDACTED`] ([`Secrets::redact`] over every configured secret). Borrows `text` when
/// there is nothing to replace.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    SECRETS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .redact(text)
}

/// [`Secrets::prefix_at_end`] over every registered secret.
pub fn secret_prefix_at_end(text: &str) -> usize {
    SECRETS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .prefix_at_end(text)
}

impl Secrets {
    /// Adds `secret` (ignored below [`MIN_SECRET_BYTES`] or when already held).
    pub fn add(&mut self, secret: &str) {
        if secret.len() < MIN_SECRET_BYTES
            || self
                .0
                .iter()
                .any(|s| s.forms.first().is_some_and(|f| f == secret.as_bytes()))
        {
            return;
        }
        let mut forms = vec![secret.as_bytes().to_vec()];
        for core in base64_cores(secret.as_bytes()) {
            if core.len() >= MIN_SECRET_BYTES && !forms.contains(&core) {
                forms.push(core);
            }
        }
        self.0.push(Secret { forms });
    }

    fn forms(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.0.iter().flat_map(|s| &s.forms)
    }

    /// `text` with every secret of the set, in any of the encodings the module docs list,
    /// replaced by [`REDACTED`]: the one redaction every string from a model goes through.
    /// Borrows `text` when there is nothing to replace.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.0.is_empty() {
            return Cow::Borrowed(text);
        }
        let bytes = text.as_bytes();
        let mut out: Option<Vec<u8>> = None;
        let mut i = 0;
        while i < bytes.len() {
            // The longest match wins (one secret may start another).
            let hit = self
                .forms()
                .filter_map(|form| match match_encoded(bytes, i, form) {
                    Matched::Full(end) => Some(end),
                    _ => None,
                })
                .max();
            match hit {
                Some(end) => {
                    let out = out.get_or_insert_with(|| bytes[..i].to_vec());
                    out.extend_from_slice(REDACTED.as_bytes());
                    i = end;
                }
                None => {
                    if let Some(out) = &mut out {
                        out.push(bytes[i]);
                    }
                    i += 1;
                }
            }
        }
        match out {
            // Matches start and end on ASCII bytes or whole UTF-8 secrets: this stays UTF-8.
            Some(out) => Cow::Owned(String::from_utf8_lossy(&out).into_owned()),
            None => Cow::Borrowed(text),
        }
    }

    /// How many bytes at the end of `text` to hold back from a stream: those that could be
    /// the start of an encoded secret the next piece completes, and any whole secret the cut
    /// would split (what is passed on is redacted on its own).
    pub fn prefix_at_end(&self, text: &str) -> usize {
        let bytes = text.as_bytes();
        let longest = self.forms().map(Vec::len).max().unwrap_or(0);
        let from = bytes.len().saturating_sub(longest * MAX_UNIT_BYTES);
        let mut cut = (from..bytes.len())
            .filter(|&at| text.is_char_boundary(at))
            .find(|&at| {
                self.forms()
                    .any(|form| match_encoded(bytes, at, form) == Matched::Partial)
            })
            .unwrap_or(bytes.len());
        while let Some(start) = (from..cut).find(|&at| {
            self.forms().any(
                |form| matches!(match_encoded(bytes, at, form), Matched::Full(end) if end > cut),
            )
        }) {
            cut = start;
        }
        bytes.len() - cut
    }
}

/// What [`match_encoded`] found at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Matched {
    /// An encoding of the whole form, ending here.
    Full(usize),
    /// The text ends inside a possible encoding.
    Partial,
    /// No encoding of the form starts here.
    No,
}

/// Whether `text[at..]` starts with an encoding of `form`, each byte of which may be written
/// as itself or escaped (see [`unit`]).
fn match_encoded(text: &[u8], mut at: usize, form: &[u8]) -> Matched {
    for &want in form {
        match unit(text, at, want) {
            Unit::Len(len) => at += len,
            Unit::Partial => return Matched::Partial,
            Unit::No => return Matched::No,
        }
    }
    Matched::Full(at)
}

/// One byte's encoding in [`unit`].
enum Unit {
    Len(usize),
    Partial,
    No,
}

/// The length of an encoding of the byte `want` at `text[at..]`: the byte itself, `%XX`,
/// `\uXXXX` or `\xXX` after one or more backslashes, `\/` for `/`, or `&#NN;` / `&#xXX;`.
fn unit(text: &[u8], at: usize, want: u8) -> Unit {
    let Some(&first) = text.get(at) else {
        return Unit::Partial;
    };
    if first == want {
        return Unit::Len(1);
    }
    match first {
        b'%' => hex_unit(text, at + 1, 2, want, 1),
        b'\\' => {
            let run = text[at..]
                .iter()
                .take(MAX_BACKSLASHES + 1)
                .take_while(|&&b| b == b'\\')
                .count();
            if run > MAX_BACKSLASHES {
                return Unit::No;
            }
            match text.get(at + run) {
                None => Unit::Partial,
                Some(b'u') => hex_unit(text, at + run + 1, 4, want, run + 1),
                Some(b'x') => hex_unit(text, at + run + 1, 2, want, run + 1),
                Some(b'/') if want == b'/' => Unit::Len(run + 1),
                Some(_) => Unit::No,
            }
        }
        b'&' => char_reference(text, at, want),
        _ => Unit::No,
    }
}

/// `digits` hex digits at `text[at..]` spelling `want` (`lead` bytes before them).
fn hex_unit(text: &[u8], at: usize, digits: usize, want: u8, lead: usize) -> Unit {
    let mut value: u32 = 0;
    for k in 0..digits {
        let Some(&b) = text.get(at + k) else {
            return Unit::Partial;
        };
        let Some(d) = (b as char).to_digit(16) else {
            return Unit::No;
        };
        value = value * 16 + d;
    }
    // Above 0x7f a `\u` escape is a code point, not a byte: only ASCII bytes are spelled so.
    if value == u32::from(want) && (digits == 2 && lead == 1 || want.is_ascii()) {
        Unit::Len(lead + digits)
    } else {
        Unit::No
    }
}

/// `&#NN;` or `&#xXX;` (up to six digits) spelling the ASCII byte `want`.
fn char_reference(text: &[u8], at: usize, want: u8) -> Unit {
    if !want.is_ascii() {
        return Unit::No;
    }
    let mut k = at + 1;
    match text.get(k) {
        None => return Unit::Partial,
        Some(b'#') => k += 1,
        Some(_) => return Unit::No,
    }
    let radix = match text.get(k) {
        None => return Unit::Partial,
        Some(b'x' | b'X') => {
            k += 1;
            16
        }
        Some(_) => 10,
    };
    let mut value: u32 = 0;
    let start = k;
    loop {
        let Some(&b) = text.get(k) else {
            return Unit::Partial;
        };
        if b == b';' && k > start {
            return if value == u32::from(want) {
                Unit::Len(k + 1 - at)
            } else {
                Unit::No
            };
        }
        let Some(d) = (b as char).to_digit(radix) else {
            return Unit::No;
        };
        if k - start >= 6 {
            return Unit::No;
        }
        value = value * radix + d;
        k += 1;
    }
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The base64 characters that depend on the secret's bytes alone, for the secret starting at
/// each of the three offsets a longer text can put it at, in both alphabets: what appears in
/// the base64 of any text that holds the secret.
fn base64_cores(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut cores = Vec::new();
    for offset in 0..3 {
        let mut padded = vec![0u8; offset];
        padded.extend_from_slice(secret);
        let bits = padded.len() * 8;
        // Characters 6k..6k+6; the first that holds no padding bit and the last within the
        // secret.
        let first = (offset * 8).div_ceil(6);
        let last = bits / 6;
        for alphabet in [STANDARD, URL_SAFE] {
            let core: Vec<u8> = (first..last)
                .map(|c| alphabet[usize::from(sextet(&padded, c))])
                .collect();
            cores.push(core);
        }
    }
    cores
}

/// The `index`th six bits of `bytes`.
fn sextet(bytes: &[u8], index: usize) -> u8 {
    let bit = index * 6;
    let byte = bit / 8;
    let hi = u16::from(bytes[byte]) << 8 | u16::from(bytes.get(byte + 1).copied().unwrap_or(0));
    let shift = 16 - 6 - (bit % 8);
    ((hi >> shift) & 0x3f) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Plain base64 (standard alphabet, padded), to encode test texts independently of
    /// [`base64_cores`].
    fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
            for k in 0..=chunk.len() {
                out.push(alphabet[((n >> (18 - 6 * k)) & 0x3f) as usize] as char);
            }
        }
        while !out.len().is_multiple_of(4) {
            out.push('=');
        }
        out
    }

    /// `key` spelled with each byte chosen by `how` (0 itself, 1 `\u` lower, 2 `\u` upper,
    /// 3 percent, 4 double-escaped `\\u`, 5 `\x`, 6 `&#NN;`, 7 `&#xNN;`).
    fn spell(key: &str, how: &[u8]) -> String {
        key.bytes()
            .zip(how.iter().cycle())
            .map(|(b, how)| match how % 8 {
                0 => (b as char).to_string(),
                1 => format!("\\u{b:04x}"),
                2 => format!("\\u{b:04X}"),
                3 => format!("%{b:02X}"),
                4 => format!("\\\\u{b:04x}"),
                5 => format!("\\x{b:02x}"),
                6 => format!("&#{b};"),
                _ => format!("&#x{b:x};"),
            })
            .collect()
    }

    /// A JSON string literal whose every character is a `\u` escape.
    fn all_escaped(text: &str) -> String {
        text.chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect()
    }

    fn no_key(text: &str, key: &str) {
        assert!(!text.contains(key), "{key} survived in {text}");
        if let Ok(serde_json::Value::String(decoded)) =
            serde_json::from_str::<serde_json::Value>(&format!("\"{text}\""))
        {
            assert!(!decoded.contains(key), "{key} decodes from {text}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Random keys in random encodings, inside random prose: none survives redaction,
        /// neither as written nor after JSON decoding, and neither does its base64 at any
        /// alignment; text around it is kept.
        #[test]
        fn no_encoding_of_a_key_survives(
            key in "sk-[A-Za-z0-9_/+=-]{8,40}",
            how in proptest::collection::vec(0u8..8, 1..48),
            before in "[a-z ]{0,12}",
            after in "[a-z ]{0,12}",
            pad in 0usize..3,
        ) {
            register_secret(&key);
            let spelled = spell(&key, &how);
            let text = format!("{before}{spelled}{after}");
            let out = redact_secrets(&text);
            prop_assert_eq!(out.as_ref(), format!("{before}{REDACTED}{after}"));
            no_key(&out, &key);

            // Its base64, after `pad` bytes of other text, in both alphabets.
            for alphabet in [STANDARD, URL_SAFE] {
                let mut payload = "x".repeat(pad).into_bytes();
                payload.extend_from_slice(key.as_bytes());
                payload.extend_from_slice(b" trailing");
                let encoded = base64(&payload, alphabet);
                let out = redact_secrets(&encoded);
                prop_assert!(out.contains(REDACTED), "base64 {} kept", encoded);
            }

            // Streamed in pieces: what is passed on before the end never holds the start of
            // a key the next piece completes.
            let whole = format!("Key: {}!", all_escaped(&key));
            let mut passed = 0;
            let mut sent = String::new();
            for end in (1..whole.len()).chain([whole.len()]) {
                let text = &whole[..end];
                let ready = if end == whole.len() {
                    end
                } else {
                    end - secret_prefix_at_end(text)
                };
                if ready > passed {
                    sent.push_str(&redact_secrets(&whole[passed..ready]));
                    passed = ready;
                }
            }
            prop_assert_eq!(sent, format!("Key: {REDACTED}!"));
        }
    }

    #[test]
    fn short_secrets_and_ordinary_text_are_left_alone() {
        register_secret("short");
        assert!(matches!(redact_secrets("short text"), Cow::Borrowed(_)));
        register_secret("sk-plain-12345678");
        let text = "Nothing to see here: 100% \\u0041 &#65; \\x41";
        assert!(matches!(redact_secrets(text), Cow::Borrowed(_)));
        assert_eq!(
            redact_secrets("a sk-plain-12345678 b \\u0073k-plain-12345678"),
            "a *** b ***"
        );
        // A key written in part stays: it is not the key.
        assert_eq!(redact_secrets("sk-plain-1234"), "sk-plain-1234");
        // Held back: what could start the key (on a set of its own: other tests register keys
        // in the process-wide one as they run).
        let mut own = Secrets::default();
        own.add("sk-plain-12345678");
        assert_eq!(own.prefix_at_end("say sk-pla"), "sk-pla".len());
        assert_eq!(own.prefix_at_end("say \\u00"), "\\u00".len());
        assert_eq!(own.prefix_at_end("say hello"), 0);
    }
}
