//! MJML to email-safe HTML, through the `mrml` crate (the Rust port of MJML).
//!
//! The broadcast editor's blocks are turned into MJML by Python (an element tree, escaped) and
//! rendered here: table layout, inline styles, a body that reflows on phones. Rendering is
//! deterministic, so the same MJML always gives the same bytes (golden tests rely on it).
//!
//! Nothing external is ever pulled in: `mj-include` has no loader (it fails), and the web-font
//! table is empty, so no `<link>` to a font service is emitted whatever `font-family` says.

use std::collections::HashMap;

use mrml::prelude::parser::ParserOptions;
use mrml::prelude::render::RenderOptions;

#[derive(Debug, thiserror::Error)]
pub enum EmailLayoutError {
    #[error("invalid MJML: {0}")]
    Parse(String),
    #[error("MJML could not be rendered: {0}")]
    Render(String),
}

/// The HTML of an MJML document, without comments.
///
/// mrml writes attribute values back with Rust's debug formatting (`\` doubled, characters that
/// are not printable or that extend a grapheme as `\u{...}`): callers pass attribute values as
/// printable ASCII, anything else as character references (`&#8232;`), which pass through.
///
/// `mj-social-element` without a `src` would point at MJML's own icon host: Postwire's blocks
/// never emit `mj-social` (social links are text links), and callers must not either.
pub fn mjml_to_html(mjml: &str) -> Result<String, EmailLayoutError> {
    let parsed = mrml::parse_with_options(mjml, &ParserOptions::default())
        .map_err(|err| EmailLayoutError::Parse(err.to_string()))?;
    let options = RenderOptions {
        disable_comments: true,
        social_icon_origin: None,
        fonts: HashMap::new(),
    };
    parsed
        .element
        .render(&options)
        .map_err(|err| EmailLayoutError::Render(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIMPLE: &str = r#"<mjml><mj-head><mj-title>Hi</mj-title></mj-head><mj-body width="600px"><mj-section><mj-column><mj-text font-family="Open Sans, Arial">Hello &amp; welcome {{{contact.first_name|there}}}</mj-text><mj-button href="{{{RESEND_UNSUBSCRIBE_URL}}}">Go</mj-button></mj-column></mj-section></mj-body></mjml>"#;

    #[test]
    fn renders_tables_with_inline_styles() {
        let html = mjml_to_html(SIMPLE).unwrap();
        assert!(html.starts_with("<!doctype html>"), "{html}");
        assert!(html.contains("<table"));
        assert!(html.contains("style=\""));
        assert!(html.contains("Hello &amp; welcome"));
    }

    #[test]
    fn keeps_placeholders_intact() {
        let html = mjml_to_html(SIMPLE).unwrap();
        assert!(html.contains("{{{contact.first_name|there}}}"));
        assert!(html.contains("href=\"{{{RESEND_UNSUBSCRIBE_URL}}}\""));
    }

    #[test]
    fn is_deterministic() {
        let first = mjml_to_html(SIMPLE).unwrap();
        for _ in 0..5 {
            assert_eq!(first, mjml_to_html(SIMPLE).unwrap());
        }
    }

    #[test]
    fn links_no_web_fonts_and_no_comments() {
        let html = mjml_to_html(SIMPLE).unwrap();
        assert!(!html.contains("fonts.googleapis"), "{html}");
        assert!(!html.contains("<link"), "{html}");
        assert!(!html.contains("<script"));
    }

    #[test]
    fn refuses_includes_and_malformed_input() {
        let include = r#"<mjml><mj-body><mj-include path="/etc/passwd" /></mj-body></mjml>"#;
        assert!(mjml_to_html(include).is_err());
        assert!(matches!(
            mjml_to_html("<mjml><mj-body>"),
            Err(EmailLayoutError::Parse(_))
        ));
        assert!(mjml_to_html("").is_err());
    }

    #[test]
    fn character_references_in_attributes_pass_through() {
        let mjml = r#"<mjml><mj-body><mj-section><mj-column><mj-image src="https://a.example/i.png" alt="a&#8232;b&#92;c &amp; &quot;d&quot;" /><mj-text>e\f</mj-text></mj-column></mj-section></mj-body></mjml>"#;
        let html = mjml_to_html(mjml).unwrap();
        assert!(
            html.contains(r#"alt="a&#8232;b&#92;c &amp; &quot;d&quot;""#),
            "{html}"
        );
        assert!(
            html.contains(r"e\f"),
            "texts are copied as they are: {html}"
        );
    }
}
