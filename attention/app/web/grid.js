// The matrix editor of attention/app/grid.py (a Streamlit components v2 module, given inline): a table of native
// text inputs, one per cell, whose edits go to Python as typed, at once, as the editor's state. A drag on a small
// case is computed here (attend: attention/forward/web/steps.js, given before this file in the same module) and
// the charts beside the editor redrawn each frame; Python hears the value the drag ends on.

const NUMBER = /^[ \t]*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[ \t]*$/; // numbers as attention/app/typed.py reads them
const DRAG_START_PX = 4; // a press that moves less than this is a click into the cell; more is a drag
const PX_PER_STEP = 6; // a drag's pixels per step
const RUN_ENDED = "attention:run-ended"; // said by pace.js, the last element of every run
const UNHEARD_MS = 3000; // a dragged value goes anyway when no run's end is heard (a page run outside the frame)

export default function ({ data, parentElement, setStateValue }) {
  let editor = parentElement.__matrixEditor;
  if (!editor) {
    editor = parentElement.__matrixEditor = new Editor(parentElement);
  } else if (editor.gone) {
    editor.revive(); // mounted again in the same element: its box (and the cell in focus) kept, never a second one
  }
  editor.setState = setStateValue;
  editor.update(typeof data === "string" ? JSON.parse(data) : data); // grid.py sends it as JSON text
  return () => editor.destroy();
}

function fill(template, fields) {
  return template.replace(/\{(\w+)\}/g, (all, name) => (name in fields ? String(fields[name]) : all));
}

function make(tag, properties = {}) {
  return Object.assign(document.createElement(tag), properties);
}

class Editor {
  constructor(root) {
    this.root = root;
    this.box = make("div", { className: "editor" });
    root.appendChild(this.box);
    this.edits = { cells: {}, labels: {} }; // every edit since this editor was drawn, as typed: Python applies all
    this.inputs = new Map(); // "row,column" (from 0; column -1: the token label) -> its input
    this.layout = "";
    this.waiting = false; // a value went to Python and the run it started has not ended
    this.queued = false; // a dragged value waits for that run's end, so that every step is drawn whole
    this.drag = null;
    this.preview = new Preview(() => this.edited()); // a drag's steps drawn by the browser (preview.js)
    this.note = ""; // the editor's own message (a block that does not fit), until the next edit
    this.ended = () => this.runEnded();
    window.addEventListener(RUN_ENDED, this.ended);
    const on = (type, handler) => this.box.addEventListener(type, handler.bind(this));
    on("keydown", this.keydown);
    on("focusin", (e) => e.target.select?.());
    on("focusout", (e) => e.target instanceof HTMLInputElement && this.commit(e.target));
    on("input", (e) => e.target.classList.toggle("typing", e.target.value !== e.target.dataset.committed));
    on("paste", this.paste);
    on("dblclick", (e) => e.target instanceof HTMLInputElement && this.caret(e.target));
    on("pointerdown", this.pointerdown);
    on("pointermove", this.pointermove);
    on("pointerup", this.pointerup);
    on("pointercancel", this.pointerup);
  }

  destroy() {
    this.gone = true;
    window.removeEventListener(RUN_ENDED, this.ended);
    clearTimeout(this.timer);
    cancelAnimationFrame(this.preview.frame);
  }

  revive() {
    this.gone = false;
    window.addEventListener(RUN_ENDED, this.ended);
  }

  update(data) {
    this.data = data;
    const d = data;
    const layout = JSON.stringify([d.name, d.shape, d.top, d.left, d.cells.length, d.cells[0]?.length, !!d.labels]);
    if (layout !== this.layout) {
      this.build();
      this.layout = layout;
    }
    this.refresh();
  }

