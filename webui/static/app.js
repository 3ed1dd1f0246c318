// The sessionflow web view: a page over the HTTP session API (docs/API.md
// "HTTP API"). No build step: plain modern JavaScript, served as is.
"use strict";

const TOKEN_KEY = "sessionflow.token";
let config = { temporalUI: "", namespace: "default", api: "v1" };
let view = null; // the current view's teardown

// ---- HTTP ---------------------------------------------------------------

class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.type = e.type || "";
  }
}

function headers(extra) {
  const h = Object.assign({}, extra);
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

async function api(path, opts = {}) {
  const init = { method: opts.method || "GET", headers: headers({ Accept: "application/json" }) };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetch(`/${config.api}${path}`, init);
  const text = await res.text();
  let body = null;
  try { body = text ? JSON.parse(text) : null; } catch (_) { body = null; }
  if (res.status === 401) { askToken(); throw new APIError(401, body); }
  if (!res.ok) throw new APIError(res.status, body);
  return body;
}

// follow reads a Server-Sent Events stream through fetch (EventSource cannot
// send the bearer token) and calls onEvent({event, data, id}) for each event.
// It reconnects after a drop, resuming after the last id it saw, until
// signal aborts.
async function follow(path, onEvent, signal, lastId) {
  while (!signal.aborted) {
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (lastId !== undefined && lastId !== "") h["Last-Event-ID"] = String(lastId);
      const res = await fetch(`/${config.api}${path}`, { headers: h, signal });
      if (res.status === 401) { askToken(); return; }
      if (!res.ok) throw new APIError(res.status, null);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      let ev = { event: "message", data: [], id: undefined };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          let line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.endsWith("\r")) line = line.slice(0, -1);
          if (line === "") {
            if (ev.data.length) {
              if (ev.id !== undefined) lastId = ev.id;
              onEvent({ event: ev.event, data: ev.data.join("\n"), id: ev.id });
            }
            ev = { event: "message", data: [], id: undefined };
            continue;
          }
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? "" : line.slice(colon + 1);
          if (val.startsWith(" ")) val = val.slice(1);
          if (field === "event") ev.event = val;
          else if (field === "data") ev.data.push(val);
          else if (field === "id") ev.id = val;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      setStatus(`stream ${path}: ${err.message}; reconnecting`, true);
    }
    await sleep(1000, signal);
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// ---- small DOM helpers ----------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function setStatus(text, isError) {
  const s = document.getElementById("status");
  s.textContent = text || "";
  s.className = isError ? "error" : "";
}

function ago(ms) {
  if (!ms) return "";
  const d = Math.max(0, Date.now() - ms) / 1000;
  if (d < 60) return `${Math.round(d)} s ago`;
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  return new Date(ms).toLocaleString();
}

function askToken() {
  const main = document.getElementById("main");
  if (main.querySelector("[data-testid=token-form]")) return;
  if (view) { view(); view = null; }
  main.replaceChildren(document.getElementById("token-form").content.cloneNode(true));
  main.querySelector("form").addEventListener("submit", (e) => {
    e.preventDefault();
    localStorage.setItem(TOKEN_KEY, e.target.token.value);
    route();
  });
}

// ---- the session list -------------------------------------------------------

