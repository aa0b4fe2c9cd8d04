// The Settings tabs that are not config keys: access (the password, API tokens and their scopes, the signed-in
// browsers) and updates (the running release, the last result, the rollback button). settings.js calls
// window.SettingsExtra[tab](pane) after it drew the tab's forms.
"use strict";

window.SettingsExtra = (function () {
  const { el, post } = window.Page;

  function card(title) {
    const node = el("section", "card settings-card");
    node.append(el("h3", "card-title", title));
    return node;
  }

  function row(label, type, id) {
    const wrap = el("div", "setting");
    const input = el("input", "input");
    Object.assign(input, { type, id, autocomplete: type === "password" ? "new-password" : "off" });
    const name = el("label", "setting-label", label);
    name.htmlFor = id;
    wrap.append(name, input);
    return { wrap, input };
  }

  function note() {
    const node = el("p", "row-note");
    node.setAttribute("role", "status");
    node.hidden = true;
    return node;
  }

  function tell(node, result, ok) {
    const d = result.data || {};
    node.textContent = result.ok ? ok(d) : d.fix ? `${d.error} (${d.fix})` : d.error || `HTTP ${result.status}`;
    node.className = "row-note tone-" + (result.ok ? "ok" : "bad");
    node.hidden = false;
  }

  function button(label, kind, onClick) {
    const node = el("button", "btn " + kind, label);
    node.type = "button";
    node.addEventListener("click", onClick);
    return node;
  }

  async function access(pane) {
    const response = await fetch("/api/access", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const doc = await response.json();

    const password = card("Password");
    const current = row("Current password", "password", "access-current");
    const fresh = row("New password", "password", "access-new");
    const said = note();
    password.append(current.wrap, fresh.wrap, button("Change the password", "btn-primary", async () => {
      const result = await post("/api/access/password", { current: current.input.value, password: fresh.input.value });
      tell(said, result, () => "changed: every other browser is signed out");
    }), said);

    const tokens = card("API tokens");
    tokens.append(el("p", "setting-help", "Programs use these (Authorization: Bearer pat_...). A token is shown once."));
    const list = el("ul", "items");
    for (const t of doc.tokens) {
      const item = el("li", "item row3");
      const select = el("select", "input");
      select.setAttribute("aria-label", `scope of ${t.name}`);
      for (const scope of Object.keys(doc.scopes)) select.append(Object.assign(el("option", "", scope), { value: scope }));
      select.value = t.scope;
      const told = note();
      select.addEventListener("change", async () =>
        tell(told, await post(`/api/access/tokens/${encodeURIComponent(t.name)}`, { scope: select.value }), (d) => `now ${d.scope}`),
      );
      const used = t.last_used_at ? `last used ${new Date(t.last_used_at * 1000).toLocaleString()}` : "never used";
      const text = el("div", "token-text");
      text.append(el("span", "item-title", t.name), el("span", "item-line", used));
      item.append(text, select,
        button("Revoke", "btn-small btn-ghost", async () => {
          if (!window.confirm(`Revoke ${t.name}? What uses it is refused from now on.`)) return;
          const result = await post(`/api/access/tokens/${encodeURIComponent(t.name)}`, {}, "DELETE");
          tell(told, result, () => "revoked");
          if (result.ok) item.remove();
        }), told);
      list.append(item);
    }
    const name = row("New token's name", "text", "access-token-name");
    const scope = el("select", "input");
    scope.setAttribute("aria-label", "its scope");
    for (const [key, help] of Object.entries(doc.scopes)) {
      scope.append(Object.assign(el("option", "", `${key}: ${help}`), { value: key }));
    }
    const made = note();
    tokens.append(list, name.wrap, scope, button("Make a token", "btn-primary", async () => {
      const result = await post("/api/access/tokens", { name: name.input.value, scope: scope.value });
      tell(made, result, (d) => `${d.name} (${d.scope}): ${d.token} — copy it now, it is not shown again`);
    }), made);

    const sessions = card("Signed-in browsers");
    const ended = note();
    sessions.append(el("p", "", `${doc.sessions} browser${doc.sessions === 1 ? "" : "s"} signed in, this one included.`),
      button("Sign out every other browser", "btn-ghost", async () =>
        tell(ended, await post("/api/access/sessions/end", {}), (d) => `${d.ended} signed out`)), ended);
    pane.append(password, tokens, sessions);
  }

  async function updates(pane) {
    const response = await fetch("/api/update", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const doc = await response.json();
    const box = card("Updates");
    const status = doc.update;
    if (!status) {
      box.append(el("p", "", "This appliance runs from a checkout (make run), not an installed release: updates come with git here."));
    } else {
      const last = status.last ? `${status.last.result} (${status.last.version}, ${status.last.at || ""})` : "none yet";
      box.append(
        el("p", "", `Running ${status.version}; kept: ${status.releases.join(", ")}.`),
        el("p", "", `Last update: ${last}.`),
      );
      const said = note();
      box.append(button("Roll back to the previous release", "btn-ghost", async () => {
        if (!window.confirm("Roll back? The appliance restarts on the previous release.")) return;
        tell(said, await post("/api/update/rollback", {}), (d) => `rolling back to ${d.rolling_back_to}: it restarts in a moment`);
      }), said);
      if (doc.rollback_requested) box.append(el("p", "setting-help", "A rollback is under way."));
    }
    box.append(el("p", "setting-help", "Updates are pushed from your computer with make ota (README: Updates over the air)."));
    pane.append(box);
  }

  async function saveDevice(name, definition) {
    const settings = await (await fetch("/api/settings", { credentials: "same-origin", cache: "no-store" })).json();
    return post("/api/settings", { version: settings.version, set: { [`devices.${name}`]: definition } });
  }

  // The devices tab: an I2C bus scanned as i2cdetect does, each part found offered with its driver, tried once
  // and added; then Home Assistant's entities not yet devices.
  function scan(pane) {
    const box = card("Find parts on the I2C bus");
    box.append(el("p", "setting-help", "Probes each address the way i2cdetect does; an address a driver holds is reported busy and not touched."));
    const bus = row("Bus", "text", "scan-bus");
    bus.input.value = "1";
    bus.input.inputMode = "numeric";
    const list = el("ul", "items");
    const said = note();
    box.append(bus.wrap, button("Scan", "btn-primary", async () => {
      said.hidden = true;
      list.replaceChildren();
      const response = await fetch(`/api/devices/scan?bus=${encodeURIComponent(bus.input.value)}`, { credentials: "same-origin", cache: "no-store" });
      const doc = await response.json();
      if (!response.ok) return tell(said, { ok: false, status: response.status, data: doc }, () => "");
      const rows = doc.addresses.filter((r) => r.state !== "absent" || r.configured);
      tell(said, { ok: true, data: doc }, () => (rows.length ? `bus ${doc.bus}: ${rows.length} address(es) answered` : `nothing answered on bus ${doc.bus}`));
      for (const r of rows) list.append(scanRow(doc.bus, r));
    }), said, list);
    pane.prepend(box);
  }

  function scanRow(bus, r) {
    const item = el("li", "item scan-row");
    const text = el("div", "token-text");
    const what = r.configured ? `configured: ${r.configured}` : r.drivers.length ? `could be ${r.drivers.join(" or ")}` : "no driver knows this address";
    text.append(el("span", "item-title", `${r.hex}: ${r.state}`), el("span", "item-line", r.detail || what));
    item.append(text);
    if (r.state !== "found" || r.configured || !r.drivers.length) return item;
    const driver = r.drivers[0];
    const name = row(`Name for the ${driver} at ${r.hex}`, "text", `scan-name-${r.address}`);
    name.input.value = `${driver}_${r.hex.slice(2)}`;
    const room = row("Room", "text", `scan-room-${r.address}`);
    const told = note();
    const definition = () => ({ driver, bus, address: r.address, room: room.input.value.trim() });
    item.append(name.wrap, room.wrap,
      button("Try it", "btn-small btn-ghost", async () => {
        const result = await post("/api/devices/try", definition());
        tell(told, result, (d) => d.readings.map((x) => `${x.quantity} ${x.value}${x.unit ? " " + x.unit : ""}`).join(", ") || d.action);
      }),
      button("Add", "btn-small btn-primary", async () => {
        const result = await saveDevice(name.input.value.trim(), definition());
        tell(told, result, (d) => (d.restart_needed.length ? "added: in use after a restart" : `added: ${name.input.value.trim()} is in use`));
      }),
      told);
    return item;
  }

  async function devices(pane) {
    await offered(pane);
    scan(pane);
  }

  // Home Assistant's entities and what others announce on the MQTT broker, not yet devices: one button each.
  async function offered(pane) {
    const response = await fetch("/api/devices/offered", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const doc = await response.json();
    const sources = [
      ["From Home Assistant", doc.homeassistant, (e) => ({ driver: "homeassistant", entity: e.entity }), (e) => `${e.entity} (${e.kind})`],
      ["From the MQTT broker", doc.mqtt, (e) => e.device, (e) => `${e.topic} (${e.kind})`],
    ];
    for (const [title, things, definition, where] of sources) {
      if (!things) continue;
      const box = card(title);
      const fresh = things.filter((e) => !e.configured);
      box.append(el("p", "setting-help", fresh.length ? "Things of the kinds picoagent drives, not yet devices here." : "Every thing of the kinds picoagent drives is a device here already."));
      const list = el("ul", "items");
      for (const thing of fresh) {
        const item = el("li", "item row3");
        const text = el("div", "token-text");
        text.append(el("span", "item-title", thing.name), el("span", "item-line", where(thing)));
        const told = note();
        item.append(text, button(`Add as ${thing.suggested}`, "btn-small btn-primary", async () => {
          const result = await saveDevice(thing.suggested, definition(thing));
          tell(told, result, (d) => (d.restart_needed.length ? "added: in use after a restart" : "added"));
        }), told);
        list.append(item);
      }
      box.append(list);
      pane.prepend(box);
    }
  }

  // The model tab: the catalog with what fits this board; "Use" saves llm.model, and the daemon downloads it in
  // the background and switches (its progress is /api/status model.pull, shown here until it is in use).
  async function model(pane) {
    const response = await fetch("/api/models", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const doc = await response.json();
    const box = card("Models");
    const gb = (doc.board.mem_bytes / 2 ** 30).toFixed(1);
    box.append(el("p", "setting-help", `This board: ${doc.board.name || "unknown"}, ${gb} GB. Running: ${doc.running}; auto picks ${doc.auto}.`));
    const list = el("ul", "items");
    const progress = el("p", "row-note");
    progress.setAttribute("role", "status");
    progress.hidden = true;
    for (const m of doc.models.filter((row) => row.kind === "chat")) {
      const item = el("li", "item row3");
      const text = el("div", "token-text");
      const speed = m.here_tps ? `about ${Math.round(m.here_tps)} tokens/s here; ` : m.pi5_tps ? `about ${Math.round(m.pi5_tps)} tokens/s on a Pi 5; ` : "";
      const fits = m.fits === false ? "does not fit here" : m.fits ? "fits" : "fit unknown";
      text.append(el("span", "item-title", m.name + (m.running ? " (running)" : "")),
        el("span", "item-line", `${(m.size_bytes / 2 ** 20).toFixed(0)} MB; ${speed}${fits}${m.installed ? "; installed" : ""}`));
      const use = button("Use", "btn-small btn-ghost", async () => {
        const settings = await (await fetch("/api/settings", { credentials: "same-origin", cache: "no-store" })).json();
        const result = await post("/api/settings", { version: settings.version, set: { "llm.model": m.name } });
        tell(progress, result, () => `${m.name}: getting it ready…`);
        if (result.ok) follow(m.name, progress);
      });
      use.disabled = m.running || m.fits === false;
      item.append(text, use);
      list.append(item);
    }
    box.append(list, progress);
    pane.append(box);
  }

  async function follow(name, progress) {
    for (let i = 0; i < 7200; i += 1) {
      const status = await (await fetch("/api/status", { credentials: "same-origin", cache: "no-store" })).json();
      const pull = status.model.pull;
      if (status.model.name === name) {
        progress.textContent = `${name} is in use.`;
        return;
      }
      if (pull && pull.total_bytes) {
        const pct = Math.round((100 * pull.done_bytes) / pull.total_bytes);
        progress.textContent = `${pull.state} ${name}: ${pct}%`;
      } else if (pull && pull.message) {
        progress.textContent = pull.message;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  // The tools tab's skills: each with where it came from and how often it was used; one installed from a
  // public repository is shown first (its SKILL.md, what it requires, the commit) and installed only on Confirm.
  async function skills(pane) {
    const response = await fetch("/api/skills", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const doc = await response.json();
    const box = card("Skills");
    const list = el("ul", "items");
    for (const skill of doc.skills) {
      const item = el("li", "item row3");
      const text = el("div", "token-text");
      const from = skill.source ? `from ${skill.source} at ${skill.commit.slice(0, 7)}` : "written here";
      const used = skill.uses ? `used ${skill.uses} time(s)` : "not used yet";
      text.append(el("span", "item-title", skill.name), el("span", "item-line", `${skill.description} — ${from}; ${used}`));
      const told = note();
      item.append(text);
      if (skill.source) {
        item.append(button("Remove", "btn-small btn-ghost", async () => {
          if (!window.confirm(`Remove the skill ${skill.name}?`)) return;
          const result = await post(`/api/skills/${encodeURIComponent(skill.name)}`, {}, "DELETE");
          tell(told, result, () => "removed");
          if (result.ok) item.remove();
        }));
      }
      item.append(told);
      list.append(item);
    }
    const source = row("Install from a public repository: OWNER/REPO/PATH", "text", "skill-source");
    const said = note();
    const preview = el("div", "skill-preview");
    preview.hidden = true;
    box.append(list, source.wrap, button("Look at it first", "btn-ghost", async () => {
      preview.hidden = true;
      const result = await post("/api/skills/install", { source: source.input.value.trim() });
      if (!result.ok) return tell(said, result, () => "");
      const d = result.data;
      said.hidden = true;
      const skillMd = el("pre", "skill-md", d.skill_md);
      const needs = d.requires.length ? `requires ${d.requires.join(", ")}` : "requires no other skill";
      preview.replaceChildren(
        el("p", "", `${d.name} at ${d.commit.slice(0, 7)} (${d.files.length} file(s)); ${needs}.`),
        skillMd,
        button("Confirm and install", "btn-primary", async () => {
          const done = await post("/api/skills/install", { source: d.source, commit: d.commit, confirm: true });
          tell(said, done, (x) => `installed ${x.name}: the assistant can load it now`);
        }),
      );
      preview.hidden = false;
    }), preview, said);
    pane.append(box);
  }

  // The memory tab: what it remembers (newest first, or found by meaning and keyword), each edited or
  // forgotten; "everything about X" shown before it goes; the export; the conversations.
  async function memory(pane) {
    const box = card("What it remembers");
    const search = row("Find (by meaning and by words)", "text", "memory-query");
    const list = el("ul", "items");
    const said = note();
    const show = async () => {
      const q = search.input.value.trim();
      const response = await fetch(`/api/memory${q ? `?q=${encodeURIComponent(q)}` : ""}`, { credentials: "same-origin", cache: "no-store" });
      const doc = await response.json();
      if (!response.ok) return tell(said, { ok: false, status: response.status, data: doc }, () => "");
      said.hidden = true;
      list.replaceChildren(...doc.memories.map(memoryRow));
      if (!doc.memories.length) tell(said, { ok: true, data: {} }, () => (q ? "nothing found" : "nothing remembered yet"));
    };
    const about = row("Forget everything about", "text", "memory-about");
    const preview = el("div", "skill-preview");
    const forgot = note();
    const exports = el("p", "");
    for (const [label, format] of [["MEMORY.md", "md"], ["JSON", "json"]]) {
      const link = el("a", "btn btn-small btn-ghost", `Export ${label}`);
      link.href = `/api/memory/export?format=${format}`;
      link.download = format === "md" ? "MEMORY.md" : "memory.json";
      exports.append(link, " ");
    }
    box.append(search.wrap, button("Find", "btn-ghost", show), said, list, about.wrap,
      button("Show what would go", "btn-ghost", async () => {
        const result = await post("/api/memory/forget", { about: about.input.value });
        if (!result.ok) return tell(forgot, result, () => "");
        const found = result.data.would_forget;
        preview.replaceChildren(el("p", "", found.length ? `${found.length} memor${found.length === 1 ? "y" : "ies"} about it:` : "nothing about it"),
          ...found.map((m) => el("p", "setting-help", m.text)));
        if (found.length) {
          preview.append(button(`Forget these ${found.length}`, "btn-primary", async () => {
            const done = await post("/api/memory/forget", { about: about.input.value, ids: found.map((m) => m.id), token: result.data.token, confirm: true });
            tell(forgot, done, (d) => `${d.deleted} forgotten`);
            preview.replaceChildren();
            show();
          }));
        }
      }), preview, forgot, exports);
    pane.append(box);
    show();
    conversations(pane);
  }

  function memoryRow(m) {
    const item = el("li", "item row3");
    const text = el("div", "token-text");
    text.append(el("span", "item-title", m.text), el("span", "item-line", `${m.kind}, from ${m.source}${m.channel ? ` (${m.channel} ${m.chat_id})` : ""}, ${new Date(m.created_at * 1000).toLocaleDateString()}`));
    const told = note();
    const edit = el("input", "input");
    edit.value = m.text;
    edit.setAttribute("aria-label", `new text for memory ${m.id}`);
    edit.hidden = true;
    const editing = button("Edit", "btn-small btn-ghost", async () => {
      if (edit.hidden) {
        edit.hidden = false;
        editing.textContent = "Save";
        return edit.focus();
      }
      const result = await post(`/api/memory/${m.id}`, { text: edit.value }, "PATCH");
      tell(told, result, () => "saved");
      if (result.ok) {
        text.firstChild.textContent = result.data.text;
        m.id = result.data.id;
        edit.hidden = true;
        editing.textContent = "Edit";
      }
    });
    const actions = el("div", "settings-foot");
    actions.append(editing, button("Forget", "btn-small btn-ghost", async () => {
      const result = await post(`/api/memory/${m.id}`, {}, "DELETE");
      tell(told, result, () => "forgotten");
      if (result.ok) item.remove();
    }));
    item.append(text, edit, actions, told);
    return item;
  }

  async function conversations(pane) {
    const response = await fetch("/api/conversations", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const box = card("Conversations");
    const list = el("ul", "items");
    for (const c of (await response.json()).conversations) {
      const item = el("li", "item row3");
      const text = el("div", "token-text");
      text.append(el("span", "item-title", `${c.channel} ${c.chat_id}`), el("span", "item-line", `${c.messages} message(s), begun ${new Date(c.created_at * 1000).toLocaleString()}`));
      const told = note();
      item.append(text, button("Delete", "btn-small btn-ghost", async () => {
        if (!window.confirm("Delete this conversation's messages? What was remembered from it stays.")) return;
        const result = await post(`/api/conversations/${c.id}`, {}, "DELETE");
        tell(told, result, () => "deleted");
        if (result.ok) item.remove();
      }), told);
      list.append(item);
    }
    box.append(list);
    pane.append(box);
  }

  return { access, updates, devices, memory, "model and routing": model, "tools and tasks": skills };
})();
