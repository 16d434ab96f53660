// Styles without CSS: the inspector's controls for the selected block and the whole email,
// and their effect on the canvas, set through the CSSOM (the page's CSP allows no inline style).
"use strict";

window.PostwireEditor = window.PostwireEditor || {};

(() => {
  const LABELS = {
    align: "Alignment",
    color: "Text colour",
    background: "Background",
    padding: "Padding (px)",
    shape: "Button shape",
    font: "Font",
    button_shape: "Button shape",
    background_doc: "Around the email",
    content_background: "Email body",
    text_color: "Text",
    heading_color: "Headings",
    link_color: "Links",
    button_background: "Button",
    button_text_color: "Button text",
    language: "Language",
  };
  const COLOUR_KEYS = new Set(["color", "background", "content_background", "text_color", "heading_color", "link_color", "button_background", "button_text_color"]);

  function element(tag, attributes = {}, children = []) {
    return window.PostwireEditor.blocks.element(tag, attributes, children);
  }

  // The email's value of a document style key: its own override, else the brand kit's.
  function documentValue(doc, context, key) {
    return (doc.style && doc.style[key]) || context.brand[key];
  }

  // What a block shows when its own style leaves `key` unset.
  function blockDefault(block, doc, context, key) {
    switch (key) {
      case "align":
        return documentValue(doc, context, "align");
      case "color":
        if (block.type === "heading") return documentValue(doc, context, "heading_color");
        if (block.type === "button") return documentValue(doc, context, "button_text_color");
        return documentValue(doc, context, "text_color");
      case "background":
        if (block.type === "button") return documentValue(doc, context, "button_background");
        return documentValue(doc, context, "content_background");
      case "shape":
        return documentValue(doc, context, "button_shape");
      case "padding":
        return context.defaultPadding;
      default:
        return "";
    }
  }

  function choices(key, context) {
    if (key === "align") return context.alignments.map((value) => [value, value[0].toUpperCase() + value.slice(1)]);
    if (key === "shape" || key === "button_shape") return context.shapes.map((value) => [value, value[0].toUpperCase() + value.slice(1)]);
    if (key === "language") return Object.entries(context.languages);
    if (key === "font") return Object.keys(context.fonts).map((value) => [value, context.fontNames[value] || value]);
    return [];
  }

  // One labelled control of the inspector; `scope` is "block" or "document".
  function control(scope, key, own, shown, context, labelKey = key) {
    const id = `style-${scope}-${key}`;
    const label = element("label", { for: id, text: LABELS[labelKey] || key });
    let input;
    if (COLOUR_KEYS.has(key)) {
      input = element("input", { id, type: "color", "data-style-scope": scope, "data-style-key": key });
      input.value = shown || "#000000";
    } else if (key === "padding") {
      input = element("input", { id, type: "number", min: 0, max: 64, step: 1, placeholder: String(shown), "data-style-scope": scope, "data-style-key": key });
      input.value = own === undefined || own === null ? "" : String(own);
    } else {
      input = element("select", { id, "data-style-scope": scope, "data-style-key": key });
      const options = choices(key, context);
      if (scope === "block") options.unshift(["", `As the email (${shown})`]);
      for (const [value, text] of options) {
        const option = element("option", { value, text });
        if (value === (scope === "block" ? own || "" : shown)) option.selected = true;
        input.appendChild(option);
      }
    }
    const row = element("div", { className: "style-row" }, [label, input]);
    if (COLOUR_KEYS.has(key)) {
      const overridden = own !== undefined && own !== null && own !== "";
      row.appendChild(element("button", {
        type: "button",
        className: "button small",
        id: `${id}-reset`,
        "data-style-reset": key,
        "data-style-scope": scope,
        "aria-label": `Reset ${(LABELS[labelKey] || key).toLowerCase()} to the ${scope === "block" ? "email's" : "brand kit's"}`,
        text: overridden ? "Reset" : "Default",
      }));
    }
    return row;
  }

  function drawInspector(blockPanel, documentPanel, doc, block, context) {
    if (!block) {
      blockPanel.replaceChildren(element("p", { className: "hint", text: "Select a block (its Style button, or click into it) to style it." }));
    } else {
      const keys = context.blockStyles[block.type] || [];
      const name = window.PostwireEditor.blocks.NAMES[block.type];
      const rows = keys.map((key) => control("block", key, (block.style || {})[key], (block.style || {})[key] || blockDefault(block, doc, context, key), context));
      if (!rows.length) rows.push(element("p", { className: "hint", text: "This block has no style of its own." }));
      blockPanel.replaceChildren(element("h3", { text: `Selected: ${name}` }), ...rows);
    }
    const style = doc.style || {};
    documentPanel.replaceChildren(...context.documentStyles.map((key) =>
      control("document", key, style[key], documentValue(doc, context, key), context, key === "background" ? "background_doc" : key)));
  }

  function px(value) {
    return `${value}px`;
  }

  // The canvas looks like the email: font, colours, alignment and padding as the styles say.
  function applyDocumentStyle(canvas, doc, context) {
    const language = documentValue(doc, context, "language");
    canvas.lang = language;  // spelling checked in the email's language, as mail apps will
    canvas.dir = context.rightToLeft.has(language) ? "rtl" : "ltr";
    canvas.style.fontFamily = context.fonts[documentValue(doc, context, "font")] || "";
    canvas.style.backgroundColor = documentValue(doc, context, "content_background");
    canvas.style.color = documentValue(doc, context, "text_color");
    canvas.style.setProperty("--email-link", documentValue(doc, context, "link_color"));
    canvas.style.setProperty("--email-heading", documentValue(doc, context, "heading_color"));
    canvas.style.setProperty("--email-button", documentValue(doc, context, "button_background"));
    canvas.style.setProperty("--email-button-text", documentValue(doc, context, "button_text_color"));
    canvas.style.setProperty("--email-around", documentValue(doc, context, "background"));
  }

  function applyBlockStyle(body, block, context) {
    const style = block.style || {};
    body.style.textAlign = style.align || "";
    body.style.color = block.type === "button" ? "" : style.color || "";
    body.style.backgroundColor = block.type === "button" ? "" : style.background || "";
    body.style.padding = style.padding === undefined || style.padding === null ? "" : px(style.padding);
    const sample = body.querySelector(".button-sample .sample");
    if (sample) {
      sample.style.backgroundColor = style.background || "";
      sample.style.color = style.color || "";
    }
  }

  window.PostwireEditor.styles = { drawInspector, applyDocumentStyle, applyBlockStyle, COLOUR_KEYS };
})();
