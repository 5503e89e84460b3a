// MotorMind operator console. Renders the server's view (pushed over Server-Sent Events) and sends
// operator actions. Untrusted text is only ever set as textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const store = window.sessionStorage;
if (location.hash.startsWith("#token=")) {
  store.setItem("mm-token", decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, "", location.pathname);       // the token leaves the address bar
}
// The control key is the server's: it comes with the answer to the action that made this page the
// holder ("<id>.<mac>"); the state names the holder by the id alone (motormind/console/server.py).
const controlKey = () => store.getItem("mm-control") || "";
const myId = () => controlKey().split(".")[0];
$("token").value = store.getItem("mm-token") || "";
$("name").value = store.getItem("mm-name") || "operator";
$("token").addEventListener("change", () => { store.setItem("mm-token", $("token").value.trim()); render(last); });
$("name").addEventListener("change", () => store.setItem("mm-name", $("name").value.trim() || "operator"));

let last = null;

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of kids.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}
const st = (s) => el("span", { class: "st st-" + String(s || "").split(" ")[0] }, s || "?");
const fmt = (v) => (typeof v === "object" ? JSON.stringify(v) : String(v));

function show(target, text, ok) {
  const r = typeof target === "string" ? $(target) : target;
  r.textContent = text;
  r.classList.remove("ok", "error");
  r.classList.add("result", ok ? "ok" : "error");
}

async function act(action, body, target = "action-result") {
  const token = $("token").value.trim();
  try {
    const resp = await fetch("/api/action/" + action, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-MotorMind-Token": token,
                 "X-MotorMind-Control": controlKey(), "X-MotorMind-Name": $("name").value.trim() || "operator" },
      body: JSON.stringify(body || {}),
    });
    const out = await resp.json();
    if (out.control) { store.setItem("mm-control", out.control); render(last); }
    show(target, out.ok ? `${action}: ${out.detail || "ok"}` : `${action} refused: ${out.error}`, out.ok);
    return out;
  } catch (e) {
    show(target, `${action}: ${e}`, false);
    return { ok: false };
  }
}

// -- controls -------------------------------------------------------------------------------
$("btn-estop").addEventListener("click", () => act("estop"));
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape") { ev.preventDefault(); act("estop"); }
});
$("btn-reset").addEventListener("click", () => act("reset"));
$("btn-claim").addEventListener("click", () => act("claim", { force: true }));
$("btn-pause").addEventListener("click", () => act("pause"));
$("btn-resume").addEventListener("click", () => act("resume"));
$("btn-cancel").addEventListener("click", () => act("cancel"));
$("form-instruction").addEventListener("submit", (ev) => {
  ev.preventDefault();
  act("instruction", { text: $("instruction").value });
});
// a toggle the operator just set is not reset from a state rendered before the server answered
const pendingToggles = new Set();
function toggle(id, action, body) {
  pendingToggles.add(id);
  act(action, body).finally(() => pendingToggles.delete(id));
}
$("approval").addEventListener("change", (ev) => toggle("approval", "approval", { on: ev.target.checked }));
$("take-executor").addEventListener("change", (ev) => toggle("take-executor", "takeover", { role: "executor", on: ev.target.checked }));
$("take-verifier").addEventListener("change", (ev) => toggle("take-verifier", "takeover", { role: "verifier", on: ev.target.checked }));

function jog(command) { return act("jog", { command }, "jog-result"); }
const mm = () => Number($("jog-mm").value);
const deg = () => Number($("jog-deg").value);
const JOG = [
  ["forward", "+x forward"], ["back", "-x back"], ["left", "+y left"], ["right", "-y right"],
  ["up", "+z up"], ["down", "-z down"],
];
for (const [dir, label] of JOG) {
  $("jog-pad").append(el("button", { id: "jog-" + dir, onclick: () => jog({ op: "move", direction: dir, distance_mm: mm() }) }, label));
}
$("jog-pad").append(
  el("button", { id: "jog-yaw-plus", onclick: () => jog({ op: "rotate", axis: "yaw", angle_deg: deg() }) }, "yaw +"),
  el("button", { id: "jog-yaw-minus", onclick: () => jog({ op: "rotate", axis: "yaw", angle_deg: -deg() }) }, "yaw −"),
  el("button", { id: "jog-open", onclick: () => jog({ op: "gripper", action: "open" }) }, "open"),
  el("button", { id: "jog-close", onclick: () => jog({ op: "gripper", action: "close" }) }, "close"),
);

