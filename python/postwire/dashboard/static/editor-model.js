// The broadcast editor's document model: the block tree, its history (undo and redo) and the
// operations the page offers (add, move, duplicate, delete). No DOM here: editor.js draws.
"use strict";

window.PostwireEditor = window.PostwireEditor || {};

(() => {
  const HISTORY_LIMIT = 200;

  let counter = 0;
  function newId() {
    counter += 1;
    return "b" + Date.now().toString(36) + counter.toString(36) + Math.random().toString(36).slice(2, 6);
  }

  function clone(value) {
    return JSON.parse(JSON.stringify(value));
  }

  // Every block of a tree gets a fresh id (a duplicate must not share ids with its source).
  function withFreshIds(block) {
    const copy = clone(block);
    const renew = (item) => {
      item.id = newId();
      if (Array.isArray(item.columns)) {
        for (const column of item.columns) column.forEach(renew);
      }
    };
    renew(copy);
    return copy;
  }

  class DocumentModel {
    // `defaults`: a new block's JSON by type; `columnBlocks`: the types a column may hold.
    constructor(document, defaults, columnBlocks) {
      this.doc = clone(document);
      this.defaults = defaults;
      this.columnBlocks = columnBlocks;
      this.history = [JSON.stringify(this.doc)];
      this.position = 0;
      this.listeners = [];
    }

    onChange(listener) {
      this.listeners.push(listener);
    }

    emit(kind) {
      for (const listener of this.listeners) listener(kind);
    }

    // Keep the current state as a step of the history (nothing if it did not change).
    record() {
      const state = JSON.stringify(this.doc);
      if (state === this.history[this.position]) return false;
      this.history = this.history.slice(0, this.position + 1);
      this.history.push(state);
      if (this.history.length > HISTORY_LIMIT) this.history.shift();
      this.position = this.history.length - 1;
      return true;
    }

    canUndo() {
      return this.position > 0;
    }

    canRedo() {
      return this.position < this.history.length - 1;
    }

    undo() {
      if (!this.canUndo()) return false;
      this.position -= 1;
      this.doc = JSON.parse(this.history[this.position]);
      this.emit("structure");
      return true;
    }

    redo() {
      if (!this.canRedo()) return false;
      this.position += 1;
      this.doc = JSON.parse(this.history[this.position]);
      this.emit("structure");
      return true;
    }

    // A change the page made (a block's field, a style): recorded at once.
    changed(kind = "content") {
      this.record();
      this.emit(kind);
    }

    // Where block `id` is: the list holding it, its index, and the columns block around it.
    locate(id, list = this.doc.blocks, parent = null) {
      for (let index = 0; index < list.length; index += 1) {
        const block = list[index];
        if (block.id === id) return { list, index, block, parent };
        if (Array.isArray(block.columns)) {
          for (const column of block.columns) {
            const found = this.locate(id, column, block);
            if (found) return found;
          }
        }
      }
      return null;
    }

    find(id) {
      const found = this.locate(id);
      return found ? found.block : null;
    }

    // The last index a block may take in `list`: the footer stays last of the document.
    lastIndex(list) {
      const footer = list.findIndex((block) => block.type === "footer");
      return footer === -1 ? list.length : footer;
    }

    newBlock(type) {
      const template = this.defaults[type];
      if (!template) throw new Error("unknown block type " + type);
      return withFreshIds(template);
    }

    // Add a block of `type` before block `beforeId` or after block `afterId` (in its list),
    // else at the end of `list`; `empty`: without the default's sample text.
    add(type, { afterId = null, beforeId = null, list = null, empty = false } = {}) {
      const block = this.newBlock(type);
      if (empty && Array.isArray(block.content)) block.content = [];
      let target = list || this.doc.blocks;
      let index = this.lastIndex(target);
      const anchor = this.locate(beforeId || afterId || "");
      if (anchor && beforeId) {
        target = anchor.list;
        index = Math.min(anchor.index, this.lastIndex(target));
      } else if (anchor && anchor.block.type !== "footer") {
        target = anchor.list;
        index = anchor.index + 1;
      }
      if (target !== this.doc.blocks && !this.columnBlocks.includes(type)) {
        target = this.doc.blocks;
        index = this.lastIndex(target);
      }
      target.splice(index, 0, block);
      this.changed("structure");
      return block;
    }

    movable(id) {
      const found = this.locate(id);
      return found && found.block.type !== "footer" ? found : null;
    }

    // Move block `id` by `step` (-1 up, +1 down) within its list; false when it cannot go.
    move(id, step) {
      const found = this.movable(id);
      if (!found) return false;
      const target = found.index + step;
      if (target < 0 || target >= this.lastIndex(found.list)) return false;
      found.list.splice(found.index, 1);
      found.list.splice(target, 0, found.block);
      this.changed("structure");
      return true;
    }

    // Move block `id` to sit before block `beforeId` (or at the end of `list` when null).
    moveTo(id, beforeId, list = null) {
      const found = this.movable(id);
      if (!found || id === beforeId) return false;
      let target = list || this.doc.blocks;
      if (beforeId) {
        const before = this.locate(beforeId);
        if (!before) return false;
        target = before.list;
      }
      if (target !== this.doc.blocks && !this.columnBlocks.includes(found.block.type)) return false;
      if (found.block.columns && found.block.columns.some((column) => column === target)) return false;
      found.list.splice(found.index, 1);
      let index = beforeId ? target.findIndex((block) => block.id === beforeId) : this.lastIndex(target);
      index = Math.min(index, this.lastIndex(target));
      target.splice(index, 0, found.block);
      this.changed("structure");
      return true;
    }

    duplicate(id) {
      const found = this.movable(id);
      if (!found) return null;
      const copy = withFreshIds(found.block);
      found.list.splice(found.index + 1, 0, copy);
      this.changed("structure");
      return copy;
    }

    // Delete block `id`; returns the id of the block to focus next (or null).
    remove(id) {
      const found = this.movable(id);
      if (!found) return null;
      found.list.splice(found.index, 1);
      const next = found.list[found.index] || found.list[found.index - 1] || found.parent;
      this.changed("structure");
      return next ? next.id : null;
    }
  }

  window.PostwireEditor.DocumentModel = DocumentModel;
  window.PostwireEditor.clone = clone;
})();
