// Agent View: play one leased episode through the reference API (/api/shop_agent), as an agent would.
// Dialogue mode (shopper=rule): the shopper's opening, each question and reply in order, and an input that asks
// through the same API (the canonical action ask_user[QUESTION]). Every text goes in through textContent.
"use strict";

const API = "/api/shop_agent";
const $ = (id) => document.getElementById(id);
let lease = null;        // {env_idx, lease_id} while this page holds a session
let lastAction = "";
let taskTouched = false;  // the user chose a task id (typed, picked or started one)
let tasksById = new Map();  // task_id -> {has_persona, preview}, once /v1/tasks has answered
let dialogueMode = false;  // the running episode has a shopper
const ASK_PREFIX = "ask_user[";

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

async function call(body) {
  const response = await apiFetch(API, {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  });
  const payload = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
  if (!response.ok || payload.error) {
    throw new Error(`HTTP ${response.status}: ${payload.error || "unexpected response"}`);
  }
  return payload.result;
}

async function health() {
  const badge = $("health");
  try {
    const info = await (await apiFetch("/healthz")).json();
    badge.textContent = `ready · ${info.free_slots}/${info.environment_slots} slots free · ${info.tasks} tasks`;
    badge.className = "badge ok";
  } catch (err) {
    badge.textContent = "service unreachable";
    badge.className = "badge bad";
  }
}

async function loadTasks() {
  try {
    const tasks = [];
    for (let offset = 0; offset !== null;) {  // /v1/tasks is paginated
      const page = await (await apiFetch(`/v1/tasks?offset=${offset}&limit=2000`)).json();
      tasks.push(...page.tasks);
      offset = page.next_offset;
    }
    const list = $("task-ids");
    const select = $("task-select");
    for (const task of tasks) {
      tasksById.set(task.task_id, task);
      const option = document.createElement("option");
      option.value = String(task.task_id);
      list.appendChild(option);
      const entry = document.createElement("option");
      entry.value = String(task.task_id);
      select.appendChild(entry);
    }
    labelTasks();
    // the list may arrive after the user typed an id or started a task: never overwrite their choice
    if (tasks.length && !taskTouched && !lease) $("task-id").value = String(tasks[0].task_id);
    select.value = $("task-id").value;
    select.addEventListener("change", () => { taskTouched = true; $("task-id").value = select.value; });
  } catch (err) {
    showError(`cannot list tasks: ${err.message}`);
  }
}

function shopperChosen() {
  return $("shopper").value;
}

// In dialogue mode the instruction is the shopper's secret: the picker then shows no preview of it.
function labelTasks() {
  const dialogue = Boolean(shopperChosen());
  for (const entry of $("task-select").options) {
    const task = tasksById.get(Number(entry.value));
    if (!task) continue;
    const preview = dialogue ? "" : ` · ${task.preview}`;
    entry.textContent = `${task.task_id}${task.has_persona ? " · persona" : ""}${preview}`;
  }
}

function chooseShopper() {
  const dialogue = Boolean(shopperChosen());
  if (dialogue) $("interaction-mode").value = "multi_turn";  // a shopper implies multi_turn (40 turns)
  $("interaction-mode").disabled = dialogue;
  labelTasks();
}

function dialogueEntry(speaker, text, cls) {
  const item = document.createElement("li");
  item.className = cls;
  const who = document.createElement("span");
  who.className = "speaker";
  who.textContent = speaker;
  const said = document.createElement("span");
  said.className = "said";
  said.textContent = text;
  item.append(who, said);
  const list = $("dialogue");
  list.appendChild(item);
  list.scrollTop = list.scrollHeight;  // the latest exchange stays in view
  return item;
}

// One step's share of the dialogue: the question the environment saw (its feedback's action) and the reply,
// or the rejection code when the question was refused (empty, too long, after the limit).
function recordDialogue(result) {
  if (!dialogueMode) return;
  const feedback = result.action_feedback || {};
  const action = typeof feedback.action === "string" ? feedback.action : "";
  if (!action.toLowerCase().startsWith(ASK_PREFIX) || !action.endsWith("]")) return;
  const question = action.slice(ASK_PREFIX.length, -1);
  if (feedback.valid && typeof result.shopper_reply === "string") {
    dialogueEntry("问", question, "agent");
    dialogueEntry("答", result.shopper_reply, "shopper");
  } else {
    const item = dialogueEntry("问", question, "agent invalid");
    const why = document.createElement("span");
    why.className = "rejected";
    why.textContent = ` ✗ ${feedback.reason || "rejected"}`;
    item.appendChild(why);
  }
}