// -- rendering ------------------------------------------------------------------------------
function renderCameras(s) {
  const box = $("cameras");
  const cams = Object.entries(s.frames || {});
  if (!cams.length) return;
  if (box.querySelector(".muted")) box.textContent = "";
  for (const [cam, f] of cams) {
    let img = box.querySelector(`img[data-camera="${CSS.escape(cam)}"]`);
    if (!img) {
      const fig = el("figure", {}, img = el("img", { "data-camera": cam, alt: cam }), el("figcaption", {}, cam));
      box.append(fig);
    }
    if (img.dataset.seq !== String(f.seq)) {
      img.dataset.seq = String(f.seq);
      img.src = `/api/frame/${encodeURIComponent(cam)}?seq=${f.seq}`;
      img.nextSibling.textContent = `${cam} · frame ${f.seq} · ${f.t.toFixed(1)} s`;
    }
  }
}

// an approval's answer is the Controller's verdict, shown in the approval panel: a refusal beside the
// batch (which still waits), an acceptance under the panel's heading (the batch leaves the panel)
async function decide(action, body, out) {
  const r = await act(action, body, "pending-result");
  if (!r.ok) show(out, $("pending-result").textContent, false);
  else out.textContent = "";
  return r;
}

function renderPending(s, canAct) {
  const box = $("pending");
  const items = (s.desk && s.desk.pending) || [];
  const keep = new Set(items.map((p) => p.id));
  for (const node of [...box.children]) if (!keep.has(node.dataset.id)) node.remove();
  if (!items.length) { if (!box.children.length) box.append(el("div", { class: "muted", "data-id": "" }, "nothing")); return; }
  const none = box.querySelector('[data-id=""]'); if (none) none.remove();
  for (const p of items) {
    if (box.querySelector(`[data-id="${CSS.escape(p.id)}"]`)) continue;
    let node;
    if (p.kind === "review") {
      const out = el("div", { class: "result approval-result" });   // the Controller's verdict, here
      const ta = el("textarea", { rows: 7, class: "edit" }, JSON.stringify({ commands: p.batch.commands }, null, 1));
      const note = el("input", { placeholder: "note (optional)", class: "note" });
      node = el("div", { class: "pending-item review", "data-id": p.id },
        el("div", {}, st("awaiting approval"), ` batch ${p.batch.batch_id} for ${p.batch.subgoal_id}`),
        ta, note,
        el("div", { class: "row" },
          el("button", { class: "approve", onclick: () => decide("approve", { id: p.id, note: note.value }, out) }, "approve"),
          el("button", { class: "approve-edited", onclick: () => decide("approve", { id: p.id, batch: ta.value, note: note.value }, out) }, "approve edited"),
          el("button", { class: "reject", onclick: () => decide("reject", { id: p.id, note: note.value }, out) }, "reject")),
        el("div", { class: "why-disabled muted" }), out);
    } else {
      const c = p.context || {};
      const hint = p.role === "executor"
        ? '{"commands": [{"op": "move", "direction": "down", "distance_mm": 10}, {"op": "done"}]}'
        : '{"achieved": true, "evidence": "what I see"}';
      const ta = el("textarea", { rows: 5, class: "answer", placeholder: hint });
      node = el("div", { class: "pending-item answer", "data-id": p.id },
        el("div", {}, st("awaiting"), ` you are the ${p.role}: subgoal ${c.subgoal_id || "?"} — ${c.subgoal || ""}`),
        el("div", { class: "muted" }, `criterion: ${c.criterion || ""}`),
        p.error ? el("div", { class: "reason" }, `your last answer was refused: ${p.error}`) : null,
        ta, el("button", { class: "send-answer", onclick: () => act("answer", { id: p.id, answer: ta.value }) }, `send as ${p.role}`));
    }
    box.append(node);
  }
  const cannot = (s.status && s.status.approve) || "";    // e.g. latched: approving cannot run now
  for (const b of box.querySelectorAll("button")) {
    const approving = b.classList.contains("approve") || b.classList.contains("approve-edited");
    b.disabled = !canAct || (approving && !!cannot);
    b.title = approving && cannot ? `cannot approve: ${cannot}` : "";
  }
  for (const n of box.querySelectorAll(".why-disabled")) n.textContent = cannot ? `approve disabled: ${cannot}` : "";
}

