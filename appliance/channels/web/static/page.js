// What every page of the web face shares (chat, status, settings): making an element, going to the login
// page, the session's CSRF token, which the logout form posts, and posting JSON with it. Loaded before the page's own scripts.
"use strict";

window.Page = (function () {
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function toLogin() {
    window.location.replace("/login?next=" + encodeURIComponent(window.location.pathname).replace(/%2F/g, "/"));
  }

  let csrf = ""; // the session's CSRF token, once loaded

  // The session's CSRF token, also put in every logout form; "" when the session is gone (off to log in).
  async function loadCsrf() {
    const response = await fetch("/api/session", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401) {
      toLogin();
      return "";
    }
    const session = await response.json();
    csrf = session.csrf || "";
    for (const input of document.querySelectorAll('form.logout input[name="csrf"]')) input.value = csrf;
    return csrf;
  }

  // A logout sent before the token arrived: fetch it with `load` (the page's loadCsrf), then post.
  function wireLogout(load) {
    for (const form of document.querySelectorAll("form.logout")) {
      form.addEventListener("submit", (event) => {
        const input = form.querySelector('input[name="csrf"]');
        if (input.value) return;
        event.preventDefault();
        load().then(() => input.value && form.submit());
      });
    }
  }

  // Send a JSON body with the session's CSRF token (POST unless `method` says otherwise); a 403 about the token
  // fetches a fresh one and tries once more. Answers {status, ok, data}.
  async function post(url, body, method) {
    for (let attempt = 0; attempt < 2; attempt += 1) {
      if (!csrf) csrf = await loadCsrf();
      const response = await fetch(url, {
        method: method || "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify(body || {}),
      });
      let data = {};
      try {
        data = await response.json();
      } catch (err) {
        data = { error: `HTTP ${response.status}` };
      }
      if (response.status === 403 && attempt === 0 && /CSRF/.test(data.error || "")) {
        csrf = "";
        continue;
      }
      return { status: response.status, ok: response.ok, data };
    }
    return { status: 403, ok: false, data: { error: "missing or wrong CSRF token" } };
  }

  return { el, toLogin, loadCsrf, wireLogout, post };
})();
