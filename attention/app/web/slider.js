// The temperature's slider (attention/app/slider.py), given after steps.js and preview.js in the same module: a native
// range input, logarithmic from the smallest temperature to the largest. While it is dragged the browser computes the
// case at each temperature and redraws the charts in view (preview.js); on release the value goes to Python (a
// one-run trigger), whose run draws everything as usual. The arrow keys step it, each step a release.

const STEPS = 400; // the slider's positions: 10^(4/400) ≈ 2.3 % apart from 0.01 to 100

export default function ({ data, parentElement, setTriggerValue }) {
  let slider = parentElement.__temperatureSlider;
  if (!slider) slider = parentElement.__temperatureSlider = new Slider(parentElement);
  slider.send = setTriggerValue;
  slider.update(typeof data === "string" ? JSON.parse(data) : data);
}

class Slider {
  constructor(root) {
    this.box = Object.assign(document.createElement("div"), { className: "slider" });
    this.input = Object.assign(document.createElement("input"), { type: "range", min: 0, max: STEPS, step: 1 });
    this.shown = document.createElement("output");
    this.box.append(this.input, this.shown);
    root.appendChild(this.box);
    this.dragged = false; // moved since the last release: its value is not yet Python's
    this.preview = new Preview(() => this.data.preview && { ...this.data.preview, options: this.options() });
    this.input.addEventListener("input", () => this.moved());
    this.input.addEventListener("change", () => this.released());
  }

  update(data) {
    this.data = data;
    this.input.setAttribute("aria-label", data.label);
    this.input.title = data.label;
    if (!this.dragged) this.show(data.value); // a run that ends mid-drag leaves the slider where the hand is
  }

  show(value) {
    const [low, high] = [Math.log10(this.data.min), Math.log10(this.data.max)];
    this.input.value = String(Math.round(((Math.log10(value) - low) / (high - low)) * STEPS));
    this.value = value;
    this.shown.textContent = String(value);
    this.input.setAttribute("aria-valuetext", String(value));
  }

  // The temperature at the slider's position, to two significant digits (0.37, 1.2, 15)
  valueAt(position) {
    const [low, high] = [Math.log10(this.data.min), Math.log10(this.data.max)];
    const value = Number((10 ** (low + ((high - low) * position) / STEPS)).toPrecision(2));
    return Math.min(this.data.max, Math.max(this.data.min, value));
  }

  options() {
    return { ...this.data.preview.options, temperature: this.value };
  }

  moved() {
    this.dragged = true;
    this.value = this.valueAt(Number(this.input.value));
    this.shown.textContent = String(this.value);
    this.input.setAttribute("aria-valuetext", String(this.value));
    if (this.data.preview && Preview.ready()) this.preview.ask();
  }

  released() {
    this.dragged = false;
    if (this.data.preview && Preview.ready()) this.preview.draw(true); // whole, with its numbers, while Python runs
    this.send("value", this.value);
  }
}