// -- the manual VLM endpoint: the queue's waiting requests; the one opened, answered from here --------
let opened = null;                                 // the request opened: its id and role
const secs = (v) => (typeof v === "number" ? `${v.toFixed(0)} s` : "?");
function budgetText(b) {
  if (!b || !Object.keys(b).length) return "";
  const n = (v) => typeof v === "number";           // what the episode does not count is null: left out
  const parts = [];
  if (n(b.steps_left)) parts.push(`${b.steps_left}${n(b.step_budget) ? "/" + b.step_budget : ""} steps left`);
  if (n(b.wall_s_left)) parts.push(`${secs(b.wall_s_left)}${n(b.wall_budget_s) ? " of " + secs(b.wall_budget_s) : ""} left`);
  if (n(b.batches_used)) parts.push(`batch ${b.batches_used}${n(b.batch_budget) ? "/" + b.batch_budget : ""}`);
  return parts.join(" · ");
}

async function openRequest(id) {
  const r = await act("manual_open", { id }, "manual-result");
  if (!r.ok) return;
  const q = r.request;
  opened = { id: q.id, role: q.role };
  $("manual-open").hidden = false;
  $("manual-title").textContent = `${q.id}: you are the ${q.role}` + (q.attempt ? ` (repair round ${q.attempt})` : "")
    + ` · ${q.state} · ${secs(q.time_left_s)} to answer` + (budgetText(q.budget) ? ` · ${budgetText(q.budget)}` : "");
  const box = $("manual-messages");
  box.textContent = "";
  const images = Object.fromEntries((q.images || []).map((i) => [i.file, i]));
  for (const m of q.messages || []) {
    const parts = typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content || []);
    const body = [];
    for (const p of parts) {
      if (p.type === "text") body.push(el("pre", {}, p.text || ""));
      else if (p.type === "image_url") {
        const im = images[(p.image_url || {}).url] || {};
        body.push(el("figure", {}, el("img", { src: im.url || "", alt: im.camera || "image", "data-camera": im.camera || "" }),
          el("figcaption", {}, `${im.camera || "?"} · ${im.width || "?"}×${im.height || "?"} px as sent`)));
      }
    }
    const chars = parts.filter((p) => p.type === "text").reduce((n, p) => n + (p.text || "").length, 0);
    box.append(el("details", { class: "msg msg-" + m.role, open: m.role !== "system" },
      el("summary", {}, `${m.role} (${chars} characters${body.some((b) => b.tagName === "FIGURE") ? ", images" : ""})`), ...body));
  }
  $("manual-schema").textContent = JSON.stringify(q.schema, null, 1);
  $("manual-answer").value = "";
  render(last);
}
$("manual-send").addEventListener("click", async () => {
  if (!opened) return;
  const r = await act("manual_answer", { id: opened.id, answer: $("manual-answer").value }, "manual-result");
  if (r.ok) { opened = null; $("manual-open").hidden = true; $("manual-answer").value = ""; render(last); }
});
$("manual-close").addEventListener("click", () => { opened = null; $("manual-open").hidden = true; render(last); });