// ask_user is offered while the observation's dialogue block says so (never after the limit or the end).
function renderAsk(result) {
  const state = result.observation_state || {};
  const block = state.dialogue;
  const open = Boolean(lease) && dialogueMode && !result.done && Boolean(block && block.ask_user_available);
  $("ask-input").disabled = !open;
  $("ask-button").disabled = !open;
  if (!dialogueMode) return;
  const counted = block ? `${block.questions_asked}/${block.max_questions} questions` : "";
  $("dialogue-count").textContent = counted;
  let note = "ask_user offered";
  if (result.done) note = "episode over";
  else if (!open) note = "ask_user not offered: the question limit is reached";
  $("ask-note").textContent = counted ? `${note} · ${counted}` : note;
}

function setLease(next) {
  lease = next;
  $("release").disabled = !lease;
  $("lease").textContent = lease ? `environment ${lease.env_idx} · lease ${lease.lease_id.slice(0, 8)}…` : "no session";
}

function renderPage(result) {
  $("observation").textContent = result.observation;
  $("observation-state").textContent = pretty(result.observation_state);
  $("raw").textContent = pretty(result);
  const state = result.observation_state || {};
  const done = Boolean(result.done);
  $("search-box").hidden = done || !state.search_available;
  const actions = $("actions");
  actions.replaceChildren();
  for (const value of done ? [] : (state.actions || [])) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "action";
    button.dataset.value = value;
    button.textContent = value;
    button.addEventListener("click", () => act(`click[${value}]`));
    actions.appendChild(button);
  }
  if (done) {
    const note = document.createElement("p");
    note.className = "muted";
    note.textContent = "episode over";
    actions.appendChild(note);
  }
  renderAsk(result);
}

function renderFeedback(feedback) {
  const box = $("feedback");
  if (!feedback) {
    box.textContent = "—";
    box.className = "feedback";
    return;
  }
  const missing = feedback.missing_option_axes ? ` (missing: ${feedback.missing_option_axes.join(", ")})` : "";
  box.textContent = `${feedback.valid ? "✓" : "✗"} ${feedback.reason} · ${feedback.message}${missing}`;
  box.className = `feedback ${feedback.valid ? "valid" : "invalid"}`;
}

function addTrace(action, result) {
  const item = document.createElement("li");
  const feedback = result.action_feedback || {};
  item.className = feedback.valid === false ? "invalid" : "";
  item.textContent = `${action} → ${feedback.reason || result.message}${result.done ? " · done" : ""}`;
  $("trace").appendChild(item);
}

function row(table, label, value, cls) {
  const tr = document.createElement("tr");
  const th = document.createElement("th");
  th.textContent = label;
  const td = document.createElement("td");
  td.textContent = value;
  if (cls) td.className = cls;
  tr.append(th, td);
  table.appendChild(tr);
}

