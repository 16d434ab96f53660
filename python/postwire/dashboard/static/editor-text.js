// Rich text of the broadcast editor: a block's runs ({text, bold, italic, link}) drawn into a
// contenteditable element and read back from it. Only these marks and personalization chips
// survive the trip: the browser's own markup is never stored.
"use strict";

window.PostwireEditor = window.PostwireEditor || {};

(() => {
  // docs/templates.md's grammar: {{{ name | fallback }}}.
  const PLACEHOLDER = /\{\{\{[ \t]*([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)[ \t]*(?:\|([^{}\r\n]*))?\}\}\}/g;
  const INVISIBLE = /[\u200b\ufeff]/g;

  function placeholder(field, fallback) {
    const clean = (fallback || "").replace(/[{}\r\n]/g, "").trim();
    return clean ? `{{{${field}|${clean}}}}` : `{{{${field}}}}`;
  }

  function chipLabel(field, fallback) {
    const name = field.replace(/^contact\./, "");
    return fallback ? `${name} | ${fallback}` : name;
  }

  // A chip: one uneditable unit of the text, standing for a placeholder.
  function makeChip(field, fallback) {
    const chip = document.createElement("span");
    chip.className = "chip";
    chip.contentEditable = "false";
    chip.dataset.field = field;
    chip.dataset.fallback = fallback || "";
    chip.textContent = chipLabel(field, fallback);
    chip.title = `Personalized: ${placeholder(field, fallback)}`;
    return chip;
  }

  function appendText(parent, text) {
    const lines = text.split("\n");
    lines.forEach((line, index) => {
      if (index > 0) parent.appendChild(document.createElement("br"));
      if (line) parent.appendChild(document.createTextNode(line));
    });
  }

  // A run's text with its placeholders as chips.
  function appendWithChips(parent, text) {
    let last = 0;
    for (const match of text.matchAll(PLACEHOLDER)) {
      appendText(parent, text.slice(last, match.index));
      parent.appendChild(makeChip(match[1], (match[2] || "").trim()));
      last = match.index + match[0].length;
    }
    appendText(parent, text.slice(last));
  }

  function runText(run) {
    // A field run ({"field", "fallback"}) is drawn as the placeholder it renders as.
    if (typeof run.field === "string" && run.field) return placeholder(run.field, run.fallback || "");
    return typeof run.text === "string" ? run.text : "";
  }

  function drawRuns(element, runs) {
    element.replaceChildren();
    for (const run of runs || []) {
      let target = element;
      if (run.link) {
        const anchor = document.createElement("a");
        anchor.href = run.link;
        target.appendChild(anchor);
        target = anchor;
      }
      if (run.bold) {
        const strong = document.createElement("strong");
        target.appendChild(strong);
        target = strong;
      }
      if (run.italic) {
        const em = document.createElement("em");
        target.appendChild(em);
        target = em;
      }
      appendWithChips(target, runText(run));
    }
  }

  function sameMarks(a, b) {
    return !!a.bold === !!b.bold && !!a.italic === !!b.italic && (a.link || "") === (b.link || "");
  }

  function withMarks(run, marks) {
    if (marks.bold) run.bold = true;
    if (marks.italic) run.italic = true;
    if (marks.link) run.link = marks.link;
    return run;
  }

  function pushRun(runs, text, marks) {
    if (!text) return;
    const last = runs[runs.length - 1];
    if (last && last.field === undefined && sameMarks(last, marks)) {
      last.text += text;
      return;
    }
    runs.push(withMarks({ text }, marks));
  }

  // A personalization chip is a run of its own: {"field", "fallback"} and the marks around it.
  function pushField(runs, field, fallback, marks) {
    const run = { field };
    if (fallback) run.fallback = fallback;
    runs.push(withMarks(run, marks));
  }

  const BLOCK_ELEMENTS = new Set(["DIV", "P", "LI", "H1", "H2", "H3"]);

  function walk(node, marks, runs) {
    for (const child of node.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        pushRun(runs, child.nodeValue.replace(INVISIBLE, "").replace(/\u00a0/g, " "), marks);
        continue;
      }
      if (child.nodeType !== Node.ELEMENT_NODE) continue;
      if (child.classList.contains("chip")) {
        pushField(runs, child.dataset.field, child.dataset.fallback, marks);
        continue;
      }
      const tag = child.tagName;
      if (tag === "BR") {
        pushRun(runs, "\n", marks);
        continue;
      }
      const inner = { ...marks };
      const weight = child.style && child.style.fontWeight;
      if (tag === "B" || tag === "STRONG" || weight === "bold" || Number(weight) >= 600) inner.bold = true;
      if (tag === "I" || tag === "EM" || (child.style && child.style.fontStyle === "italic")) inner.italic = true;
      if (tag === "A" && child.getAttribute("href")) inner.link = child.getAttribute("href");
      // A line the browser made a block of (Enter in some editors) is a line break here.
      if (BLOCK_ELEMENTS.has(tag) && runs.length && !runs[runs.length - 1].text.endsWith("\n")) {
        pushRun(runs, "\n", marks);
      }
      walk(child, inner, runs);
    }
  }

  function readRuns(element) {
    const runs = [];
    walk(element, {}, runs);
    // No trailing line break (the browser keeps a <br> at the end of an edited line).
    const last = runs[runs.length - 1];
    if (last && last.field === undefined) {
      last.text = last.text.replace(/\n+$/, "");
      if (!last.text) runs.pop();
    }
    return runs;
  }

  function editableOf(node) {
    const element = node.nodeType === Node.ELEMENT_NODE ? node : node.parentElement;
    return element && element.closest ? element.closest("[contenteditable=true]") : null;
  }

  // Formatting and chips at the caret of a rich text inside `root`. The caret's last place is
  // kept while focus is on the toolbar, so its buttons act where the person was typing.
  class TextCommands {
    constructor(root) {
      this.savedRange = null;
      this.refusal = "";
      document.addEventListener("selectionchange", () => {
        const selection = document.getSelection();
        if (!selection.rangeCount) return;
        const range = selection.getRangeAt(0);
        const editable = editableOf(range.startContainer);
        if (editable && root.contains(editable)) this.savedRange = range.cloneRange();
      });
    }

    // Put the caret back where it was; the rich text it is in, or null.
    restoreSelection() {
      if (!this.savedRange) return null;
      const editable = editableOf(this.savedRange.startContainer);
      if (!editable || !document.contains(editable)) return null;
      editable.focus();
      const selection = document.getSelection();
      selection.removeAllRanges();
      selection.addRange(this.savedRange);
      return editable;
    }

    // Bold, italic or link the selection; the rich text changed, or null with `refusal` saying
    // why (empty when the person cancelled the link's address).
    format(kind) {
      this.refusal = "Select some text in a block first.";
      const active = document.activeElement;
      const editable = active && active.isContentEditable ? active : this.restoreSelection();
      if (!editable) return null;
      // The live selection, not `savedRange`: "selectionchange" is dispatched later, so a key
      // pressed right after a selection was made would otherwise act on the one before it.
      const selection = document.getSelection();
      const range = selection.rangeCount ? selection.getRangeAt(0).cloneRange() : null;
      document.execCommand("styleWithCSS", false, false);
      if (kind === "link") {
        if (!range || range.collapsed) return null;
        const url = window.prompt("Link address (https://… or mailto:…)", "https://");
        this.refusal = "";
        if (!url) return null;
        editable.focus();
        selection.removeAllRanges();
        selection.addRange(range);
        document.execCommand("createLink", false, url.trim());
      } else {
        document.execCommand(kind);
      }
      return editable;
    }

    // A chip for `field` at the caret; the rich text changed, or null (no caret in a text).
    insertChip(field, fallback) {
      const editable = this.restoreSelection();
      if (!editable) return null;
      const chip = makeChip(field, fallback.replace(/[{}\r\n]/g, "").trim());
      const selection = document.getSelection();
      const range = selection.getRangeAt(0);
      range.deleteContents();
      range.insertNode(chip);
      range.setStartAfter(chip);
      range.collapse(true);
      selection.removeAllRanges();
      selection.addRange(range);
      return editable;
    }
  }

  window.PostwireEditor.text = { drawRuns, readRuns, makeChip, placeholder, PLACEHOLDER, TextCommands };
})();
