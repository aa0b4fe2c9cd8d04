// The Settings page: every form is made from /api/settings, which describes the config schema's own fields
// (their words, types, ranges and choices), so a new key needs no code here. A form sends only what was
// changed, with the version it was read at; an error comes back with its key and is shown beside that field;
// a save made elsewhere meanwhile is a 409 with what changed, and nothing is lost silently.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const { el, post, loadCsrf, wireLogout, toLogin } = window.Page;

  let version = "";
  let current = "";

  const idOf = (key) => "f-" + key.replace(/[^A-Za-z0-9_-]/g, "-");

  function say(text, tone) {
    $("said").textContent = text;
    $("said").className = "updated" + (tone ? " tone-" + tone : "");
  }

  // --- one field ------------------------------------------------------------------------------

  function shown(row, value) {
    if (value === null || value === undefined) return "";
    if (row.type === "list") return value.join("\n");
    return String(value);
  }

  // What the person typed, as the config wants it: numbers as numbers, an empty optional as null.
  function parse(row, raw) {
    if (row.type === "list") {
      const items = raw.split("\n").map((s) => s.trim()).filter(Boolean);
      return row.item === "integer" ? items.map((s) => (/^-?\d+$/.test(s) ? Number(s) : s)) : items;
    }
    const text = raw.trim();
    if (text === "" && (row.optional || row.type === "integer" || row.type === "number")) return null;
    if ((row.also || []).includes(text)) return text;
    if ((row.type === "integer" || row.type === "number") && text !== "" && Number.isFinite(Number(text))) {
      return Number(text);
    }
    return row.type === "text" || row.type === "choice" ? raw : text;
  }

  function input(row) {
    let node;
    if (row.type === "bool") {
      node = el("input", "switch-input");
      node.type = "checkbox";
      node.checked = Boolean(row.value);
    } else if (row.type === "choice" && !(row.also || []).length) {
      node = el("select", "input");
      if (row.required && row.value === undefined) node.append(el("option", "", "choose…"));
      for (const choice of row.choices) {
        const option = el("option", "", choice === null ? "" : choice);
        option.value = String(choice);
        node.append(option);
      }
      node.value = shown(row, row.value);
    } else if (row.type === "list") {
      node = el("textarea", "input");
      node.rows = 3;
      node.value = shown(row, row.value);
    } else {
      node = el("input", "input");
      node.type = row.secret ? "password" : "text";
      if (row.type === "integer" || row.type === "number") node.inputMode = row.also ? "text" : "decimal";
      if (row.secret) {
        node.autocomplete = "new-password";
        node.placeholder = row.set ? "set: type to replace" : "not set";
      } else {
        node.value = shown(row, row.value);
        if (row.value === undefined && row.default !== undefined) node.placeholder = shown(row, row.default);
      }
    }
    node.id = idOf(row.key);
    return node;
  }

  // A row of the form: label, control, the field's words, and the place its error goes.
  function field(row, form) {
    const wrap = el("div", "setting");
    const control = input(row);
    const label = el("label", "setting-label", row.label);
    label.htmlFor = control.id;
    const help = el("p", "setting-help", row.doc + (row.expected ? ` (${row.expected})` : ""));
    help.id = control.id + "-help";
    const error = el("p", "setting-error");
    error.id = control.id + "-error";
    error.hidden = true;
    control.setAttribute("aria-describedby", `${help.id} ${error.id}`);
    if (row.type === "bool") {
      const line = el("div", "setting-bool");
      line.append(control, label);
      wrap.append(line, help, error);
    } else {
      wrap.append(label, control, help, error);
    }
    const initial = row.type === "bool" ? control.checked : control.value;
    const entry = {
      row,
      changed: () => (row.type === "bool" ? control.checked !== initial : control.value !== initial),
      value: () => (row.type === "bool" ? control.checked : parse(row, control.value)),
      fail(text) {
        error.textContent = text;
        error.hidden = !text;
        control.setAttribute("aria-invalid", text ? "true" : "false");
      },
      control,
    };
    if (row.secret) control.addEventListener("input", () => form.needsPassword());
    form.entries.set(row.key, entry);
    return wrap;
  }

  // --- a form: fields, groups and collections -----------------------------------------------

  function rows(list, form, into) {
    for (const row of list) {
      if (row.type === "group") {
        const set = el("fieldset", "setting-group");
        set.append(el("legend", "", row.label));
        if (row.doc) set.append(el("p", "setting-help", row.doc));
        rows(row.fields, form, set);
        into.append(set);
      } else if (row.type === "collection") {
        into.append(collection(row));
      } else if (row.type === "mapping") {
        into.append(el("p", "setting-help", `${row.label}: edit it in the config file`));
      } else {
        into.append(field(row, form));
      }
    }
  }

  function makeForm(title, doc, build, send) {
    const card = el("section", "card settings-card");
    const head = el("h3", "card-title", title);
    card.append(head);
    if (doc) card.append(el("p", "setting-help", doc));
    const node = el("form", "settings-form");
    node.noValidate = true;
    const form = { entries: new Map(), node };
    const pass = el("div", "setting settings-password");
    const passInput = el("input", "input");
    passInput.type = "password";
    passInput.autocomplete = "current-password";
    passInput.id = idOf(`${title}-password-${Math.random().toString(36).slice(2, 7)}`);
    const passLabel = el("label", "setting-label", "Your web password (needed to change a secret)");
    passLabel.htmlFor = passInput.id;
    pass.append(passLabel, passInput);
    pass.hidden = true;
    form.needsPassword = () => {
      pass.hidden = false;
    };
    form.password = () => passInput.value;
    build(form, node);
    const foot = el("div", "settings-foot");
    const button = el("button", "btn btn-primary", "Save");
    button.type = "submit";
    const note = el("p", "row-note");
    note.setAttribute("role", "status");
    note.hidden = true;
    foot.append(button, note);
    node.append(pass, foot);
    node.addEventListener("submit", async (event) => {
      event.preventDefault();
      button.disabled = true;
      try {
        await send(form, note);
      } finally {
        button.disabled = false;
      }
    });
    card.append(node);
    return card;
  }

  function noteSaved(note, data) {
    const parts = [];
    if (!data.changed.length) parts.push("Saved: nothing was different.");
    if (data.applied.length) parts.push(`Saved and applied: ${data.applied.join(", ")}.`);
    if (data.restart_needed.length) {
      parts.push(`Saved; after a restart: ${data.restart_needed.join(", ")}${data.refused ? ` (${data.refused})` : ""}.`);
    }
    note.textContent = parts.join(" ");
    note.className = "row-note tone-" + (data.restart_needed.length ? "warn" : "ok");
    note.hidden = false;
  }

  // Send {key: value}; errors go beside their field (``keyFor`` maps the answer's key to the form's).
  async function save(form, note, changes, keyFor) {
    for (const entry of form.entries.values()) entry.fail("");
    note.hidden = true;
    if (!Object.keys(changes).length) {
      note.textContent = "Nothing changed.";
      note.className = "row-note";
      note.hidden = false;
      return false;
    }
    const body = { version, set: changes };
    if (form.password()) body.password = form.password();
    let result;
    try {
      result = await post("/api/settings", body);
    } catch (err) {
      note.textContent = "cannot reach the appliance: " + err.message;
      note.className = "row-note tone-bad";
      note.hidden = false;
      return false;
    }
    const data = result.data || {};
    if (result.ok) {
      version = data.version;
      noteSaved(note, data);
      loadAudit();
      return true;
    }
    if (result.status === 409) {
      $("conflict-text").textContent = data.error;
      $("conflict").hidden = false;
      $("conflict").scrollIntoView({ block: "nearest" });
    }
    const entry = data.key ? form.entries.get(keyFor ? keyFor(data.key) : data.key) : null;
    const text = data.fix ? `${data.error} (${data.fix})` : data.error || `HTTP ${result.status}`;
    if (entry) {
      entry.fail(text);
      entry.control.focus();
    } else {
      note.textContent = text;
      note.className = "row-note tone-bad";
      note.hidden = false;
    }
    return false;
  }

  function sectionForm(row) {
    const list = row.type === "group" ? row.fields : [row];
    return makeForm(row.label, row.type === "group" ? row.doc : "", (form, node) => rows(list, form, node), (form, note) => {
      const changes = {};
      for (const [key, entry] of form.entries) if (entry.changed()) changes[key] = entry.value();
      return save(form, note, changes);
    });
  }

  const hidden = (entry) => entry.control.closest(".setting").hidden; // a field another driver reads

  // A device's form shows the fields of its driver only (row.by_driver: driver -> the keys it reads).
  function byDriver(row, form) {
    if (!row.by_driver) return;
    const driver = [...form.entries.entries()].find(([key]) => key.endsWith(".driver"));
    if (!driver) return;
    const control = driver[1].control;
    const apply = () => {
      const keep = row.by_driver[control.value] || ["driver"];
      for (const [key, entry] of form.entries) {
        const last = key.split(".").pop();
        if (last === "name" && key.includes(".NAME.")) continue;
        entry.control.closest(".setting").hidden = !keep.includes(last);
      }
    };
    control.addEventListener("change", apply);
    apply();
  }

  // A map of named entries (devices, providers, webhooks): each entry's form, a remove button, an add form.
  function collection(row) {
    const box = el("div", "settings-collection");
    box.append(el("h3", "card-title", row.label), el("p", "setting-help", row.doc));
    for (const [name, fields] of Object.entries(row.entries)) {
      const item = el("details", "settings-entry");
      item.append(el("summary", "", name));
      const card = makeForm(name, "", (form, node) => {
        rows(fields, form, node);
        byDriver(row, form);
      }, (form, note) => {
        const changes = {};
        for (const [key, entry] of form.entries) if (entry.changed() && !hidden(entry)) changes[key] = entry.value();
        return save(form, note, changes);
      });
      card.className = "settings-subform";
      const remove = el("button", "btn btn-small btn-ghost", `Remove ${name}`);
      remove.type = "button";
      remove.addEventListener("click", async () => {
        if (!window.confirm(`Remove ${name} from ${row.label}?`)) return;
        const note = card.querySelector(".row-note");
        if (await save({ entries: new Map(), password: () => "" }, note, { [`${row.key}.${name}`]: null })) load();
      });
      card.append(remove);
      item.append(card);
      box.append(item);
    }
    const add = el("details", "settings-entry settings-add");
    add.append(el("summary", "", `Add to ${row.label}`));
    const nameRow = { key: `${row.key}.NAME.name`, label: "name", doc: "what it is called (letters, digits, _)", type: "text" };
    const adding = makeForm(`New entry of ${row.label}`, "", (form, node) => {
        node.append(field(nameRow, form));
        rows(row.new, form, node);
        byDriver(row, form);
      }, async (form, note) => {
        const name = form.entries.get(nameRow.key).value().trim();
        if (!name) {
          form.entries.get(nameRow.key).fail("give it a name");
          return false;
        }
        const entry = {};
        for (const [key, item] of form.entries) {
          if (key === nameRow.key || hidden(item) || !(item.changed() || item.row.required)) continue;
          entry[key.slice(`${row.key}.NAME.`.length)] = item.value();
        }
        const prefix = `${row.key}.${name}.`;
        const keyFor = (key) => (key.startsWith(prefix) ? `${row.key}.NAME.${key.slice(prefix.length)}` : nameRow.key);
        if (await save(form, note, { [`${row.key}.${name}`]: entry }, keyFor)) load();
        return true;
      });
    adding.className = "settings-subform";
    add.append(adding);
    box.append(add);
    return box;
  }

  // --- the page -------------------------------------------------------------------------------

  function show(page) {
    current = page;
    for (const tab of $("tabs").children) tab.setAttribute("aria-pressed", String(tab.dataset.page === page));
    for (const pane of $("panes").children) pane.hidden = pane.dataset.page !== page;
  }

  function render(doc) {
    version = doc.version;
    $("tabs").replaceChildren();
    $("panes").replaceChildren();
    for (const page of doc.pages) {
      const tab = el("button", "btn btn-small settings-tab", page.page);
      tab.type = "button";
      tab.dataset.page = page.page;
      tab.addEventListener("click", () => show(page.page));
      $("tabs").append(tab);
      const pane = el("div", "settings-pane");
      pane.dataset.page = page.page;
      for (const row of page.sections) pane.append(row.type === "collection" ? wrapCard(collection(row)) : sectionForm(row));
      const extra = window.SettingsExtra && window.SettingsExtra[page.page];
      if (extra) extra(pane); // the access and updates tabs' own cards (settings-extra.js)
      $("panes").append(pane);
    }
    show(current || doc.pages[0].page);
    const waiting = doc.restart_needed || [];
    say(waiting.length ? `waiting for a restart: ${waiting.join(", ")}` : "every saved setting is in use", waiting.length ? "warn" : "");
  }

  function wrapCard(node) {
    const card = el("section", "card settings-card");
    card.append(node);
    return card;
  }

  async function loadAudit() {
    const response = await fetch("/api/settings/audit", { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return;
    const { changes } = await response.json();
    $("audit").replaceChildren(
      ...changes.map((c) => {
        const item = el("li", "item");
        item.append(el("span", "item-title", c.message), el("span", "item-line", new Date(c.at * 1000).toLocaleString()));
        return item;
      }),
    );
    $("audit-empty").hidden = changes.length > 0;
  }

  async function load() {
    $("conflict").hidden = true;
    const response = await fetch("/api/settings", { credentials: "same-origin", cache: "no-store" });
    if (response.status === 401) return toLogin();
    const data = await response.json();
    if (!response.ok) return say(data.error || `HTTP ${response.status}`, "bad");
    render(data);
    loadAudit();
  }

  $("conflict-reload").addEventListener("click", load);
  wireLogout(loadCsrf);
  loadCsrf();
  load();
})();