  build() {
    const d = this.data;
    const focused = this.active()?.dataset;
    const table = make("table");
    const head = make("tr");
    head.append(make("td"));
    if (d.labels) head.append(make("th", { scope: "col", className: "token" }));
    d.column_names.forEach((name) => head.append(make("th", { scope: "col", textContent: name })));
    table.append(make("thead"));
    table.tHead.append(head);
    const body = make("tbody");
    this.inputs.clear();
    d.cells.forEach((cells, i) => {
      const r = d.top + i;
      const row = make("tr");
      row.append(make("th", { scope: "row", textContent: d.row_names[i], title: d.row_names[i] }));
      const columns = (d.labels ? [-1] : []).concat(cells.map((_, j) => d.left + j));
      for (const c of columns) {
        const input = make("input", { type: "text", autocomplete: "off", spellcheck: false });
        input.inputMode = c < 0 ? "text" : "decimal"; // a phone's keyboard with digits, point and minus
        input.className = c < 0 ? "label" : "number";
        Object.assign(input.dataset, { r, c, committed: "" });
        this.inputs.set(`${r},${c}`, input);
        const cell = make("td");
        cell.append(input);
        row.append(cell);
      }
      body.append(row);
    });
    table.append(body);
    this.title = make("h3", { className: "title" });
    this.message = make("p", { className: "message", id: "message", role: "alert" });
    this.hint = make("p", { className: "hint" });
    const scroll = make("div", { className: "scroll" });
    scroll.append(table);
    this.table = table;
    this.box.replaceChildren(this.title, scroll, this.message, this.hint);
    const again = focused && this.inputs.get(`${focused.r},${focused.c}`);
    if (again) again.focus();
  }

  active() {
    const active = this.root.activeElement ?? document.activeElement;
    return active instanceof HTMLInputElement && this.box.contains(active) ? active : null;
  }

  // What each cell shows: its own edit (which Python has, or soon will), else Python's text; a cell being typed in
  // keeps what is typed. Outlined: what Python says is wrong, or, for an edit Python has not seen yet, what is no
  // number here.
  refresh() {
    const d = this.data;
    const t = d.text;
    const typing = this.active();
    const invalid = new Set(d.invalid.map(([r, c]) => `${r},${c}`));
    const errorAt = d.error_at && `${d.error_at[0]},${d.error_at[1]}`;
    for (const [key, input] of this.inputs) {
      const r = Number(input.dataset.r);
      const c = Number(input.dataset.c);
      const server = c < 0 ? d.labels[r - d.top] : d.cells[r - d.top][c - d.left];
      const mine = c < 0 ? this.edits.labels[r] : this.edits.cells[key];
      const text = mine ?? server;
      if (!(input === typing && input.value !== input.dataset.committed) && input.value !== text) input.value = text;
      input.dataset.committed = text;
      input.classList.toggle("typing", input.value !== text);
      const seen = mine === undefined || mine === server;
      const bad = seen ? invalid.has(key) || key === errorAt : c >= 0 && !this.isNumber(mine);
      input.setAttribute("aria-invalid", String(bad));
      input.toggleAttribute("aria-describedby", false);
      if (bad && seen && key === errorAt && d.message) input.setAttribute("aria-describedby", "message");
      const token = d.labels ? (this.edits.labels[r] ?? d.labels[r - d.top]) : d.row_tokens?.[r - d.top];
      const name =
        c < 0
          ? fill(t.label, { row: r + 1 })
          : fill(t.cell, { row: r + 1, column: c + 1, token, key: d.column_tokens?.[c - d.left] });
      if (input.getAttribute("aria-label") !== name) input.setAttribute("aria-label", name);
    }
    this.table.setAttribute("aria-label", t.group);
    const texts = [[this.table.querySelector("th.token"), t.token], [this.title, d.title], [this.hint, t.hint]];
    texts.push([this.message, this.note || d.message]); // an alert: a screen reader says it again if it is set again
    for (const [element, text] of texts) if (element && element.textContent !== text) element.textContent = text;
  }

  isNumber(text) {
    return NUMBER.test(text) && Math.abs(Number(text.trim())) <= this.data.limit;
  }

  record(input, text) {
    const r = Number(input.dataset.r);
    const c = Number(input.dataset.c);
    if (c < 0) this.edits.labels[r] = text;
    else this.edits.cells[`${r},${c}`] = text;
    input.dataset.committed = text;
    input.classList?.remove("typing");
    this.note = "";
  }