function fmt(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function renderReward(result) {
  const panel = $("reward-panel");
  panel.replaceChildren();
  const detail = result.reward_detail || {};
  const purchase = result.purchase || {};
  const goal = result.goal || {};
  const big = document.createElement("p");
  big.className = "reward-big";
  big.id = "reward-value";
  big.textContent = `reward ${Number(result.reward).toFixed(3)}`;
  panel.appendChild(big);

  const summary = document.createElement("table");
  summary.id = "reward-summary";
  row(summary, "termination", fmt(result.termination_reason));
  for (const key of Object.keys(detail).filter((k) => k.startsWith("r_")).sort()) {
    row(summary, key, fmt(detail[key]));
  }
  for (const key of ["num_attr_matches", "num_option_matches", "category_match", "title_score"]) {
    if (key in detail) row(summary, key, fmt(detail[key]));
  }
  row(summary, "price_verifiable", fmt(detail.price_verifiable), detail.price_verifiable ? "match" : "mismatch");
  row(summary, "target_asin_match", fmt(detail.target_asin_match), detail.target_asin_match ? "match" : "mismatch");
  const dialogue = result.dialogue || {};
  if (typeof dialogue.slots_total === "number") {  // dialogue mode: how much of the request the agent asked for
    row(summary, "questions asked", fmt(dialogue.questions_asked));
    row(summary, "slots revealed", `${dialogue.slots_revealed} / ${dialogue.slots_total}`);
  }
  panel.appendChild(summary);

  const heading = document.createElement("h3");
  heading.textContent = "Purchased vs gold";
  panel.appendChild(heading);
  const compare = document.createElement("table");
  compare.id = "purchase-vs-goal";
  const head = document.createElement("tr");
  for (const text of ["", "purchased", "gold"]) {
    const th = document.createElement("th");
    th.textContent = text;
    head.appendChild(th);
  }
  compare.appendChild(head);
  const pair = (label, mine, gold, cls) => {
    const tr = document.createElement("tr");
    const cells = [label, fmt(mine), fmt(gold)].map((text) => {
      const td = document.createElement("td");
      td.textContent = text;
      return td;
    });
    if (cls) cells[1].className = cls;
    tr.append(...cells);
    compare.appendChild(tr);
  };
  const same = Boolean(purchase.asin) && purchase.asin === goal.asin;
  pair("ASIN", purchase.asin, goal.asin, same ? "match" : "mismatch");
  pair("product", purchase.name, goal.name);
  pair("category", purchase.category, goal.category);
  pair("options", purchase.options, goal.goal_options);
  pair("attributes", purchase.attributes, goal.attributes);
  pair("price / ceiling", purchase.price, goal.price_upper);
  panel.appendChild(compare);
  const verdict = document.createElement("p");
  verdict.id = "asin-verdict";
  verdict.className = same ? "match" : "mismatch";
  verdict.textContent = purchase.asin ? (same ? "ASIN MATCH" : "ASIN DIFFERENT") : "no purchase";
  panel.appendChild(verdict);
  $("reward-card").hidden = false;
}

async function start(event) {
  event.preventDefault();
  showError("");
  try {
    if (lease) await release();
    const persona = document.querySelector("input[name=mode]:checked").value === "persona";
    const taskId = Number($("task-id").value);
    taskTouched = true;
    if (persona && tasksById.get(taskId)?.has_persona === false) {
      throw new PersonaMissing(taskId);
    }
    const shopper = shopperChosen();
    const body = {action: "reset", idx: taskId, if_persona: persona, interaction_mode: $("interaction-mode").value};
    if (shopper) body.shopper = shopper;
    let result;
    try {
      result = await call(body);
    } catch (err) {
      if (persona && /without a persona/.test(err.message)) throw new PersonaMissing(taskId);
      throw err;
    }
    $("task-id").value = String(taskId);  // the field keeps showing the task being played
    if (tasksById.has(taskId)) $("task-select").value = String(taskId);
    setLease({env_idx: result.env_idx, lease_id: result.lease_id});
    dialogueMode = typeof result.shopper === "string";
    $("task-instruction").textContent = dialogueMode
      ? "(dialogue mode: the instruction is withheld; ask the shopper)" : result.task_instruction;
    $("dialogue").replaceChildren();
    $("dialogue-card").hidden = !dialogueMode;
    if (dialogueMode) dialogueEntry(`顾客 · ${result.shopper}`, result.shopper_opening || "", "shopper opening");
    const persona_ = result.user_persona || {};
    $("persona").textContent = Object.keys(persona_).length ? pretty(persona_) : "(standard mode: no persona)";
    $("trace").replaceChildren();
    $("reward-card").hidden = true;
    renderFeedback(null);
    renderPage(result);
  } catch (err) {
    if (err instanceof PersonaMissing) $("persona").textContent = err.message;
    showError(err.message);
  }
  health();
}

class PersonaMissing extends Error {
  constructor(taskId) {
    super(`task ${taskId} has no persona (a standard-only task): choose Standard to play it`);
  }
}

async function act(action) {
  if (!lease) {
    showError("start a task first");
    return;
  }
  showError("");
  lastAction = action;
  try {
    const result = await call({action: "interact", ...lease, response: action});
    recordDialogue(result);
    renderFeedback(result.action_feedback);
    renderPage(result);
    addTrace(action, result);
    if (result.done) renderReward(result);
  } catch (err) {
    showError(err.message);
  }
}

async function release() {
  if (!lease) return;
  const held = lease;
  setLease(null);
  $("ask-input").disabled = true;
  $("ask-button").disabled = true;
  try {
    await call({action: "release_one", ...held});
  } catch (err) {
    showError(err.message);
  }
  health();
}

function releaseOnLeave() {
  if (!lease) return;
  const body = JSON.stringify({action: "release_one", ...lease});
  lease = null;
  try {
    const key = localStorage.getItem(API_KEY_STORE);
    const headers = {"Content-Type": "application/json", ...(key ? {Authorization: `Bearer ${key}`} : {})};
    fetch(API, {method: "POST", headers, body, keepalive: true});
  } catch (err) {
    // no beacon fallback: a beacon cannot send JSON, which the server requires; the idle timeout reclaims the lease
  }
}

$("reset-form").addEventListener("submit", start);
$("task-id").addEventListener("input", () => { taskTouched = true; });
$("release").addEventListener("click", release);
$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const query = $("search-input").value.trim();
  if (query) act(`search[${query}]`);
});
$("shopper").addEventListener("change", chooseShopper);
$("ask-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("ask-input").value.trim();
  if (question) act(`${ASK_PREFIX}${question}]`);
  $("ask-input").value = "";
});
$("manual-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("action-input").value;
  if (text.trim()) act(text);
  $("action-input").value = "";
});
$("action-input").addEventListener("keydown", (event) => {
  if (event.key === "ArrowUp" && lastAction) {
    event.preventDefault();
    $("action-input").value = lastAction;
  }
});
$("copy-observation").addEventListener("click", () => {
  navigator.clipboard?.writeText($("observation").textContent).catch(() => {});
});
window.addEventListener("pagehide", releaseOnLeave);
window.addEventListener("beforeunload", releaseOnLeave);

health();
loadTasks();
setInterval(health, 15000);
