// Passkeys: the browser's side of WebAuthn. A button
//   <button class="hidden" data-passkey="register|login" data-options-url="/..." data-form="form-id">
// asks the server for options (POST, CSRF token in a header), calls
// navigator.credentials.create or .get with them, puts the browser's answer (JSON with
// base64url fields) in the form's hidden "credential" input and submits the form, so the
// server answers with an ordinary page. Errors are written into
// <p data-passkey-error="form-id">.
"use strict";

(() => {
  const toBytes = (base64url) => {
    const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
    const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  };

  const toBase64url = (buffer) => {
    let text = "";
    for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
    return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  };

  const descriptors = (list) =>
    (list || []).map((descriptor) => ({ ...descriptor, id: toBytes(descriptor.id) }));

  const creationOptions = (options) => ({
    ...options,
    challenge: toBytes(options.challenge),
    user: { ...options.user, id: toBytes(options.user.id) },
    excludeCredentials: descriptors(options.excludeCredentials),
  });

  const requestOptions = (options) => ({
    ...options,
    challenge: toBytes(options.challenge),
    allowCredentials: descriptors(options.allowCredentials),
  });

  const credentialJson = (credential) => {
    const response = credential.response;
    const common = {
      id: credential.id,
      rawId: toBase64url(credential.rawId),
      type: credential.type,
      authenticatorAttachment: credential.authenticatorAttachment,
      clientExtensionResults: credential.getClientExtensionResults(),
    };
    if (response.attestationObject) {
      return {
        ...common,
        response: {
          clientDataJSON: toBase64url(response.clientDataJSON),
          attestationObject: toBase64url(response.attestationObject),
          transports: response.getTransports ? response.getTransports() : [],
        },
      };
    }
    return {
      ...common,
      response: {
        clientDataJSON: toBase64url(response.clientDataJSON),
        authenticatorData: toBase64url(response.authenticatorData),
        signature: toBase64url(response.signature),
        userHandle: response.userHandle ? toBase64url(response.userHandle) : null,
      },
    };
  };

  const run = async (button) => {
    const form = document.getElementById(button.dataset.form);
    const error = document.querySelector(`[data-passkey-error="${button.dataset.form}"]`);
    if (error) error.textContent = "";
    button.disabled = true;
    try {
      const answer = await fetch(button.dataset.optionsUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": form.elements.csrf_token.value },
      });
      if (!answer.ok) throw new Error((await answer.text()) || "The server refused.");
      const options = await answer.json();
      const credential =
        button.dataset.passkey === "register"
          ? await navigator.credentials.create({ publicKey: creationOptions(options) })
          : await navigator.credentials.get({ publicKey: requestOptions(options) });
      form.elements.credential.value = JSON.stringify(credentialJson(credential));
      form.submit();
    } catch (failure) {
      if (error) error.textContent = `No passkey was used: ${failure.message || failure}`;
      button.disabled = false;
    }
  };

  document.addEventListener("DOMContentLoaded", () => {
    if (!window.PublicKeyCredential) return; // the buttons stay hidden
    for (const button of document.querySelectorAll("button[data-passkey]")) {
      button.classList.remove("hidden");
      button.addEventListener("click", () => run(button));
    }
  });
})();