  commit(input) {
    if (input.value === input.dataset.committed) return;
    this.record(input, input.value);
    this.send();
  }

  // An edit goes at once (no debounce): every edit so far, so that none is lost however fast they come.
  send() {
    this.setState("edits", { cells: { ...this.edits.cells }, labels: { ...this.edits.labels } });
    this.waiting = true;
    this.queued = false;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.runEnded(), UNHEARD_MS);
    this.refresh();
  }

  // A dragged value goes when the run the last one started has ended: a new value would stop that run halfway
  // (Streamlit reruns at once), and none would ever be drawn while the drag goes on.
  paced() {
    if (this.waiting) this.queued = true;
    else this.send();
  }

  runEnded() {
    this.waiting = false;
    clearTimeout(this.timer);
    if (this.queued) this.send();
  }

  move(input, down, right) {
    const next = this.inputs.get(`${Number(input.dataset.r) + down},${Number(input.dataset.c) + right}`);
    (next ?? input).focus();
    (next ?? input).select();
  }

  keydown(e) {
    const input = e.target;
    if (!(input instanceof HTMLInputElement)) return;
    const isNumber = Number(input.dataset.c) >= 0;
    if (e.key === "Enter") {
      this.commit(input);
      this.move(input, e.shiftKey ? -1 : 1, 0);
    } else if (e.key === "F2") {
      this.caret(input); // to change the number rather than replace it, as in a spreadsheet
    } else if (e.key === "Escape") {
      if (input.value === input.dataset.committed) return;
      input.value = input.dataset.committed; // back to the cell's own value: nothing was sent
      input.select();
      e.stopPropagation();
    } else if ((e.key === "ArrowUp" || e.key === "ArrowDown") && e.altKey) {
      if (isNumber) this.nudge(input, (e.key === "ArrowUp" ? 1 : -1) * (e.shiftKey ? 10 : 1));
    } else if (e.key === "ArrowUp" || e.key === "ArrowDown") {
      this.commit(input);
      this.move(input, e.key === "ArrowUp" ? -1 : 1, 0);
    } else if ((e.key === "ArrowLeft" || e.key === "ArrowRight") && !e.altKey && !e.shiftKey) {
      const [start, end, length] = [input.selectionStart, input.selectionEnd, input.value.length];
      const edge = e.key === "ArrowLeft" ? end === 0 : start === length; // the caret at the text's end
      if (!(edge || (start === 0 && end === length))) return; // within the text: the caret moves
      this.commit(input);
      this.move(input, 0, e.key === "ArrowLeft" ? -1 : 1);
    } else {
      return;
    }
    e.preventDefault();
  }

  // A step as fine as the number's last typed digit (at least tenths): 2 moves by 0.1, 0.25 by 0.01.
  stepOf(text) {
    if (this.data.kind === "zero_one") return { size: 1, digits: 0 };
    const m = text.trim().match(/^[+-]?\d*(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/);
    const digits = Math.min(6, Math.max(1, (m?.[1]?.length ?? 0) - Number(m?.[2] ?? 0)));
    return { size: 10 ** -digits, digits };
  }

  stepped(start, steps, step) {
    let value = start + steps * step.size;
    if (this.data.kind !== "real") value = Math.max(0, value); // weights and a mask are never negative
    if (this.data.kind === "zero_one") value = Math.min(1, value);
    return String(Number(value.toFixed(step.digits)));
  }

  nudge(input, steps) {
    const text = input.value;
    if (!this.isNumber(text)) return;
    const next = this.stepped(Number(text.trim()), steps, this.stepOf(text));
    input.value = next;
    this.record(input, next);
    this.paced();
    input.select();
  }

  pointerdown(e) {
    const input = e.target;
    if (!(input instanceof HTMLInputElement) || Number(input.dataset.c) < 0 || e.button !== 0) return;
    if (input.value !== input.dataset.committed) return; // being typed in: the caret and selection as usual
    e.preventDefault(); // a click focuses the cell on release, a drag sideways changes it (never drags its text)
    const text = input.value;
    const start = this.isNumber(text) ? Number(text.trim()) : null;
    this.drag = { input, x: e.clientX, id: e.pointerId, start, step: this.stepOf(text), steps: 0, moved: false };
    input.setPointerCapture(e.pointerId);
  }

  pointermove(e) {
    const drag = this.drag;
    if (!drag || e.pointerId !== drag.id) return;
    const dx = e.clientX - drag.x;
    if (!drag.moved && Math.abs(dx) < DRAG_START_PX) return;
    // focused (the last drag's release selects it), the cell's new value each frame would halve the redraws a second
    if (!drag.moved) drag.input.blur();
    drag.moved = true;
    this.box.classList.add("dragging");
    const steps = Math.round(dx / PX_PER_STEP) * (e.shiftKey ? 10 : 1);
    if (drag.start === null || steps === drag.steps) return;
    drag.steps = steps;
    const text = this.stepped(drag.start, steps, drag.step);
    if (text === drag.input.value) return;
    drag.input.value = text;
    this.record(drag.input, text);
    if (this.previewed()) drag.previewed = true;
    else this.paced();
  }

  pointerup(e) {
    const drag = this.drag;
    if (!drag || e.pointerId !== drag.id) return;
    this.drag = null;
    this.box.classList.remove("dragging");
    if (this.queued || drag.previewed) this.send(); // the value the drag ended on goes now
    if (drag.previewed) this.preview.draw(true); // and is drawn, whole, while Python runs
    drag.input.focus();
    drag.input.select(); // a click selects the number, which typing replaces (a double click or F2: the caret)
  }

  // A drag's step drawn by the browser: true when there is a chart to redraw and Plotly can (preview.js); false,
  // and the step goes to Python as before, otherwise.
  previewed() {
    if (!this.data.preview || !Preview.ready()) return false;
    this.preview.ask();
    return true;
  }

  // The case with this editor's edits (null while a cell holds no number: Python says why, on release)
  edited() {
    const p = this.data.preview;
    const kase = structuredClone(p.case);
    const inOptions = ["mask", "weights_override", "relative_bias", "w_latent"].includes(p.grid);
    const grid = inOptions ? kase.options[p.grid] : kase[p.grid];
    for (const [key, text] of Object.entries(this.edits.cells)) {
      if (!this.isNumber(text)) return null;
      const [r, c] = key.split(",");
      grid[r][c] = Number(text.trim());
    }
    if (p.grid === "weights_override") delete kase.options.rounded_within; // edited: no longer the article's
    return kase;
  }

  caret(input) {
    input.setSelectionRange(input.value.length, input.value.length);
  }

  // A block copied from a spreadsheet (tabs between cells, newlines between rows) fills from this cell down and
  // right, all of it or, when it does not fit, none of it, and says so.
  paste(e) {
    const input = e.target;
    const text = (e.clipboardData?.getData("text/plain") ?? "").replace(/\r\n?/g, "\n").replace(/\n$/, "");
    if (!(input instanceof HTMLInputElement) || !/[\t\n]/.test(text)) return; // one value: pasted as usual
    e.preventDefault();
    const block = text.split("\n").map((line) => line.split("\t"));
    const [r, c] = [Number(input.dataset.r), Number(input.dataset.c)];
    const [rows, columns] = this.data.shape;
    const height = block.length;
    const width = Math.max(...block.map((line) => line.length));
    if (r + height > rows || c + width > columns) {
      const fits = { rows: Math.max(0, Math.min(height, rows - r)), columns: Math.max(0, Math.min(width, columns - c)) };
      const column = c < 0 ? this.data.text.token : c + 1;
      this.note = fill(this.data.text.paste, { row: r + 1, column, height, width, ...fits });
      this.refresh();
      return;
    }
    block.forEach((line, i) =>
      line.forEach((value, j) => {
        const shown = this.inputs.get(`${r + i},${c + j}`); // a cell outside a window is edited all the same
        if (shown) shown.value = value;
        this.record(shown ?? { dataset: { r: r + i, c: c + j } }, value);
      }),
    );
    this.send();
  }
}
