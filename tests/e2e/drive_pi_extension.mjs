// Test helper for tests/e2e/test_pi_extension_driven.py (not shipped).
//
// Loads a generated Pi extension with jiti (the TypeScript loader pi uses)
// against a stand-in `pi` and `ctx`, then plays a list of steps: events
// (session_start, agent_end, resources_discover) and slash commands. Every
// process the extension starts is recorded (its argv) and awaited before the
// next step, so what the extension did is known exactly, without timing. Prints
// one JSON line: the registered commands, the processes, the UI calls and the
// models the extension switched to.
//
//   node drive_pi_extension.mjs JITI_DIR EXTENSION.ts STEPS.json CWD
//
// A step is {"event": NAME, "data": {...}} or {"command": NAME, "args": TEXT};
// {"ui": false} runs the steps after it without a UI (print mode), and
// {"exec": [ARGV]} runs a process of the test's own between steps. The file
// may name the live session: {"session": {"file": F, "leaf": ID}, "steps": [...]}
// (its branch then holds one answer, plus the model changes and custom entries
// the extension makes), and what Pi's editor returns, in order:
// {"editor": [TEXT or null, ...]} (null: the user closed it); with
// "answered": false in "session" the branch has no answer yet. More steps:
// {"setModel": "PROVIDER/ID"} is the user's own /model, {"reload": true} loads
// the extension again as /reload does (a fresh module, the same process),
// {"complete": COMMAND, "prefix": TEXT} asks for argument completions, and
// {"run": [ARGS], "limit": S} calls the extension's runMachine directly. The
// extension's import of "@mariozechner/pi-coding-agent" resolves to the Pi
// install, as in pi. Every spawn's options are kept too (stdin, detached, env).
import childProcess from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";

const [jitiDir, extensionPath, stepsPath, cwd] = process.argv.slice(2);
const require = createRequire(`${jitiDir}/`);
const { createJiti } = require("jiti");

// Record and await every process the extension starts.
const spawns = [];
const spawnOptions = [];
const running = new Set();
const realSpawn = childProcess.spawn;
childProcess.spawn = (command, args, options) => {
	const child = realSpawn(command, args, options);
	spawns.push([command, ...args]);
	const env = options?.env ?? {};
	spawnOptions.push({
		stdin: options?.stdio?.[0],
		detached: options?.detached === true,
		env: Object.fromEntries(
			["PAGER", "GIT_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR", "GIT_TERMINAL_PROMPT"].map((k) => [k, env[k]]),
		),
	});
	const done = new Promise((resolve) => child.on("close", resolve));
	running.add(done);
	done.then(() => running.delete(done));
	return child;
};
syncBuiltinESMExports();

async function settle() {
	// until no process runs and the promise chains after the last one ran
	for (let quiet = 0; quiet < 5; ) {
		if (running.size > 0) {
			quiet = 0;
			await Promise.all([...running]);
		} else quiet += 1;
		await new Promise((resolve) => setImmediate(resolve));
	}
}

const piIndex = `${jitiDir}/@mariozechner/pi-coding-agent/dist/index.js`;
const alias = { "@mariozechner/pi-coding-agent": piIndex };
let commands = new Map();
let handlers = new Map();
let module = null;
const models = [];
const steps = JSON.parse(readFileSync(stepsPath, "utf8"));
const session = steps.session ?? {};
const editorAnswers = [...(steps.editor ?? [])];
// the live branch: one finished turn when there is a session file
const branch = session.file && session.answered !== false ? [{ type: "message", message: { role: "assistant" } }] : [];
let current = { provider: "fake", id: "fake-1" };
const setModel = (model) => {
	models.push(`${model.provider}/${model.id}`);
	branch.push({ type: "model_change", provider: model.provider, modelId: model.id });
	current = { provider: model.provider, id: model.id };
};
const pi = {
	registerCommand(name, spec) {
		if (commands.has(name)) throw new Error(`duplicate command ${name}`);
		commands.set(name, spec);
	},
	on(event, handler) {
		handlers.set(event, [...(handlers.get(event) ?? []), handler]);
	},
	async setModel(model) {
		setModel(model);
		return true;
	},
	appendEntry(customType, data) {
		branch.push({ type: "custom", customType, data });
	},
};

/** Load the extension as pi does: a fresh module each time (/reload too). */
async function load() {
	commands = new Map();
	handlers = new Map();
	const jiti = createJiti(import.meta.url, { alias, moduleCache: false });
	module = await jiti.import(extensionPath);
	module.default(pi);
}
await load();

const ui = [];
let hasUI = true;
const ctx = () => ({
	cwd,
	hasUI,
	ui: {
		notify: (message, level) => ui.push({ method: "notify", message, level }),
		setStatus: (key, text) => ui.push({ method: "setStatus", key, text }),
		editor: async (title, prefill) => {
			ui.push({ method: "editor", title, prefill });
			return editorAnswers.shift() ?? undefined;
		},
	},
	sessionManager: {
		getSessionFile: () => session.file,
		getLeafId: () => session.leaf,
		getBranch: () => branch,
	},
	waitForIdle: async () => {},
	get model() {
		return current;
	},
	modelRegistry: {
		refresh() {},
		find: (provider, id) => ({ provider, id }),
	},
});

const results = [];
for (const step of steps.steps) {
	if ("ui" in step) {
		hasUI = step.ui;
		continue;
	}
	if (step.exec) {
		// a process of the test's own, not the extension's (not recorded)
		childProcess.execFileSync(step.exec[0], step.exec.slice(1), { cwd, stdio: ["ignore", "ignore", "inherit"] });
		continue;
	}
	if (step.setModel) {
		const [provider, ...rest] = step.setModel.split("/");
		setModel({ provider, id: rest.join("/") });
		continue;
	}
	if (step.reload) {
		await load();
		continue;
	}
	if (step.complete) {
		results.push(commands.get(step.complete).getArgumentCompletions(step.prefix));
		continue;
	}
	if (step.run) {
		const started = Date.now();
		const result = await module.runMachine(step.run, cwd, { limitS: step.limit });
		results.push({ ...result, seconds: (Date.now() - started) / 1000 });
		continue;
	}
	const before = ui.length;
	if (step.event) {
		for (const handler of handlers.get(step.event) ?? []) {
			results.push(await handler(step.data ?? {}, ctx()));
		}
	} else {
		await commands.get(step.command).handler(step.args ?? "", ctx());
	}
	await settle();
	step.shown = ui.slice(before);
}
process.stdout.write(
	`${JSON.stringify({
		commands: [...commands.keys()],
		events: [...handlers.keys()],
		spawns,
		spawnOptions,
		steps: steps.steps,
		results: results.filter((r) => r !== undefined),
		models,
	})}\n`,
);
