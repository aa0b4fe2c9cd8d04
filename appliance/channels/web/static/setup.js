// The first-run setup: one card a step (password, name and place, privacy, model, Telegram), each saved through
// the API as Settings saves (errors beside their field) and each skippable. /api/setup says what is done.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const { el, post, loadCsrf, wireLogout, toLogin } = window.Page;
  const cards = [...document.querySelectorAll(".setup-card")];
  let state = {};
  let password = ""; // the owner's new password, kept in this page only, for the steps that save a secret

  function say(text, tone) {
    $("said").textContent = text;
    $("said").className = "updated" + (tone ? " tone-" + tone : "");
  }

  function show(index) {
    cards.forEach((card, i) => (card.hidden = i !== index));
    [...$("steps").children].forEach((item, i) => {
      item.classList.toggle("current", i === index);
      if (i === index) item.setAttribute("aria-current", "step");
      else item.removeAttribute("aria-current");
    });
    const first = cards[index].querySelector("input, select, a.btn");
    if (first) first.focus({ preventScroll: true });
    window.scrollTo(0, 0);
    if (cards[index].id === "step-model") loadModels();
  }

  const next = (card) => show(Math.min(cards.indexOf(card) + 1, cards.length - 1));

  // Errors beside their field: every input whose id is f-KEY (dots as dashes) has an f-KEY-error below it.
  function clearErrors(card) {
    for (const node of card.querySelectorAll(".setting-error")) {
      node.hidden = true;
      node.textContent = "";
    }
    for (const node of card.querySelectorAll("[aria-invalid]")) node.removeAttribute("aria-invalid");
  }

  function fail(card, key, data) {
    const text = data.fix ? `${data.error} (${data.fix})` : data.error || "it did not work";
    const id = key ? "f-" + key.replace(/[^A-Za-z0-9_-]/g, "-") : "";
    const slot = (id && $(id + "-error")) || card.querySelector(".setting-error[data-default]") || card.querySelector(".setting-error");
    slot.textContent = text;
    slot.hidden = false;
    const input = id && $(id);
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  }

  async function save(card, changes, keyFor) {
    clearErrors(card);
    const result = await post("/api/settings", { version: state.version, set: changes, password: password || undefined });
    if (result.ok) {
      state.version = result.data.version;
      return true;
    }
    fail(card, keyFor ? keyFor(result.data.key || "") : result.data.key, result.data);
    return false;
  }

  const number = (text) => (text.trim() === "" ? null : Number.isFinite(Number(text)) ? Number(text) : text.trim());

  // --- the steps -------------------------------------------------------------------------------

  $("f-password").addEventListener("submit", async (event) => {
    event.preventDefault();
    const card = $("step-password");
    clearErrors(card);
    if ($("password").value !== $("password2").value) return fail(card, "", { error: "the two passwords differ" });
    const result = await post("/api/setup/password", { password: $("password").value });
    if (!result.ok) return fail(card, "", result.data);
    password = $("password").value;
    await loadCsrf(); // the old sessions ended; this browser got a new one
    for (const row of [$("cloud-password-row"), $("telegram-password-row")]) row.hidden = true;
    next(card);
  });

  $("f-place").addEventListener("submit", async (event) => {
    event.preventDefault();
    const card = $("step-place");
    const latitude = number($("f-weather-latitude").value);
    const longitude = number($("f-weather-longitude").value);
    const changes = {
      "agent.name": $("f-agent-name").value.trim(),
      "scheduler.timezone": $("f-scheduler-timezone").value.trim(),
      "weather.place": $("f-weather-place").value.trim(),
      "weather.latitude": latitude,
      "weather.longitude": longitude,
    };
    if (await save(card, changes)) next(card);
  });

  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", () => ($("cloud-fields").hidden = $("mode-local").checked));
  }
  $("cloud-type").addEventListener("change", () => {
    const anthropic = $("cloud-type").value === "anthropic";
    $("f-cloud-api_base").value = anthropic ? "https://api.anthropic.com" : "https://api.openai.com/v1";
    $("f-cloud-model").value = anthropic ? "claude-3-5-haiku-latest" : "gpt-4o-mini";
  });

  $("f-privacy").addEventListener("submit", async (event) => {
    event.preventDefault();
    const card = $("step-privacy");
    if ($("mode-local").checked) {
      if (await save(card, { "routing.mode": "local_only" })) next(card);
      return;
    }
    clearErrors(card);
    const type = $("cloud-type").value;
    const body = {
      version: state.version,
      name: type,
      type,
      api_base: $("f-cloud-api_base").value.trim(),
      model: $("f-cloud-model").value.trim(),
      api_key: $("f-cloud-api_key").value.trim(),
      password: password || $("cloud-password").value,
    };
    say("asking the provider once…");
    const result = await post("/api/setup/cloud", body);
    if (!result.ok) {
      say("");
      const key = result.data.key || "";
      return fail(card, key === "password" ? "" : key.replace(/^providers\.[^.]+\./, "cloud."), result.data);
    }
    state.version = result.data.version;
    say(`${type} answered in ${result.data.answered_in_s} s: saved`, "ok");
    next(card);
  });

  let models = [];
  async function loadModels() {
    const response = await fetch("/api/models", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const doc = await response.json();
    models = doc.models.filter((m) => m.kind === "chat");
    const gb = (doc.board.mem_bytes / 2 ** 30).toFixed(1);
    $("model-board").textContent = `This board: ${doc.board.name || "unknown"}, ${gb} GB of memory, ${doc.board.cores} cores. auto picks ${doc.auto}.`;
    $("model-list").replaceChildren(
      ...models.map((m, i) => {
        const row = el("div", "setting-bool setup-model");
        const radio = el("input");
        Object.assign(radio, { type: "radio", name: "model", id: `model-${i}`, value: m.name, checked: m.running });
        const fits = m.fits === false ? "does not fit here" : m.fits ? "fits" : "fit unknown";
        const speed = m.here_tps ? `, about ${Math.round(m.here_tps)} tokens/s here` : m.pi5_tps ? `, about ${Math.round(m.pi5_tps)} tokens/s on a Pi 5` : "";
        const size = m.size_bytes ? `${(m.size_bytes / 2 ** 20).toFixed(0)} MB` : "";
        const label = el("label", "", `${m.name}: ${size}${speed}; ${fits}${m.installed ? "; installed" : ""}`);
        label.htmlFor = radio.id;
        row.append(radio, label);
        return row;
      }),
    );
  }

  async function followPull(name, card) {
    $("model-progress").hidden = false;
    for (;;) {
      const status = await (await fetch("/api/status", { credentials: "same-origin", cache: "no-store" })).json();
      const pull = status.model.pull;
      if (status.model.name === name || (pull && pull.name === name && pull.state === "done")) {
        $("model-bar").value = 100;
        $("model-progress-text").textContent = `${name} is in use.`;
        return next(card);
      }
      if (pull && pull.total_bytes) {
        $("model-bar").value = Math.round((100 * pull.done_bytes) / pull.total_bytes);
        const mb = (n) => (n / 2 ** 20).toFixed(0);
        $("model-progress-text").textContent = `${pull.state} ${name}: ${mb(pull.done_bytes)} of ${mb(pull.total_bytes)} MB`;
      } else {
        $("model-progress-text").textContent = pull && pull.message ? pull.message : `getting ${name} ready…`;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  $("f-model").addEventListener("submit", async (event) => {
    event.preventDefault();
    const card = $("step-model");
    const chosen = card.querySelector('input[name="model"]:checked');
    if (!chosen) return fail(card, "", { error: "choose a model, or skip" });
    if (await save(card, { "llm.model": chosen.value }, () => "")) followPull(chosen.value, card);
  });

  let polling = 0;
  $("f-telegram").addEventListener("submit", async (event) => {
    event.preventDefault();
    const card = $("step-telegram");
    clearErrors(card);
    const token = $("f-telegram-token").value.trim();
    const check = await post("/api/setup/telegram/check", { token });
    if (!check.ok) return fail(card, "telegram.token", check.data);
    password = password || $("telegram-password").value;
    if (!(await save(card, { "telegram.enabled": true, "telegram.token": token }))) return;
    const pairing = await post("/api/setup/telegram/pairing", {});
    if (!pairing.ok) return fail(card, "telegram.token", pairing.data);
    $("pairing-link").href = pairing.data.link;
    $("pairing-link").textContent = pairing.data.link;
    $("pairing-qr").src = "data:image/svg+xml;base64," + btoa(pairing.data.qr_svg);
    $("pairing").hidden = false;
    $("telegram-go").hidden = true;
    clearInterval(polling);
    polling = setInterval(async () => {
      const response = await fetch("/api/setup/telegram/pairing", { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      const found = await response.json();
      if (found.paired) {
        clearInterval(polling);
        $("pairing-state").textContent = `paired with ${found.users.join(", ")}: your messages reach it now.`;
        $("done-text").textContent = "Telegram is connected. Everything you skipped is in Settings.";
        setTimeout(() => next(card), 800);
      }
    }, 1000);
  });

  for (const button of document.querySelectorAll("[data-skip]")) {
    button.addEventListener("click", () => next(button.closest(".setup-card")));
  }

  // --- start -----------------------------------------------------------------------------------

  async function load() {
    const response = await fetch("/api/setup", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401) return toLogin();
    state = await response.json();
    if (!response.ok) return say(state.error || `HTTP ${response.status}`, "bad");
    $("steps").replaceChildren(...cards.map((card) => el("li", "", card.dataset.step)));
    $("f-agent-name").value = state.name || "";
    $("f-scheduler-timezone").value = state.timezone || Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    $("f-weather-place").value = state.place.name || "";
    $("f-weather-latitude").value = state.place.latitude ?? "";
    $("f-weather-longitude").value = state.place.longitude ?? "";
    say(state.first_run ? "first start: a few steps, each can be skipped" : "every step can be done again here or in Settings");
    show(state.first_run ? 0 : 1);
  }

  wireLogout(loadCsrf);
  loadCsrf();
  load();
})();