function renderManual(s, canAct) {
  const m = s.manual || {};
  const used = !!m.queue || !!s.manual_used;
  $("manual").hidden = !used;
  if (!used) return;
  const items = m.waiting || [];
  $("manual-note").textContent = !m.queue ? `this episode's VLM is answered by hand, but ${m.note || "its queue is not watched here"}`
    : (m.note || (items.length ? "" : `nothing waiting (queue ${m.queue})`)) + (canAct ? "" : " · read-only: take control to answer");
  const box = $("manual-list");                    // rows kept by id (a click never meets a row being replaced)
  const keep = new Set(items.map((i) => i.id));
  for (const row of [...box.querySelectorAll("tr")]) if (!keep.has(row.dataset.id)) row.remove();
  for (const it of items) {
    let row = [...box.querySelectorAll("tr")].find((r) => r.dataset.id === it.id);
    if (!row) {
      row = el("tr", { "data-id": it.id, "data-role": it.role },
        el("td", {}, el("b", {}, it.role)), el("td", {}, it.id), el("td", { class: "age" }),
        el("td", { class: "left" }), el("td", { class: "muted budget" }),
        el("td", {}, el("button", { class: "manual-open-btn", onclick: () => openRequest(it.id) }, "open")));
      box.append(row);
    }
    row.className = opened && opened.id === it.id ? "opened" : "";
    row.querySelector(".age").textContent = `age ${secs(it.age_s)}`;
    row.querySelector(".left").textContent = `${secs(it.time_left_s)} left`;
    row.querySelector(".left").className = "left" + ((it.time_left_s ?? 99) < 30 ? " reason" : "");
    row.querySelector(".budget").textContent = budgetText(it.budget);
    const b = row.querySelector("button");
    b.disabled = !canAct;
    b.title = canAct ? "" : "take control to answer";
  }
  if (opened && !items.some((i) => i.id === opened.id)) {
    $("manual-title").textContent = `${opened.id}: no longer waiting (answered, expired or ended)`;
  }
  $("manual-send").disabled = !canAct || !opened;
}

function renderQueue(s) {
  const box = $("queue");
  box.textContent = "";
  for (const b of s.batches || []) {
    const div = el("div", { class: "batch", "data-batch": b.batch_id },
      el("div", {}, st(b.status), el("b", {}, b.batch_id), ` ${b.subgoal_id || ""} `, el("span", { class: "muted" }, b.source || ""),
        b.reason ? el("div", { class: "reason" }, b.reason) : null));
    for (const c of b.commands || []) {
      const ach = c.achieved && c.achieved.translation_mm ? ` → achieved ${fmt(c.achieved.translation_mm)} mm` : "";
      div.append(el("div", { class: "cmd", title: fmt(c.command) }, st(c.status), `[${c.index}] ${c.text || fmt(c.command)}${ach}`,
        c.reason ? el("span", { class: c.status === "done" ? "muted" : "reason" }, ` — ${c.reason}`) : null));
    }
    box.append(div);
  }
}

function list(id, items, line) {
  const box = $(id);
  box.textContent = "";
  for (const it of items || []) box.append(line(it));
}

