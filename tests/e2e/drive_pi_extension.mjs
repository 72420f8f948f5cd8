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
// may name the live session: {"session": {"file": F, "leaf": ID}, "steps": [...]}.
import childProcess from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire, syncBuiltinESMExports } from "node:module";

const [jitiDir, extensionPath, stepsPath, cwd] = process.argv.slice(2);
const require = createRequire(`${jitiDir}/`);
const { createJiti } = require("jiti");

// Record and await every process the extension starts.
const spawns = [];
const running = new Set();
const realSpawn = childProcess.spawn;
childProcess.spawn = (command, args, options) => {
	const child = realSpawn(command, args, options);
	spawns.push([command, ...args]);
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

const activate = await createJiti(import.meta.url).import(extensionPath, { default: true });
const commands = new Map();
const handlers = new Map();
const models = [];
const pi = {
	registerCommand(name, spec) {
		if (commands.has(name)) throw new Error(`duplicate command ${name}`);
		commands.set(name, spec);
	},
	on(event, handler) {
		handlers.set(event, [...(handlers.get(event) ?? []), handler]);
	},
	async setModel(model) {
		models.push(`${model.provider}/${model.id}`);
		return true;
	},
};
activate(pi);

const ui = [];
let hasUI = true;
const steps = JSON.parse(readFileSync(stepsPath, "utf8"));
const session = steps.session ?? {};
let current = { provider: "fake", id: "fake-1" };
const ctx = () => ({
	cwd,
	hasUI,
	ui: {
		notify: (message, level) => ui.push({ method: "notify", message, level }),
		setStatus: (key, text) => ui.push({ method: "setStatus", key, text }),
	},
	sessionManager: {
		getSessionFile: () => session.file,
		getLeafId: () => session.leaf,
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
	const before = ui.length;
	if (step.event) {
		for (const handler of handlers.get(step.event) ?? []) {
			results.push(await handler(step.data ?? {}, ctx()));
		}
	} else {
		await commands.get(step.command).handler(step.args ?? "", ctx());
	}
	await settle();
	if (models.length > 0) {
		const [provider, ...rest] = models[models.length - 1].split("/");
		current = { provider, id: rest.join("/") };
	}
	step.shown = ui.slice(before);
}
process.stdout.write(
	`${JSON.stringify({
		commands: [...commands.keys()],
		events: [...handlers.keys()],
		spawns,
		steps: steps.steps,
		results: results.filter((r) => r !== undefined),
		models,
	})}\n`,
);
