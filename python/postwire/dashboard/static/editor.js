// The broadcast editor page: wires the model (editor-model.js), the canvas (editor-blocks.js),
// rich text (editor-text.js) and the inspector (editor-styles.js) to the page, and autosaves
// the document as the broadcast's draft (POST /broadcasts/<id>/document, JSON, CSRF header).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const E = window.PostwireEditor;
  const dataNode = document.getElementById("editor-data");
  if (!dataNode) return;
  const data = JSON.parse(dataNode.textContent);
  const canvas = document.getElementById("canvas");
  const status = document.getElementById("save-status");
  const announcer = document.getElementById("editor-announce");
  const envelope = document.getElementById("envelope");
  const frame = document.getElementById("preview-frame");
  const contactInput = document.getElementById("preview-contact");
  const model = new E.DocumentModel(data.document, data.defaults, data.column_blocks);
  const context = {
    brand: data.brand,
    networks: data.networks,
    columnBlocks: data.column_blocks,
    blockStyles: data.block_styles,
    documentStyles: data.document_styles,
    fonts: data.fonts,
    fontNames: data.font_names,
    shapes: data.shapes,
    alignments: data.alignments,
    languages: data.languages,
    rightToLeft: new Set(data.right_to_left),
    defaultPadding: data.default_padding,
    uploadedImages: data.uploaded_images,
    selectedId: null,
    refused: [], // the values the last save kept as saved, marked where they are
  };
  const TYPING_STEP_MS = 800;
  const csrf = envelope.dataset.csrf;

  function announce(message) {
    announcer.textContent = "";
    window.setTimeout(() => { announcer.textContent = message; }, 30);
  }

  // --- drawing ------------------------------------------------------------------------------

  function blockOf(node) {
    const item = node && node.closest ? node.closest("[data-block-id]") : null;
    return item ? item.dataset.blockId : null;
  }

  function redraw(focusId = null) {
    const active = document.activeElement;
    const keep = focusId || (active && canvas.contains(active) ? active.id : null);
    E.blocks.drawCanvas(canvas, model.doc, context);
    drawInspector();
    updateHistoryButtons();
    markRefused();
    if (keep) {
      const target = document.getElementById(keep);
      if (target) target.focus();
    }
  }

  function drawInspector() {
    const block = context.selectedId ? model.find(context.selectedId) : null;
    if (!block) context.selectedId = null;
    E.styles.drawInspector(document.getElementById("block-style"), document.getElementById("document-style"), model.doc, block, context);
  }

  function select(id) {
    if (context.selectedId === id) return;
    context.selectedId = id;
    for (const item of canvas.querySelectorAll(".block.selected")) item.classList.remove("selected");
    const item = id ? document.getElementById(E.blocks.controlId({ id }, "block")) : null;
    if (item) item.classList.add("selected");
    drawInspector();
  }

  function updateHistoryButtons() {
    document.querySelector("[data-command=undo]").setAttribute("aria-disabled", String(!model.canUndo()));
    document.querySelector("[data-command=redo]").setAttribute("aria-disabled", String(!model.canRedo()));
  }

  // --- typing: the model follows the page; one history step per pause --------------------------

  let typingTimer = null;
  function typed() {
    window.clearTimeout(typingTimer);
    typingTimer = window.setTimeout(finishTyping, TYPING_STEP_MS);
    scheduleSave();
  }
  function finishTyping() {
    window.clearTimeout(typingTimer);
    typingTimer = null;
    if (model.record()) updateHistoryButtons();
  }

  function readRich(editable) {
    const block = model.find(blockOf(editable));
    if (!block) return;
    if (editable.dataset.items) {
      // One item a line; text the browser left outside any line (all lines deleted) is one.
      const lines = editable.querySelectorAll(":scope > li");
      const items = [...lines].map((item) => E.text.readRuns(item));
      block.items = items.length ? items : [E.text.readRuns(editable)];
    } else {
      block[editable.dataset.runs] = E.text.readRuns(editable);
    }
  }

  function setField(input) {
    const block = model.find(blockOf(input));
    if (!block) return false;
    const key = input.dataset.field;
    if (input.type === "checkbox") block[key] = input.checked;
    else if (input.type === "number" || key === "level") {
      if (input.value === "") return false;
      block[key] = Number(input.value);
    } else block[key] = input.value;
    return true;
  }

  canvas.addEventListener("input", (event) => {
    const target = event.target;
    if (target.isContentEditable || target.dataset.runs || target.dataset.items) {
      const editable = target.closest("[data-runs], [data-items]");
      if (editable) readRich(editable);
      typed();
      return;
    }
    if (target.dataset.field && target.tagName === "INPUT" && target.type !== "checkbox") {
      if (setField(target)) typed();
      if (["src", "alt", "width"].includes(target.dataset.field)) E.blocks.drawPicture(model.find(blockOf(target)), context);
      return;
    }
    if (target.dataset.linkField) {
      const block = model.find(blockOf(target));
      block.links[Number(target.dataset.link)][target.dataset.linkField] = target.value;
      typed();
    }
  });

  canvas.addEventListener("change", (event) => {
    const target = event.target;
    if (target.dataset.upload) {
      upload(target);
      return;
    }
    const block = model.find(blockOf(target));
    if (!block) return;
    if (target.dataset.field === "count") {
      setColumnCount(block, Number(target.value));
    } else if (target.dataset.field && (target.tagName === "SELECT" || target.type === "checkbox")) {
      setField(target);
    } else if (target.dataset.linkField === "network") {
      block.links[Number(target.dataset.link)].network = target.value;
    } else {
      finishTyping(); // a text field left: its typing is one step of the history
      return;
    }
    model.changed("structure");
    redraw(target.id);
  });

  // An image chosen from the computer: uploaded to Postwire, which serves it to mail clients.
  async function upload(input) {
    const block = model.find(blockOf(input));
    const file = input.files && input.files[0];
    if (!block || !file) return;
    const note = (text) => {
      const node = document.getElementById(E.blocks.controlId(block, "upload-status"));
      if (node) node.textContent = text;
    };
    note("Uploading…");
    const form = new FormData();
    form.append("file", file);
    try {
      const answer = await fetch("/broadcasts/images", {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf },
        body: form,
      });
      const reply = await answer.json().catch(() => ({}));
      if (!answer.ok || !reply.url) {
        note(`Not uploaded: ${reply.error || `the server answered ${answer.status}`}`);
        return;
      }
      block.src = reply.url;
      if (reply.width) block.width = Math.max(16, Math.min(600, Number(reply.width)));
      model.changed("structure");
      redraw(E.blocks.controlId(block, "alt"));
      note(`Uploaded ${file.name}. Now describe it in the alt text.`);
    } catch (error) {
      note("Not uploaded: Postwire could not be reached.");
    }
  }

  function setColumnCount(block, count) {
    const columns = block.columns;
    while (columns.length < count) columns.push([]);
    while (columns.length > count) {
      const last = columns.pop();
      columns[columns.length - 1].push(...last);
    }
  }

  // Pasted text comes in as plain text: no markup from elsewhere gets into a document.
  canvas.addEventListener("paste", (event) => {
    if (!event.target.closest || !event.target.closest("[contenteditable=true]")) return;
    event.preventDefault();
    const text = (event.clipboardData && event.clipboardData.getData("text/plain")) || "";
    document.execCommand("insertText", false, text);
  });

  // Enter in a heading would split it: the next line is a new paragraph instead.
  canvas.addEventListener("keydown", (event) => {
    const editable = event.target.closest && event.target.closest("[data-runs]");
    if (!editable || event.key !== "Enter" || event.shiftKey) return;
    if (editable.getAttribute("aria-multiline") === "false") {
      event.preventDefault();
      finishTyping();
      const block = model.add("paragraph", { afterId: blockOf(editable), empty: true });
      redraw(E.blocks.controlId(block, "content"));
    }
  });

  // --- block actions ------------------------------------------------------------------------

  function act(action, id) {
    finishTyping();
    const block = model.find(id);
    if (!block) return;
    const name = E.blocks.NAMES[block.type];
    const keep = document.activeElement ? document.activeElement.id : null;
    if (action === "select") {
      select(id);
      const first = document.querySelector("#block-style select, #block-style input");
      if (first) first.focus();
      return;
    }
    if (action === "up" || action === "down") {
      if (model.move(id, action === "up" ? -1 : 1)) announce(`${name} moved ${action}.`);
      else announce(`${name} is already at the ${action === "up" ? "top" : "bottom"}.`);
      redraw(keep);
      return;
    }
    if (action === "duplicate") {
      const copy = model.duplicate(id);
      if (copy) announce(`${name} duplicated.`);
      redraw(copy ? E.blocks.controlId(copy, "action-duplicate") : keep);
      return;
    }
    if (action === "delete") {
      const next = model.remove(id);
      announce(`${name} deleted. Undo brings it back.`);
      if (context.selectedId === id) context.selectedId = null;
      redraw(next ? E.blocks.controlId({ id: next }, "action-select") : null);
    }
  }

  canvas.addEventListener("click", (event) => {
    const target = event.target.closest("button");
    if (!target || !canvas.contains(target)) return;
    const id = blockOf(target);
    if (target.dataset.action) {
      act(target.dataset.action, id);
      return;
    }
    const block = model.find(id);
    if (target.dataset.addLink) {
      block.links.push({ network: "website", url: "https://" });
      model.changed("structure");
      redraw(E.blocks.controlId(block, `url-${block.links.length - 1}`));
    } else if (target.dataset.removeLink !== undefined) {
      block.links.splice(Number(target.dataset.removeLink), 1);
      model.changed("structure");
      redraw(E.blocks.controlId(block, "add-link"));
    } else if (target.dataset.columnAddButton !== undefined) {
      const index = Number(target.dataset.columnAddButton);
      const kind = document.getElementById(E.blocks.controlId(block, `add-${index}`)).value;
      const added = model.add(kind, { list: block.columns[index] });
      announce(`${E.blocks.NAMES[kind]} added to column ${index + 1}.`);
      redraw(E.blocks.controlId(added, "action-select"));
    }
  });

  canvas.addEventListener("focusin", (event) => {
    const id = blockOf(event.target);
    if (id) select(id);
  });

  // --- the palette: add after the selected block, or drag into place ------------------------------

  function addBlock(kind, beforeId = null) {
    finishTyping();
    const selected = context.selectedId ? model.locate(context.selectedId) : null;
    let block;
    if (beforeId !== null) {
      block = model.add(kind, { beforeId });
    } else if (selected && selected.parent && !context.columnBlocks.includes(kind)) {
      block = model.add(kind, { afterId: selected.parent.id });
    } else {
      block = model.add(kind, { afterId: selected ? context.selectedId : null });
    }
    announce(`${E.blocks.NAMES[kind]} added.`);
    context.selectedId = block.id;
    const first = ["heading", "paragraph", "footer"].includes(kind) ? "content" : kind === "list" ? "items" : "action-select";
    redraw(E.blocks.controlId(block, first));
    return block;
  }

  const palette = document.querySelectorAll("[data-add]");
  for (const button of palette) button.addEventListener("click", () => addBlock(button.dataset.add));
  E.installDragAndDrop(canvas, palette, model, {
    blockOf,
    onAdd: addBlock,
    onMove(id, beforeId, list) {
      finishTyping();
      if (model.moveTo(id, beforeId, list)) announce(`${E.blocks.NAMES[model.find(id).type]} moved.`);
      redraw(E.blocks.controlId({ id }, "action-select"));
    },
  });

  // --- formatting, fields and history ---------------------------------------------------------------

  const commands = new E.text.TextCommands(canvas);

  function afterFormatting(editable) {
    const rich = editable.closest("[data-runs], [data-items]");
    if (rich) readRich(rich);
    finishTyping();
    scheduleSave();
  }

  function format(kind) {
    const editable = commands.format(kind);
    if (editable) afterFormatting(editable);
    else if (commands.refusal) announce(commands.refusal);
  }

  for (const button of document.querySelectorAll("[data-format]")) {
    button.addEventListener("mousedown", (event) => event.preventDefault()); // keep the selection
    button.addEventListener("click", () => format(button.dataset.format));
  }

  const fieldMenu = document.getElementById("insert-field-name");
  for (const name of data.fields) {
    fieldMenu.appendChild(E.blocks.element("option", { value: name, text: name.replace(/^contact\./, "") }));
  }

  function insertField() {
    const fallback = document.getElementById("insert-field-fallback").value;
    const editable = commands.insertChip(fieldMenu.value, fallback);
    if (!editable) {
      announce("Put the cursor in a text first.");
      return;
    }
    afterFormatting(editable);
    announce(`Field ${fieldMenu.value} inserted.`);
  }

  function undo() {
    finishTyping();
    if (model.undo()) announce("Undone.");
    scheduleSave();
    redraw();
  }

  function redo() {
    finishTyping();
    if (model.redo()) announce("Redone.");
    scheduleSave();
    redraw();
  }

  document.querySelector("[data-command=undo]").addEventListener("click", undo);
  document.querySelector("[data-command=redo]").addEventListener("click", redo);
  document.querySelector("[data-command=insert-field]").addEventListener("click", insertField);

  document.getElementById("editor").addEventListener("keydown", (event) => {
    const mod = event.ctrlKey || event.metaKey;
    const key = event.key.toLowerCase();
    if (mod && !event.altKey && key === "z") {
      event.preventDefault();
      if (event.shiftKey) redo();
      else undo();
    } else if (mod && !event.altKey && key === "y") {
      event.preventDefault();
      redo();
    } else if (mod && !event.altKey && ["b", "i", "k"].includes(key) && event.target.isContentEditable) {
      event.preventDefault();
      format({ b: "bold", i: "italic", k: "link" }[key]);
    } else if (event.altKey && !mod && (event.key === "ArrowUp" || event.key === "ArrowDown")) {
      const id = blockOf(event.target);
      if (!id || !canvas.contains(event.target)) return;
      event.preventDefault();
      act(event.key === "ArrowUp" ? "up" : "down", id);
    }
  });

  // --- the inspector ---------------------------------------------------------------------------

  const inspector = document.getElementById("inspector");
  function styleTarget(scope) {
    if (scope === "document") {
      model.doc.style = model.doc.style || {};
      return model.doc.style;
    }
    const block = model.find(context.selectedId);
    if (!block) return null;
    block.style = block.style || {};
    return block.style;
  }

  inspector.addEventListener("change", (event) => {
    const input = event.target;
    const key = input.dataset.styleKey;
    const style = key ? styleTarget(input.dataset.styleScope) : null;
    if (!style) return;
    if (input.value === "") delete style[key];
    else style[key] = key === "padding" ? Math.max(0, Math.min(64, Number(input.value))) : input.value;
    model.changed("style");
    redraw(input.id);
  });

  inspector.addEventListener("click", (event) => {
    const button = event.target.closest("[data-style-reset]");
    if (!button) return;
    const style = styleTarget(button.dataset.styleScope);
    if (!style) return;
    delete style[button.dataset.styleReset];
    model.changed("style");
    redraw(button.id);
  });

  // --- the envelope: name, subject, preview text, from, reply-to ---------------------------------------

  function envelopeValues() {
    const values = {};
    for (const input of envelope.querySelectorAll("[data-envelope]")) values[input.dataset.envelope] = input.value;
    return values;
  }

  function lengthHint(input) {
    const hint = document.getElementById(input.getAttribute("aria-describedby"));
    const base = hint.dataset.base || hint.textContent;
    hint.dataset.base = base;
    const length = input.value.length;
    const low = Number(input.dataset.hintMin);
    const high = Number(input.dataset.hintMax);
    const verdict = length === 0 ? "" : length < low ? " (short)" : length > high ? " (may be cut off)" : " (good length)";
    hint.textContent = `${length} characters${verdict}. ${base}`;
    hint.classList.toggle("hint-warn", length > high);
  }

  for (const input of envelope.querySelectorAll("[data-envelope]")) {
    input.addEventListener("input", () => {
      if (input.dataset.hintMin) lengthHint(input);
      scheduleSave();
    });
    if (input.dataset.hintMin) lengthHint(input);
  }

  // --- values a save refused: marked where they are ---------------------------------------------

  const ENVELOPE_NAMES = {
    name: "the name",
    subject: "the subject",
    preview_text: "the preview text",
    from: "the from address",
    reply_to: "the reply-to",
  };

  function describeRefusal(refusal) {
    if (refusal.field !== "document") return ENVELOPE_NAMES[refusal.field] || refusal.field;
    const block = refusal.block_id ? model.find(refusal.block_id) : null;
    return block ? `the ${E.blocks.NAMES[block.type].toLowerCase()}` : "the document";
  }

  // The control that holds a refused value: an envelope field, a block's field, the block, or
  // the canvas for the document as a whole.
  function refusedControl(refusal) {
    if (refusal.field !== "document") return envelope.querySelector(`[data-envelope="${refusal.field}"]`);
    if (!refusal.block_id) return canvas;
    const block = { id: refusal.block_id };
    const control = refusal.block_field && document.getElementById(E.blocks.controlId(block, refusal.block_field));
    return control || document.getElementById(E.blocks.controlId(block, "block"));
  }

  function unmark() {
    for (const node of document.querySelectorAll(".field-error[data-refusal]")) node.remove();
    for (const node of document.querySelectorAll("[data-refused]")) {
      node.removeAttribute("aria-invalid");
      const described = (node.getAttribute("aria-describedby") || "").split(" ").filter((id) => id && !id.startsWith("refusal-"));
      if (described.length) node.setAttribute("aria-describedby", described.join(" "));
      else node.removeAttribute("aria-describedby");
      node.classList.remove("refused");
      delete node.dataset.refused;
    }
  }

  // Each refused value: its control marked invalid, the reason in words beside it and named by
  // the control's description, so a screen reader says it on focus.
  function markRefused() {
    unmark();
    context.refused.forEach((refusal, index) => {
      const control = refusedControl(refusal);
      if (!control) return;
      const id = `refusal-${index}`;
      const message = E.blocks.element("p", { className: "field-error", id, "data-refusal": "1", text: refusal.error });
      if (control === canvas) canvas.before(message);
      else if (control.classList.contains("block")) control.querySelector(".block-body").prepend(message);
      else if (control.closest(".form-row")) control.closest(".form-row").appendChild(message);
      else (control.closest(".block-field, .social-row") || control).after(message);
      control.classList.add("refused");
      control.dataset.refused = "1";
      if (control.matches("input, select, [role=textbox]")) {
        control.setAttribute("aria-invalid", "true");
        const described = control.getAttribute("aria-describedby");
        control.setAttribute("aria-describedby", described ? `${described} ${id}` : id);
      }
    });
  }

  // --- autosave and the preview ---------------------------------------------------------------------

  const previewNote = document.getElementById("preview-stale");

  // The preview shows the saved broadcast: it says so when the editor holds newer edits.
  function updatePreviewNote() {
    if (!saver.ahead()) {
      previewNote.hidden = true;
      return;
    }
    const since = saver.savedAt ? `the version saved at ${saver.savedAt}` : "the last saved version";
    let text = `This preview shows ${since}, older than the editor: your newest edits are not in it yet.`;
    if (saver.refused.length && !saver.dirty && !saver.inFlight) {
      const names = saver.refused.map(describeRefusal).join(", ");
      text = `This preview shows ${since}, older than the editor: it does not have your changes to ${names}, which could not be saved.`;
    }
    previewNote.textContent = text;
    previewNote.hidden = false;
  }

  const saver = new E.Autosave({
    url: `/broadcasts/${data.broadcast_id}/document`,
    csrf,
    revision: data.revision,
    status,
    body: (revision) => JSON.stringify({ document: model.doc, revision, ...envelopeValues() }),
    onSaved(refused) {
      context.refused = refused;
      markRefused();
      refreshPreview();
    },
    onState: () => updatePreviewNote(),
    describe: describeRefusal,
  });
  function scheduleSave() {
    saver.schedule();
  }

  function refreshPreview() {
    const contact = contactInput.value.trim();
    frame.src = `/broadcasts/${data.broadcast_id}/preview${contact ? `?contact=${encodeURIComponent(contact)}` : ""}`;
  }

  model.onChange(() => scheduleSave());

  redraw();
});
