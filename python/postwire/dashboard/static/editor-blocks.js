// The broadcast editor's canvas: each block drawn as the controls that edit it. Every control
// gets an id derived from its block's id, so focus survives a redraw (after a move, an undo).
"use strict";

window.PostwireEditor = window.PostwireEditor || {};

(() => {
  const { drawRuns } = window.PostwireEditor.text;

  const NAMES = {
    heading: "Heading",
    paragraph: "Paragraph",
    list: "List",
    image: "Image",
    button: "Button",
    divider: "Divider",
    spacer: "Spacer",
    columns: "Columns",
    social: "Social links",
    footer: "Footer",
  };

  function element(tag, attributes = {}, children = []) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = value;
      else if (name === "className") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) if (child) node.appendChild(child);
    return node;
  }

  function controlId(block, key) {
    return `blk-${block.id}-${key}`;
  }

  // A labelled input bound to `block[field]`.
  function field(block, key, label, attributes = {}, hint = "") {
    const id = controlId(block, key);
    const input = element("input", { id, "data-field": key, ...attributes });
    const value = block[key];
    if (attributes.type === "checkbox") input.checked = !!value;
    else input.value = value === undefined || value === null ? "" : String(value);
    const row = element("div", { className: "block-field" }, [element("label", { for: id, text: label }), input]);
    if (hint) {
      const hintId = `${id}-hint`;
      input.setAttribute("aria-describedby", hintId);
      row.appendChild(element("p", { className: "hint", id: hintId, text: hint }));
    }
    return row;
  }

  function select(block, key, label, options, value) {
    const id = controlId(block, key);
    const menu = element("select", { id, "data-field": key });
    for (const [optionValue, text] of options) {
      const option = element("option", { value: optionValue, text });
      if (String(optionValue) === String(value)) option.selected = true;
      menu.appendChild(option);
    }
    return element("div", { className: "block-field" }, [element("label", { for: id, text: label }), menu]);
  }

  function richText(block, key, label, { multiline = true, className = "", placeholder = "" } = {}) {
    const editable = element("div", {
      "data-placeholder": placeholder || `${label}…`,
      id: controlId(block, key),
      className: `rich ${className}`,
      contenteditable: "true",
      role: "textbox",
      "aria-label": label,
      "aria-multiline": multiline ? "true" : "false",
      "data-runs": key,
      spellcheck: "true",
    });
    drawRuns(editable, block[key]);
    return editable;
  }

  function listEditor(block) {
    const tag = block.ordered ? "ol" : "ul";
    const list = element(tag, {
      id: controlId(block, "items"),
      className: "rich rich-list",
      contenteditable: "true",
      role: "textbox",
      "aria-label": "List items, one a line",
      "aria-multiline": "true",
      "data-items": "items",
    });
    const items = block.items && block.items.length ? block.items : [[]];
    for (const runs of items) {
      const item = element("li");
      drawRuns(item, runs);
      if (!item.firstChild) item.appendChild(element("br"));
      list.appendChild(item);
    }
    return list;
  }

  function actionButton(block, action, text, label) {
    return element("button", {
      type: "button",
      className: "button small block-action",
      id: controlId(block, `action-${action}`),
      "data-action": action,
      "aria-label": label,
      title: label,
      text,
    });
  }

  function blockBar(block, place) {
    const name = NAMES[block.type];
    const bar = element("div", { className: "block-bar" });
    if (block.type !== "footer") {
      bar.appendChild(element("span", { className: "drag-handle", draggable: "true", title: "Drag to move", "aria-hidden": "true", text: "⠿" }));
    }
    bar.appendChild(element("span", { className: "block-name", text: `${name}${place}` }));
    const actions = element("span", { className: "block-actions" });
    actions.appendChild(actionButton(block, "select", "Style", `Style the ${name.toLowerCase()}`));
    if (block.type !== "footer") {
      actions.appendChild(actionButton(block, "up", "↑", `Move ${name.toLowerCase()} up`));
      actions.appendChild(actionButton(block, "down", "↓", `Move ${name.toLowerCase()} down`));
      actions.appendChild(actionButton(block, "duplicate", "Duplicate", `Duplicate ${name.toLowerCase()}`));
      actions.appendChild(actionButton(block, "delete", "Delete", `Delete ${name.toLowerCase()}`));
    }
    bar.appendChild(actions);
    return bar;
  }

  function imageBody(block, context) {
    const picture = element("div", { className: "picture-holder", id: controlId(block, "picture") });
    fillPicture(picture, block, context);
    const body = [picture];
    const upload = element("input", {
      id: controlId(block, "file"),
      type: "file",
      accept: "image/png,image/jpeg,image/gif,image/webp",
      "data-upload": "src",
    });
    body.push(element("div", { className: "block-field" }, [element("label", { for: upload.id, text: "Upload an image" }), upload]));
    body.push(element("p", { className: "upload-status hint", id: controlId(block, "upload-status"), role: "status" }));
    body.push(field(block, "src", "Image URL", { type: "url", placeholder: "https://", autocomplete: "off" }));
    body.push(field(block, "alt", "Alt text (required)", { type: "text", maxlength: 500, autocomplete: "off" }, "Describes the image to people who cannot see it, and where images are blocked."));
    body.push(field(block, "width", "Width in pixels", { type: "number", min: 16, max: 600, step: 1 }));
    body.push(field(block, "link", "Link when clicked (optional)", { type: "url", placeholder: "https://", autocomplete: "off" }));
    return body;
  }

  function pictureNote(text, className = "") {
    return element("p", { className: `hint picture-note ${className}`.trim(), text });
  }

  // Fill `holder` with what the canvas shows of the block's picture; an image already shown
  // from the same address is kept (its attributes updated), so typing alt text does not flicker.
  function fillPicture(holder, block, context) {
    if (!block.src) {
      holder.replaceChildren(pictureNote("No image yet: upload one, or give its address."));
      return;
    }
    const url = window.PostwireUploads.thumbnailUrl(block.src, context.uploadedImages);
    if (!url) {
      holder.replaceChildren(pictureNote("External image: it shows in the preview below, not here (the editor shows the images uploaded to Postwire)."));
      return;
    }
    let picture = holder.querySelector("img.picture");
    if (!picture || picture.getAttribute("src") !== url) {
      picture = element("img", { className: "picture", src: url, decoding: "async" });
      picture.addEventListener("error", () => {
        holder.replaceChildren(pictureNote("This image could not be shown here (it is not one of this team's uploads); the preview shows what recipients get.", "hint-warn"));
      });
    }
    picture.alt = block.alt || "";
    const width = Math.round(Number(block.width));
    if (width > 0) picture.setAttribute("width", String(width));
    else picture.removeAttribute("width");
    const parts = [picture];
    if (!block.alt) parts.push(pictureNote("Add alt text: this image has none yet.", "hint-warn picture-alt-missing"));
    holder.replaceChildren(...parts);
  }

  // Redraw the picture of `block` after its address, alt text or width changed.
  function drawPicture(block, context) {
    const holder = block && document.getElementById(controlId(block, "picture"));
    if (holder) fillPicture(holder, block, context);
  }

  function socialBody(block, context) {
    const rows = (block.links || []).map((link, index) => {
      const networkId = controlId(block, `network-${index}`);
      const urlId = controlId(block, `url-${index}`);
      const menu = element("select", { id: networkId, "data-link": index, "data-link-field": "network" });
      for (const [value, text] of Object.entries(context.networks)) {
        const option = element("option", { value, text });
        if (value === link.network) option.selected = true;
        menu.appendChild(option);
      }
      const url = element("input", { id: urlId, type: "url", value: link.url || "", "data-link": index, "data-link-field": "url", autocomplete: "off" });
      return element("li", { className: "social-row" }, [
        element("label", { for: networkId, text: `Network ${index + 1}` }),
        menu,
        element("label", { for: urlId, text: "URL" }),
        url,
        element("button", { type: "button", className: "button small", id: controlId(block, `remove-link-${index}`), "data-remove-link": index, "aria-label": `Remove link ${index + 1}`, text: "Remove" }),
      ]);
    });
    return [
      element("ul", { className: "social-list" }, rows),
      element("button", { type: "button", className: "button small", id: controlId(block, "add-link"), "data-add-link": "1", text: "Add a link" }),
    ];
  }

  function columnsBody(block, context) {
    const count = block.columns.length;
    const grid = element("div", { className: `columns-grid columns-${count}` });
    block.columns.forEach((column, index) => {
      const list = element("ol", { className: "column-list", "data-column-of": block.id, "data-column": index, "aria-label": `Column ${index + 1} of ${count}` });
      column.forEach((child, childIndex) => list.appendChild(drawBlock(child, context, ` ${childIndex + 1}`)));
      const addId = controlId(block, `add-${index}`);
      const menu = element("select", { id: addId, "data-column-add": index });
      for (const kind of context.columnBlocks) menu.appendChild(element("option", { value: kind, text: NAMES[kind] }));
      grid.appendChild(element("div", { className: "column" }, [
        list,
        element("div", { className: "column-add" }, [
          element("label", { for: addId, text: `Add to column ${index + 1}` }),
          menu,
          element("button", { type: "button", className: "button small", id: controlId(block, `add-button-${index}`), "data-column-add-button": index, text: "Add" }),
        ]),
      ]));
    });
    return [select(block, "count", "Columns", [[2, "Two"], [3, "Three"]], count), grid];
  }

  function footerBody(block, context) {
    const address = context.brand.postal_address;
    return [
      richText(block, "content", "Footer text", { className: "rich-footer", placeholder: "Optional: why people get this email, e.g. “You signed up at our shop.”" }),
      field(block, "label", "Unsubscribe link text", { type: "text", maxlength: 200, autocomplete: "off" }),
      element("p", { className: "hint footer-note" }, [
        document.createTextNode("Every email ends with the unsubscribe link and your postal address: "),
        address ? element("strong", { text: address }) : element("a", { href: "/brand", text: "set it in the brand kit" }),
        document.createTextNode("."),
      ]),
    ];
  }

  function bodyOf(block, context) {
    switch (block.type) {
      case "heading":
        return [
          select(block, "level", "Level", [[1, "Large (H1)"], [2, "Medium (H2)"], [3, "Small (H3)"]], block.level),
          richText(block, "content", "Heading text", { multiline: false, className: `rich-heading level-${block.level}` }),
        ];
      case "paragraph":
        return [richText(block, "content", "Paragraph text")];
      case "list":
        return [field(block, "ordered", "Numbered list", { type: "checkbox" }), listEditor(block)];
      case "image":
        return imageBody(block, context);
      case "button":
        return [
          field(block, "label", "Button text", { type: "text", maxlength: 200, autocomplete: "off" }),
          field(block, "url", "Button link", { type: "url", placeholder: "https://", autocomplete: "off" }),
          element("p", { className: "button-sample" }, [element("span", { className: `sample shape-${(block.style && block.style.shape) || context.brand.button_shape}`, text: block.label || "Button" })]),
        ];
      case "divider":
        return [element("hr", { className: "divider-sample" })];
      case "spacer":
        return [field(block, "height", "Height in pixels", { type: "number", min: 4, max: 160, step: 1 })];
      case "columns":
        return columnsBody(block, context);
      case "social":
        return socialBody(block, context);
      case "footer":
        return footerBody(block, context);
      default:
        return [element("p", { text: `Unknown block ${block.type}` })];
    }
  }

  function drawBlock(block, context, place = "") {
    const item = element("li", {
      className: `block block-${block.type}`,
      "data-block-id": block.id,
      id: controlId(block, "block"),
      "aria-label": NAMES[block.type] + place,
    });
    if (block.id === context.selectedId) item.classList.add("selected");
    item.appendChild(blockBar(block, place));
    const body = element("div", { className: "block-body" }, bodyOf(block, context));
    window.PostwireEditor.styles.applyBlockStyle(body, block, context);
    item.appendChild(body);
    return item;
  }

  // Draw every block of the document into `canvas`.
  function drawCanvas(canvas, doc, context) {
    const items = doc.blocks.map((block, index) => drawBlock(block, context, ` ${index + 1}`));
    canvas.replaceChildren(...items);
    window.PostwireEditor.styles.applyDocumentStyle(canvas, doc, context);
  }

  window.PostwireEditor.blocks = { drawCanvas, drawPicture, controlId, NAMES, element };
})();
