// What every page of the web face shares (chat.html, status.html): making an element, going to the login
// page, and the session's CSRF token, which the logout form posts. Loaded before the page's own scripts.
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

  // The session's CSRF token, also put in every logout form; "" when the session is gone (off to log in).
  async function loadCsrf() {
    const response = await fetch("/api/session", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401) {
      toLogin();
      return "";
    }
    const session = await response.json();
    const csrf = session.csrf || "";
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

  return { el, toLogin, loadCsrf, wireLogout };
})();
