// Pictures uploaded to Postwire are served to mail clients at `<api.public_url>/images/<id>.<ext>`.
// The dashboard's policy loads images from its own origin only, so its pages show an upload
// through the team's GET /broadcasts/images/<id>; any other address gives null.
"use strict";

window.PostwireUploads = (() => {
  const UPLOADED_NAME = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.(png|jpg|gif|webp)$/i;

  // `prefix`: where uploads are served, `<api.public_url>/images/`.
  function thumbnailUrl(src, prefix) {
    if (!prefix || !src || !src.startsWith(prefix)) return null;
    const match = UPLOADED_NAME.exec(src.slice(prefix.length));
    return match ? `/broadcasts/images/${match[1].toLowerCase()}` : null;
  }

  return { thumbnailUrl };
})();
