// The web chat: history from /api/history, replies streamed over /ws (protocol in chat.py's docstring).
// Model and tool text is untrusted: it goes in through textContent, never innerHTML.
"use strict";

(function () {
  const SESSION = "web";
  const BACKOFF_S = [0.5, 1, 2, 4, 8, 15];
  const $ = (id) => document.getElementById(id);

  const log = $("log");
  const messages = $("messages");
  const empty = $("chat-empty");
  const form = $("composer");
  const input = $("input");
  const sendButton = $("send");
  const stopButton = $("stop");
  const resetButton = $("reset");
  const conn = $("conn");
  const connText = $("conn-text");

  let socket = null;
  let attempts = 0; // failed connection attempts since the last open socket
  let turn = null; // the reply being streamed: {bubble, text, state, tools, meta, body, streamed}
  let csrf = "";

  // --- helpers ----------------------------------------------------------------------------------

  const { el, toLogin } = window.Page;

  function clock(epochSeconds) {
    return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function nearBottom() {
    return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  }

  function scrollDown(force) {
    if (force || nearBottom()) log.scrollTop = log.scrollHeight;
  }

  function updateEmpty() {
    empty.hidden = messages.querySelector(".msg") !== null;
  }

  function shorten(text, limit) {
    const s = String(text);
    return s.length > limit ? s.slice(0, limit - 1) + "…" : s;
  }

  // --- session and logout -----------------------------------------------------------------------

  async function loadCsrf() {
    csrf = await window.Page.loadCsrf();
    return csrf;
  }

  window.Page.wireLogout(loadCsrf);

  // --- messages ---------------------------------------------------------------------------------

  function addUser(text, at) {
    const article = el("article", "msg msg-user");
    article.setAttribute("aria-label", "You");
    const bubble = el("div", "bubble");
    bubble.append(el("div", "msg-text", text));
    article.append(bubble);
    if (at) article.append(el("div", "msg-meta", clock(at)));
    messages.append(article);
    updateEmpty();
    return article;
  }

  function addAssistant() {
    const article = el("article", "msg msg-assistant");
    article.setAttribute("aria-label", "picoagent");
    const bubble = el("div", "bubble");
    const tools = el("div", "tools");
    const text = el("div", "msg-text");
    const state = el("div", "msg-state");
    bubble.append(tools, text, state);
    const meta = el("div", "msg-meta");
    article.append(bubble, meta);
    messages.append(article);
    updateEmpty();
    return { article, bubble, tools, text, state, meta, streamed: "" };
  }

  function setState(reply, label, typing) {
    reply.state.replaceChildren();
    if (!label) {
      reply.state.hidden = true;
      return;
    }
    reply.state.hidden = false;
    if (typing) {
      const dots = el("span", "typing");
      dots.setAttribute("aria-hidden", "true");
      dots.append(el("span"), el("span"), el("span"));
      reply.state.append(dots);
    }
    reply.state.append(el("span", "", label));
  }

  function setMeta(reply, route, parts, at) {
    reply.meta.replaceChildren();
    if (route) reply.meta.append(el("span", "badge route route-" + String(route).replace(/[^a-z_]/g, ""), route));
    const rest = parts.filter((p) => p !== null && p !== undefined && p !== "");
    if (at) rest.push(clock(at));
    if (rest.length) reply.meta.append(el("span", "", (route ? " · " : "") + rest.join(" · ")));
  }

  function recordParts(record) {
    const t = record.timings || {};
    // A reply no model wrote says so, and what it is based on (as appliance/channels/core.py's footer does).
    const local = record.route === "local" || record.route === "local_fallback";
    if (record.route === "intent" || record.route === "grounded" || (local && record.model === "")) {
      const basis = String(record.reason || "").replace(/( \(no model\)|, no model)$/, "").replace(/^grounded( answer)?: /, "");
      return ["answered without the model", basis, t.total_s !== undefined ? `${Number(t.total_s).toFixed(2)} s` : null];
    }
    return [
      record.model,
      t.decode_tps ? `${Number(t.decode_tps).toFixed(1)} tok/s` : null,
      t.total_s !== undefined ? `${Number(t.total_s).toFixed(1)} s` : null,
      // Why it left the Pi, or why it did not although the local answer was unsure.
      record.route === "cloud" || record.route === "local_fallback" ? record.reason : null,
    ];
  }

  function addToolCall(reply, data) {
    const item = el("details", "tool");
    const summary = el("summary", "tool-summary");
    summary.append(el("span", "tool-icon", "⚙"), el("span", "tool-name", data.tool));
    summary.append(el("span", "tool-args", shorten(JSON.stringify(data.arguments ?? {}), 80)));
    summary.append(el("span", "tool-status", "running…"));
    item.append(summary);
    reply.tools.append(item);
    return item;
  }

  function addToolResult(reply, data) {
    const pending = [...reply.tools.querySelectorAll(".tool:not(.done)")];
    const item = pending.find((t) => t.querySelector(".tool-name").textContent === data.tool) || addToolCall(reply, data);
    item.classList.add("done", data.ok ? "tool-ok" : "tool-failed");
    const status = item.querySelector(".tool-status");
    const secs = data.duration_s !== undefined ? ` · ${Number(data.duration_s).toFixed(2)} s` : "";
    status.textContent = (data.ok ? "ok" : "failed") + secs;
    const body = el("pre", "tool-output", data.ok ? data.result ?? "" : data.error ?? "error");
    item.append(body);
  }

  function renderHistory(list) {
    for (const m of list) {
      if (m.role === "user") addUser(m.content, m.at);
      else if (m.role === "assistant") {
        const reply = addAssistant();
        reply.text.textContent = m.content;
        const meta = m.meta || {};
        for (const action of meta.actions || []) addToolResult(reply, action);
        setState(reply, "");
        setMeta(reply, m.route, recordParts({ model: meta.model, timings: meta.timings, route: m.route, reason: meta.reason }), m.at);
      }
    }
    scrollDown(true);
  }

  async function loadHistory() {
    try {
      const response = await fetch(`/api/history?session=${SESSION}`, { credentials: "same-origin", cache: "no-store" });
      if (response.status === 401) return toLogin();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const data = await response.json();
      renderHistory(data.messages || []);
    } catch (err) {
      notice("Could not load the conversation: " + err.message);
    }
    updateEmpty();
  }

  function notice(message, fix) {
    const box = el("div", "msg notice");
    box.setAttribute("role", "alert");
    box.append(el("span", "", message));
    if (fix) box.append(el("span", "notice-fix", fix));
    messages.append(box);
    scrollDown(true);
  }

  // --- a turn -----------------------------------------------------------------------------------

  function setBusy(busy) {
    input.disabled = busy;
    sendButton.hidden = busy;
    stopButton.hidden = !busy;
    stopButton.disabled = false;
    resetButton.disabled = busy;
    updateSend();
  }

  function updateSend() {
    const open = socket && socket.readyState === WebSocket.OPEN;
    sendButton.disabled = !open || !input.value.trim();
  }

  // A question the reply asks ("Turn the fan on?"): one button per answer; a tap says it, once.
  function addChoices(reply, choices) {
    if (!choices.length) return;
    const row = el("div", "choices");
    row.setAttribute("role", "group");
    row.setAttribute("aria-label", "answers");
    for (const choice of choices) {
      const button = el("button", "choice", choice);
      button.type = "button";
      button.addEventListener("click", () => {
        if (turn) return;
        for (const other of row.querySelectorAll("button")) other.disabled = true;
        button.classList.add("chosen");
        send(choice);
      });
      row.append(button);
    }
    reply.bubble.append(row);
  }

  function endTurn() {
    if (!turn) return;
    turn.article.removeAttribute("aria-busy");
    turn = null;
    setBusy(false);
    if (window.matchMedia("(pointer: fine)").matches) input.focus();
  }

  function send(text) {
    if (!socket || socket.readyState !== WebSocket.OPEN || turn) return;
    addUser(text, Date.now() / 1000);
    turn = addAssistant();
    turn.article.setAttribute("aria-busy", "true");
    setState(turn, "waiting for the model…", true);
    socket.send(JSON.stringify({ type: "message", text, session: SESSION }));
    input.value = "";
    autosize();
    setBusy(true);
    scrollDown(true);
  }

  function onEvent(event) {
    const stick = nearBottom();
    const reply = turn;
    switch (event.type) {
      case "queued":
        if (reply) setState(reply, `queued · position ${event.position}`, true);
        break;
      case "thinking":
        if (reply) setState(reply, event.stage === "tool_call" ? "choosing a tool…" : "thinking…", true);
        break;
      case "tool_call":
        if (reply) addToolCall(reply, event);
        break;
      case "tool_result":
        if (reply) addToolResult(reply, event);
        break;
      case "text":
        if (reply) {
          reply.streamed += event.delta || "";
          reply.text.textContent = reply.streamed.replace(/^\s+/, "");
          setState(reply, "");
        }
        break;
      case "reroute":
        // The other model answers instead: what was streamed so far is replaced, and the reason shown.
        if (reply) {
          reply.streamed = "";
          reply.text.textContent = "";
          setState(reply, `${event.reason} · ${event.route === "cloud" ? "asking the cloud…" : "answering on the Pi…"}`, true);
        }
        break;
      case "done":
        if (reply) {
          reply.text.textContent = event.text;
          setState(reply, "");
          setMeta(reply, event.route, recordParts(event), Date.now() / 1000);
          addChoices(reply, event.choices || []);
          endTurn();
        }
        break;
      case "error":
        if (reply && event.message === "stopped") {
          setState(reply, "");
          if (!reply.text.textContent) reply.text.textContent = "(stopped)";
          setMeta(reply, "", ["stopped"]);
          endTurn();
        } else if (reply) {
          setState(reply, "");
          const error = el("div", "msg-error", event.message);
          error.setAttribute("role", "alert");
          if (event.fix) error.append(el("span", "notice-fix", event.fix));
          reply.bubble.append(error);
          endTurn();
        } else {
          notice(event.message, event.fix);
        }
        break;
      default:
        break;
    }
    if (stick) scrollDown(true);
  }

  // --- the socket -------------------------------------------------------------------------------

  function setConn(kind, label) {
    conn.dataset.state = kind;
    connText.textContent = label;
    updateSend();
  }

  function connect() {
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${window.location.host}/ws`);
    socket = ws;
    ws.addEventListener("open", () => {
      attempts = 0;
      setConn("open", "connected");
    });
    ws.addEventListener("message", (message) => {
      try {
        onEvent(JSON.parse(message.data));
      } catch (err) {
        console.error("bad event", err);
      }
    });
    ws.addEventListener("close", () => {
      if (socket !== ws) return;
      socket = null;
      if (turn) {
        setState(turn, "");
        const error = el("div", "msg-error", "The connection dropped; the reply was interrupted.");
        error.setAttribute("role", "alert");
        turn.bubble.append(error);
        endTurn();
      }
      reconnect();
    });
  }

  function reconnect() {
    const delay = BACKOFF_S[Math.min(attempts, BACKOFF_S.length - 1)] * (0.8 + Math.random() * 0.4);
    attempts += 1;
    setConn("retry", "reconnecting…");
    // A refused upgrade looks like any close: ask whether the session ended.
    if (attempts === 2) loadCsrf().catch(() => {});
    window.setTimeout(connect, delay * 1000);
  }

  // --- the composer -----------------------------------------------------------------------------

  function autosize() {
    input.style.height = "auto";
    input.style.height = input.scrollHeight + 2 + "px";
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (text) send(text);
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!sendButton.disabled) form.requestSubmit();
    }
  });

  input.addEventListener("input", () => {
    autosize();
    updateSend();
  });

  stopButton.addEventListener("click", () => {
    if (socket && socket.readyState === WebSocket.OPEN && turn) {
      socket.send(JSON.stringify({ type: "cancel" }));
      stopButton.disabled = true;
      setState(turn, "stopping…", false);
    }
  });

  resetButton.addEventListener("click", async () => {
    if (turn) return;
    resetButton.disabled = true;
    try {
      for (let attempt = 0; attempt < 2; attempt += 1) {
        const token = csrf || (await loadCsrf());
        const response = await fetch("/api/reset", {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": token },
          body: JSON.stringify({ session: SESSION }),
        });
        if (response.status === 401) return toLogin();
        if (response.status === 403 && attempt === 0) {
          csrf = ""; // the session was renewed elsewhere: fetch a fresh token and retry once
          continue;
        }
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        for (const node of [...messages.querySelectorAll(".msg")]) node.remove();
        updateEmpty();
        input.focus();
        return;
      }
    } catch (err) {
      notice("Could not start a new conversation: " + err.message);
    } finally {
      resetButton.disabled = Boolean(turn);
    }
  });

  loadCsrf().catch(() => {});
  setConn("connecting", "connecting…");
  // History first, so a reply sent right away lands below it.
  loadHistory().finally(connect);
  // Focusing on a phone would pop the keyboard over the conversation.
  if (window.matchMedia("(pointer: fine)").matches) input.focus();
})();
