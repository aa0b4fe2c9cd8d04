// The status page's controls: device switches and brightness, and the Scheduled and Tasks cards with
// their Pause / Resume / Cancel buttons. status.js polls /api/status and calls render(status); every
// button posts with the session's CSRF token and then asks status.js to poll again.
// Rows are kept by name and updated in place, so a poll never takes the focus off a switch or a slider.
"use strict";

window.StatusControls = (function () {
  const $ = (id) => document.getElementById(id);
  let refresh = () => {};
  const notes = new Map(); // row key -> {text, tone}: what the last click on that row did

  const { el, post } = window.Page;

  function button(label, className, onClick) {
    const node = el("button", "btn btn-small " + className, label);
    node.type = "button";
    node.addEventListener("click", onClick);
    return node;
  }

  function failure(result) {
    const d = result.data || {};
    return { text: d.fix ? `${d.error} (${d.fix})` : d.error || `HTTP ${result.status}`, tone: "bad" };
  }

  // Run one action for a row: the row's controls are disabled meanwhile, its note says what happened.
  async function act(key, controls, url, body, done) {
    for (const c of controls) c.disabled = true;
    try {
      const result = await post(url, body);
      notes.set(key, result.ok ? done(result.data, result.status) : failure(result));
    } catch (err) {
      notes.set(key, { text: "cannot reach the appliance: " + err.message, tone: "bad" });
    } finally {
      for (const c of controls) c.disabled = false;
      refresh();
    }
  }

  // Keyed rows: created once, updated on every poll, removed when their item is gone.
  function keyed(list, rows, keys, make) {
    for (const [key, row] of rows) {
      if (!keys.includes(key)) {
        row.item.remove();
        rows.delete(key);
      }
    }
    keys.forEach((key, i) => {
      let row = rows.get(key);
      if (!row) {
        row = make(key);
        rows.set(key, row);
      }
      if (list.children[i] !== row.item) list.insertBefore(row.item, list.children[i] || null);
    });
  }

  function showNote(row, key, fallback) {
    const note = notes.get(key) || fallback;
    row.note.textContent = note ? note.text : "";
    row.note.className = "row-note" + (note && note.tone ? " tone-" + note.tone : "");
    row.note.hidden = !note;
  }

  // --- devices ---------------------------------------------------------------------------------

  const deviceRows = new Map();

  function reading(r) {
    if (typeof r.value === "boolean") return `${r.quantity === "state" ? "" : r.quantity + " "}${r.value ? "on" : "off"}`;
    return `${r.quantity} ${r.value}${r.unit ? " " + r.unit : ""}`;
  }

  function makeDeviceRow(name, device) {
    const item = el("li", "device");
    const text = el("div", "device-text");
    const detail = el("span", "device-detail");
    text.append(el("span", "device-name", name), detail);
    item.append(text);
    const row = { item, detail, note: el("p", "row-note"), toggle: null, level: null };
    row.note.setAttribute("role", "status");
    const settable = (device.allowed || []).includes("set") && (device.kind === "switch" || device.kind === "dimmer");
    if (settable) {
      const controls = el("div", "device-controls");
      if (device.kind === "dimmer") {
        row.level = el("input", "level");
        Object.assign(row.level, { type: "range", min: 0, max: 100, step: 5 });
        row.level.setAttribute("aria-label", `${name} brightness`);
        row.level.addEventListener("change", () =>
          setDevice(name, row, `${row.level.value}%`),
        );
        controls.append(row.level);
      }
      row.toggle = el("button", "switch");
      row.toggle.type = "button";
      row.toggle.setAttribute("role", "switch");
      row.toggle.setAttribute("aria-label", name);
      row.toggle.append(el("span", "switch-knob"));
      row.toggle.addEventListener("click", () =>
        setDevice(name, row, row.toggle.getAttribute("aria-checked") === "true" ? "off" : "on"),
      );
      controls.append(row.toggle);
      item.append(controls);
    }
    item.append(row.note);
    return row;
  }

  function setDevice(name, row, value) {
    const controls = [row.toggle, row.level].filter(Boolean);
    act(`device:${name}`, controls, `/api/devices/${encodeURIComponent(name)}`, { value }, (data) => {
      if (data.pending_approval) return { text: `waiting for approval ${data.pending_approval.id}`, tone: "warn" };
      applyReadings(row, data.state || []);
      return null;
    });
  }

  function applyReadings(row, readings) {
    const state = readings.find((r) => r.quantity === "state");
    if (row.toggle && state) row.toggle.setAttribute("aria-checked", String(Boolean(state.value)));
    const brightness = readings.find((r) => r.quantity === "brightness");
    if (row.level && brightness && document.activeElement !== row.level) row.level.value = brightness.value;
  }

  function renderDevices(status) {
    const devices = status.devices || [];
    const byName = new Map(devices.map((d) => [d.name, d]));
    keyed($("devices"), deviceRows, devices.map((d) => d.name), (name) => makeDeviceRow(name, byName.get(name)));
    const waiting = new Map();
    for (const p of status.approvals || []) waiting.set(p.device, p.id);
    for (const d of devices) {
      const row = deviceRows.get(d.name);
      const shown = (d.readings || []).filter((r) => r.quantity !== "raw").map(reading);
      const detail = [d.room, d.kind, d.where, ...(d.error ? [`error: ${d.error}`] : shown)];
      if (d.approval === "required") detail.push("approval required");
      row.detail.textContent = detail.filter(Boolean).join(" · ");
      applyReadings(row, d.readings || []);
      const key = `device:${d.name}`;
      // A write that waited and has been decided since is no news any more; the approvals list is the truth.
      const note = notes.get(key);
      if (note && /^waiting for approval/.test(note.text) && !waiting.has(d.name)) notes.delete(key);
      showNote(row, key, waiting.has(d.name) ? { text: `waiting for approval ${waiting.get(d.name)}`, tone: "warn" } : null);
    }
    $("devices-empty").hidden = devices.length > 0;
  }

  // --- scheduled jobs --------------------------------------------------------------------------

  const jobRows = new Map();

  function when(iso) {
    if (!iso) return "–";
    const at = new Date(iso);
    const today = new Date();
    const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return at.toDateString() === today.toDateString() ? time : `${at.toLocaleDateString([], { weekday: "short", day: "numeric", month: "short" })} ${time}`;
  }

  function makeItemRow(kind, key) {
    const item = el("li", "item");
    const top = el("div", "item-top");
    const title = el("span", "item-title");
    const badges = el("span", "item-badges");
    top.append(title, badges);
    const lines = el("div", "item-lines");
    const actions = el("div", "item-actions");
    const note = el("p", "row-note");
    note.setAttribute("role", "status");
    item.append(top, lines, actions, note);
    item.dataset[kind] = key;
    return { item, title, badges, lines, actions, note, shape: "" };
  }

  function badge(text, tone) {
    return el("span", "badge" + (tone ? " badge-" + tone : ""), text);
  }

  function line(label, value, tone) {
    const row = el("p", "item-line");
    row.append(el("span", "item-label", label + " "), el("span", tone ? "tone-" + tone : "", value));
    return row;
  }

  // The action buttons of a row, rebuilt only when which buttons it shows changes.
  function setActions(row, key, names, urlOf) {
    const shape = names.join(",");
    if (row.shape === shape) return;
    row.shape = shape;
    const buttons = names.map((name) =>
      button(name[0].toUpperCase() + name.slice(1), name === "cancel" ? "btn-danger" : "btn-ghost", () => {
        const all = [...row.actions.querySelectorAll("button")];
        const said = { pause: "paused", resume: "resumed", cancel: "cancelled", run: "ran" }[name];
        act(key, all, urlOf(name), {}, (data) => ({ text: data.result ? `${said}: ${data.result}` : said, tone: "ok" }));
      }),
    );
    for (const b of buttons) b.setAttribute("aria-label", `${b.textContent} ${row.title.textContent}`);
    row.actions.replaceChildren(...buttons);
  }

  function renderJobs(status) {
    const jobs = status.jobs || [];
    keyed($("jobs"), jobRows, jobs.map((j) => j.id), (id) => makeItemRow("job", id));
    for (const j of jobs) {
      const row = jobRows.get(j.id);
      row.title.textContent = j.id;
      const badges = [];
      if (j.paused) badges.push(badge("paused", "warn"));
      if (j.made || j.source) badges.push(badge(j.made || j.source));
      if (j.last_ok === true) badges.push(badge("ok", "ok"));
      if (j.last_ok === false) badges.push(badge("failed", "bad"));
      row.badges.replaceChildren(...badges);
      const lines = [line("does", j.does || "–"), line("when", j.schedule), line("next", j.paused ? "paused" : when(j.next_run))];
      if (j.last_run) lines.push(line("last", `${when(j.last_run)} · ${j.last_result || ""}`, j.last_ok === false ? "bad" : null));
      row.lines.replaceChildren(...lines);
      const names = [j.paused ? "resume" : "pause", "run"];
      if (j.source === "chat") names.push("cancel");
      setActions(row, `job:${j.id}`, names, (name) => `/api/cron/${encodeURIComponent(j.id)}/${name}`);
      showNote(row, `job:${j.id}`, null);
    }
    $("jobs-empty").hidden = jobs.length > 0;
  }

  // --- tasks -----------------------------------------------------------------------------------

  const taskRows = new Map();
  const TASK_TONE = { done: "ok", error: "bad", cancelled: "", paused: "warn", running: "accent", pending: "" };

  function renderTasks(status) {
    const doc = status.tasks || {};
    const tasks = doc.tasks || [];
    const counts = doc.counts || {};
    $("task-counts").textContent = Object.keys(counts)
      .filter((k) => counts[k])
      .map((k) => `${counts[k]} ${k}`)
      .join(" · ");
    keyed($("tasks"), taskRows, tasks.map((t) => String(t.id)), (id) => makeItemRow("task", id));
    for (const t of tasks) {
      const row = taskRows.get(String(t.id));
      row.title.textContent = `#${t.id}`;
      row.badges.replaceChildren(badge(t.state, TASK_TONE[t.state]));
      const steps = t.max_steps ? `${t.steps_done} of ${t.max_steps}` : String(t.steps_done);
      const tokens = t.budget_tokens ? `${t.tokens_used || 0} of ${t.budget_tokens}` : String(t.tokens_used || 0);
      const lines = [line("goal", t.goal), line("steps", steps), line("tokens", tokens)];
      if (t.result) lines.push(line("result", t.result));
      if (t.error) lines.push(line("error", t.error, "bad"));
      row.lines.replaceChildren(...lines);
      const names = t.state === "paused" ? ["resume", "cancel"] : ["pending", "running"].includes(t.state) ? ["pause", "cancel"] : [];
      setActions(row, `task:${t.id}`, names, (name) => `/api/tasks/${t.id}/${name}`);
      showNote(row, `task:${t.id}`, null);
    }
    $("tasks-empty").hidden = tasks.length > 0;
  }

  return {
    render(status) {
      renderDevices(status);
      renderJobs(status);
      renderTasks(status);
    },
    onChange(callback) {
      refresh = callback;
    },
  };
})();