function sessionList(main) {
  const ctl = new AbortController();
  document.getElementById("where").textContent = "sessions";
  const body = el("tbody");
  const table = el("table", { class: "sessions", "data-testid": "sessions" },
    el("thead", {}, el("tr", {}, ["session", "state", "model", "turns", "events", "updated", "cwd"].map((h) => el("th", { text: h })))),
    body);
  const empty = el("p", { class: "empty", text: "No sessions in this store yet." });
  main.replaceChildren(table);
  const load = async () => {
    try {
      const r = await api("/sessions");
      const rows = lineage(r.sessions || []).map(({ s, depth }) => el("tr", { "data-testid": "session-row", "data-id": s.id, "data-depth": String(depth), "data-parent": s.parentSession || "" },
        el("td", { style: `padding-left: ${0.5 + depth * 1.25}em` },
          depth ? el("span", { class: "lineage", text: s.origin === "subagent" ? "↳ subagent " : "↳ fork " }) : null,
          el("a", { href: `#/s/${encodeURIComponent(s.id)}`, class: "mono", text: s.id })),
        el("td", {}, el("span", { class: `state ${s.state}`, text: s.state })),
        el("td", { text: [s.provider, s.model].filter(Boolean).join(" · ") }),
        el("td", { text: s.turns ?? "" }),
        el("td", { text: s.lastSeq === undefined || s.lastSeq < 0 ? "0" : String(s.lastSeq + 1) }),
        el("td", { text: ago(s.updatedAt ? Date.parse(s.updatedAt) || s.updatedAt : 0) }),
        el("td", { class: "mono", text: s.cwd || "" })));
      body.replaceChildren(...rows);
      if (!rows.length) main.append(empty); else empty.remove();
      setStatus("");
    } catch (err) {
      if (err.status !== 401) setStatus(`sessions: ${err.message}`, true);
    }
  };
  load();
  const timer = setInterval(load, 3000);
  return () => { ctl.abort(); clearInterval(timer); };
}

// lineage orders sessions as a tree: each root (no parent, or a parent
// not listed) by the list's order, then its children (forks and subagent
// children) below it, depth first; a cycle is cut where it closes.
function lineage(sessions) {
  const byId = new Map(sessions.map((s) => [s.id, s]));
  const kids = new Map();
  for (const s of sessions) {
    if (s.parentSession && byId.has(s.parentSession) && s.parentSession !== s.id) {
      if (!kids.has(s.parentSession)) kids.set(s.parentSession, []);
      kids.get(s.parentSession).push(s);
    }
  }
  const out = [], seen = new Set();
  const walk = (s, depth) => {
    if (seen.has(s.id)) return;
    seen.add(s.id);
    out.push({ s, depth });
    for (const k of kids.get(s.id) || []) walk(k, depth + 1);
  };
  for (const s of sessions) if (!s.parentSession || !byId.has(s.parentSession)) walk(s, 0);
  for (const s of sessions) walk(s, 0);
  return out;
}

// ---- one session -------------------------------------------------------------

// lineDiff returns the lines of a unified view of old -> new: {op, text}
// with op "=", "-" or "+", by the longest common subsequence (bounded:
// files too large for it are shown as all removed then all added).
function lineDiff(oldText, newText) {
  const lines = (t) => { const l = t.split("\n"); if (l.length > 1 && l[l.length - 1] === "") l.pop(); return l; };
  const a = oldText === null ? [] : lines(oldText);
  const b = lines(newText);
  if (a.length * b.length > 4e6) {
    return a.map((t) => ({ op: "-", text: t })).concat(b.map((t) => ({ op: "+", text: t })));
  }
  const n = a.length, m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push({ op: "=", text: a[i] }); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ op: "-", text: a[i++] });
    else out.push({ op: "+", text: b[j++] });
  }
  while (i < n) out.push({ op: "-", text: a[i++] });
  while (j < m) out.push({ op: "+", text: b[j++] });
  return out;
}

function renderDiff(path, oldText, newText) {
  const lines = lineDiff(oldText, newText);
  const box = el("div", { class: "diff mono", "data-testid": "diff", "data-path": path });
  const head = oldText === null ? `new file ${path}` : `${path}`;
  box.append(el("div", { class: "line ctx", text: head }));
  for (const l of lines) {
    const cls = l.op === "+" ? "add" : l.op === "-" ? "del" : "ctx";
    box.append(el("div", { class: `line ${cls}`, text: `${l.op === "=" ? " " : l.op} ${l.text}` }));
  }
  return box;
}

