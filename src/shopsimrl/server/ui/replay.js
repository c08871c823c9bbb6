// Experiment Replay: browse runs (docs/contract.md#run-directories) read-only and step through one episode's turns.
// Dialogue episodes: the turn list starts with the shopper's opening and shows each question and reply
// (the server's ``dialogue`` view of the trace). Every text goes in through textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {run: null, episode: null, step: 0};

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

async function getJSON(url) {
  const response = await apiFetch(url);
  const payload = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${payload.error || "unexpected response"}`);
  return payload;
}

function fmt(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(digits);
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function cell(tag, text, cls) {
  const el = document.createElement(tag);
  el.textContent = text;
  if (cls) el.className = cls;
  return el;
}

function keyValues(table, pairs) {
  table.replaceChildren();
  for (const [label, value] of pairs) {
    const tr = document.createElement("tr");
    tr.append(cell("th", label), cell("td", fmt(value)));
    table.appendChild(tr);
  }
}

async function loadRuns() {
  try {
    const {runs_root: root, runs} = await getJSON("/api/runs");
    $("runs-root").textContent = root;
    const list = $("runs");
    list.replaceChildren();
    $("no-runs").hidden = runs.length > 0;
    for (const run of runs) {
      const item = cell("li", `${run.name} · ${run.modified_at}`);
      item.dataset.run = run.name;
      item.addEventListener("click", () => openRun(run.name));
      list.appendChild(item);
    }
  } catch (err) {
    showError(err.message);
  }
}

async function openRun(name) {
  showError("");
  try {
    const run = await getJSON(`/api/runs/${encodeURIComponent(name)}`);
    state.run = name;
    for (const item of $("runs").children) item.classList.toggle("selected", item.dataset.run === name);
    $("run-title").textContent = `Run ${name}`;
    const summary = run.artifact_summary || {};
    const computed = run.computed_summary;
    const plan = (run.manifest || {}).plan || {};
    const shopper = (plan.environment || {}).shopper;
    const dialogue = summary.dialogue;  // summary.json's dialogue block (dialogue runs only)
    const dialogueRows = dialogue ? [
      ["shopper", shopper],
      ["questions / episode", dialogue.questions_per_episode],
      ["slot recall", dialogue.slot_recall],
      ["purchases after \"not complete\"", dialogue.purchases_after_incomplete],
      ["unanswered-question rate", dialogue.unanswered_question_rate],
    ] : (shopper ? [["shopper", shopper]] : []);
    keyValues($("run-summary"), [
      ["model", plan.model_id],
      ["experiment", plan.experiment],
      ["episodes recorded", computed.counts.recorded],
      ["requested", computed.counts.requested],
      ["completed", computed.counts.completed],
      ["failed", computed.counts.failed],
      ["reward mean (r_strict)", (summary.primary || {}).reward_mean ?? computed.primary.reward_mean],
      ["success rate", (summary.primary || {}).success_rate ?? computed.primary.success_rate],
      ["steps mean", computed.behavior.steps_mean],
      ["invalid action rate", computed.behavior.invalid_action_rate],
      ["termination reasons", computed.termination_reasons],
      ["trace lines (dup / invalid)", `${run.trace_index.records} (${run.trace_index.duplicate_records} / ${run.trace_index.invalid_lines})`],
      ...dialogueRows,
    ]);
    const table = $("episodes");
    table.replaceChildren();
    const head = document.createElement("tr");
    const asked = run.episodes.some((episode) => episode.questions !== null && episode.questions !== undefined);
    const labels = ["episode", "task", "status", "reward", "steps", ...(asked ? ["questions"] : []), "end"];
    for (const label of labels) head.appendChild(cell("th", label));
    table.appendChild(head);
    for (const episode of run.episodes) {
      const tr = document.createElement("tr");
      tr.className = "selectable";
      tr.dataset.episode = episode.episode_id;
      tr.append(
        cell("td", episode.episode_id), cell("td", fmt(episode.task_id)), cell("td", fmt(episode.status)),
        cell("td", fmt(episode.reward)), cell("td", fmt(episode.steps)),
        ...(asked ? [cell("td", fmt(episode.questions))] : []), cell("td", fmt(episode.termination_reason)),
      );
      tr.addEventListener("click", () => openEpisode(episode.episode_id));
      table.appendChild(tr);
    }
    $("run-card").hidden = false;
    $("episode-card").hidden = true;
    $("outcomeComparison").hidden = true;
  } catch (err) {
    showError(err.message);
  }
}

async function openEpisode(episodeId) {
  showError("");
  try {
    const url = `/api/runs/${encodeURIComponent(state.run)}/episodes/${encodeURIComponent(episodeId)}`;
    const data = await getJSON(url);
    state.episode = data;
    state.step = 0;
    for (const tr of $("episodes").querySelectorAll("tr.selectable")) {
      tr.classList.toggle("selected", tr.dataset.episode === episodeId);
    }
    $("episode-title").textContent = episodeId;
    const instruction = (data.episode.reset || {}).task_instruction || "";
    $("episode-instruction").textContent = data.dialogue
      ? `(dialogue with the ${data.dialogue.shopper} shopper: the instruction was withheld)` : instruction;
    $("episode-card").hidden = false;
    renderTurns();
    renderStep();
    renderOutcome(data.outcome_comparison);
  } catch (err) {
    showError(err.message);
  }
}

function toolCallText(step) {
  const model = step.model || {};
  const calls = model.tool_calls || [];
  if (calls.length) {
    return calls.map((call) => {
      // traces store {id, name, arguments, raw_arguments} (validation.ToolCall.record); wire calls nest a function
      const fn = call.function || {};
      const name = call.name ?? fn.name ?? "?";
      let args = call.raw_arguments ?? fn.arguments;
      if (args === undefined || args === null) args = call.arguments != null ? JSON.stringify(call.arguments) : "";
      return `${name}(${typeof args === "string" ? args : JSON.stringify(args)})`;
    }).join("\n") + (step.action ? `\n→ ${step.action}` : "");
  }
  if (step.action) return step.action;
  if (step.protocol_error) return `protocol error: ${fmt(step.protocol_error)}\n${fmt(step.protocol_feedback)}`;
  if (step.policy_failure) return `policy failure: ${fmt(step.policy_failure)}`;
  return model.content || "—";
}

function dialogueTurns() {
  const byStep = new Map();
  for (const turn of (state.episode.dialogue || {}).turns || []) byStep.set(turn.step_index, turn);
  return byStep;
}

function said(item, speaker, text, cls) {
  const line = document.createElement("div");
  line.className = `said ${cls}`;
  line.append(cell("span", speaker, "speaker"), cell("span", text ?? "—"));
  item.appendChild(line);
}

// Every step in order, one line each; ask_user steps show the question and the shopper's reply.
function renderTurns() {
  const list = $("turn-list");
  list.replaceChildren();
  const dialogue = state.episode.dialogue;
  if (dialogue) {
    const opening = document.createElement("li");
    opening.className = "opening";
    said(opening, `顾客 · ${dialogue.shopper}`, dialogue.opening, "shopper");
    list.appendChild(opening);
  }
  const turns = dialogueTurns();
  (state.episode.episode.steps || []).forEach((step, position) => {
    const item = document.createElement("li");
    item.dataset.step = String(position);
    const turn = turns.get(step.step_index);
    const feedback = (step.environment || {}).action_feedback;
    if (turn) {
      item.classList.add("ask");
      said(item, `${step.step_index} · 问`, turn.question, "agent");
      if (turn.valid) said(item, "答", turn.reply, "shopper");
      else said(item, "✗", (feedback || {}).reason || "rejected", "invalid");
    } else {
      const outcome = feedback ? feedback.reason : (step.protocol_error ? "protocol error" : "");
      const call = step.action || toolCallText(step).split("\n")[0];  // the canonical action when there is one
      item.appendChild(cell("span", `${step.step_index} · ${call}${outcome ? ` → ${outcome}` : ""}`));
    }
    if (feedback && feedback.valid === false) item.classList.add("invalid");
    item.addEventListener("click", () => { state.step = position; renderStep(); });
    list.appendChild(item);
  });
}

function renderStep() {
  const steps = state.episode.episode.steps || [];
  const total = steps.length;
  $("prev-step").disabled = state.step <= 0;
  $("next-step").disabled = state.step >= total - 1;
  if (!total) {
    $("step-counter").textContent = "no steps";
    return;
  }
  const step = steps[state.step];
  $("step-counter").textContent = `step ${state.step + 1} / ${total}`;
  for (const item of $("turn-list").querySelectorAll("li[data-step]")) {
    item.classList.toggle("selected", item.dataset.step === String(state.step));
  }
  const turn = dialogueTurns().get(step.step_index);
  $("step-dialogue").hidden = !turn;
  $("step-question").textContent = turn ? turn.question : "";
  $("step-reply").textContent = turn ? (turn.valid ? turn.reply ?? "—" : "(rejected: no reply)") : "";
  const model = step.model || {};
  $("step-reasoning").textContent = model.reasoning || model.reasoning_content || "(no reasoning recorded)";
  $("step-tool-call").textContent = toolCallText(step);
  const env = step.environment || {};
  const feedback = env.action_feedback;
  const box = $("step-feedback");
  if (feedback) {
    box.textContent = `${feedback.valid ? "✓" : "✗"} ${feedback.reason} · ${feedback.message}`;
    box.className = `feedback ${feedback.valid ? "valid" : "invalid"}`;
  } else {
    box.textContent = step.protocol_error ? `protocol error: ${fmt(step.protocol_feedback || step.protocol_error)}` : "—";
    box.className = "feedback invalid";
  }
  $("step-observation").textContent = env.observation || step.observation || "—";
}

function card(title, lines) {
  const box = document.createElement("div");
  box.appendChild(cell("h3", title));
  const table = document.createElement("table");
  keyValues(table, lines);
  box.appendChild(table);
  return box;
}

function renderOutcome(outcome) {
  const body = $("outcome-body");
  body.replaceChildren();
  const grid = document.createElement("div");
  grid.className = "compare";
  const target = outcome.target || {};
  const bought = outcome.purchase || {};
  grid.appendChild(card("目标商品", [
    ["ASIN", target.asin], ["name", target.name], ["category", target.category],
    ["attributes", target.attributes], ["price ceiling", target.price_upper],
  ]));
  grid.appendChild(card("实际购买", [
    ["ASIN", bought.asin], ["name", bought.name], ["category", bought.category],
    ["attributes", bought.attributes], ["price", bought.price],
  ]));
  body.appendChild(grid);

  const verdict = cell("p", outcome.purchase ? (outcome.asin_match ? "ASIN MATCH" : "ASIN DIFFERENT") : "no purchase",
    outcome.asin_match ? "match" : "mismatch");
  verdict.id = "outcome-verdict";
  body.appendChild(verdict);

  const options = document.createElement("table");
  options.id = "option-comparison";
  const head = document.createElement("tr");
  head.append(cell("th", "axis"), cell("th", "value"), cell("th", ""));
  options.appendChild(head);
  const purchased = (outcome.options || {}).purchased || {};
  const matched = new Set((outcome.options || {}).matched || []);
  for (const [axis, value] of Object.entries(purchased)) {
    const tr = document.createElement("tr");
    tr.append(cell("td", `Purchased option · ${axis}`), cell("td", value),
      cell("td", matched.has(value) ? "matches gold" : "", matched.has(value) ? "match" : ""));
    options.appendChild(tr);
  }
  for (const value of (outcome.options || {}).gold || []) {
    const tr = document.createElement("tr");
    const hit = matched.has(value);
    tr.append(cell("td", "Gold truth option"), cell("td", value), cell("td", hit ? "bought" : "missing", hit ? "match" : "mismatch"));
    options.appendChild(tr);
  }
  body.appendChild(options);

  const attrs = outcome.attributes;
  if (attrs) {
    body.appendChild(card("attributes", [["matched", attrs.matched], ["missing", attrs.missing], ["extra", attrs.extra]]));
  }
  const detail = outcome.reward_detail || {};
  const rewards = Object.keys(detail).filter((k) => k.startsWith("r_")).sort().map((k) => [k, detail[k]]);
  rewards.push(["price_verifiable", detail.price_verifiable], ["target_asin_match", detail.target_asin_match]);
  body.appendChild(card("reward", rewards));
  $("outcomeComparison").hidden = false;
}

$("prev-step").addEventListener("click", () => {
  if (state.episode && state.step > 0) { state.step -= 1; renderStep(); }
});
$("next-step").addEventListener("click", () => {
  const steps = state.episode ? state.episode.episode.steps || [] : [];
  if (state.step < steps.length - 1) { state.step += 1; renderStep(); }
});

loadRuns();
