// Drag and drop in the broadcast editor's canvas: a block by its handle, or a new block from a
// palette entry. Either lands before the block under the pointer (after it, in its lower half).
"use strict";

window.PostwireEditor = window.PostwireEditor || {};

(() => {
  // `blockOf(node)`: the id of the block holding a node; `onMove(id, beforeId, list)` and
  // `onAdd(kind, beforeId)` make the change (`beforeId` null: at the end of `list`).
  function installDragAndDrop(canvas, palette, model, { blockOf, onMove, onAdd }) {
    let dragged = null;

    for (const button of palette) {
      button.addEventListener("dragstart", (event) => {
        event.dataTransfer.setData("text/plain", `new:${button.dataset.add}`);
        event.dataTransfer.effectAllowed = "copy";
      });
    }

    canvas.addEventListener("dragstart", (event) => {
      const handle = event.target.closest && event.target.closest(".drag-handle");
      if (!handle) return;
      dragged = blockOf(handle);
      event.dataTransfer.setData("text/plain", `move:${dragged}`);
      event.dataTransfer.effectAllowed = "move";
      const item = handle.closest(".block");
      event.dataTransfer.setDragImage(item, 16, 16);
      item.classList.add("dragging");
    });

    function clearDropMarks() {
      for (const item of canvas.querySelectorAll(".drop-before, .drop-after")) {
        item.classList.remove("drop-before", "drop-after");
      }
    }

    // Where a drop at this point lands: before which block, in which list.
    function dropPlace(event) {
      const item = event.target.closest && event.target.closest(".block");
      if (!item || !canvas.contains(item)) return { beforeId: null, item: null, after: false };
      const box = item.getBoundingClientRect();
      const after = event.clientY > box.top + box.height / 2;
      const id = item.dataset.blockId;
      if (!after) return { beforeId: id, item, after };
      const located = model.locate(id);
      const next = located.list[located.index + 1];
      return { beforeId: next ? next.id : null, item, after, list: located.list };
    }

    canvas.addEventListener("dragover", (event) => {
      event.preventDefault();
      clearDropMarks();
      const place = dropPlace(event);
      if (place.item) place.item.classList.add(place.after ? "drop-after" : "drop-before");
    });
    canvas.addEventListener("dragleave", (event) => {
      if (!canvas.contains(event.relatedTarget)) clearDropMarks();
    });
    canvas.addEventListener("dragend", () => {
      clearDropMarks();
      for (const item of canvas.querySelectorAll(".dragging")) item.classList.remove("dragging");
      dragged = null;
    });
    canvas.addEventListener("drop", (event) => {
      event.preventDefault();
      clearDropMarks();
      const payload = event.dataTransfer.getData("text/plain") || (dragged ? `move:${dragged}` : "");
      const place = dropPlace(event);
      // Past the last block of the document: before the footer, which stays last.
      const footer = model.doc.blocks[model.doc.blocks.length - 1];
      const inColumn = place.list && place.list !== model.doc.blocks;
      const beforeId = place.beforeId || (inColumn ? null : footer.id);
      if (payload.startsWith("new:")) onAdd(payload.slice(4), beforeId);
      else if (payload.startsWith("move:")) onMove(payload.slice(5), beforeId, place.list || null);
      dragged = null;
    });
  }

  window.PostwireEditor.installDragAndDrop = installDragAndDrop;
})();