function textOf(content) {
  if (!Array.isArray(content)) return "";
  return content.map((b) => {
    if (b.type === "text" || b.type === "reasoning") return b.text || "";
    if (b.type === "tool-result") return textOf(b.content);
    return "";
  }).filter(Boolean).join("\n");
}

function usageLine(u) {
  if (!u || typeof u !== "object") return null;
  const parts = [];
  if (u.inputTokens !== undefined) parts.push(`in ${u.inputTokens}`);
  if (u.cacheReadTokens) parts.push(`cached ${u.cacheReadTokens}`);
  if (u.outputTokens !== undefined) parts.push(`out ${u.outputTokens}`);
  if (u.reasoningTokens) parts.push(`reasoning ${u.reasoningTokens}`);
  return parts.length ? el("div", { class: "usage", "data-testid": "usage", text: `tokens: ${parts.join(" · ")}` }) : null;
}

function sessionView(main, id) {
  const ctl = new AbortController();
  document.getElementById("where").textContent = id;
  const meta = el("div", { class: "meta", "data-testid": "meta" });
  const approvals = el("div", { class: "approvals", "data-testid": "approvals" });
  const transcript = el("div", { class: "transcript", "data-testid": "transcript" });
  const liveBox = el("div", { class: "live-area" });
  const seen = new Set(); // seqs rendered
  const calls = new Map(); // callId -> tool card
  const written = new Map(); // path -> last content written in this session
  let lastSeq = -1;
  let session = null;

  // The composer.
  const input = el("textarea", { name: "prompt", placeholder: "Message the agent (Enter sends, Shift+Enter for a new line)", "data-testid": "prompt" });
  const send = async (mode) => {
    const text = input.value.trim();
    if (!text) return;
    try {
      await api(`/sessions/${encodeURIComponent(id)}/messages`, { method: "POST", body: { text, mode } });
      input.value = "";
      setStatus(mode === "followup" ? "sent" : `${mode} sent`);
    } catch (err) { setStatus(`${mode}: ${err.message}`, true); }
  };
  const action = async (path, label) => {
    try { await api(`/sessions/${encodeURIComponent(id)}/${path}`, { method: "POST", body: {} }); setStatus(label); }
    catch (err) { setStatus(`${path}: ${err.message}`, true); }
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send("followup"); }
  });
  const composer = el("div", { class: "composer" }, el("form", { onsubmit: (e) => { e.preventDefault(); send("followup"); } },
    input,
    el("button", { type: "submit", class: "primary", "data-testid": "send", text: "Send" }),
    el("button", { type: "button", "data-testid": "steer", onclick: () => send("steer"), title: "reach the running turn's next step", text: "Steer" }),
    el("button", { type: "button", "data-testid": "inject", onclick: () => send("inject"), title: "add to the next step without waking the agent", text: "Inject" }),
    el("button", { type: "button", class: "danger", "data-testid": "cancel", onclick: () => action("cancel", "cancel sent"), text: "Cancel turn" }),
    el("button", { type: "button", "data-testid": "compact", onclick: () => action("compact", "compaction queued"), text: "Compact" })));

  main.replaceChildren(meta, approvals, transcript, liveBox, composer);

  const renderMeta = (s) => {
    const loop = s.loop || null;
    const items = [
      ["state", s.state + (loop && loop.state === "running" ? ` · turn ${loop.turn} step ${loop.step} running` : "")],
      ["model", [s.provider, s.model].filter(Boolean).join(" · ")],
      ["turns", s.turns],
      ["cwd", s.cwd],
    ];
    if (s.origin === "subagent") items.push(["subagent at depth", s.delegationDepth]);
    if (loop && loop.permissions) {
      const p = loop.permissions;
      items.push(["permissions", [p.sandboxMode, p.approvalPolicy].filter(Boolean).join(" · ")]);
    }
    const kids = items.filter(([, v]) => v !== undefined && v !== "").map(([k, v]) => el("span", {}, `${k} `, el("b", { text: String(v) })));
    if (s.parentSession) {
      kids.push(el("span", {}, "parent ", el("a", { href: `#/s/${encodeURIComponent(s.parentSession)}`, class: "mono", "data-testid": "parent-link", text: s.parentSession })));
    }
    for (const c of (loop && loop.calls) || []) {
      if (c.childSessionId) {
        kids.push(el("span", {}, `${c.name} ${c.state} `, el("a", { href: `#/s/${encodeURIComponent(c.childSessionId)}`, class: "mono", "data-testid": "child-link", text: c.childSessionId })));
      }
    }
    if (config.temporalUI && s.workflowId) {
      const base = config.temporalUI.replace(/\/$/, "");
      const href = `${base}/namespaces/${encodeURIComponent(config.namespace)}/workflows/${encodeURIComponent(s.workflowId)}` +
        (s.runId ? `/${encodeURIComponent(s.runId)}/history` : "");
      kids.push(el("a", { href, target: "_blank", rel: "noopener", "data-testid": "temporal-link", text: "open in Temporal UI" }));
    }
    meta.replaceChildren(...kids);
  };

  // alwaysRule is the allow rule "Always allow" asks for, as `starter
  // approve --always` derives it: a command's first word (and its second
  // when that is a plain word, not a flag), a written path's directory, or
  // every call of another tool. null when the call gives none.
  const SHELL = /[;&|<>()$`\\"'*?[\]#~=%{}\n\r\t!]/;
  const alwaysRule = (a) => {
    let args = null;
    try { args = JSON.parse(a.arguments); } catch (_) { args = null; }
    if (a.tool === "run_command") {
      const words = (args && typeof args.command === "string" ? args.command : "").trim().split(/\s+/).filter(Boolean);
      if (!words.length || SHELL.test(words[0])) return null;
      const two = words.length > 1 && !words[1].startsWith("-") && !SHELL.test(words[1]);
      return { tool: a.tool, commandPrefix: two ? `${words[0]} ${words[1]}` : words[0] };
    }
    if (a.tool === "write_file") {
      const p = args && typeof args.path === "string" ? args.path : "";
      if (!p || p.startsWith("/")) return null;
      const parts = [];
      for (const seg of p.split("/")) {
        if (seg === "" || seg === ".") continue;
        if (seg === "..") { if (!parts.length) return null; parts.pop(); } else parts.push(seg);
      }
      parts.pop();
      return { tool: a.tool, pathPrefix: parts.length ? parts.join("/") : "." };
    }
    return a.tool ? { tool: a.tool } : null;
  };

  const renderApprovals = (list) => {
    approvals.replaceChildren(...(list || []).map((a) => {
      const rule = alwaysRule(a);
      const decide = async (outcome, remember) => {
        const body = { outcome };
        if (remember) body.remember = remember;
        try {
          // A child session's question, listed by its parent, is decided
          // in the child.
          await api(`/sessions/${encodeURIComponent(a.sessionId || id)}/approvals/${encodeURIComponent(a.id)}`, { method: "POST", body });
          setStatus(`${a.tool}: ${outcome}`);
        } catch (err) { setStatus(`decide: ${err.message}`, true); }
        refresh();
      };
      return el("div", { class: "approval-card", "data-testid": "approval", "data-id": a.id, "data-call": a.callId },
        el("div", {}, el("b", { text: a.tool }), a.sessionId ? ` (subagent ${a.sessionId})` : "", " wants to run ", el("code", { text: a.arguments })),
        a.reason ? el("div", { class: "why", text: a.reason }) : null,
        a.escalation ? el("div", { class: "why", text: `asks for ${a.escalation}` }) : null,
        a.deadlineMs ? el("div", { class: "why", text: `rejected automatically at ${new Date(a.deadlineMs).toLocaleString()}` }) : null,
        el("div", {},
          el("button", { class: "primary", "data-testid": "approve", onclick: () => decide("allowed-once", null), text: "Approve" }),
          rule ? el("button", { "data-testid": "approve-always", title: `from now on allow ${rule.commandPrefix ? `commands starting "${rule.commandPrefix}"` : rule.pathPrefix ? `writes under ${rule.pathPrefix}` : `every ${rule.tool} call`}`,
            onclick: () => decide("allowed-once", rule), text: "Always allow" }) : null,
          el("button", { class: "danger", "data-testid": "reject", onclick: () => decide("rejected", null), text: "Reject" })));
    }));
  };

  let refreshing = false;
  const refresh = async () => {
    if (refreshing) return;
    refreshing = true;
    try {
      session = await api(`/sessions/${encodeURIComponent(id)}`);
      renderMeta(session);
      renderApprovals(session.loop ? session.loop.approvals : []);
    } catch (err) {
      if (err.status !== 401) setStatus(`session: ${err.message}`, true);
    } finally { refreshing = false; }
  };

  // The transcript.
  const add = (node) => { transcript.append(node); };
  const toolCard = (callId, name, args) => {
    let card = calls.get(callId);
    if (card) return card;
    const result = el("div", { class: "result pending", "data-testid": "tool-result", text: "running…" });
    const body = el("div", { class: "body" });
    card = el("div", { class: "tool", "data-testid": "tool", "data-call": callId },
      el("div", { class: "head" }, el("span", { class: "name", text: name || "tool" }), el("span", { class: "args mono", text: args || "" })),
      body, result);
    card.result = result;
    card.body = body;
    calls.set(callId, card);
    add(card);
    return card;
  };

  const onEvent = (ev) => {
    if (typeof ev.seq === "number") {
      if (seen.has(ev.seq)) return;
      seen.add(ev.seq);
      lastSeq = Math.max(lastSeq, ev.seq);
    }
    const d = ev.data || {};
    switch (ev.type) {
      case "turn/start":
        add(el("div", { class: "turn-sep", text: `turn ${d.turn}` }));
        break;
      case "turn/end": {
        const kind = d.reason && d.reason.kind;
        add(el("div", { class: "msg notice", "data-testid": "turn-end", text: `turn ${d.turn} ended: ${kind}` }));
        liveBox.replaceChildren();
        refresh();
        break;
      }
      case "user/message": {
        const src = d.source && d.source.kind;
        if (src === "tool") break;
        add(el("div", { class: "msg user", "data-testid": "user-message" },
          el("div", { class: "who", text: src && src !== "user" ? `user (${src})` : "user" }),
          el("div", { class: "text", text: textOf(d.content) })));
        break;
      }
      case "assistant/message": {
        const m = d.message || {};
        const text = textOf((m.content || []).filter((b) => b.type === "text"));
        liveBox.querySelectorAll(`[data-turn="${d.turn}"][data-step="${d.step}"]`).forEach((n) => n.remove());
        if (text) {
          add(el("div", { class: "msg assistant", "data-testid": "assistant-message" },
            el("div", { class: "who", text: `assistant · turn ${d.turn} step ${d.step}` }),
            el("div", { class: "text", text }),
            usageLine(d.usage)));
        } else if (d.usage) {
          add(el("div", { class: "msg notice" }, usageLine(d.usage)));
        }
        break;
      }
      case "tool/call": {
        const card = toolCard(d.callId, d.name, d.arguments);
        if (d.name === "write_file") {
          try {
            const a = JSON.parse(d.arguments);
            if (typeof a.path === "string" && typeof a.content === "string") {
              card.body.replaceChildren(renderDiff(a.path, written.has(a.path) ? written.get(a.path) : null, a.content));
              card.pendingWrite = a;
            }
          } catch (_) { /* arguments that are not JSON are shown as they are */ }
        }
        break;
      }
      case "tool/result": {
        const m = d.message || {};
        const callId = m.source && m.source.callId;
        const card = toolCard(callId, "", "");
        const isError = !!d.error || (m.content || []).some((c) => c.isError);
        card.result.className = `result${isError ? " error" : ""}`;
        card.result.replaceChildren(el("pre", { text: textOf(m.content) || (isError ? "error" : "ok") }));
        if (!isError && card.pendingWrite) written.set(card.pendingWrite.path, card.pendingWrite.content);
        break;
      }
      case "approval/asked": {
        const card = d.callId ? calls.get(d.callId) : null;
        const line = el("div", { class: "approval", "data-approval": d.id, text: `approval asked${d.reason ? `: ${d.reason}` : ""}` });
        if (card) card.insertBefore(line, card.result); else add(el("div", { class: "msg notice" }, line));
        refresh();
        break;
      }
      case "approval/decided": {
        const line = transcript.querySelector(`[data-approval="${CSS.escape(d.id)}"]`);
        if (line) line.textContent += ` → ${d.outcome}`;
        else add(el("div", { class: "msg notice", text: `approval ${d.outcome}` }));
        refresh();
        break;
      }
      case "compaction/summary":
        add(el("div", { class: "msg notice", text: `compacted the conversation (${d.shadowedSeqs ? d.shadowedSeqs.length : "some"} events summarised)` }));
        break;
      case "session/end-seed":
        add(el("div", { class: "msg notice", text: "the session was resumed here" }));
        break;
      default:
        break;
    }
  };

  // The live text of the running model call: one block per turn and step,
  // replaced when a retried attempt starts again.
  const onLive = (msg) => {
    let d;
    try { d = JSON.parse(msg.data); } catch (_) { return; }
    const key = `[data-turn="${d.turn}"][data-step="${d.step}"]`;
    let box = liveBox.querySelector(key);
    if (msg.event === "end") { if (box) box.remove(); return; }
    if (!box || (d.attempt !== undefined && box.dataset.attempt !== String(d.attempt)) || msg.event === "reset") {
      if (box) box.remove();
      if (msg.event === "reset") return;
      box = el("div", { class: "msg live", "data-testid": "live-text", "data-turn": d.turn, "data-step": d.step, "data-attempt": d.attempt ?? "" },
        el("div", { class: "who", text: `assistant · turn ${d.turn} step ${d.step} · streaming` }),
        el("div", { class: "text" }));
      box.offsets = { text: 0, reasoning: 0 };
      liveBox.append(box);
    }
    if (msg.event !== "chunk" || d.kind === "reasoning") return;
    const text = box.querySelector(".text");
    const have = text.textContent.length;
    const off = typeof d.offset === "number" ? d.offset : have;
    if (off + d.text.length <= have) return;
    text.textContent = text.textContent.slice(0, Math.min(have, off)) + d.text;
    window.scrollTo(0, document.body.scrollHeight);
  };

  refresh();
  follow(`/sessions/${encodeURIComponent(id)}/events`, (m) => {
    if (m.event !== "event") return;
    try { onEvent(JSON.parse(m.data)); } catch (err) { setStatus(`event: ${err.message}`, true); }
  }, ctl.signal, "");
  follow(`/sessions/${encodeURIComponent(id)}/live`, onLive, ctl.signal, "");
  const timer = setInterval(() => { if (session && session.state === "live") refresh(); }, 2000);
  return () => { ctl.abort(); clearInterval(timer); };
}

// ---- routing ------------------------------------------------------------------

function route() {
  if (view) { view(); view = null; }
  setStatus("");
  const main = document.getElementById("main");
  const m = location.hash.match(/^#\/s\/(.+)$/);
  view = m ? sessionView(main, decodeURIComponent(m[1])) : sessionList(main);
}

async function start() {
  try {
    const res = await fetch("config.json");
    if (res.ok) config = Object.assign(config, await res.json());
  } catch (_) { /* the defaults serve */ }
  window.addEventListener("hashchange", route);
  route();
}

start();
