// The status page: polls /api/status every 5 s (and when the tab comes back) and draws it; the cards
// with buttons (devices, scheduled jobs, tasks) are drawn by status-controls.js.
// Every server string goes in through textContent, never innerHTML.
"use strict";

(function () {
  const POLL_MS = 5000;
  const HOUR_S = 3600;
  const SVG_NS = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);

  let last = null; // the latest /api/status document, for redrawing charts on resize
  let inFlight = false;
  let again = false; // a poll asked for while one was in flight (after a button): run it when that ends

  // --- session: the CSRF token for the logout form -------------------------------------------

  const loadCsrf = () => window.Page.loadCsrf();

  // --- formatting -------------------------------------------------------------------------------

  const { el, toLogin } = window.Page;

  function setText(id, text, tone) {
    const node = $(id);
    node.textContent = text;
    node.classList.remove("tone-ok", "tone-warn", "tone-bad", "tone-muted");
    if (tone) node.classList.add("tone-" + tone);
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "–";
    const s = Math.floor(seconds);
    const d = Math.floor(s / 86400);
    const h = Math.floor((s % 86400) / 3600);
    const m = Math.floor((s % 3600) / 60);
    if (d) return `${d} d ${h} h`;
    if (h) return `${h} h ${m} min`;
    if (m) return `${m} min`;
    return `${s} s`;
  }

  function size(mb) {
    return mb >= 1024 ? `${(mb / 1024).toFixed(1)} GB` : `${Math.round(mb)} MB`;
  }

  function clock(epochSeconds) {
    return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function number(value, digits) {
    return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
  }

  function meter(id, usedFraction) {
    const bar = $(id);
    const f = Math.min(Math.max(usedFraction, 0), 1);
    bar.style.width = (f * 100).toFixed(1) + "%";
    bar.className = f > 0.9 ? "tone-bad" : f > 0.75 ? "tone-warn" : "";
  }

  // --- the cards --------------------------------------------------------------------------------

  function renderSystem(status) {
    const h = status.health || {};
    const temp = h.cpu_temperature_c;
    if (temp === null || temp === undefined) setText("s-temp", "not available", "muted");
    else setText("s-temp", `${temp.toFixed(1)} °C`, temp >= 80 ? "bad" : temp >= 70 ? "warn" : null);

    const flags = h.throttled;
    if (!flags) {
      setText("s-throttle", "not available", "muted");
    } else {
      const label = (k) => k.replace(/_occurred$/, "").replace(/_/g, " ");
      const now = Object.keys(flags).filter((k) => flags[k] && !k.endsWith("_occurred"));
      const past = Object.keys(flags).filter((k) => flags[k] && k.endsWith("_occurred"));
      if (now.length) setText("s-throttle", "now: " + now.map(label).join(", "), "bad");
      else if (past.length) setText("s-throttle", "earlier: " + past.map(label).join(", "), "warn");
      else setText("s-throttle", "none", "ok");
    }

    setText("s-load", (h.load || []).map((x) => Number(x).toFixed(2)).join(" · ") || "–");

    if (h.memory_total_mb) {
      setText("s-mem", `${size(h.memory_available_mb)} of ${size(h.memory_total_mb)}`);
      meter("m-mem", 1 - h.memory_available_mb / h.memory_total_mb);
    }
    if (h.disk_total_gb) {
      setText("s-disk", `${h.disk_free_gb.toFixed(1)} GB of ${h.disk_total_gb.toFixed(1)} GB`);
      meter("m-disk", 1 - h.disk_free_gb / h.disk_total_gb);
    }

    const uptime = $("s-uptime");
    uptime.textContent = duration(h.uptime_s);
    uptime.append(el("span", "sub", `daemon ${duration(status.uptime_s)}`));
    setText("s-version", status.version || "–");
    renderUpdate(status.update);
    renderConfig(status.config);
  }

  // The last config reload (SIGHUP): the keys that wait for a restart, or why the new file was refused.
  function renderConfig(config) {
    const cell = $("s-config");
    if (!config) {
      setText("s-config", "–", "muted");
      return;
    }
    const waiting = config.restart_needed || [];
    if (config.refused) setText("s-config", "reload refused: " + config.refused, "bad");
    else if (waiting.length) setText("s-config", waiting.join(", ") + ": restart needed", "warn");
    else setText("s-config", "applied");
    cell.append(el("span", "sub", `loaded ${new Date(config.loaded_at * 1000).toLocaleString()}`));
  }

  // The OTA journal: the last result ("ok", "rolled back", ...), when, and the release to go back to.
  function renderUpdate(update) {
    const cell = $("s-update");
    const last = update && update.last;
    if (!last) {
      cell.textContent = update ? "none yet" : "not installed as a release";
      cell.className = "";
      return;
    }
    cell.textContent = `${last.result}: ${last.version}`;
    cell.className = last.result === "ok" ? "" : "tone-bad";
    const when = new Date(last.at).toLocaleString();
    const back = update.previous ? ` · previous ${update.previous}` : "";
    cell.append(el("span", "sub", `${when}${back}${last.result === "ok" ? "" : " · " + (last.detail || "")}`));
  }

  function renderModel(status) {
    const m = status.model || {};
    setText("m-name", m.name || "–");
    setText("m-file", m.path ? String(m.path).split("/").pop() : "");
    const badge = $("m-loaded");
    badge.textContent = m.loaded ? "loaded" : "not loaded";
    badge.className = "badge " + (m.loaded ? "badge-ok" : "badge-muted");
    setText("m-tps", number(m.recent_tps, 1));
    setText("m-threads", m.threads ?? "–");
    setText("m-queue", m.queue_depth ?? "–", m.queue_depth > 2 ? "warn" : null);
    const pc = m.prompt_cache; // the same line as `picoagent status` (appliance/cli/system.py)
    setText(
      "m-cache",
      !pc
        ? ""
        : `prompt cache: ${
            pc.hit_rate_1h === null
              ? "no local turns in the last hour"
              : `${Math.round(pc.hit_rate_1h * 100)}% of ${pc.prompt_tokens_1h} prompt tokens reused in the last hour`
          } · prefix ${pc.prefix} · ${Number(pc.ram_mb).toFixed(1)} MB in ${pc.entries} state(s)`,
    );
    renderModelPull(m.pull);
    renderRunner(m.runner);
  }

  // The model runner's crashes and fallback (runner_client.summary; `picoagent status` prints the same).
  function renderRunner(runner) {
    const line = $("m-runner");
    line.hidden = !runner || !runner.message;
    if (line.hidden) return;
    line.textContent = runner.message;
    line.className = "model-file " + (runner.mode === "normal" ? "tone-warn" : "tone-bad");
  }

  // The wanted model's background pull (model_fetch.status_line says the same in `picoagent status`).
  function renderModelPull(pull) {
    const line = $("m-pull");
    line.hidden = !pull;
    if (!pull) return;
    const size = (n) => (n >= 1e9 ? `${(n / 1e9).toFixed(1)} GB` : `${(n / 1e6).toFixed(1)} MB`); // as format_size
    const words = {
      waiting_network: `${pull.name} wanted: waiting for the network`,
      downloading: `pulling ${pull.name}: ${size(pull.done_bytes)} of ${size(pull.total_bytes)}` +
        (pull.total_bytes ? ` (${Math.floor((100 * pull.done_bytes) / pull.total_bytes)}%)` : ""),
      verifying: `pulling ${pull.name}: verifying`,
      switching: `switching to ${pull.name}`,
      done: `switched to ${pull.name}`,
      failed: `pulling ${pull.name} failed`,
      no_network: `no network: keeping the packaged model until ${pull.name} can be downloaded`,
    };
    const why = pull.message && ["failed", "no_network", "done"].includes(pull.state) ? ` (${pull.message})` : "";
    line.textContent = (words[pull.state] || `${pull.name}: ${pull.state}`) + why;
    line.className = "model-file" + (pull.state === "failed" || pull.state === "no_network" ? " tone-bad" : "");
  }

  function renderRouting(status) {
    const r = status.routing || {};
    const rows = r.today || [];
    const count = (pred) => rows.filter(pred).reduce((n, row) => n + row.turns, 0);
    setText("r-mode", r.provider ? `${r.mode} · escalates to ${r.provider}` : `${r.mode || "–"} · no cloud provider`);
    setText("r-local", count((row) => row.route !== "cloud"));
    setText("r-cloud", count((row) => row.route === "cloud"));
    setText("r-spent", r.spent_today_usd === undefined ? "–" : `$${Number(r.spent_today_usd).toFixed(2)}`);
    $("r-reasons").replaceChildren(
      ...rows.map((row) => {
        const item = el("li", "route-row");
        item.append(
          el("span", "badge route route-" + String(row.route).replace(/[^a-z_]/g, ""), row.route),
          document.createTextNode(` ${row.why}${row.blocked ? ` (not sent: ${row.blocked})` : ""} · ${row.turns}`),
        );
        return item;
      }),
    );
  }

  function renderRecent(status) {
    const list = $("replies");
    const recent = status.recent || [];
    list.replaceChildren(
      ...recent.map((r) => {
        const item = el("li", "reply");
        const top = el("div", "reply-top");
        const time = el("time", "reply-time", clock(r.at));
        time.dateTime = new Date(r.at * 1000).toISOString();
        top.append(
          time,
          el("span", "badge route route-" + String(r.route).replace(/[^a-z_]/g, ""), r.route),
          el("span", "reply-secs", r.total_s === null || r.total_s === undefined ? "" : `${r.total_s.toFixed(2)} s`),
        );
        const detail = el("p", "reply-reason");
        detail.append(el("span", "reply-session", r.session || ""), document.createTextNode(r.reason || ""));
        item.append(top, detail);
        return item;
      }),
    );
    $("replies-empty").hidden = recent.length > 0;
  }

  function renderEvents(status) {
    const events = status.events || [];
    $("events").replaceChildren(
      ...events.map((e) => {
        const item = el("li", "device");
        item.append(el("span", "device-name", new Date(e.at * 1000).toLocaleTimeString()));
        item.append(el("span", "device-detail", `${e.kind} · ${e.message}`));
        return item;
      }),
    );
    $("events-empty").hidden = events.length > 0;
  }

  // --- notifications: the channels, the feed, and the browser's own notifications ------------------

  let newestSeen = null; // the newest notification id shown; null until the first render

  function renderFeed(status) {
    const channels = (status.channels || []).filter((c) => c.enabled);
    $("channels").replaceChildren(
      ...(channels.length
        ? channels.map((c) =>
            el("li", "badge " + (c.up ? "badge-ok" : "badge-down"), `${c.name}: ${c.up ? "up" : "down"} · ${c.detail}`),
          )
        : [el("li", "badge", "No chat channel: notifications show here")]),
    );
    const items = status.notifications || [];
    const fresh = newestSeen === null ? [] : items.filter((n) => n.id > newestSeen);
    $("feed").replaceChildren(
      ...items.map((n) => {
        const item = el("li", fresh.includes(n) ? "fresh" : "");
        item.append(el("span", "feed-time", clock(n.at)));
        item.append(el("span", "feed-text", n.text));
        const why = n.error ? ` (${n.error})` : "";
        item.append(el("span", "feed-where", `${n.kind} · ${n.channel ? `${n.channel}: ${n.delivery}` : n.delivery}${why}`));
        return item;
      }),
    );
    $("feed-empty").hidden = items.length > 0;
    if (items.length) newestSeen = Math.max(newestSeen || 0, ...items.map((n) => n.id));
    else if (newestSeen === null) newestSeen = 0;
    if ("Notification" in window && Notification.permission === "granted") {
      for (const n of fresh.reverse()) new Notification("picoagent", { body: n.text, tag: `picoagent-${n.id}` });
    }
  }

  function wireNotifyHere() {
    const button = $("notify-here");
    if (!("Notification" in window)) return; // this browser (or plain http:// on another host) has none
    const show = () => {
      button.hidden = Notification.permission !== "default";
    };
    button.addEventListener("click", async () => {
      await Notification.requestPermission();
      show();
    });
    show();
  }

  // --- charts: inline SVG sized to its box --------------------------------------------------------

  function svg(tag, attrs, parent) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (parent) parent.append(node);
    return node;
  }

  // Round axis bounds and 3-5 gridlines at a 1, 2, 2.5 or 5 x 10^n step.
  function axis(values) {
    let lo = Math.min(...values);
    let hi = Math.max(...values);
    if (hi - lo < 2) {
      const mid = (lo + hi) / 2;
      lo = mid - 1;
      hi = mid + 1;
    }
    const raw = (hi - lo) / 3;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw);
    lo = Math.floor(lo / step) * step;
    hi = Math.ceil(hi / step) * step;
    if (lo < 0 && values.every((v) => v >= 0)) lo = 0;
    const ticks = [];
    for (let v = lo; v <= hi + step / 2; v += step) ticks.push(v);
    return { lo, hi, ticks, digits: step < 1 ? 1 : 0 };
  }

  function drawChart(box, points, now, digits) {
    const t0 = now - HOUR_S;
    const inHour = points.filter((p) => p[0] >= t0 && p[0] <= now + 60);
    box.replaceChildren();
    if (!inHour.length) {
      box.append(el("p", "chart-empty", box.dataset.empty));
      return;
    }
    const unit = box.dataset.unit;
    const width = Math.max(box.clientWidth, 200);
    const height = 140;
    const pad = { left: 40, right: 10, top: 10, bottom: 26 };
    const values = inHour.map((p) => p[1]);
    const { lo, hi, ticks, digits: tickDigits } = axis(values);
    const x = (t) => pad.left + ((t - t0) / HOUR_S) * (width - pad.left - pad.right);
    const y = (v) => pad.top + (1 - (v - lo) / (hi - lo)) * (height - pad.top - pad.bottom);

    const latest = values[values.length - 1];
    const root = svg("svg", {
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `${inHour.length} points; lowest ${Math.min(...values).toFixed(digits)}, highest ${Math.max(
        ...values,
      ).toFixed(digits)}, latest ${latest.toFixed(digits)} ${unit}`,
    });

    for (const v of ticks) {
      svg("line", { class: "grid-line", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }, root);
      const label = svg("text", { class: "axis", x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, root);
      label.textContent = v.toFixed(tickDigits);
    }
    for (const [minutes, anchor] of [
      [60, "start"],
      [30, "middle"],
      [0, "end"],
    ]) {
      const label = svg("text", { class: "axis", x: x(now - minutes * 60), y: height - 6, "text-anchor": anchor }, root);
      label.textContent = minutes ? `−${minutes} min` : "now";
    }

    const coords = inHour.map((p) => [x(p[0]), y(p[1])]);
    if (coords.length > 1) {
      const line = coords.map((c, i) => `${i ? "L" : "M"}${c[0].toFixed(1)},${c[1].toFixed(1)}`).join("");
      const base = y(lo).toFixed(1);
      svg("path", { class: "area", d: `${line}L${coords[coords.length - 1][0].toFixed(1)},${base}L${coords[0][0].toFixed(1)},${base}Z` }, root);
      svg("path", { class: "line", d: line }, root);
    }
    const dots = coords.length <= 60 ? coords : [coords[coords.length - 1]];
    for (const c of dots) svg("circle", { class: "dot", cx: c[0], cy: c[1], r: 3.5 }, root);
    box.append(root);
  }

  function renderCharts(status) {
    const series = status.series || {};
    const now = (status.started_at || 0) + (status.uptime_s || 0); // the server's clock, not the browser's
    const temps = series.cpu_temperature_c || [];
    const tps = series.decode_tps || [];
    drawChart($("chart-temp"), temps, now, 1);
    drawChart($("chart-tps"), tps, now, 1);
    $("c-temp-now").textContent = temps.length ? `${temps[temps.length - 1][1].toFixed(1)} °C` : "";
    $("c-tps-now").textContent = tps.length ? `${tps[tps.length - 1][1].toFixed(1)} tok/s` : "";
  }

  function render(status) {
    renderSystem(status);
    renderModel(status);
    renderCharts(status);
    renderRouting(status);
    renderRecent(status);
    window.StatusControls.render(status);
    renderEvents(status);
    renderFeed(status);
  }

  // --- polling ----------------------------------------------------------------------------------

  async function poll() {
    if (inFlight) again = true;
    if (inFlight || document.visibilityState === "hidden") return;
    inFlight = true;
    const updated = $("updated");
    try {
      const response = await fetch("/api/status", { credentials: "same-origin", cache: "no-store" });
      if (response.status === 401) return toLogin();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      last = await response.json();
      render(last);
      updated.textContent = "updated " + clock(Date.now() / 1000);
      updated.classList.remove("tone-bad");
    } catch (err) {
      updated.textContent = "cannot reach the appliance; retrying…";
      updated.classList.add("tone-bad");
    } finally {
      inFlight = false;
      if (again) {
        again = false;
        poll();
      }
    }
  }

  let resizeQueued = false;
  window.addEventListener("resize", () => {
    if (resizeQueued || !last) return;
    resizeQueued = true;
    requestAnimationFrame(() => {
      resizeQueued = false;
      renderCharts(last);
    });
  });

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") poll();
  });

  window.Page.wireLogout(loadCsrf);
  wireNotifyHere();
  window.StatusControls.onChange(() => poll());
  loadCsrf().catch(() => {});
  poll();
  setInterval(poll, POLL_MS);
})();