function render(s) {
  if (!s) return;
  last = s;
  const ep = s.episode || {};
  $("transport").textContent = s.transport ? `· ${s.transport}` : "";
  $("episode").textContent = ep.status === "idle" ? "no episode running"
    : `${ep.status}: “${ep.instruction || ""}” · brain ${ep.brain || "?"}${ep.privileged ? " [oracle: privileged simulator state]" : ""}`
      + (ep.outcome ? ` · ${ep.outcome}: ${ep.reason}` : "");
  const desk = s.desk || {};
  const holder = desk.holder;
  const mine = !!holder && !!myId() && holder.client === myId();
  const hasToken = !!$("token").value.trim();
  $("holder").textContent = holder ? `in control: ${holder.name}${mine ? " (you)" : ""}` : "nobody in control";
  $("mode").textContent = !hasToken ? "read-only" : mine ? "operator" : "token given";
  $("mode").className = "badge " + (mine ? "op" : "ro");
  const ctl = s.controller || {};
  const stt = s.status || {};
  const es = $("estop-state");
  // what the server will act on: "pausing…" until the episode is parked, then "paused"
  es.textContent = ctl.estop ? `E-STOP LATCHED: ${ctl.estop_reason}`
    : stt.pause === "pausing" ? `pausing… ${stt.pause_note || ""}` : stt.pause === "paused" ? "paused" : "ready";
  es.title = es.textContent;                       // the box has a fixed size: the full text on hover
  es.className = "estop-state" + (ctl.estop ? " latched" : "");
  const canAct = hasToken && (!holder || mine);
  for (const b of document.querySelectorAll(".controls button, .controls input, #jog-pad button, #btn-reset")) b.disabled = !canAct;
  $("btn-estop").disabled = false;                 // always there; without the token the server refuses it
  const jogWhy = stt.jog || "";                    // why a jog cannot run now (latched, a batch executing)
  for (const b of document.querySelectorAll("#jog-pad button")) {
    b.disabled = !canAct || !!jogWhy;
    b.title = jogWhy ? `cannot jog: ${jogWhy}` : "";
  }
  $("jog-note").textContent = jogWhy ? `jog disabled: ${jogWhy}` : "";
  if (ctl.estop) { $("btn-resume").disabled = true; $("btn-resume").title = "cannot resume: the emergency stop is latched: reset it first"; }
  else $("btn-resume").title = "";
  const shown = { "approval": !!desk.approval, "take-executor": (desk.takeover || []).includes("executor"),
                  "take-verifier": (desk.takeover || []).includes("verifier") };
  for (const [id, on] of Object.entries(shown)) if (!pendingToggles.has(id)) $(id).checked = on;

  renderCameras(s);
  const m = s.measured || {};
  list("measured", Object.entries(m), ([k, v]) => el("tr", {}, el("td", {}, k), el("td", { "data-key": k }, fmt(v))));
  list("plan", s.plan, (sg) => el("li", { "data-subgoal": sg.id }, st(sg.status), el("b", {}, sg.id), ` ${sg.description} `,
    el("span", { class: "muted" }, `(${sg.success_criterion})`)));
  renderPending(s, canAct);
  renderManual(s, canAct);
  renderQueue(s);
  list("alerts", s.alerts, (a) => el("li", { class: "lvl-warn" }, `${a.t.toFixed(1)} s ${a.source}: ${a.text}`));
  list("verdicts", s.verdicts, (v) => el("li", { class: v.achieved ? "lvl-ok" : "lvl-warn" },
    `${v.t.toFixed(1)} s ${v.subgoal_id}: ${v.achieved ? "achieved" : "REJECTED"} — ${v.evidence} (${v.brain})`));
  const mem = s.memory || {};
  $("memory").textContent = (mem.summary || "") + (mem.facts || []).map((f) => "\n• " + f).join("");
  const tot = s.vlm_totals || {};
  $("vlm-totals").textContent = `${tot.calls || 0} calls · ${(tot.latency_s || 0).toFixed(2)} s · ${tot.input_tokens || 0}/${tot.output_tokens || 0} tokens`;
  list("vlm", s.vlm, (c) => el("tr", { class: c.ok ? "" : "lvl-warn" }, el("td", {}, `${c.t.toFixed(1)} s`), el("td", {}, c.role),
    el("td", {}, c.brain), el("td", {}, `${(c.latency_s || 0).toFixed(3)} s`), el("td", {}, `${c.input_tokens}/${c.output_tokens} tok`),
    el("td", {}, c.ok ? "ok" : `refused: ${c.error}`)));
  list("timeline", s.timeline, (e) => el("li", { class: "lvl-" + e.level }, `${e.t.toFixed(1)} s `, el("b", {}, e.kind), ` ${e.text}`));
}

function connect() {
  const es = new EventSource("/api/stream");
  es.addEventListener("state", (ev) => { $("conn").textContent = ""; render(JSON.parse(ev.data)); });
  es.onerror = () => { $("conn").textContent = "connection lost; retrying… (the last state stays shown)"; };
}
fetch("/api/state").then((r) => r.json()).then(render).catch(() => {});
connect();
